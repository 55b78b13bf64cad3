"""Share coordinator keys: Kafka's ``ShareCoordinatorConfig`` (KIP-932), the ``__share_group_state`` topic and the
coordinator that keeps share partitions' state in it.

Part of the broker's ConfigDef (:data:`pykbroker.config.kafka_config_def.BROKER_CONFIG_DEF`). Every key has a
one-sentence doc with its unit; keys that pykbroker accepts for compatibility but does not act on yet say so.
"""

from __future__ import annotations

from pykbroker.config.broker_configs.common import H, M
from pykbroker.config.config_def import ConfigDef, Type, at_least, between

SHARE_COORDINATOR_STATE_TOPIC_NUM_PARTITIONS_CONFIG = "share.coordinator.state.topic.num.partitions"
SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR_CONFIG = "share.coordinator.state.topic.replication.factor"
SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR_CONFIG = "share.coordinator.state.topic.min.isr"
SHARE_COORDINATOR_STATE_TOPIC_SEGMENT_BYTES_CONFIG = "share.coordinator.state.topic.segment.bytes"
SHARE_COORDINATOR_THREADS_CONFIG = "share.coordinator.threads"
SHARE_COORDINATOR_SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT_CONFIG = "share.coordinator.snapshot.update.records.per.snapshot"
SHARE_COORDINATOR_WRITE_TIMEOUT_MS_CONFIG = "share.coordinator.write.timeout.ms"
SHARE_COORDINATOR_LOAD_BUFFER_SIZE_CONFIG = "share.coordinator.load.buffer.size"
SHARE_COORDINATOR_APPEND_LINGER_MS_CONFIG = "share.coordinator.append.linger.ms"
SHARE_COORDINATOR_STATE_TOPIC_PRUNE_INTERVAL_MS_CONFIG = "share.coordinator.state.topic.prune.interval.ms"

SHARE_COORDINATOR_CONFIG_DEF = (
    ConfigDef()
    .define(
        SHARE_COORDINATOR_STATE_TOPIC_NUM_PARTITIONS_CONFIG,
        Type.INT,
        50,
        at_least(1),
        H,
        "Number of partitions of the share-group state topic (__share_group_state), created on first use.",
    )
    .define(
        SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR_CONFIG,
        Type.SHORT,
        3,
        at_least(1),
        H,
        "Replication factor of the share-group state topic (capped at the live brokers).",
    )
    .define(
        SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR_CONFIG,
        Type.SHORT,
        2,
        at_least(1),
        H,
        "min.insync.replicas of the share-group state topic (capped at its replication factor).",
    )
    .define(
        SHARE_COORDINATOR_STATE_TOPIC_SEGMENT_BYTES_CONFIG,
        Type.INT,
        104857600,
        at_least(1),
        H,
        "Segment size in bytes of the share-group state topic.",
    )
    .define(
        SHARE_COORDINATOR_THREADS_CONFIG,
        Type.INT,
        1,
        at_least(1),
        M,
        "Number of threads of the share coordinator (accepted for compatibility: pykbroker's share coordinator "
        "works on the request handler threads).",
    )
    .define(
        SHARE_COORDINATOR_SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT_CONFIG,
        Type.INT,
        500,
        between(0, 500),
        M,
        "Number of ShareUpdate records written for a share partition before the next write is a full ShareSnapshot.",
    )
    .define(
        SHARE_COORDINATOR_WRITE_TIMEOUT_MS_CONFIG,
        Type.INT,
        5000,
        at_least(1),
        H,
        "Time in ms a write to the share-group state topic may wait for its replicas.",
    )
    .define(
        SHARE_COORDINATOR_LOAD_BUFFER_SIZE_CONFIG,
        Type.INT,
        5 * 1024 * 1024,
        at_least(1),
        H,
        "Bytes read at a time when a share-group state partition is loaded.",
    )
    .define(
        SHARE_COORDINATOR_APPEND_LINGER_MS_CONFIG,
        Type.INT,
        10,
        at_least(0),
        M,
        "Time in ms the share coordinator may wait to batch writes (accepted for compatibility: pykbroker writes "
        "each state change at once).",
    )
    .define(
        SHARE_COORDINATOR_STATE_TOPIC_PRUNE_INTERVAL_MS_CONFIG,
        Type.LONG,
        5 * 60 * 1000,
        at_least(1),
        M,
        "Time in ms between two prunings of the share-group state topic: the records below the oldest latest snapshot "
        "of the share partitions a partition holds are deleted (DeleteRecords).",
    )
)
