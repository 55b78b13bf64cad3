"""DescribeTopicPartitions (key 75, KIP-966) against a real broker: pagination by partition limit and cursor,
errors per topic and per request, and kafka-topics --describe paging through it."""

from __future__ import annotations

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.tools import create_topic_with_tool, run_tool

pytestmark = pytest.mark.integration

TOPICS = {"dtp-a": 3, "dtp-b": 2, "dtp-c": 1}


@pytest.fixture(scope="module")
def kafka(module_broker):
    for name, partitions in TOPICS.items():
        create_topic_with_tool(module_broker.bootstrap, name, partitions)
    return module_broker


def describe(kafka, names, limit=2000, cursor=None) -> dict:
    with BrokerConnection.to(kafka.bootstrap) as conn:
        return conn.request(
            ApiKeys.DESCRIBE_TOPIC_PARTITIONS,
            0,
            {"topics": [{"name": n} for n in names], "response_partition_limit": limit, "cursor": cursor},
        )


def pages(kafka, names, limit) -> list[list[tuple[str, list[int]]]]:
    """Every page of a paged walk: per page ``[(topic, [partition, ...]), ...]``."""
    out, cursor = [], None
    for _ in range(20):
        r = describe(kafka, names, limit, cursor)
        assert all(t["error_code"] == errors.NONE for t in r["topics"]), r
        out.append([(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in r["topics"]])
        cursor = r["next_cursor"]
        if cursor is None:
            return out
    raise AssertionError(f"no end of pages: {out}")


def test_pages_by_partition_limit_and_cursor(kafka):
    named = ["dtp-c", "dtp-a", "dtp-b"]  # answered in name order whatever the request's order
    assert pages(kafka, named, 2) == [
        [("dtp-a", [0, 1])],
        [("dtp-a", [2]), ("dtp-b", [0])],
        [("dtp-b", [1]), ("dtp-c", [0])],
    ]
    # A limit ending exactly at a topic's end: the cursor points at the next topic's first partition.
    r = describe(kafka, named, 3)
    assert [t["name"] for t in r["topics"]] == ["dtp-a"]
    assert r["next_cursor"] == {"topic_name": "dtp-b", "partition_index": 0}
    # One page for all, with what Metadata says of each partition.
    whole = describe(kafka, named)
    assert whole["next_cursor"] is None
    part = whole["topics"][0]["partitions"][0]
    assert part["leader_id"] == 1 and part["replica_nodes"] == [1] and part["isr_nodes"] == [1]
    assert part["offline_replicas"] == [] and part["leader_epoch"] >= 0
    assert whole["topics"][0]["topic_authorized_operations"] > 0  # every operation: no authorizer


def test_all_topics_from_a_cursor(kafka):
    walked = [t for page in pages(kafka, [], 1) for t in page]
    names = [n for n, _ in walked]
    assert names == sorted(names)
    assert [t for t in walked if t[0].startswith("dtp-")] == [
        ("dtp-a", [0]), ("dtp-a", [1]), ("dtp-a", [2]), ("dtp-b", [0]), ("dtp-b", [1]), ("dtp-c", [0]),
    ]  # fmt: skip
    r = describe(kafka, [], 2000, {"topic_name": "dtp-b", "partition_index": 1})
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in r["topics"]][:2] == [
        ("dtp-b", [1]),
        ("dtp-c", [0]),
    ]


def test_unknown_and_invalid_topics_and_bad_cursors(kafka):
    r = describe(kafka, ["dtp-a", "dtp-missing", "bad/name"])
    codes = {t["name"]: t["error_code"] for t in r["topics"]}
    assert codes == {
        "dtp-a": errors.NONE,
        "dtp-missing": errors.UNKNOWN_TOPIC_OR_PARTITION,
        "bad/name": errors.INVALID_TOPIC_EXCEPTION,
    }
    # The cursor's topic must be among those named; a cursor's partition must not be negative.
    r = describe(kafka, ["dtp-a"], cursor={"topic_name": "dtp-b", "partition_index": 0})
    assert [(t["name"], t["error_code"]) for t in r["topics"]] == [("dtp-a", errors.INVALID_REQUEST)]
    r = describe(kafka, ["dtp-a"], cursor={"topic_name": "dtp-a", "partition_index": -1})
    assert [(t["name"], t["error_code"]) for t in r["topics"]] == [("dtp-a", errors.INVALID_REQUEST)]
    # A limit of 0 or less still answers one partition (Kafka's max(min(limit, config), 1)).
    r = describe(kafka, ["dtp-a"], 0)
    assert [len(t["partitions"]) for t in r["topics"]] == [1]


def test_kafka_topics_describe_pages_through_it(broker_factory):
    """``max.request.partition.size.limit`` caps every answer (4 here), so the tool must follow the cursor."""
    small = broker_factory("small-pages", max_request_partition_size_limit="4")
    create_topic_with_tool(small.bootstrap, "dtp-wide", 10)
    create_topic_with_tool(small.bootstrap, "dtp-wider", 3)
    assert [len(t["partitions"]) for t in describe(small, ["dtp-wide"])["topics"]] == [4]
    run = run_tool("topic_command", "--bootstrap-server", small.bootstrap, "--describe", "--topic", "dtp-wide.*")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("Topic: dtp-wide\tTopicId: ") and "\tPartitionCount: 10\t" in lines[0]
    assert [line.split("\t")[1:3] for line in lines[1:11]] == [
        ["Topic: dtp-wide", f"Partition: {i}"] for i in range(10)
    ]
    assert lines[11].startswith("Topic: dtp-wider\tTopicId: ") and "\tPartitionCount: 3\t" in lines[11]
    assert len(lines) == 15
