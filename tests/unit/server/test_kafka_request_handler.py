"""KafkaRequestHandlerPool names its threads, idle metric and log prefix after its plane, as Kafka does:
``data-plane-kafka-request-handler-<i>`` / ``RequestHandlerAvgIdlePercent`` for the data plane,
``control-plane-kafka-request-handler-<i>`` / ``ControlPlaneRequestHandlerAvgIdlePercent`` for the
control plane; every request taken off the RequestChannel reaches ``KafkaApis.handle`` on one of them."""

from __future__ import annotations

import io
import threading
from types import SimpleNamespace

import pytest

from pykbroker.network.request_channel import Request, RequestChannel, RequestContext
from pykbroker.server.kafka_request_handler import KafkaRequestHandlerPool
from pykbroker.utils import logging as plog
from pykbroker.utils.metrics import MetricsRegistry
from tests.helpers.wait import wait_until


class _RecordingApis:
    def __init__(self):
        self.handled: list[tuple[str, int]] = []
        self.done = threading.Event()

    def handle(self, request):
        self.handled.append((threading.current_thread().name, request.header.correlation_id))
        self.done.set()


def _request(correlation_id: int) -> Request:
    header = SimpleNamespace(api_key=18, api_version=3, correlation_id=correlation_id, client_id="c")
    context = RequestContext(header, "conn-1", "127.0.0.1", 5555, "PLAINTEXT", "PLAINTEXT")
    return Request(0, context, {}, b"", 0, "ApiVersions", 0)


@pytest.fixture
def log_stream():
    saved = plog.saved_config()
    stream = io.StringIO()
    plog.configure("info", stream=stream)
    yield stream
    plog.restore(saved)


@pytest.mark.parametrize(
    "plane, threads, metric",
    [
        ("data-plane", 2, "kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent"),
        ("control-plane", 1, "kafka.server:type=KafkaRequestHandlerPool,name=ControlPlaneRequestHandlerAvgIdlePercent"),
    ],
)
def test_pool_names_threads_metric_and_log_prefix_after_its_plane(plane, threads, metric, log_stream):
    metrics = MetricsRegistry()
    channel = RequestChannel(20, "ControlPlane" if plane == "control-plane" else "", metrics=metrics)
    apis = _RecordingApis()
    pool = KafkaRequestHandlerPool(7, channel, apis, threads, plane, metrics)
    try:
        assert [h.name for h in pool.handlers] == [f"{plane}-kafka-request-handler-{i}" for i in range(threads)]
        assert all(h.daemon and h.is_alive() for h in pool.handlers)
        assert pool.idle is metrics.get(metric)
        channel.send_request(_request(42))
        assert apis.done.wait(5)
        name, correlation_id = apis.handled[0]
        assert correlation_id == 42 and name.startswith(f"{plane}-kafka-request-handler-")
    finally:
        pool.shutdown()
    assert all(not h.is_alive() for h in pool.handlers)
    lines = log_stream.getvalue().splitlines()
    assert any(f"[{plane} Kafka Request Handler on Broker 7] shut down completely" in line for line in lines)
    other = "data-plane" if plane == "control-plane" else "control-plane"
    assert not any(other in line for line in lines)


def test_handler_survives_an_exception_from_kafka_apis(log_stream):
    class _Failing(_RecordingApis):
        def handle(self, request):
            super().handle(request)
            if request.header.correlation_id == 1:
                raise RuntimeError("boom")

    channel = RequestChannel(20)
    apis = _Failing()
    pool = KafkaRequestHandlerPool(3, channel, apis, 1)
    try:
        channel.send_request(_request(1))
        channel.send_request(_request(2))
        wait_until(lambda: [c for _, c in apis.handled] == [1, 2], timeout=5)
        assert pool.handlers[0].is_alive()
    finally:
        pool.shutdown()
    assert "[Kafka Request Handler 0 on Broker 3] Exception when handling request" in log_stream.getvalue()


def test_unknown_plane_is_refused():
    with pytest.raises(ValueError, match="Unknown request plane"):
        KafkaRequestHandlerPool(1, RequestChannel(20), _RecordingApis(), 1, "dataplane")


class _FakeProcessor:
    """Records, at each wake-up, how many handlers were parked on the request queue (its enqueued responses are
    dropped: only the wake-up's timing matters here)."""

    id = 0

    def __init__(self, channel: RequestChannel):
        self.channel = channel
        self.parked_at_wakeup: list[int] = []
        self.woken = threading.Event()

    def enqueue_response(self, response, wakeup: bool = True) -> None:
        if wakeup:
            self.wakeup()

    def wakeup(self) -> None:
        self.parked_at_wakeup.append(len(self.channel.request_queue._parked))
        self.woken.set()


def test_the_processor_is_woken_once_the_handler_is_parked_for_its_next_request():
    """Issue 31: a handler answers, then wakes the answered Processor only once its own lock is parked on the
    request queue (the next thing it does is release the GIL), so the woken Processor does not wait for it."""

    class _Answering(_RecordingApis):
        def handle(self, request):
            super().handle(request)
            channel.send_no_op_response(request)

    channel = RequestChannel(20)
    processor = _FakeProcessor(channel)
    channel.add_processor(processor)
    apis = _Answering()
    pool = KafkaRequestHandlerPool(1, channel, apis, 1)
    try:
        wait_until(lambda: len(channel.request_queue._parked) == 1, timeout=5)
        channel.send_request(_request(1))
        assert processor.woken.wait(5)
        assert processor.parked_at_wakeup == [1]  # woken by a parked handler, not one still running
        channel.send_request(_request(2))
        wait_until(lambda: len(processor.parked_at_wakeup) == 2, timeout=5)
        assert processor.parked_at_wakeup == [1, 1]
    finally:
        pool.shutdown()
