"""DynamicBrokerConfig: dynamic broker configs validated against the running broker and applied to it.

Mirrors ``kafka.server.DynamicBrokerConfig``. Every key of Kafka's ``AllDynamicConfigs`` may be set, per
broker (resource ``(BROKER, "<id>")``), as the cluster default (``(BROKER, "")``) or per listener
(``listener.name.<listener>.<key>``, listener lower-cased as Kafka's ``ListenerName.configPrefix``); what
pykbroker implements is applied at once, the rest is stored and described (as on a Kafka broker where the
feature, e.g. Kerberos or remote storage, is not enabled):

* **DynamicLogConfig**: the broker synonyms of topic configs (``log.retention.ms``, ``message.max.bytes``,
  ...) become the new topic defaults; every log without its own override of a key follows at once;
* **DynamicReplicationQuota**: ``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate`` set
  the ReplicaManager's replication throttles (KIP-73, :mod:`pykbroker.server.quotas.replication_quota_manager`).
* **DynamicThreadPool**: ``num.io.threads`` resizes the request handler pool, ``num.replica.fetchers`` the
  replica fetcher threads per source broker (partitions are spread again); ``num.recovery.threads.per.data.dir``
  the LogManager's threads per log dir closing logs at shutdown (loading ran at start-up);
  ``background.threads`` is validated and stored;
* **DataPlaneAcceptor**: ``num.network.threads`` (or ``listener.name.<l>.num.network.threads``) adds
  Processors to a live listener or removes the newest ones (their connections are closed, clients
  reconnect), as Kafka's ``addProcessors``/``removeProcessors``;
* **SslFactory** of each SSL/SASL_SSL listener: ``listener.name.<l>.ssl.keystore.*`` /
  ``ssl.truststore.*`` build a new SSLContext used by new connections; connections already made keep
  theirs (certificate rotation without a restart);
* **SocketServer** connection quotas: ``max.connections``, ``max.connections.per.ip`` (and overrides),
  ``max.connection.creation.rate`` (broker-wide and ``listener.name.<l>.max.connection.creation.rate``, KIP-612).

Validation (:meth:`validate`, Kafka's ``DynamicBrokerConfig.validate`` run by ``ConfigAdminManager`` on the
broker that receives the AlterConfigs/IncrementalAlterConfigs): the names-and-types rules
(:func:`~pykbroker.metadata.log_config_schema.validate_dynamic_broker_configs`), then the new full config
(static + dynamic) must be a valid KafkaConfig, then each reconfigurable whose keys change checks the new
values against the running broker: thread counts between half and double the current value, a new
keystore/truststore must load (and keep the certificate's subject and subject alternative names unless
``ssl.allow.dn.changes``/``ssl.allow.san.changes``), listeners cannot be added, removed or re-advertised.
Those failures come back as Kafka does: INVALID_REQUEST ``Invalid value
org.apache.kafka.common.config.ConfigException: <reason> for configuration Invalid dynamic configuration``.

Precedence, as in Kafka: this broker's own dynamic config, then the cluster default, then
``server.properties``, then the defaults; a listener key beats its base key. A key deleted dynamically
falls back the same way.

Threading: ``update`` runs on the metadata publisher's thread; ``validate`` on request handler threads.
``_lock`` serialises them, so a validation sees one applied state.
"""

from __future__ import annotations

import threading

from pykbroker.config.broker_configs.replication_configs import NUM_REPLICA_FETCHERS_CONFIG
from pykbroker.config.broker_configs.server_configs import NUM_IO_THREADS_CONFIG
from pykbroker.config.broker_configs.server_log_configs import (
    LOG_CLEANER_ENABLE_CONFIG,
    LOG_CLEANER_THREADS_CONFIG,
    NUM_RECOVERY_THREADS_PER_DATA_DIR_CONFIG,
)
from pykbroker.config.broker_configs.socket_server_configs import (
    MAX_CONNECTION_CREATION_RATE_CONFIG,
    MAX_CONNECTIONS_CONFIG,
    MAX_CONNECTIONS_PER_IP_CONFIG,
    MAX_CONNECTIONS_PER_IP_OVERRIDES_CONFIG,
    NUM_NETWORK_THREADS_CONFIG,
)
from pykbroker.config.config_def import ConfigException
from pykbroker.config.dynamic_broker_config_def import (
    DYNAMIC_SECURITY_KEYS,
    LISTENER_KEYS,
    LOG_CLEANER_KEYS,
    THREAD_POOL_KEYS,
    listener_key,
    parse,
)
from pykbroker.config.kafka_config import KafkaConfig
from pykbroker.log.log_config import LogConfig
from pykbroker.metadata.log_config_schema import log_default_keys, validate_dynamic_broker_configs
from pykbroker.protocol import errors
from pykbroker.protocol.config_resource import ConfigResourceType
from pykbroker.utils.logging import get_logger

_log = get_logger("DynamicBrokerConfig")
_TLS_PROTOCOLS = ("SSL", "SASL_SSL")


def _wrapped(reason: str) -> str:
    """The message Kafka returns for a reconfigurable's refusal (``new ConfigException("Invalid dynamic
    configuration", e)`` takes ``e`` as the value of a config named "Invalid dynamic configuration")."""
    return (
        f"Invalid value org.apache.kafka.common.config.ConfigException: {reason} "
        "for configuration Invalid dynamic configuration"
    )


class DynamicBrokerConfig:
    def __init__(
        self,
        node_id: int,
        config,
        log_manager=None,
        handler_pool=None,
        connection_quotas=None,
        socket_server=None,
        replica_fetcher_manager=None,
    ):
        """``config``: the broker's static KafkaConfig; the other arguments are the parts reconfigured
        (each optional: a missing part is not reconfigured)."""
        self.node_id = node_id
        self.config = config
        self.static = dict(config.values)
        self.static_originals = dict(config.originals)
        self.log_manager = log_manager
        self.handler_pool = handler_pool
        self.connection_quotas = connection_quotas
        self.socket_server = socket_server
        self.replica_fetcher_manager = replica_fetcher_manager
        self.default_configs: dict[str, str] = {}  # the cluster default, as last seen
        self.broker_configs: dict[str, str] = {}  # this broker's own, as last seen
        self.seen: dict[str, str] = {}  # the merged dynamic configs last seen in the metadata image
        self.current: dict[str, str] = {}  # the merged dynamic configs applied to the running broker
        self._lock = threading.RLock()

    # -- effective values ------------------------------------------------------------------------
    def dynamic_configs(self, image) -> dict[str, str]:
        configs = dict(image.configs.get((ConfigResourceType.BROKER, ""), {}))
        configs.update(image.configs.get((ConfigResourceType.BROKER, str(self.node_id)), {}))
        return configs

    def _value(self, dynamic: dict[str, str], key: str, listener: str | None = None):
        """The typed effective value of ``key`` (for ``listener``: its ``listener.name.<l>.<key>`` first)."""
        effective = {**self.static_originals, **dynamic}
        if listener is not None and listener_key(listener, key) in effective:
            return parse(key, effective[listener_key(listener, key)])
        if key in effective:
            return parse(key, effective[key])
        return self.static[key] if key in self.static else parse(key, None)

    def _ssl_originals(self, dynamic: dict[str, str], listener: str) -> dict:
        """The originals an SslFactory of ``listener`` is built from: the static ones with the dynamic
        keystore/truststore keys of that listener (the only SSL keys Kafka reconfigures)."""
        originals = dict(self.static_originals)
        for key in DYNAMIC_SECURITY_KEYS:
            name = listener_key(listener, key)
            if name in dynamic:
                originals[name] = dynamic[name]
        return originals

    def _ssl_signature(self, dynamic: dict[str, str], listener: str) -> tuple:
        return tuple(sorted((k, dynamic.get(listener_key(listener, k))) for k in DYNAMIC_SECURITY_KEYS))

    def _data_plane_listeners(self) -> list:
        if self.socket_server is None:
            return []
        return [a.endpoint for a in self.socket_server.data_plane_acceptors.values()]

    def _ssl_factory(self, listener: str):
        if self.socket_server is None:
            return None
        entry = self.socket_server.transport_factories.get(listener)
        return entry[0] if entry is not None and hasattr(entry[0], "reconfigure") else None

    # -- validation ------------------------------------------------------------------------------
    def validate(self, props: dict[str, str], per_broker: bool) -> None:
        """Kafka's ``DynamicBrokerConfig.validate``: ``props`` would become the complete dynamic configs of
        this broker (``per_broker``) or of the cluster default. Raises InvalidRequestError with Kafka's
        message. Nothing is applied here; the configs are applied once the metadata log carries them."""
        validate_dynamic_broker_configs(props, per_broker)
        with self._lock:
            new = {**self.default_configs, **props} if per_broker else {**props, **self.broker_configs}
            try:
                KafkaConfig({**self.static_originals, **new})
            except ValueError as e:  # ConfigException included
                raise errors.InvalidRequestError(str(e)) from None
            changed = {k for k in set(self.current) | set(new) if self.current.get(k) != new.get(k)}
            if not changed:
                return
            try:
                self._check_reconfigurables(self.current, new, changed)
            except (ConfigException, ValueError) as e:
                raise errors.InvalidRequestError(_wrapped(str(e))) from None

    def _check_reconfigurables(self, old: dict[str, str], new: dict[str, str], changed: set[str]) -> dict:
        """Each reconfigurable's ``validateReconfiguration`` for the change ``old`` -> ``new`` (merged
        dynamic configs); raises ConfigException with the reason. Returns the SSL contexts built
        ``{listener: (context, certificate)}`` for the listeners whose keystore or truststore changes."""
        if changed & THREAD_POOL_KEYS:  # DynamicThreadPool.validateReconfiguration
            for key in sorted(THREAD_POOL_KEYS):
                self._check_thread_count(key, self._value(old, key), self._value(new, key))
        if changed & LOG_CLEANER_KEYS and self._value(old, LOG_CLEANER_ENABLE_CONFIG):  # LogCleaner's
            current, threads = (
                self._value(old, LOG_CLEANER_THREADS_CONFIG),
                self._value(new, LOG_CLEANER_THREADS_CONFIG),
            )
            if threads < 1:
                raise ConfigException("Log cleaner threads should be at least 1")
            if threads < current // 2:
                raise ConfigException(
                    f"Log cleaner threads cannot be reduced to less than half the current value {current}"
                )
            if threads > current * 2:
                raise ConfigException(
                    f"Log cleaner threads cannot be increased to more than double the current value {current}"
                )
        for endpoint in self._data_plane_listeners():  # DataPlaneAcceptor.validateReconfiguration
            listener = endpoint.listener_name
            threads = self._value(new, NUM_NETWORK_THREADS_CONFIG, listener)
            current = self.socket_server.processor_count(listener)
            if threads != self._value(old, NUM_NETWORK_THREADS_CONFIG, listener):
                self._check_thread_count(NUM_NETWORK_THREADS_CONFIG, current, threads)
        for endpoint in self.config.listeners:  # ListenerConnectionQuota.validateReconfiguration
            listener = endpoint.listener_name
            keys = (MAX_CONNECTIONS_CONFIG, MAX_CONNECTION_CREATION_RATE_CONFIG)
            if any(self._value(old, k, listener) != self._value(new, k, listener) for k in keys):
                for key in keys:
                    if (value := self._value(new, key, listener)) <= 0:
                        raise ConfigException(f"Invalid {key} {value}")
        if changed & LISTENER_KEYS:  # DynamicListenerConfig.validateReconfiguration
            self._check_listeners(old, new)
        contexts = {}
        for endpoint in self._data_plane_listeners():  # SslFactory.validateReconfiguration
            listener = endpoint.listener_name
            factory = self._ssl_factory(listener)
            if factory is None or self._ssl_signature(old, listener) == self._ssl_signature(new, listener):
                continue
            contexts[listener] = self._new_ssl_context(factory, self._ssl_originals(new, listener), listener)
        return contexts

    @staticmethod
    def _check_thread_count(key: str, current: int, value: int) -> None:
        if value == current:
            return
        message = f"Dynamic thread count update validation failed for {key}={value}"
        if value <= 0:
            raise ConfigException(f"{message}, value should be at least 1")
        if value < current // 2:
            raise ConfigException(f"{message}, value should be at least half the current value {current}")
        if value > current * 2:
            raise ConfigException(f"{message}, value should not be greater than double the current value {current}")

    def _check_listeners(self, old: dict[str, str], new: dict[str, str]) -> None:
        """pykbroker runs in KRaft mode, where Kafka refuses to change the advertised listeners; it cannot add
        or remove listeners at run time either, nor change a listener's security protocol."""
        old_config = KafkaConfig({**self.static_originals, **old})
        new_config = KafkaConfig({**self.static_originals, **new})
        old_listeners = {e.listener_name: e for e in old_config.listeners}
        new_listeners = {e.listener_name: e for e in new_config.listeners}
        for name in sorted(set(old_listeners) & set(new_listeners)):
            if old_listeners[name].security_protocol != new_listeners[name].security_protocol:
                raise ConfigException(f"Security protocol cannot be updated for existing listener {name}")
        if [str(e) for e in new_config.advertised_listeners] != [str(e) for e in old_config.advertised_listeners]:
            raise ConfigException("Advertised listeners cannot be altered when using a Raft-based metadata quorum.")
        if [str(e) for e in new_config.listeners] != [str(e) for e in old_config.listeners]:
            raise ConfigException("Listeners cannot be added, removed or moved at run time by pykbroker")

    def _new_ssl_context(self, factory, originals: dict, listener: str):
        """Kafka's ``SslFactory.createNewSslEngineFactory``: the new SSLContext must build (the keystore and
        truststore load) and the new certificate must stay compatible with the old one."""
        from pykbroker.security.ssl_factory import check_compatible_keystores, keystore_certificate, server_context

        try:
            context = server_context(originals, listener)
            certificate = keystore_certificate(originals, listener)
            if factory.certificate is not None and certificate is None:
                raise ConfigException(
                    "Cannot remove the SSL keystore from an existing listener for which a keystore was configured."
                )
            allow = {
                key: str(originals.get(listener_key(listener, key), originals.get(key, "false"))).lower() == "true"
                for key in ("ssl.allow.dn.changes", "ssl.allow.san.changes")
            }
            check_compatible_keystores(
                certificate, factory.certificate, allow["ssl.allow.dn.changes"], allow["ssl.allow.san.changes"]
            )
        except ConfigException as e:
            raise ConfigException(f"Validation of dynamic config update of SSLFactory failed: {e}") from None
        return context, certificate

    # -- application -----------------------------------------------------------------------------
    def update(self, image) -> None:
        """Apply the dynamic configs of ``image`` if they changed (Kafka's ``updateBrokerConfig`` /
        ``updateDefaultConfig``). A change that the running broker refuses (validated elsewhere against
        another state) is logged and not applied, as Kafka's ``updateCurrentConfig``."""
        with self._lock:
            self.default_configs = dict(image.configs.get((ConfigResourceType.BROKER, ""), {}))
            self.broker_configs = dict(image.configs.get((ConfigResourceType.BROKER, str(self.node_id)), {}))
            dynamic = self.dynamic_configs(image)
            if dynamic == self.seen:
                return
            self.seen = dynamic
            previous = self.current
            changed = {k for k in set(previous) | set(dynamic) if previous.get(k) != dynamic.get(k)}
            if not changed:
                return
            try:
                contexts = self._check_reconfigurables(previous, dynamic, changed)
            except (ConfigException, ValueError) as e:
                _log.error("Failed to update broker configuration", changed=sorted(changed), error=str(e))
                return
            self.current = dynamic
            _log.info("Reconfiguring the broker from dynamic configs", changed=sorted(changed))
            self._apply(previous, dynamic, changed, contexts)

    def _update_replication_quotas(self, dynamic: dict[str, str]) -> None:
        """Kafka's ``DynamicReplicationQuota``: the replication throttle rates (KIP-73) of the ReplicaManager."""
        rm = getattr(self.replica_fetcher_manager, "replica_manager", None)
        if rm is None or not hasattr(rm, "leader_quota"):
            return
        rm.leader_quota.update_quota(self._value(dynamic, "leader.replication.throttled.rate"))
        rm.follower_quota.update_quota(self._value(dynamic, "follower.replication.throttled.rate"))

    def _apply(self, old: dict[str, str], new: dict[str, str], changed: set[str], contexts: dict) -> None:
        effective = {**self.static, **new}
        if self.log_manager is not None and changed & log_default_keys():
            try:
                self.log_manager.reconfigure_defaults(
                    LogConfig.from_broker_config({k: v for k, v in effective.items() if v is not None})
                )
            except Exception as e:  # noqa: BLE001 - a bad stored value must not stop the publisher
                _log.error("Could not apply the dynamic log configs", error=str(e))
        if NUM_IO_THREADS_CONFIG in changed and self.handler_pool is not None:
            threads = self._value(new, NUM_IO_THREADS_CONFIG)
            if threads != len(self.handler_pool.handlers):
                self.handler_pool.resize(threads)
        if NUM_RECOVERY_THREADS_PER_DATA_DIR_CONFIG in changed and self.log_manager is not None:
            threads = self._value(new, NUM_RECOVERY_THREADS_PER_DATA_DIR_CONFIG)
            self.log_manager.num_recovery_threads_per_data_dir = max(1, threads)  # Kafka's resizeRecoveryThreadPool
        if NUM_REPLICA_FETCHERS_CONFIG in changed and self.replica_fetcher_manager is not None:
            self.replica_fetcher_manager.resize_thread_pool(self._value(new, NUM_REPLICA_FETCHERS_CONFIG))
        if changed & {"leader.replication.throttled.rate", "follower.replication.throttled.rate"}:
            self._update_replication_quotas(new)
        if self.connection_quotas is not None and changed & {
            MAX_CONNECTIONS_CONFIG,
            MAX_CONNECTIONS_PER_IP_CONFIG,
            MAX_CONNECTIONS_PER_IP_OVERRIDES_CONFIG,
        }:
            overrides = KafkaConfig({**self.static_originals, **new}).max_connections_per_ip_overrides
            self.connection_quotas.update(
                max_connections_per_ip=self._value(new, MAX_CONNECTIONS_PER_IP_CONFIG),
                overrides=overrides,
                max_connections=self._value(new, MAX_CONNECTIONS_CONFIG),
            )
        rate_key = MAX_CONNECTION_CREATION_RATE_CONFIG
        if self.connection_quotas is not None and any(k == rate_key or k.endswith("." + rate_key) for k in changed):
            listeners = [a.endpoint.listener_name for a in self.socket_server.acceptors] if self.socket_server else []
            self.connection_quotas.update_connection_creation_rates(
                self._value(new, rate_key), {listener: self._value(new, rate_key, listener) for listener in listeners}
            )
        for endpoint in self._data_plane_listeners():
            listener = endpoint.listener_name
            threads = self._value(new, NUM_NETWORK_THREADS_CONFIG, listener)
            if threads != self.socket_server.processor_count(listener):
                self.socket_server.resize_processors(listener, threads)
        for listener, (context, certificate) in contexts.items():
            self._ssl_factory(listener).reconfigure(context, certificate)
            _log.info(f"Created new SSL context of listener {listener} from its updated keystore/truststore")
