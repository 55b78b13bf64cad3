"""The Raft log seam: what ``KafkaRaftClient`` needs from storage, and an in-memory implementation.

Mirrors ``org.apache.kafka.raft.ReplicatedLog`` (Kafka's production implementation is
``KafkaMetadataLog`` over ``UnifiedLog``). The client speaks in :class:`LogBatch` values - a base
offset, the leader epoch that wrote it, and ``(key, value)`` records - so an implementation over the real
storage only has to translate batches to and from record batch v2 (partitionLeaderEpoch = ``epoch``,
the control attribute = ``control``). :class:`MemoryReplicatedLog` keeps the batches in a list and is
used by tests and by simulations; it survives a "restart" when the same object is handed to a new client.

Snapshots (Kafka's snapshot half of ``ReplicatedLog``/``KafkaMetadataLog``): the base class keeps the
registry of frozen snapshots, validates new snapshot ids (``create_new_snapshot``: end offset at or above
the log start and at most the high watermark, epoch that of the record before it), answers
``validate_offset_and_epoch`` for the leader's Fetch handling (send a snapshot to a fetcher below the log
start) and cleans: ``delete_before_snapshot``/``maybe_clean`` move the log start offset up to the newest
snapshot, drop what lies wholly below it and forget older snapshots; ``truncate_to_latest_snapshot`` empties
a log that a freshly fetched snapshot is ahead of. Implementations supply the storage hooks
(``_new_snapshot_writer``, ``_delete_snapshot``, ``_delete_before``, ``_truncate_fully_and_start_at``).
"""

from __future__ import annotations

import bisect
import enum
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from pykbroker.raft.snapshots import (
    MemoryRawSnapshotWriter,
    RawSnapshotReader,
    RawSnapshotWriter,
    SnapshotId,
)

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0


class LogRecord(NamedTuple):
    """One record of a batch: ``key`` (None for data records; the control key for control records)
    and ``value`` (the serialised record)."""

    key: bytes | None
    value: bytes | None


class OffsetAndEpoch(NamedTuple):
    offset: int
    epoch: int


class LogAppendInfo(NamedTuple):
    first_offset: int
    last_offset: int


@dataclass(frozen=True)
class LogBatch:
    """A batch as stored: offsets ``base_offset .. base_offset + len(records) - 1`` written by the
    leader of ``epoch``. ``append_time_ms`` is wall-clock ms."""

    base_offset: int
    epoch: int
    records: tuple[LogRecord, ...]
    control: bool = False
    append_time_ms: int = -1

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.records)


class ValidKind(enum.Enum):
    VALID = "valid"
    DIVERGING = "diverging"
    SNAPSHOT = "snapshot"


class ValidOffsetAndEpoch(NamedTuple):
    """Kafka's ``ValidOffsetAndEpoch``: a fetch position is VALID, DIVERGING (``offset_and_epoch`` is where
    the logs agree up to), or needs the SNAPSHOT ``offset_and_epoch``."""

    kind: ValidKind
    offset_and_epoch: OffsetAndEpoch


class ReplicatedLog(ABC):
    """Storage for the replicated metadata partition. Offsets are Kafka offsets (int64).

    Threading: called only from the Raft IO thread, except ``high_watermark``/``end_offset`` reads,
    which implementations must make safe from any thread, and ``create_new_snapshot``,
    ``latest_snapshot_id``, ``earliest_snapshot_id``, ``read_snapshot`` and ``latest_snapshot``, which
    are thread-safe (the registry is guarded by ``_snapshot_lock``; a writer's ``freeze`` registers the
    snapshot from the writing thread).
    """

    def __init__(self) -> None:
        self._snapshot_lock = threading.Lock()
        self._snapshots: dict[SnapshotId, RawSnapshotReader] = {}  # frozen, guarded by _snapshot_lock

    @abstractmethod
    def append_as_leader(
        self, records: Sequence[LogRecord], epoch: int, control: bool = False, append_time_ms: int = -1
    ) -> LogAppendInfo:
        """Append one batch at the end of the log, assigning offsets. ``records`` must not be empty."""

    @abstractmethod
    def append_as_follower(self, batches: Sequence[LogBatch]) -> LogAppendInfo:
        """Append batches replicated from the leader, keeping their offsets (which must start at
        ``end_offset()``)."""

    @abstractmethod
    def read(self, start_offset: int, max_offset: int | None = None) -> list[LogBatch]:
        """Whole batches holding offsets ``>= start_offset``, stopping before the first batch whose last
        offset is ``>= max_offset`` (exclusive upper bound; None = to the end)."""

    @abstractmethod
    def end_offset(self) -> int:
        """The log end offset (next offset to be written)."""

    @abstractmethod
    def start_offset(self) -> int: ...

    @abstractmethod
    def last_fetched_epoch(self) -> int:
        """The epoch of the last batch (0 for an empty log)."""

    @abstractmethod
    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The end offset of the largest epoch <= ``epoch`` present in the log, and that epoch (Kafka's
        epoch-cache lookup used to find divergence)."""

    @abstractmethod
    def truncate_to(self, offset: int) -> None:
        """Remove every record at or above ``offset`` (whole batches)."""

    @abstractmethod
    def update_high_watermark(self, offset: int) -> None: ...

    @abstractmethod
    def high_watermark(self) -> int: ...

    @abstractmethod
    def flush(self) -> None:
        """Make appended batches durable."""

    def close(self) -> None:  # noqa: B027 - optional hook: logs without resources keep this no-op
        pass

    @property
    def topic_partition(self) -> tuple[str, int]:
        return (METADATA_TOPIC, METADATA_PARTITION)

    # ---- snapshots: storage hooks --------------------------------------------------------------
    @abstractmethod
    def _new_snapshot_writer(self, snapshot_id: SnapshotId) -> RawSnapshotWriter:
        """A writer whose ``freeze`` calls ``self._on_snapshot_frozen``."""

    @abstractmethod
    def _delete_snapshot(self, reader: RawSnapshotReader) -> None:
        """Remove a forgotten snapshot from storage."""

    @abstractmethod
    def _delete_before(self, offset: int) -> None:
        """Raise the log start offset to ``offset`` (<= the high watermark) and drop whole batches (or
        segments) that lie below it."""

    @abstractmethod
    def _truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log; it restarts at ``offset`` with the high watermark there."""

    # ---- snapshots ----------------------------------------------------------------------------
    def _on_snapshot_frozen(self, reader: RawSnapshotReader) -> None:
        with self._snapshot_lock:
            self._snapshots[reader.snapshot_id] = reader

    def latest_snapshot_id(self) -> SnapshotId | None:
        with self._snapshot_lock:
            return max(self._snapshots, default=None)

    def earliest_snapshot_id(self) -> SnapshotId | None:
        with self._snapshot_lock:
            return min(self._snapshots, default=None)

    def read_snapshot(self, snapshot_id: SnapshotId) -> RawSnapshotReader | None:
        with self._snapshot_lock:
            return self._snapshots.get(snapshot_id)

    def latest_snapshot(self) -> RawSnapshotReader | None:
        with self._snapshot_lock:
            latest = max(self._snapshots, default=None)
            return None if latest is None else self._snapshots[latest]

    def create_new_snapshot(self, snapshot_id: SnapshotId) -> RawSnapshotWriter | None:
        """A writer for a snapshot of the log below ``snapshot_id.end_offset`` (Kafka's
        ``createNewSnapshot``). None when that offset is below the log start offset or the snapshot
        exists; ValueError when it is above the high watermark or the epoch is not the one of the record
        at ``end_offset - 1``."""
        start = self.start_offset()
        if snapshot_id.end_offset < start or snapshot_id == self.latest_snapshot_id():
            return None
        hw = self.high_watermark()
        if snapshot_id.end_offset > hw:
            raise ValueError(f"Cannot create snapshot {snapshot_id} above the high watermark {hw}")
        valid = self.validate_offset_and_epoch(snapshot_id.end_offset, snapshot_id.epoch)
        if valid.kind is ValidKind.VALID and snapshot_id.end_offset > start:
            # stricter than Kafka: the record at end_offset - 1 must be of the epoch, not of an older one
            previous = self.end_offset_for_epoch(snapshot_id.epoch - 1)
            if previous.epoch < snapshot_id.epoch and previous.offset >= snapshot_id.end_offset:
                valid = ValidOffsetAndEpoch(ValidKind.DIVERGING, previous)
        if valid.kind is not ValidKind.VALID:
            raise ValueError(f"Snapshot id {snapshot_id} is not valid according to the log: {valid}")
        return self.create_new_snapshot_unchecked(snapshot_id)

    def create_new_snapshot_unchecked(self, snapshot_id: SnapshotId) -> RawSnapshotWriter | None:
        """A writer without validation (a follower storing the leader's snapshot); None if it exists."""
        with self._snapshot_lock:
            if snapshot_id in self._snapshots:
                return None
        return self._new_snapshot_writer(snapshot_id)

    def validate_offset_and_epoch(self, offset: int, epoch: int) -> ValidOffsetAndEpoch:
        """Whether a replica whose log ends at ``offset`` with last epoch ``epoch`` agrees with this log
        (Kafka's ``ReplicatedLog.validateOffsetAndEpoch``): it needs the latest snapshot when there is one
        and it is below the log start, at the start in another epoch, or in an epoch older than the
        earliest snapshot's."""
        start = self.start_offset()
        if start == 0 and offset == 0:
            return ValidOffsetAndEpoch(ValidKind.VALID, OffsetAndEpoch(0, 0))
        earliest = self.earliest_snapshot_id()
        if earliest is not None and (
            offset < start or (offset == start and epoch != earliest.epoch) or epoch < earliest.epoch
        ):
            latest = self.latest_snapshot_id()
            assert latest is not None
            return ValidOffsetAndEpoch(ValidKind.SNAPSHOT, OffsetAndEpoch(latest.end_offset, latest.epoch))
        end = self.end_offset_for_epoch(epoch)
        if end.epoch != epoch or end.offset < offset:
            return ValidOffsetAndEpoch(ValidKind.DIVERGING, end)
        return ValidOffsetAndEpoch(ValidKind.VALID, OffsetAndEpoch(offset, epoch))

    def _snapshot_end_for_epoch(self, found: OffsetAndEpoch | None, epoch: int) -> OffsetAndEpoch:
        """Kafka's ``KafkaMetadataLog.endOffsetForEpoch`` around the log's own epoch lookup ``found``: an
        epoch the log only knows from its start answers with the earliest snapshot's id."""
        earliest = self.earliest_snapshot_id()
        if found is None:
            return OffsetAndEpoch(self.start_offset(), 0) if earliest is None else OffsetAndEpoch(*earliest)
        if earliest is not None and found.offset == earliest.end_offset and found.epoch == epoch:
            return OffsetAndEpoch(earliest.end_offset, earliest.epoch)
        return found

    def delete_before_snapshot(self, snapshot_id: SnapshotId) -> bool:
        """Move the log start offset up to ``snapshot_id`` (a frozen snapshot, at most the newest), drop
        what lies below it and forget older snapshots (Kafka's ``deleteBeforeSnapshot``). IO thread."""
        with self._snapshot_lock:
            if snapshot_id not in self._snapshots or snapshot_id.end_offset > max(self._snapshots).end_offset:
                return False
        if self.start_offset() >= snapshot_id.end_offset:
            return self._forget_snapshots_before(snapshot_id)
        self._delete_before(snapshot_id.end_offset)
        self._forget_snapshots_before(snapshot_id)
        return True

    def maybe_clean(self) -> bool:
        """Clean up to the newest snapshot (``delete_before_snapshot(latest)``): the metadata log keeps the
        last snapshot and the records after it. IO thread."""
        latest = self.latest_snapshot_id()
        if latest is None or (latest.end_offset <= self.start_offset() and latest == self.earliest_snapshot_id()):
            return False
        if latest.end_offset > self.high_watermark():
            return False  # a fetched snapshot ahead of a log not yet truncated to it
        return self.delete_before_snapshot(latest)

    def truncate_to_latest_snapshot(self) -> bool:
        """Empty the log and restart it at the newest snapshot when that snapshot is ahead of the log (newer
        epoch than the last batch's, or the same epoch and a higher end offset); True if it did (Kafka's
        ``truncateToLatestSnapshot``). IO thread."""
        latest = self.latest_snapshot_id()
        if latest is None:
            return False
        last_epoch = self._last_batch_epoch()
        if latest.epoch > last_epoch or (latest.epoch == last_epoch and latest.end_offset > self.end_offset()):
            self._truncate_fully_and_start_at(latest.end_offset)
            self._forget_snapshots_before(latest)
            return True
        return False

    def _forget_snapshots_before(self, snapshot_id: SnapshotId) -> bool:
        with self._snapshot_lock:
            old = [s for s in self._snapshots if s < snapshot_id]
            readers = [self._snapshots.pop(s) for s in old]
        for reader in readers:
            self._delete_snapshot(reader)
        return bool(readers)

    @abstractmethod
    def _last_batch_epoch(self) -> int:
        """The epoch of the last batch in the log, 0 when empty (snapshots not considered)."""


class MemoryReplicatedLog(ReplicatedLog):
    """Batches in a list; ``flush`` is a no-op and counted. Thread-safe (one lock)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._start = 0
        self._batches: list[LogBatch] = []
        self._base_offsets: list[int] = []  # parallel to _batches, for bisect
        self._high_watermark = 0

    def append_as_leader(self, records, epoch, control=False, append_time_ms=-1) -> LogAppendInfo:
        if not records:
            raise ValueError("cannot append an empty batch")
        with self._lock:
            if self._batches and epoch < self._batches[-1].epoch:
                raise ValueError(f"epoch {epoch} is older than the last batch's {self._batches[-1].epoch}")
            batch = LogBatch(self._end_offset(), epoch, tuple(records), control, append_time_ms)
            self._add(batch)
            return LogAppendInfo(batch.base_offset, batch.last_offset)

    def append_as_follower(self, batches) -> LogAppendInfo:
        if not batches:
            raise ValueError("cannot append no batches")
        with self._lock:
            first = batches[0].base_offset
            if first != self._end_offset():
                raise ValueError(f"follower append at {first} but the log ends at {self._end_offset()}")
            for batch in batches:
                self._add(batch)
            return LogAppendInfo(first, batches[-1].last_offset)

    def _add(self, batch: LogBatch) -> None:
        self._batches.append(batch)
        self._base_offsets.append(batch.base_offset)

    def read(self, start_offset, max_offset=None) -> list[LogBatch]:
        with self._lock:
            i = max(0, bisect.bisect_right(self._base_offsets, start_offset) - 1)
            out = []
            for batch in self._batches[i:]:
                if batch.last_offset < start_offset:
                    continue
                if max_offset is not None and batch.last_offset >= max_offset:
                    break
                out.append(batch)
            return out

    def _end_offset(self) -> int:
        return self._batches[-1].next_offset if self._batches else self._start

    def end_offset(self) -> int:
        with self._lock:
            return self._end_offset()

    def start_offset(self) -> int:
        return self._start

    def _last_batch_epoch(self) -> int:
        with self._lock:
            return self._batches[-1].epoch if self._batches else 0

    def last_fetched_epoch(self) -> int:
        with self._lock:
            if self._batches:
                return self._batches[-1].epoch
        latest = self.latest_snapshot_id()
        return latest.epoch if latest is not None else 0

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        with self._lock:
            found: OffsetAndEpoch | None = None
            for batch in self._batches:
                if batch.epoch > epoch:
                    break
                found = OffsetAndEpoch(batch.next_offset, batch.epoch)
        return self._snapshot_end_for_epoch(found, epoch)

    def _new_snapshot_writer(self, snapshot_id: SnapshotId) -> RawSnapshotWriter:
        return MemoryRawSnapshotWriter(snapshot_id, self._on_snapshot_frozen)

    def _delete_snapshot(self, reader: RawSnapshotReader) -> None:
        pass

    def _delete_before(self, offset: int) -> None:
        with self._lock:
            keep = 0
            while keep < len(self._batches) and self._batches[keep].next_offset <= offset:
                keep += 1
            del self._batches[:keep]
            del self._base_offsets[:keep]
            self._start = max(self._start, offset)

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        with self._lock:
            self._batches.clear()
            self._base_offsets.clear()
            self._start = offset
            self._high_watermark = offset

    def truncate_to(self, offset: int) -> None:
        with self._lock:
            while self._batches and self._batches[-1].last_offset >= offset:
                self._batches.pop()
                self._base_offsets.pop()
            self._high_watermark = min(self._high_watermark, self._end_offset())

    def update_high_watermark(self, offset: int) -> None:
        with self._lock:
            self._high_watermark = min(offset, self._end_offset())

    def high_watermark(self) -> int:
        return self._high_watermark

    def flush(self) -> None:
        """Nothing to flush: the log lives in memory."""

    def __len__(self) -> int:
        return len(self._batches)
