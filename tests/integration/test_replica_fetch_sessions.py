"""Replica fetchers in KIP-227 incremental fetch sessions on a real 3-node cluster (issue 31, idle replication):
each leader holds one session per follower fetcher, over the partitions that follower replicates, and replication
goes on through it (acks=all records readable, a new leader after a kill has every record)."""

from __future__ import annotations

import re
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.cluster import KRaftCluster
from tests.helpers.replication import REPLICATION_TIMEOUTS, partitions, wait_for_full_isr
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

TOPIC = "sessions"
PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = KRaftCluster(
        tmp_path_factory.mktemp("fetch-sessions"),
        controllers=3,
        brokers=0,
        combined=True,
        metric_reporters="pykbroker.metrics.prometheus.PrometheusReporter",
        prometheus_metrics_listener="127.0.0.1:0",
        **REPLICATION_TIMEOUTS,
    )
    try:
        c.start()
        yield c
    finally:
        c.kill_all()


def session_gauges(node) -> tuple[float, float]:
    """(NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached) of ``node``'s FetchSessionCache."""
    line = node.wait_for_line(r"Prometheus metrics endpoint listening on \S+:\d+")
    assert line is not None
    host, port = re.search(r"listening on (\S+):(\d+)", line).groups()
    page = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10).read().decode()
    found = {}
    for family in text_string_to_metric_families(page):
        for s in family.samples:
            name = s.name.lower()
            if "fetchsessioncache" in name and "numincrementalfetch" in name:
                found["sessions" if "sessions" in name else "partitions"] = s.value
    return found.get("sessions", 0.0), found.get("partitions", 0.0)


def test_followers_replicate_through_one_incremental_session_per_leader(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "3"})])[TOPIC].result(30)
    wait_for_full_isr(lambda: cluster.bootstrap, TOPIC)
    # Every node leads some partitions: the two other nodes' fetchers each hold a session there, and the sessions
    # together cache every follower replica of the topic (6 partitions x 2 followers).
    leaders = {p["leader_id"] for p in partitions(cluster.bootstrap, TOPIC).values()}

    def sessions_settled() -> bool:
        gauges = {node_id: session_gauges(n) for node_id, n in cluster.brokers.items()}
        return all(gauges[i][0] == 2 for i in leaders) and sum(g[1] for g in gauges.values()) == PARTITIONS * 2

    wait_until(sessions_settled, 20, interval=0.2, message="one follower session per leader and follower")

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(300):
        producer.produce(TOPIC, value=b"v%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    # min.insync.replicas=3: every acknowledged record is on both followers, fetched through their sessions.
    # The leader of partition 0 dies; the new one has all of its records.
    victim = partitions(cluster.bootstrap, TOPIC)[0]["leader_id"]
    cluster.brokers[victim].kill()
    wait_until(
        lambda: partitions(cluster.bootstrap, TOPIC)[0]["leader_id"] not in (-1, victim),
        20,
        interval=0.2,
        message="new leader of partition 0",
    )
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "s",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        got: list[bytes] = []

        def read_all() -> bool:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
            return len(got) == 50

        wait_until(read_all, 30, interval=0, message="partition 0's 50 records from the new leader")
        assert got == [b"v%d" % i for i in range(0, 300, PARTITIONS)]
    finally:
        consumer.close()
