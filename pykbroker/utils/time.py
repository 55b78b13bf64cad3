"""Injectable time, as Kafka's ``org.apache.kafka.common.utils.Time``.

Logic takes a ``Time`` instead of calling ``time.time()`` so that timeouts, expiry and retention
are testable without waiting: production code uses :data:`SYSTEM`, tests use :class:`MockTime`.
``milliseconds()`` is wall-clock ms since the epoch (timestamps, retention); ``nanoseconds()`` and
``hi_res_milliseconds()`` are monotonic (durations, deadlines).
"""

from __future__ import annotations

import threading
import time as _time


class Time:
    def milliseconds(self) -> int:
        raise NotImplementedError

    def nanoseconds(self) -> int:
        raise NotImplementedError

    def hi_res_milliseconds(self) -> int:
        return self.nanoseconds() // 1_000_000

    def sleep(self, ms: float) -> None:
        raise NotImplementedError


class SystemTime(Time):
    """The real clock. Thread-safe."""

    def milliseconds(self) -> int:
        return _time.time_ns() // 1_000_000

    #: the C clock itself, not a Python method wrapping it: the network and request threads read it ~10 times per
    #: request, and a Python frame per read costs more than the read
    nanoseconds = staticmethod(_time.monotonic_ns)

    def sleep(self, ms: float) -> None:
        if ms > 0:
            _time.sleep(ms / 1000.0)


class MockTime(Time):
    """A clock that moves only when told (``sleep`` advances it). Thread-safe."""

    def __init__(self, auto_tick_ms: int = 0, current_ms: int | None = None, current_ns: int = 0):
        self._lock = threading.Lock()
        self._ms = current_ms if current_ms is not None else _time.time_ns() // 1_000_000
        self._ns = current_ns
        self._auto_tick_ms = auto_tick_ms

    def _tick(self) -> None:
        if self._auto_tick_ms:
            self._ms += self._auto_tick_ms
            self._ns += self._auto_tick_ms * 1_000_000

    def milliseconds(self) -> int:
        with self._lock:
            self._tick()
            return self._ms

    def nanoseconds(self) -> int:
        with self._lock:
            self._tick()
            return self._ns

    def sleep(self, ms: float) -> None:
        with self._lock:
            self._ms += int(ms)
            self._ns += int(ms * 1_000_000)


SYSTEM = SystemTime()
