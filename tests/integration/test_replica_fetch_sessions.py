"""Replica fetchers in KIP-227 incremental fetch sessions on a real 3-node cluster (issue 31, idle replication):
each leader holds one session per follower fetcher, over the partitions that follower replicates, and replication
goes on through it (acks=all records readable, a new leader after a kill has every record); idle sessions skip
their caught-up partitions on the leader without changing the ISRs (a stopped follower still leaves)."""

from __future__ import annotations

import re
import signal
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from pykbroker.protocol import errors
from tests.helpers.cluster import KRaftCluster
from tests.helpers.replication import REPLICATION_TIMEOUTS, partitions, raw_produce, wait_for_full_isr
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


def test_idle_parked_followers_stay_in_sync_and_a_stopped_one_leaves_the_isr(cluster):
    """Issue 31: idle sessions skip their partitions on the leader (parked followers follow the session's clock).
    Idle for several ``replica.lag.time.max.ms`` (1.5 s), every ISR stays full; acks=all writes then go through at
    once; a follower stopped with SIGSTOP while the leader takes writes leaves the ISR, and rejoins after SIGCONT."""
    for node in cluster.brokers.values():  # the previous test killed a leader
        if node.proc is None or node.proc.poll() is not None:
            node.start(60)
    topic = "idle-isr"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 4, 3, config={"min.insync.replicas": "3"})])[topic].result(30)
    wait_for_full_isr(lambda: cluster.bootstrap, topic)
    deadline = time.monotonic() + 4.5  # three lag times with no client writing: every ISR must stay full
    while time.monotonic() < deadline:
        assert all(len(p["isr_nodes"]) == 3 for p in partitions(cluster.bootstrap, topic).values())
        time.sleep(0.3)
    state = partitions(cluster.bootstrap, topic)[0]
    leader_addr = cluster.brokers[state["leader_id"]].bootstrap
    for _ in range(3):
        assert raw_produce(leader_addr, topic, 0, -1, [b"acks-all"])["error_code"] == errors.NONE
    follower = next(b for b in state["replica_nodes"] if b != state["leader_id"])
    cluster.brokers[follower].proc.send_signal(signal.SIGSTOP)
    try:

        def shrunk() -> bool:
            raw_produce(leader_addr, topic, 0, 1, [b"filler"])
            return follower not in partitions(leader_addr, topic)[0]["isr_nodes"]

        wait_until(shrunk, 20, interval=0.2, message="the stopped follower left the ISR")
    finally:
        cluster.brokers[follower].proc.send_signal(signal.SIGCONT)
    wait_for_full_isr(lambda: cluster.bootstrap, topic, timeout=60)
