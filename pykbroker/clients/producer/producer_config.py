"""Producer configuration: Kafka's keys and defaults (``org.apache.kafka.clients.producer.ProducerConfig``).

Values may be given as strings (as from a properties file or ``--producer-props``) or typed. Keys we
do not implement are accepted and kept (a warning lists them), as Kafka logs unknown configs.
Serializers are callables ``(topic, data) -> bytes`` (Kafka's Serializer.serialize).
"""

from __future__ import annotations

from typing import Any

# key -> (type, default). Types: int, str, bool, "list".
_DEFS: dict[str, tuple[Any, Any]] = {
    "bootstrap.servers": ("list", None),
    "client.id": (str, ""),
    "acks": (str, "all"),
    "linger.ms": (int, 5),
    "batch.size": (int, 16384),
    "buffer.memory": (int, 33554432),
    "compression.type": (str, "none"),
    "max.block.ms": (int, 60000),
    "max.request.size": (int, 1048576),
    "request.timeout.ms": (int, 30000),
    "delivery.timeout.ms": (int, 120000),
    "retries": (int, 2147483647),
    "retry.backoff.ms": (int, 100),
    "retry.backoff.max.ms": (int, 1000),
    "reconnect.backoff.ms": (int, 50),
    "reconnect.backoff.max.ms": (int, 1000),
    "max.in.flight.requests.per.connection": (int, 5),
    "enable.idempotence": (bool, True),
    "metadata.max.age.ms": (int, 300000),
    "partitioner.ignore.keys": (bool, False),
    "send.buffer.bytes": (int, 131072),
    "receive.buffer.bytes": (int, 32768),
    "transactional.id": (str, None),
    "transaction.timeout.ms": (int, 60000),
    "key.serializer": (None, None),
    "value.serializer": (None, None),
}

ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}


class ConfigError(ValueError):
    """A producer config value is invalid (Kafka's ConfigException)."""


def _convert(key: str, typ, value):
    if value is None or typ is None:
        return value
    if typ == "list":
        return [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else list(value)
    if typ is bool:
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "false"):
            return str(value).lower() == "true"
        raise ConfigError(f"Invalid value {value} for configuration {key}: Expected value to be either true or false")
    try:
        return typ(value)
    except (TypeError, ValueError):
        raise ConfigError(f"Invalid value {value} for configuration {key}") from None


class ProducerConfig:
    """Typed producer settings; ``unknown`` holds keys this client does not implement."""

    def __init__(self, configs: dict[str, Any]):
        self.values: dict[str, Any] = {k: d for k, (_, d) in _DEFS.items()}
        self.unknown: dict[str, Any] = {}
        for key, value in configs.items():
            if key in _DEFS:
                self.values[key] = _convert(key, _DEFS[key][0], value)
            else:
                self.unknown[key] = value
        if not self.values["bootstrap.servers"]:
            raise ConfigError('Missing required configuration "bootstrap.servers" which has no default value.')
        acks = str(self.values["acks"]).lower()
        if acks not in ACKS:
            raise ConfigError(
                f"Invalid value {self.values['acks']} for configuration acks: String must be one of: all, -1, 0, 1"
            )
        self.acks = ACKS[acks]
        if self.values["transactional.id"] is not None:
            if "enable.idempotence" in configs and not self.values["enable.idempotence"]:
                raise ConfigError("Cannot set a transactional.id without also enabling idempotence.")
            self.values["enable.idempotence"] = True
        if self.values["enable.idempotence"] and (
            "enable.idempotence" in configs or self.values["transactional.id"] is not None
        ):
            if self.acks != -1:
                raise ConfigError(
                    "Must set acks to all in order to use the idempotent producer. "
                    "Otherwise we cannot guarantee idempotence."
                )
            if self.values["max.in.flight.requests.per.connection"] > 5:
                raise ConfigError(
                    "Must set max.in.flight.requests.per.connection to at most 5 when using the idempotent producer."
                )
        elif self.values["enable.idempotence"] and (
            self.acks != -1 or self.values["max.in.flight.requests.per.connection"] > 5
        ):
            # Idempotence is only a default: conflicting explicit settings turn it off (Kafka 3.2+).
            self.values["enable.idempotence"] = False
        if self.values["compression.type"] not in ("none", "gzip", "snappy", "lz4", "zstd"):
            raise ConfigError(f"Invalid value {self.values['compression.type']} for configuration compression.type")
        if self.values["delivery.timeout.ms"] < self.values["linger.ms"] + self.values["request.timeout.ms"]:
            self.values["delivery.timeout.ms"] = self.values["linger.ms"] + self.values["request.timeout.ms"]

    def __getitem__(self, key: str):
        return self.values[key]

    @property
    def idempotent(self) -> bool:
        return bool(self.values["enable.idempotence"])
