"""LogConfigSchema: the topic-config rules of :mod:`pykbroker.log.log_config` as a controller
:class:`~pykbroker.metadata.configuration_control_manager.ConfigSchema` (Kafka's ``KafkaConfigSchema`` +
``ControllerConfigurationValidator`` for topics).

Topic overrides are checked with ``LogConfig.validate`` (unknown names and bad values -> INVALID_CONFIG);
CreateTopics responses list every topic config with its effective value and source (TOPIC_CONFIG,
STATIC_BROKER_CONFIG, DEFAULT_CONFIG). Group overrides are checked with ``group_config.validate``
(INVALID_CONFIG). Broker resources (dynamic broker configs, per broker or the cluster default) accept the keys Kafka
reconfigures while running (:func:`dynamic_broker_keys`, Kafka's ``DynamicBrokerConfig.AllDynamicConfigs``,
per broker or per listener as ``listener.name.<listener>.<key>``) and custom keys Kafka does not know, with
Kafka's rules (:func:`validate_dynamic_broker_configs`): refusals are INVALID_REQUEST with Kafka's message.
Immutable, thread-safe.
"""

from __future__ import annotations

from pykbroker.config import group_config
from pykbroker.config.config_def import Type
from pykbroker.config.dynamic_broker_config_def import (
    RUNTIME_KEYS,
    check_names_and_types,
    config_key,
    listener_base_name,
)
from pykbroker.log.log_config import TOPIC_CONFIG_KEYS, LogConfig
from pykbroker.metadata.configuration_control_manager import (
    SOURCE_DEFAULT_CONFIG,
    SOURCE_STATIC_BROKER_CONFIG,
    SOURCE_TOPIC_CONFIG,
    ConfigSchema,
)
from pykbroker.protocol.config_resource import ConfigResourceType

_SOURCE_IDS = {
    "TOPIC_CONFIG": SOURCE_TOPIC_CONFIG,
    "STATIC_BROKER_CONFIG": SOURCE_STATIC_BROKER_CONFIG,
    "DEFAULT_CONFIG": SOURCE_DEFAULT_CONFIG,
}


#: Broker keys reconfigurable at run time besides the topic-default synonyms (Kafka's AllDynamicConfigs
#: without DynamicLogConfig's keys; see :mod:`pykbroker.config.dynamic_broker_config_def`).
DYNAMIC_BROKER_RUNTIME_KEYS = RUNTIME_KEYS


def log_default_keys() -> frozenset[str]:
    """DynamicLogConfig.ReconfigurableConfigs: the broker synonyms of the topic configs (``log.retention.ms``,
    ``message.max.bytes``, ...) but ``log.message.format.version``."""
    synonyms = {s.name for key in TOPIC_CONFIG_KEYS.values() for s in key.synonyms}
    return frozenset(synonyms - {"log.message.format.version"})


def dynamic_broker_keys() -> frozenset[str]:
    """Every broker key a dynamic broker config may set: the broker synonyms of the topic configs
    (DynamicLogConfig: ``log.retention.ms``, ``message.max.bytes``, ...) and the run-time keys."""
    return log_default_keys() | DYNAMIC_BROKER_RUNTIME_KEYS


def validate_dynamic_broker_configs(configs: dict[str, str], per_broker: bool = True) -> None:
    """Kafka's ``DynamicBrokerConfig.validateConfigs`` for one broker resource's complete overrides
    (``per_broker``: resource ``<id>``, else the cluster default): InvalidRequestError with Kafka's message
    for keys that cannot change at run time, security keys without the listener prefix, bad values
    (KAFKA-13609: Kafka answers INVALID_REQUEST, not INVALID_CONFIG) and per-broker keys at the cluster
    default level."""
    from pykbroker.protocol import errors

    keys = dynamic_broker_keys()
    try:
        overrides: dict[str, str | None] = dict(configs)  # its parameter type also admits deletions
        check_names_and_types(overrides, per_broker, keys)
        LogConfig.from_broker_config({k: v for k, v in configs.items() if k in log_default_keys()})
    except ValueError as e:  # ConfigException included
        raise errors.InvalidRequestError(str(e)) from None


class LogConfigSchema(ConfigSchema):
    def __init__(
        self, broker_defaults: LogConfig | None = None, group_defaults: group_config.GroupConfigDefaults | None = None
    ):
        """``broker_defaults``: ``LogConfig.from_broker_config(server properties)``; ``group_defaults``:
        ``GroupConfigDefaults.from_broker_config(server properties)`` (Kafka's defaults when None)."""
        self.broker_defaults = broker_defaults or LogConfig()
        self.group_defaults = group_defaults or group_config.GroupConfigDefaults.from_broker_config()

    def is_list(self, resource_type: int, name: str) -> bool:
        if resource_type == ConfigResourceType.BROKER:  # APPEND/SUBTRACT on list-typed broker keys (per listener too)
            broker_key = config_key(listener_base_name(name) or name)
            return broker_key is not None and broker_key.type == Type.LIST
        key = TOPIC_CONFIG_KEYS.get(name)
        return resource_type == ConfigResourceType.TOPIC and key is not None and key.type == Type.LIST

    def validate(self, resource_type: int, resource_name: str, configs: dict[str, str]) -> None:
        if resource_type == ConfigResourceType.TOPIC:
            LogConfig.validate(configs)
        elif resource_type == ConfigResourceType.GROUP:
            group_config.validate(configs, self.group_defaults)
        elif resource_type == ConfigResourceType.BROKER:
            validate_dynamic_broker_configs(configs, per_broker=resource_name != "")

    def unclean_leader_election_enabled(self, overrides: dict[str, str]) -> bool:
        return bool(self.broker_defaults.with_overrides(overrides).unclean_leader_election_enable)

    def min_insync_replicas(self, overrides: dict[str, str]) -> int:
        return int(self.broker_defaults.with_overrides(overrides).min_insync_replicas)

    def effective_topic_configs(self, overrides: dict[str, str]) -> list[dict]:
        config = self.broker_defaults.with_overrides(overrides)
        out = []
        for name, value in sorted(config.values().items()):
            source, _ = config.source_of(name)
            out.append(
                {
                    "name": name,
                    "value": LogConfig.value_to_string(value),
                    "read_only": False,
                    "config_source": _SOURCE_IDS.get(source, 0),
                    "is_sensitive": False,
                }
            )
        return out
