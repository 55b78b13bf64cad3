"""KIP-848 consumer groups survive their coordinator (issue 25): a 3-node cluster (combined nodes, RF 3
``__consumer_offsets`` and topic), 3 confluent-kafka consumers (``group.protocol=consumer``, commit after each record
batch) reading a 6-partition topic while a producer writes; the node that coordinates the group is killed with
SIGKILL. The new coordinator replays the group's records: the same members keep their member ids, epochs and
assignments (no rebalance: the group epoch does not move, no partition is revoked), the consumers carry on from their
positions and committed offsets, and every acknowledged record is consumed (at-least-once)."""

from __future__ import annotations

import threading
import time

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.cluster import KRaftCluster
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

GROUP, TOPIC = "gfo", "fo6"


class Consumer:
    """A confluent-kafka consumer with the consumer protocol, polled (and committing synchronously after each
    record) by its own thread; ``revoked`` counts the partitions its callbacks gave up."""

    def __init__(self, bootstrap: str, name: str):
        from confluent_kafka import Consumer as CKConsumer

        self.name = name
        self.records: list[int] = []
        self.assigned: set[int] = set()
        self.revoked: list[int] = []
        self.lock = threading.Lock()
        self.consumer = CKConsumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "group.protocol": "consumer",
                "client.id": name,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        self.consumer.subscribe([TOPIC], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_revoke)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"consumer-{name}", daemon=True)
        self.thread.start()

    def _on_assign(self, _c, ps):
        with self.lock:
            self.assigned |= {p.partition for p in ps}

    def _on_revoke(self, _c, ps):
        with self.lock:
            self.assigned -= {p.partition for p in ps}
            self.revoked += [p.partition for p in ps]

    def _run(self):
        from confluent_kafka import KafkaException

        while not self._stop.is_set():
            m = self.consumer.poll(0.1)
            if m is None or m.error():
                continue
            with self.lock:
                self.records.append(int(m.value()))
            try:
                self.consumer.commit(message=m, asynchronous=False)
            except KafkaException:
                pass  # while the coordinator moves: the next commit covers it

    def close(self):
        self._stop.set()
        self.thread.join(10)
        self.consumer.close()


def _describe(bootstrap: str) -> dict:
    """ConsumerGroupDescribe sent to the group's coordinator (found through ``bootstrap``)."""
    found = _coordinator(bootstrap)
    if found["error_code"] != 0:
        return {"error_code": found["error_code"], "group_state": "", "members": []}
    with BrokerConnection.to(f"{found['host']}:{found['port']}") as c:
        r = c.request(
            ApiKeys.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [GROUP], "include_authorized_operations": False}
        )
    return r["groups"][0]


def _coordinator(bootstrap: str) -> dict:
    with BrokerConnection.to(bootstrap) as c:
        return c.request(ApiKeys.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [GROUP]})["coordinators"][0]


def _members(d: dict) -> dict[str, tuple[int, tuple[int, ...]]]:
    return {
        m["member_id"]: (
            m["member_epoch"],
            tuple(sorted(p for tp in m["assignment"]["topic_partitions"] for p in tp["partitions"])),
        )
        for m in d["members"]
    }


def _stable(bootstrap: str) -> dict | None:
    try:
        d = _describe(bootstrap)
    except OSError:
        return None
    if d["error_code"] != 0 or d["group_state"] != "Stable" or len(d["members"]) != 3:
        return None
    return d


def test_consumer_group_survives_a_kill_9_of_its_coordinator(tmp_path):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = KRaftCluster(
        tmp_path / "cluster",
        controllers=3,
        brokers=0,
        combined=True,
        **{
            "offsets.topic.replication.factor": "3",
            "offsets.topic.num.partitions": "3",
            "replica.lag.time.max.ms": "3000",
            "group.consumer.session.timeout.ms": "8000",
            "group.consumer.min.session.timeout.ms": "1000",
            "group.consumer.heartbeat.interval.ms": "300",
            "group.consumer.min.heartbeat.interval.ms": "100",
        },
    ).start()
    consumers: list[Consumer] = []
    stop_producing = threading.Event()
    acked: list[int] = []
    try:
        bootstrap = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, 6, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
        wait_until(lambda: TOPIC in admin.list_topics(timeout=5).topics, 10, message="topic visible")

        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})

        def produce():
            i = 0
            while not stop_producing.is_set():
                producer.produce(
                    TOPIC,
                    b"%d" % i,
                    partition=i % 6,
                    on_delivery=lambda err, m: err is None and acked.append(int(m.value())),
                )
                producer.poll(0)
                i += 1
                time.sleep(0.005)
            producer.flush(30)

        producing = threading.Thread(target=produce, name="producer", daemon=True)
        producing.start()
        consumers = [Consumer(bootstrap, n) for n in ("a", "b", "c")]
        wait_until(lambda: _stable(bootstrap) is not None, 30, message="3 members, Stable")
        wait_until(lambda: all(len(c.records) > 20 for c in consumers), 20, message="each consumer consumed")
        before = _stable(bootstrap)
        assert before is not None
        coordinator = _coordinator(bootstrap)
        assert coordinator["error_code"] == 0
        victim = cluster.brokers[coordinator["node_id"]]
        survivors = ",".join(b.bootstrap for i, b in cluster.brokers.items() if i != coordinator["node_id"])
        revoked_before = {c.name: list(c.revoked) for c in consumers}
        victim.kill()

        def new_coordinator() -> bool:
            try:
                found = _coordinator(survivors)
            except OSError:
                return False
            return found["error_code"] == 0 and found["node_id"] != coordinator["node_id"]

        wait_until(new_coordinator, 30, message="another node coordinates the group")
        after: dict | None = None

        def described() -> bool:
            nonlocal after
            after = _stable(survivors)
            return after is not None

        wait_until(described, 30, message="the group is described by its new coordinator")
        assert after is not None
        # the same members with the same epochs and assignments: the group epoch did not move (no rebalance)
        assert (after["group_epoch"], after["assignment_epoch"]) == (before["group_epoch"], before["assignment_epoch"])
        assert _members(after) == _members(before)
        # and they carry on: more records consumed after the failover by each, then everything acknowledged is read
        counts = [len(c.records) for c in consumers]
        wait_until(
            lambda: all(len(c.records) > n + 20 for c, n in zip(consumers, counts, strict=True)),
            30,
            message="each consumer consumes after the failover",
        )
        stop_producing.set()
        producing.join(40)
        expected = set(acked)
        wait_until(
            lambda: expected <= {v for c in consumers for v in list(c.records)},
            30,
            message="every acknowledged record consumed",
        )
        assert {c.name: c.revoked for c in consumers} == revoked_before  # nothing revoked: no rebalance
        assert _members(_describe(survivors)) == _members(before)
        consumed = [v for c in consumers for v in c.records]
        # at-least-once: the members kept their partitions and positions, so a record is read twice only if a
        # consumer re-fetched the batch it was reading when the coordinator died (not the case without a rebalance)
        assert len(consumed) - len(set(consumed)) <= 6 * 500
    finally:
        stop_producing.set()
        for c in consumers:
            c.close()
        cluster.kill_all()
