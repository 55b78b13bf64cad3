"""Group coordinator keys: Kafka's ``GroupCoordinatorConfig`` (the __consumer_offsets topic, offset retention
and commits, classic and consumer group session and heartbeat bounds).

Part of the broker's ConfigDef (:data:`pykbroker.config.kafka_config_def.BROKER_CONFIG_DEF`, the merge of
these per-area ConfigDefs, as Kafka's ``AbstractKafkaConfig.CONFIG_DEF``). Every key has a one-sentence doc with its
unit; keys that pykbroker accepts for compatibility but does not act on yet say so in their doc.
"""

from __future__ import annotations

from pykbroker.config.broker_configs.common import INT_MAX, H, L, M
from pykbroker.config.config_def import ConfigDef, Type, at_least, in_values

GROUP_COORDINATOR_CONFIG_DEF = (
    ConfigDef()
    .define(
        "offsets.topic.num.partitions",
        Type.INT,
        50,
        at_least(1),
        H,
        "Number of partitions of the offsets topic (__consumer_offsets); do not change it after deployment.",
    )
    .define(
        "offsets.topic.replication.factor",
        Type.SHORT,
        3,
        at_least(1),
        H,
        "Replication factor of the offsets topic, capped by the number of live brokers.",
    )
    .define(
        "offsets.topic.segment.bytes",
        Type.INT,
        104857600,
        at_least(1),
        H,
        "Segment size in bytes of the offsets topic, kept small for fast compaction and loading.",
    )
    .define(
        "offsets.topic.compression.codec",
        Type.INT,
        0,
        None,
        H,
        "Compression codec id of the offsets topic's batches (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd). Accepted;"
        " not used by pykbroker yet.",
    )
    .define(
        "offsets.retention.minutes",
        Type.INT,
        10080,
        at_least(1),
        H,
        "Time in minutes the committed offsets of a group without members are kept.",
    )
    .define(
        "offsets.retention.check.interval.ms",
        Type.LONG,
        600000,
        at_least(1),
        H,
        "Frequency in ms at which expired committed offsets are removed.",
    )
    .define(
        "offsets.commit.timeout.ms",
        Type.INT,
        5000,
        at_least(1),
        H,
        "Maximum time in ms an offset commit waits for the offsets topic's replicas to acknowledge it.",
    )
    .define(
        "offsets.commit.required.acks",
        Type.SHORT,
        -1,
        None,
        H,
        "Acks required before an offset commit (or group metadata write) is accepted; -1: the whole ISR.",
    )
    .define(
        "offsets.load.buffer.size",
        Type.INT,
        5242880,
        at_least(1),
        H,
        "Batch size in bytes for reading the offsets topic when a coordinator loads its groups. Accepted; not "
        "used by pykbroker yet.",
    )
    .define(
        "offset.metadata.max.bytes",
        Type.INT,
        4096,
        None,
        H,
        "Maximum size in bytes of the metadata string attached to a committed offset.",
    )
    .define(
        "group.initial.rebalance.delay.ms",
        Type.INT,
        3000,
        None,
        M,
        "Time in ms the coordinator waits for more members to join a new group before its first rebalance.",
    )
    .define(
        "group.min.session.timeout.ms",
        Type.INT,
        6000,
        None,
        M,
        "Minimum session timeout in ms a classic group member may ask for.",
    )
    .define(
        "group.max.session.timeout.ms",
        Type.INT,
        1800000,
        None,
        M,
        "Maximum session timeout in ms a classic group member may ask for.",
    )
    .define(
        "group.max.size", Type.INT, INT_MAX, at_least(1), M, "Maximum number of members in a single consumer group."
    )
    .define(
        "group.coordinator.rebalance.protocols",
        Type.LIST,
        "classic,consumer",
        None,
        M,
        "Rebalance protocols the group coordinator supports (classic, consumer): ConsumerGroupHeartbeat and "
        "ConsumerGroupDescribe (KIP-848) are served and advertised only while it lists consumer.",
    )
    .define(
        "group.consumer.max.size",
        Type.INT,
        INT_MAX,
        at_least(1),
        M,
        "The maximum number of members of a consumer-protocol group (GROUP_MAX_SIZE_REACHED beyond).",
    )
    .define(
        "group.consumer.assignors",
        Type.LIST,
        "uniform,range",
        None,
        M,
        "The server-side assignors of consumer-protocol groups (uniform, range, or Kafka's class names); the first "
        "is the default.",
    )
    .define(
        "group.consumer.migration.policy",
        Type.STRING,
        "bidirectional",
        in_values("disabled", "upgrade", "downgrade", "bidirectional", case_sensitive=False),
        M,
        "Online migration between classic and consumer groups (KIP-848): bidirectional, upgrade (a consumer-protocol "
        "member joining a classic group converts it), downgrade (the last consumer-protocol member leaving converts "
        "the group back to classic) or disabled.",
    )
    # defaults and bounds of the per-group configs consumer.session.timeout.ms / consumer.heartbeat.interval.ms
    .define(
        "group.consumer.session.timeout.ms",
        Type.INT,
        45000,
        at_least(1),
        M,
        "Default session timeout in ms of consumer-protocol group members.",
    )
    .define(
        "group.consumer.min.session.timeout.ms",
        Type.INT,
        45000,
        at_least(1),
        M,
        "Minimum session timeout in ms a consumer group may configure.",
    )
    .define(
        "group.consumer.max.session.timeout.ms",
        Type.INT,
        60000,
        at_least(1),
        M,
        "Maximum session timeout in ms a consumer group may configure.",
    )
    .define(
        "group.consumer.heartbeat.interval.ms",
        Type.INT,
        5000,
        at_least(1),
        M,
        "Default heartbeat interval in ms of consumer-protocol group members.",
    )
    .define(
        "group.consumer.min.heartbeat.interval.ms",
        Type.INT,
        5000,
        at_least(1),
        M,
        "Minimum heartbeat interval in ms a consumer group may configure.",
    )
    .define(
        "group.consumer.max.heartbeat.interval.ms",
        Type.INT,
        15000,
        at_least(1),
        M,
        "Maximum heartbeat interval in ms a consumer group may configure.",
    )
    .define(
        "group.coordinator.new.enable",
        Type.BOOLEAN,
        False,
        None,
        L,
        "Whether the new group coordinator is enabled (obsolete in Kafka 4.0). Accepted; not used by pykbroker yet.",
    )
)
