"""DynamicBrokerConfig: dynamic broker configs from the metadata log applied to the running broker.

Mirrors ``kafka.server.DynamicBrokerConfig`` for the reconfigurations pykbroker has (the keys the
controller accepts: :func:`pykbroker.metadata.log_config_schema.dynamic_broker_keys`):

* **DynamicLogConfig**: the broker synonyms of topic configs (``log.retention.ms``, ``log.segment.bytes``,
  ``message.max.bytes``, ``log.cleanup.policy``, ...) become the new topic defaults; every log without its
  own override of a key follows at once (``LogManager.reconfigure_defaults``);
* **DynamicThreadPool**: ``num.io.threads`` resizes the data-plane request handler pool (Kafka's bounds:
  at least half and at most twice the current size, else the update is logged and skipped);
* **DynamicConnectionQuota**: ``max.connections`` and ``max.connections.per.ip``.

Precedence, as in Kafka: this broker's own dynamic config (resource ``(BROKER, "<id>")``), then the cluster
default (``(BROKER, "")``), then ``server.properties``, then the defaults. A key deleted dynamically falls
back the same way.

Threading: ``update`` runs on the metadata publisher's thread.
"""

from __future__ import annotations

from pykbroker.log.log_config import LogConfig
from pykbroker.metadata.log_config_schema import DYNAMIC_BROKER_RUNTIME_KEYS
from pykbroker.metadata.records import RESOURCE_BROKER
from pykbroker.utils.logging import get_logger

_log = get_logger("DynamicBrokerConfig")


class DynamicBrokerConfig:
    def __init__(self, node_id: int, config, log_manager=None, handler_pool=None, connection_quotas=None):
        self.node_id = node_id
        self.static = dict(config.values)
        self.log_manager = log_manager
        self.handler_pool = handler_pool
        self.connection_quotas = connection_quotas
        self.current: dict[str, str] = {}

    def dynamic_configs(self, image) -> dict[str, str]:
        configs = dict(image.configs.get((RESOURCE_BROKER, ""), {}))
        configs.update(image.configs.get((RESOURCE_BROKER, str(self.node_id)), {}))
        return configs

    def update(self, image) -> None:
        """Apply the dynamic configs of ``image`` if they changed."""
        dynamic = self.dynamic_configs(image)
        if dynamic == self.current:
            return
        previous, self.current = self.current, dynamic
        effective = {**self.static, **dynamic}
        changed = {k for k in set(previous) | set(dynamic) if previous.get(k) != dynamic.get(k)}
        _log.info("Reconfiguring the broker from dynamic configs", changed=sorted(changed))
        if self.log_manager is not None and changed - DYNAMIC_BROKER_RUNTIME_KEYS:
            try:
                self.log_manager.reconfigure_defaults(
                    LogConfig.from_broker_config({k: v for k, v in effective.items() if v is not None})
                )
            except Exception as e:  # noqa: BLE001 - a bad stored value must not stop the publisher
                _log.error("Could not apply the dynamic log configs", error=str(e))
        if "num.io.threads" in changed and self.handler_pool is not None:
            self._resize(int(effective["num.io.threads"]))
        if self.connection_quotas is not None and changed & {"max.connections", "max.connections.per.ip"}:
            self.connection_quotas.update(
                max_connections_per_ip=int(effective["max.connections.per.ip"]),
                max_connections=int(effective["max.connections"]),
            )

    def _resize(self, threads: int) -> None:
        current = len(self.handler_pool.handlers)
        if threads < max(1, current // 2) or threads > current * 2:
            _log.error(
                f"Invalid value {threads} for num.io.threads: value should be at least half the current value "
                f"{current} and at most twice it; the update is skipped"
            )
            return
        self.handler_pool.resize(threads)
