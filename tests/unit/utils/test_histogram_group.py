"""Histograms recorded together (RequestChannel's per-request timings, a HistogramGroup that queues records and
folds them in bulk) hold exactly what one-by-one updates give, and every read sees every earlier record."""

from __future__ import annotations

import random
import threading

import pytest

from pykbroker.network.request_channel import REQUEST_METRICS, RequestChannel
from pykbroker.utils.metrics import Histogram, HistogramGroup, MetricsRegistry, request_metric_name
from pykbroker.utils.time import SystemTime


def _state(h: Histogram) -> tuple:
    return h.count, pytest.approx(h.sum, rel=1e-12), h.min, h.max, list(h._samples)


@pytest.mark.parametrize("read_every", [1, 7, 10_000])
def test_group_equals_update_one_by_one(read_every):
    registry = MetricsRegistry()
    names = tuple(f"h{i}" for i in range(3))
    group = registry.histogram_group(names)
    assert group is not None
    assert all(registry.metrics[n] is h for n, h in zip(names, group.histograms, strict=True))
    single = tuple(Histogram() for _ in names)
    rng = random.Random(1)
    for i in range(Histogram.RESERVOIR * 2 + 17):  # past the reservoir size: replacement sampling too
        values = tuple(rng.randint(-5, 0) if i == 3 else rng.randint(0, 50_000_000) for _ in names)
        group.record_ns(values)
        for h, ns in zip(single, values, strict=True):
            h.update(max(0.0, ns / 1e6))
        if i % read_every == 0:  # a read folds whatever is queued: the same state as one-by-one so far
            assert group.histograms[1].count == single[1].count == i + 1
    for a, b in zip(group.histograms, single, strict=True):
        assert _state(a) == _state(b)
        assert a.quantiles((0.5, 0.99)) == b.quantiles((0.5, 0.99))
        assert a.snapshot()["mean"] == pytest.approx(b.snapshot()["mean"])
    assert group.histograms[0].min == 0.0  # negative durations count as 0 ms


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

    class _Header:
        api_version = 9

    class _Context:
        header = _Header()

    class _Request:
        api_name = "Produce"
        context = _Context()
        body = None
        start_time_ns = 1_000_000
        request_dequeue_time_ns = 3_000_000
        api_local_complete_time_ns = 4_000_000
        response_complete_time_ns = 4_500_000
        response_dequeue_time_ns = -1  # never dequeued: counts as response_complete_time_ns
        api_throttle_time_ms = 2

    channel.update_request_metrics(_Request(), 10_000_000)  # type: ignore[arg-type]
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
