"""Replication keys: Kafka's ``ReplicationConfigs`` (replica fetchers, ISR lag, unclean election,
leader rebalancing, purgatories, the inter-broker listener).

Part of the broker's ConfigDef (:data:`pykbroker.config.kafka_config_def.BROKER_CONFIG_DEF`, the merge of
these per-area ConfigDefs, as Kafka's ``AbstractKafkaConfig.CONFIG_DEF``). Every key has a one-sentence doc with its
unit; keys that pykbroker accepts for compatibility but does not act on yet say so in their doc.
"""

from __future__ import annotations

from pykbroker.config.broker_configs.common import SECURITY_PROTOCOLS, H, M
from pykbroker.config.config_def import ConfigDef, Type, at_least, in_values

REPLICATION_CONFIG_DEF = (
    ConfigDef()
    .define(
        "fetch.purgatory.purge.interval.requests",
        Type.INT,
        1000,
        None,
        M,
        "Number of fetch requests added to the fetch purgatory between two purges of its completed operations.",
    )
    .define(
        "producer.purgatory.purge.interval.requests",
        Type.INT,
        1000,
        None,
        M,
        "Number of produce requests added to the producer purgatory between two purges of its completed operations.",
    )
    .define(
        "default.replication.factor",
        Type.INT,
        1,
        None,
        M,
        "Default replication factor of automatically created topics.",
    )
    .define(
        "replica.lag.time.max.ms",
        Type.LONG,
        30000,
        None,
        H,
        "Time in ms after which a follower that has not caught up with the leader (or not fetched) leaves the ISR.",
    )
    .define(
        "num.replica.fetchers",
        Type.INT,
        1,
        at_least(1),
        H,
        "Number of ReplicaFetcherThreads per source broker; partitions are spread over them by hash.",
    )
    .define(
        "replica.fetch.max.bytes",
        Type.INT,
        1048576,
        at_least(0),
        M,
        "Bytes of messages a follower tries to fetch per partition (at least one batch is always returned).",
    )
    .define(
        "replica.fetch.response.max.bytes",
        Type.INT,
        10485760,
        at_least(0),
        M,
        "Maximum bytes of a whole follower fetch response (at least one batch is always returned).",
    )
    .define(
        "replica.fetch.wait.max.ms",
        Type.INT,
        500,
        None,
        M,
        "Maximum wait in ms of a follower's fetch at the leader; keep it below replica.lag.time.max.ms.",
    )
    .define(
        "replica.fetch.min.bytes",
        Type.INT,
        1,
        None,
        M,
        "Minimum bytes a follower's fetch waits for, up to replica.fetch.wait.max.ms.",
    )
    .define(
        "replica.fetch.backoff.ms",
        Type.INT,
        1000,
        at_least(0),
        M,
        "Time in ms a ReplicaFetcherThread sleeps after a fetch error before it retries.",
    )
    .define(
        "replica.socket.timeout.ms",
        Type.INT,
        30000,
        None,
        H,
        "Socket timeout in ms of follower fetch requests; at least replica.fetch.wait.max.ms.",
    )
    .define(
        "replica.socket.receive.buffer.bytes",
        Type.INT,
        65536,
        None,
        H,
        "SO_RCVBUF of the follower's connection to the leader (-1: the OS default).",
    )
    .define(
        "unclean.leader.election.enable",
        Type.BOOLEAN,
        False,
        None,
        H,
        "Whether replicas not in the ISR may be elected leader as a last resort, at the risk of data loss.",
    )
    .define(
        "auto.leader.rebalance.enable",
        Type.BOOLEAN,
        True,
        None,
        H,
        "Whether the controller moves leadership back to the preferred replicas periodically.",
    )
    .define(
        "leader.imbalance.check.interval.seconds",
        Type.LONG,
        300,
        at_least(1),
        H,
        "Frequency in seconds of the controller's partition-rebalance check.",
    )
    .define(
        "leader.imbalance.per.broker.percentage",
        Type.INT,
        10,
        None,
        H,
        "Leader imbalance allowed per broker, in percent, before a preferred-leader rebalance is triggered.",
    )
    .define(
        "replica.high.watermark.checkpoint.interval.ms",
        Type.LONG,
        5000,
        None,
        H,
        "Frequency in ms at which high watermarks are saved to disk.",
    )
    .define(
        "inter.broker.listener.name",
        Type.STRING,
        None,
        None,
        M,
        "Name of the listener used between brokers; security.inter.broker.protocol's listener when unset.",
    )
    .define(
        "security.inter.broker.protocol",
        Type.STRING,
        "PLAINTEXT",
        in_values(*SECURITY_PROTOCOLS),
        M,
        "Security protocol used between brokers when inter.broker.listener.name is not set.",
    )
)
