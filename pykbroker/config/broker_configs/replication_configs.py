"""Replication keys: Kafka's ``ReplicationConfigs`` (replica fetchers, ISR lag, unclean election,
leader rebalancing, purgatories, the inter-broker listener).

Part of the broker's ConfigDef (:data:`pykbroker.config.kafka_config_def.BROKER_CONFIG_DEF`, the merge of
these per-area ConfigDefs, as Kafka's ``AbstractKafkaConfig.CONFIG_DEF``). Every key has a one-sentence doc with its
unit; keys that pykbroker accepts for compatibility but does not act on yet say so in their doc.
"""

from __future__ import annotations

from pykbroker.config.broker_configs.common import SECURITY_PROTOCOLS, H, M
from pykbroker.config.config_def import ConfigDef, ConfigException, Type, at_least, in_values
from pykbroker.config.topic_config import UNCLEAN_LEADER_ELECTION_ENABLE_CONFIG

# The key names (Kafka's ``*_CONFIG`` constants), each named after its key (``log.retention.ms`` ->
# ``LOG_RETENTION_MS_CONFIG``): the one spelling of each key, imported by the code that reads it.
FETCH_PURGATORY_PURGE_INTERVAL_REQUESTS_CONFIG = "fetch.purgatory.purge.interval.requests"
PRODUCER_PURGATORY_PURGE_INTERVAL_REQUESTS_CONFIG = "producer.purgatory.purge.interval.requests"
DEFAULT_REPLICATION_FACTOR_CONFIG = "default.replication.factor"
REPLICA_LAG_TIME_MAX_MS_CONFIG = "replica.lag.time.max.ms"
NUM_REPLICA_FETCHERS_CONFIG = "num.replica.fetchers"
REPLICA_FETCH_MAX_BYTES_CONFIG = "replica.fetch.max.bytes"
REPLICA_FETCH_RESPONSE_MAX_BYTES_CONFIG = "replica.fetch.response.max.bytes"
REPLICA_FETCH_WAIT_MAX_MS_CONFIG = "replica.fetch.wait.max.ms"
REPLICA_FETCH_MIN_BYTES_CONFIG = "replica.fetch.min.bytes"
REPLICA_FETCH_BACKOFF_MS_CONFIG = "replica.fetch.backoff.ms"
REPLICA_SOCKET_TIMEOUT_MS_CONFIG = "replica.socket.timeout.ms"
REPLICA_SOCKET_RECEIVE_BUFFER_BYTES_CONFIG = "replica.socket.receive.buffer.bytes"
AUTO_LEADER_REBALANCE_ENABLE_CONFIG = "auto.leader.rebalance.enable"
LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS_CONFIG = "leader.imbalance.check.interval.seconds"
LEADER_IMBALANCE_PER_BROKER_PERCENTAGE_CONFIG = "leader.imbalance.per.broker.percentage"
REPLICA_HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS_CONFIG = "replica.high.watermark.checkpoint.interval.ms"
INTER_BROKER_LISTENER_NAME_CONFIG = "inter.broker.listener.name"
SECURITY_INTER_BROKER_PROTOCOL_CONFIG = "security.inter.broker.protocol"
REPLICA_SELECTOR_CLASS_CONFIG = "replica.selector.class"

# replica.selector.class values pykbroker implements (pykbroker.server.replica_selector.REPLICA_SELECTORS).
KNOWN_REPLICA_SELECTORS = frozenset({"org.apache.kafka.common.replica.RackAwareReplicaSelector"})


def _known_replica_selector(key: str, value: str | None) -> None:
    # Kafka fails to load an unknown class when the broker starts; here the config refuses it.
    if value and value.strip() not in KNOWN_REPLICA_SELECTORS:
        raise ConfigException(key, value, f"Class {value} cannot be found")


_known_replica_selector.__doc__ = "[org.apache.kafka.common.replica.RackAwareReplicaSelector]"

REPLICATION_CONFIG_DEF = (
    ConfigDef()
    .define(
        FETCH_PURGATORY_PURGE_INTERVAL_REQUESTS_CONFIG,
        Type.INT,
        1000,
        None,
        M,
        "Number of fetch requests added to the fetch purgatory between two purges of its completed operations.",
    )
    .define(
        PRODUCER_PURGATORY_PURGE_INTERVAL_REQUESTS_CONFIG,
        Type.INT,
        1000,
        None,
        M,
        "Number of produce requests added to the producer purgatory between two purges of its completed operations.",
    )
    .define(
        DEFAULT_REPLICATION_FACTOR_CONFIG,
        Type.INT,
        1,
        None,
        M,
        "Default replication factor of automatically created topics.",
    )
    .define(
        REPLICA_LAG_TIME_MAX_MS_CONFIG,
        Type.LONG,
        30000,
        None,
        H,
        "Time in ms after which a follower that has not caught up with the leader (or not fetched) leaves the ISR.",
    )
    .define(
        NUM_REPLICA_FETCHERS_CONFIG,
        Type.INT,
        1,
        at_least(1),
        H,
        "Number of ReplicaFetcherThreads per source broker; partitions are spread over them by hash.",
    )
    .define(
        REPLICA_FETCH_MAX_BYTES_CONFIG,
        Type.INT,
        1048576,
        at_least(0),
        M,
        "Bytes of messages a follower tries to fetch per partition (at least one batch is always returned).",
    )
    .define(
        REPLICA_FETCH_RESPONSE_MAX_BYTES_CONFIG,
        Type.INT,
        10485760,
        at_least(0),
        M,
        "Maximum bytes of a whole follower fetch response (at least one batch is always returned).",
    )
    .define(
        REPLICA_SELECTOR_CLASS_CONFIG,
        Type.STRING,
        None,
        _known_replica_selector,
        M,
        "Fully qualified name of the ReplicaSelector that picks the preferred read replica of a consumer's fetch "
        "(KIP-392); org.apache.kafka.common.replica.RackAwareReplicaSelector is known. Default: none, consumers "
        "read from the leader.",
    )
    .define(
        REPLICA_FETCH_WAIT_MAX_MS_CONFIG,
        Type.INT,
        500,
        None,
        M,
        "Maximum wait in ms of a follower's fetch at the leader; keep it below replica.lag.time.max.ms.",
    )
    .define(
        REPLICA_FETCH_MIN_BYTES_CONFIG,
        Type.INT,
        1,
        None,
        M,
        "Minimum bytes a follower's fetch waits for, up to replica.fetch.wait.max.ms.",
    )
    .define(
        REPLICA_FETCH_BACKOFF_MS_CONFIG,
        Type.INT,
        1000,
        at_least(0),
        M,
        "Time in ms a ReplicaFetcherThread sleeps after a fetch error before it retries.",
    )
    .define(
        REPLICA_SOCKET_TIMEOUT_MS_CONFIG,
        Type.INT,
        30000,
        None,
        H,
        "Socket timeout in ms of follower fetch requests; at least replica.fetch.wait.max.ms.",
    )
    .define(
        REPLICA_SOCKET_RECEIVE_BUFFER_BYTES_CONFIG,
        Type.INT,
        65536,
        None,
        H,
        "SO_RCVBUF of the follower's connection to the leader (-1: the OS default). Applied only when set "
        "explicitly: left at its default the OS's auto-tuned buffer is kept (Kafka applies the default too).",
    )
    .define(
        UNCLEAN_LEADER_ELECTION_ENABLE_CONFIG,
        Type.BOOLEAN,
        False,
        None,
        H,
        "Whether replicas not in the ISR may be elected leader as a last resort, at the risk of data loss.",
    )
    .define(
        AUTO_LEADER_REBALANCE_ENABLE_CONFIG,
        Type.BOOLEAN,
        True,
        None,
        H,
        "Whether the controller moves leadership back to the preferred replicas periodically.",
    )
    .define(
        LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS_CONFIG,
        Type.LONG,
        300,
        at_least(1),
        H,
        "Frequency in seconds of the controller's partition-rebalance check.",
    )
    .define(
        LEADER_IMBALANCE_PER_BROKER_PERCENTAGE_CONFIG,
        Type.INT,
        10,
        None,
        H,
        "Leader imbalance allowed per broker, in percent, before a preferred-leader rebalance is triggered.",
    )
    .define(
        REPLICA_HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS_CONFIG,
        Type.LONG,
        5000,
        None,
        H,
        "Frequency in ms at which high watermarks are saved to disk.",
    )
    .define(
        INTER_BROKER_LISTENER_NAME_CONFIG,
        Type.STRING,
        None,
        None,
        M,
        "Name of the listener used between brokers; security.inter.broker.protocol's listener when unset.",
    )
    .define(
        SECURITY_INTER_BROKER_PROTOCOL_CONFIG,
        Type.STRING,
        "PLAINTEXT",
        in_values(*SECURITY_PROTOCOLS),
        M,
        "Security protocol used between brokers when inter.broker.listener.name is not set.",
    )
)
