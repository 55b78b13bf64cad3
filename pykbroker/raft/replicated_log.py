"""The Raft log seam: what ``KafkaRaftClient`` needs from storage, and an in-memory implementation.

Mirrors ``org.apache.kafka.raft.ReplicatedLog`` (Kafka's production implementation is
``KafkaMetadataLog`` over ``UnifiedLog``). The client speaks in :class:`LogBatch` values - a base
offset, the leader epoch that wrote it, and ``(key, value)`` records - so an implementation over the real
storage only has to translate batches to and from record batch v2 (partitionLeaderEpoch = ``epoch``,
the control attribute = ``control``). :class:`MemoryReplicatedLog` keeps the batches in a list and is
used by tests and by simulations; it survives a "restart" when the same object is handed to a new client.
"""

from __future__ import annotations

import bisect
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

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


class ReplicatedLog(ABC):
    """Storage for the replicated metadata partition. Offsets are Kafka offsets (int64).

    Threading: called only from the Raft IO thread, except ``high_watermark``/``end_offset`` reads,
    which implementations must make safe from any thread.
    """

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


class MemoryReplicatedLog(ReplicatedLog):
    """Batches in a list; ``flush`` is a no-op and counted. Thread-safe (one lock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batches: list[LogBatch] = []
        self._base_offsets: list[int] = []  # parallel to _batches, for bisect
        self._high_watermark = 0
        self.flush_count = 0

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
        return self._batches[-1].next_offset if self._batches else 0

    def end_offset(self) -> int:
        with self._lock:
            return self._end_offset()

    def start_offset(self) -> int:
        return 0

    def last_fetched_epoch(self) -> int:
        with self._lock:
            return self._batches[-1].epoch if self._batches else 0

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        with self._lock:
            found: OffsetAndEpoch | None = None
            for batch in self._batches:
                if batch.epoch > epoch:
                    break
                found = OffsetAndEpoch(batch.next_offset, batch.epoch)
            return found if found is not None else OffsetAndEpoch(0, 0)

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
        self.flush_count += 1

    def __len__(self) -> int:
        return len(self._batches)
