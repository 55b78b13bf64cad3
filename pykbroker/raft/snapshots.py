"""Raw Raft snapshots: ids, file names, and byte-level readers and writers (Kafka's ``Snapshots``,
``RawSnapshotReader``/``RawSnapshotWriter``, ``FileRawSnapshotReader``/``FileRawSnapshotWriter``).

A snapshot ``SnapshotId(end_offset, epoch)`` holds the state of everything below ``end_offset``; ``epoch`` is
the epoch of the record at ``end_offset - 1``. On disk it is
``<metadata log dir>/__cluster_metadata-0/<20-digit end offset>-<10-digit epoch>.checkpoint``, written first as
``<name>.checkpoint.part`` and renamed when frozen, so a crash leaves a ``.part`` file (ignored and deleted on
open) or a complete snapshot, never a torn one. The bytes are record batches v2 (see
:mod:`pykbroker.raft.records_snapshot` for what they contain); at this level they are opaque, which is what
FetchSnapshot copies in chunks. :class:`MemoryRawSnapshotWriter` keeps them in memory for
``MemoryReplicatedLog``.

Threading: a writer is used by one thread at a time (the snapshot generator's, or the Raft IO thread for a
snapshot being fetched); ``freeze`` hands the frozen snapshot to the log through ``on_frozen``, which the
log makes thread-safe. A frozen reader is immutable and may be read from any thread.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import NamedTuple

from pykbroker.utils.files import fsync_dir

SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = SUFFIX + ".part"
DELETED_SUFFIX = SUFFIX + ".deleted"


class SnapshotId(NamedTuple):
    """A snapshot of every record below ``end_offset``; ``epoch`` wrote the record at ``end_offset - 1``
    (Kafka's ``OffsetAndEpoch`` used as a snapshot id)."""

    end_offset: int
    epoch: int


def snapshot_filename(snapshot_id: SnapshotId, suffix: str = SUFFIX) -> str:
    return f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}{suffix}"


def parse_snapshot_filename(name: str) -> tuple[SnapshotId, str] | None:
    """``(id, suffix)`` of a snapshot file name (suffix one of ``SUFFIX``, ``PARTIAL_SUFFIX``,
    ``DELETED_SUFFIX``); None for any other file."""
    for suffix in (PARTIAL_SUFFIX, DELETED_SUFFIX, SUFFIX):
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            offset, sep, epoch = stem.partition("-")
            if sep and len(offset) == 20 and len(epoch) == 10 and offset.isdigit() and epoch.isdigit():
                return SnapshotId(int(offset), int(epoch)), suffix
            return None
    return None


class RawSnapshotReader(ABC):
    """A frozen snapshot as bytes."""

    snapshot_id: SnapshotId

    @abstractmethod
    def size_in_bytes(self) -> int: ...

    @abstractmethod
    def read(self, position: int, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` bytes from ``position`` (unaligned: may cut a batch; FetchSnapshot's slice)."""

    def read_all(self) -> bytes:
        return self.read(0, self.size_in_bytes())


class RawSnapshotWriter(ABC):
    """A snapshot being written: ``append`` bytes, then ``freeze`` (which makes it visible to the log) or
    ``close`` without freezing (which discards it)."""

    snapshot_id: SnapshotId

    @abstractmethod
    def size_in_bytes(self) -> int: ...

    @abstractmethod
    def append(self, data: bytes) -> None: ...

    @abstractmethod
    def freeze(self) -> None:
        """Make the snapshot durable and immutable; raises if already frozen or closed."""

    @abstractmethod
    def close(self) -> None:
        """Release resources; a snapshot that was not frozen is deleted. Idempotent."""


OnFrozen = Callable[[RawSnapshotReader], None]


class MemoryRawSnapshotReader(RawSnapshotReader):
    def __init__(self, snapshot_id: SnapshotId, data: bytes):
        self.snapshot_id = snapshot_id
        self._data = data

    def size_in_bytes(self) -> int:
        return len(self._data)

    def read(self, position: int, max_bytes: int) -> bytes:
        return self._data[position : position + max_bytes]


class MemoryRawSnapshotWriter(RawSnapshotWriter):
    def __init__(self, snapshot_id: SnapshotId, on_frozen: OnFrozen):
        self.snapshot_id = snapshot_id
        self._buf = bytearray()
        self._on_frozen = on_frozen
        self._state = "open"

    def size_in_bytes(self) -> int:
        return len(self._buf)

    def append(self, data: bytes) -> None:
        _check_open(self._state, self.snapshot_id)
        self._buf += data

    def freeze(self) -> None:
        _check_open(self._state, self.snapshot_id)
        self._state = "frozen"
        self._on_frozen(MemoryRawSnapshotReader(self.snapshot_id, bytes(self._buf)))

    def close(self) -> None:
        if self._state == "open":
            self._state = "closed"


class FileRawSnapshotReader(RawSnapshotReader):
    """A ``.checkpoint`` file. The file is opened per read, so a reader survives the snapshot's deletion only
    as long as nobody reads it; callers that hand a snapshot to another thread read it whole first."""

    def __init__(self, snapshot_id: SnapshotId, path: str):
        self.snapshot_id = snapshot_id
        self.path = path
        self._size = os.path.getsize(path)

    def size_in_bytes(self) -> int:
        return self._size

    def read(self, position: int, max_bytes: int) -> bytes:
        with open(self.path, "rb") as f:
            f.seek(position)
            return f.read(max(0, min(max_bytes, self._size - position)))


class FileRawSnapshotWriter(RawSnapshotWriter):
    """Writes ``<dir>/<id>.checkpoint.part`` and, on ``freeze``, fsyncs it, renames it to ``.checkpoint`` and
    fsyncs the directory (Kafka's ``FileRawSnapshotWriter``). An existing ``.part`` of the same id is
    overwritten."""

    def __init__(self, directory: str, snapshot_id: SnapshotId, on_frozen: OnFrozen):
        self.snapshot_id = snapshot_id
        self.directory = directory
        self.path = os.path.join(directory, snapshot_filename(snapshot_id))
        self.partial_path = os.path.join(directory, snapshot_filename(snapshot_id, PARTIAL_SUFFIX))
        self._file = open(self.partial_path, "wb")  # noqa: SIM115 - closed by freeze/close
        self._size = 0
        self._on_frozen = on_frozen
        self._state = "open"

    def size_in_bytes(self) -> int:
        return self._size

    def append(self, data: bytes) -> None:
        _check_open(self._state, self.snapshot_id)
        self._file.write(data)
        self._size += len(data)

    def freeze(self) -> None:
        _check_open(self._state, self.snapshot_id)
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        os.replace(self.partial_path, self.path)
        fsync_dir(self.directory)
        self._state = "frozen"
        self._on_frozen(FileRawSnapshotReader(self.snapshot_id, self.path))

    def close(self) -> None:
        if self._state != "open":
            return
        self._state = "closed"
        self._file.close()
        try:
            os.unlink(self.partial_path)
        except FileNotFoundError:
            pass


def _check_open(state: str, snapshot_id: SnapshotId) -> None:
    if state != "open":
        raise RuntimeError(f"Snapshot {snapshot_id} is already {state}")
