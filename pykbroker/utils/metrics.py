"""A small metrics registry with Kafka's metric names (exposed by ``pykbroker.metrics`` reporters).

Names follow JMX style: ``kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce``.
Kinds: :class:`Histogram` (count, sum, min, max, mean, percentiles from a bounded reservoir),
:class:`Meter` (count and rate since start), :class:`Gauge` (a callable), :class:`IdleRatio`
(time-weighted idle percentage, for NetworkProcessorAvgIdlePercent / RequestHandlerAvgIdlePercent),
:class:`GaugeFamily` (per-partition gauges read in one pass). Every kind is thread-safe; recording
costs one lock acquisition. A Meter's ``count`` may instead be advanced by an owner that serialises all
of that meter's writers under its own lock (BrokerTopicStats: one lock per request for every topic).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable
from typing import TypeVar, cast


class Histogram:
    """count, sum, min, max and a uniform reservoir of samples. A histogram of a :class:`HistogramGroup` (recorded
    together with its siblings) folds the group's queued records in before any read."""

    RESERVOIR = 1028

    def __init__(self, lock: threading.Lock | None = None, group: HistogramGroup | None = None) -> None:
        self._lock = lock if lock is not None else threading.Lock()
        self._group = group
        self._count = 0
        self._sum = 0.0
        self._min = float("inf")
        self._max = float("-inf")
        self._samples: list[float] = []
        self._rand = random.Random(0)

    def _sync(self) -> None:
        if self._group is not None:
            self._group.drain()

    @property
    def count(self) -> int:
        self._sync()
        return self._count

    @property
    def sum(self) -> float:
        self._sync()
        return self._sum

    @property
    def min(self) -> float:
        self._sync()
        return self._min

    @property
    def max(self) -> float:
        self._sync()
        return self._max

    def update(self, value: float) -> None:
        if self._group is not None:
            self._group.drain()  # keeps the recording order
        with self._lock:
            count = self._count = self._count + 1
            self._sum += value
            if value < self._min:
                self._min = value
            if value > self._max:
                self._max = value
            if len(self._samples) < self.RESERVOIR:
                self._samples.append(value)
            else:
                i = int(self._rand.random() * count)  # uniform in [0, count): random() is one C call
                if i < self.RESERVOIR:
                    self._samples[i] = value

    def _fold(self, values: list[float] | tuple[float, ...]) -> None:
        """Record ``values`` in order (caller holds the lock): the same state as one ``update`` per value."""
        if not values:
            return
        self._sum = sum(values, self._sum)
        low, high = min(values), max(values)
        if low < self._min:
            self._min = low
        if high > self._max:
            self._max = high
        samples = self._samples
        count = self._count
        room = self.RESERVOIR - len(samples)
        rest = values
        if room > 0:
            head = values[:room]
            samples.extend(head)
            count += len(head)
            rest = values[room:]
        rand = self._rand.random
        reservoir = self.RESERVOIR
        for value in rest:
            count += 1
            i = int(rand() * count)  # uniform in [0, count): random() is one C call
            if i < reservoir:
                samples[i] = value
        self._count = count

    @property
    def mean(self) -> float:
        count = self.count
        return self._sum / count if count else 0.0

    def percentile(self, p: float) -> float:
        self._sync()
        with self._lock:
            s = sorted(self._samples)
        if not s:
            return 0.0
        return s[min(len(s) - 1, int(p * len(s)))]

    def quantiles(self, ps: tuple[float, ...]) -> list[float]:
        """Several percentiles from one sort of the reservoir (a scrape reads six at once)."""
        self._sync()
        with self._lock:
            s = sorted(self._samples)
        if not s:
            return [0.0] * len(ps)
        n = len(s)
        return [s[min(n - 1, int(p * n))] for p in ps]

    def snapshot(self) -> dict:
        count = self.count
        return {
            "count": count,
            "mean": self.mean,
            "min": self._min if count else 0.0,
            "max": self._max if count else 0.0,
            "p50": self.percentile(0.5),
            "p99": self.percentile(0.99),
        }


class HistogramGroup:
    """Histograms that are always recorded together (RequestChannel's seven per-request timings of one API).

    :meth:`record_ns` queues one tuple of durations (ns) with a single list append and no lock; the queue is
    folded into the histograms (as ms, negative as 0) in bulk, in recording order, when any of them is read or
    ``FOLD_AT`` records are queued, so every read sees every record made before it and the state is exactly
    that of one ``update`` per value. Thread-safe: any thread records or reads; folding holds the group lock
    (which the histograms share)."""

    FOLD_AT = 256

    def __init__(self, size: int) -> None:
        self._lock = threading.Lock()
        self._pending: list[tuple[int, ...]] = []
        self.histograms = tuple(Histogram(self._lock, self) for _ in range(size))

    def record_ns(self, values_ns: tuple[int, ...]) -> None:
        """Queue one duration (ns) per histogram, in the histograms' order."""
        pending = self._pending
        pending.append(values_ns)
        if len(pending) >= self.FOLD_AT:
            self.drain()

    def drain(self) -> None:
        """Fold the queued records into the histograms. The queue is one list that is only appended to and
        cut from the front (both atomic), so a record queued meanwhile is kept for the next fold."""
        pending = self._pending
        if not pending:
            return
        with self._lock:
            n = len(pending)
            if n == 0:
                return
            batch = pending[:n]
            del pending[:n]
            # zip(*batch): one column of durations per histogram, transposed in C (no generator per histogram)
            for h, column in zip(self.histograms, zip(*batch, strict=True), strict=True):
                h._fold([ns / 1e6 if ns > 0 else 0.0 for ns in column])


class Meter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0
        self._start = time.monotonic()

    def mark(self, n: int = 1) -> None:
        with self._lock:
            self.count += n

    @property
    def mean_rate(self) -> float:
        elapsed = time.monotonic() - self._start
        return self.count / elapsed if elapsed > 0 else 0.0

    def snapshot(self) -> dict:
        return {"count": self.count, "mean_rate": self.mean_rate}


class Gauge:
    def __init__(self, fn: Callable[[], float]) -> None:
        self.fn = fn

    @property
    def value(self) -> float:
        return self.fn()

    def snapshot(self) -> dict:
        return {"value": self.value}


class GaugeFamily:
    """Many gauges of one MBean name that differ by extra keys, read in one pass.

    Kafka registers one gauge per partition (``kafka.log:type=Log,name=Size,topic=t,partition=0``);
    here ``fn()`` yields ``(key values, value)`` with the key values in the order of ``keys``
    (``(("t", 0), 12345)`` for keys ``("topic", "partition")``), so nothing is registered or removed
    per partition and a reader walks the live state once.
    """

    def __init__(self, keys: tuple[str, ...], fn: Callable[[], Iterable[tuple[tuple, float]]]) -> None:
        self.keys = keys
        self.fn = fn

    def values(self) -> list[tuple[tuple, float]]:
        return list(self.fn())

    def snapshot(self) -> dict:
        return {",".join(f"{k}={v}" for k, v in zip(self.keys, kv, strict=True)): value for kv, value in self.fn()}


class IdleRatio:
    """Fraction of wall time spent idle, aggregated over the threads that report to it.

    Each thread reports ``record(idle_ns, total_ns)`` for its loop iterations; the value is
    sum(idle) / sum(total), i.e. Kafka's average idle percentage (0.0-1.0) since start.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.idle_ns = 0
        self.total_ns = 0
        self._readings: list[tuple[float, int, int]] = []  # (monotonic s, idle_ns, total_ns) per recent_value

    def record(self, idle_ns: int, total_ns: int) -> None:
        with self._lock:
            self.idle_ns += idle_ns
            self.total_ns += total_ns

    @property
    def value(self) -> float:
        return self.idle_ns / self.total_ns if self.total_ns else 1.0

    def recent_value(self, window_s: float = 60.0) -> float:
        """The idle fraction since the oldest reading taken in the last ``window_s`` seconds (a
        reporter's scrapes are the readings; before a second reading: since start). Kafka reports these
        as one-minute rates, so a broker that was idle for hours and is busy now reads busy."""
        now = time.monotonic()
        with self._lock:
            idle, total = self.idle_ns, self.total_ns
            readings = self._readings
            while len(readings) > 1 and readings[1][0] <= now - window_s:
                readings.pop(0)
            base = readings[0] if readings else None
            readings.append((now, idle, total))
        if base is not None and total > base[2]:
            return (idle - base[1]) / (total - base[2])
        return idle / total if total else 1.0

    def snapshot(self) -> dict:
        return {"value": self.value}


_M = TypeVar("_M", Histogram, Meter, IdleRatio)

Metric = Histogram | Meter | Gauge | GaugeFamily | IdleRatio
"""Any metric a MetricsRegistry holds."""


class MetricsRegistry:
    """Metrics by JMX-style name. ``histogram(name)`` etc. create on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.metrics: dict[str, Metric] = {}

    def _get(self, name: str, factory: Callable[[], _M]) -> _M:
        m = self.metrics.get(name)
        if m is None:
            with self._lock:
                m = self.metrics.get(name)
                if m is None:
                    m = factory()
                    self.metrics[name] = m
        return cast(_M, m)  # a name is registered with one kind of metric (its first use)

    def histogram(self, name: str) -> Histogram:
        return self._get(name, Histogram)

    def histogram_group(self, names: tuple[str, ...]) -> HistogramGroup | None:
        """A :class:`HistogramGroup` whose histograms are registered as ``names``; None if any of the names
        exists already (the caller then updates those histograms one by one)."""
        with self._lock:
            if any(name in self.metrics for name in names):
                return None
            group = HistogramGroup(len(names))
            for name, h in zip(names, group.histograms, strict=True):
                self.metrics[name] = h
            return group

    def meter(self, name: str) -> Meter:
        return self._get(name, Meter)

    def idle_ratio(self, name: str) -> IdleRatio:
        return self._get(name, IdleRatio)

    def gauge(self, name: str, fn: Callable[[], float]) -> Gauge:
        g = Gauge(fn)
        with self._lock:
            self.metrics[name] = g
        return g

    def gauge_family(
        self, name: str, keys: tuple[str, ...], fn: Callable[[], Iterable[tuple[tuple, float]]]
    ) -> GaugeFamily:
        g = GaugeFamily(keys, fn)
        with self._lock:
            self.metrics[name] = g
        return g

    def get(self, name: str) -> Metric | None:
        return self.metrics.get(name)

    def remove(self, name: str) -> None:
        with self._lock:
            self.metrics.pop(name, None)

    def items(self) -> list[tuple[str, Metric]]:
        """(name, metric) pairs, a copy taken under the lock (for reporters)."""
        with self._lock:
            return list(self.metrics.items())

    def snapshot(self) -> dict[str, dict]:
        with self._lock:
            items = list(self.metrics.items())
        return {name: m.snapshot() for name, m in items}


def request_metric_name(metric: str, api_name: str) -> str:
    return f"kafka.network:type=RequestMetrics,name={metric},request={api_name}"
