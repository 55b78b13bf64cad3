"""Requests at the edges of their schemas get their API's response with Kafka's error code: never
silence, a closed connection or a traceback in the broker log (hardening issue, items 8 and 18)."""

from __future__ import annotations

import uuid

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.broker import BrokerProcess
from tests.helpers.topics import create_topic
from tests.helpers.topics import produce_raw as _produce_raw
from tests.helpers.topics import record_batch as _batch
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration
ZERO_UUID = uuid.UUID(int=0)
ALL_TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))  # READ..ALTER_CONFIGS
ALL_CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
ALL_GROUP_OPERATIONS = sum(1 << op for op in (3, 6, 8, 10, 11))
OMITTED = -2147483648


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("edge")).start()
    create_topic(b.bootstrap, "t", partitions=1)
    assert _produce_raw(b.bootstrap, "t", _batch(5))["error_code"] == 0
    yield b
    b.stop()
    assert "Traceback" not in b.output(), b.output()[-5000:]


def request(broker, api_key, version, body):
    with BrokerConnection.to(broker.bootstrap, timeout=10) as c:
        return c.request(api_key, version, body)


def metadata(broker, version, topics, **flags):
    return request(
        broker,
        ApiKeys.METADATA,
        version,
        {"topics": topics, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False, **flags},
    )


def topic_id(broker) -> uuid.UUID:
    return metadata(broker, 12, [{"name": "t", "topic_id": ZERO_UUID}])["topics"][0]["topic_id"]


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_before_v12_with_a_topic_id_only_is_invalid_request(broker, version):
    for tid in (topic_id(broker), uuid.uuid4()):
        (t,) = metadata(broker, version, [{"name": None, "topic_id": tid}])["topics"]
        assert t["error_code"] == errors.INVALID_REQUEST


def test_metadata_v12_by_topic_id(broker):
    (t,) = metadata(broker, 12, [{"name": None, "topic_id": topic_id(broker)}])["topics"]
    assert (t["name"], t["error_code"], len(t["partitions"])) == ("t", errors.NONE, 1)
    (t,) = metadata(broker, 12, [{"name": None, "topic_id": uuid.uuid4()}])["topics"]
    assert (t["name"], t["error_code"]) == (None, errors.UNKNOWN_TOPIC_ID)


@pytest.mark.parametrize("timestamp", [-6, -7, -100, -(2**63)])
def test_list_offsets_with_other_negative_timestamps_searches_from_the_start(broker, timestamp):
    """Any timestamp other than Kafka's special values is searched for; every record's timestamp is
    >= a negative one, so the answer is the first record (Kafka's UnifiedLog does the same)."""
    r = request(
        broker,
        ApiKeys.LIST_OFFSETS,
        7,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": "t",
                    "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}],
                }
            ],
        },
    )
    p = r["topics"][0]["partitions"][0]
    assert (p["error_code"], p["offset"]) == (errors.NONE, 0) and p["timestamp"] > 0


@pytest.mark.parametrize("partition_max_bytes,max_bytes", [(-1, 1 << 20), (-(2**31), 1 << 20), (100, -1)])
def test_fetch_with_negative_max_bytes_answers_the_partition(broker, partition_max_bytes, max_bytes):
    r = request(
        broker,
        ApiKeys.FETCH,
        12,
        {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": max_bytes,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "forgotten_topics_data": [],
            "rack_id": "",
            "topics": [
                {
                    "topic": "t",
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": -1,
                            "fetch_offset": 0,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": partition_max_bytes,
                        }
                    ],
                }
            ],
        },
    )
    (p,) = r["responses"][0]["partitions"]
    assert p["error_code"] == errors.UNKNOWN_SERVER_ERROR and not p["records"]


def test_authorized_operations_without_an_authorizer_are_all_supported_operations(broker):
    r = metadata(
        broker,
        10,
        [{"name": "t", "topic_id": ZERO_UUID}],
        include_topic_authorized_operations=True,
        include_cluster_authorized_operations=True,
    )
    assert r["topics"][0]["topic_authorized_operations"] == ALL_TOPIC_OPERATIONS
    assert r["cluster_authorized_operations"] == ALL_CLUSTER_OPERATIONS
    r = metadata(broker, 10, [{"name": "t", "topic_id": ZERO_UUID}])
    assert r["topics"][0]["topic_authorized_operations"] == OMITTED and r["cluster_authorized_operations"] == OMITTED
    r = request(broker, ApiKeys.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": True})
    assert r["cluster_authorized_operations"] == ALL_CLUSTER_OPERATIONS

    def describe_group():  # once the group coordinator is up (FindCoordinator creates __consumer_offsets)
        request(broker, ApiKeys.FIND_COORDINATOR, 1, {"key": "nobody", "key_type": 0})
        (g,) = request(
            broker, ApiKeys.DESCRIBE_GROUPS, 5, {"groups": ["nobody"], "include_authorized_operations": True}
        )["groups"]
        return g if g["error_code"] == errors.NONE else None

    assert wait_until(describe_group, 30, message="group coordinator")["authorized_operations"] == ALL_GROUP_OPERATIONS


def test_authorized_operations_through_confluent_admin(broker):
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation, AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (future,) = admin.describe_topics(
        TopicCollection(["t"]), request_timeout=10, include_authorized_operations=True
    ).values()
    topic_ops = set(future.result(10).authorized_operations)
    assert topic_ops == {
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    }
    cluster = admin.describe_cluster(request_timeout=10, include_authorized_operations=True).result(10)
    assert len(set(cluster.authorized_operations)) == 7
