"""The API versions Kafka 4.0-4.2 added that pykbroker serves, as raw requests to a real broker: Metadata v13,
DescribeCluster v2, DescribeGroups v6, ListOffsets v10, ListTransactions v2, Fetch v18, OffsetCommit v10 and
OffsetFetch v10 (the walk of Kafka's ApiVersions table, issue 26)."""

from __future__ import annotations

import io
import uuid

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.broker import BrokerProcess
from tests.helpers.cluster import KRaftCluster
from tests.helpers.topics import create_topic, produce_raw, record_batch
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration
ZERO_UUID = uuid.UUID(int=0)
MAX_INT64 = (1 << 63) - 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("versions")).start()
    create_topic(b.bootstrap, "t", partitions=2)
    assert produce_raw(b.bootstrap, "t", record_batch(5))["error_code"] == errors.NONE
    yield b
    b.stop()
    assert "Traceback" not in b.output(), b.output()[-5000:]


@pytest.fixture
def conn(broker):
    with BrokerConnection.to(broker.bootstrap, timeout=15) as c:
        yield c


def coordinator_ready(conn, key: str, key_type: int) -> None:
    """Wait until this broker coordinates ``key`` (``__consumer_offsets`` / ``__transaction_state`` exist)."""
    body = {"key_type": key_type, "coordinator_keys": [key]}
    wait_until(
        lambda: conn.request(ApiKeys.FIND_COORDINATOR, 4, body)["coordinators"][0]["error_code"] == errors.NONE,
        timeout=20,
        message=f"coordinator for {key}",
    )


def topic_id(conn, name: str = "t") -> uuid.UUID:
    body = {"topics": [{"name": name, "topic_id": ZERO_UUID}], "allow_auto_topic_creation": False}
    tid = conn.request(ApiKeys.METADATA, 12, body)["topics"][0]["topic_id"]
    assert tid != ZERO_UUID
    return tid


def test_api_versions_advertises_the_new_versions(conn):
    r = conn.request(ApiKeys.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    ranges = {a["api_key"]: (a["min_version"], a["max_version"]) for a in r["api_keys"]}
    assert {k: ranges[k] for k in (1, 2, 3, 8, 9, 15, 60, 66)} == {
        ApiKeys.FETCH: (4, 18),
        ApiKeys.LIST_OFFSETS: (1, 10),
        ApiKeys.METADATA: (0, 13),
        ApiKeys.OFFSET_COMMIT: (2, 10),
        ApiKeys.OFFSET_FETCH: (1, 10),
        ApiKeys.DESCRIBE_GROUPS: (0, 6),
        ApiKeys.DESCRIBE_CLUSTER: (0, 2),
        ApiKeys.LIST_TRANSACTIONS: (0, 2),
    }


def test_metadata_v13_answers_with_a_top_level_error_code_none(conn):
    r = conn.request(
        ApiKeys.METADATA,
        13,
        {"topics": [{"name": "t", "topic_id": ZERO_UUID}, {"name": None, "topic_id": uuid.uuid4()}]},
    )
    assert r["error_code"] == errors.NONE
    t, unknown = r["topics"]
    assert (t["name"], t["error_code"], len(t["partitions"]), len(r["brokers"])) == ("t", errors.NONE, 2, 1)
    assert unknown["error_code"] == errors.UNKNOWN_TOPIC_ID


def test_list_offsets_v10_takes_a_timeout(conn):
    def offset(timestamp: int, timeout_ms: int) -> int:
        body = {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": "t",
                    "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}],
                }
            ],
            "timeout_ms": timeout_ms,
        }
        (p,) = conn.request(ApiKeys.LIST_OFFSETS, 10, body)["topics"][0]["partitions"]
        assert p["error_code"] == errors.NONE, p
        return p["offset"]

    assert [offset(-2, 30000), offset(-1, 0), offset(-1, 5)] == [0, 5, 5]


@pytest.mark.parametrize("high_watermark", [MAX_INT64, -1, 2])
def test_fetch_v18_accepts_the_replica_high_watermark(conn, high_watermark):
    """KIP-1166's partition ``high_watermark`` (tag 1) is for KRaft followers; a broker answers the fetch as v17."""
    partition = {"partition": 0, "fetch_offset": 1, "partition_max_bytes": 1 << 20, "high_watermark": high_watermark}
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic_id": topic_id(conn), "partitions": [partition]}],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    r = conn.request(ApiKeys.FETCH, 18, body)
    (p,) = r["responses"][0]["partitions"]
    assert (r["error_code"], p["error_code"], p["high_watermark"]) == (errors.NONE, errors.NONE, 5)
    assert p["records"]  # the batch holding offsets 0-4


def _commit_v10(conn, group: str, topics: list[tuple[uuid.UUID, int, int]]) -> list[tuple[uuid.UUID, int, int]]:
    by_topic: dict[uuid.UUID, list] = {}
    for tid, partition, offset in topics:
        by_topic.setdefault(tid, []).append(
            {
                "partition_index": partition,
                "committed_offset": offset,
                "committed_leader_epoch": -1,
                "committed_metadata": "m",
            }
        )
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [{"topic_id": tid, "partitions": ps} for tid, ps in by_topic.items()],
    }
    r = conn.request(ApiKeys.OFFSET_COMMIT, 10, body)
    return sorted((t["topic_id"], p["partition_index"], p["error_code"]) for t in r["topics"] for p in t["partitions"])


def _fetch_v10(conn, group: str, topics) -> dict:
    body = {
        "groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": topics}],
        "require_stable": False,
    }
    (g,) = conn.request(ApiKeys.OFFSET_FETCH, 10, body)["groups"]
    assert g["error_code"] == errors.NONE, g
    return {
        (t["topic_id"], p["partition_index"]): (p["committed_offset"], p["metadata"], p["error_code"])
        for t in g["topics"]
        for p in t["partitions"]
    }


def test_offset_commit_and_fetch_v10_name_topics_by_id(conn):
    coordinator_ready(conn, "ids", 0)
    tid, unknown = topic_id(conn), uuid.uuid4()
    assert _commit_v10(conn, "ids", [(tid, 0, 3), (tid, 1, 1), (unknown, 0, 7)]) == sorted(
        [(tid, 0, errors.NONE), (tid, 1, errors.NONE), (unknown, 0, errors.UNKNOWN_TOPIC_ID)]
    )
    assert _commit_v10(conn, "ids", [(unknown, 0, 7), (unknown, 1, 7)]) == sorted(
        [(unknown, 0, errors.UNKNOWN_TOPIC_ID), (unknown, 1, errors.UNKNOWN_TOPIC_ID)]
    )
    assert _commit_v10(conn, "ids", [(tid, 9, 1)]) == [(tid, 9, errors.UNKNOWN_TOPIC_OR_PARTITION)]

    requested = [{"topic_id": tid, "partition_indexes": [0, 1]}, {"topic_id": unknown, "partition_indexes": [0]}]
    assert _fetch_v10(conn, "ids", requested) == {
        (tid, 0): (3, "m", errors.NONE),
        (tid, 1): (1, "m", errors.NONE),
        (unknown, 0): (-1, "", errors.UNKNOWN_TOPIC_ID),
    }
    assert _fetch_v10(conn, "ids", None) == {(tid, 0): (3, "m", errors.NONE), (tid, 1): (1, "m", errors.NONE)}

    # the same offsets by name (v9): the coordinator keeps them by topic name
    body = {
        "groups": [
            {
                "group_id": "ids",
                "member_id": None,
                "member_epoch": -1,
                "topics": [{"name": "t", "partition_indexes": [0]}],
            }
        ]
    }
    (g,) = conn.request(ApiKeys.OFFSET_FETCH, 9, body)["groups"]
    assert [(t["name"], p["committed_offset"]) for t in g["topics"] for p in t["partitions"]] == [("t", 3)]


def test_describe_groups_v6_unknown_group_is_group_id_not_found(conn):
    coordinator_ready(conn, "described", 0)
    assert _commit_v10(conn, "described", [(topic_id(conn), 0, 2)]) == [(topic_id(conn), 0, errors.NONE)]

    def describe(version: int, group: str) -> dict:
        (g,) = conn.request(
            ApiKeys.DESCRIBE_GROUPS, version, {"groups": [group], "include_authorized_operations": False}
        )["groups"]
        return g

    missing = describe(6, "no-such-group")
    assert (missing["error_code"], missing["error_message"], missing["group_state"]) == (
        errors.GROUP_ID_NOT_FOUND,
        "Group no-such-group not found.",
        "",
    )
    before = describe(5, "no-such-group")
    assert (before["error_code"], before["group_state"]) == (errors.NONE, "Dead")
    found = describe(6, "described")
    assert (found["error_code"], found["error_message"], found["group_state"]) == (errors.NONE, None, "Empty")


def test_list_transactions_v2_filters_by_transactional_id_pattern(conn):
    coordinator_ready(conn, "tx-a", 1)
    for tid in ("tx-a", "tx-b", "other"):
        body = {"transactional_id": tid, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}
        wait_until(lambda b=body: conn.request(ApiKeys.INIT_PRODUCER_ID, 4, b)["error_code"] == errors.NONE, 15)

    def listed(version: int, pattern: str | None) -> tuple[int, list[str]]:
        body = {
            "state_filters": [],
            "producer_id_filters": [],
            "duration_filter": -1,
            "transactional_id_pattern": pattern,
        }

        # COORDINATOR_LOAD_IN_PROGRESS while a __transaction_state partition still loads: retriable, as clients do
        def answered() -> dict | None:
            r = conn.request(ApiKeys.LIST_TRANSACTIONS, version, body)
            return None if r["error_code"] == errors.COORDINATOR_LOAD_IN_PROGRESS else r

        r = wait_until(answered, 15)
        return r["error_code"], sorted(t["transactional_id"] for t in r["transaction_states"])

    everything = (errors.NONE, ["other", "tx-a", "tx-b"])
    assert listed(2, "tx-.*") == (errors.NONE, ["tx-a", "tx-b"])
    assert listed(2, "tx-a") == (errors.NONE, ["tx-a"])
    assert listed(2, "tx") == (errors.NONE, [])  # the whole id must match
    assert listed(2, "(unclosed") == (errors.INVALID_REGULAR_EXPRESSION, [])
    assert listed(2, None) == listed(2, "") == listed(1, "tx-a") == everything

    # kafka-transactions list --transactional-id-pattern (Kafka 4.1's TransactionsCommand, KIP-1152)
    from pykbroker.tools import transactions_command

    out, err = io.StringIO(), io.StringIO()
    args = ["--bootstrap-server", conn.node, "list", "--transactional-id-pattern", "tx-.*"]
    assert transactions_command.main(args, out, err) == 0, err.getvalue()
    header, *rows = out.getvalue().splitlines()
    assert header.split() == transactions_command.LIST_HEADERS
    assert sorted(r.split()[0] for r in rows) == ["tx-a", "tx-b"]
    args[-1] = "(unclosed"
    assert transactions_command.main(args, out, err) == 1
    assert "Failed to list transactions: The regular expression is not valid." in err.getvalue()


def test_describe_cluster_v2_on_one_broker(conn, broker):
    def brokers(version: int, include_fenced: bool) -> list[tuple]:
        body = {
            "include_cluster_authorized_operations": False,
            "endpoint_type": 1,
            "include_fenced_brokers": include_fenced,
        }
        r = conn.request(ApiKeys.DESCRIBE_CLUSTER, version, body)
        assert r["error_code"] == errors.NONE
        return [(b["broker_id"], b["port"], b["is_fenced"]) for b in r["brokers"]]

    assert brokers(2, True) == brokers(2, False) == brokers(1, False) == [(1, broker.port, False)]


def test_describe_cluster_v2_includes_fenced_brokers_on_request(tmp_path):
    """A stopped broker is fenced once its session times out: DescribeCluster v2 lists it with is_fenced only
    when asked (KIP-1073); v1 and v2 without the flag list the unfenced brokers only."""
    cluster = KRaftCluster(tmp_path, controllers=1, brokers=2).start()
    try:
        live, stopped = cluster.brokers[101], cluster.brokers[102]
        with BrokerConnection.to(live.bootstrap, timeout=15) as c:

            def brokers(version: int, include_fenced: bool) -> list[tuple]:
                body = {
                    "include_cluster_authorized_operations": False,
                    "endpoint_type": 1,
                    "include_fenced_brokers": include_fenced,
                }
                r = c.request(ApiKeys.DESCRIBE_CLUSTER, version, body)
                return [(b["broker_id"], b["is_fenced"]) for b in r["brokers"]]

            wait_until(lambda: brokers(2, True) == [(101, False), (102, False)], 30, message="both brokers unfenced")
            stopped_port = stopped.port
            stopped.stop()
            wait_until(lambda: brokers(2, False) == [(101, False)], 30, message="broker 102 fenced")
            assert brokers(2, True) == [(101, False), (102, True)]
            assert brokers(1, True) == [(101, False)]  # no include_fenced_brokers before v2
            body = {"include_cluster_authorized_operations": False, "endpoint_type": 1, "include_fenced_brokers": True}
            fenced = c.request(ApiKeys.DESCRIBE_CLUSTER, 2, body)["brokers"][1]
            assert (fenced["host"], fenced["port"]) == ("127.0.0.1", stopped_port)
    finally:
        cluster.stop()
