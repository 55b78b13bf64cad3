"""Topic-level log configuration: the keys, their types/defaults/validators, broker synonyms.

Mirrors ``org.apache.kafka.storage.internals.log.LogConfig`` and ``ServerTopicConfigSynonyms``. Every
topic key has a broker-level synonym list (``segment.ms`` <- ``log.roll.ms``, ``log.roll.hours``);
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
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pykbroker.protocol import errors as _errors

InvalidConfigError = _errors.for_name("INVALID_CONFIG")

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1

HOURS_TO_MS = 3_600_000
MINUTES_TO_MS = 60_000

INT, LONG, DOUBLE, BOOLEAN, STRING, LIST = "INT", "LONG", "DOUBLE", "BOOLEAN", "STRING", "LIST"

CLEANUP_POLICY_DELETE = "delete"
CLEANUP_POLICY_COMPACT = "compact"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")

# DescribeConfigs sources (protocol values of ConfigSource).
SOURCE_TOPIC_CONFIG = "TOPIC_CONFIG"  # DYNAMIC_TOPIC_CONFIG = 1
SOURCE_STATIC_BROKER_CONFIG = "STATIC_BROKER_CONFIG"  # 4
SOURCE_DEFAULT_CONFIG = "DEFAULT_CONFIG"  # 5


@dataclass(frozen=True)
class ConfigSynonym:
    """A broker key that supplies a topic key's default, times ``multiplier`` (hours -> ms)."""
    name: str
    multiplier: int = 1


@dataclass(frozen=True)
class TopicConfigKey:
    name: str
    type: str
    default: Any
    validator: Callable[[str, Any], None] | None
    doc: str
    synonyms: tuple[ConfigSynonym, ...]


def _invalid(name: str, value: Any, reason: str) -> _errors.KafkaError:
    return InvalidConfigError(f"Invalid value {value} for configuration {name}: {reason}")


def at_least(minimum: float) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if value is not None and value < minimum:
            raise _invalid(name, value, f"Value must be at least {minimum}")
    return check


def between(lo: float, hi: float) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if value is not None and not lo <= value <= hi:
            raise _invalid(name, value, f"Value must be between {lo} and {hi}")
    return check


def one_of(*allowed: Any) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if value not in allowed:
            raise _invalid(name, value, f"String must be one of: {', '.join(map(str, allowed))}")
    return check


def list_of(*allowed: str) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        for item in value:
            if item not in allowed:
                raise _invalid(name, ",".join(value), f"String must be one of: {', '.join(allowed)}")
    return check


def _level(lo: int, hi: int, extra: int | None = None) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if not (lo <= value <= hi or value == extra):
            raise _invalid(name, value, f"Value must be between {lo} and {hi}")
    return check


def _throttled_replicas(name: str, value: Any) -> None:
    if value == ["*"]:
        return
    for item in value:
        parts = item.split(":")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise _invalid(name, ",".join(value), "must be the literal '*' or a list of replicas in the following "
                           "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


def _log(*names: str, multipliers: tuple[int, ...] = ()) -> tuple[ConfigSynonym, ...]:
    return tuple(ConfigSynonym(n, multipliers[i] if i < len(multipliers) else 1) for i, n in enumerate(names))


def _key(name, type_, default, validator, doc, *synonyms: ConfigSynonym) -> TopicConfigKey:
    return TopicConfigKey(name, type_, default, validator, doc, tuple(synonyms))


_S = ConfigSynonym
_KEYS = (
    _key("segment.bytes", INT, 1024 * 1024 * 1024, at_least(14), "Segment file size for the log",
         _S("log.segment.bytes")),
    _key("segment.ms", LONG, 7 * 24 * HOURS_TO_MS, at_least(1), "Time after which a segment is rolled",
         _S("log.roll.ms"), _S("log.roll.hours", HOURS_TO_MS)),
    _key("segment.jitter.ms", LONG, 0, at_least(0), "Max random jitter subtracted from the roll time",
         _S("log.roll.jitter.ms"), _S("log.roll.jitter.hours", HOURS_TO_MS)),
    _key("segment.index.bytes", INT, 10 * 1024 * 1024, at_least(4), "Size of the offset/time index files",
         _S("log.index.size.max.bytes")),
    _key("flush.messages", LONG, LONG_MAX, at_least(1), "Messages accumulated before an fsync",
         _S("log.flush.interval.messages")),
    _key("flush.ms", LONG, LONG_MAX, at_least(0), "Max time before an fsync",
         _S("log.flush.interval.ms"), _S("log.flush.scheduler.interval.ms")),
    _key("retention.bytes", LONG, -1, None, "Max partition size before old segments are deleted (-1: no limit)",
         _S("log.retention.bytes")),
    _key("retention.ms", LONG, 7 * 24 * HOURS_TO_MS, at_least(-1), "Max age of a segment before deletion "
         "(-1: no limit)", _S("log.retention.ms"), _S("log.retention.minutes", MINUTES_TO_MS),
         _S("log.retention.hours", HOURS_TO_MS)),
    _key("max.message.bytes", INT, 1024 * 1024 + 12, at_least(0), "Largest record batch size allowed",
         _S("message.max.bytes")),
    _key("index.interval.bytes", INT, 4096, at_least(0), "Bytes between offset index entries",
         _S("log.index.interval.bytes")),
    _key("delete.retention.ms", LONG, 24 * HOURS_TO_MS, at_least(0), "Retention of delete tombstones",
         _S("log.cleaner.delete.retention.ms")),
    _key("min.compaction.lag.ms", LONG, 0, at_least(0), "Min time a message stays uncompacted",
         _S("log.cleaner.min.compaction.lag.ms")),
    _key("max.compaction.lag.ms", LONG, LONG_MAX, at_least(1), "Max time a message stays ineligible for "
         "compaction", _S("log.cleaner.max.compaction.lag.ms")),
    _key("file.delete.delay.ms", LONG, 60000, at_least(0), "Delay before deleting a file from the filesystem",
         _S("log.segment.delete.delay.ms")),
    _key("min.cleanable.dirty.ratio", DOUBLE, 0.5, between(0, 1), "Dirty ratio that makes a log cleanable",
         _S("log.cleaner.min.cleanable.ratio")),
    _key("cleanup.policy", LIST, [CLEANUP_POLICY_DELETE], list_of(CLEANUP_POLICY_COMPACT, CLEANUP_POLICY_DELETE),
         "delete and/or compact", _S("log.cleanup.policy")),
    _key("unclean.leader.election.enable", BOOLEAN, False, None, "Allow out-of-ISR replicas to become leader",
         _S("unclean.leader.election.enable")),
    _key("min.insync.replicas", INT, 1, at_least(1), "Min ISR size for acks=all writes",
         _S("min.insync.replicas")),
    _key("compression.type", STRING, "producer", one_of(*COMPRESSION_TYPES), "Final compression type",
         _S("compression.type")),
    _key("compression.gzip.level", INT, -1, _level(1, 9, -1), "gzip level", _S("compression.gzip.level")),
    _key("compression.lz4.level", INT, 9, _level(1, 17), "lz4 level", _S("compression.lz4.level")),
    _key("compression.zstd.level", INT, 3, _level(-131072, 22), "zstd level", _S("compression.zstd.level")),
    _key("preallocate", BOOLEAN, False, None, "Preallocate segment files", _S("log.preallocate")),
    _key("message.timestamp.type", STRING, "CreateTime", one_of(*TIMESTAMP_TYPES), "CreateTime or LogAppendTime",
         _S("log.message.timestamp.type")),
    _key("message.timestamp.difference.max.ms", LONG, LONG_MAX, at_least(0), "Deprecated timestamp window",
         _S("log.message.timestamp.difference.max.ms")),
    _key("message.timestamp.before.max.ms", LONG, LONG_MAX, at_least(0), "Max CreateTime before broker time",
         _S("log.message.timestamp.before.max.ms")),
    _key("message.timestamp.after.max.ms", LONG, LONG_MAX, at_least(0), "Max CreateTime after broker time",
         _S("log.message.timestamp.after.max.ms")),
    _key("leader.replication.throttled.replicas", LIST, [], _throttled_replicas, "Throttled leader replicas"),
    _key("follower.replication.throttled.replicas", LIST, [], _throttled_replicas, "Throttled follower replicas"),
    _key("message.downconversion.enable", BOOLEAN, True, None, "Down-conversion for old consumers",
         _S("log.message.downconversion.enable")),
    _key("remote.storage.enable", BOOLEAN, False, None, "Tiered storage (not supported)"),
    _key("local.retention.ms", LONG, -2, at_least(-2), "Local retention with tiered storage",
         _S("log.local.retention.ms")),
    _key("local.retention.bytes", LONG, -2, at_least(-2), "Local retention with tiered storage",
         _S("log.local.retention.bytes")),
    _key("remote.log.copy.disable", BOOLEAN, False, None, "Tiered storage copy disabled"),
    _key("remote.log.delete.on.disable", BOOLEAN, False, None, "Tiered storage delete on disable"),
)

TOPIC_CONFIG_KEYS: Mapping[str, TopicConfigKey] = MappingProxyType({k.name: k for k in _KEYS})


def broker_synonyms(topic_key: str) -> list[str]:
    """The broker keys that supply ``topic_key``'s default, in precedence order
    (``"retention.ms" -> ["log.retention.ms", "log.retention.minutes", "log.retention.hours"]``)."""
    return [s.name for s in TOPIC_CONFIG_KEYS[topic_key].synonyms]


def parse_value(key: TopicConfigKey, value: Any, name: str | None = None) -> Any:
    """Convert ``value`` (a string from a request/properties file, or an already typed value) to
    ``key``'s type. Raises InvalidConfigError naming the key and value."""
    name = name or key.name
    t = key.type
    try:
        if t in (INT, LONG):
            if isinstance(value, bool):
                raise ValueError
            parsed = value if isinstance(value, int) else int(str(value).strip())
            lo, hi = (INT_MIN, INT_MAX) if t == INT else (LONG_MIN, LONG_MAX)
            if not lo <= parsed <= hi:
                raise ValueError
            return parsed
        if t == DOUBLE:
            return float(value) if not isinstance(value, str) else float(value.strip())
        if t == BOOLEAN:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text not in ("true", "false"):
                raise ValueError
            return text == "true"
        if t == STRING:
            return str(value).strip()
        if t == LIST:
            if isinstance(value, (list, tuple)):
                return [str(v).strip() for v in value]
            text = str(value).strip()
            return [v.strip() for v in text.split(",")] if text else []
    except (TypeError, ValueError):
        pass
    raise InvalidConfigError(f"Invalid value {value} for configuration {name}: Expected value to be a "
                             f"{'32-bit integer' if t == INT else t.lower()}, but it was {value!r}")


def _validated(key: TopicConfigKey, value: Any, name: str | None = None) -> Any:
    parsed = parse_value(key, value, name)
    if key.validator is not None:
        key.validator(key.name, parsed)
    return parsed


class LogConfig:
    """The effective configuration of one log (broker defaults merged with topic overrides).

    Immutable and thread-safe. Attributes use Kafka's names in snake case (``segment_bytes``,
    ``segment_ms``, ``retention_ms``, ``flush_interval_messages`` ...); :meth:`get` reads any key by its
    topic-level name.
    """

    def __init__(self, overrides: Mapping[str, Any] | None = None, *, _defaults: Mapping[str, Any] | None = None,
                 _default_sources: Mapping[str, str] | None = None):
        overrides = dict(overrides or {})
        values = dict(_defaults) if _defaults is not None else {k.name: k.default for k in _KEYS}
        values.update(LogConfig.validate(overrides))
        self._values: Mapping[str, Any] = MappingProxyType(values)
        self._overridden = frozenset(overrides)
        self._default_sources: Mapping[str, str] = MappingProxyType(dict(_default_sources or {}))
        self._broker_defaults = _defaults
        self.segment_bytes: int = values["segment.bytes"]
        self.segment_ms: int = values["segment.ms"]
        self.segment_jitter_ms: int = values["segment.jitter.ms"]
        self.segment_index_bytes: int = values["segment.index.bytes"]
        self.flush_interval_messages: int = values["flush.messages"]
        self.flush_ms: int = values["flush.ms"]
        self.retention_bytes: int = values["retention.bytes"]
        self.retention_ms: int = values["retention.ms"]
        self.max_message_bytes: int = values["max.message.bytes"]
        self.index_interval_bytes: int = values["index.interval.bytes"]
        self.file_delete_delay_ms: int = values["file.delete.delay.ms"]
        self.delete_retention_ms: int = values["delete.retention.ms"]
        self.min_compaction_lag_ms: int = values["min.compaction.lag.ms"]
        self.max_compaction_lag_ms: int = values["max.compaction.lag.ms"]
        self.min_cleanable_dirty_ratio: float = values["min.cleanable.dirty.ratio"]
        self.cleanup_policy: list[str] = list(values["cleanup.policy"])
        self.unclean_leader_election_enable: bool = values["unclean.leader.election.enable"]
        self.min_insync_replicas: int = values["min.insync.replicas"]
        self.compression_type: str = values["compression.type"]
        self.preallocate: bool = values["preallocate"]
        self.message_timestamp_type: str = values["message.timestamp.type"]
        self.message_timestamp_before_max_ms: int = values["message.timestamp.before.max.ms"]
        self.message_timestamp_after_max_ms: int = values["message.timestamp.after.max.ms"]

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_broker_config(cls, broker_props: Mapping[str, Any] | None = None,
                           overrides: Mapping[str, Any] | None = None) -> LogConfig:
        """Topic defaults from broker keys (``log.segment.bytes``, ``log.roll.hours`` ...; values may be
        strings or typed), then ``overrides`` (topic-level keys) on top. Raises InvalidConfigError."""
        props = broker_props or {}
        defaults: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for key in _KEYS:
            value = key.default
            for syn in key.synonyms:
                raw = props.get(syn.name)
                if raw is None or (isinstance(raw, str) and raw.strip() == "" and key.type != LIST):
                    continue
                value = parse_value(key, raw, syn.name) * syn.multiplier if syn.multiplier != 1 else \
                    parse_value(key, raw, syn.name)
                if key.name == "retention.ms" and value < 0:
                    value = -1  # KafkaConfig.logRetentionTimeMillis: any negative means forever
                if key.validator is not None:
                    key.validator(syn.name, value)
                sources[key.name] = syn.name
                break
            defaults[key.name] = value
        return cls(overrides, _defaults=defaults, _default_sources=sources)

    def with_overrides(self, overrides: Mapping[str, Any]) -> LogConfig:
        """A new config: this config's broker defaults with ``overrides`` (the topic's complete
        override set, replacing the previous one). Raises InvalidConfigError."""
        return LogConfig(overrides, _defaults=self._broker_defaults, _default_sources=self._default_sources)

    @staticmethod
    def validate(overrides: Mapping[str, Any]) -> dict[str, Any]:
        """Check names and values of topic-level ``overrides``; return them parsed. Raises
        InvalidConfigError naming the first bad key and value (Kafka's ``LogConfig.validate``)."""
        parsed: dict[str, Any] = {}
        for name, value in overrides.items():
            key = TOPIC_CONFIG_KEYS.get(name)
            if key is None:
                raise InvalidConfigError(f"Unknown topic config name: {name}")
            parsed[name] = _validated(key, value)
        lag_min = parsed.get("min.compaction.lag.ms", TOPIC_CONFIG_KEYS["min.compaction.lag.ms"].default)
        lag_max = parsed.get("max.compaction.lag.ms", TOPIC_CONFIG_KEYS["max.compaction.lag.ms"].default)
        if lag_min > lag_max:
            raise InvalidConfigError(f"conflict topic config setting min.compaction.lag.ms ({lag_min}) > "
                                     f"max.compaction.lag.ms ({lag_max})")
        return parsed

    # -- queries ------------------------------------------------------------------------------
    def get(self, name: str) -> Any:
        return self._values[name]

    def values(self) -> Mapping[str, Any]:
        """Every topic key -> effective value (read-only)."""
        return self._values

    @property
    def overridden_keys(self) -> frozenset[str]:
        return self._overridden

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

    @property
    def delete(self) -> bool:
        return CLEANUP_POLICY_DELETE in self.cleanup_policy

    @property
    def compact(self) -> bool:
        return CLEANUP_POLICY_COMPACT in self.cleanup_policy

    def random_segment_jitter(self) -> int:
        """A random jitter in ``[0, min(segment.jitter.ms, segment.ms))`` for a new segment."""
        if self.segment_jitter_ms == 0:
            return 0
        return random.randrange(min(self.segment_jitter_ms, self.segment_ms))

    def __repr__(self) -> str:
        return f"LogConfig(overrides={ {k: self._values[k] for k in sorted(self._overridden)} })"
