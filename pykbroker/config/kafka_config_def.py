"""The broker's configuration keys: Kafka's names, types, defaults and validators.

``BROKER_CONFIG_DEF`` merges one ConfigDef per area, as Kafka's ``AbstractKafkaConfig.CONFIG_DEF`` merges
``ServerConfigs``, ``KRaftConfigs``, ``SocketServerConfigs``, ``ReplicationConfigs``, ``GroupCoordinatorConfig``,
``ServerLogConfigs``, ``TransactionLogConfig``, ``QuotaConfig``, ``BrokerSecurityConfigs`` and
``ShareCoordinatorConfig`` (defaults as in Kafka 4.0); each area is a module of
:mod:`pykbroker.config.broker_configs`, where a key is declared once. Every key has a one-sentence doc with its
unit; keys that pykbroker accepts for compatibility but does not act on yet say so in their doc.
"""

from __future__ import annotations

from pykbroker.config.broker_configs.group_coordinator_configs import GROUP_COORDINATOR_CONFIG_DEF
from pykbroker.config.broker_configs.kraft_configs import KRAFT_CONFIG_DEF
from pykbroker.config.broker_configs.quota_configs import QUOTA_CONFIG_DEF
from pykbroker.config.broker_configs.replication_configs import REPLICATION_CONFIG_DEF
from pykbroker.config.broker_configs.security_configs import SECURITY_CONFIG_DEF
from pykbroker.config.broker_configs.server_configs import SERVER_CONFIG_DEF
from pykbroker.config.broker_configs.server_log_configs import SERVER_LOG_CONFIG_DEF
from pykbroker.config.broker_configs.share_coordinator_configs import SHARE_COORDINATOR_CONFIG_DEF
from pykbroker.config.broker_configs.share_group_configs import SHARE_GROUP_CONFIG_DEF
from pykbroker.config.broker_configs.socket_server_configs import SOCKET_SERVER_CONFIG_DEF
from pykbroker.config.broker_configs.transaction_configs import TRANSACTION_CONFIG_DEF
from pykbroker.config.config_def import ConfigDef

BROKER_CONFIG_DEF = ConfigDef.merge(
    SERVER_CONFIG_DEF,
    KRAFT_CONFIG_DEF,
    SOCKET_SERVER_CONFIG_DEF,
    REPLICATION_CONFIG_DEF,
    GROUP_COORDINATOR_CONFIG_DEF,
    SHARE_GROUP_CONFIG_DEF,
    SERVER_LOG_CONFIG_DEF,
    TRANSACTION_CONFIG_DEF,
    QUOTA_CONFIG_DEF,
    SECURITY_CONFIG_DEF,
    SHARE_COORDINATOR_CONFIG_DEF,
)

# Prefixes under which per-listener or per-mechanism overrides are legal (not "unknown").
KNOWN_PREFIXES = ("listener.name.", "ssl.", "sasl.", "log4j.", "metrics.", "confluent.", "zookeeper.")
