"""Background task scheduling, as Kafka's ``org.apache.kafka.server.util.KafkaScheduler``.

:class:`KafkaScheduler` runs named tasks once after a delay or periodically at a fixed rate on a small
pool of daemon threads (``<thread_name_prefix><n>``). A task that raises is logged and, if periodic,
runs again at its next period: a failing task never kills the scheduler. :class:`MockScheduler` runs
the same tasks synchronously against a :class:`~pykbroker.utils.time.MockTime` for tests (Kafka's
``MockScheduler``).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time as _time
from collections.abc import Callable

from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import Time

_log = get_logger("KafkaScheduler")


class ScheduledTask:
    """A handle on one scheduled task. ``cancel()`` stops future runs (a run in progress finishes).

    Fields are written by the scheduler under its lock; ``cancelled`` may be read without it.
    """

    __slots__ = ("_seq", "cancelled", "fn", "name", "next_run_ms", "period_ms")

    def __init__(self, name: str, fn: Callable[[], object], next_run_ms: float, period_ms: int, seq: int):
        self.name = name
        self.fn = fn
        self.period_ms = period_ms
        self.next_run_ms = next_run_ms
        self.cancelled = False
        self._seq = seq

    @property
    def periodic(self) -> bool:
        return self.period_ms > 0

    def cancel(self) -> None:
        self.cancelled = True

    def __lt__(self, other: ScheduledTask) -> bool:
        return (self.next_run_ms, self._seq) < (other.next_run_ms, other._seq)

    def __repr__(self) -> str:
        return f"ScheduledTask(name={self.name!r}, period_ms={self.period_ms}, cancelled={self.cancelled})"


def _run_task(task: ScheduledTask) -> None:
    try:
        task.fn()
    except Exception:  # noqa: BLE001 - a task must never kill the scheduler
        _log.exception("Uncaught exception in scheduled task", task=task.name)


class Scheduler:
    """The interface shared by :class:`KafkaScheduler` and :class:`MockScheduler`."""

    def startup(self) -> None:
        raise NotImplementedError

    def shutdown(self) -> None:
        raise NotImplementedError

    def schedule(self, name: str, fn: Callable[[], object], delay_ms: int = 0, period_ms: int = -1) -> ScheduledTask:
        raise NotImplementedError

    def schedule_once(self, name: str, fn: Callable[[], object], delay_ms: int = 0) -> ScheduledTask:
        return self.schedule(name, fn, delay_ms, -1)


class KafkaScheduler(Scheduler):
    """Runs tasks on ``threads`` daemon threads named ``<thread_name_prefix><n>``.

    ``schedule(name, fn, delay_ms, period_ms)``: first run after ``delay_ms``; with ``period_ms > 0``
    it repeats at a fixed rate (the next run is due ``period_ms`` after the previous due time, or now
    if the task fell behind). Times are monotonic (``time.monotonic``), never the wall clock.

    Threading: ``_lock``/``_cond`` guard the task heap and the running flag. Worker threads pop due
    tasks under the lock and run them outside it, so two different tasks may run concurrently (as with
    Java's ScheduledThreadPoolExecutor), but a periodic task is never run twice at once: it is put back
    into the heap only after its run ends. ``schedule`` starts the pool on first use if ``startup`` was
    not called; after ``shutdown`` it raises ``RuntimeError``.
    """

    def __init__(self, threads: int = 1, thread_name_prefix: str = "kafka-scheduler-", daemon: bool = True):
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self._threads_count = threads
        self._prefix = thread_name_prefix
        self._daemon = daemon
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._heap: list[ScheduledTask] = []
        self._seq = itertools.count()
        self._workers: list[threading.Thread] = []
        self._running = False
        self._shut_down = False

    @staticmethod
    def _now_ms() -> float:
        return _time.monotonic() * 1000.0

    def startup(self) -> None:
        with self._lock:
            self._startup_locked()

    def _startup_locked(self) -> None:
        if self._shut_down:
            raise RuntimeError("KafkaScheduler has been shut down")
        if self._running:
            return
        self._running = True
        for i in range(self._threads_count):
            t = threading.Thread(target=self._worker_loop, name=f"{self._prefix}{i}", daemon=self._daemon)
            self._workers.append(t)
            t.start()

    def schedule(self, name: str, fn: Callable[[], object], delay_ms: int = 0, period_ms: int = -1) -> ScheduledTask:
        """Run ``fn`` after ``delay_ms`` ms, then every ``period_ms`` ms if ``period_ms > 0``."""
        with self._lock:
            self._startup_locked()
            task = ScheduledTask(name, fn, self._now_ms() + max(0, delay_ms), period_ms, next(self._seq))
            heapq.heappush(self._heap, task)
            self._cond.notify()
            return task

    def _worker_loop(self) -> None:
        while True:
            with self._lock:
                task: ScheduledTask | None = None
                while self._running:
                    while self._heap and self._heap[0].cancelled:
                        heapq.heappop(self._heap)
                    if not self._heap:
                        self._cond.wait()
                        continue
                    wait_ms = self._heap[0].next_run_ms - self._now_ms()
                    if wait_ms > 0:
                        self._cond.wait(wait_ms / 1000.0)
                        continue
                    task = heapq.heappop(self._heap)
                    break
                if not self._running or task is None:
                    return
            _run_task(task)
            if task.periodic and not task.cancelled:
                with self._lock:
                    if self._running:
                        task.next_run_ms = max(task.next_run_ms + task.period_ms, self._now_ms())
                        task._seq = next(self._seq)
                        heapq.heappush(self._heap, task)
                        self._cond.notify()

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop accepting tasks, drop pending ones, and wait (up to ``timeout_s``) for running ones."""
        with self._lock:
            self._shut_down = True
            self._running = False
            for task in self._heap:
                task.cancel()
            self._heap.clear()
            self._cond.notify_all()
            workers, self._workers = self._workers, []
        current = threading.current_thread()
        for t in workers:
            if t is not current:
                t.join(timeout_s)


class MockScheduler(Scheduler):
    """Deterministic scheduler for tests: tasks run on the caller's thread in :meth:`tick`, when the
    injected ``MockTime`` has reached their due time (call ``time.sleep(ms)`` then ``tick()``).
    Not thread-safe beyond a lock around the heap."""

    def __init__(self, time: Time):
        self._time = time
        self._heap: list[ScheduledTask] = []
        self._seq = itertools.count()
        self._lock = threading.RLock()

    def startup(self) -> None:
        pass

    def shutdown(self) -> None:
        with self._lock:
            for task in self._heap:
                task.cancel()
            self._heap.clear()

    def schedule(self, name: str, fn: Callable[[], object], delay_ms: int = 0, period_ms: int = -1) -> ScheduledTask:
        with self._lock:
            task = ScheduledTask(name, fn, self._time.milliseconds() + max(0, delay_ms), period_ms, next(self._seq))
            heapq.heappush(self._heap, task)
            return task

    def pending(self) -> list[ScheduledTask]:
        with self._lock:
            return sorted(t for t in self._heap if not t.cancelled)

    def tick(self) -> int:
        """Run every task due at the current mock time (periodic ones at most once per period
        step, catching up if time jumped). Returns the number of runs."""
        runs = 0
        while True:
            with self._lock:
                now = self._time.milliseconds()
                while self._heap and self._heap[0].cancelled:
                    heapq.heappop(self._heap)
                if not self._heap or self._heap[0].next_run_ms > now:
                    return runs
                task = heapq.heappop(self._heap)
            _run_task(task)
            runs += 1
            if task.periodic and not task.cancelled:
                with self._lock:
                    task.next_run_ms += task.period_ms
                    task._seq = next(self._seq)
                    heapq.heappush(self._heap, task)
