"""Group config resources (type 32): GroupConfig validation, DescribeConfigs entries, and the controller's
ConfigurationControlManager storing them as ConfigRecords."""

from __future__ import annotations

import pytest

from pykbroker.config import group_config as gc
from pykbroker.metadata.configuration_control_manager import APPEND, DELETE, SET, ConfigurationControlManager
from pykbroker.metadata.log_config_schema import LogConfigSchema
from pykbroker.protocol import errors

DEFAULTS = gc.GroupConfigDefaults.from_broker_config()


def test_defaults_come_from_the_broker_configs():
    assert DEFAULTS.bounds == {
        "consumer.session.timeout.ms": (45000, 45000, 60000),
        "consumer.heartbeat.interval.ms": (5000, 5000, 15000),
        "share.session.timeout.ms": (45000, 45000, 60000),
        "share.heartbeat.interval.ms": (5000, 5000, 15000),
        "share.record.lock.duration.ms": (30000, 15000, 60000),
    }
    custom = gc.GroupConfigDefaults.from_broker_config(
        {"group.consumer.session.timeout.ms": 50000, "group.consumer.max.heartbeat.interval.ms": 20000}
    )
    assert custom.bounds["consumer.session.timeout.ms"] == (50000, 45000, 60000)
    assert custom.bounds["consumer.heartbeat.interval.ms"] == (5000, 5000, 20000)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"consumer.session.timeout.ms": "44999"}, "must be greater than or equal to group.consumer.min.session"),
        ({"consumer.session.timeout.ms": "60001"}, "must be less than or equal to group.consumer.max.session"),
        ({"consumer.heartbeat.interval.ms": "4999"}, "must be greater than or equal to group.consumer.min.heartbeat"),
        ({"consumer.heartbeat.interval.ms": "15001"}, "must be less than or equal to group.consumer.max.heartbeat"),
        ({"consumer.session.timeout.ms": "abc"}, "Not a number of type INT"),
        ({"consumer.session.timeout.ms": "0"}, "Value must be at least 1"),
        ({"share.unknown.ms": "45000"}, "Unknown group config name: share.unknown.ms"),
        ({"share.session.timeout.ms": "44999"}, "must be greater than or equal to group.share.min.session"),
        ({"share.heartbeat.interval.ms": "15001"}, "must be less than or equal to group.share.max.heartbeat"),
        ({"share.record.lock.duration.ms": "14999"}, "must be greater than or equal to group.share.min.record"),
        ({"share.auto.offset.reset": "newest"}, "must be either 'earliest', 'latest' or of the format"),
        ({"share.auto.offset.reset": "by_duration:1h"}, "must be either 'earliest', 'latest' or of the format"),
        ({"share.isolation.level": "serializable"}, "String must be one of: read_committed, read_uncommitted"),
    ],
)
def test_invalid_group_configs_are_invalid_config(overrides, message):
    with pytest.raises(errors.InvalidConfigurationError, match=message):
        gc.validate(overrides, DEFAULTS)


def test_session_timeout_must_exceed_heartbeat_interval():
    loose = gc.GroupConfigDefaults.from_broker_config(
        {"group.consumer.min.session.timeout.ms": 1000, "group.consumer.min.heartbeat.interval.ms": 1000}
    )
    gc.validate({"consumer.session.timeout.ms": "6000", "consumer.heartbeat.interval.ms": "5000"}, loose)
    with pytest.raises(errors.InvalidConfigurationError, match="must be greater than consumer.heartbeat"):
        gc.validate({"consumer.session.timeout.ms": "5000", "consumer.heartbeat.interval.ms": "5000"}, loose)


def test_describe_sources_default_and_override():
    entries = gc.describe({"consumer.heartbeat.interval.ms": "6000"}, DEFAULTS, True, False, 5, 8, 3)
    assert [(e["name"], e["value"], e["config_source"], e["is_default"]) for e in entries] == [
        ("consumer.heartbeat.interval.ms", "6000", 8, False),
        ("consumer.session.timeout.ms", "45000", 5, True),
        ("share.auto.offset.reset", "latest", 5, True),
        ("share.heartbeat.interval.ms", "5000", 5, True),
        ("share.isolation.level", "read_uncommitted", 5, True),
        ("share.record.lock.duration.ms", "30000", 5, True),
        ("share.session.timeout.ms", "45000", 5, True),
    ]
    assert entries[0]["synonyms"] == [{"name": "consumer.heartbeat.interval.ms", "value": "6000", "source": 8}]
    assert all(not e["read_only"] for e in entries)
    assert {e["name"] for e in entries if e["config_type"] != 3} == {"share.auto.offset.reset", "share.isolation.level"}


def test_share_group_configs_are_accepted_and_read_by_the_data_path():
    overrides = {
        "share.auto.offset.reset": "by_duration:PT1H30M",
        "share.isolation.level": "READ_COMMITTED",
        "share.record.lock.duration.ms": "20000",
    }
    gc.validate(overrides, DEFAULTS)
    assert gc.share_configs(overrides, DEFAULTS) == {
        "share.session.timeout.ms": 45000,
        "share.heartbeat.interval.ms": 5000,
        "share.record.lock.duration.ms": 20000,
        "share.auto.offset.reset": "by_duration:PT1H30M",
        "share.isolation.level": "read_committed",
    }
    assert gc.duration_ms("PT1H30M") == 5_400_000 and gc.duration_ms("P1D") == 86_400_000
    # a stored value that no longer validates reads as the defaults (never an error on the data path)
    assert gc.share_configs({"share.isolation.level": "bogus"}, DEFAULTS)["share.isolation.level"] == "read_uncommitted"
    with pytest.raises(errors.InvalidConfigurationError, match="share.session.timeout.ms must be greater than"):
        loose = gc.GroupConfigDefaults.from_broker_config({"group.share.min.session.timeout.ms": 1000})
        gc.validate({"share.session.timeout.ms": "5000", "share.heartbeat.interval.ms": "5000"}, loose)


def _alter(manager, name, ops):
    return manager.incremental_alter_configs(
        {
            "resources": [
                {
                    "resource_type": 32,
                    "resource_name": name,
                    "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops],
                }
            ],
            "validate_only": False,
        }
    )


def test_controller_stores_group_configs_as_config_records():
    manager = ConfigurationControlManager(LogConfigSchema())
    result = _alter(manager, "g1", [("consumer.session.timeout.ms", SET, "50000")])
    assert result.response["responses"][0]["error_code"] == errors.NONE
    assert [
        (r.data["resource_type"], r.data["resource_name"], r.data["name"], r.data["value"]) for r in result.records
    ] == [(32, "g1", "consumer.session.timeout.ms", "50000")]
    for r in result.records:
        manager.replay(r)
    assert manager.get(32, "g1") == {"consumer.session.timeout.ms": "50000"}
    deleted = _alter(manager, "g1", [("consumer.session.timeout.ms", DELETE, None)])
    assert [r.data["value"] for r in deleted.records] == [None]

    for name, ops, code in [
        ("g1", [("consumer.session.timeout.ms", SET, "1")], errors.INVALID_CONFIG),
        ("g1", [("nope", SET, "1")], errors.INVALID_CONFIG),
        ("g1", [("consumer.session.timeout.ms", APPEND, "1")], errors.INVALID_CONFIG),
        ("", [("consumer.session.timeout.ms", SET, "50000")], errors.INVALID_REQUEST),
    ]:
        result = _alter(manager, name, ops)
        assert (result.response["responses"][0]["error_code"], result.records) == (code, []), (name, ops)
