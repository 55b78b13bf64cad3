"""ConfigurationControlManager, ProducerIdControlManager, FeatureControlManager, ClusterControlManager."""

from __future__ import annotations

import uuid

import pytest

from pykbroker.metadata.cluster_control_manager import ClusterControlManager
from pykbroker.metadata.configuration_control_manager import (
    APPEND,
    DELETE,
    SET,
    SUBTRACT,
    ConfigSchema,
    ConfigurationControlManager,
)
from pykbroker.metadata.feature_control_manager import METADATA_VERSION, FeatureControlManager
from pykbroker.metadata.producer_id_control_manager import BLOCK_SIZE, ProducerIdControlManager
from pykbroker.metadata.records import config_record
from pykbroker.protocol import errors
from pykbroker.protocol.config_resource import ConfigResourceType


def alter(mgr, rtype, rname, *ops, validate_only=False):
    result = mgr.incremental_alter_configs(
        {
            "resources": [
                {
                    "resource_type": rtype,
                    "resource_name": rname,
                    "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops],
                }
            ],
            "validate_only": validate_only,
        }
    )
    return result


def replay_all(mgr, records):
    for r in records:
        mgr.replay(r)


@pytest.fixture
def configs():
    return ConfigurationControlManager(topic_exists=lambda name: name == "t")


def test_set_delete_records_only_changes(configs):
    result = alter(configs, ConfigResourceType.TOPIC, "t", ("retention.ms", SET, "100"), ("segment.bytes", SET, "1000"))
    assert result.response["responses"] == [
        {"error_code": 0, "error_message": None, "resource_type": ConfigResourceType.TOPIC, "resource_name": "t"}
    ]
    assert [(r.data["name"], r.data["value"]) for r in result.records] == [
        ("retention.ms", "100"),
        ("segment.bytes", "1000"),
    ]
    replay_all(configs, result.records)
    result = alter(
        configs,
        ConfigResourceType.TOPIC,
        "t",
        ("retention.ms", SET, "100"),
        ("segment.bytes", DELETE, None),
        ("nothere", DELETE, None),
    )
    assert [(r.data["name"], r.data["value"]) for r in result.records] == [("segment.bytes", None)]
    replay_all(configs, result.records)
    assert configs.get(ConfigResourceType.TOPIC, "t") == {"retention.ms": "100"}


def test_append_subtract_on_list_configs(configs):
    replay_all(configs, alter(configs, ConfigResourceType.TOPIC, "t", ("cleanup.policy", APPEND, "delete")).records)
    replay_all(
        configs, alter(configs, ConfigResourceType.TOPIC, "t", ("cleanup.policy", APPEND, "compact,delete")).records
    )
    assert configs.get(ConfigResourceType.TOPIC, "t") == {"cleanup.policy": "delete,compact"}
    replay_all(configs, alter(configs, ConfigResourceType.TOPIC, "t", ("cleanup.policy", SUBTRACT, "delete")).records)
    assert configs.get(ConfigResourceType.TOPIC, "t") == {"cleanup.policy": "compact"}
    result = alter(configs, ConfigResourceType.TOPIC, "t", ("retention.ms", APPEND, "1"))
    err = result.response["responses"][0]
    assert err["error_code"] == errors.INVALID_CONFIG and "not LIST" in err["error_message"]
    assert result.records == []


def test_errors(configs):
    assert (
        alter(configs, ConfigResourceType.TOPIC, "missing", ("a", SET, "1")).response["responses"][0]["error_code"]
        == errors.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert (
        alter(configs, ConfigResourceType.TOPIC, "t", ("a", SET, "1"), ("a", DELETE, None)).response["responses"][0][
            "error_code"
        ]
        == errors.INVALID_REQUEST
    )
    assert (
        alter(configs, ConfigResourceType.TOPIC, "t", ("a", 9, "1")).response["responses"][0]["error_code"]
        == errors.INVALID_REQUEST
    )
    assert alter(configs, 99, "x", ("a", SET, "1")).response["responses"][0]["error_code"] == errors.INVALID_REQUEST
    assert (
        alter(configs, ConfigResourceType.BROKER, "abc", ("a", SET, "1")).response["responses"][0]["error_code"]
        == errors.INVALID_REQUEST
    )
    assert alter(configs, ConfigResourceType.BROKER, "", ("log.cleaner.threads", SET, "2")).records


def test_validation_callback_and_validate_only():
    seen = []

    class Schema(ConfigSchema):
        def validate(self, resource_type, resource_name, new_configs):
            seen.append(dict(new_configs))
            if new_configs.get("retention.ms") == "-5":
                raise errors.InvalidConfigurationError("Invalid value -5 for configuration retention.ms")
            if new_configs.get("x") == "policy":
                raise errors.PolicyViolationError("nope")

    mgr = ConfigurationControlManager(Schema(), topic_exists=lambda n: True)
    bad = alter(mgr, ConfigResourceType.TOPIC, "t", ("retention.ms", SET, "-5")).response["responses"][0]
    assert bad["error_code"] == errors.INVALID_CONFIG and "-5" in bad["error_message"]
    assert (
        alter(mgr, ConfigResourceType.TOPIC, "t", ("x", SET, "policy")).response["responses"][0]["error_code"]
        == errors.POLICY_VIOLATION
    )
    ok = alter(mgr, ConfigResourceType.TOPIC, "t", ("retention.ms", SET, "5"), validate_only=True)
    assert ok.response["responses"][0]["error_code"] == errors.NONE and ok.records == []
    assert seen[-1] == {"retention.ms": "5"}


def test_config_replay_delete_and_topic_removal(configs):
    configs.replay(config_record(ConfigResourceType.TOPIC, "t", "a", "1"))
    configs.replay(config_record(ConfigResourceType.TOPIC, "t", "a", None))
    assert (ConfigResourceType.TOPIC, "t") not in configs.configs
    configs.replay(config_record(ConfigResourceType.TOPIC, "t", "a", "1"))
    configs.delete_topic_configs("t")
    assert configs.get(ConfigResourceType.TOPIC, "t") == {}


def registered_cluster():
    cluster = ClusterControlManager("cid")
    result = cluster.register_broker(
        {
            "broker_id": 1,
            "cluster_id": "cid",
            "incarnation_id": uuid.uuid4(),
            "listeners": [{"name": "PLAINTEXT", "host": "localhost", "port": 9092, "security_protocol": 0}],
            "features": [{"name": METADATA_VERSION, "min_supported_version": 1, "max_supported_version": 22}],
            "rack": None,
        },
        42,
    )
    replay_all(cluster, result.records)
    return cluster, result


def test_register_broker():
    cluster, result = registered_cluster()
    assert result.response == {"error_code": 0, "error_message": None, "broker_epoch": 42}
    (record,) = result.records
    assert record.name == "RegisterBrokerRecord" and record.data["fenced"] is False
    assert cluster.is_active(1) and cluster.brokers[1].epoch == 42
    bad = cluster.register_broker({"broker_id": 2, "cluster_id": "other"}, 50)
    assert bad.response["error_code"] == errors.INCONSISTENT_CLUSTER_ID and bad.records == []


def test_producer_id_blocks():
    cluster, _ = registered_cluster()
    mgr = ProducerIdControlManager(cluster)
    first = mgr.generate_next_producer_id(1, 42)
    assert first.response["producer_id_start"] == 0 and first.response["producer_id_len"] == BLOCK_SIZE
    assert first.records[0].data == {"broker_id": 1, "broker_epoch": 42, "next_producer_id": BLOCK_SIZE}
    replay_all(mgr, first.records)
    second = mgr.generate_next_producer_id(1, -1)
    assert second.response["producer_id_start"] == BLOCK_SIZE
    assert mgr.generate_next_producer_id(1, 7).response["error_code"] == errors.STALE_BROKER_EPOCH
    assert mgr.generate_next_producer_id(9, 7).response["error_code"] == errors.BROKER_ID_NOT_REGISTERED
    with pytest.raises(ValueError):
        mgr.replay(
            first.records[0].__class__(
                "ProducerIdsRecord", 0, {"broker_id": 1, "broker_epoch": 1, "next_producer_id": 5}
            )
        )


def test_feature_bootstrap_once():
    features = FeatureControlManager()
    records = features.bootstrap_records(21)
    assert [r.data for r in records] == [{"name": METADATA_VERSION, "feature_level": 21}]
    replay_all(features, records)
    assert features.metadata_version == 21 and features.bootstrap_records(22) == []


def test_log_config_schema_validates_and_lists_effective_configs():
    from pykbroker.log.log_config import LogConfig
    from pykbroker.metadata.log_config_schema import LogConfigSchema

    schema = LogConfigSchema(LogConfig.from_broker_config({"log.retention.hours": "1"}))
    mgr = ConfigurationControlManager(schema, topic_exists=lambda n: True)
    bad = alter(mgr, ConfigResourceType.TOPIC, "t", ("no.such.config", SET, "1")).response["responses"][0]
    assert bad["error_code"] == errors.INVALID_CONFIG and "Unknown topic config name" in bad["error_message"]
    assert (
        alter(mgr, ConfigResourceType.TOPIC, "t", ("retention.ms", SET, "abc")).response["responses"][0]["error_code"]
        == errors.INVALID_CONFIG
    )
    assert alter(mgr, ConfigResourceType.TOPIC, "t", ("cleanup.policy", APPEND, "compact")).records
    configs = {c["name"]: c for c in schema.effective_topic_configs({"segment.bytes": "1048576"})}
    assert configs["segment.bytes"]["value"] == "1048576" and configs["segment.bytes"]["config_source"] == 1
    assert configs["retention.ms"]["value"] == "3600000" and configs["retention.ms"]["config_source"] == 4
    assert configs["cleanup.policy"]["config_source"] == 5
