"""Sampled statistics of Kafka's metrics library (``org.apache.kafka.common.metrics.stats``), reduced to what
quotas and their metrics need: :class:`SampledRate` (Kafka's ``Rate`` over a ``SampledStat``) and
:class:`SampledAvg` (Kafka's ``Avg``).

Both share :class:`SampledStat` (Kafka's ``SampledStat``): ``samples`` windows of ``window_ms`` each form a
ring, each window holding a value (the sum of its records) and a count (of its records); a record lands in the
current window, or starts the next one (at the record's time) once the current is ``window_ms`` old. Windows
older than ``samples * window_ms`` are left out when measured (the rate resets them).

:meth:`SampledRate.measure` is the recorded sum divided by the elapsed time since the oldest window began,
counted as at least ``samples - 1`` full windows (so one burst right after start is not a huge rate), in units
per second. :meth:`SampledRate.window_size_ms` is that elapsed time, which Kafka's ``QuotaUtils.throttleTime``
uses. :meth:`SampledAvg.measure` is the sum over the count of the retained windows' records (NaN without any,
as Kafka's ``Avg``).

Not thread-safe: callers serialize access (ClientQuotaManager, ConnectionQuotas: their lock).
"""

from __future__ import annotations


class SampledStat:
    """The window ring shared by the sampled stats (Kafka's ``SampledStat``): per window its start (ms), its
    value (the sum of the values recorded in it) and its count (how many records). :meth:`record` rotates to
    the next window (at the record's time) once the current one is ``window_ms`` old, reusing the oldest slot
    once ``samples`` exist. Subclasses define ``measure``."""

    __slots__ = ("samples", "window_ms", "starts", "values", "counts", "current")

    def __init__(self, samples: int, window_ms: int, now_ms: int):
        self.samples = max(1, samples)
        self.window_ms = max(1, window_ms)
        self.starts = [now_ms]
        self.values = [0.0]
        self.counts = [0]
        self.current = 0

    def record(self, value: float, now_ms: int) -> None:
        i = self.current
        if now_ms - self.starts[i] >= self.window_ms:
            i = (i + 1) % self.samples
            if i >= len(self.starts):
                self.starts.append(now_ms)
                self.values.append(0.0)
                self.counts.append(0)
            else:
                self.starts[i], self.values[i], self.counts[i] = now_ms, 0.0, 0
            self.current = i
        self.values[i] += value
        self.counts[i] += 1


class SampledRate(SampledStat):
    """Kafka's ``Rate``: units per second over the retained windows (see the module docstring)."""

    __slots__ = ()

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for i, start in enumerate(self.starts):
            if now_ms - start >= expire:
                self.starts[i], self.values[i], self.counts[i] = now_ms, 0.0, 0

    def window_size_ms(self, now_ms: int) -> float:
        self._purge(now_ms)
        elapsed = now_ms - min(self.starts)
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return float(elapsed)

    def measure(self, now_ms: int) -> float:
        """Units per second over the retained windows."""
        size = self.window_size_ms(now_ms)
        return sum(self.values) * 1000.0 / size if size > 0 else 0.0

    def unrecord(self, value: float) -> None:
        """Take back ``value`` from the current window (Kafka's ``unrecordQuotaSensor`` records a negative)."""
        self.values[self.current] -= value


class SampledAvg(SampledStat):
    """Kafka's ``Avg``: the mean of the values recorded in the retained windows (Kafka's default metric config:
    two windows of 30 s); NaN when there are none."""

    __slots__ = ()

    def measure(self, now_ms: int) -> float:
        expire = self.samples * self.window_ms
        total, count = 0.0, 0
        for start, s, n in zip(self.starts, self.values, self.counts, strict=True):
            if now_ms - start < expire:
                total += s
                count += n
        return total / count if count else float("nan")
