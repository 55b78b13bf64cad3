"""queued.max.request.bytes on a whole broker (in-process): real clients produce and consume through a
memory pool barely larger than one request, and every byte goes back to the pool afterwards."""

from __future__ import annotations

import pytest

from pykbroker.config.kafka_config import KafkaConfig
from pykbroker.server.kafka_raft_server import KafkaRaftServer
from tests.helpers.broker import DEFAULTS
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until
from tests.integration.data_path_clients import confluent_consume, confluent_produce, index_of

pytestmark = pytest.mark.integration

REQUEST_MAX = 1024 * 1024


@pytest.fixture
def server(tmp_path):
    props = dict(
        DEFAULTS,
        **{
            "log.dirs": str(tmp_path / "logs"),
            "socket.request.max.bytes": str(REQUEST_MAX),
            "queued.max.request.bytes": str(REQUEST_MAX + 1),
        },
    )
    s = KafkaRaftServer(KafkaConfig(props))
    s.startup()
    yield s
    s.shutdown()


def test_produce_and_consume_through_a_small_request_memory_pool(server):
    bootstrap = f"127.0.0.1:{server.bound_port('PLAINTEXT')}"
    create_topic(bootstrap, "pool", 6)
    n = 50_000
    confluent_produce(bootstrap, "pool", n, "none")
    records = confluent_consume(bootstrap, "pool", n, 6)
    assert sorted(index_of(r[3]) for r in records) == list(range(n))
    used = server.metrics.get("kafka.network:type=SocketServer,name=MemoryPoolUsed")
    wait_until(lambda: used.value == 0, timeout=10, message="request memory returned to the pool")
    assert server.metrics.get("kafka.network:type=SocketServer,name=MemoryPoolAvailable").value == REQUEST_MAX + 1
