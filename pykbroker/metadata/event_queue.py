"""A single-threaded event queue (Kafka's ``KafkaEventQueue``), with deferred events.

Threading: one thread, named at construction, runs events one at a time in order; ``append``,
``schedule_deferred``, ``cancel_deferred`` and ``close`` are safe from any thread. An event is
a callable plus an optional error handler called (on the queue thread) if it raises, or - with
:class:`EventQueueClosedError` - if the queue closes before it runs. Everything a controller owns is
therefore touched by one thread only.

Deferred events (Kafka's ``scheduleDeferred`` with an ``EarliestDeadlineFunction``) are keyed by a tag: a
tag has at most one pending deferred event, and scheduling it again replaces it. A deferred event whose
deadline (monotonic ms of the injected :class:`~pykbroker.utils.time.Time`, ``hi_res_milliseconds``) has
passed runs before the queued events, as Kafka prepends it. The thread sleeps (real time) until the
earliest deadline or a new event; with a ``MockTime`` a due deferred event therefore runs when the next
event wakes the thread (or when the real wait for its deadline ends). Closing drops deferred events,
failing them with EventQueueClosedError.

Stall detection (for the controller's broker sessions; Kafka's queue has none). With ``on_stall`` and
``stall_threshold_ms``, the thread notes the monotonic time each time it looks for work and never sleeps
longer than half the threshold. When it finds that ``stall_threshold_ms`` or more passed since it last
looked - the process was stopped (SIGSTOP) or starved, or one event ran that long - it calls
``on_stall(stalled_ms)`` on the queue thread before running anything else, due deferred events included.
"""

from __future__ import annotations

import collections
import itertools
import threading
from collections.abc import Callable

from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import SYSTEM, Time

ErrorHandler = Callable[[BaseException], None]


class EventQueueClosedError(RuntimeError):
    pass


class EventQueue:
    def __init__(
        self,
        thread_name: str,
        time: Time = SYSTEM,
        on_stall: Callable[[int], None] | None = None,
        stall_threshold_ms: int | None = None,
    ):
        """``on_stall(stalled_ms)`` / ``stall_threshold_ms`` (ms, > 0): see the module docstring."""
        if on_stall is not None and (stall_threshold_ms is None or stall_threshold_ms <= 0):
            raise ValueError("a stall listener needs a positive stall_threshold_ms")
        self.thread_name = thread_name
        self.time = time
        self._on_stall = on_stall
        self._stall_threshold_ms = stall_threshold_ms or 0
        self._last_looked_ms = time.hi_res_milliseconds()
        self._cond = threading.Condition()
        self._events: collections.deque[tuple[Callable[[], None], ErrorHandler | None]] = collections.deque()
        # tag -> (deadline ms, sequence, event, error handler)
        self._deferred: dict[str, tuple[int, int, Callable[[], None], ErrorHandler | None]] = {}
        self._sequence = itertools.count()
        self._closing = False
        self._log = get_logger("KafkaEventQueue", name=thread_name)
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)
        self._thread.start()

    def append(self, event: Callable[[], None], on_error: ErrorHandler | None = None) -> None:
        self._add(event, on_error)

    def schedule_deferred(
        self, tag: str, deadline_ms: int, event: Callable[[], None], on_error: ErrorHandler | None = None
    ) -> None:
        """Run ``event`` once the monotonic clock reaches ``deadline_ms``, replacing any pending deferred
        event with the same ``tag``."""
        with self._cond:
            if not self._closing:
                self._deferred[tag] = (deadline_ms, next(self._sequence), event, on_error)
                self._cond.notify()
                return
        if on_error is not None:
            on_error(EventQueueClosedError(f"{self.thread_name} is closed"))

    def cancel_deferred(self, tag: str) -> None:
        """Forget the pending deferred event with ``tag``, if any (its error handler is not called)."""
        with self._cond:
            self._deferred.pop(tag, None)

    def _add(self, event: Callable[[], None], on_error: ErrorHandler | None) -> None:
        with self._cond:
            if self._closing:
                rejected = True
            else:
                rejected = False
                self._events.append((event, on_error))
                self._cond.notify()
        if rejected and on_error is not None:
            on_error(EventQueueClosedError(f"{self.thread_name} is closed"))

    def size(self) -> int:
        with self._cond:
            return len(self._events)

    def is_on_queue_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def _run(self) -> None:
        while True:
            self._check_stall()
            with self._cond:
                if self._closing and not self._events:
                    return
                item = self._take_locked()
                if item is None:
                    self._cond.wait(self._wait_s_locked())
                    continue
            self._execute(*item)

    def _check_stall(self) -> None:
        """Note that the thread looks for work now; report a stall since it last did (queue thread)."""
        now = self.time.hi_res_milliseconds()
        stalled_ms = now - self._last_looked_ms
        self._last_looked_ms = now
        if self._on_stall is not None and stalled_ms >= self._stall_threshold_ms:
            try:
                self._on_stall(stalled_ms)
            except Exception:  # noqa: BLE001 - the listener's failure must not stop the queue
                self._log.exception("Stall listener failed")

    def _take_locked(self) -> tuple[Callable[[], None], ErrorHandler | None] | None:
        """The next thing to run: a due deferred event (earliest deadline first), else the oldest event."""
        if self._deferred and not self._closing:
            tag, (deadline, _, event, on_error) = min(self._deferred.items(), key=lambda item: (item[1][0], item[1][1]))
            if deadline <= self.time.hi_res_milliseconds():
                del self._deferred[tag]
                return event, on_error
        if self._events:
            return self._events.popleft()
        return None

    def _wait_s_locked(self) -> float | None:
        """How long to sleep (seconds; None: until notified): until the earliest deferred deadline, and at
        most half the stall threshold when stalls are watched."""
        wait_ms: float | None = None
        if self._deferred and not self._closing:
            deadline = min(d for d, _, _, _ in self._deferred.values())
            wait_ms = max(0, deadline - self.time.hi_res_milliseconds())
        if self._on_stall is not None and not self._closing:
            half = self._stall_threshold_ms / 2
            wait_ms = half if wait_ms is None else min(wait_ms, half)
        return None if wait_ms is None else wait_ms / 1000.0

    def _execute(self, event: Callable[[], None], on_error: ErrorHandler | None) -> None:
        try:
            event()
        except BaseException as e:  # noqa: BLE001 - handed to the event's owner
            if on_error is not None:
                try:
                    on_error(e)
                except Exception:  # noqa: BLE001 - a failing error handler must not stop the queue
                    self._log.exception("Error handler failed")
            else:
                self._log.exception("Unhandled error in event")

    def close(self, timeout_s: float = 10.0, drain: bool = True) -> None:
        """Stop accepting events; run the queued ones (``drain``) or fail them with
        EventQueueClosedError; drop deferred events (failing them); then join the thread."""
        with self._cond:
            self._closing = True
            dropped = [] if drain else list(self._events)
            if not drain:
                self._events.clear()
            dropped += [(event, on_error) for _, _, event, on_error in self._deferred.values()]
            self._deferred.clear()
            self._cond.notify_all()
        for _, on_error in dropped:
            if on_error is not None:
                on_error(EventQueueClosedError(f"{self.thread_name} is closed"))
        if not self.is_on_queue_thread():
            self._thread.join(timeout_s)
