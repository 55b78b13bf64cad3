"""Group coordinator keys: Kafka's ``GroupCoordinatorConfig`` (the __consumer_offsets topic, offset retention
and commits, classic and consumer group session and heartbeat bounds).

Part of the broker's ConfigDef (:data:`pykbroker.config.kafka_config_def.BROKER_CONFIG_DEF`, the merge of
these per-area ConfigDefs, as Kafka's ``AbstractKafkaConfig.CONFIG_DEF``). Every key has a one-sentence doc with its
unit; keys that pykbroker accepts for compatibility but does not act on yet say so in their doc.
"""

from __future__ import annotations

from pykbroker.config.broker_configs.common import INT_MAX, H, L, M
from pykbroker.config.config_def import ConfigDef, Type, at_least, between, in_values

# The key names (Kafka's ``*_CONFIG`` constants), each named after its key (``log.retention.ms`` ->
# ``LOG_RETENTION_MS_CONFIG``): the one spelling of each key, imported by the code that reads it.
OFFSETS_TOPIC_NUM_PARTITIONS_CONFIG = "offsets.topic.num.partitions"
OFFSETS_TOPIC_REPLICATION_FACTOR_CONFIG = "offsets.topic.replication.factor"
OFFSETS_TOPIC_SEGMENT_BYTES_CONFIG = "offsets.topic.segment.bytes"
OFFSETS_TOPIC_COMPRESSION_CODEC_CONFIG = "offsets.topic.compression.codec"
OFFSETS_RETENTION_MINUTES_CONFIG = "offsets.retention.minutes"
OFFSETS_RETENTION_CHECK_INTERVAL_MS_CONFIG = "offsets.retention.check.interval.ms"
OFFSETS_COMMIT_TIMEOUT_MS_CONFIG = "offsets.commit.timeout.ms"
OFFSETS_COMMIT_REQUIRED_ACKS_CONFIG = "offsets.commit.required.acks"
OFFSETS_LOAD_BUFFER_SIZE_CONFIG = "offsets.load.buffer.size"
OFFSET_METADATA_MAX_BYTES_CONFIG = "offset.metadata.max.bytes"
GROUP_INITIAL_REBALANCE_DELAY_MS_CONFIG = "group.initial.rebalance.delay.ms"
GROUP_MIN_SESSION_TIMEOUT_MS_CONFIG = "group.min.session.timeout.ms"
GROUP_MAX_SESSION_TIMEOUT_MS_CONFIG = "group.max.session.timeout.ms"
GROUP_MAX_SIZE_CONFIG = "group.max.size"
GROUP_COORDINATOR_REBALANCE_PROTOCOLS_CONFIG = "group.coordinator.rebalance.protocols"
GROUP_CONSUMER_MAX_SIZE_CONFIG = "group.consumer.max.size"
GROUP_CONSUMER_ASSIGNORS_CONFIG = "group.consumer.assignors"
GROUP_CONSUMER_SESSION_TIMEOUT_MS_CONFIG = "group.consumer.session.timeout.ms"
GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS_CONFIG = "group.consumer.min.session.timeout.ms"
GROUP_CONSUMER_MAX_SESSION_TIMEOUT_MS_CONFIG = "group.consumer.max.session.timeout.ms"
GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS_CONFIG = "group.consumer.heartbeat.interval.ms"
GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS_CONFIG = "group.consumer.min.heartbeat.interval.ms"
GROUP_CONSUMER_MAX_HEARTBEAT_INTERVAL_MS_CONFIG = "group.consumer.max.heartbeat.interval.ms"
GROUP_COORDINATOR_NEW_ENABLE_CONFIG = "group.coordinator.new.enable"
GROUP_CONSUMER_MIGRATION_POLICY_CONFIG = "group.consumer.migration.policy"
GROUP_SHARE_SESSION_TIMEOUT_MS_CONFIG = "group.share.session.timeout.ms"
GROUP_SHARE_MIN_SESSION_TIMEOUT_MS_CONFIG = "group.share.min.session.timeout.ms"
GROUP_SHARE_MAX_SESSION_TIMEOUT_MS_CONFIG = "group.share.max.session.timeout.ms"
GROUP_SHARE_HEARTBEAT_INTERVAL_MS_CONFIG = "group.share.heartbeat.interval.ms"
GROUP_SHARE_MIN_HEARTBEAT_INTERVAL_MS_CONFIG = "group.share.min.heartbeat.interval.ms"
GROUP_SHARE_MAX_HEARTBEAT_INTERVAL_MS_CONFIG = "group.share.max.heartbeat.interval.ms"
GROUP_SHARE_MAX_SIZE_CONFIG = "group.share.max.size"
GROUP_SHARE_ASSIGNORS_CONFIG = "group.share.assignors"
GROUP_SHARE_RECORD_LOCK_DURATION_MS_CONFIG = "group.share.record.lock.duration.ms"
GROUP_SHARE_MIN_RECORD_LOCK_DURATION_MS_CONFIG = "group.share.min.record.lock.duration.ms"
GROUP_SHARE_MAX_RECORD_LOCK_DURATION_MS_CONFIG = "group.share.max.record.lock.duration.ms"

GROUP_COORDINATOR_CONFIG_DEF = (
    ConfigDef()
    .define(
        OFFSETS_TOPIC_NUM_PARTITIONS_CONFIG,
        Type.INT,
        50,
        at_least(1),
        H,
        "Number of partitions of the offsets topic (__consumer_offsets); do not change it after deployment.",
    )
    .define(
        OFFSETS_TOPIC_REPLICATION_FACTOR_CONFIG,
        Type.SHORT,
        3,
        at_least(1),
        H,
        "Replication factor of the offsets topic, capped by the number of live brokers.",
    )
    .define(
        OFFSETS_TOPIC_SEGMENT_BYTES_CONFIG,
        Type.INT,
        104857600,
        at_least(1),
        H,
        "Segment size in bytes of the offsets topic, kept small for fast compaction and loading.",
    )
    .define(
        OFFSETS_TOPIC_COMPRESSION_CODEC_CONFIG,
        Type.INT,
        0,
        None,
        H,
        "Compression codec id of the offsets topic's batches (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd). Accepted;"
        " not used by pykbroker yet.",
    )
    .define(
        OFFSETS_RETENTION_MINUTES_CONFIG,
        Type.INT,
        10080,
        at_least(1),
        H,
        "Time in minutes the committed offsets of a group without members are kept.",
    )
    .define(
        OFFSETS_RETENTION_CHECK_INTERVAL_MS_CONFIG,
        Type.LONG,
        600000,
        at_least(1),
        H,
        "Frequency in ms at which expired committed offsets are removed.",
    )
    .define(
        OFFSETS_COMMIT_TIMEOUT_MS_CONFIG,
        Type.INT,
        5000,
        at_least(1),
        H,
        "Maximum time in ms an offset commit waits for the offsets topic's replicas to acknowledge it.",
    )
    .define(
        OFFSETS_COMMIT_REQUIRED_ACKS_CONFIG,
        Type.SHORT,
        -1,
        None,
        H,
        "Acks required before an offset commit (or group metadata write) is accepted; -1: the whole ISR.",
    )
    .define(
        OFFSETS_LOAD_BUFFER_SIZE_CONFIG,
        Type.INT,
        5242880,
        at_least(1),
        H,
        "Batch size in bytes for reading the offsets topic when a coordinator loads its groups. Accepted; not "
        "used by pykbroker yet.",
    )
    .define(
        OFFSET_METADATA_MAX_BYTES_CONFIG,
        Type.INT,
        4096,
        None,
        H,
        "Maximum size in bytes of the metadata string attached to a committed offset.",
    )
    .define(
        GROUP_INITIAL_REBALANCE_DELAY_MS_CONFIG,
        Type.INT,
        3000,
        None,
        M,
        "Time in ms the coordinator waits for more members to join a new group before its first rebalance.",
    )
    .define(
        GROUP_MIN_SESSION_TIMEOUT_MS_CONFIG,
        Type.INT,
        6000,
        None,
        M,
        "Minimum session timeout in ms a classic group member may ask for.",
    )
    .define(
        GROUP_MAX_SESSION_TIMEOUT_MS_CONFIG,
        Type.INT,
        1800000,
        None,
        M,
        "Maximum session timeout in ms a classic group member may ask for.",
    )
    .define(
        GROUP_MAX_SIZE_CONFIG,
        Type.INT,
        INT_MAX,
        at_least(1),
        M,
        "Maximum number of members in a single consumer group.",
    )
    .define(
        GROUP_COORDINATOR_REBALANCE_PROTOCOLS_CONFIG,
        Type.LIST,
        "classic,consumer",
        None,
        M,
        "Rebalance protocols the group coordinator supports (classic, consumer): ConsumerGroupHeartbeat and "
        "ConsumerGroupDescribe (KIP-848) are served and advertised only while it lists consumer.",
    )
    .define(
        GROUP_CONSUMER_MAX_SIZE_CONFIG,
        Type.INT,
        INT_MAX,
        at_least(1),
        M,
        "The maximum number of members of a consumer-protocol group (GROUP_MAX_SIZE_REACHED beyond).",
    )
    .define(
        GROUP_CONSUMER_ASSIGNORS_CONFIG,
        Type.LIST,
        "uniform,range",
        None,
        M,
        "The server-side assignors of consumer-protocol groups (uniform, range, or Kafka's class names); the first "
        "is the default.",
    )
    .define(
        GROUP_CONSUMER_MIGRATION_POLICY_CONFIG,
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
        GROUP_CONSUMER_SESSION_TIMEOUT_MS_CONFIG,
        Type.INT,
        45000,
        at_least(1),
        M,
        "Default session timeout in ms of consumer-protocol group members.",
    )
    .define(
        GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS_CONFIG,
        Type.INT,
        45000,
        at_least(1),
        M,
        "Minimum session timeout in ms a consumer group may configure.",
    )
    .define(
        GROUP_CONSUMER_MAX_SESSION_TIMEOUT_MS_CONFIG,
        Type.INT,
        60000,
        at_least(1),
        M,
        "Maximum session timeout in ms a consumer group may configure.",
    )
    .define(
        GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS_CONFIG,
        Type.INT,
        5000,
        at_least(1),
        M,
        "Default heartbeat interval in ms of consumer-protocol group members.",
    )
    .define(
        GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS_CONFIG,
        Type.INT,
        5000,
        at_least(1),
        M,
        "Minimum heartbeat interval in ms a consumer group may configure.",
    )
    .define(
        GROUP_CONSUMER_MAX_HEARTBEAT_INTERVAL_MS_CONFIG,
        Type.INT,
        15000,
        at_least(1),
        M,
        "Maximum heartbeat interval in ms a consumer group may configure.",
    )
    # share groups (KIP-932, Kafka's ShareGroupConfig): membership, and the defaults/bounds of the share.* group configs
    .define(
        GROUP_SHARE_SESSION_TIMEOUT_MS_CONFIG,
        Type.INT,
        45000,
        at_least(1),
        M,
        "Default session timeout in ms of share group members.",
    )
    .define(
        GROUP_SHARE_MIN_SESSION_TIMEOUT_MS_CONFIG,
        Type.INT,
        45000,
        at_least(1),
        M,
        "Minimum session timeout in ms a share group may configure.",
    )
    .define(
        GROUP_SHARE_MAX_SESSION_TIMEOUT_MS_CONFIG,
        Type.INT,
        60000,
        at_least(1),
        M,
        "Maximum session timeout in ms a share group may configure.",
    )
    .define(
        GROUP_SHARE_HEARTBEAT_INTERVAL_MS_CONFIG,
        Type.INT,
        5000,
        at_least(1),
        M,
        "Default heartbeat interval in ms of share group members.",
    )
    .define(
        GROUP_SHARE_MIN_HEARTBEAT_INTERVAL_MS_CONFIG,
        Type.INT,
        5000,
        at_least(1),
        M,
        "Minimum heartbeat interval in ms a share group may configure.",
    )
    .define(
        GROUP_SHARE_MAX_HEARTBEAT_INTERVAL_MS_CONFIG,
        Type.INT,
        15000,
        at_least(1),
        M,
        "Maximum heartbeat interval in ms a share group may configure.",
    )
    .define(
        GROUP_SHARE_MAX_SIZE_CONFIG,
        Type.INT,
        200,
        between(1, 1000),
        M,
        "The maximum number of members of a share group (GROUP_MAX_SIZE_REACHED beyond).",
    )
    .define(
        GROUP_SHARE_ASSIGNORS_CONFIG,
        Type.LIST,
        "simple",
        None,
        M,
        "The server-side assignors of share groups: simple (Kafka's SimpleAssignor), the only one.",
    )
    .define(
        GROUP_SHARE_RECORD_LOCK_DURATION_MS_CONFIG,
        Type.INT,
        30000,
        between(1000, 3600000),
        M,
        "Default acquisition lock duration in ms of the records a share group member fetched.",
    )
    .define(
        GROUP_SHARE_MIN_RECORD_LOCK_DURATION_MS_CONFIG,
        Type.INT,
        15000,
        between(1000, 30000),
        M,
        "Minimum record lock duration in ms a share group may configure.",
    )
    .define(
        GROUP_SHARE_MAX_RECORD_LOCK_DURATION_MS_CONFIG,
        Type.INT,
        60000,
        between(30000, 3600000),
        M,
        "Maximum record lock duration in ms a share group may configure.",
    )
    .define(
        GROUP_COORDINATOR_NEW_ENABLE_CONFIG,
        Type.BOOLEAN,
        False,
        None,
        L,
        "Whether the new group coordinator is enabled (obsolete in Kafka 4.0). Accepted; not used by pykbroker yet.",
    )
)
