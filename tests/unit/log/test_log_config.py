"""LogConfig: broker synonyms and precedence, overrides, validation, sources."""

import pytest

from pykbroker.log.log_config import TOPIC_CONFIG_KEYS, LogConfig, broker_synonyms
from pykbroker.protocol.errors import InvalidConfigurationError


def test_kafka_defaults():
    c = LogConfig()
    assert c.segment_bytes == 1 << 30 and c.segment_ms == 604_800_000 and c.retention_ms == 604_800_000
    assert c.retention_bytes == -1 and c.segment_index_bytes == 10 << 20 and c.index_interval_bytes == 4096
    assert c.max_message_bytes == 1048588 and c.flush_interval_messages == (1 << 63) - 1
    assert c.cleanup_policy == ["delete"] and c.compression_type == "producer" and c.file_delete_delay_ms == 60000


def test_broker_synonym_precedence_and_units():
    c = LogConfig.from_broker_config({"log.retention.hours": "1", "log.retention.minutes": "2"})
    assert c.retention_ms == 120_000 and c.source_of("retention.ms") == (
        "STATIC_BROKER_CONFIG",
        "log.retention.minutes",
    )
    c = LogConfig.from_broker_config({"log.retention.ms": 5, "log.retention.hours": 1})
    assert c.retention_ms == 5
    c = LogConfig.from_broker_config({"log.roll.hours": 2, "log.retention.hours": -1, "message.max.bytes": "77"})
    assert c.segment_ms == 7_200_000 and c.retention_ms == -1 and c.max_message_bytes == 77
    assert c.source_of("segment.bytes") == ("DEFAULT_CONFIG", None)
    assert broker_synonyms("flush.ms") == ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]
    assert all(isinstance(k.synonyms, tuple) for k in TOPIC_CONFIG_KEYS.values())


def test_overrides_win_and_replace():
    base = LogConfig.from_broker_config({"log.segment.bytes": "1000"})
    c = base.with_overrides({"segment.bytes": "5000", "cleanup.policy": "compact,delete", "preallocate": "TRUE"})
    assert c.segment_bytes == 5000 and c.compact and c.delete and c.preallocate
    assert c.source_of("segment.bytes") == ("TOPIC_CONFIG", None)
    assert c.with_overrides({}).segment_bytes == 1000  # overrides replace, broker default comes back


@pytest.mark.parametrize(
    "key,value,needle",
    [
        ("segment.bytes", "10", "segment.bytes"),
        ("retention.ms", "-2", "retention.ms"),
        ("cleanup.policy", "forever", "cleanup.policy"),
        ("compression.type", "brotli", "compression.type"),
        ("min.cleanable.dirty.ratio", "1.5", "min.cleanable.dirty.ratio"),
        ("message.timestamp.type", "Now", "message.timestamp.type"),
        ("segment.index.bytes", str(1 << 40), "segment.index.bytes"),
        ("unclean.leader.election.enable", "yes", "unclean.leader.election.enable"),
        ("no.such.key", "1", "Unknown topic config name: no.such.key"),
    ],
)
def test_invalid_values_name_key_and_value(key, value, needle):
    with pytest.raises(InvalidConfigurationError) as e:
        LogConfig().with_overrides({key: value})
    assert needle in str(e.value) and (value in str(e.value) or key == "no.such.key")
    assert e.value.code == 40


def test_compaction_lag_conflict():
    with pytest.raises(InvalidConfigurationError):
        LogConfig({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


def test_jitter_bounded():
    c = LogConfig({"segment.ms": "100", "segment.jitter.ms": "1000"})
    assert all(0 <= c.random_segment_jitter() < 100 for _ in range(200))
    assert LogConfig().random_segment_jitter() == 0
