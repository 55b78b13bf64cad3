"""Which broker configs may change at run time, and their names-and-types rules (Kafka's
``DynamicBrokerConfig`` object, ``DynamicConfig.Broker``).

The reconfigurable set is Kafka's ``DynamicBrokerConfig.AllDynamicConfigs`` (:data:`RUNTIME_KEYS` here,
plus the broker synonyms of the topic configs, ``DynamicLogConfig.ReconfigurableConfigs``, which the log
layer supplies to :func:`check_names_and_types`): the SSL keystore/truststore keys, the log cleaner's,
the thread pools', ``metric.reporters``, the listener keys (``DynamicListenerConfig``: listeners, SSL, SASL,
connection limits, ``num.network.threads``), the socket server's connection quotas, the producer-state
keys and the remote-log keys; ``DynamicConfig.Broker`` adds the replication quotas
(:data:`QUOTA_KEYS`).

Rules, in Kafka's order (``DynamicBrokerConfig.validateConfigs``), each a :class:`ConfigException` whose
message the broker returns with INVALID_REQUEST:

1. a key Kafka knows but cannot change at run time: ``Cannot update these configs dynamically: Set(...)``;
2. a security key without the listener prefix: ``These security configs can be dynamically updated only
   per-listener using the listener prefix: Set(...)``;
3. a value that does not parse: ``Invalid value <v> for configuration <base key>: <reason>`` (a listener
   key ``listener.name.<listener>.<key>`` is checked as ``<key>``; keys Kafka does not know are custom
   configs, accepted as they are);
4. at the cluster-default level (resource name ``""``), a per-broker key: ``Cannot update these configs at
   default cluster level, broker id must be specified: Set(...)``. Per-broker keys are the security and
   listener keys except ``max.connections``, ``max.connection.creation.rate`` and ``num.network.threads``,
   and every listener key whose base key is not one of those three.

Immutable module state; thread-safe.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pykbroker.config.broker_configs.replication_configs import NUM_REPLICA_FETCHERS_CONFIG
from pykbroker.config.broker_configs.security_configs import (
    SASL_ENABLED_MECHANISMS_CONFIG,
    SASL_MECHANISM_INTER_BROKER_PROTOCOL_CONFIG,
)
from pykbroker.config.broker_configs.server_configs import (
    BACKGROUND_THREADS_CONFIG,
    MESSAGE_MAX_BYTES_CONFIG,
    METRIC_REPORTERS_CONFIG,
    NUM_IO_THREADS_CONFIG,
)
from pykbroker.config.broker_configs.server_log_configs import (
    LOG_CLEANER_BACKOFF_MS_CONFIG,
    LOG_CLEANER_DEDUPE_BUFFER_SIZE_CONFIG,
    LOG_CLEANER_THREADS_CONFIG,
    NUM_RECOVERY_THREADS_PER_DATA_DIR_CONFIG,
)
from pykbroker.config.broker_configs.socket_server_configs import (
    ADVERTISED_LISTENERS_CONFIG,
    LISTENER_SECURITY_PROTOCOL_MAP_CONFIG,
    LISTENERS_CONFIG,
    MAX_CONNECTION_CREATION_RATE_CONFIG,
    MAX_CONNECTIONS_CONFIG,
    MAX_CONNECTIONS_PER_IP_CONFIG,
    MAX_CONNECTIONS_PER_IP_OVERRIDES_CONFIG,
    NUM_NETWORK_THREADS_CONFIG,
)
from pykbroker.config.broker_configs.transaction_configs import (
    PRODUCER_ID_EXPIRATION_MS_CONFIG,
    TRANSACTION_PARTITION_VERIFICATION_ENABLE_CONFIG,
)
from pykbroker.config.config_def import ConfigDef, ConfigException, ConfigKey, Type, at_least, in_values
from pykbroker.config.kafka_config_def import BROKER_CONFIG_DEF

LONG_MAX = 2**63 - 1
M, L = "medium", "low"

#: SslConfigs.RECONFIGURABLE_CONFIGS (DynamicBrokerConfig.DynamicSecurityConfigs): per listener only
DYNAMIC_SECURITY_KEYS = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.certificates",
    }
)
#: LogCleaner.ReconfigurableConfigs
LOG_CLEANER_KEYS = frozenset(
    {
        LOG_CLEANER_THREADS_CONFIG,
        LOG_CLEANER_DEDUPE_BUFFER_SIZE_CONFIG,
        "log.cleaner.dedupe.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        MESSAGE_MAX_BYTES_CONFIG,
        "log.cleaner.io.max.bytes.per.second",
        LOG_CLEANER_BACKOFF_MS_CONFIG,
    }
)
#: DynamicThreadPool.ReconfigurableConfigs
THREAD_POOL_KEYS = frozenset(
    {
        NUM_IO_THREADS_CONFIG,
        NUM_REPLICA_FETCHERS_CONFIG,
        NUM_RECOVERY_THREADS_PER_DATA_DIR_CONFIG,
        BACKGROUND_THREADS_CONFIG,
    }
)
#: DynamicListenerConfig.ReconfigurableConfigs
LISTENER_KEYS = frozenset(
    {
        ADVERTISED_LISTENERS_CONFIG,
        LISTENERS_CONFIG,
        LISTENER_SECURITY_PROTOCOL_MAP_CONFIG,
        "principal.builder.class",
        "ssl.protocol",
        "ssl.provider",
        "ssl.cipher.suites",
        "ssl.enabled.protocols",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.endpoint.identification.algorithm",
        "ssl.secure.random.implementation",
        "ssl.client.auth",
        "ssl.engine.factory.class",
        SASL_MECHANISM_INTER_BROKER_PROTOCOL_CONFIG,
        "sasl.jaas.config",
        SASL_ENABLED_MECHANISMS_CONFIG,
        "sasl.kerberos.service.name",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.buffer.seconds",
        MAX_CONNECTIONS_CONFIG,
        MAX_CONNECTION_CREATION_RATE_CONFIG,
        NUM_NETWORK_THREADS_CONFIG,
    }
)
#: SocketServer.ReconfigurableConfigs
SOCKET_SERVER_KEYS = frozenset(
    {
        MAX_CONNECTIONS_PER_IP_CONFIG,
        MAX_CONNECTIONS_PER_IP_OVERRIDES_CONFIG,
        MAX_CONNECTIONS_CONFIG,
        MAX_CONNECTION_CREATION_RATE_CONFIG,
    }
)
#: DynamicBrokerConfig.DynamicProducerStateManagerConfig
PRODUCER_STATE_KEYS = frozenset({PRODUCER_ID_EXPIRATION_MS_CONFIG, TRANSACTION_PARTITION_VERIFICATION_ENABLE_CONFIG})
#: DynamicRemoteLogConfig.ReconfigurableConfigs
REMOTE_LOG_KEYS = frozenset(
    {
        "remote.log.index.file.cache.total.size.bytes",
        "remote.fetch.max.wait.ms",
        "remote.log.manager.copy.max.bytes.per.second",
        "remote.log.manager.fetch.max.bytes.per.second",
        "remote.list.offsets.request.timeout.ms",
    }
)
#: QuotaConfig.brokerQuotaConfigs: dynamic-only broker keys (DynamicConfig.Broker)
QUOTA_KEYS = frozenset(
    {
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    }
)
#: AllDynamicConfigs without DynamicLogConfig's topic-default synonyms
RUNTIME_KEYS = (
    DYNAMIC_SECURITY_KEYS
    | LOG_CLEANER_KEYS
    | THREAD_POOL_KEYS
    | frozenset({METRIC_REPORTERS_CONFIG})
    | LISTENER_KEYS
    | SOCKET_SERVER_KEYS
    | PRODUCER_STATE_KEYS
    | REMOTE_LOG_KEYS
)
CLUSTER_LEVEL_LISTENER_KEYS = frozenset(
    {MAX_CONNECTIONS_CONFIG, MAX_CONNECTION_CREATION_RATE_CONFIG, NUM_NETWORK_THREADS_CONFIG}
)
PER_BROKER_KEYS = (DYNAMIC_SECURITY_KEYS | LISTENER_KEYS) - CLUSTER_LEVEL_LISTENER_KEYS
#: Kafka broker keys pykbroker's BROKER_CONFIG_DEF does not list, which Kafka refuses to change at run time
KNOWN_STATIC_KEYS = frozenset(
    {
        "ssl.principal.mapping.rules",
        "ssl.allow.dn.changes",
        "ssl.allow.san.changes",
        "sasl.login.class",
        "security.providers",
        "zookeeper.connect",
    }
)

_LISTENER_CONFIG = re.compile(r"listener\.name\.[^.]*\.(.*)")

#: Types and defaults (Kafka's) of the reconfigurable keys that BROKER_CONFIG_DEF does not define.
DYNAMIC_ONLY_CONFIG_DEF = (
    ConfigDef()
    .define("ssl.protocol", Type.STRING, "TLSv1.3", None, M, "The SSL protocol used to generate the SSLContext.")
    .define("ssl.provider", Type.STRING, None, None, M, "The security provider of the SSL connections.")
    .define("ssl.cipher.suites", Type.LIST, None, None, L, "The cipher suites (OpenSSL names in pykbroker).")
    .define("ssl.enabled.protocols", Type.LIST, "TLSv1.2,TLSv1.3", None, M, "The protocols enabled for SSL.")
    .define("ssl.keystore.type", Type.STRING, "JKS", None, M, "The key store file format: PEM or PKCS12 (JKS refused).")
    .define("ssl.keystore.location", Type.STRING, None, None, M, "The key store file (key and certificate chain).")
    .define("ssl.keystore.password", Type.PASSWORD, None, None, M, "The store password of the key store file (PKCS12).")
    .define(
        "ssl.key.password",
        Type.PASSWORD,
        None,
        None,
        M,
        "The password of the private key (PEM; PKCS12 without a store password).",
    )
    .define("ssl.keystore.key", Type.PASSWORD, None, None, M, "The private key in PEM, inline.")
    .define("ssl.keystore.certificate.chain", Type.PASSWORD, None, None, M, "The certificate chain in PEM, inline.")
    .define(
        "ssl.truststore.type", Type.STRING, "JKS", None, M, "The trust store file format: PEM or PKCS12 (JKS refused)."
    )
    .define("ssl.truststore.location", Type.STRING, None, None, M, "The trust store file (CA certificates).")
    .define("ssl.truststore.password", Type.PASSWORD, None, None, M, "The password of the trust store file (PKCS12).")
    .define("ssl.truststore.certificates", Type.PASSWORD, None, None, M, "Trusted certificates in PEM, inline.")
    .define("ssl.keymanager.algorithm", Type.STRING, "SunX509", None, L, "The key manager factory algorithm.")
    .define("ssl.trustmanager.algorithm", Type.STRING, "PKIX", None, L, "The trust manager factory algorithm.")
    .define("ssl.endpoint.identification.algorithm", Type.STRING, "https", None, L, "Server host name verification.")
    .define("ssl.secure.random.implementation", Type.STRING, None, None, L, "The SecureRandom PRNG.")
    .define("ssl.engine.factory.class", Type.CLASS, None, None, L, "A custom SslEngineFactory class.")
    .define(
        "ssl.client.auth",
        Type.STRING,
        "none",
        in_values("required", "requested", "none"),
        M,
        "Whether the broker requires client certificates: required, requested or none.",
    )
    .define(
        "principal.builder.class",
        Type.CLASS,
        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
        None,
        M,
        "The KafkaPrincipalBuilder class.",
    )
    .define("sasl.jaas.config", Type.PASSWORD, None, None, M, "JAAS login context parameters.")
    .define("sasl.kerberos.service.name", Type.STRING, None, None, M, "The Kerberos principal name Kafka runs as.")
    .define("sasl.kerberos.kinit.cmd", Type.STRING, "/usr/bin/kinit", None, L, "The Kerberos kinit command path.")
    .define("sasl.kerberos.ticket.renew.window.factor", Type.DOUBLE, 0.8, None, L, "Ticket renewal point.")
    .define("sasl.kerberos.ticket.renew.jitter", Type.DOUBLE, 0.05, None, L, "Random jitter of the renewal.")
    .define("sasl.kerberos.min.time.before.relogin", Type.LONG, 60000, None, L, "Login thread sleep (ms).")
    .define("sasl.kerberos.principal.to.local.rules", Type.LIST, "DEFAULT", None, M, "Principal mapping rules.")
    .define("sasl.login.refresh.window.factor", Type.DOUBLE, 0.8, None, L, "Credential refresh point.")
    .define("sasl.login.refresh.window.jitter", Type.DOUBLE, 0.05, None, L, "Random jitter of the refresh.")
    .define("sasl.login.refresh.min.period.seconds", Type.SHORT, 60, None, L, "Minimum wait before a refresh (s).")
    .define("sasl.login.refresh.buffer.seconds", Type.SHORT, 300, None, L, "Buffer before expiry at refresh (s).")
    .define("log.cleaner.dedupe.buffer.load.factor", Type.DOUBLE, 0.9, None, M, "Dedupe buffer load factor.")
    .define("log.cleaner.io.buffer.size", Type.INT, 524288, at_least(0), M, "Cleaner I/O buffers in bytes.")
    .define("log.cleaner.io.max.bytes.per.second", Type.DOUBLE, 1.7976931348623157e308, None, M, "Cleaner I/O limit.")
    .define("remote.log.index.file.cache.total.size.bytes", Type.LONG, 1073741824, at_least(1), L, "Index cache bytes.")
    .define("remote.fetch.max.wait.ms", Type.INT, 500, at_least(1), M, "Remote fetch wait (ms).")
    .define("remote.log.manager.copy.max.bytes.per.second", Type.LONG, LONG_MAX, at_least(1), M, "Copy quota.")
    .define("remote.log.manager.fetch.max.bytes.per.second", Type.LONG, LONG_MAX, at_least(1), M, "Fetch quota.")
    .define("remote.list.offsets.request.timeout.ms", Type.LONG, 30000, at_least(1), M, "Remote ListOffsets (ms).")
    .define("leader.replication.throttled.rate", Type.LONG, LONG_MAX, at_least(0), M, "Leader throttle (B/s).")
    .define("follower.replication.throttled.rate", Type.LONG, LONG_MAX, at_least(0), M, "Follower throttle (B/s).")
    .define(
        "replica.alter.log.dirs.io.max.bytes.per.second", Type.LONG, LONG_MAX, at_least(0), M, "Log dir move (B/s)."
    )
)


def config_key(name: str) -> ConfigKey | None:
    """The definition of broker key ``name`` (BROKER_CONFIG_DEF, else the dynamic-only keys), or None."""
    return BROKER_CONFIG_DEF.keys.get(name) or DYNAMIC_ONLY_CONFIG_DEF.keys.get(name)


def listener_base_name(name: str) -> str | None:
    """``listener.name.<listener>.<key>`` -> ``<key>`` (Kafka's ListenerConfigRegex); None otherwise."""
    m = _LISTENER_CONFIG.fullmatch(name)
    return m.group(1) if m else None


def listener_key(listener: str, key: str) -> str:
    """The per-listener name of ``key``: ``listener.name.<listener lower-cased>.<key>`` (ListenerName.configPrefix)."""
    return f"listener.name.{listener.lower()}.{key}"


def is_password(name: str) -> bool:
    """Kafka's ``isPasswordConfig``: a dynamic PASSWORD key, per listener or not (sensitive in DescribeConfigs)."""
    base = listener_base_name(name) or name
    key = config_key(base)
    return key is not None and key.type == Type.PASSWORD


def _set(names: Iterable[str]) -> str:
    return f"Set({', '.join(sorted(names))})"


def check_names_and_types(configs: dict[str, str | None], per_broker: bool, dynamic_keys: frozenset[str]) -> None:
    """Kafka's ``DynamicBrokerConfig.validateConfigs`` over one resource's complete dynamic overrides
    ``configs`` (``per_broker``: resource ``<id>``, else the cluster default ``""``); ``dynamic_keys`` is
    every reconfigurable key (:data:`RUNTIME_KEYS` and the topic-default synonyms). Raises ConfigException
    (see the module docstring)."""
    names = set(configs)
    known = set(BROKER_CONFIG_DEF.keys) | KNOWN_STATIC_KEYS
    not_dynamic = names & (known - dynamic_keys)
    if not_dynamic:
        raise ConfigException(f"Cannot update these configs dynamically: {_set(not_dynamic)}")
    unprefixed = names & DYNAMIC_SECURITY_KEYS
    if unprefixed:
        raise ConfigException(
            "These security configs can be dynamically updated only per-listener using the listener prefix: "
            + _set(unprefixed)
        )
    for name, value in sorted(configs.items()):
        base = listener_base_name(name) or name
        if value is not None and (base in dynamic_keys or base in QUOTA_KEYS) and config_key(base) is not None:
            parse(base, value)
    if not per_broker:
        at_broker = names & PER_BROKER_KEYS
        at_broker |= {n for n in names if (listener_base_name(n) or "") not in ("", *CLUSTER_LEVEL_LISTENER_KEYS)}
        if at_broker:
            raise ConfigException(
                f"Cannot update these configs at default cluster level, broker id must be specified: {_set(at_broker)}"
            )


def parse(name: str, value: object) -> object:
    """The typed value of broker key ``name`` (a listener key by its base key) from ``value`` (a string,
    an already typed value, or None for the key's default). KeyError for a key without definition."""
    base = listener_base_name(name) or name
    key = config_key(base)
    if key is None:
        raise KeyError(name)
    if value is None:
        return key.default if key.has_default else None
    definition = BROKER_CONFIG_DEF if base in BROKER_CONFIG_DEF.keys else DYNAMIC_ONLY_CONFIG_DEF
    return definition.parse_value(base, value)
