"""A new topic is visible (MetadataCache) as soon as its metadata is published, before its logs exist (Kafka's
BrokerMetadataPublisher order, issue 31); a produce to a partition whose log is still being created waits for it
(ReplicaManager.await_created), and gets NOT_LEADER_OR_FOLLOWER (retriable) if it takes longer: never a wrong
answer. Log creation is held back by blocking ``LogManager.get_or_create_log`` on an event.
"""

from __future__ import annotations

import os
import threading
import uuid

import pytest

import pykbroker.server.replica_manager as replica_manager_module
from pykbroker.metadata.delta import MetadataDelta
from pykbroker.metadata.records import ApiMessageAndVersion, partition_record, topic_record
from pykbroker.metadata.topic_names import GROUP_METADATA_TOPIC_NAME
from pykbroker.protocol import errors
from pykbroker.server.broker_metadata_publisher import BrokerMetadataPublisher
from tests.helpers.wait import wait_until
from tests.unit.server.apis_harness import LocalBroker, records

TOPIC_ID = uuid.UUID(int=31)


class SlowLogs:
    """Node 1 whose log creation blocks until ``release`` is set (``entered``: a creation is blocked)."""

    def __init__(self, tmp_path):
        self.broker = LocalBroker(tmp_path / "logs")
        self.rm = self.broker.replica_manager
        self.publisher = BrokerMetadataPublisher(1, self.broker.cache, self.rm, self.broker.log_manager)
        self.entered = threading.Event()
        self.release = threading.Event()
        real = self.real_create = self.broker.log_manager.get_or_create_log

        def slow(*args, **kw):
            self.entered.set()
            assert self.release.wait(10)
            return real(*args, **kw)

        self.broker.log_manager.get_or_create_log = slow

    def publish_in_background(self, topic: str, topic_id: uuid.UUID, partitions: int) -> threading.Thread:
        delta = MetadataDelta(self.broker.cache.image)
        delta.replay(topic_record(topic, topic_id))
        for i in range(partitions):
            delta.replay(partition_record(topic_id, i, [1], [1], 1))
        thread = threading.Thread(target=self.publisher.on_metadata_update, args=(delta, delta.apply()))
        thread.start()
        return thread

    def produce(self, topic: str, out: list) -> threading.Thread:
        def run() -> None:
            self.rm.append_records(1000, 1, True, {(topic, 0): records(1)}, lambda r: out.append(r[(topic, 0)]))

        thread = threading.Thread(target=run)
        thread.start()
        return thread


@pytest.fixture
def node(tmp_path):
    n = SlowLogs(tmp_path)
    yield n
    n.release.set()
    n.broker.close()


def test_topic_visible_while_its_logs_are_created_and_produce_waits_for_the_log(node):
    publishing = node.publish_in_background("t", TOPIC_ID, 2)
    assert node.entered.wait(5)
    # The image decides what Metadata shows: the topic and its leader, though no log exists yet.
    assert node.broker.cache.partition("t", 0) is not None
    assert node.broker.cache.partition("t", 1).leader == 1
    assert node.rm.get_partition("t", 0) is None
    results: list = []
    producing = node.produce("t", results)
    publishing.join(0.2)  # the produce is waiting for the log, not answered with an error
    assert results == []
    node.release.set()
    producing.join(5)
    publishing.join(5)
    assert [r.error_code for r in results] == [errors.NONE]
    assert results[0].base_offset == 0


def test_produce_gets_a_retriable_error_when_the_log_takes_too_long(node, monkeypatch):
    monkeypatch.setattr(replica_manager_module, "CREATION_WAIT_S", 0.2)
    node.publish_in_background("t", TOPIC_ID, 1)
    assert node.entered.wait(5)
    results: list = []
    node.produce("t", results).join(5)
    assert [r.error_code for r in results] == [errors.NOT_LEADER_OR_FOLLOWER]
    node.release.set()
    wait_until(lambda: node.rm.get_partition("t", 0) is not None, 5, message="the log created")
    results.clear()
    node.produce("t", results).join(5)
    assert [r.error_code for r in results] == [errors.NONE]


def test_coordinator_topic_published_only_once_its_partitions_exist(node):
    """FindCoordinator must never name a broker that answers NOT_COORDINATOR: __consumer_offsets changes are
    published after the partitions (and the group coordinator's election) are in place."""
    node.publish_in_background(GROUP_METADATA_TOPIC_NAME, uuid.UUID(int=32), 1)
    assert node.entered.wait(5)
    assert node.broker.cache.partition(GROUP_METADATA_TOPIC_NAME, 0) is None
    node.release.set()
    wait_until(lambda: node.broker.cache.partition(GROUP_METADATA_TOPIC_NAME, 0) is not None, 5, message="published")
    assert node.rm.get_partition(GROUP_METADATA_TOPIC_NAME, 0) is not None


def _register(broker_id: int, port: int):
    return ApiMessageAndVersion(
        "RegisterBrokerRecord",
        3,
        {
            "broker_id": broker_id,
            "is_migrating_zk_broker": False,
            "incarnation_id": uuid.UUID(int=102),
            "broker_epoch": 2,
            "end_points": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": port, "security_protocol": 0}],
            "features": [],
            "rack": None,
            "fenced": False,
            "in_controlled_shutdown": False,
            "log_dirs": [],
        },
    )


def _block_creation_of(node: SlowLogs, index: int) -> None:
    """Only the creation of partition ``index``'s log waits for ``node.release``."""
    real = node.real_create

    def slow(topic, partition, *args, **kw):
        if partition == index:
            node.entered.set()
            assert node.release.wait(10)
        return real(topic, partition, *args, **kw)

    node.broker.log_manager.get_or_create_log = slow


def _fetched_partitions(rm) -> set:
    return {tp for thread in list(rm.replica_fetcher_manager._threads.values()) for tp in thread.partitions}


def test_followers_of_a_published_chunk_fetch_before_the_rest_of_the_delta_is_created(node):
    """Issue 31: a large delta publishes its partitions in chunks of PUBLISH_CHUNK; the followers of a published
    chunk start fetching then (their ISR can expand), not once every log of the delta exists."""
    chunk = replica_manager_module.PUBLISH_CHUNK
    _block_creation_of(node, chunk)  # the first chunk is created and published, the next one waits
    node.rm.broker_epoch = lambda: 1
    delta = MetadataDelta(node.broker.cache.image)
    delta.replay(_register(2, 1))  # the leader; nothing listens there (the fetchers retry, unanswered)
    delta.replay(topic_record("f", TOPIC_ID))
    for i in range(chunk + 1):
        delta.replay(partition_record(TOPIC_ID, i, [2, 1], [2, 1], 2))
    publishing = threading.Thread(target=node.publisher.on_metadata_update, args=(delta, delta.apply()))
    publishing.start()
    assert node.entered.wait(5)
    assert node.rm.get_partition("f", 0) is not None and node.rm.get_partition("f", chunk) is None
    assert _fetched_partitions(node.rm) == {("f", i) for i in range(chunk)}
    node.release.set()
    publishing.join(10)
    assert _fetched_partitions(node.rm) == {("f", i) for i in range(chunk + 1)}


def test_leader_epoch_checkpoints_of_a_chunk_are_fsynced_before_it_is_published(node, monkeypatch):
    """The delta's leader-epoch checkpoints are written without their own fsync (deferred_sync) but fsynced,
    together, before their partitions are published: a published leader's checkpoint is durable."""
    chunk = replica_manager_module.PUBLISH_CHUNK
    _block_creation_of(node, chunk)
    synced: set[str] = set()
    real_fsync = os.fsync

    def fsync(fd):
        synced.add(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    publishing = node.publish_in_background("t", TOPIC_ID, chunk + 1)
    assert node.entered.wait(5)

    def durable(i: int) -> bool:  # the file fsynced (deferred) or its temp file before the rename (synchronous)
        path = os.path.join(node.rm.get_partition("t", i).log.dir, "leader-epoch-checkpoint")
        return path in synced or path + ".tmp" in synced

    assert all(node.rm.get_partition("t", i) is not None and durable(i) for i in range(chunk))
    node.release.set()
    publishing.join(10)
    assert durable(chunk)
