"""QuorumController end to end over the single-voter KafkaRaftClient and an in-memory log:
write -> append -> commit -> future completes -> loader publishes an image; restart replays the log."""

from __future__ import annotations

import random
import threading
import uuid
from concurrent.futures import Future

import pytest

from pykbroker.metadata.delta import MetadataDelta
from pykbroker.metadata.features import supported_features_request
from pykbroker.metadata.image import MetadataImage
from pykbroker.metadata.metadata_loader import MetadataLoader
from pykbroker.metadata.publisher import MetadataPublisher
from pykbroker.metadata.quorum_controller import QuorumController
from pykbroker.metadata.records import MetadataRecordSerde
from pykbroker.protocol import errors
from pykbroker.protocol.config_resource import ConfigResourceType
from pykbroker.protocol.errors import NotControllerError
from pykbroker.raft.kafka_raft_client import KafkaRaftClient
from pykbroker.raft.kafka_raft_client_driver import KafkaRaftClientDriver
from pykbroker.raft.quorum_state_store import FileQuorumStateStore
from pykbroker.raft.raft_client import RaftClientListener
from pykbroker.raft.replicated_log import MemoryReplicatedLog
from tests.helpers.wait import wait_until

TIMEOUT = 5


class RecordingPublisher(MetadataPublisher):
    def __init__(self):
        self.updates: list[tuple[MetadataDelta, MetadataImage]] = []
        self.lock = threading.Lock()

    def on_metadata_update(self, delta, new_image):
        with self.lock:
            self.updates.append((delta, new_image))

    @property
    def image(self) -> MetadataImage | None:
        return self.updates[-1][1] if self.updates else None


class RecordListener(RaftClientListener):
    def __init__(self):
        self.records = []

    def handle_commit(self, batch):
        self.records.extend(batch.records)


class Node:
    """One combined broker+controller process: raft client + driver, controller, loader, publisher."""

    def __init__(self, log, state_dir, node_id=1, cluster_id="test-cluster"):
        self.raft = KafkaRaftClient(
            node_id, [node_id], log, FileQuorumStateStore(str(state_dir)), MetadataRecordSerde(), append_linger_ms=5
        )
        self.loader = MetadataLoader(node_id, cluster_id, self.raft.high_watermark)
        self.publisher = RecordingPublisher()
        self.loader.install_publishers([self.publisher]).result(TIMEOUT)
        self.raft.register(self.loader)
        self.records = RecordListener()
        self.raft.register(self.records)
        self.controller = QuorumController(
            node_id, self.raft, cluster_id, random=random.Random(0), default_num_partitions=2
        )
        self.driver = KafkaRaftClientDriver(self.raft)
        self.driver.start()
        assert self.controller.wait_for_active(TIMEOUT)

    def register_broker(self, broker_id=1):
        return self.controller.register_broker(
            {
                "broker_id": broker_id,
                "cluster_id": "test-cluster",
                "incarnation_id": uuid.uuid4(),
                "listeners": [{"name": "PLAINTEXT", "host": "localhost", "port": 9092, "security_protocol": 0}],
                "features": supported_features_request(),
                "rack": None,
            }
        ).result(TIMEOUT)

    def wait_image(self, cond):
        wait_until(
            lambda: self.publisher.image is not None and cond(self.publisher.image), TIMEOUT, 0.005, "image condition"
        )
        return self.publisher.image

    def stop(self):
        self.controller.close()
        self.driver.shutdown()
        self.loader.close()


@pytest.fixture
def node(tmp_path):
    n = Node(MemoryReplicatedLog(), tmp_path)
    yield n
    n.stop()


def create(node, *topics, **kw):
    return node.controller.create_topics(
        {
            "topics": [
                {"name": n, "num_partitions": -1, "replication_factor": -1, "assignments": [], "configs": []}
                for n in topics
            ],
            **kw,
        }
    )


def test_thread_names_and_bootstrap_metadata_version(node):
    names = {t.name for t in threading.enumerate()}
    assert {
        "quorum-controller-1-event-handler",
        "kafka-1-raft-io-thread",
        "kafka-1-metadata-loader-event-handler",
    } <= names
    image = node.wait_image(lambda i: i.metadata_version is not None)
    # a new cluster: Kafka 4.0's latest production metadata.version, its feature defaults capped to the supported
    assert image.metadata_version == 25 and image.cluster_id == "test-cluster"
    assert dict(image.features) == {"metadata.version": 25, "transaction.version": 2, "group.version": 1}


def test_create_topic_commits_then_completes_and_publishes(node):
    reg = node.register_broker()
    assert reg["error_code"] == errors.NONE and reg["broker_epoch"] > 0
    future = create(node, "foo")
    response = future.result(TIMEOUT)
    (res,) = response["topics"]
    assert res["error_code"] == errors.NONE and res["num_partitions"] == 2 and res["replication_factor"] == 1
    # completion implies commit: the records are at or below the raft high watermark
    assert node.controller.last_committed_offset < node.raft.high_watermark()
    image = node.wait_image(lambda i: i.topics.get_topic("foo") is not None)
    topic = image.topics.get_topic("foo")
    assert topic.id == res["topic_id"] and set(topic.partitions) == {0, 1}
    assert all(p.leader == 1 and p.isr == (1,) and p.leader_epoch == 0 for p in topic.partitions.values())
    delta = next(d for d, i in node.publisher.updates if i.topics.get_topic("foo") is not None)
    assert set(delta.topics.local_changes(1).leaders) == {("foo", 0), ("foo", 1)}
    assert image.brokers[1].listeners["PLAINTEXT"].port == 9092 and not image.brokers[1].fenced
    names = [r.name for r in node.records.records]
    assert names[:4] == ["FeatureLevelRecord", "FeatureLevelRecord", "FeatureLevelRecord", "RegisterBrokerRecord"]
    assert names[4:] == ["TopicRecord", "PartitionRecord", "PartitionRecord"]


def test_errors_come_back_in_the_response(node):
    node.register_broker()
    create(node, "dup").result(TIMEOUT)
    res = create(node, "dup", "bad name").result(TIMEOUT)["topics"]
    assert [r["error_code"] for r in res] == [errors.TOPIC_ALREADY_EXISTS, errors.INVALID_TOPIC_EXCEPTION]
    rf = node.controller.create_topics({"topics": [{"name": "x", "num_partitions": 1, "replication_factor": 3}]})
    assert rf.result(TIMEOUT)["topics"][0]["error_code"] == errors.INVALID_REPLICATION_FACTOR


def test_delete_create_partitions_alter_configs_and_reads(node):
    node.register_broker()
    create(node, "a", "b").result(TIMEOUT)
    ids = node.controller.find_topic_ids(["a", "b", "zz"]).result(TIMEOUT)
    assert ids["zz"] is None and isinstance(ids["a"], uuid.UUID)
    assert node.controller.find_topic_names([ids["b"]]).result(TIMEOUT) == {ids["b"]: "b"}

    cp = node.controller.create_partitions({"topics": [{"name": "a", "count": 4, "assignments": None}]})
    assert cp.result(TIMEOUT)["results"][0]["error_code"] == errors.NONE
    alter = node.controller.incremental_alter_configs(
        {
            "resources": [
                {
                    "resource_type": ConfigResourceType.TOPIC,
                    "resource_name": "a",
                    "configs": [{"name": "retention.ms", "config_operation": 0, "value": "60000"}],
                }
            ]
        }
    )
    assert alter.result(TIMEOUT)["responses"][0]["error_code"] == errors.NONE
    assert node.controller.describe_configs(ConfigResourceType.TOPIC, "a").result(TIMEOUT) == {"retention.ms": "60000"}
    # the publisher's image may not hold topic "a" yet (it follows the committed log a little behind)
    image = node.wait_image(
        lambda i: (t := i.topics.get_topic("a")) is not None and len(t.partitions) == 4 and i.topic_configs("a")
    )
    assert image.topic_configs("a") == {"retention.ms": "60000"}

    deleted = node.controller.delete_topics({"topic_names": ["b", "nope"]}).result(TIMEOUT)
    assert [r["error_code"] for r in deleted["responses"]] == [errors.NONE, errors.UNKNOWN_TOPIC_OR_PARTITION]
    image = node.wait_image(lambda i: i.topics.get_topic("b") is None)
    assert image.topics.get_topic("a") is not None


def test_allocate_producer_ids(node):
    epoch = node.register_broker()["broker_epoch"]
    first = node.controller.allocate_producer_ids({"broker_id": 1, "broker_epoch": epoch}).result(TIMEOUT)
    second = node.controller.allocate_producer_ids({"broker_id": 1, "broker_epoch": epoch}).result(TIMEOUT)
    assert (first["producer_id_start"], second["producer_id_start"], second["producer_id_len"]) == (0, 1000, 1000)
    stale = node.controller.allocate_producer_ids({"broker_id": 1, "broker_epoch": epoch + 1}).result(TIMEOUT)
    assert stale["error_code"] == errors.STALE_BROKER_EPOCH


def test_many_concurrent_writers(node):
    node.register_broker()
    futures: list[Future] = []
    lock = threading.Lock()

    def writer(i):
        for j in range(10):
            f = create(node, f"t-{i}-{j}")
            with lock:
                futures.append(f)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(f.result(TIMEOUT)["topics"][0]["error_code"] == errors.NONE for f in futures)
    image = node.wait_image(lambda i: len(i.topics.by_name) == 40)
    assert len(image.topics.by_id) == 40


def test_restart_replays_log_and_keeps_state(tmp_path):
    log = MemoryReplicatedLog()
    first = Node(log, tmp_path)
    try:
        first.register_broker()
        topic_id = create(first, "persist").result(TIMEOUT)["topics"][0]["topic_id"]
        first.controller.allocate_producer_ids({"broker_id": 1, "broker_epoch": -1}).result(TIMEOUT)
        epoch1 = first.raft.leader_and_epoch.epoch
    finally:
        first.stop()
    second = Node(log, tmp_path)
    try:
        assert second.raft.leader_and_epoch.epoch == epoch1 + 1
        image = second.wait_image(lambda i: i.topics.get_topic("persist") is not None)
        assert image.topics.get_topic("persist").id == topic_id and image.next_producer_id == 1000
        # the controller replayed too: duplicates are refused, producer ids continue
        assert create(second, "persist").result(TIMEOUT)["topics"][0]["error_code"] == errors.TOPIC_ALREADY_EXISTS
        nxt = second.controller.allocate_producer_ids({"broker_id": 1, "broker_epoch": -1}).result(TIMEOUT)
        assert nxt["producer_id_start"] == 1000
        # bootstrap records (metadata.version, group.version, transaction.version) written once only
        assert [r.name for r in second.records.records].count("FeatureLevelRecord") == 3
    finally:
        second.stop()


def test_write_before_active_and_after_close_fail_with_not_controller(tmp_path):
    raft = KafkaRaftClient(1, [1], MemoryReplicatedLog(), FileQuorumStateStore(str(tmp_path)), MetadataRecordSerde())
    controller = QuorumController(1, raft, "c")  # the raft client is never polled: never active
    request = {"topics": [{"name": "x", "num_partitions": 1, "replication_factor": 1}]}
    try:
        with pytest.raises(NotControllerError):
            controller.create_topics(request).result(TIMEOUT)
    finally:
        controller.close()
    with pytest.raises(NotControllerError):
        controller.create_topics(request).result(TIMEOUT)


def test_late_publisher_gets_whole_image(node):
    node.register_broker()
    create(node, "late").result(TIMEOUT)
    node.wait_image(lambda i: i.topics.get_topic("late") is not None)
    late = RecordingPublisher()
    node.loader.install_publishers([late]).result(TIMEOUT)
    delta, image = late.updates[0]
    assert image.topics.get_topic("late") is not None
    assert ("late", 0) in delta.topics.local_changes(1).leaders


def test_renounce_fails_parked_ops_then_rebuilds_from_the_log_and_reactivates(node):
    node.register_broker()
    create(node, "kept").result(TIMEOUT)
    done: Future = Future()

    def renounce():
        node.controller._renounce("test")
        done.set_result(None)

    node.controller._queue.append(renounce)
    done.result(TIMEOUT)
    assert node.controller.wait_for_active(TIMEOUT)
    wait_until(lambda: node.controller.managers.replication.topic_exists("kept"), TIMEOUT, 0.005)
    assert create(node, "kept").result(TIMEOUT)["topics"][0]["error_code"] == errors.TOPIC_ALREADY_EXISTS
    assert create(node, "new").result(TIMEOUT)["topics"][0]["error_code"] == errors.NONE


def test_leader_rebalance_runs_every_check_interval(tmp_path, monkeypatch):
    """auto.leader.rebalance.enable: the preferred-leader check runs every leader imbalance check interval
    (its deadline is on the event queue's monotonic clock, not the wall clock, which put it decades away)."""
    import pykbroker.metadata.quorum_controller as qc

    calls = []
    real = qc.balance_partition_leaders

    def counting(replication):
        calls.append(1)
        return real(replication)

    monkeypatch.setattr(qc, "balance_partition_leaders", counting)
    raft = KafkaRaftClient(1, [1], MemoryReplicatedLog(), FileQuorumStateStore(str(tmp_path)), MetadataRecordSerde())
    controller = QuorumController(1, raft, "test-cluster", leader_imbalance_check_interval_ms=20)
    driver = KafkaRaftClientDriver(raft)
    driver.start()
    try:
        assert controller.wait_for_active(TIMEOUT)
        wait_until(lambda: len(calls) >= 2, TIMEOUT, 0.005, "two leader rebalance checks")
    finally:
        controller.close()
        driver.shutdown()
