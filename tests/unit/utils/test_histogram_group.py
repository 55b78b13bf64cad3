"""Histograms recorded together (RequestChannel's per-request timings, a HistogramGroup that queues records and
folds them in bulk) hold exactly what one-by-one updates give, and every read sees every earlier record."""

from __future__ import annotations

import bisect
import math
import random
import threading

import pytest

from pykbroker.network.request_channel import REQUEST_METRICS, RequestChannel
from pykbroker.utils import metrics
from pykbroker.utils.metrics import GroupMeter, Histogram, HistogramGroup, Meter, MetricsRegistry, request_metric_name
from pykbroker.utils.time import SystemTime
from tests.helpers.requests import stub_request


def _state(h: Histogram) -> tuple:
    return h.count, pytest.approx(h.sum, rel=1e-12), h.min, h.max, pytest.approx(h.mean, rel=1e-12)


@pytest.mark.parametrize("read_every", [1, 7, 10_000])
def test_group_equals_update_one_by_one(read_every):
    """count, sum, min, max, mean exactly as one update per value; the percentiles too while every value is kept
    (up to the reservoir size); past it, every histogram samples the same records (whole rows of the group)."""
    registry = MetricsRegistry()
    names = tuple(f"h{i}" for i in range(3))
    group = registry.histogram_group(names)
    assert group is not None
    assert all(registry.metrics[n] is h for n, h in zip(names, group.histograms, strict=True))
    single = tuple(Histogram() for _ in names)
    rng = random.Random(1)
    records = []
    for i in range(Histogram.RESERVOIR * 2 + 17):  # past the reservoir size: replacement sampling too
        values = tuple(rng.randint(-5, 0) if i == 3 else rng.randint(0, 50_000_000) for _ in names)
        records.append(values)
        group.record_ns(values)
        for h, ns in zip(single, values, strict=True):
            h.update(max(0.0, ns / 1e6))
        if i % read_every == 0:  # a read folds whatever is queued: the same state as one-by-one so far
            assert group.histograms[1].count == single[1].count == i + 1
        if i == Histogram.RESERVOIR - 1:
            for a, b in zip(group.histograms, single, strict=True):
                assert a.quantiles((0.0, 0.5, 0.99, 0.999)) == b.quantiles((0.0, 0.5, 0.99, 0.999))
    for a, b in zip(group.histograms, single, strict=True):
        assert _state(a) == _state(b)
        snap = a.snapshot()
        assert (snap["count"], snap["min"], snap["max"]) == (b.count, b.min, b.max)
    assert group.histograms[0].min == 0.0  # negative durations count as 0 ms
    rows = group._rows
    assert len(rows) == Histogram.RESERVOIR
    assert all(row[:-1] in set(records) for row in rows)  # whole records, not a mix of records
    for j, h in enumerate(group.histograms):
        assert h.quantiles((0.5,)) == [sorted(max(0, row[j]) for row in rows)[len(rows) // 2] / 1e6]


def _reservoir_of(values, seed: int = 0) -> list[int]:
    group = HistogramGroup(1)
    group._rand = random.Random(seed)
    for v in values:
        group.record_ns((v,))
    group.drain()
    return [row[0] for row in group._rows]


def test_reservoir_is_a_uniform_sample_of_the_whole_stream():
    """Records arriving in rising order (value = arrival number): a uniform sample has as many samples from each
    tenth of the stream (about RESERVOIR / 10); keeping the early or the recent records would not."""
    n = 200_000
    counts = [0] * 10
    for seed in range(5):
        sample = _reservoir_of(range(n), seed)
        assert len(sample) == len(set(sample)) == Histogram.RESERVOIR  # a sample without repeats
        for v in sample:
            counts[v * 10 // n] += 1
    expected = 5 * Histogram.RESERVOIR / 10  # 514 per tenth, sd about 21
    assert all(abs(c - expected) < 90 for c in counts), counts


def test_percentiles_stay_close_to_the_true_ones():
    """Log-normal durations (a long tail, as request times), then a shift half way: the reservoir's
    percentiles are within a few percentile points of the stream's."""
    rng = random.Random(7)
    values = [int(rng.lognormvariate(13, 1.0)) for _ in range(60_000)]
    values += [v * 3 for v in values[:60_000]]  # the second half is slower: both halves must count
    group = HistogramGroup(1)
    for v in values:
        group.record_ns((v,))
    true = sorted(values)
    h = group.histograms[0]
    levels = (0.25, 0.5, 0.75, 0.9, 0.95, 0.99)
    for p, got in zip(levels, h.quantiles(levels), strict=True):
        rank = bisect.bisect_left(true, got * 1e6) / len(true)  # where the estimate sits in the true order
        assert abs(rank - p) < 0.03 + 3 * (p * (1 - p) / Histogram.RESERVOIR) ** 0.5, (p, rank)
    assert h.count == len(values)
    assert h.sum == pytest.approx(sum(values) / 1e6, rel=1e-12)
    assert (h.min, h.max) == (min(values) / 1e6, max(values) / 1e6)


def test_random_draws_only_for_records_that_enter_the_reservoir(monkeypatch):
    """Algorithm L: far fewer random draws than records once the reservoir is full (one per record and
    histogram would be 7 per request for RequestChannel's groups)."""

    class CountingRandom(random.Random):
        draws = 0

        def random(self) -> float:
            CountingRandom.draws += 1
            return super().random()

    monkeypatch.setattr(metrics.random, "Random", CountingRandom)  # every generator the group makes
    group = HistogramGroup(7)
    n = 100_000
    for i in range(n):
        group.record_ns((i, i, i, i, i, i, i))
    assert group.histograms[6].count == n
    bound = 3 * Histogram.RESERVOIR * (1 + math.log(n / Histogram.RESERVOIR))  # about 3 draws per entry
    assert CountingRandom.draws < bound < n / 5


def test_group_meter_counts_every_record_exactly_under_concurrent_writers_and_readers():
    """Several Processors record the same API's requests: the GroupMeter (RequestsPerSec) loses nothing, and
    every read sees the records made before it."""
    registry = MetricsRegistry()
    group = registry.histogram_group(("a",))
    assert group is not None
    meter = registry.group_meter("m", group)
    other = registry.group_meter("m2", group)
    assert isinstance(meter, GroupMeter) and isinstance(meter, Meter)
    assert registry.group_meter("m", group) is meter
    group.record((5, meter))
    assert meter.count == 1 and other.count == 0
    assert meter.snapshot()["count"] == 1
    stop = threading.Event()
    seen: list[int] = []

    def record(m: GroupMeter) -> None:
        for _ in range(20_000):
            group.record((1_000, m))

    def read() -> None:
        while not stop.is_set():
            seen.append(meter.count)

    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=record, args=(m,)) for m in (meter, meter, meter, other)]
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    reader.join()
    assert meter.count == 60_001
    assert other.count == 20_000
    assert group.histograms[0].count == 80_001
    assert seen == sorted(seen)  # never goes back
    meter.mark(2)
    assert meter.count == 60_003


def test_a_group_histogram_is_recorded_through_its_group_only():
    group = HistogramGroup(1)
    with pytest.raises(TypeError):
        group.histograms[0].update(1.0)
    assert group.histograms[0].snapshot() == {"count": 0, "mean": 0.0, "min": 0.0, "max": 0.0, "p50": 0.0, "p99": 0.0}


def test_every_read_sees_earlier_records_and_the_queue_stays_bounded():
    group = HistogramGroup(2)
    group.record_ns((1_000_000, 2_000_000))
    h0, h1 = group.histograms
    assert (h0.count, h0.sum, h0.max) == (1, 1.0, 1.0)
    assert h1.percentile(0.5) == 2.0
    for _ in range(HistogramGroup.FOLD_AT * 3):
        group.record_ns((1, 1))
    assert len(group._pending) < HistogramGroup.FOLD_AT


def test_concurrent_recording_loses_nothing():
    group = HistogramGroup(1)

    def record() -> None:
        for _ in range(5_000):
            group.record_ns((1_000,))

    threads = [threading.Thread(target=record) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert group.histograms[0].count == 20_000


def test_histogram_group_is_none_when_a_name_exists():
    registry = MetricsRegistry()
    existing = registry.histogram("b")
    assert registry.histogram_group(("a", "b")) is None
    assert registry.metrics["b"] is existing
    assert "a" not in registry.metrics


def test_request_channel_records_seven_histograms_and_throttle_time():
    channel = RequestChannel(queue_size=10, metric_prefix="", time=SystemTime(), metrics=MetricsRegistry())

    request = stub_request(
        start_ns=1_000_000,
        dequeue_ns=3_000_000,
        local_complete_ns=4_000_000,
        response_complete_ns=4_500_000,
        response_dequeue_ns=-1,  # never dequeued: counts as response_complete_time_ns
        throttle_time_ms=2,
    )
    channel.update_request_metrics(request, 10_000_000)  # type: ignore[arg-type]
    got = {m: channel.metrics.metrics[request_metric_name(m, "Produce")] for m in REQUEST_METRICS}
    expected = {
        "RequestQueueTimeMs": 2.0,
        "LocalTimeMs": 1.0,
        "RemoteTimeMs": 0.5,
        "ResponseQueueTimeMs": 0.0,
        "ResponseSendTimeMs": 5.5,
        "TotalTimeMs": 9.0,
        "ThrottleTimeMs": 2.0,
    }
    for metric, value in expected.items():
        h = got[metric]
        assert isinstance(h, Histogram)
        assert (h.count, h.sum, h.min, h.max) == (1, value, value, value), metric


def test_request_channel_counts_requests_per_sec_per_version_and_fetch_kind():
    """RequestsPerSec per API and version (a GroupMeter of the API's group, exact at every read), and a Fetch
    also under FetchFollower / FetchConsumer, whose timings and meters are their own."""
    registry = MetricsRegistry()
    channel = RequestChannel(queue_size=10, metric_prefix="", time=SystemTime(), metrics=registry)

    def per_sec(api: str, version: int):
        return registry.get(f"kafka.network:type=RequestMetrics,name=RequestsPerSec,request={api},version={version}")

    for i in range(HistogramGroup.FOLD_AT + 3):
        channel.update_request_metrics(stub_request("Produce", 9 if i % 3 else 11), 5_000_000)  # type: ignore[arg-type]
        if i == 0:
            assert per_sec("Produce", 11).count == 1
            assert per_sec("Produce", 9) is None  # registered at its first request
    assert (per_sec("Produce", 9).count, per_sec("Produce", 11).count) == (172, 87)
    assert isinstance(per_sec("Produce", 9), GroupMeter)
    assert registry.get(request_metric_name("TotalTimeMs", "Produce")).count == 259
    follower = stub_request("Fetch", 16, {"replica_state": {"replica_id": 2}})
    consumer = stub_request("Fetch", 11, {"replica_id": -1})
    for request in (follower, follower, consumer):
        channel.update_request_metrics(request, 6_000_000)  # type: ignore[arg-type]
    assert (per_sec("Fetch", 16).count, per_sec("Fetch", 11).count) == (2, 1)
    assert (per_sec("FetchFollower", 16).count, per_sec("FetchConsumer", 11).count) == (2, 1)
    assert per_sec("FetchConsumer", 16) is None
    assert registry.get(request_metric_name("TotalTimeMs", "Fetch")).count == 3
    assert registry.get(request_metric_name("ResponseSendTimeMs", "FetchFollower")).sum == 4.0
    assert registry.get(request_metric_name("LocalTimeMs", "FetchConsumer")).max == 1.0


def test_request_channel_updates_metrics_registered_before_one_by_one():
    """A name registered before the channel's first request of that API (a plain Histogram and Meter) is still
    recorded, one update per request."""
    registry = MetricsRegistry()
    histogram = registry.histogram(request_metric_name("TotalTimeMs", "Produce"))
    meter = registry.meter("kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,version=9")
    channel = RequestChannel(queue_size=10, metric_prefix="", time=SystemTime(), metrics=registry)
    for _ in range(3):
        channel.update_request_metrics(stub_request("Produce", 9), 5_000_000)  # type: ignore[arg-type]
    assert (histogram.count, histogram.max, meter.count) == (3, 5.0, 3)
    assert registry.get(request_metric_name("LocalTimeMs", "Produce")).count == 3


def test_two_request_channels_of_one_registry_share_an_apis_metrics():
    """The data-plane and control-plane RequestChannels share the broker's registry (and the metric names):
    both record into the same histograms and RequestsPerSec meter."""
    registry = MetricsRegistry()
    data = RequestChannel(queue_size=10, metric_prefix="", time=SystemTime(), metrics=registry)
    control = RequestChannel(queue_size=10, metric_prefix="ControlPlane", time=SystemTime(), metrics=registry)
    for channel in (data, control, control):
        channel.update_request_metrics(stub_request("ApiVersions", 3), 5_000_000)  # type: ignore[arg-type]
    total = registry.get(request_metric_name("TotalTimeMs", "ApiVersions"))
    assert (total.count, total.sum) == (3, 15.0)
    meter = registry.get("kafka.network:type=RequestMetrics,name=RequestsPerSec,request=ApiVersions,version=3")
    assert meter.count == 3
    assert registry.histogram_group(tuple(request_metric_name(m, "ApiVersions") for m in REQUEST_METRICS)) is (
        total._group
    )
    assert registry.histogram_group(tuple(request_metric_name(m, "ApiVersions") for m in REQUEST_METRICS[:2])) is None


def test_a_name_of_another_group_is_left_to_that_group():
    """Some of an API's names registered otherwise (one by another group): the plain ones are updated one by one,
    the other group's histogram is not touched, and nothing raises."""
    registry = MetricsRegistry()
    other = registry.histogram_group((request_metric_name("LocalTimeMs", "Produce"),))
    assert other is not None
    channel = RequestChannel(queue_size=10, metric_prefix="", time=SystemTime(), metrics=registry)
    for _ in range(2):
        channel.update_request_metrics(stub_request("Produce", 9), 5_000_000)  # type: ignore[arg-type]
    assert registry.get(request_metric_name("TotalTimeMs", "Produce")).count == 2
    assert other.histograms[0].count == 0
    meter = registry.get("kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,version=9")
    assert type(meter) is Meter and meter.count == 2
