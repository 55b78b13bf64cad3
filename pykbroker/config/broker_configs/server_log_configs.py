"""Log keys: Kafka's ``ServerLogConfigs`` (log directories, segments, retention, flush, timestamps,
topic creation defaults) and ``CleanerConfig`` (log.cleaner.*).

Part of the broker's ConfigDef (:data:`pykbroker.config.kafka_config_def.BROKER_CONFIG_DEF`, the merge of
these per-area ConfigDefs, as Kafka's ``AbstractKafkaConfig.CONFIG_DEF``). Every key has a one-sentence doc with its
unit; keys that pykbroker accepts for compatibility but does not act on yet say so in their doc.
"""

from __future__ import annotations

from pykbroker.config.broker_configs.common import LONG_MAX, H, L, M
from pykbroker.config.config_def import ConfigDef, Type, at_least, between, in_values
from pykbroker.config.topic_config import MIN_INSYNC_REPLICAS_CONFIG

# The key names (Kafka's ``*_CONFIG`` constants), each named after its key (``log.retention.ms`` ->
# ``LOG_RETENTION_MS_CONFIG``): the one spelling of each key, imported by the code that reads it.
AUTO_CREATE_TOPICS_ENABLE_CONFIG = "auto.create.topics.enable"
NUM_PARTITIONS_CONFIG = "num.partitions"
LOG_DIR_CONFIG = "log.dir"
LOG_DIRS_CONFIG = "log.dirs"
LOG_DIR_FAILURE_TIMEOUT_MS_CONFIG = "log.dir.failure.timeout.ms"
LOG_SEGMENT_BYTES_CONFIG = "log.segment.bytes"
LOG_ROLL_MS_CONFIG = "log.roll.ms"
LOG_ROLL_HOURS_CONFIG = "log.roll.hours"
LOG_ROLL_JITTER_MS_CONFIG = "log.roll.jitter.ms"
LOG_ROLL_JITTER_HOURS_CONFIG = "log.roll.jitter.hours"
LOG_RETENTION_MS_CONFIG = "log.retention.ms"
LOG_RETENTION_MINUTES_CONFIG = "log.retention.minutes"
LOG_RETENTION_HOURS_CONFIG = "log.retention.hours"
LOG_RETENTION_BYTES_CONFIG = "log.retention.bytes"
LOG_RETENTION_CHECK_INTERVAL_MS_CONFIG = "log.retention.check.interval.ms"
LOG_CLEANUP_POLICY_CONFIG = "log.cleanup.policy"
LOG_CLEANER_ENABLE_CONFIG = "log.cleaner.enable"
LOG_CLEANER_THREADS_CONFIG = "log.cleaner.threads"
LOG_CLEANER_BACKOFF_MS_CONFIG = "log.cleaner.backoff.ms"
LOG_CLEANER_MIN_CLEANABLE_RATIO_CONFIG = "log.cleaner.min.cleanable.ratio"
LOG_CLEANER_DELETE_RETENTION_MS_CONFIG = "log.cleaner.delete.retention.ms"
LOG_CLEANER_MIN_COMPACTION_LAG_MS_CONFIG = "log.cleaner.min.compaction.lag.ms"
LOG_CLEANER_MAX_COMPACTION_LAG_MS_CONFIG = "log.cleaner.max.compaction.lag.ms"
LOG_CLEANER_DEDUPE_BUFFER_SIZE_CONFIG = "log.cleaner.dedupe.buffer.size"
LOG_INDEX_SIZE_MAX_BYTES_CONFIG = "log.index.size.max.bytes"
LOG_INDEX_INTERVAL_BYTES_CONFIG = "log.index.interval.bytes"
LOG_FLUSH_INTERVAL_MESSAGES_CONFIG = "log.flush.interval.messages"
LOG_FLUSH_INTERVAL_MS_CONFIG = "log.flush.interval.ms"
LOG_FLUSH_SCHEDULER_INTERVAL_MS_CONFIG = "log.flush.scheduler.interval.ms"
LOG_FLUSH_OFFSET_CHECKPOINT_INTERVAL_MS_CONFIG = "log.flush.offset.checkpoint.interval.ms"
LOG_FLUSH_START_OFFSET_CHECKPOINT_INTERVAL_MS_CONFIG = "log.flush.start.offset.checkpoint.interval.ms"
LOG_SEGMENT_DELETE_DELAY_MS_CONFIG = "log.segment.delete.delay.ms"
LOG_PREALLOCATE_CONFIG = "log.preallocate"
LOG_MESSAGE_TIMESTAMP_TYPE_CONFIG = "log.message.timestamp.type"
LOG_MESSAGE_TIMESTAMP_BEFORE_MAX_MS_CONFIG = "log.message.timestamp.before.max.ms"
LOG_MESSAGE_TIMESTAMP_AFTER_MAX_MS_CONFIG = "log.message.timestamp.after.max.ms"
LOG_MESSAGE_DOWNCONVERSION_ENABLE_CONFIG = "log.message.downconversion.enable"
LOG_INITIAL_TASK_DELAY_MS_CONFIG = "log.initial.task.delay.ms"
NUM_RECOVERY_THREADS_PER_DATA_DIR_CONFIG = "num.recovery.threads.per.data.dir"

SERVER_LOG_CONFIG_DEF = (
    ConfigDef()
    .define(
        AUTO_CREATE_TOPICS_ENABLE_CONFIG,
        Type.BOOLEAN,
        True,
        None,
        H,
        "Whether a topic that a client asks metadata for, and that does not exist, is created automatically.",
    )
    .define(
        NUM_PARTITIONS_CONFIG,
        Type.INT,
        1,
        at_least(1),
        M,
        "Default number of partitions of automatically created topics.",
    )
    .define(
        MIN_INSYNC_REPLICAS_CONFIG,
        Type.INT,
        1,
        at_least(1),
        H,
        "Minimum number of in-sync replicas that must acknowledge an acks=all write for it to succeed.",
    )
    .define(
        LOG_DIR_CONFIG,
        Type.STRING,
        "/tmp/kafka-logs",
        None,
        H,
        "Directory where the log data is kept, when log.dirs is not set.",
    )
    .define(
        LOG_DIRS_CONFIG,
        Type.LIST,
        None,
        None,
        H,
        "Comma-separated directories where the log data is kept; log.dir when unset.",
    )
    .define(
        LOG_SEGMENT_BYTES_CONFIG,
        Type.INT,
        1073741824,
        at_least(14),
        H,
        "Maximum size in bytes of a single log segment file.",
    )
    .define(
        LOG_ROLL_MS_CONFIG,
        Type.LONG,
        None,
        None,
        H,
        "Maximum time in ms before a new log segment is rolled out; log.roll.hours when unset.",
    )
    .define(
        LOG_ROLL_HOURS_CONFIG,
        Type.INT,
        168,
        at_least(1),
        H,
        "Maximum time in hours before a new log segment is rolled out; secondary to log.roll.ms.",
    )
    .define(
        LOG_ROLL_JITTER_MS_CONFIG,
        Type.LONG,
        None,
        None,
        H,
        "Maximum jitter in ms subtracted from the roll time; log.roll.jitter.hours when unset.",
    )
    .define(
        LOG_ROLL_JITTER_HOURS_CONFIG,
        Type.INT,
        0,
        at_least(0),
        H,
        "Maximum jitter in hours subtracted from the roll time; secondary to log.roll.jitter.ms.",
    )
    .define(
        LOG_RETENTION_MS_CONFIG,
        Type.LONG,
        None,
        None,
        H,
        "Time in ms a log segment is kept before deletion (-1: no limit); log.retention.minutes when unset.",
    )
    .define(
        LOG_RETENTION_MINUTES_CONFIG,
        Type.INT,
        None,
        None,
        H,
        "Time in minutes a log segment is kept before deletion; secondary to log.retention.ms.",
    )
    .define(
        LOG_RETENTION_HOURS_CONFIG,
        Type.INT,
        168,
        None,
        H,
        "Time in hours a log segment is kept before deletion; tertiary to log.retention.ms.",
    )
    .define(
        LOG_RETENTION_BYTES_CONFIG,
        Type.LONG,
        -1,
        None,
        H,
        "Maximum size in bytes of a partition's log before old segments are deleted (-1: no limit).",
    )
    .define(
        LOG_RETENTION_CHECK_INTERVAL_MS_CONFIG,
        Type.LONG,
        300000,
        at_least(1),
        M,
        "Frequency in ms at which logs are checked for segments eligible for deletion.",
    )
    .define(
        LOG_CLEANUP_POLICY_CONFIG,
        Type.LIST,
        "delete",
        in_values("delete", "compact"),
        M,
        "Default cleanup policy of segments beyond the retention window: delete, compact, or both.",
    )
    .define(
        LOG_CLEANER_ENABLE_CONFIG,
        Type.BOOLEAN,
        True,
        None,
        M,
        "Whether the log cleaner runs, compacting topics whose cleanup policy is compact.",
    )
    .define(
        LOG_CLEANER_THREADS_CONFIG,
        Type.INT,
        1,
        at_least(0),
        M,
        "Number of background threads for log cleaning. Accepted; not used by pykbroker yet.",
    )
    .define(
        LOG_CLEANER_BACKOFF_MS_CONFIG,
        Type.LONG,
        15000,
        at_least(0),
        M,
        "Time in ms the cleaner sleeps when no log needs cleaning.",
    )
    .define(
        LOG_CLEANER_MIN_CLEANABLE_RATIO_CONFIG,
        Type.DOUBLE,
        0.5,
        between(0, 1),
        M,
        "Minimum ratio of dirty log to total log for a log to be eligible for cleaning.",
    )
    .define(
        LOG_CLEANER_DELETE_RETENTION_MS_CONFIG,
        Type.LONG,
        86400000,
        at_least(0),
        M,
        "Time in ms delete tombstones are kept on compacted topics.",
    )
    .define(
        LOG_CLEANER_MIN_COMPACTION_LAG_MS_CONFIG,
        Type.LONG,
        0,
        at_least(0),
        M,
        "Minimum time in ms a message stays uncompacted in the log.",
    )
    .define(
        LOG_CLEANER_MAX_COMPACTION_LAG_MS_CONFIG,
        Type.LONG,
        LONG_MAX,
        at_least(1),
        M,
        "Maximum time in ms a message stays ineligible for compaction in the log.",
    )
    .define(
        LOG_CLEANER_DEDUPE_BUFFER_SIZE_CONFIG,
        Type.LONG,
        134217728,
        None,
        M,
        "Total memory in bytes used for log deduplication across all cleaner threads. Accepted; not used by "
        "pykbroker yet.",
    )
    .define(
        LOG_INDEX_SIZE_MAX_BYTES_CONFIG,
        Type.INT,
        10485760,
        at_least(4),
        M,
        "Maximum size in bytes of the offset and time indexes of a segment.",
    )
    .define(
        LOG_INDEX_INTERVAL_BYTES_CONFIG,
        Type.INT,
        4096,
        at_least(0),
        M,
        "Bytes of log appended between two offset index entries.",
    )
    .define(
        LOG_FLUSH_INTERVAL_MESSAGES_CONFIG,
        Type.LONG,
        LONG_MAX,
        at_least(1),
        H,
        "Number of messages accumulated on a partition before its log is flushed to disk.",
    )
    .define(
        LOG_FLUSH_INTERVAL_MS_CONFIG,
        Type.LONG,
        None,
        None,
        H,
        "Maximum time in ms a message stays unflushed; log.flush.scheduler.interval.ms when unset.",
    )
    .define(
        LOG_FLUSH_SCHEDULER_INTERVAL_MS_CONFIG,
        Type.LONG,
        LONG_MAX,
        None,
        H,
        "Frequency in ms at which the log flusher checks whether any log needs flushing.",
    )
    .define(
        LOG_FLUSH_OFFSET_CHECKPOINT_INTERVAL_MS_CONFIG,
        Type.INT,
        60000,
        at_least(0),
        H,
        "Frequency in ms at which the logs' recovery points are checkpointed.",
    )
    .define(
        LOG_FLUSH_START_OFFSET_CHECKPOINT_INTERVAL_MS_CONFIG,
        Type.INT,
        60000,
        at_least(0),
        H,
        "Frequency in ms at which the logs' start offsets are checkpointed.",
    )
    .define(
        LOG_SEGMENT_DELETE_DELAY_MS_CONFIG,
        Type.LONG,
        60000,
        at_least(0),
        H,
        "Time in ms to wait before deleting a file from the filesystem.",
    )
    .define(LOG_PREALLOCATE_CONFIG, Type.BOOLEAN, False, None, M, "Whether to preallocate the file of a new segment.")
    .define(
        LOG_MESSAGE_TIMESTAMP_TYPE_CONFIG,
        Type.STRING,
        "CreateTime",
        in_values("CreateTime", "LogAppendTime"),
        M,
        "Whether record timestamps are the producer's (CreateTime) or the broker's (LogAppendTime).",
    )
    .define(
        LOG_MESSAGE_TIMESTAMP_BEFORE_MAX_MS_CONFIG,
        Type.LONG,
        LONG_MAX,
        at_least(0),
        M,
        "Maximum time in ms a CreateTime timestamp may lie before the broker's time.",
    )
    .define(
        LOG_MESSAGE_TIMESTAMP_AFTER_MAX_MS_CONFIG,
        Type.LONG,
        LONG_MAX,
        at_least(0),
        M,
        "Maximum time in ms a CreateTime timestamp may lie after the broker's time.",
    )
    .define(
        LOG_MESSAGE_DOWNCONVERSION_ENABLE_CONFIG,
        Type.BOOLEAN,
        True,
        None,
        L,
        "Whether records are down-converted for consumers using old fetch versions.",
    )
    .define(
        LOG_DIR_FAILURE_TIMEOUT_MS_CONFIG,
        Type.LONG,
        30000,
        at_least(1),
        L,
        "If the broker is unable to successfully communicate to the controller that some log directory has failed "
        "for longer than this time, the broker will fail and shut down.",
    )
    .define(
        LOG_INITIAL_TASK_DELAY_MS_CONFIG,
        Type.LONG,
        30000,
        at_least(0),
        L,
        "Delay in ms before the first run of the log background tasks.",
    )
    .define(
        NUM_RECOVERY_THREADS_PER_DATA_DIR_CONFIG,
        Type.INT,
        1,
        at_least(1),
        H,
        "Number of threads per data directory for log recovery at start-up and flushing at shutdown.",
    )
)
