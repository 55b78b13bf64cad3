"""Snapshots of records: what a state machine writes and reads (Kafka's ``RecordsSnapshotWriter``,
``RecordsSnapshotReader``, ``SnapshotWriter``/``SnapshotReader``).

Layout of the bytes of a :class:`~pykbroker.raft.snapshots.RawSnapshotWriter`: record batches v2 (the
metadata log's encoding), all with ``partitionLeaderEpoch`` = the snapshot's epoch and offsets counting from
0 within the snapshot: first a control batch holding one SnapshotHeader record (the append time of the last
record contained), then one data batch per ``append`` call, and last a control batch holding one
SnapshotFooter record. A reader checks the header and footer are there (a snapshot without its footer is
torn) and CRCs every batch.

Threading: a writer belongs to the thread that created it. A reader holds the snapshot's bytes in memory, so
it may be handed to another thread and iterated there even after the log deleted the file.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Generic, TypeVar

from pykbroker.raft.control_records import (
    SNAPSHOT_FOOTER,
    SNAPSHOT_HEADER,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    control_key,
    parse_control_type,
)
from pykbroker.raft.log_batch_codec import decode_log_batches, encode_log_batches
from pykbroker.raft.raft_client import Batch, RecordSerde
from pykbroker.raft.replicated_log import LogBatch, LogRecord
from pykbroker.raft.snapshots import RawSnapshotReader, RawSnapshotWriter, SnapshotId

T = TypeVar("T")


class CorruptSnapshotError(ValueError):
    """The snapshot's bytes are not header, data batches, footer."""


class RecordsSnapshotWriter(Generic[T]):
    """Writes ``T`` records into ``raw`` (see the module docstring). ``last_contained_log_time_ms`` is the
    append time (ms) of the record at ``snapshot_id.end_offset - 1``."""

    def __init__(
        self,
        raw: RawSnapshotWriter,
        serde: RecordSerde[T],
        last_contained_log_time_ms: int,
        control_records: Sequence[LogRecord] = (),
    ):
        """``control_records``: written as one control batch after the header (KIP-853: the KRaftVersionRecord
        and VotersRecord in effect at the snapshot, as Kafka's ``RecordsSnapshotWriter.Builder``)."""
        self.raw = raw
        self.serde = serde
        self.last_contained_log_time_ms = last_contained_log_time_ms
        self._next_offset = 0
        self._append_batch(
            [LogRecord(control_key(SNAPSHOT_HEADER), SnapshotHeaderRecord(last_contained_log_time_ms).encode())], True
        )
        if control_records:
            self._append_batch(list(control_records), True)

    @property
    def snapshot_id(self) -> SnapshotId:
        return self.raw.snapshot_id

    @property
    def last_contained_log_offset(self) -> int:
        return self.snapshot_id.end_offset - 1

    def append(self, records: Sequence[T]) -> None:
        """Write ``records`` as one batch (nothing for an empty sequence)."""
        if records:
            self._append_batch([LogRecord(None, self.serde.write(r)) for r in records], False)

    def _append_batch(self, records: list[LogRecord], control: bool) -> None:
        batch = LogBatch(
            self._next_offset, self.snapshot_id.epoch, tuple(records), control, self.last_contained_log_time_ms
        )
        self.raw.append(encode_log_batches([batch], self.last_contained_log_time_ms))
        self._next_offset = batch.next_offset

    def freeze(self) -> None:
        """Write the footer and freeze the raw snapshot (it becomes the log's newest snapshot)."""
        self._append_batch([LogRecord(control_key(SNAPSHOT_FOOTER), SnapshotFooterRecord().encode())], True)
        self.raw.freeze()

    def close(self) -> None:
        """Discard the snapshot unless it was frozen."""
        self.raw.close()

    def __enter__(self) -> RecordsSnapshotWriter[T]:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RecordsSnapshotReader(Generic[T]):
    """Iterates the data batches of a frozen snapshot as :class:`Batch` values (offsets within the snapshot;
    ``epoch`` = the snapshot's epoch). Raises :class:`CorruptSnapshotError` at construction when the header
    or footer is missing, or a batch fails its CRC."""

    def __init__(self, raw: RawSnapshotReader, serde: RecordSerde[T]):
        self.snapshot_id: SnapshotId = raw.snapshot_id
        self.serde = serde
        try:
            batches = list(decode_log_batches(raw.read_all()))
        except Exception as e:  # any decode failure is a corrupt snapshot
            raise CorruptSnapshotError(f"Snapshot {self.snapshot_id}: {e}") from e
        if not batches or _control_type(batches[0]) != SNAPSHOT_HEADER:
            raise CorruptSnapshotError(f"Snapshot {self.snapshot_id} does not start with a SnapshotHeader")
        if len(batches) < 2 or _control_type(batches[-1]) != SNAPSHOT_FOOTER:
            raise CorruptSnapshotError(f"Snapshot {self.snapshot_id} does not end with a SnapshotFooter")
        header = SnapshotHeaderRecord.decode(batches[0].records[0].value or b"")
        self.last_contained_log_timestamp = header.last_contained_log_timestamp
        self._batches = [b for b in batches[1:-1] if not b.control]
        #: the control batches between header and footer (KIP-853: KRaftVersionRecord, VotersRecord)
        self.control_batches = [b for b in batches[1:-1] if b.control]

    @property
    def last_contained_log_offset(self) -> int:
        return self.snapshot_id.end_offset - 1

    @property
    def last_contained_log_epoch(self) -> int:
        return self.snapshot_id.epoch

    def __iter__(self) -> Iterator[Batch[T]]:
        for b in self._batches:
            records = [self.serde.read(r.value or b"") for r in b.records]
            size = sum(len(r.value or b"") for r in b.records)
            yield Batch(b.base_offset, b.epoch, b.last_offset, records, [], b.append_time_ms, size)

    def records(self) -> list[T]:
        """Every data record, in order."""
        return [r for batch in self for r in batch.records]


def _control_type(batch: LogBatch) -> int:
    return parse_control_type(batch.records[0].key) if batch.control and batch.records else -1
