"""A single-threaded event queue (Kafka's ``KafkaEventQueue``, without deadlines).

Threading: one thread, named at construction, runs events one at a time in order; ``append``,
``prepend`` and ``close`` are safe from any thread. An event is a callable plus an optional error handler
called (on the queue thread) if it raises, or - with :class:`EventQueueClosedError` - if the queue closes
before it runs. Everything a controller owns is therefore touched by one thread only.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable

from pykbroker.utils.logging import get_logger

ErrorHandler = Callable[[BaseException], None]


class EventQueueClosedError(RuntimeError):
    pass


class EventQueue:
    def __init__(self, thread_name: str):
        self.thread_name = thread_name
        self._cond = threading.Condition()
        self._events: collections.deque[tuple[Callable[[], None], ErrorHandler | None]] = collections.deque()
        self._closing = False
        self._log = get_logger("KafkaEventQueue", name=thread_name)
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)
        self._thread.start()

    def append(self, event: Callable[[], None], on_error: ErrorHandler | None = None) -> None:
        self._add(event, on_error, front=False)

    def prepend(self, event: Callable[[], None], on_error: ErrorHandler | None = None) -> None:
        self._add(event, on_error, front=True)

    def _add(self, event, on_error, front: bool) -> None:
        with self._cond:
            if self._closing:
                rejected = True
            else:
                rejected = False
                (self._events.appendleft if front else self._events.append)((event, on_error))
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
            with self._cond:
                while not self._events and not self._closing:
                    self._cond.wait()
                if not self._events:
                    return
                event, on_error = self._events.popleft()
            self._execute(event, on_error)

    def _execute(self, event, on_error) -> None:
        try:
            event()
        except BaseException as e:  # noqa: BLE001 - handed to the event's owner
            if on_error is not None:
                try:
                    on_error(e)
                except Exception:  # noqa: BLE001
                    self._log.exception("Error handler failed")
            else:
                self._log.exception("Unhandled error in event")

    def close(self, timeout_s: float = 10.0, drain: bool = True) -> None:
        """Stop accepting events; run the queued ones (``drain``) or fail them with
        EventQueueClosedError; then join the thread."""
        with self._cond:
            self._closing = True
            dropped = [] if drain else list(self._events)
            if not drain:
                self._events.clear()
            self._cond.notify_all()
        for _, on_error in dropped:
            if on_error is not None:
                on_error(EventQueueClosedError(f"{self.thread_name} is closed"))
        if not self.is_on_queue_thread():
            self._thread.join(timeout_s)
