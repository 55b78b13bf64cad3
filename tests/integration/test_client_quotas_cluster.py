"""Client quotas on a 3-node cluster (three combined broker+controller nodes).

Quotas are cluster metadata (ClientQuotaRecords): one set with kafka-configs through one node and others with
the Admin API's AlterClientQuotas through another read back identically from every node (DescribeClientQuotas
against each), and a producer over its ``producer_byte_rate`` is throttled by every broker it writes to (each
broker measures its own share, as in Kafka: partition leaders on the three nodes, throttle events from all three,
and each node's /metrics shows its throttle-time sensor for the client).
"""

from __future__ import annotations

import re
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.cluster import KRaftCluster
from tests.helpers.tools import run_tool
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

TOPIC = "quota-cluster"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = KRaftCluster(
        tmp_path_factory.mktemp("quota-cluster"),
        controllers=3,
        brokers=0,
        combined=True,
        quota_window_num="2",
        offsets_topic_num_partitions="1",
        metric_reporters="pykbroker.metrics.prometheus.PrometheusReporter",
        prometheus_metrics_listener="127.0.0.1:0",
    )
    try:
        c.start()
        yield c
    finally:
        c.stop()


def quota_throttle_time(node, client_id: str) -> float:
    """The node's ``kafka_server_quota_throttle_time`` of Produce for ``client_id`` on /metrics (0 if absent)."""
    line = node.wait_for_line(r"Prometheus metrics endpoint listening on \S+:\d+")
    assert line is not None
    host, port = re.search(r"listening on (\S+):(\d+)", line).groups()
    page = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10).read().decode()
    for family in text_string_to_metric_families(page):
        for s in family.samples:
            if s.name == "kafka_server_quota_throttle_time" and s.labels == {
                "resource": "Produce",
                "user": "",
                "clientId": client_id,
            }:
                return s.value
    return 0.0


def describe_all(bootstrap: str) -> list[tuple]:
    """Every client quota a node describes (DescribeClientQuotas, no filter), as sorted (entity, values) tuples."""
    with BrokerConnection.to(bootstrap) as conn:
        r = conn.request(ApiKeys.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False})
    assert r["error_code"] == 0, r
    return sorted(
        (
            tuple(sorted((e["entity_type"], e["entity_name"]) for e in entry["entity"])),
            tuple(sorted((v["key"], v["value"]) for v in entry["values"])),
        )
        for entry in r["entries"]
    )


def test_quotas_read_back_identically_from_every_node_and_throttle_on_every_broker(cluster):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    nodes = list(cluster.brokers.values())
    run = run_tool(
        "config_command", "--bootstrap-server", nodes[0].bootstrap, "--alter", "--client", "q-limited",
        "--add-config", "producer_byte_rate=50000",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    with BrokerConnection.to(nodes[1].bootstrap, client_id="admin") as conn:  # the Admin API's request
        r = conn.request(
            ApiKeys.ALTER_CLIENT_QUOTAS,
            1,
            {
                "entries": [
                    {
                        "entity": [{"entity_type": "user", "entity_name": "alice"}],
                        "ops": [{"key": "consumer_byte_rate", "value": 2e6, "remove": False}],
                    },
                    {
                        "entity": [{"entity_type": "ip", "entity_name": None}],
                        "ops": [{"key": "connection_creation_rate", "value": 1000.0, "remove": False}],
                    },
                ],
                "validate_only": False,
            },
        )
    assert [e["error_code"] for e in r["entries"]] == [0, 0], r
    expected = [
        ((("client-id", "q-limited"),), (("producer_byte_rate", 50000.0),)),
        ((("ip", None),), (("connection_creation_rate", 1000.0),)),
        ((("user", "alice"),), (("consumer_byte_rate", 2e6),)),
    ]
    for node in nodes:
        seen: list = []
        wait_until(lambda n=node, seen=seen: seen.append(describe_all(n.bootstrap)) or seen[-1] == expected, 15,
                   message=f"quotas on {node.bootstrap}: {seen[-1:]}")  # fmt: skip

    # one partition led by each node
    ids = sorted(cluster.brokers)
    with BrokerConnection.to(nodes[0].bootstrap) as conn:  # CreateTopics with a replica assignment
        r = conn.request(
            ApiKeys.CREATE_TOPICS,
            5,
            {
                "topics": [
                    {
                        "name": TOPIC,
                        "num_partitions": -1,
                        "replication_factor": -1,
                        "assignments": [{"partition_index": p, "broker_ids": [i]} for p, i in enumerate(ids)],
                        "configs": [],
                    }
                ],
                "timeout_ms": 30000,
                "validate_only": False,
            },
        )
    assert r["topics"][0]["error_code"] == 0, r
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    wait_until(
        lambda: sorted(p.leader for p in admin.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions.values()) == ids,
        15,
        message="a leader on every node",
    )

    throttled_by: dict[int, int] = {}

    def on_throttle(event) -> None:
        if event.throttle_time > 0:
            throttled_by[event.broker_id] = max(throttled_by.get(event.broker_id, 0), int(event.throttle_time * 1000))

    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "client.id": "q-limited",
            "linger.ms": 5,
            "acks": 1,
            "queue.buffering.max.kbytes": 1024,
            "throttle_cb": on_throttle,
        }
    )
    value = b"x" * 1000
    deadline = time.monotonic() + 20
    sent = 0
    while set(throttled_by) != set(ids) and time.monotonic() < deadline:
        try:
            producer.produce(TOPIC, value, partition=sent % len(ids))
            sent += 1
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.flush(0)
    assert set(throttled_by) == set(ids), throttled_by
    assert all(ms > 0 for ms in throttled_by.values())
    for node in nodes:  # each broker's own quota sensor for the client
        assert quota_throttle_time(node, "q-limited") > 0, node.bootstrap
    # a client without a quota is not throttled by any of them
    free: list[int] = []
    unlimited = Producer(
        {"bootstrap.servers": cluster.bootstrap, "client.id": "q-free", "linger.ms": 5, "throttle_cb": free.append}
    )
    for i in range(300):
        unlimited.produce(TOPIC, value, partition=i % len(ids))
    assert unlimited.flush(30) == 0
    assert free == []
