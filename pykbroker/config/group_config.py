"""Dynamic per-group configs (config resource type GROUP, 32), mirroring
``org.apache.kafka.coordinator.group.GroupConfig`` / ``GroupConfigManager`` of Kafka 4.0.

Keys (INT, ms): ``consumer.session.timeout.ms`` (default ``group.consumer.session.timeout.ms``, within
``group.consumer.min.session.timeout.ms``..``group.consumer.max.session.timeout.ms``) and
``consumer.heartbeat.interval.ms`` (default ``group.consumer.heartbeat.interval.ms``, within
``group.consumer.min.heartbeat.interval.ms``..``group.consumer.max.heartbeat.interval.ms``); the session
timeout must exceed the heartbeat interval. Both keys only govern KIP-848 ``consumer`` groups (the
session timeout and the heartbeat interval their members are given); they change no classic group.

Share groups (KIP-932, Kafka 4.2's ``GroupConfig``): ``share.session.timeout.ms``, ``share.heartbeat.interval.ms``
(INT, ms, defaults and bounds ``group.share.[min.|max.]session.timeout.ms`` / ``...heartbeat.interval.ms``; the
session timeout must exceed the heartbeat interval), ``share.record.lock.duration.ms`` (INT, ms, default and
bounds ``group.share.[min.|max.]record.lock.duration.ms``), ``share.auto.offset.reset`` (STRING: ``latest``,
default, ``earliest`` or ``by_duration:<ISO-8601 duration>``) and ``share.isolation.level`` (STRING:
``read_uncommitted``, default, or ``read_committed``). The share partitions read theirs with :func:`share_configs`.

Overrides live in the metadata log as ``ConfigRecord``s of resource type GROUP (written by the
controller after :func:`validate`), like Kafka's. Immutable, thread-safe.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pykbroker.config.broker_configs.group_coordinator_configs import (
    GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS_CONFIG,
    GROUP_CONSUMER_MAX_HEARTBEAT_INTERVAL_MS_CONFIG,
    GROUP_CONSUMER_MAX_SESSION_TIMEOUT_MS_CONFIG,
    GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS_CONFIG,
    GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS_CONFIG,
    GROUP_CONSUMER_SESSION_TIMEOUT_MS_CONFIG,
    GROUP_SHARE_HEARTBEAT_INTERVAL_MS_CONFIG,
    GROUP_SHARE_MAX_HEARTBEAT_INTERVAL_MS_CONFIG,
    GROUP_SHARE_MAX_RECORD_LOCK_DURATION_MS_CONFIG,
    GROUP_SHARE_MAX_SESSION_TIMEOUT_MS_CONFIG,
    GROUP_SHARE_MIN_HEARTBEAT_INTERVAL_MS_CONFIG,
    GROUP_SHARE_MIN_RECORD_LOCK_DURATION_MS_CONFIG,
    GROUP_SHARE_MIN_SESSION_TIMEOUT_MS_CONFIG,
    GROUP_SHARE_RECORD_LOCK_DURATION_MS_CONFIG,
    GROUP_SHARE_SESSION_TIMEOUT_MS_CONFIG,
)
from pykbroker.protocol import errors

if TYPE_CHECKING:
    from pykbroker.config.kafka_config import KafkaConfig

CONSUMER_SESSION_TIMEOUT_MS_CONFIG = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS_CONFIG = "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT_MS_CONFIG = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL_MS_CONFIG = "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION_MS_CONFIG = "share.record.lock.duration.ms"
SHARE_AUTO_OFFSET_RESET_CONFIG = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL_CONFIG = "share.isolation.level"

_DOCS = {
    CONSUMER_SESSION_TIMEOUT_MS_CONFIG: "The timeout to detect client failures when using the consumer group protocol.",
    CONSUMER_HEARTBEAT_INTERVAL_MS_CONFIG: "The heartbeat interval given to the members of a consumer group.",
    SHARE_SESSION_TIMEOUT_MS_CONFIG: "The timeout to detect client failures when using the share group protocol.",
    SHARE_HEARTBEAT_INTERVAL_MS_CONFIG: "The heartbeat interval given to the members of a share group.",
    SHARE_RECORD_LOCK_DURATION_MS_CONFIG: "The record acquisition lock duration in milliseconds for share groups.",
    SHARE_AUTO_OFFSET_RESET_CONFIG: "The strategy to initialize the share-partition start offset.",
    SHARE_ISOLATION_LEVEL_CONFIG: "Controls how to read records written transactionally.",
}
_BROKER_KEYS = {  # group config -> (broker default, broker min, broker max)
    CONSUMER_SESSION_TIMEOUT_MS_CONFIG: (
        GROUP_CONSUMER_SESSION_TIMEOUT_MS_CONFIG,
        GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS_CONFIG,
        GROUP_CONSUMER_MAX_SESSION_TIMEOUT_MS_CONFIG,
    ),
    CONSUMER_HEARTBEAT_INTERVAL_MS_CONFIG: (
        GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS_CONFIG,
        GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS_CONFIG,
        GROUP_CONSUMER_MAX_HEARTBEAT_INTERVAL_MS_CONFIG,
    ),
    SHARE_SESSION_TIMEOUT_MS_CONFIG: (
        GROUP_SHARE_SESSION_TIMEOUT_MS_CONFIG,
        GROUP_SHARE_MIN_SESSION_TIMEOUT_MS_CONFIG,
        GROUP_SHARE_MAX_SESSION_TIMEOUT_MS_CONFIG,
    ),
    SHARE_HEARTBEAT_INTERVAL_MS_CONFIG: (
        GROUP_SHARE_HEARTBEAT_INTERVAL_MS_CONFIG,
        GROUP_SHARE_MIN_HEARTBEAT_INTERVAL_MS_CONFIG,
        GROUP_SHARE_MAX_HEARTBEAT_INTERVAL_MS_CONFIG,
    ),
    SHARE_RECORD_LOCK_DURATION_MS_CONFIG: (
        GROUP_SHARE_RECORD_LOCK_DURATION_MS_CONFIG,
        GROUP_SHARE_MIN_RECORD_LOCK_DURATION_MS_CONFIG,
        GROUP_SHARE_MAX_RECORD_LOCK_DURATION_MS_CONFIG,
    ),
}
_KAFKA_DEFAULTS = {
    CONSUMER_SESSION_TIMEOUT_MS_CONFIG: (45000, 45000, 60000),
    CONSUMER_HEARTBEAT_INTERVAL_MS_CONFIG: (5000, 5000, 15000),
    SHARE_SESSION_TIMEOUT_MS_CONFIG: (45000, 45000, 60000),
    SHARE_HEARTBEAT_INTERVAL_MS_CONFIG: (5000, 5000, 15000),
    SHARE_RECORD_LOCK_DURATION_MS_CONFIG: (30000, 15000, 60000),
}
#: the STRING configs: default, and a check of a value (a message when invalid, else None)
_STRING_DEFAULTS = {SHARE_AUTO_OFFSET_RESET_CONFIG: "latest", SHARE_ISOLATION_LEVEL_CONFIG: "read_uncommitted"}
INT_NAMES = tuple(_BROKER_KEYS)
NAMES = INT_NAMES + tuple(_STRING_DEFAULTS)
_DURATION = re.compile(r"^-?P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)


@dataclass(frozen=True)
class GroupConfigDefaults:
    """Per key ``(default, min, max)`` in ms, from the broker's ``group.consumer.*`` configs."""

    bounds: dict

    @classmethod
    def from_broker_config(cls, config: KafkaConfig | Mapping[str, Any] | None = None) -> GroupConfigDefaults:
        """``config``: a KafkaConfig (or mapping); missing keys take Kafka's defaults."""
        bounds = {}
        for name, keys in _BROKER_KEYS.items():
            values = []
            for key, fallback in zip(keys, _KAFKA_DEFAULTS[name], strict=True):
                try:
                    value = config[key] if config is not None else None
                except KeyError:
                    value = None
                values.append(int(value) if value is not None else fallback)
            bounds[name] = tuple(values)
        return cls(bounds)

    def default(self, name: str) -> int:
        return self.bounds[name][0]


def _parse_int(name: str, value: object) -> int:
    try:
        parsed = int(str(value).strip())
    except ValueError:
        raise errors.InvalidConfigurationError(
            f"Invalid value {value} for configuration {name}: Not a number of type INT"
        ) from None
    if not -(2**31) <= parsed < 2**31:
        raise errors.InvalidConfigurationError(
            f"Invalid value {value} for configuration {name}: Not a number of type INT"
        )
    if parsed < 1:
        raise errors.InvalidConfigurationError(
            f"Invalid value {value} for configuration {name}: Value must be at least 1"
        )
    return parsed


def duration_ms(text: str) -> int | None:
    """Milliseconds of an ISO-8601 duration ``PnDTnHnMn.nS`` (Java's ``Duration.parse``), None when it does not
    parse or is negative."""
    m = _DURATION.match(text.strip())
    if m is None or text.strip().startswith("-") or not any(m.groups()) or text.strip().upper().endswith("T"):
        return None
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    return int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)


def _check_string(name: str, value: str) -> str:
    if name == SHARE_AUTO_OFFSET_RESET_CONFIG:
        lowered = value.strip().lower()
        if lowered in ("latest", "earliest"):
            return lowered
        if lowered.startswith("by_duration:") and duration_ms(value.strip()[len("by_duration:") :]) is not None:
            return value.strip()
        raise errors.InvalidConfigurationError(
            f"Invalid value {value} for configuration {name}: Invalid value `{value}` for configuration "
            f"{name}. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'."
        )
    if name == SHARE_ISOLATION_LEVEL_CONFIG:
        lowered = value.strip().lower()
        if lowered in ("read_uncommitted", "read_committed"):
            return lowered
        raise errors.InvalidConfigurationError(
            f"Invalid value {value} for configuration {name}: String must be one of: read_committed, read_uncommitted"
        )
    return value


def effective(overrides: dict[str, str], defaults: GroupConfigDefaults) -> dict[str, Any]:
    """Every group config's value (int for the INT configs, str for the STRING ones): the override if any, else the
    broker default."""
    out: dict[str, Any] = {
        name: _parse_int(name, overrides[name]) if name in overrides else defaults.default(name) for name in INT_NAMES
    }
    for name, default in _STRING_DEFAULTS.items():
        out[name] = _check_string(name, str(overrides[name])) if name in overrides else default
    return out


def share_configs(overrides: dict[str, str], defaults: GroupConfigDefaults) -> dict[str, Any]:
    """The ``share.*`` configs of a share group (the data path's query): ``{name: value}`` for
    ``share.session.timeout.ms``, ``share.heartbeat.interval.ms``, ``share.record.lock.duration.ms`` (int, ms),
    ``share.auto.offset.reset`` (``latest``, ``earliest`` or ``by_duration:<duration>``) and
    ``share.isolation.level`` (``read_uncommitted`` / ``read_committed``); an invalid stored override reads as the
    default."""
    try:
        values = effective(overrides, defaults)
    except errors.KafkaError:
        values = effective({}, defaults)
    return {k: v for k, v in values.items() if k.startswith("share.")}


def validate(overrides: dict[str, str], defaults: GroupConfigDefaults) -> None:
    """``GroupConfigManager.validate``: raise InvalidConfigurationError (INVALID_CONFIG) for an unknown name, a
    non-INT or out-of-range value, a STRING value not allowed, or a session timeout not above the heartbeat
    interval."""
    for name in overrides:
        if name not in NAMES:
            raise errors.InvalidConfigurationError(f"Unknown group config name: {name}")
    values = effective(overrides, defaults)
    for name in INT_NAMES:
        value = values[name]
        _, lo, hi = defaults.bounds[name]
        min_key, max_key = _BROKER_KEYS[name][1:]
        if value < lo:
            raise errors.InvalidConfigurationError(f"{name} must be greater than or equal to {min_key}")
        if value > hi:
            raise errors.InvalidConfigurationError(f"{name} must be less than or equal to {max_key}")
    for session, interval in (
        (CONSUMER_SESSION_TIMEOUT_MS_CONFIG, CONSUMER_HEARTBEAT_INTERVAL_MS_CONFIG),
        (SHARE_SESSION_TIMEOUT_MS_CONFIG, SHARE_HEARTBEAT_INTERVAL_MS_CONFIG),
    ):
        if values[session] <= values[interval]:
            raise errors.InvalidConfigurationError(f"{session} must be greater than {interval}")


def describe(
    overrides: dict[str, str],
    defaults: GroupConfigDefaults,
    synonyms: bool,
    documentation: bool,
    source_default: int,
    source_group: int,
    int_type: int,
    string_type: int = 2,
) -> list[dict]:
    """DescribeConfigs entries (``ConfigHelper.createGroupConfigEntry``): an override has source
    GROUP_CONFIG, anything else DEFAULT_CONFIG with the broker's value. ``int_type`` / ``string_type``: the
    DescribeConfigs config types of INT and STRING configs."""
    out = []
    for name, value in sorted(effective(overrides, defaults).items()):
        source = source_group if name in overrides else source_default
        text = str(value)
        out.append(
            {
                "name": name,
                "value": text,
                "read_only": False,
                "is_default": source == source_default,
                "config_source": source,
                "is_sensitive": False,
                "synonyms": [{"name": name, "value": text, "source": source}] if synonyms else [],
                "config_type": int_type if name in _BROKER_KEYS else string_type,
                "documentation": _DOCS[name] if documentation else None,
            }
        )
    return out
