"""Dynamic per-group configs (config resource type GROUP, 32), mirroring
``org.apache.kafka.coordinator.group.GroupConfig`` / ``GroupConfigManager`` of Kafka 4.0.

Keys (INT, ms): ``consumer.session.timeout.ms`` (default ``group.consumer.session.timeout.ms``, within
``group.consumer.min.session.timeout.ms``..``group.consumer.max.session.timeout.ms``) and
``consumer.heartbeat.interval.ms`` (default ``group.consumer.heartbeat.interval.ms``, within
``group.consumer.min.heartbeat.interval.ms``..``group.consumer.max.heartbeat.interval.ms``); the session
timeout must exceed the heartbeat interval. Kafka's share-group keys (``share.*``) are not supported
(no share groups): they are refused as unknown names. Both keys only govern KIP-848 ``consumer`` groups (the
session timeout and the heartbeat interval their members are given); they change no classic group.

Overrides live in the metadata log as ``ConfigRecord``s of resource type GROUP (written by the
controller after :func:`validate`), like Kafka's. Immutable, thread-safe.
"""

from __future__ import annotations

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
)
from pykbroker.protocol import errors

if TYPE_CHECKING:
    from pykbroker.config.kafka_config import KafkaConfig

CONSUMER_SESSION_TIMEOUT_MS_CONFIG = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS_CONFIG = "consumer.heartbeat.interval.ms"

_DOCS = {
    CONSUMER_SESSION_TIMEOUT_MS_CONFIG: "The timeout to detect client failures when using the consumer group protocol.",
    CONSUMER_HEARTBEAT_INTERVAL_MS_CONFIG: "The heartbeat interval given to the members of a consumer group.",
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
}
_KAFKA_DEFAULTS = {
    CONSUMER_SESSION_TIMEOUT_MS_CONFIG: (45000, 45000, 60000),
    CONSUMER_HEARTBEAT_INTERVAL_MS_CONFIG: (5000, 5000, 15000),
}
NAMES = tuple(_BROKER_KEYS)


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


def effective(overrides: dict[str, str], defaults: GroupConfigDefaults) -> dict[str, int]:
    """Every group config's value: the override if any, else the broker default."""
    return {name: _parse_int(name, overrides[name]) if name in overrides else defaults.default(name) for name in NAMES}


def validate(overrides: dict[str, str], defaults: GroupConfigDefaults) -> None:
    """``GroupConfigManager.validate``: raise InvalidConfigurationError (INVALID_CONFIG) for an unknown name, a
    non-INT or out-of-range value, or a session timeout not above the heartbeat interval."""
    for name in overrides:
        if name not in _BROKER_KEYS:
            raise errors.InvalidConfigurationError(f"Unknown group config name: {name}")
    values = effective(overrides, defaults)
    for name, value in values.items():
        _, lo, hi = defaults.bounds[name]
        min_key, max_key = _BROKER_KEYS[name][1:]
        if value < lo:
            raise errors.InvalidConfigurationError(f"{name} must be greater than or equal to {min_key}")
        if value > hi:
            raise errors.InvalidConfigurationError(f"{name} must be less than or equal to {max_key}")
    if values[CONSUMER_SESSION_TIMEOUT_MS_CONFIG] <= values[CONSUMER_HEARTBEAT_INTERVAL_MS_CONFIG]:
        raise errors.InvalidConfigurationError(
            f"{CONSUMER_SESSION_TIMEOUT_MS_CONFIG} must be greater than {CONSUMER_HEARTBEAT_INTERVAL_MS_CONFIG}"
        )


def describe(
    overrides: dict[str, str],
    defaults: GroupConfigDefaults,
    synonyms: bool,
    documentation: bool,
    source_default: int,
    source_group: int,
    int_type: int,
) -> list[dict]:
    """DescribeConfigs entries (``ConfigHelper.createGroupConfigEntry``): an override has source
    GROUP_CONFIG, anything else DEFAULT_CONFIG with the broker's value."""
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
                "config_type": int_type,
                "documentation": _DOCS[name] if documentation else None,
            }
        )
    return out
