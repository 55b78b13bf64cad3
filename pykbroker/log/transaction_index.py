"""TransactionIndex: the aborted transactions of one segment (``<base offset>.txnindex``).

Mirrors ``org.apache.kafka.storage.internals.log.TransactionIndex`` / ``AbortedTxn``. Each entry is 34
bytes, big-endian: ``version int16 (0), producer_id int64, first_offset int64, last_offset int64,
last_stable_offset int64`` -- an aborted transaction of the producer spanning ``[first_offset,
last_offset]`` (``last_offset`` is its ABORT marker) and the LSO once it completed. A read_committed
fetch returns the entries overlapping the fetched range so the consumer drops those batches.

The file is created on the first entry and written with ``os.write`` at once (it survives a process
crash like the log does); ``flush`` fsyncs it. Entries are appended in ``last_offset`` order.

Threading: guarded by the owning log's lock (appends, truncation); reads copy the entry list.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from pykbroker.utils.files import fsync_file

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
VERSION = 0


class CorruptTransactionIndexError(ValueError):
    pass


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        return _ENTRY.pack(VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)

    @classmethod
    def from_bytes(cls, buf, pos: int = 0) -> AbortedTxn:
        version, pid, first, last, lso = _ENTRY.unpack_from(buf, pos)
        if version != VERSION:
            raise CorruptTransactionIndexError(f"Unexpected aborted transaction version {version}")
        return cls(pid, first, last, lso)

    def __str__(self) -> str:
        return (
            f"version: {VERSION} producerId: {self.producer_id} firstOffset: {self.first_offset} "
            f"lastOffset: {self.last_offset} lastStableOffset: {self.last_stable_offset}"
        )


class TransactionIndex:
    def __init__(self, start_offset: int, path: str):
        self.start_offset = start_offset
        self.path = path
        self._entries: list[AbortedTxn] | None = None  # loaded on first use

    def _load(self) -> list[AbortedTxn]:
        if self._entries is None:
            entries = []
            try:
                with open(self.path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                data = b""
            usable = len(data) - len(data) % ENTRY_SIZE  # a torn last entry (crash mid-write) is dropped
            for pos in range(0, usable, ENTRY_SIZE):
                entries.append(AbortedTxn.from_bytes(data, pos))
            self._entries = entries
        return self._entries

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._load())

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry; ValueError if its last offset is below the previous one (Kafka's check)."""
        entries = self._load()
        if entries and txn.last_offset < entries[-1].last_offset:
            raise ValueError(
                f"The last offset of appended transactions must increase sequentially, but {txn.last_offset} is "
                f"not greater than current last offset {entries[-1].last_offset} of index {self.path}"
            )
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, txn.to_bytes())
        finally:
            os.close(fd)
        entries.append(txn)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping ``[fetch_offset, upper_bound_offset)`` and whether the search is complete
        (an entry's LSO reached the upper bound: later segments cannot add any; Kafka's TxnIndexSearchResult)."""
        out = []
        for txn in self._load():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return out, True
        return out, False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose last offset is >= ``offset``."""
        entries = self._load()
        keep = [t for t in entries if t.last_offset < offset]
        if len(keep) == len(entries):
            return
        self._entries = keep
        self._rewrite()

    def reset(self) -> None:
        self._entries = []
        self._rewrite()

    def _rewrite(self) -> None:
        entries = self._entries or []
        if not entries:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            return
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(b"".join(t.to_bytes() for t in entries))
        os.replace(tmp, self.path)

    def flush(self) -> None:
        if os.path.exists(self.path):
            fsync_file(self.path)

    def close(self) -> None:
        self._entries = None

    def delete_if_exists(self) -> None:
        self._entries = None
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def rename_to(self, path: str) -> None:
        if os.path.exists(self.path):
            os.replace(self.path, path)
        self.path = path

    def update_parent_dir(self, parent: str) -> None:
        self.path = os.path.join(parent, os.path.basename(self.path))

    def sanity_check(self) -> None:
        """Raise CorruptTransactionIndexError if the file is not whole entries."""
        try:
            size = os.path.getsize(self.path)
        except FileNotFoundError:
            return
        if size % ENTRY_SIZE:
            raise CorruptTransactionIndexError(
                f"Transaction index file {self.path} size {size} is not a multiple of {ENTRY_SIZE}"
            )
