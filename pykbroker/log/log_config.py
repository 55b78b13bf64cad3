"""Topic-level log configuration: the keys, their types/defaults/validators, broker synonyms.

Mirrors ``org.apache.kafka.storage.internals.log.LogConfig`` and ``ServerTopicConfigSynonyms``. The keys
are a :class:`~pykbroker.config.config_def.ConfigDef` (``TOPIC_CONFIG_DEF``), as the broker's are; a bad
value raises ``InvalidConfigurationError`` (INVALID_CONFIG) with ConfigDef's message, naming the key and the
value. Every topic key has a broker-level synonym list (``segment.ms`` <- ``log.roll.ms``, ``log.roll.hours``);
the first synonym present in the broker configuration gives the topic default, scaled to the topic
key's unit, and topic overrides win over it. :meth:`LogConfig.source_of` tells DescribeConfigs where
a value came from (``TOPIC_CONFIG``, ``STATIC_BROKER_CONFIG`` with the synonym name, or
``DEFAULT_CONFIG``).

A LogConfig is immutable; a topic config change builds a new one (``with_overrides``) that the log
picks up atomically.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from pykbroker.config.broker_configs.server_configs import MESSAGE_MAX_BYTES_CONFIG
from pykbroker.config.broker_configs.server_log_configs import (
    LOG_CLEANER_DELETE_RETENTION_MS_CONFIG,
    LOG_CLEANER_MAX_COMPACTION_LAG_MS_CONFIG,
    LOG_CLEANER_MIN_CLEANABLE_RATIO_CONFIG,
    LOG_CLEANER_MIN_COMPACTION_LAG_MS_CONFIG,
    LOG_CLEANUP_POLICY_CONFIG,
    LOG_FLUSH_INTERVAL_MESSAGES_CONFIG,
    LOG_FLUSH_INTERVAL_MS_CONFIG,
    LOG_FLUSH_SCHEDULER_INTERVAL_MS_CONFIG,
    LOG_INDEX_INTERVAL_BYTES_CONFIG,
    LOG_INDEX_SIZE_MAX_BYTES_CONFIG,
    LOG_MESSAGE_DOWNCONVERSION_ENABLE_CONFIG,
    LOG_MESSAGE_TIMESTAMP_AFTER_MAX_MS_CONFIG,
    LOG_MESSAGE_TIMESTAMP_BEFORE_MAX_MS_CONFIG,
    LOG_MESSAGE_TIMESTAMP_TYPE_CONFIG,
    LOG_PREALLOCATE_CONFIG,
    LOG_RETENTION_BYTES_CONFIG,
    LOG_RETENTION_HOURS_CONFIG,
    LOG_RETENTION_MINUTES_CONFIG,
    LOG_RETENTION_MS_CONFIG,
    LOG_ROLL_HOURS_CONFIG,
    LOG_ROLL_JITTER_HOURS_CONFIG,
    LOG_ROLL_JITTER_MS_CONFIG,
    LOG_ROLL_MS_CONFIG,
    LOG_SEGMENT_BYTES_CONFIG,
    LOG_SEGMENT_DELETE_DELAY_MS_CONFIG,
)
from pykbroker.config.config_def import (
    ConfigDef,
    ConfigException,
    ConfigKey,
    ConfigSynonym,
    Type,
    at_least,
    between,
    in_values,
    parse_type,
)
from pykbroker.config.topic_config import (
    CLEANUP_POLICY_CONFIG,
    COMPRESSION_GZIP_LEVEL_CONFIG,
    COMPRESSION_LZ4_LEVEL_CONFIG,
    COMPRESSION_TYPE_CONFIG,
    COMPRESSION_ZSTD_LEVEL_CONFIG,
    DELETE_RETENTION_MS_CONFIG,
    FILE_DELETE_DELAY_MS_CONFIG,
    FLUSH_MESSAGES_CONFIG,
    FLUSH_MS_CONFIG,
    FOLLOWER_REPLICATION_THROTTLED_REPLICAS_CONFIG,
    INDEX_INTERVAL_BYTES_CONFIG,
    LEADER_REPLICATION_THROTTLED_REPLICAS_CONFIG,
    LOCAL_RETENTION_BYTES_CONFIG,
    LOCAL_RETENTION_MS_CONFIG,
    MAX_COMPACTION_LAG_MS_CONFIG,
    MAX_MESSAGE_BYTES_CONFIG,
    MESSAGE_DOWNCONVERSION_ENABLE_CONFIG,
    MESSAGE_TIMESTAMP_AFTER_MAX_MS_CONFIG,
    MESSAGE_TIMESTAMP_BEFORE_MAX_MS_CONFIG,
    MESSAGE_TIMESTAMP_DIFFERENCE_MAX_MS_CONFIG,
    MESSAGE_TIMESTAMP_TYPE_CONFIG,
    MIN_CLEANABLE_DIRTY_RATIO_CONFIG,
    MIN_COMPACTION_LAG_MS_CONFIG,
    MIN_INSYNC_REPLICAS_CONFIG,
    PREALLOCATE_CONFIG,
    REMOTE_LOG_COPY_DISABLE_CONFIG,
    REMOTE_LOG_DELETE_ON_DISABLE_CONFIG,
    REMOTE_STORAGE_ENABLE_CONFIG,
    RETENTION_BYTES_CONFIG,
    RETENTION_MS_CONFIG,
    SEGMENT_BYTES_CONFIG,
    SEGMENT_INDEX_BYTES_CONFIG,
    SEGMENT_JITTER_MS_CONFIG,
    SEGMENT_MS_CONFIG,
    UNCLEAN_LEADER_ELECTION_ENABLE_CONFIG,
)
from pykbroker.protocol.errors import InvalidConfigurationError, KafkaError

LONG_MAX = (1 << 63) - 1

HOURS_TO_MS = 3_600_000
MINUTES_TO_MS = 60_000

CLEANUP_POLICY_DELETE = "delete"
CLEANUP_POLICY_COMPACT = "compact"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")

# DescribeConfigs sources (protocol values of ConfigSource).
SOURCE_TOPIC_CONFIG = "TOPIC_CONFIG"  # DYNAMIC_TOPIC_CONFIG = 1
SOURCE_STATIC_BROKER_CONFIG = "STATIC_BROKER_CONFIG"  # 4
SOURCE_DEFAULT_CONFIG = "DEFAULT_CONFIG"  # 5


def _level(lo: int, hi: int, extra: int | None = None) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if not (lo <= value <= hi or value == extra):
            raise ConfigException(name, value, f"Value must be between {lo} and {hi}")

    return check


def _throttled_replicas(name: str, value: Any) -> None:
    if value == ["*"]:
        return
    for item in value:
        parts = item.split(":")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise ConfigException(
                name,
                ",".join(value),
                "must be the literal '*' or a list of replicas in the "
                "following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...",
            )


_S = ConfigSynonym
H, M, L = "high", "medium", "low"
TOPIC_CONFIG_DEF = (
    ConfigDef()
    .define(
        SEGMENT_BYTES_CONFIG,
        Type.INT,
        1024 * 1024 * 1024,
        at_least(14),
        H,
        "Segment file size of the log, in bytes: a new segment is rolled when the active one would exceed it.",
        (_S(LOG_SEGMENT_BYTES_CONFIG),),
    )
    .define(
        SEGMENT_MS_CONFIG,
        Type.LONG,
        7 * 24 * HOURS_TO_MS,
        at_least(1),
        M,
        "Time in ms after which the active segment is rolled even if it is not full.",
        (_S(LOG_ROLL_MS_CONFIG), _S(LOG_ROLL_HOURS_CONFIG, HOURS_TO_MS)),
    )
    .define(
        SEGMENT_JITTER_MS_CONFIG,
        Type.LONG,
        0,
        at_least(0),
        M,
        "Maximum random jitter in ms subtracted from segment.ms, so that segments do not all roll at once.",
        (_S(LOG_ROLL_JITTER_MS_CONFIG), _S(LOG_ROLL_JITTER_HOURS_CONFIG, HOURS_TO_MS)),
    )
    .define(
        SEGMENT_INDEX_BYTES_CONFIG,
        Type.INT,
        10 * 1024 * 1024,
        at_least(4),
        M,
        "Size in bytes of the offset and time index files (preallocated, shrunk when the segment rolls).",
        (_S(LOG_INDEX_SIZE_MAX_BYTES_CONFIG),),
    )
    .define(
        FLUSH_MESSAGES_CONFIG,
        Type.LONG,
        LONG_MAX,
        at_least(1),
        M,
        "Number of messages appended to a partition before its log is fsynced.",
        (_S(LOG_FLUSH_INTERVAL_MESSAGES_CONFIG),),
    )
    .define(
        FLUSH_MS_CONFIG,
        Type.LONG,
        LONG_MAX,
        at_least(0),
        M,
        "Maximum time in ms a message stays in the log before it is fsynced.",
        (_S(LOG_FLUSH_INTERVAL_MS_CONFIG), _S(LOG_FLUSH_SCHEDULER_INTERVAL_MS_CONFIG)),
    )
    .define(
        RETENTION_BYTES_CONFIG,
        Type.LONG,
        -1,
        None,
        M,
        "Maximum size in bytes of a partition before old segments are deleted (-1: no limit).",
        (_S(LOG_RETENTION_BYTES_CONFIG),),
    )
    .define(
        RETENTION_MS_CONFIG,
        Type.LONG,
        7 * 24 * HOURS_TO_MS,
        at_least(-1),
        M,
        "Maximum age in ms of a segment's newest record before the segment is deleted (-1: no limit).",
        (
            _S(LOG_RETENTION_MS_CONFIG),
            _S(LOG_RETENTION_MINUTES_CONFIG, MINUTES_TO_MS),
            _S(LOG_RETENTION_HOURS_CONFIG, HOURS_TO_MS),
        ),
    )
    .define(
        MAX_MESSAGE_BYTES_CONFIG,
        Type.INT,
        1024 * 1024 + 12,
        at_least(0),
        M,
        "Largest record batch size in bytes the topic accepts (after compression).",
        (_S(MESSAGE_MAX_BYTES_CONFIG),),
    )
    .define(
        INDEX_INTERVAL_BYTES_CONFIG,
        Type.INT,
        4096,
        at_least(0),
        M,
        "Bytes of log appended between two offset index entries.",
        (_S(LOG_INDEX_INTERVAL_BYTES_CONFIG),),
    )
    .define(
        DELETE_RETENTION_MS_CONFIG,
        Type.LONG,
        24 * HOURS_TO_MS,
        at_least(0),
        M,
        "Time in ms delete tombstones are kept on compacted topics.",
        (_S(LOG_CLEANER_DELETE_RETENTION_MS_CONFIG),),
    )
    .define(
        MIN_COMPACTION_LAG_MS_CONFIG,
        Type.LONG,
        0,
        at_least(0),
        M,
        "Minimum time in ms a message stays uncompacted in the log.",
        (_S(LOG_CLEANER_MIN_COMPACTION_LAG_MS_CONFIG),),
    )
    .define(
        MAX_COMPACTION_LAG_MS_CONFIG,
        Type.LONG,
        LONG_MAX,
        at_least(1),
        M,
        "Maximum time in ms a message stays ineligible for compaction.",
        (_S(LOG_CLEANER_MAX_COMPACTION_LAG_MS_CONFIG),),
    )
    .define(
        FILE_DELETE_DELAY_MS_CONFIG,
        Type.LONG,
        60000,
        at_least(0),
        M,
        "Time in ms to wait before deleting a file from the filesystem.",
        (_S(LOG_SEGMENT_DELETE_DELAY_MS_CONFIG),),
    )
    .define(
        MIN_CLEANABLE_DIRTY_RATIO_CONFIG,
        Type.DOUBLE,
        0.5,
        between(0, 1),
        M,
        "Minimum ratio of dirty log to total log for a log to be eligible for cleaning.",
        (_S(LOG_CLEANER_MIN_CLEANABLE_RATIO_CONFIG),),
    )
    .define(
        CLEANUP_POLICY_CONFIG,
        Type.LIST,
        [CLEANUP_POLICY_DELETE],
        in_values(CLEANUP_POLICY_COMPACT, CLEANUP_POLICY_DELETE),
        M,
        "Retention policy of old segments: delete, compact, or both.",
        (_S(LOG_CLEANUP_POLICY_CONFIG),),
    )
    .define(
        UNCLEAN_LEADER_ELECTION_ENABLE_CONFIG,
        Type.BOOLEAN,
        False,
        None,
        M,
        "Whether replicas not in the ISR may be elected leader as a last resort, at the risk of data loss.",
        (_S(UNCLEAN_LEADER_ELECTION_ENABLE_CONFIG),),
    )
    .define(
        MIN_INSYNC_REPLICAS_CONFIG,
        Type.INT,
        1,
        at_least(1),
        M,
        "Minimum number of in-sync replicas that must acknowledge an acks=all write.",
        (_S(MIN_INSYNC_REPLICAS_CONFIG),),
    )
    .define(
        COMPRESSION_TYPE_CONFIG,
        Type.STRING,
        "producer",
        in_values(*COMPRESSION_TYPES),
        M,
        "Final compression type of the topic's batches ('producer' keeps the producer's codec).",
        (_S(COMPRESSION_TYPE_CONFIG),),
    )
    .define(
        COMPRESSION_GZIP_LEVEL_CONFIG,
        Type.INT,
        -1,
        _level(1, 9, -1),
        M,
        "Compression level of gzip (1-9, -1 for the codec's default).",
        (_S(COMPRESSION_GZIP_LEVEL_CONFIG),),
    )
    .define(
        COMPRESSION_LZ4_LEVEL_CONFIG,
        Type.INT,
        9,
        _level(1, 17),
        M,
        "Compression level of lz4 (1-17).",
        (_S(COMPRESSION_LZ4_LEVEL_CONFIG),),
    )
    .define(
        COMPRESSION_ZSTD_LEVEL_CONFIG,
        Type.INT,
        3,
        _level(-131072, 22),
        M,
        "Compression level of zstd (-131072-22).",
        (_S(COMPRESSION_ZSTD_LEVEL_CONFIG),),
    )
    .define(
        PREALLOCATE_CONFIG,
        Type.BOOLEAN,
        False,
        None,
        M,
        "Whether to preallocate the file of a new segment.",
        (_S(LOG_PREALLOCATE_CONFIG),),
    )
    .define(
        MESSAGE_TIMESTAMP_TYPE_CONFIG,
        Type.STRING,
        "CreateTime",
        in_values(*TIMESTAMP_TYPES),
        M,
        "Whether record timestamps are the producer's (CreateTime) or the broker's (LogAppendTime).",
        (_S(LOG_MESSAGE_TIMESTAMP_TYPE_CONFIG),),
    )
    .define(
        MESSAGE_TIMESTAMP_DIFFERENCE_MAX_MS_CONFIG,
        Type.LONG,
        LONG_MAX,
        at_least(0),
        M,
        "Deprecated: maximum difference in ms between a CreateTime timestamp and the broker's time.",
        (_S("log.message.timestamp.difference.max.ms"),),
    )
    .define(
        MESSAGE_TIMESTAMP_BEFORE_MAX_MS_CONFIG,
        Type.LONG,
        LONG_MAX,
        at_least(0),
        M,
        "Maximum time in ms a CreateTime timestamp may lie before the broker's time.",
        (_S(LOG_MESSAGE_TIMESTAMP_BEFORE_MAX_MS_CONFIG),),
    )
    .define(
        MESSAGE_TIMESTAMP_AFTER_MAX_MS_CONFIG,
        Type.LONG,
        LONG_MAX,
        at_least(0),
        M,
        "Maximum time in ms a CreateTime timestamp may lie after the broker's time.",
        (_S(LOG_MESSAGE_TIMESTAMP_AFTER_MAX_MS_CONFIG),),
    )
    .define(
        LEADER_REPLICATION_THROTTLED_REPLICAS_CONFIG,
        Type.LIST,
        [],
        _throttled_replicas,
        M,
        "Replicas whose leader-side replication is throttled: partitionId:brokerId,... or '*'.",
    )
    .define(
        FOLLOWER_REPLICATION_THROTTLED_REPLICAS_CONFIG,
        Type.LIST,
        [],
        _throttled_replicas,
        M,
        "Replicas whose follower-side replication is throttled: partitionId:brokerId,... or '*'.",
    )
    .define(
        MESSAGE_DOWNCONVERSION_ENABLE_CONFIG,
        Type.BOOLEAN,
        True,
        None,
        L,
        "Whether records are down-converted for consumers using old fetch versions.",
        (_S(LOG_MESSAGE_DOWNCONVERSION_ENABLE_CONFIG),),
    )
    .define(
        REMOTE_STORAGE_ENABLE_CONFIG,
        Type.BOOLEAN,
        False,
        None,
        M,
        "Whether tiered storage is enabled for the topic (not supported: accepted and ignored).",
    )
    .define(
        LOCAL_RETENTION_MS_CONFIG,
        Type.LONG,
        -2,
        at_least(-2),
        M,
        "With tiered storage, time in ms segments stay on local disk (-2: retention.ms).",
        (_S("log.local.retention.ms"),),
    )
    .define(
        LOCAL_RETENTION_BYTES_CONFIG,
        Type.LONG,
        -2,
        at_least(-2),
        M,
        "With tiered storage, bytes of a partition kept on local disk (-2: retention.bytes).",
        (_S("log.local.retention.bytes"),),
    )
    .define(
        REMOTE_LOG_COPY_DISABLE_CONFIG,
        Type.BOOLEAN,
        False,
        None,
        M,
        "With tiered storage, whether copying segments to remote storage is disabled.",
    )
    .define(
        REMOTE_LOG_DELETE_ON_DISABLE_CONFIG,
        Type.BOOLEAN,
        False,
        None,
        M,
        "With tiered storage, whether remote segments are deleted when tiering is disabled.",
    )
)

# name -> ConfigKey (type, default, validator, doc, synonyms): Kafka's LogConfig.configKeys()
TOPIC_CONFIG_KEYS: Mapping[str, ConfigKey] = MappingProxyType(TOPIC_CONFIG_DEF.keys)


def broker_synonyms(topic_key: str) -> list[str]:
    """The broker keys that supply ``topic_key``'s default, in precedence order
    (``"retention.ms" -> ["log.retention.ms", "log.retention.minutes", "log.retention.hours"]``)."""
    return [s.name for s in TOPIC_CONFIG_KEYS[topic_key].synonyms]


def _invalid_config(e: ConfigException) -> KafkaError:
    return InvalidConfigurationError(str(e))


class LogConfig:
    """The effective configuration of one log (broker defaults merged with topic overrides).

    Immutable and thread-safe. Attributes use Kafka's names in snake case (``segment_bytes``,
    ``segment_ms``, ``retention_ms``, ``flush_interval_messages`` ...); :meth:`get` reads any key by its
    topic-level name.
    """

    def __init__(
        self,
        overrides: Mapping[str, Any] | None = None,
        *,
        _defaults: Mapping[str, Any] | None = None,
        _default_sources: Mapping[str, str] | None = None,
    ):
        overrides = dict(overrides or {})
        values = dict(_defaults) if _defaults is not None else {k.name: k.default for k in TOPIC_CONFIG_KEYS.values()}
        values.update(LogConfig.validate(overrides))
        self._values: Mapping[str, Any] = MappingProxyType(values)
        self._overridden = frozenset(overrides)
        self._default_sources: Mapping[str, str] = MappingProxyType(dict(_default_sources or {}))
        self._broker_defaults = _defaults
        self.segment_bytes: int = values[SEGMENT_BYTES_CONFIG]
        self.segment_ms: int = values[SEGMENT_MS_CONFIG]
        self.segment_jitter_ms: int = values[SEGMENT_JITTER_MS_CONFIG]
        self.segment_index_bytes: int = values[SEGMENT_INDEX_BYTES_CONFIG]
        self.flush_interval_messages: int = values[FLUSH_MESSAGES_CONFIG]
        self.flush_ms: int = values[FLUSH_MS_CONFIG]
        self.retention_bytes: int = values[RETENTION_BYTES_CONFIG]
        self.retention_ms: int = values[RETENTION_MS_CONFIG]
        self.max_message_bytes: int = values[MAX_MESSAGE_BYTES_CONFIG]
        self.index_interval_bytes: int = values[INDEX_INTERVAL_BYTES_CONFIG]
        self.file_delete_delay_ms: int = values[FILE_DELETE_DELAY_MS_CONFIG]
        self.delete_retention_ms: int = values[DELETE_RETENTION_MS_CONFIG]
        self.min_compaction_lag_ms: int = values[MIN_COMPACTION_LAG_MS_CONFIG]
        self.max_compaction_lag_ms: int = values[MAX_COMPACTION_LAG_MS_CONFIG]
        self.min_cleanable_dirty_ratio: float = values[MIN_CLEANABLE_DIRTY_RATIO_CONFIG]
        self.cleanup_policy: list[str] = list(values[CLEANUP_POLICY_CONFIG])
        #: ``cleanup.policy`` has ``delete`` / ``compact`` (attributes, not properties: read on every append)
        self.delete: bool = CLEANUP_POLICY_DELETE in self.cleanup_policy
        self.compact: bool = CLEANUP_POLICY_COMPACT in self.cleanup_policy
        self.unclean_leader_election_enable: bool = values[UNCLEAN_LEADER_ELECTION_ENABLE_CONFIG]
        self.min_insync_replicas: int = values[MIN_INSYNC_REPLICAS_CONFIG]
        self.compression_type: str = values[COMPRESSION_TYPE_CONFIG]
        self.preallocate: bool = values[PREALLOCATE_CONFIG]
        self.message_timestamp_type: str = values[MESSAGE_TIMESTAMP_TYPE_CONFIG]
        self.message_timestamp_before_max_ms: int = values[MESSAGE_TIMESTAMP_BEFORE_MAX_MS_CONFIG]
        self.message_timestamp_after_max_ms: int = values[MESSAGE_TIMESTAMP_AFTER_MAX_MS_CONFIG]

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_broker_config(
        cls, broker_props: Mapping[str, Any] | None = None, overrides: Mapping[str, Any] | None = None
    ) -> LogConfig:
        """Topic defaults from broker keys (``log.segment.bytes``, ``log.roll.hours`` ...; values may be
        strings or typed), then ``overrides`` (topic-level keys) on top. Raises InvalidConfigurationError."""
        props = broker_props or {}
        defaults: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for key in TOPIC_CONFIG_KEYS.values():
            value = key.default
            for syn in key.synonyms:
                raw = props.get(syn.name)
                if raw is None or (isinstance(raw, str) and raw.strip() == "" and key.type != Type.LIST):
                    continue
                try:
                    value = parse_type(syn.name, raw, key.type)
                    if syn.multiplier != 1:
                        value *= syn.multiplier
                    if key.name == RETENTION_MS_CONFIG and value < 0:
                        value = -1  # KafkaConfig.logRetentionTimeMillis: any negative means forever
                    if key.validator is not None:
                        key.validator(syn.name, value)
                except ConfigException as e:
                    raise _invalid_config(e) from None
                sources[key.name] = syn.name
                break
            defaults[key.name] = value
        return cls(overrides, _defaults=defaults, _default_sources=sources)

    def with_overrides(self, overrides: Mapping[str, Any]) -> LogConfig:
        """A new config: this config's broker defaults with ``overrides`` (the topic's complete
        override set, replacing the previous one). Raises InvalidConfigurationError."""
        return LogConfig(overrides, _defaults=self._broker_defaults, _default_sources=self._default_sources)

    @staticmethod
    def validate(overrides: Mapping[str, Any]) -> dict[str, Any]:
        """Check names and values of topic-level ``overrides``; return them parsed. Raises
        InvalidConfigurationError naming the first bad key and value (Kafka's ``LogConfig.validate``)."""
        parsed: dict[str, Any] = {}
        for name, value in overrides.items():
            if name not in TOPIC_CONFIG_KEYS:
                raise InvalidConfigurationError(f"Unknown topic config name: {name}")
            try:
                parsed[name] = TOPIC_CONFIG_DEF.parse_value(name, value)
            except ConfigException as e:
                raise _invalid_config(e) from None
        lag_min = parsed.get(MIN_COMPACTION_LAG_MS_CONFIG, TOPIC_CONFIG_KEYS[MIN_COMPACTION_LAG_MS_CONFIG].default)
        lag_max = parsed.get(MAX_COMPACTION_LAG_MS_CONFIG, TOPIC_CONFIG_KEYS[MAX_COMPACTION_LAG_MS_CONFIG].default)
        if lag_min > lag_max:
            raise InvalidConfigurationError(
                f"conflict topic config setting min.compaction.lag.ms ({lag_min}) > max.compaction.lag.ms ({lag_max})"
            )
        return parsed

    # -- queries ------------------------------------------------------------------------------
    def get(self, name: str) -> Any:
        return self._values[name]

    def values(self) -> Mapping[str, Any]:
        """Every topic key -> effective value (read-only)."""
        return self._values

    def source_of(self, name: str) -> tuple[str, str | None]:
        """``(source, synonym)``: ``("TOPIC_CONFIG", None)`` for an override,
        ``("STATIC_BROKER_CONFIG", "log.roll.hours")`` for a broker-supplied default, else
        ``("DEFAULT_CONFIG", None)``."""
        if name in self._overridden:
            return SOURCE_TOPIC_CONFIG, None
        synonym = self._default_sources.get(name)
        if synonym is not None:
            return SOURCE_STATIC_BROKER_CONFIG, synonym
        return SOURCE_DEFAULT_CONFIG, None

    @staticmethod
    def value_to_string(value: Any) -> str:
        """Kafka's string form of a config value (lists comma-joined, booleans lower case)."""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (list, tuple)):
            return ",".join(value)
        return str(value)

    def random_segment_jitter(self) -> int:
        """A random jitter in ``[0, min(segment.jitter.ms, segment.ms))`` for a new segment."""
        if self.segment_jitter_ms == 0:
            return 0
        return random.randrange(min(self.segment_jitter_ms, self.segment_ms))

    def __repr__(self) -> str:
        return f"LogConfig(overrides={ {k: self._values[k] for k in sorted(self._overridden)} })"
