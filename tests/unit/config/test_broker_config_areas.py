"""The broker's ConfigDef is the merge of one ConfigDef per area (Kafka's ``*Configs`` classes), each key
declared in exactly one area."""

from __future__ import annotations

import pytest

from pykbroker.config.broker_configs.group_coordinator_configs import GROUP_COORDINATOR_CONFIG_DEF
from pykbroker.config.broker_configs.kraft_configs import KRAFT_CONFIG_DEF
from pykbroker.config.broker_configs.quota_configs import QUOTA_CONFIG_DEF
from pykbroker.config.broker_configs.replication_configs import REPLICATION_CONFIG_DEF
from pykbroker.config.broker_configs.security_configs import SECURITY_CONFIG_DEF
from pykbroker.config.broker_configs.server_configs import SERVER_CONFIG_DEF
from pykbroker.config.broker_configs.server_log_configs import SERVER_LOG_CONFIG_DEF
from pykbroker.config.broker_configs.share_coordinator_configs import SHARE_COORDINATOR_CONFIG_DEF
from pykbroker.config.broker_configs.share_group_configs import SHARE_GROUP_CONFIG_DEF
from pykbroker.config.broker_configs.socket_server_configs import SOCKET_SERVER_CONFIG_DEF
from pykbroker.config.broker_configs.transaction_configs import TRANSACTION_CONFIG_DEF
from pykbroker.config.config_def import ConfigDef, Type
from pykbroker.config.kafka_config_def import BROKER_CONFIG_DEF

AREAS = {
    "server": (SERVER_CONFIG_DEF, "broker.rack"),
    "kraft": (KRAFT_CONFIG_DEF, "controller.quorum.voters"),
    "socket server": (SOCKET_SERVER_CONFIG_DEF, "listeners"),
    "replication": (REPLICATION_CONFIG_DEF, "replica.lag.time.max.ms"),
    "group coordinator": (GROUP_COORDINATOR_CONFIG_DEF, "offsets.topic.num.partitions"),
    "share groups": (SHARE_GROUP_CONFIG_DEF, "group.share.delivery.count.limit"),
    "log": (SERVER_LOG_CONFIG_DEF, "log.retention.ms"),
    "transactions": (TRANSACTION_CONFIG_DEF, "transaction.max.timeout.ms"),
    "quotas": (QUOTA_CONFIG_DEF, "quota.window.num"),
    "security": (SECURITY_CONFIG_DEF, "super.users"),
    "share coordinator": (SHARE_COORDINATOR_CONFIG_DEF, "share.coordinator.state.topic.num.partitions"),
}


def test_the_broker_config_def_is_the_merge_of_the_areas():
    merged = [name for config_def, _ in AREAS.values() for name in config_def.keys]
    assert len(merged) == len(set(merged)) == len(BROKER_CONFIG_DEF.keys) > 150
    assert set(merged) == set(BROKER_CONFIG_DEF.keys)
    for area, (config_def, example) in AREAS.items():
        assert example in config_def.keys, area
        for name, key in config_def.keys.items():
            assert BROKER_CONFIG_DEF.keys[name] is key


def test_merge_keeps_the_order_and_refuses_a_key_defined_twice():
    a = ConfigDef().define("a.x", Type.INT, 1).define("a.y", Type.INT, 2)
    b = ConfigDef().define("b.x", Type.STRING, "v")
    assert list(ConfigDef.merge(a, b).keys) == ["a.x", "a.y", "b.x"]
    with pytest.raises(ValueError, match="Configuration a.x is defined twice."):
        ConfigDef.merge(a, ConfigDef().define("a.x", Type.INT, 3))
