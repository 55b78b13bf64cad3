"""Fetch from the closest replica (KIP-392) on a 3-node cluster in racks a, b and c.

Three combined broker+controller nodes (node 1 in rack a, 2 in b, 3 in c) with
``replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector``; a topic of 2 partitions,
RF 3, led by nodes 1 and 3 (never by rack b). A confluent-kafka consumer with ``client.rack=b`` is sent by
the leaders to node 2 (``preferred_read_replica``) and reads every record exactly once, in order, from it:
node 2's BrokerTopicMetrics (BytesOut, TotalFetchRequests for the topic, on /metrics) count the records it
served and the leaders' BytesOut for the topic stays 0. A consumer without ``client.rack`` then reads from
the leaders, and node 2 serves it nothing.
"""

from __future__ import annotations

import re
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.cluster import KRaftCluster
from tests.helpers.replication import REPLICATION_TIMEOUTS, wait_for_full_isr
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

TOPIC = "rack-aware"
N = 2000  # records, spread over both partitions
RACKS = {1: "a", 2: "b", 3: "c"}
ASSIGNMENT = {0: [1, 2, 3], 1: [3, 2, 1]}  # leaders 1 (rack a) and 3 (rack c)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = KRaftCluster(
        tmp_path_factory.mktemp("follower-fetching"),
        controllers=3,
        brokers=0,
        combined=True,
        replica_selector_class="org.apache.kafka.common.replica.RackAwareReplicaSelector",
        metric_reporters="pykbroker.metrics.prometheus.PrometheusReporter",
        prometheus_metrics_listener="127.0.0.1:0",
        **{k.replace(".", "_"): v for k, v in {**REPLICATION_TIMEOUTS, "offsets.topic.num.partitions": "1"}.items()},
    )
    for node_id, rack in RACKS.items():
        c.brokers[node_id].props["broker.rack"] = rack
    try:
        c.start()
        yield c
    finally:
        c.stop()


def topic_metric(node, name: str) -> float:
    """``kafka_server_brokertopicmetrics_<name>_total`` of TOPIC on ``node``'s /metrics (0 if absent)."""
    line = node.wait_for_line(r"Prometheus metrics endpoint listening on \S+:\d+")
    assert line is not None
    host, port = re.search(r"listening on (\S+):(\d+)", line).groups()
    page = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10).read().decode()
    for family in text_string_to_metric_families(page):
        for s in family.samples:
            if s.name == f"kafka_server_brokertopicmetrics_{name}_total" and s.labels.get("topic") == TOPIC:
                return s.value
    return 0.0


def consume_all(bootstrap: str, group: str, rack: str | None) -> dict[int, list[int]]:
    """Every record of TOPIC read by a new confluent-kafka consumer (``client.rack`` = ``rack``) as
    ``{partition: [record numbers in offset order]}``; stops once N records have arrived (bounded)."""
    from confluent_kafka import Consumer

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 100,
    }
    if rack is not None:
        conf["client.rack"] = rack
    consumer = Consumer(conf)
    got: dict[int, list[int]] = {0: [], 1: []}
    try:
        consumer.subscribe([TOPIC])

        def poll() -> bool:
            for m in consumer.consume(500, 0.5):
                assert m.error() is None, m.error()
                got[m.partition()].append(int(m.value()))
            return sum(len(v) for v in got.values()) >= N

        wait_until(poll, 60, interval=0, message=f"{N} records consumed (rack {rack})")
        # nothing more arrives: no duplicates after the N-th record
        for m in consumer.consume(500, 1.0):
            got[m.partition()].append(int(m.value()))
    finally:
        consumer.close()
    return got


def test_consumer_in_rack_b_reads_every_record_once_from_the_rack_b_follower(cluster):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    nodes = cluster.brokers
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics(
        [
            NewTopic(
                TOPIC,
                num_partitions=2,
                replica_assignment=[ASSIGNMENT[0], ASSIGNMENT[1]],
                config={"min.insync.replicas": "2"},
            )
        ]
    )
    futures[TOPIC].result(30)
    del admin, futures
    state = wait_for_full_isr(lambda: cluster.bootstrap, TOPIC)
    assert {p: s["leader_id"] for p, s in state.items()} == {0: 1, 1: 3}

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    sent: dict[int, list[int]] = {0: [], 1: []}
    for i in range(N):
        producer.produce(TOPIC, value=b"%d" % i, partition=i % 2)
        sent[i % 2].append(i)
    assert producer.flush(30) == 0
    del producer

    got = consume_all(cluster.bootstrap, "rack-b", "b")
    assert got == sent  # every record exactly once, in order per partition
    served = topic_metric(nodes[2], "bytesout")
    assert served >= N * 4  # rack b's follower served the records (at least their values)
    assert topic_metric(nodes[2], "totalfetchrequests") > 0
    assert topic_metric(nodes[1], "bytesout") == 0  # the leaders sent none of them
    assert topic_metric(nodes[3], "bytesout") == 0

    # without client.rack the consumer reads from the leaders: rack b's replica serves nothing more
    got = consume_all(cluster.bootstrap, "no-rack", None)
    assert got == sent
    assert topic_metric(nodes[2], "bytesout") == served
    assert topic_metric(nodes[1], "bytesout") > 0
    assert topic_metric(nodes[3], "bytesout") > 0
