"""ReplicationControlManager: CreateTopics / DeleteTopics / CreatePartitions validation and records."""

from __future__ import annotations

import random
import uuid

import pytest

from pykbroker.metadata.cluster_control_manager import ClusterControlManager
from pykbroker.metadata.configuration_control_manager import ConfigSchema, ConfigurationControlManager
from pykbroker.metadata.records import (
    CONFIG_RECORD,
    PARTITION_RECORD,
    REMOVE_TOPIC_RECORD,
    TOPIC_RECORD,
    ApiMessageAndVersion,
)
from pykbroker.metadata.replica_placer import StripedReplicaPlacer
from pykbroker.metadata.replication_control_manager import ReplicationControlManager
from pykbroker.protocol import errors
from pykbroker.protocol.config_resource import ConfigResourceType
from pykbroker.protocol.types import ZERO_UUID


class Ctx:
    def __init__(self, num_brokers=3, fenced=(), schema=None, default_partitions=1, default_rf=1):
        self.cluster = ClusterControlManager("cid")
        self.configs = ConfigurationControlManager(schema)
        self.repl = ReplicationControlManager(
            self.cluster, self.configs, StripedReplicaPlacer(random.Random(0)), default_partitions, default_rf
        )
        self.configs.topic_exists = self.repl.topic_exists
        for b in range(num_brokers):
            result = self.cluster.register_broker(
                {"broker_id": b, "listeners": [{"name": "PLAINTEXT", "host": "h", "port": 9092 + b}]}, b
            )
            self.replay(result.records)
            self.cluster.brokers[b].fenced = b in fenced

    def replay(self, records: list[ApiMessageAndVersion]):
        for r in records:
            for m in (self.cluster, self.configs, self.repl):
                m.replay(r)

    def create(self, *topics, validate_only=False, apply=True):
        result = self.repl.create_topics({"topics": list(topics), "validate_only": validate_only})
        if apply:
            self.replay(result.records)
        return result


def t(name, p=1, rf=1, **kw):
    return {"name": name, "num_partitions": p, "replication_factor": rf, **kw}


def codes(result, key="topics"):
    return {r["name"]: r["error_code"] for r in result.response[key]}


def test_create_topic_records_and_result():
    ctx = Ctx()
    result = ctx.create(t("foo", 3, 2, configs=[{"name": "cleanup.policy", "value": "compact"}]))
    names = [r.name for r in result.records]
    assert names == [TOPIC_RECORD, CONFIG_RECORD] + [PARTITION_RECORD] * 3
    (res,) = result.response["topics"]
    assert res["error_code"] == errors.NONE and res["num_partitions"] == 3 and res["replication_factor"] == 2
    assert isinstance(res["topic_id"], uuid.UUID) and res["topic_id"] == result.records[0].data["topic_id"]
    assert res["configs"] == [
        {"name": "cleanup.policy", "value": "compact", "read_only": False, "config_source": 1, "is_sensitive": False}
    ]
    for i, rec in enumerate(result.records[2:]):
        d = rec.data
        assert d["partition_id"] == i and len(d["replicas"]) == 2 and d["isr"] == d["replicas"]
        assert d["leader"] == d["isr"][0] and d["leader_epoch"] == 0 and d["partition_epoch"] == 0
    assert ctx.repl.get_topic("foo").parts[2].replicas == tuple(result.records[4].data["replicas"])
    assert ctx.configs.get(ConfigResourceType.TOPIC, "foo") == {"cleanup.policy": "compact"}


def test_defaults_for_minus_one():
    ctx = Ctx(default_partitions=4, default_rf=2)
    res = ctx.create(t("d", -1, -1)).response["topics"][0]
    assert (res["num_partitions"], res["replication_factor"]) == (4, 2)


@pytest.mark.parametrize(
    "name,code",
    [
        ("", errors.INVALID_TOPIC_EXCEPTION),
        (".", errors.INVALID_TOPIC_EXCEPTION),
        ("..", errors.INVALID_TOPIC_EXCEPTION),
        ("a" * 250, errors.INVALID_TOPIC_EXCEPTION),
        ("bad name", errors.INVALID_TOPIC_EXCEPTION),
        ("bad/name", errors.INVALID_TOPIC_EXCEPTION),
        ("a" * 249, errors.NONE),
        ("ok.Name_-1", errors.NONE),
    ],
)
def test_topic_name_validation(name, code):
    assert codes(Ctx().create(t(name)))[name] == code


def test_existing_and_collision():
    ctx = Ctx()
    ctx.create(t("a.b"))
    result = ctx.create(t("a.b"), t("a_b"), t("c"))
    assert codes(result) == {
        "a.b": errors.TOPIC_ALREADY_EXISTS,
        "a_b": errors.INVALID_TOPIC_EXCEPTION,
        "c": errors.NONE,
    }
    assert "collides with existing topic: a.b" in result.response["topics"][1]["error_message"]
    assert [r.data["name"] for r in result.records if r.name == TOPIC_RECORD] == ["c"]


def test_collision_within_one_request_and_duplicates():
    result = Ctx().create(t("x.y"), t("x_y"), t("dup"), t("dup"))
    assert codes(result) == {"x.y": errors.NONE, "x_y": errors.INVALID_TOPIC_EXCEPTION, "dup": errors.INVALID_REQUEST}
    assert len(result.response["topics"]) == 3


@pytest.mark.parametrize(
    "p,rf,code",
    [
        (0, 1, errors.INVALID_PARTITIONS),
        (-2, 1, errors.INVALID_PARTITIONS),
        (1, 0, errors.INVALID_REPLICATION_FACTOR),
        (1, -2, errors.INVALID_REPLICATION_FACTOR),
        (1, 4, errors.INVALID_REPLICATION_FACTOR),
    ],
)
def test_invalid_counts(p, rf, code):
    result = Ctx().create(t("x", p, rf))
    assert codes(result)["x"] == code
    assert result.records == []


def test_all_fenced_is_invalid_replication_factor():
    assert codes(Ctx(fenced={0, 1, 2}).create(t("x")))["x"] == errors.INVALID_REPLICATION_FACTOR


def test_manual_assignment():
    ctx = Ctx()
    assignments = [{"partition_index": 0, "broker_ids": [2, 0]}, {"partition_index": 1, "broker_ids": [1, 2]}]
    result = ctx.create(t("m", -1, -1, assignments=assignments))
    assert codes(result)["m"] == errors.NONE
    parts = [r.data for r in result.records if r.name == PARTITION_RECORD]
    assert [(p["replicas"], p["leader"]) for p in parts] == [([2, 0], 2), ([1, 2], 1)]


def manual(*assignments, p=-1, rf=-1):
    return t("m", p, rf, assignments=[{"partition_index": i, "broker_ids": b} for i, b in assignments])


@pytest.mark.parametrize(
    "topic,code,msg",
    [
        (manual((0, [0]), p=1), errors.INVALID_REQUEST, "numPartitions"),
        (manual((0, [0]), rf=1), errors.INVALID_REQUEST, "replication factor"),
        (manual((0, [0, 0])), errors.INVALID_REPLICA_ASSIGNMENT, "more than once"),
        (manual((0, [7])), errors.INVALID_REPLICA_ASSIGNMENT, "no such broker"),
        (manual((0, [])), errors.INVALID_REPLICA_ASSIGNMENT, "empty"),
        (manual((1, [0])), errors.INVALID_REPLICA_ASSIGNMENT, "consecutive"),
        (manual((0, [0]), (0, [1])), errors.INVALID_REPLICA_ASSIGNMENT, "multiple"),
        (manual((0, [0]), (1, [1, 2])), errors.INVALID_REPLICA_ASSIGNMENT, "not consistent"),
    ],
)
def test_manual_assignment_errors(topic, code, msg):
    (res,) = Ctx().create(topic).response["topics"]
    assert res["error_code"] == code and msg in res["error_message"]


def test_validate_only_emits_no_records_and_changes_nothing():
    ctx = Ctx()
    result = ctx.create(t("v", 2, 1), validate_only=True)
    assert result.records == [] and codes(result)["v"] == errors.NONE
    assert not ctx.repl.topic_exists("v")


def test_null_config_and_schema_rejection():
    class Strict(ConfigSchema):
        def validate(self, resource_type, resource_name, configs):
            if "bogus" in configs:
                raise errors.InvalidConfigurationError("Unknown topic config name: bogus")

    ctx = Ctx(schema=Strict())
    result = ctx.create(
        t("n", configs=[{"name": "retention.ms", "value": None}]), t("b", configs=[{"name": "bogus", "value": "1"}])
    )
    assert codes(result) == {"n": errors.INVALID_CONFIG, "b": errors.INVALID_CONFIG}
    assert result.response["topics"][1]["error_message"] == "Unknown topic config name: bogus"


def test_describable_hides_configs():
    ctx = Ctx()
    res = ctx.repl.create_topics({"topics": [t("h")]}, describable=set()).response["topics"][0]
    assert res["error_code"] == errors.NONE
    assert res["topic_config_error_code"] == errors.TOPIC_AUTHORIZATION_FAILED


def test_delete_topics_by_name_and_id():
    ctx = Ctx()
    ctx.create(t("a", configs=[{"name": "retention.ms", "value": "1"}]), t("b"))
    b_id = ctx.repl.topics_by_name["b"]
    missing = uuid.uuid4()
    result = ctx.repl.delete_topics(
        {
            "topic_names": ["a", "nope"],
            "topics": [{"name": None, "topic_id": b_id}, {"name": None, "topic_id": missing}],
        }
    )
    by = [(r["name"], r["topic_id"], r["error_code"]) for r in result.response["responses"]]
    assert by[0][0] == "a" and by[0][2] == errors.NONE
    assert by[1] == ("nope", ZERO_UUID, errors.UNKNOWN_TOPIC_OR_PARTITION)
    assert by[2] == ("b", b_id, errors.NONE)
    assert by[3][2] == errors.UNKNOWN_TOPIC_ID
    assert [r.name for r in result.records] == [REMOVE_TOPIC_RECORD] * 2
    ctx.replay(result.records)
    assert not ctx.repl.topics and not ctx.repl.topics_by_name
    assert ctx.configs.get(ConfigResourceType.TOPIC, "a") == {}
    ctx.create(t("a_b"))  # collision bookkeeping cleared with the deletion of a.b-like names
    assert codes(ctx.create(t("a_b")))["a_b"] == errors.TOPIC_ALREADY_EXISTS


def test_delete_duplicates_and_disabled():
    ctx = Ctx()
    ctx.create(t("a"))
    result = ctx.repl.delete_topics({"topic_names": ["a", "a"]})
    assert [r["error_code"] for r in result.response["responses"]] == [errors.NONE, errors.INVALID_REQUEST]
    ctx.repl.delete_topic_enable = False
    assert (
        ctx.repl.delete_topics({"topic_names": ["a"]}).response["responses"][0]["error_code"]
        == errors.TOPIC_DELETION_DISABLED
    )


def test_create_partitions():
    ctx = Ctx()
    ctx.create(t("p", 2, 2))
    result = ctx.repl.create_partitions({"topics": [{"name": "p", "count": 5, "assignments": None}]})
    assert result.response["results"] == [{"name": "p", "error_code": errors.NONE, "error_message": None}]
    parts = [r.data for r in result.records]
    assert [p["partition_id"] for p in parts] == [2, 3, 4]
    assert all(len(p["replicas"]) == 2 and p["leader"] == p["replicas"][0] for p in parts)
    ctx.replay(result.records)
    assert len(ctx.repl.get_topic("p").parts) == 5


def test_create_partitions_errors():
    ctx = Ctx()
    ctx.create(t("p", 3, 1), t("p2", 3, 1), t("p3", 3, 1), t("p4", 1, 2))
    req = {
        "topics": [
            {"name": "p", "count": 2},
            {"name": "p2", "count": 3},
            {"name": "nope", "count": 3},
            {"name": "p3", "count": 5, "assignments": [{"broker_ids": [0]}]},
            {"name": "p4", "count": 2, "assignments": [{"broker_ids": [0]}]},
        ],
        "validate_only": False,
    }
    result = ctx.repl.create_partitions(req)
    got = {r["name"]: (r["error_code"], r["error_message"]) for r in result.response["results"]}
    assert got["p"] == (
        errors.INVALID_PARTITIONS,
        "The topic p currently has 3 partition(s); 2 would not be an increase.",
    )
    assert got["p2"] == (errors.INVALID_PARTITIONS, "Topic already has 3 partition(s).")
    assert got["nope"][0] == errors.UNKNOWN_TOPIC_OR_PARTITION
    assert got["p3"][0] == errors.INVALID_REPLICA_ASSIGNMENT
    assert got["p4"][0] == errors.INVALID_REPLICA_ASSIGNMENT  # rf 1 vs existing 2
    assert result.records == []


def test_create_partitions_manual_and_validate_only():
    ctx = Ctx()
    ctx.create(t("q", 1, 2))
    req = {"topics": [{"name": "q", "count": 2, "assignments": [{"broker_ids": [1, 0]}]}], "validate_only": True}
    result = ctx.repl.create_partitions(req)
    assert result.response["results"][0]["error_code"] == errors.NONE and result.records == []
    req["validate_only"] = False
    result = ctx.repl.create_partitions(req)
    assert result.records[0].data["replicas"] == [1, 0] and result.records[0].data["partition_id"] == 1


@pytest.mark.parametrize("validate_only", [False, True])
def test_excessively_large_create_topics_is_refused_before_building_anything(validate_only):
    """A million partitions (or 10,001 topics) fail whole with Kafka's POLICY_VIOLATION, at once."""
    import time as _time

    ctx = Ctx()
    start = _time.monotonic()
    result = ctx.create(t("huge", 1_000_000), t("small", 1), validate_only=validate_only)
    assert _time.monotonic() - start < 0.5
    assert codes(result) == {"huge": errors.POLICY_VIOLATION, "small": errors.POLICY_VIOLATION}
    assert result.response["topics"][0]["error_message"] == "Unable to perform excessively large batch operation."
    assert result.records == [] and not ctx.repl.topic_exists("small")
    many = ctx.create(*[t(f"t{i}", 1) for i in range(5001)])  # 2 records each: 10,002
    assert set(codes(many).values()) == {errors.POLICY_VIOLATION} and many.records == []
    # Just under the bound still works: 1 TopicRecord + 9,999 PartitionRecords.
    ok = ctx.create(t("big", 9_999))
    assert codes(ok) == {"big": errors.NONE} and len(ok.records) == 10_000


def test_excessively_large_create_partitions_is_refused_before_building_anything():
    ctx = Ctx()
    ctx.create(t("foo", 1))
    result = ctx.repl.create_partitions(
        {"topics": [{"name": "foo", "count": 1_000_001, "assignments": None}], "validate_only": True}
    )
    assert codes(result, "results") == {"foo": errors.POLICY_VIOLATION} and result.records == []
    result = ctx.repl.create_partitions(
        {"topics": [{"name": "foo", "count": 33_500_000, "assignments": None}], "validate_only": False}
    )
    assert codes(result, "results") == {"foo": errors.POLICY_VIOLATION} and result.records == []
    ok = ctx.repl.create_partitions(
        {"topics": [{"name": "foo", "count": 10_001, "assignments": None}], "validate_only": False}
    )
    assert codes(ok, "results") == {"foo": errors.NONE} and len(ok.records) == 10_000


def test_many_duplicate_names_are_found_in_linear_time():
    ctx = Ctx()
    result = ctx.create(*[t("dup", 1) for _ in range(2000)], *[t(f"u{i}", 1) for i in range(2000)])
    c = codes(result)
    assert c["dup"] == errors.INVALID_REQUEST and c["u0"] == errors.NONE
