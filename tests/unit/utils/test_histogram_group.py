"""Histograms recorded together (RequestChannel's per-request timings) hold exactly what one-by-one updates give."""

from __future__ import annotations

import random

from pykbroker.network.request_channel import REQUEST_METRICS, RequestChannel
from pykbroker.utils.metrics import Histogram, MetricsRegistry, record_ns_as_ms, request_metric_name
from pykbroker.utils.time import SystemTime


def _state(h: Histogram) -> tuple:
    return h.count, h.sum, h.min, h.max, list(h._samples)


def test_record_ns_as_ms_equals_update_one_by_one():
    registry = MetricsRegistry()
    names = tuple(f"h{i}" for i in range(3))
    group = registry.histogram_group(names)
    assert group is not None
    grouped, lock = group
    assert all(registry.metrics[n] is h for n, h in zip(names, grouped, strict=True))
    single = tuple(Histogram() for _ in names)
    rng = random.Random(1)
    for i in range(Histogram.RESERVOIR * 2 + 17):  # past the reservoir size: replacement sampling too
        values = tuple(rng.randint(-5, 0) if i == 3 else rng.randint(0, 50_000_000) for _ in names)
        record_ns_as_ms(grouped, lock, values)
        for h, ns in zip(single, values, strict=True):
            h.update(max(0.0, ns / 1e6))
    for a, b in zip(grouped, single, strict=True):
        assert _state(a) == _state(b)
    assert grouped[0].min == 0.0  # negative durations count as 0 ms


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
        assert (h.count, h.sum, h.min, h.max) == (1, value, value, value), metric
