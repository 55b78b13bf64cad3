"""Issue 31: the BrokerMetadataPublisher hands each delta's replica changes to the ReplicaManager's applier thread
and publishes the next image at once (a next CreateTopics batch is visible while the previous batch's logs are
created); the applier applies the changes in metadata order, so a later delete or leadership change of a
partition wins over its pending create, a storage error still takes the partition offline, and shutdown drops
what is still queued. Log creation is held back by blocking ``LogManager.get_or_create_log``.
"""

from __future__ import annotations

import threading
import uuid

import pytest

from pykbroker.metadata.delta import MetadataDelta
from pykbroker.metadata.records import partition_record, remove_topic_record, topic_record
from pykbroker.protocol import errors
from tests.helpers.wait import wait_until
from tests.unit.server.test_topic_visible_before_logs import SlowLogs

BLOCKER_ID = uuid.UUID(int=41)
TOPIC_ID = uuid.UUID(int=42)


@pytest.fixture
def node(tmp_path):
    n = SlowLogs(tmp_path)
    real = n.real_create

    def slow(topic, *args, **kw):  # only the "blocker" topic's log waits for release
        if topic == "blocker":
            n.entered.set()
            assert n.release.wait(10)
        return real(topic, *args, **kw)

    n.broker.log_manager.get_or_create_log = slow
    n.publisher.first_publish.set()  # a running broker (the first publish waits for its logs)
    yield n
    n.release.set()
    n.broker.close()


def _publish(node: SlowLogs, *records) -> None:
    """Publish one delta of ``records`` on a thread; it must return promptly (not wait for log creation)."""
    delta = MetadataDelta(node.broker.cache.image)
    for r in records:
        delta.replay(r)
    thread = threading.Thread(target=node.publisher.on_metadata_update, args=(delta, delta.apply()), daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "the publisher waited for log creation"


def _block_applier(node: SlowLogs) -> None:
    _publish(node, topic_record("blocker", BLOCKER_ID), partition_record(BLOCKER_ID, 0, [1], [1], 1))
    assert node.entered.wait(5)


def _applied(node: SlowLogs) -> None:
    node.release.set()
    wait_until(lambda: node.rm._applier is None, 10, message="the queued changes applied")


def test_next_image_published_while_the_previous_logs_are_created(node):
    _block_applier(node)
    _publish(node, topic_record("t", TOPIC_ID), partition_record(TOPIC_ID, 0, [1], [1], 1))
    assert node.broker.cache.partition("t", 0).leader == 1
    assert node.rm.get_partition("t", 0) is None
    _applied(node)
    assert node.rm.get_partition("t", 0).is_leader


def test_delete_queued_after_a_pending_create_wins(node):
    _block_applier(node)
    _publish(node, topic_record("t", TOPIC_ID), partition_record(TOPIC_ID, 0, [1], [1], 1))
    _publish(node, remove_topic_record(TOPIC_ID))
    assert node.broker.cache.partition("t", 0) is None
    _applied(node)
    assert node.rm.get_partition("t", 0) is None
    assert node.broker.log_manager.get_log("t", 0) is None
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        node.rm.get_partition_or_error("t", 0)


def test_become_follower_queued_after_a_pending_create_wins(node):
    _block_applier(node)
    _publish(node, topic_record("t", TOPIC_ID), partition_record(TOPIC_ID, 0, [1, 2], [1, 2], 1))
    _publish(node, partition_record(TOPIC_ID, 0, [1, 2], [1, 2], 2, leader_epoch=1, partition_epoch=1))
    _applied(node)
    p = node.rm.get_partition("t", 0)
    assert not p.is_leader and p.leader_id == 2
    assert p.leader_epoch == node.broker.cache.partition("t", 0).leader_epoch == 1


def test_storage_error_of_a_queued_create_takes_the_partition_offline(node):
    real = node.broker.log_manager.get_or_create_log

    def failing(topic, *args, **kw):
        if topic == "t":
            raise errors.KafkaStorageError("disk gone")
        return real(topic, *args, **kw)

    node.broker.log_manager.get_or_create_log = failing
    _block_applier(node)
    _publish(node, topic_record("t", TOPIC_ID), partition_record(TOPIC_ID, 0, [1], [1], 1))
    _applied(node)
    assert node.rm.is_offline("t", 0)
    with pytest.raises(errors.KafkaStorageError):
        node.rm.get_partition_or_error("t", 0)


def test_shutdown_drops_the_queued_changes(node):
    _block_applier(node)
    _publish(node, topic_record("t", TOPIC_ID), partition_record(TOPIC_ID, 0, [1], [1], 1))
    stopping = threading.Thread(target=node.rm.shutdown, daemon=True)
    stopping.start()
    wait_until(lambda: not node.rm._state_changes, 5, message="the queue dropped")
    assert node.rm._creating == frozenset({("blocker", 0)})  # only the one being applied
    node.release.set()
    stopping.join(10)
    assert not stopping.is_alive()
    assert node.broker.log_manager.get_log("t", 0) is None
    assert node.rm._creating == frozenset()


def test_merged_changes_keep_the_last_change_of_each_partition():
    from types import SimpleNamespace

    from pykbroker.server.replica_manager import merge_local_changes

    def changes(deletes=(), leaders=None, followers=None):
        return SimpleNamespace(deletes=set(deletes), leaders=leaders or {}, followers=followers or {})

    merged = merge_local_changes(
        [
            changes(leaders={("a", 0): "a1", ("b", 0): "b1", ("c", 0): "c1"}),
            changes(deletes={("a", 0)}, followers={("b", 0): "b2"}),
            changes(deletes={("c", 0)}, leaders={("c", 0): "c3"}),  # deleted, then re-created (a new topic id)
        ]
    )
    assert merged.deletes == {("a", 0), ("c", 0)}
    assert merged.leaders == {("c", 0): "c3"}
    assert merged.followers == {("b", 0): "b2"}


def test_queued_deltas_are_applied_as_one(node):
    _block_applier(node)
    for i in range(3):
        topic_id = uuid.UUID(int=50 + i)
        _publish(node, topic_record(f"t{i}", topic_id), partition_record(topic_id, 0, [1], [1], 1))
    applied: list = []
    real = node.rm._apply_delta_now
    node.rm._apply_delta_now = lambda changes, image: (applied.append(sorted(changes.leaders)), real(changes, image))
    _applied(node)
    assert applied == [[("t0", 0), ("t1", 0), ("t2", 0)]]
    assert all(node.rm.get_partition(f"t{i}", 0).is_leader for i in range(3))
