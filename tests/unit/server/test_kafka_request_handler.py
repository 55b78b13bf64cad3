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
