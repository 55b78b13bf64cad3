"""Records the leader has accepted but not yet written to the log (Kafka's ``BatchAccumulator``).

``prepare_append`` reserves offsets at once (so the caller learns the offset its records will have) and
queues the serialised records; the Raft IO thread ``drain``s the queue into log batches when the linger
time has passed or an append was scheduled. Each ``prepare_append`` call is atomic: its records are never
split across drains.

Threading: thread-safe; ``_lock`` guards everything. Appending threads (the controller) call
``prepare_append``/``schedule_drain``; only the Raft IO thread drains.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from pykbroker.raft.replicated_log import LogRecord
from pykbroker.utils.time import Time


class NotLeaderError(RuntimeError):
    """Appending in an epoch this node does not lead (Kafka's raft ``NotLeaderException``)."""


class BatchAccumulator:
    def __init__(
        self,
        epoch: int,
        base_offset: int,
        linger_ms: int,
        time: Time,
        wakeup: Callable[[], None] = lambda: None,
        max_batch_records: int = 10_000,
    ):
        self.epoch = epoch
        self._lock = threading.Lock()
        self._next_offset = base_offset
        self._pending: list[list[LogRecord]] = []
        self._control: set[int] = set()  # ids of the pending groups that are control batches
        self._pending_count = 0
        self._linger_ms = linger_ms
        self._time = time
        self._wakeup = wakeup
        self._drain_at_ms: int | None = None
        self._closed = False
        self.max_batch_records = max_batch_records

    def prepare_append(self, epoch: int, records: Sequence[LogRecord]) -> int:
        """Queue ``records`` (non-empty); returns the offset the last one will have.
        Raises NotLeaderError if ``epoch`` is not this accumulator's epoch or it was closed."""
        if not records:
            raise ValueError("no records to append")
        with self._lock:
            if self._closed or epoch != self.epoch:
                raise NotLeaderError(
                    f"Append in epoch {epoch} refused: leading epoch {self.epoch}"
                    + (" (resigned)" if self._closed else "")
                )
            self._pending.append(list(records))
            self._pending_count += len(records)
            self._next_offset += len(records)
            if self._drain_at_ms is None:
                self._drain_at_ms = self._time.hi_res_milliseconds() + self._linger_ms
            return self._next_offset - 1

    def append_control(self, records: Sequence[LogRecord]) -> int:
        """Queue ``records`` as a control batch of their own (Kafka's ``appendVotersRecord``: a VotersRecord
        written mid-epoch) and drain on the next poll; returns the offset of the last one. NotLeaderError as
        ``prepare_append``."""
        last = self.prepare_append(self.epoch, records)
        with self._lock:
            self._control.add(id(self._pending[-1]))
            self._drain_at_ms = 0
        self._wakeup()
        return last

    def schedule_drain(self) -> None:
        """Drain on the IO thread's next poll rather than after the linger time."""
        with self._lock:
            if self._pending:
                self._drain_at_ms = 0
        self._wakeup()

    def next_offset(self) -> int:
        with self._lock:
            return self._next_offset

    def time_until_drain_ms(self) -> int | None:
        """None when nothing is pending, else ms until the next drain is due (0 = now)."""
        with self._lock:
            if self._drain_at_ms is None:
                return None
            return max(0, self._drain_at_ms - self._time.hi_res_milliseconds())

    def drain(self, force: bool = False) -> list[tuple[list[LogRecord], bool]]:
        """Take the queued records as ``(records, control)`` batches (consecutive data appends merged up to
        ``max_batch_records``; a control append is a batch of its own) if a drain is due (or ``force``)."""
        with self._lock:
            if not self._pending:
                return []
            if not force and self._drain_at_ms is not None and self._drain_at_ms > self._time.hi_res_milliseconds():
                return []
            groups, self._pending = self._pending, []
            control, self._control = self._control, set()
            self._pending_count = 0
            self._drain_at_ms = None
        batches: list[tuple[list[LogRecord], bool]] = []
        merge = False
        for group in groups:
            is_control = id(group) in control
            if merge and not is_control and len(batches[-1][0]) + len(group) <= self.max_batch_records:
                batches[-1][0].extend(group)
            else:
                batches.append((group, is_control))
            merge = not is_control
        return batches

    def close(self) -> int:
        """Refuse further appends and drop what was queued; returns how many records were dropped."""
        with self._lock:
            self._closed = True
            dropped, self._pending, self._pending_count = self._pending_count, [], 0
            self._control.clear()
            self._drain_at_ms = None
            return dropped
