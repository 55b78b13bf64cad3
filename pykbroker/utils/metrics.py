"""A small metrics registry with Kafka's metric names (exposed by ``pykbroker.metrics`` reporters).

Names follow JMX style: ``kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce``.
Kinds: :class:`Histogram` (count, sum, min, max, mean, percentiles from a bounded reservoir),
:class:`Meter` (count and rate since start), :class:`Gauge` (a callable), :class:`IdleRatio`
(time-weighted idle percentage, for NetworkProcessorAvgIdlePercent / RequestHandlerAvgIdlePercent),
:class:`GaugeFamily` (per-partition gauges read in one pass). Every kind is thread-safe; recording
costs one lock acquisition. A Meter's ``count`` may instead be advanced by an owner that serialises all
of that meter's writers under its own lock (BrokerTopicStats: one lock per request for every topic).
A :class:`HistogramGroup` records several histograms and a :class:`GroupMeter` with one lock-free list
append per record (RequestChannel's per-request metrics), folded in bulk.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from math import exp, log, log1p
from typing import TypeVar, cast


class Histogram:
    """count, sum, min, max and a uniform reservoir of ``RESERVOIR`` samples (Dropwizard's UniformReservoir:
    one random draw per update once full). Thread-safe: one lock acquisition per update."""

    RESERVOIR = 1028

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._sum = 0.0
        self._min = float("inf")
        self._max = float("-inf")
        self._samples: list[float] = []
        self._rand = random.Random(0)

    @property
    def count(self) -> int:
        return self._count

    @property
    def sum(self) -> float:
        return self._sum

    @property
    def min(self) -> float:
        return self._min

    @property
    def max(self) -> float:
        return self._max

    def update(self, value: float) -> None:
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

    @property
    def mean(self) -> float:
        count = self.count
        return self._sum / count if count else 0.0

    def _sorted_samples(self) -> list[float]:
        """The reservoir's samples, sorted, in the unit read (a subclass keeping them otherwise overrides this)."""
        with self._lock:
            return sorted(self._samples)

    def percentile(self, p: float) -> float:
        return self.quantiles((p,))[0]

    def quantiles(self, ps: tuple[float, ...]) -> list[float]:
        """Several percentiles from one sort of the reservoir (a scrape reads six at once)."""
        s = self._sorted_samples()
        if not s:
            return [0.0] * len(ps)
        n = len(s)
        return [s[min(n - 1, int(p * n))] for p in ps]

    def snapshot(self) -> dict:
        count = self.count
        p50, p99 = self.quantiles((0.5, 0.99))
        return {
            "count": count,
            "mean": self.mean,
            "min": self.min if count else 0.0,
            "max": self.max if count else 0.0,
            "p50": p50,
            "p99": p99,
        }


class HistogramGroup:
    """Histograms that are always recorded together (RequestChannel's seven per-request timings of one API),
    with the RequestsPerSec :class:`GroupMeter` s those records count.

    :meth:`record` queues one tuple ``(d_0, ..., d_{size-1}, meter)`` of durations (ns, int) and a GroupMeter of
    this group (or None) with a single list append and no lock. The queue is folded in bulk, in recording order,
    when any histogram or meter of the group is read or ``FOLD_AT`` records are queued, so every read sees every
    record made before it. A fold keeps, per histogram, the exact count, sum, min and max (in ns: negative
    durations count as 0), and counts each record's meter; the percentiles come from ONE reservoir of
    ``Histogram.RESERVOIR`` whole records shared by the histograms (each histogram's samples are a column of it,
    converted to ms on read). The reservoir is a uniform random sample of all records (Vitter/Li's Algorithm L:
    the same distribution as Dropwizard's one-draw-per-update Algorithm R, but random draws only for the
    records that enter, about ``RESERVOIR * ln(count / RESERVOIR)`` in all), so each histogram's samples are a
    uniform sample of its values, as with a reservoir of its own.

    Thread-safe: any thread records or reads; folding holds the group lock. Every count of the group's histograms
    and meters is written only under that lock."""

    FOLD_AT = 256

    def __init__(self, size: int) -> None:
        self._lock = threading.Lock()
        self._pending: list[tuple] = []
        self.size = size
        self._count = 0
        self._sums = [0] * size  # ns
        self._mins: list[float] = [float("inf")] * size  # ns
        self._maxs: list[float] = [float("-inf")] * size  # ns
        self._rows: list[tuple] = []  # the reservoir: whole records
        self._rand = random.Random(0)
        self._w = 0.0  # Algorithm L's running W (set when the reservoir fills)
        self._next = 0  # the 1-based record number that enters the reservoir next (once full)
        self.histograms = tuple(GroupHistogram(self, j) for j in range(size))

    def record(self, record: tuple) -> None:
        """Queue ``(d_0, ..., d_{size-1}, meter)``: one duration (ns, int) per histogram in the histograms'
        order, then a :class:`GroupMeter` of this group to mark once, or None."""
        pending = self._pending
        pending.append(record)
        if len(pending) >= self.FOLD_AT:
            self.drain()

    def record_ns(self, values_ns: tuple[int, ...]) -> None:
        """Queue one duration (ns) per histogram, in the histograms' order (no meter)."""
        self.record((*values_ns, None))

    def meter(self) -> GroupMeter:
        """A new :class:`GroupMeter` counted by this group's records (see :meth:`record`)."""
        return GroupMeter(self)

    def drain(self) -> None:
        """Fold the queued records in. The queue is one list that is only appended to and cut from the front
        (both atomic), so a record queued meanwhile is kept for the next fold."""
        pending = self._pending
        if not pending:
            return
        with self._lock:
            n = len(pending)
            if n == 0:
                return
            batch = pending[:n]
            del pending[:n]
            self._fold(batch)

    def _fold(self, batch: list[tuple]) -> None:
        size = self.size
        columns = list(zip(*batch, strict=True))  # transposed in C: one column per histogram, then the meters
        sums, mins, maxs = self._sums, self._mins, self._maxs
        for j in range(size):
            column: Sequence[int] = columns[j]
            low = min(column)
            if low < 0:
                column = [v if v > 0 else 0 for v in column]
                low = 0
            sums[j] += sum(column)
            if low < mins[j]:
                mins[j] = low
            high = max(column)
            if high > maxs[j]:
                maxs[j] = high
        meters = columns[size]
        if meters.count(None) != len(meters):
            for meter, k in Counter(meters).items():
                if meter is not None:
                    meter._count += k
        self._sample(batch)

    def _sample(self, batch: list[tuple]) -> None:
        """Algorithm L (Li 1994): after the reservoir fills, the gap to the next record that enters is drawn
        directly (geometric with a falling W), and that record replaces a uniformly chosen slot."""
        rows = self._rows
        reservoir = Histogram.RESERVOIR
        before = self._count
        count = self._count = before + len(batch)
        room = reservoir - len(rows)
        if room > 0:
            rows.extend(batch[:room])
            if len(rows) < reservoir:
                return
            self._w = exp(log(self._uniform()) / reservoir)
            self._next = reservoir + self._gap()
        rand = self._rand.random
        while self._next <= count:
            rows[int(rand() * reservoir)] = batch[self._next - before - 1]
            self._w *= exp(log(self._uniform()) / reservoir)
            self._next += self._gap()

    def _uniform(self) -> float:
        """Uniform in (0, 1)."""
        u = self._rand.random()
        while u == 0.0:
            u = self._rand.random()
        return u

    def _gap(self) -> int:
        """How many records from the last one taken to the next one taken (>= 1)."""
        w = self._w
        if w >= 1.0:  # W rounded to 1.0 (a vanishing chance): the next record enters, as in the limit
            return 1
        return int(log(self._uniform()) / log1p(-w)) + 1

    def _column_ns(self, j: int) -> list[int]:
        """Histogram ``j``'s reservoir samples (ns, negative as 0), sorted; caller holds the lock."""
        return sorted(v if v > 0 else 0 for v in (row[j] for row in self._rows))


class GroupHistogram(Histogram):
    """Histogram ``index`` of a :class:`HistogramGroup` (a column of its records): read like a Histogram (ms);
    recorded only through its group (:meth:`update` raises TypeError). Thread-safe as its group."""

    def __init__(self, group: HistogramGroup, index: int) -> None:
        self._lock = group._lock
        self._group = group
        self._index = index

    def update(self, value: float) -> None:
        raise TypeError("a HistogramGroup's histogram is recorded through HistogramGroup.record")

    @property
    def count(self) -> int:
        self._group.drain()
        return self._group._count

    @property
    def sum(self) -> float:
        self._group.drain()
        return self._group._sums[self._index] / 1e6

    @property
    def min(self) -> float:
        self._group.drain()
        low = self._group._mins[self._index]
        return low / 1e6 if self._group._count else low

    @property
    def max(self) -> float:
        self._group.drain()
        high = self._group._maxs[self._index]
        return high / 1e6 if self._group._count else high

    @property
    def mean(self) -> float:
        group = self._group
        group.drain()
        with group._lock:
            count, total = group._count, group._sums[self._index]
        return total / 1e6 / count if count else 0.0

    def _sorted_samples(self) -> list[float]:
        group = self._group
        group.drain()
        with group._lock:
            s = group._column_ns(self._index)
        return [v / 1e6 for v in s]


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


class GroupMeter(Meter):
    """A :class:`Meter` counted by the records of a :class:`HistogramGroup` (RequestsPerSec of one API and
    version, counted by the requests whose timings the group records): its count is written only under the
    group's lock (a fold, or :meth:`mark`), and reading it folds the group's queued records first, so it is
    exact. Thread-safe."""

    def __init__(self, group: HistogramGroup) -> None:
        self._lock = group._lock
        self._group = group
        self._count = 0
        self._start = time.monotonic()

    @property
    def count(self) -> int:  # type: ignore[override]  # read-only: written under the group lock only
        self._group.drain()
        return self._count

    def mark(self, n: int = 1) -> None:
        with self._lock:
            self._count += n


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
        """A :class:`HistogramGroup` whose histograms are registered as ``names`` (in order): a new one, or the
        one registered as exactly ``names`` before (two RequestChannels of one registry share an API's group);
        None if some of the names are registered otherwise (the caller then updates those one by one)."""
        with self._lock:
            existing = [self.metrics.get(name) for name in names]
            if all(m is None for m in existing):
                group = HistogramGroup(len(names))
                for name, h in zip(names, group.histograms, strict=True):
                    self.metrics[name] = h
                return group
            first = existing[0]
            if isinstance(first, GroupHistogram) and first._group.histograms == tuple(existing):
                return first._group
            return None

    def meter(self, name: str) -> Meter:
        return self._get(name, Meter)

    def group_meter(self, name: str, group: HistogramGroup) -> Meter:
        """The meter registered as ``name``: a new :class:`GroupMeter` counted by ``group``'s records, or the
        Meter registered before (the caller then marks it itself: a GroupMeter of another group, or a Meter)."""
        return self._get(name, group.meter)

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
