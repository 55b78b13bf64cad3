"""Spark Kafka source/sink options: parsing and validation (pure Python, no Spark, no broker).

Mirrors ``org.apache.spark.sql.kafka010.KafkaSourceProvider``'s checks: exactly one of ``subscribe``,
``subscribePattern``, ``assign``; the Kafka consumer options Spark refuses raise ValueError with
Spark's message; ``kafka.*`` options are passed to the client without the prefix.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping

FORBIDDEN = {
    "auto.offset.reset": (
        "Kafka option 'auto.offset.reset' is not supported.\nInstead set the source option "
        "'startingOffsets' to 'earliest' or 'latest' to specify where to start. Structured Streaming "
        "manages which offsets are consumed internally, rather than relying on the kafkaConsumer to "
        "do it. This will ensure that no data is missed when new topics/partitions are dynamically "
        "subscribed. Note that 'startingOffsets' only applies when a new Streaming query is started, "
        "and that resuming will always pick up from where the query left off. See the docs for more "
        "details."
    ),
    "key.deserializer": (
        "Kafka option 'key.deserializer' is not supported, keys are always deserialized as byte arrays "
        "with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize the keys."
    ),
    "value.deserializer": (
        "Kafka option 'value.deserializer' is not supported, values are always deserialized as "
        "byte arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize "
        "the values."
    ),
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported.",
    "interceptor.classes": (
        "Kafka option 'interceptor.classes' is not supported as user-specified consumer interceptors are not supported."
    ),
}
SINK_FORBIDDEN = {
    "key.serializer": (
        "Kafka option 'key.serializer' is not supported, keys are always serialized with "
        "ByteArraySerializer or StringSerializer. Use DataFrame operations to explicitly serialize "
        "the keys into either strings or byte arrays."
    ),
    "value.serializer": (
        "Kafka option 'value.serializer' is not supported, values are always serialized with "
        "ByteArraySerializer or StringSerializer. Use DataFrame operations to explicitly serialize "
        "the values into either strings or byte arrays."
    ),
}
STRATEGIES = ("assign", "subscribe", "subscribepattern")


class SourceOptions:
    """Case-insensitive option lookup (Spark's CaseInsensitiveMap)."""

    def __init__(self, options: Mapping[str, str], sink: bool = False):
        self.raw = {k.lower(): v for k, v in dict(options).items()}
        self.kafka: dict[str, str] = {k[6:]: v for k, v in dict(options).items() if k.lower().startswith("kafka.")}
        for key in self.kafka:
            message = (SINK_FORBIDDEN if sink else FORBIDDEN).get(key.lower())
            if message:
                raise ValueError(message)
        if "bootstrap.servers" not in {k.lower() for k in self.kafka}:
            raise ValueError(
                "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"
                if not sink
                else "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer"
            )
        self.bootstrap = next(v for k, v in self.kafka.items() if k.lower() == "bootstrap.servers")
        self.sink = sink
        if not sink:
            given = [s for s in STRATEGIES if s in self.raw]
            if len(given) != 1:
                raise ValueError(
                    "One of the following options must be specified for Kafka source: subscribe, "
                    "subscribepattern, assign. See the docs for more details."
                )
            self.strategy = given[0]
            self.strategy_value = self.raw[given[0]]
            if self.strategy == "subscribe" and not [t for t in self.strategy_value.split(",") if t.strip()]:
                raise ValueError(
                    f"No topics to subscribe to as specified value for option 'subscribe' is '{self.strategy_value}'"
                )
            if self.strategy == "subscribepattern" and not self.strategy_value.strip():
                raise ValueError("Pattern to subscribe is empty as specified value for option 'subscribePattern' is ''")

    def get(self, key: str, default=None):
        return self.raw.get(key.lower(), default)

    def bool(self, key: str, default: bool) -> bool:
        v = self.get(key)
        return default if v is None else str(v).strip().lower() == "true"

    def int(self, key: str, default: int | None = None) -> int | None:
        v = self.get(key)
        if v is None:
            return default
        try:
            return int(v)
        except ValueError:
            raise ValueError(f"Invalid value '{v}' for option '{key}', must be a number") from None

    @property
    def client_conf(self) -> dict[str, str]:
        """``kafka.*`` options for the client (Spark's own names are Kafka's)."""
        return {k: v for k, v in self.kafka.items() if k.lower() != "bootstrap.servers"}

    def assigned_partitions(self) -> list[tuple[str, builtins.int]]:  # builtins: the class defines int()
        try:
            spec = json.loads(self.strategy_value)
            return sorted((t, int(p)) for t, ps in spec.items() for p in ps)
        except (ValueError, AttributeError, TypeError):
            raise ValueError(
                f"""Expected e.g. {{"topicA":[0,1],"topicB":[0,1]}}, got {self.strategy_value}"""
            ) from None
