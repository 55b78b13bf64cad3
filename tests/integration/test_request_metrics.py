"""Issue 2: request metrics per API, read from the broker's MetricsRegistry (in-process broker)."""

from __future__ import annotations

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.config.kafka_config import KafkaConfig
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server.kafka_raft_server import KafkaRaftServer
from pykbroker.utils.metrics import request_metric_name
from tests.helpers.broker import DEFAULTS
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def server(tmp_path):
    props = dict(DEFAULTS, **{"log.dirs": str(tmp_path / "logs")})
    s = KafkaRaftServer(KafkaConfig(props))
    s.startup()
    yield s
    s.shutdown()


def test_request_metrics_are_recorded_per_api(server):
    with BrokerConnection("127.0.0.1", server.bound_port("PLAINTEXT")) as conn:
        for _ in range(5):
            conn.request(ApiKeys.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        conn.request(
            ApiKeys.METADATA,
            12,
            {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
        )
    metrics = server.metrics
    # As in Kafka, a request's metrics are updated when its send completes in the Processor, which
    # can be just after the client has read the response: wait (bounded) for the last one.
    wait_until(
        lambda: metrics.get(request_metric_name("TotalTimeMs", "Metadata")) is not None,
        timeout=5.0,
        message="Metadata request metrics never recorded",
    )
    for name in (
        "RequestQueueTimeMs",
        "LocalTimeMs",
        "RemoteTimeMs",
        "ResponseQueueTimeMs",
        "ResponseSendTimeMs",
        "TotalTimeMs",
    ):
        api_versions = metrics.get(request_metric_name(name, "ApiVersions"))
        assert api_versions is not None and api_versions.count == 5, name
        assert api_versions.min >= 0.0
        assert metrics.get(request_metric_name(name, "Metadata")).count == 1, name
    total = metrics.get(request_metric_name("TotalTimeMs", "ApiVersions"))
    local = metrics.get(request_metric_name("LocalTimeMs", "ApiVersions"))
    assert total.sum >= local.sum  # the total covers every phase
    assert metrics.get(request_metric_name("TotalTimeMs", "Produce")) is None  # nothing produced
    idle = [
        m.value
        for n, m in metrics.metrics.items()
        if n.endswith("RequestHandlerAvgIdlePercent") or n.endswith("NetworkProcessorAvgIdlePercent")
    ]
    assert len(idle) >= 2 and all(0.0 <= v <= 1.0 for v in idle), idle
