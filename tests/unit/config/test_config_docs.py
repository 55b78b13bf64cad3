"""Every configuration key -- the broker's and the topics' -- is declared once, through ConfigDef, with a
doc (DescribeConfigs returns it as the key's documentation)."""

from __future__ import annotations

import pytest

from pykbroker.config.config_def import ConfigDef, ConfigException, ConfigKey
from pykbroker.config.kafka_config_def import BROKER_CONFIG_DEF
from pykbroker.log.log_config import TOPIC_CONFIG_DEF, TOPIC_CONFIG_KEYS, LogConfig
from pykbroker.protocol.errors import InvalidConfigurationError


@pytest.mark.parametrize("config_def", [BROKER_CONFIG_DEF, TOPIC_CONFIG_DEF], ids=["broker", "topic"])
def test_every_key_has_a_one_sentence_doc(config_def):
    assert len(config_def.keys) > 30
    empty = [name for name, key in config_def.keys.items() if not key.doc.strip()]
    assert empty == []
    unfinished = [name for name, key in config_def.keys.items() if not key.doc.rstrip().endswith((".", ")"))]
    assert unfinished == []


def test_topic_keys_are_one_config_def_with_broker_synonyms():
    assert isinstance(TOPIC_CONFIG_DEF, ConfigDef)
    assert all(isinstance(k, ConfigKey) for k in TOPIC_CONFIG_KEYS.values())
    assert TOPIC_CONFIG_KEYS["segment.bytes"].default == BROKER_CONFIG_DEF.keys["log.segment.bytes"].default
    # each topic default equals its first broker synonym's default, scaled to the topic key's unit
    for key in TOPIC_CONFIG_KEYS.values():
        for synonym in key.synonyms:
            broker_key = BROKER_CONFIG_DEF.keys.get(synonym.name)
            if broker_key is not None and broker_key.default is not None:
                assert key.default == broker_key.default * synonym.multiplier, key.name
                break


def test_topic_value_errors_are_invalid_config_with_config_def_messages():
    with pytest.raises(
        InvalidConfigurationError, match="Invalid value abc for configuration segment.bytes: Not a number of type INT"
    ):
        LogConfig({"segment.bytes": "abc"})
    with pytest.raises(
        InvalidConfigurationError,
        match="Invalid value forever for configuration cleanup.policy: String must be one of: compact, delete",
    ):
        LogConfig({"cleanup.policy": "forever"})
    with pytest.raises(InvalidConfigurationError, match="Invalid value 0 for configuration log.roll.hours"):
        LogConfig.from_broker_config({"log.roll.hours": "0"})
    with pytest.raises(ConfigException, match="Invalid value 0 for configuration segment.ms"):
        TOPIC_CONFIG_DEF.parse_value("segment.ms", "0")
