"""A timeout timer for delayed operations: tasks with a delay, run once when the delay expires.

Mirrors ``org.apache.kafka.server.util.timer.{Timer, TimerTask, SystemTimer}``. Kafka keeps tasks in a
hierarchical timing wheel (tick 1 ms, 20 slots, overflow wheels) whose buckets sit in a ``DelayQueue``;
here a binary heap of ``(deadline_ms, seq, entry)`` does the same job (docs/ARCHITECTURE.md §6): ``add`` is
O(log n), finding the next deadline O(1).

Cancellation is lazy: ``TimerTask.cancel()`` only marks the task's entry dead (O(1), one short lock), and
the heap drops dead entries when they reach the top. Since most delayed produce/fetch operations complete
long before their timeout, dead entries can pile up, so the heap is compacted (O(n)) when dead entries
outnumber live ones (and exceed ``COMPACT_MIN_DEAD``).

Deadlines are read from the injected :class:`~pykbroker.utils.time.Time` (``hi_res_milliseconds``,
monotonic). With ``MockTime`` a test moves the clock with ``time.sleep(ms)`` and calls
``advance_clock(0)``; the wait inside ``advance_clock`` itself is always real time.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from time import monotonic as _monotonic

from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import SYSTEM, Time

COMPACT_MIN_DEAD = 1024


class TimerTask:
    """Something to run after ``delay_ms`` milliseconds (Kafka's ``TimerTask``).

    Subclasses implement :meth:`run`, called at most once per ``Timer.add``, on the thread that calls
    ``Timer.advance_clock`` (the purgatory's reaper). ``cancel`` may be called from any thread, any
    number of times, before or after expiry. Thread-safe.
    """

    def __init__(self, delay_ms: int):
        self.delay_ms = int(delay_ms)
        self._entry_lock = threading.Lock()
        self._entry: _TimerTaskEntry | None = None

    def run(self) -> None:
        raise NotImplementedError

    def cancel(self) -> None:
        """Stop the pending expiry, if any. Cheap: marks the timer entry dead; no heap work."""
        with self._entry_lock:
            entry, self._entry = self._entry, None
        if entry is not None:
            entry.remove()

    @property
    def is_cancelled(self) -> bool:
        return self._entry is None

    def _set_entry(self, entry: _TimerTaskEntry) -> None:
        with self._entry_lock:
            previous, self._entry = self._entry, entry
        if previous is not None and previous is not entry:
            previous.remove()


class _TimerTaskEntry:
    """One scheduled run of a task. ``removed``/``in_heap`` are guarded by the owning timer's lock."""

    __slots__ = ("task", "deadline_ms", "removed", "in_heap", "_timer")

    def __init__(self, timer: Timer, task: TimerTask, deadline_ms: int):
        self._timer = timer
        self.task = task
        self.deadline_ms = deadline_ms
        self.removed = False
        self.in_heap = False

    def remove(self) -> None:
        self._timer._remove(self)


class Timer:
    """A heap-based ``SystemTimer``.

    Threading: ``add``, ``size``, ``TimerTask.cancel`` and ``wakeup`` are safe from any thread; one
    thread (the purgatory's ``ExpirationReaper``) calls ``advance_clock``, and expired tasks run on that
    thread, outside the timer lock, one after another. A task raising is logged and does not stop the
    others. ``_lock``/``_cond`` guard the heap and the live/dead counters.
    """

    def __init__(self, name: str = "timer", time: Time = SYSTEM):
        self.name = name
        self._time = time
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._heap: list[tuple[int, int, _TimerTaskEntry]] = []
        self._seq = itertools.count()
        self._live = 0
        self._dead = 0
        self._closed = False
        self._log = get_logger("SystemTimer", name=name)
        self._wakeups = 0  # bumped by wakeup(): makes a waiting advance_clock return

    # ---- producers --------------------------------------------------------------------------
    def add(self, task: TimerTask) -> None:
        """Schedule ``task`` to run ``task.delay_ms`` ms from now (a delay <= 0 runs on the next
        ``advance_clock``). Adding a task again replaces its previous schedule."""
        deadline = self._time.hi_res_milliseconds() + task.delay_ms
        entry = _TimerTaskEntry(self, task, deadline)
        task._set_entry(entry)  # from here a concurrent cancel() marks the entry removed
        with self._cond:
            if self._closed or entry.removed:
                entry.removed = True
                return
            heapq.heappush(self._heap, (deadline, next(self._seq), entry))
            entry.in_heap = True
            self._live += 1
            if self._heap[0][2] is entry:
                self._cond.notify_all()  # a new earliest deadline: re-arm the waiter

    def _remove(self, entry: _TimerTaskEntry) -> None:
        with self._lock:
            if entry.removed:
                return
            entry.removed = True
            if not entry.in_heap:
                return
            self._live -= 1
            self._dead += 1
            if self._dead > COMPACT_MIN_DEAD and self._dead > self._live:
                self._heap = [item for item in self._heap if not item[2].removed]
                heapq.heapify(self._heap)
                self._dead = 0

    def wakeup(self) -> None:
        """Make a blocked ``advance_clock`` return now (used on shutdown)."""
        with self._cond:
            self._wakeups += 1
            self._cond.notify_all()

    # ---- the reaper -------------------------------------------------------------------------
    def advance_clock(self, timeout_ms: int) -> bool:
        """Wait up to ``timeout_ms`` (real ms) for a deadline to pass, then run every task whose
        deadline has passed. Returns True iff at least one task expired; returns early (False) on
        ``wakeup``/``shutdown``."""
        give_up = _monotonic() + timeout_ms / 1000.0
        with self._cond:
            expired = self._poll_expired()
            wakeups = self._wakeups
            while not expired and not self._closed and wakeups == self._wakeups:
                wait_s = give_up - _monotonic()
                self._drop_dead_head()
                if self._heap:
                    wait_s = min(wait_s, (self._heap[0][0] - self._time.hi_res_milliseconds()) / 1000.0)
                if wait_s <= 0:
                    break
                self._cond.wait(wait_s)  # woken early by add() of a new earliest task or wakeup()
                expired = self._poll_expired()
        for entry in expired:
            try:
                entry.task.run()
            except Exception:  # noqa: BLE001 - a task must never kill the reaper
                self._log.exception("Timer task raised on expiry", task=repr(entry.task))
        return bool(expired)

    def _drop_dead_head(self) -> None:
        heap = self._heap
        while heap and heap[0][2].removed:
            heapq.heappop(heap)
            self._dead -= 1

    def _poll_expired(self) -> list[_TimerTaskEntry]:
        """Pop live entries whose deadline passed, marking them removed. Caller holds the lock."""
        now = self._time.hi_res_milliseconds()
        heap = self._heap
        out: list[_TimerTaskEntry] = []
        while heap and (heap[0][2].removed or heap[0][0] <= now):
            entry = heapq.heappop(heap)[2]
            if entry.removed:
                self._dead -= 1
                continue
            entry.removed = True
            self._live -= 1
            out.append(entry)
        return out

    # ---- state ------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Number of scheduled tasks not yet expired or cancelled."""
        return self._live

    def shutdown(self) -> None:
        """Drop every pending task (none will run) and wake the reaper. Idempotent."""
        with self._cond:
            self._closed = True
            for _, _, entry in self._heap:
                entry.removed = True
            self._heap.clear()
            self._live = self._dead = 0
            self._cond.notify_all()

    close = shutdown


SystemTimer = Timer
"""Kafka's name for the production timer."""
