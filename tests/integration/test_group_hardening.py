"""Group coordinator hardening against a real broker: offset commits for unknown partitions, JoinGroup
timeouts, group config resources, static membership and cooperative rebalances with real clients."""
from __future__ import annotations

import time

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.wait import wait_until
from tests.integration.test_data_path import create_topic

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory):
    from tests.helpers.broker import BrokerProcess
    b = BrokerProcess(tmp_path_factory.mktemp("groups")).start()
    create_topic(b.bootstrap, "two", 2)
    yield b
    b.stop()


def connect(broker) -> BrokerConnection:
    """A connection to the broker once it is the coordinator for group keys (``__consumer_offsets`` exists)."""
    conn = BrokerConnection.to(broker.bootstrap, timeout=15)
    wait_until(lambda: conn.request(ApiKeys.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]})
               ["coordinators"][0]["error_code"] == errors.NONE, timeout=20, message="coordinator available")
    return conn


def codes_of(resp) -> dict:
    return {(t["name"], p["partition_index"]): p["error_code"] for t in resp["topics"] for p in t["partitions"]}


def test_offset_commit_for_unknown_topic_or_partition(gbroker):
    with connect(gbroker) as conn:
        resp = conn.request(ApiKeys.OFFSET_COMMIT, 8, {
            "group_id": "commit-unknown", "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "topics": [
                {"name": "two", "partitions": [{"partition_index": 1, "committed_offset": 3},
                                               {"partition_index": 7, "committed_offset": 3}]},
                {"name": "missing", "partitions": [{"partition_index": 0, "committed_offset": 3}]}]})
        assert codes_of(resp) == {("two", 1): errors.NONE, ("two", 7): errors.UNKNOWN_TOPIC_OR_PARTITION,
                                  ("missing", 0): errors.UNKNOWN_TOPIC_OR_PARTITION}
        fetched = conn.request(ApiKeys.OFFSET_FETCH, 7, {"group_id": "commit-unknown", "topics": None,
                                                         "require_stable": False})
        assert {(t["name"], p["partition_index"]): p["committed_offset"]
                for t in fetched["topics"] for p in t["partitions"]} == {("two", 1): 3}
        # Only unknown partitions: answered without touching the group.
        resp = conn.request(ApiKeys.OFFSET_COMMIT, 8, {
            "group_id": "commit-unknown-2", "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": "missing", "partitions": [{"partition_index": 0, "committed_offset": 3}]}]})
        assert codes_of(resp) == {("missing", 0): errors.UNKNOWN_TOPIC_OR_PARTITION}
        # OffsetDelete checks the partitions the same way (KafkaApis.handleOffsetDeleteRequest).
        resp = conn.request(ApiKeys.OFFSET_DELETE, 0, {"group_id": "commit-unknown", "topics": [
            {"name": "two", "partitions": [{"partition_index": 1}, {"partition_index": 9}]}]})
        assert resp["error_code"] == errors.NONE
        assert codes_of(resp) == {("two", 1): errors.NONE, ("two", 9): errors.UNKNOWN_TOPIC_OR_PARTITION}


def test_alter_consumer_group_offsets_for_unknown_topic(gbroker):
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": gbroker.bootstrap})
    ok = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions("alter-g", [TopicPartition("two", 0, 5)])])
    assert [tp.offset for tp in ok["alter-g"].result(20).topic_partitions] == [5]
    bad = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "alter-g", [TopicPartition("no-such-topic", 0, 5)])])
    with pytest.raises(KafkaException) as info:
        result = bad["alter-g"].result(20)
        # some client versions report the error per partition instead of failing the future
        errs = [tp.error for tp in result.topic_partitions if tp.error is not None]
        if errs:
            raise KafkaException(errs[0])
    assert "UNKNOWN_TOPIC_OR_PART" in str(info.value)
