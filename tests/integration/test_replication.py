"""Partition replication on a real cluster: 1 controller and 3 brokers as separate processes.

Covered, with real clients: acks=all data reaches every replica byte for byte; a confluent-kafka
idempotent producer and a consumer group ride through ten kill -9s of partition leaders with every
acknowledged record read back exactly once and in order; a follower paused with SIGSTOP leaves the ISR
and rejoins after SIGCONT (acks=all gets NOT_ENOUGH_REPLICAS meanwhile, acks=1 works); a leader cut off
with SIGSTOP truncates its divergent tail when it comes back; a SIGTERM moves leaderships before the
process exits; kafka-python and aiokafka ride through a leader kill.

One cluster serves the module; each test leaves every broker running with full ISRs.
"""

from __future__ import annotations

import json
import signal
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.types import ZERO_UUID
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from tests.helpers.cluster import KRaftCluster
from tests.helpers.replication import (
    REPLICATION_TIMEOUTS,
    log_batches,
    partitions,
    raw_produce,
    wait_for_full_isr,
)
from tests.helpers.tools import run_tool
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = KRaftCluster(tmp_path_factory.mktemp("replication"), controllers=1, brokers=3, **REPLICATION_TIMEOUTS)
    try:
        c.start()
        yield c
    finally:
        c.kill_all()


def create_topic(cluster, name: str, num_partitions: int, min_isr: int = 2, replication_factor: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    config = {"min.insync.replicas": str(min_isr)}
    admin.create_topics([NewTopic(name, num_partitions, replication_factor, config=config)])[name].result(30)
    wait_for_full_isr(lambda: cluster.bootstrap, name, replication_factor)


def leader_of(cluster, topic: str, partition: int) -> int:
    return partitions(cluster.bootstrap, topic)[partition]["leader_id"]


def broker_bootstrap(cluster, broker_id: int) -> str:
    return cluster.brokers[broker_id].bootstrap


def restart(cluster, broker_id: int, topic: str) -> None:
    cluster.brokers[broker_id].start(60)
    wait_for_full_isr(lambda: cluster.bootstrap, topic, timeout=60)


def test_acks_all_reaches_every_replica_byte_for_byte(cluster):
    create_topic(cluster, "bytes", 2)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5, "compression.type": "lz4"})
    for i in range(2000):
        p.produce("bytes", f"value-{i}".encode() * 3, partition=i % 2)
    assert p.flush(30) == 0
    for part in (0, 1):
        leader = leader_of(cluster, "bytes", part)
        expected = log_batches(cluster.brokers[leader].data_dir, "bytes", part)
        assert expected and expected[-1][1] == 999
        for broker in cluster.brokers.values():
            wait_until(
                lambda b=broker, x=expected, q=part: log_batches(b.data_dir, "bytes", q) == x,
                10,
                message=f"replica {broker.props['node.id']} of bytes-{part} identical to the leader's",
            )


class _ProducerThread(threading.Thread):
    """An idempotent acks=all producer writing ``p:i`` values round-robin over the partitions at a
    bounded rate; records every acknowledgement ``{partition: [(offset, value)]}``."""

    def __init__(self, bootstrap: str, topic: str, num_partitions: int, rate: int = 300, **conf):
        super().__init__(daemon=True)
        self.topic, self.num_partitions, self.rate = topic, num_partitions, rate
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120000,
                **conf,
            }
        )
        self.acked: dict[int, list[tuple[int, bytes]]] = {}
        self.errors: list = []
        self.stop = threading.Event()
        self.sent = 0

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.acked.setdefault(msg.partition(), []).append((msg.offset(), msg.value()))

    def acked_count(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def run(self) -> None:
        interval = 1.0 / self.rate
        while not self.stop.is_set():
            part = self.sent % self.num_partitions
            self.producer.produce(
                self.topic, f"{part}:{self.sent}".encode(), partition=part, on_delivery=self._on_delivery
            )
            self.sent += 1
            self.producer.poll(interval)
        self.producer.flush(120)


class _GroupConsumer(threading.Thread):
    """A consumer-group member that commits synchronously after each batch: ``committed`` holds what was
    consumed in batches whose commit succeeded; ``reread`` counts records seen again after a commit."""

    def __init__(self, bootstrap: str, topic: str, group: str):
        super().__init__(daemon=True)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 500,
            }
        )
        self.topic = topic
        self.committed: dict[int, list[tuple[int, bytes]]] = {}
        self.committed_keys: set[tuple[int, int]] = set()
        self.reread: list[tuple[int, int]] = []
        self.stop = threading.Event()

    def count(self) -> int:
        return len(self.committed_keys)

    def run(self) -> None:
        self.consumer.subscribe([self.topic])
        try:
            while not self.stop.is_set():
                msgs = [m for m in self.consumer.consume(500, 0.5) if m.error() is None]
                if not msgs:
                    continue
                try:
                    self.consumer.commit(asynchronous=False)
                except KafkaException:
                    continue  # these may be delivered again: not counted
                for m in msgs:
                    key = (m.partition(), m.offset())
                    if key in self.committed_keys:
                        self.reread.append(key)
                        continue
                    self.committed_keys.add(key)
                    self.committed.setdefault(m.partition(), []).append((m.offset(), m.value()))
        finally:
            self.consumer.close()


def read_all(bootstrap: str, topic: str, num_partitions: int, expected: int, timeout: float = 60):
    """Every record of ``topic`` from offset 0: ``{partition: [(offset, value)]}``."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-all-{topic}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(num_partitions)])
    out: dict[int, list[tuple[int, bytes]]] = {}
    n, deadline = 0, time.monotonic() + timeout
    try:
        while n < expected and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    out.setdefault(m.partition(), []).append((m.offset(), m.value()))
                    n += 1
    finally:
        c.close()
    return out


def _partition_to_chase(cluster, topic: str, num_partitions: int, round_no: int, killed: list[int]) -> int:
    """The partition whose leader is killed in round ``round_no``: from partition ``round_no % n`` on, the first
    one led by a broker not killed yet (so a few rounds kill every broker), else partition ``round_no % n``."""
    state = partitions(cluster.bootstrap, topic)
    order = [(round_no + i) % num_partitions for i in range(num_partitions)]
    return next((p for p in order if state[p]["leader_id"] not in killed), order[0])


def test_producer_and_group_ride_through_five_leader_kills(cluster):
    # Five kill -9s chasing a partition leader, as Kafka's replication system test (hard_bounce) does; the
    # victims are chosen so that every broker is killed at least once (and one is killed again after its restart).
    topic, num_partitions = "failover", 6
    create_topic(cluster, topic, num_partitions)
    producer = _ProducerThread(cluster.bootstrap, topic, num_partitions)
    consumer = _GroupConsumer(cluster.bootstrap, topic, "failover-group")
    producer.start()
    consumer.start()
    failover_ms, killed = [], []
    try:
        for round_no in range(5):
            wait_until(lambda: producer.acked_count() > 0, 30, message="producer writing")
            part = _partition_to_chase(cluster, topic, num_partitions, round_no, killed)
            victim = leader_of(cluster, topic, part)
            before = producer.acked.get(part, [])[-1:] or [(-1, b"")]
            killed_at = time.monotonic()
            cluster.brokers[victim].kill()
            killed.append(victim)
            # Failover: the next acknowledgement of a record on a partition the victim led.
            wait_until(
                lambda p=part, b=before[0][0]: producer.acked.get(p, [(-1, b"")])[-1][0] > b,
                60,
                message=f"produce to {topic}-{part} after killing broker {victim}",
            )
            failover_ms.append((time.monotonic() - killed_at) * 1000)
            restart(cluster, victim, topic)
    finally:
        producer.stop.set()
        producer.join(150)
    assert set(killed) == set(cluster.brokers), killed
    assert not producer.errors, producer.errors[:5]
    total = producer.acked_count()
    wait_until(lambda: consumer.count() >= total, 90, message=f"group consumed all {total} acknowledged records")
    consumer.stop.set()
    consumer.join(30)

    # Every acknowledged record is in the log exactly once, in order per partition, at its offset.
    log = read_all(cluster.bootstrap, topic, num_partitions, total)
    for part, acked in producer.acked.items():
        values = [v for _, v in log.get(part, [])]
        assert len(values) == len(set(values)), f"duplicates in {topic}-{part}"
        assert dict(log[part]).items() >= dict(acked).items(), f"acknowledged records missing from {topic}-{part}"
        sent_order = [int(v.split(b":")[1]) for v in values]
        assert sent_order == sorted(sent_order), f"{topic}-{part} out of order"
    # The group read each of them exactly once after commits (nothing skipped, nothing read again).
    assert not consumer.reread, consumer.reread[:10]
    for part, acked in producer.acked.items():
        got = dict(consumer.committed.get(part, []))
        assert got.items() >= dict(acked).items(), f"group skipped records of {topic}-{part}"
    print(f"failover ms (kill -9 -> next acknowledged produce): {sorted(int(x) for x in failover_ms)}")


def test_paused_follower_leaves_and_rejoins_the_isr(cluster):
    topic = "pause-follower"
    create_topic(cluster, topic, 1)
    state = partitions(cluster.bootstrap, topic)[0]
    leader = state["leader_id"]
    followers = [b for b in state["replica_nodes"] if b != leader]
    leader_addr = broker_bootstrap(cluster, leader)
    assert raw_produce(leader_addr, topic, 0, -1, [b"before"])["error_code"] == errors.NONE
    for b in followers:
        cluster.brokers[b].proc.send_signal(signal.SIGSTOP)
    try:
        # Keep writing so the stopped followers fall behind; the ISR shrinks to the leader.
        def isr_is_leader_only():
            raw_produce(leader_addr, topic, 0, 1, [b"filler"])
            return partitions(leader_addr, topic)[0]["isr_nodes"] == [leader]

        wait_until(isr_is_leader_only, 20, interval=0.2, message="ISR shrunk to the leader")
        r = raw_produce(leader_addr, topic, 0, -1, [b"needs-two"])
        assert r["error_code"] == errors.NOT_ENOUGH_REPLICAS
        assert raw_produce(leader_addr, topic, 0, 1, [b"acks-one"])["error_code"] == errors.NONE
    finally:
        for b in followers:
            cluster.brokers[b].proc.send_signal(signal.SIGCONT)
    wait_for_full_isr(lambda: cluster.bootstrap, topic, timeout=60)
    assert (
        raw_produce(broker_bootstrap(cluster, leader_of(cluster, topic, 0)), topic, 0, -1, [b"after"])["error_code"]
        == errors.NONE
    )


def test_cut_off_leader_truncates_its_divergent_tail(cluster):
    topic = "cut-off"
    create_topic(cluster, topic, 1)
    old = leader_of(cluster, topic, 0)
    old_addr = broker_bootstrap(cluster, old)
    acked_all = []
    for i in range(20):
        r = raw_produce(old_addr, topic, 0, -1, [f"all-{i}".encode()])
        assert r["error_code"] == errors.NONE
        acked_all.append((r["base_offset"], f"all-{i}".encode()))
    cluster.brokers[old].proc.send_signal(signal.SIGSTOP)
    try:
        # acks=1 writes queued in the stopped leader's socket: it appends them when it resumes, before it
        # learns it was replaced — the divergent tail.
        pending = [
            threading.Thread(target=_quiet_produce, args=(old_addr, topic, [f"tail-{i}".encode()]), daemon=True)
            for i in range(5)
        ]
        for t in pending:
            t.start()
        new = wait_until(
            lambda: (lambda p: p["leader_id"] if p["leader_id"] not in (-1, old) else None)(
                partitions(broker_bootstrap(cluster, next(b for b in cluster.brokers if b != old)), topic)[0]
            ),
            30,
            message="a new leader elected",
        )
        new_addr = broker_bootstrap(cluster, new)
        for i in range(20, 40):
            r = raw_produce(new_addr, topic, 0, -1, [f"all-{i}".encode()])
            assert r["error_code"] == errors.NONE, r
            acked_all.append((r["base_offset"], f"all-{i}".encode()))
    finally:
        cluster.brokers[old].proc.send_signal(signal.SIGCONT)
    for t in pending:
        t.join(30)
    wait_for_full_isr(lambda: cluster.bootstrap, topic, timeout=60)
    leader = leader_of(cluster, topic, 0)
    expected = log_batches(cluster.brokers[leader].data_dir, topic, 0)
    for broker in cluster.brokers.values():
        wait_until(
            lambda b=broker: log_batches(b.data_dir, topic, 0) == expected,
            20,
            message=f"replica {broker.props['node.id']} truncated to and caught up with the leader",
        )
    log = dict(read_all(cluster.bootstrap, topic, 1, len(expected))[0])
    for offset, value in acked_all:
        assert log.get(offset) == value


def _quiet_produce(addr: str, topic: str, values: list[bytes]) -> None:
    try:
        raw_produce(addr, topic, 0, 1, values, timeout_ms=2000)
    except OSError:
        pass


def test_sigterm_moves_leadership_before_exit(cluster):
    topic = "controlled"
    create_topic(cluster, topic, 3)
    producer = _ProducerThread(cluster.bootstrap, topic, 3, rate=200)
    producer.start()
    try:
        wait_until(lambda: producer.acked_count() > 50, 30, message="producer writing")
        victim = leader_of(cluster, topic, 0)
        node = cluster.brokers[victim]
        assert node.stop(30) == 0
        after = partitions(cluster.bootstrap, topic)
        assert all(p["leader_id"] != victim for p in after.values()), after
        count = producer.acked_count()
        wait_until(lambda: producer.acked_count() > count + 50, 30, message="producer continues")
        restart(cluster, victim, topic)
    finally:
        producer.stop.set()
        producer.join(150)
    assert not producer.errors, producer.errors[:5]
    log = read_all(cluster.bootstrap, topic, 3, producer.acked_count())
    for part, acked in producer.acked.items():
        assert dict(log[part]).items() >= dict(acked).items()


def test_kafka_python_and_aiokafka_ride_through_a_leader_kill(cluster):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from kafka import KafkaConsumer, KafkaProducer

    topic = "other-clients"
    create_topic(cluster, topic, 1)

    # kafka-python: half the records before the leader dies, half after.
    victim = leader_of(cluster, topic, 0)
    kp = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", retries=30, retry_backoff_ms=300)
    for f in [kp.send(topic, f"kp-{i}".encode(), partition=0) for i in range(50)]:
        f.get(30)
    cluster.brokers[victim].kill()
    for f in [kp.send(topic, f"kp-{i}".encode(), partition=0) for i in range(50, 100)]:
        f.get(60)
    kp.close(10)
    restart(cluster, victim, topic)

    # aiokafka: the same with the next leader.
    async def aio_produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", retry_backoff_ms=300)
        await producer.start()
        try:
            for i in range(50):
                await producer.send_and_wait(topic, f"aio-{i}".encode(), partition=0)
            cluster.brokers[leader_of(cluster, topic, 0)].kill()
            for i in range(50, 100):
                await producer.send_and_wait(topic, f"aio-{i}".encode(), partition=0)
        finally:
            await producer.stop()

    second = leader_of(cluster, topic, 0)
    asyncio.run(asyncio.wait_for(aio_produce(), 120))
    expected = [f"kp-{i}".encode() for i in range(100)] + [f"aio-{i}".encode() for i in range(100)]

    async def aio_consume() -> list[bytes]:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest")
        await consumer.start()
        try:
            seen: list[bytes] = []
            while len(seen) < len(expected):
                batch = await consumer.getmany(timeout_ms=500)
                seen.extend(m.value for msgs in batch.values() for m in msgs)
            return seen
        finally:
            await consumer.stop()

    assert asyncio.run(asyncio.wait_for(aio_consume(), 60)) == expected
    kc = KafkaConsumer(
        topic, bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=5000
    )
    values = [m.value for m in kc]
    kc.close()
    assert values == expected
    restart(cluster, second, topic)


def test_preferred_leader_election_with_the_tool(cluster, tmp_path):
    topic = "preferred"
    create_topic(cluster, topic, 1)
    state = partitions(cluster.bootstrap, topic)[0]
    preferred = state["replica_nodes"][0]
    assert state["leader_id"] == preferred
    cluster.brokers[preferred].kill()
    wait_until(
        lambda: partitions(cluster.bootstrap, topic)[0]["leader_id"] not in (-1, preferred), 30, message="failover"
    )
    assert preferred in partitions(cluster.bootstrap, topic)[0]["offline_replicas"]
    restart(cluster, preferred, topic)
    assert partitions(cluster.bootstrap, topic)[0]["leader_id"] != preferred  # no automatic move back here
    # Only this partition: --all-topic-partitions would also try the other tests' partitions, whose
    # preferred replicas may be out of their ISRs for a moment (PREFERRED_LEADER_NOT_AVAILABLE, exit 1).
    plan = tmp_path / "election.json"
    plan.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0}]}))
    run = run_tool(
        "leader_election_command", "--bootstrap-server", cluster.bootstrap,
        "--election-type", "PREFERRED", "--path-to-json-file", str(plan),
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout == f"Successfully completed leader election (PREFERRED) for partitions {topic}-0\n"
    wait_until(lambda: partitions(cluster.bootstrap, topic)[0]["leader_id"] == preferred, 10, message="preferred leads")
    again = run_tool(
        "leader_election_command", "--bootstrap-server", cluster.bootstrap,
        "--election-type", "preferred", "--topic", topic, "--partition", "0",
    )  # fmt: skip
    assert again.returncode == 0 and f"Valid replica already elected for partitions {topic}-0" in again.stdout


def test_unclean_election_only_where_enabled(cluster):
    """The last ISR member dies; an out-of-sync replica comes back: it leads at once where
    unclean.leader.election.enable=true, and elsewhere only when an operator asks (ElectLeaders UNCLEAN)."""
    # Both topics on the same three brokers in the same order, so one sequence of kills serves both.
    order = sorted(cluster.brokers)
    topics = {"unclean-on": "true", "unclean-off": "false"}
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": -1,
                "replication_factor": -1,
                "assignments": [{"partition_index": 0, "broker_ids": order}],
                "configs": [{"name": "unclean.leader.election.enable", "value": v}],
            }
            for name, v in topics.items()
        ],
        "timeout_ms": 10000,
        "validate_only": False,
    }
    with BrokerConnection.to(cluster.bootstrap, timeout=20) as c:
        created = c.request(ApiKeys.CREATE_TOPICS, 7, body)
    assert [t["error_code"] for t in created["topics"]] == [0, 0], created
    for name in topics:
        wait_for_full_isr(lambda: cluster.bootstrap, name)
    last, first_back, other = order[0], order[1], order[2]
    cluster.brokers[first_back].kill()
    cluster.brokers[other].kill()
    wait_until(
        lambda: all(partitions(cluster.brokers[last].bootstrap, n)[0]["isr_nodes"] == [last] for n in topics),
        30,
        message="ISR shrunk to the last broker",
    )
    cluster.brokers[last].kill()
    cluster.brokers[first_back].start(60)
    addr = cluster.brokers[first_back].bootstrap
    wait_until(lambda: partitions(addr, "unclean-on")[0]["leader_id"] == first_back, 30, message="unclean leader")
    assert partitions(addr, "unclean-on")[0]["isr_nodes"] == [first_back]
    assert partitions(addr, "unclean-off")[0]["leader_id"] == -1
    run = run_tool(
        "leader_election_command", "--bootstrap-server", addr,
        "--election-type", "UNCLEAN", "--topic", "unclean-off", "--partition", "0",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "Successfully completed leader election (UNCLEAN) for partitions unclean-off-0" in run.stdout
    assert partitions(addr, "unclean-off")[0]["leader_id"] == first_back
    KRaftCluster.start_nodes([cluster.brokers[last], cluster.brokers[other]])
    for name in topics:
        wait_for_full_isr(lambda: cluster.bootstrap, name, timeout=60)


def test_non_leader_names_the_leader_kip_951(cluster):
    """Produce and Fetch v16 to a broker that is not a replica (RF 2 of 3 brokers): NOT_LEADER_OR_FOLLOWER
    with the leader and its endpoint. (A follower serves a consumer's Fetch v11+ itself, KIP-392.)"""
    topic = "kip951"
    create_topic(cluster, topic, 1, min_isr=1, replication_factor=2)
    state = partitions(cluster.bootstrap, topic)[0]
    leader = state["leader_id"]
    other = next(b for b in cluster.brokers if b not in state["replica_nodes"])
    leader_port = cluster.brokers[leader].port
    builder = MemoryRecordsBuilder()
    builder.append(int(time.time() * 1000), None, b"v")
    produce = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 3000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": builder.build()}]}],
    }
    topic_id = partitions_topic_id(cluster.bootstrap, topic)
    fetch = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    with BrokerConnection.to(cluster.brokers[other].bootstrap, timeout=10) as c:
        p = c.request(ApiKeys.PRODUCE, 10, produce)
        f = c.request(ApiKeys.FETCH, 16, fetch)
    pr = p["responses"][0]["partition_responses"][0]
    assert pr["error_code"] == errors.NOT_LEADER_OR_FOLLOWER
    assert pr["current_leader"] == {"leader_id": leader, "leader_epoch": state["leader_epoch"]}
    assert [(e["node_id"], e["port"]) for e in p["node_endpoints"]] == [(leader, leader_port)]
    fr = f["responses"][0]["partitions"][0]
    assert fr["error_code"] == errors.NOT_LEADER_OR_FOLLOWER
    assert fr["current_leader"] == {"leader_id": leader, "leader_epoch": state["leader_epoch"]}
    assert [(e["node_id"], e["port"]) for e in f["node_endpoints"]] == [(leader, leader_port)]


def test_write_txn_markers_on_a_follower_answers_not_leader_or_follower(cluster):
    """WriteTxnMarkers for a partition this broker hosts but does not lead: NOT_LEADER_OR_FOLLOWER per
    partition, UNKNOWN_TOPIC_OR_PARTITION for one it has no log of (KafkaApis.handleWriteTxnMarkersRequest)."""
    topic = "markers-on-follower"
    create_topic(cluster, topic, 1)
    state = partitions(cluster.bootstrap, topic)[0]
    follower = next(b for b in state["replica_nodes"] if b != state["leader_id"])
    with BrokerConnection.to(cluster.brokers[follower].bootstrap, timeout=10) as c:
        r = c.request(
            ApiKeys.WRITE_TXN_MARKERS,
            1,
            {
                "markers": [
                    {
                        "producer_id": 4242,
                        "producer_epoch": 0,
                        "transaction_result": False,
                        "coordinator_epoch": 0,
                        "topics": [{"name": topic, "partition_indexes": [0, 5]}],
                    }
                ]
            },
        )
    (marker,) = r["markers"]
    codes = {(t["name"], p["partition_index"]): p["error_code"] for t in marker["topics"] for p in t["partitions"]}
    assert codes == {(topic, 0): errors.NOT_LEADER_OR_FOLLOWER, (topic, 5): errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert "Traceback" not in cluster.brokers[follower].output()


def partitions_topic_id(bootstrap: str, topic: str):
    with BrokerConnection.to(bootstrap, timeout=10) as c:
        r = c.request(
            ApiKeys.METADATA,
            12,
            {"topics": [{"topic_id": ZERO_UUID, "name": topic}], "allow_auto_topic_creation": False},
        )
    return r["topics"][0]["topic_id"]


def _txn_commit_with_retries(p: Producer, produce, deadline: float) -> None:
    """One transaction (``produce(p)`` inside), retried while the coordinator moves."""
    while True:
        try:
            p.begin_transaction()
            produce(p)
            p.commit_transaction(30)
            return
        except KafkaException as e:
            err = e.args[0]
            if time.time() > deadline or not (err.retriable() or err.txn_requires_abort()):
                raise
            if err.txn_requires_abort():
                p.abort_transaction(30)
            time.sleep(0.2)


def test_transactions_write_markers_to_every_leader_and_survive_coordinator_failover(cluster):
    from pykbroker.tools.transactions_command import describe_transaction

    create_topic(cluster, "txn-rep", 3)
    leaders = {leader_of(cluster, "txn-rep", p) for p in range(3)}
    assert len(leaders) >= 2  # markers go to more than one broker
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "tx-rep", "linger.ms": 5})
    p.init_transactions(30)
    expected: dict[int, list[bytes]] = {0: [], 1: [], 2: []}

    def produce(tag: str, keep: bool):
        def go(prod: Producer) -> None:
            for i in range(30):
                prod.produce("txn-rep", f"{tag}-{i}".encode(), partition=i % 3)
            prod.flush(30)

        if keep:
            for i in range(30):
                expected[i % 3].append(f"{tag}-{i}".encode())
        return go

    _txn_commit_with_retries(p, produce("a", True), time.time() + 30)
    p.begin_transaction()
    produce("aborted", False)(p)
    p.abort_transaction(30)
    coordinator = int(describe_transaction(cluster.bootstrap, "tx-rep")[0])
    cluster.brokers[coordinator].kill()
    try:
        _txn_commit_with_retries(p, produce("after-failover", True), time.time() + 60)
        new_coordinator = int(describe_transaction(cluster.bootstrap, "tx-rep")[0])
        assert new_coordinator != coordinator
        c = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": "txn-rep-reader",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        c.assign([TopicPartition("txn-rep", part, 0) for part in range(3)])
        got: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
        deadline = time.time() + 30
        while time.time() < deadline and sum(map(len, got.values())) < 60:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got[m.partition()].append(m.value())
        assert c.poll(1.0) is None
        c.close()
        assert got == expected
    finally:
        restart(cluster, coordinator, "txn-rep")
