"""A new topic is visible (MetadataCache) as soon as its metadata is published, before its logs exist (Kafka's
BrokerMetadataPublisher order, issue 31); a produce to a partition whose log is still being created waits for it
(ReplicaManager.await_created), and gets NOT_LEADER_OR_FOLLOWER (retriable) if it takes longer: never a wrong
answer. Log creation is held back by blocking ``LogManager.get_or_create_log`` on an event.
"""

from __future__ import annotations

import threading
import uuid

import pytest

import pykbroker.server.replica_manager as replica_manager_module
from pykbroker.metadata.delta import MetadataDelta
from pykbroker.metadata.records import partition_record, topic_record
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
        real = self.broker.log_manager.get_or_create_log

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
