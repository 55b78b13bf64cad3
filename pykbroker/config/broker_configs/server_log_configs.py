"""Log keys: Kafka's ``ServerLogConfigs`` (log directories, segments, retention, flush, timestamps,
topic creation defaults) and ``CleanerConfig`` (log.cleaner.*).

Part of the broker's ConfigDef (:data:`pykbroker.config.kafka_config_def.BROKER_CONFIG_DEF`, the merge of
these per-area ConfigDefs, as Kafka's ``AbstractKafkaConfig.CONFIG_DEF``). Every key has a one-sentence doc with its
unit; keys that pykbroker accepts for compatibility but does not act on yet say so in their doc.
"""

from __future__ import annotations

from pykbroker.config.broker_configs.common import LONG_MAX, H, L, M
from pykbroker.config.config_def import ConfigDef, Type, at_least, between, in_values

SERVER_LOG_CONFIG_DEF = (
    ConfigDef()
    .define(
        "auto.create.topics.enable",
        Type.BOOLEAN,
        True,
        None,
        H,
        "Whether a topic that a client asks metadata for, and that does not exist, is created automatically.",
    )
    .define(
        "num.partitions", Type.INT, 1, at_least(1), M, "Default number of partitions of automatically created topics."
    )
    .define(
        "min.insync.replicas",
        Type.INT,
        1,
        at_least(1),
        H,
        "Minimum number of in-sync replicas that must acknowledge an acks=all write for it to succeed.",
    )
    .define(
        "log.dir",
        Type.STRING,
        "/tmp/kafka-logs",
        None,
        H,
        "Directory where the log data is kept, when log.dirs is not set.",
    )
    .define(
        "log.dirs",
        Type.LIST,
        None,
        None,
        H,
        "Comma-separated directories where the log data is kept; log.dir when unset.",
    )
    .define(
        "log.segment.bytes",
        Type.INT,
        1073741824,
        at_least(14),
        H,
        "Maximum size in bytes of a single log segment file.",
    )
    .define(
        "log.roll.ms",
        Type.LONG,
        None,
        None,
        H,
        "Maximum time in ms before a new log segment is rolled out; log.roll.hours when unset.",
    )
    .define(
        "log.roll.hours",
        Type.INT,
        168,
        at_least(1),
        H,
        "Maximum time in hours before a new log segment is rolled out; secondary to log.roll.ms.",
    )
    .define(
        "log.roll.jitter.ms",
        Type.LONG,
        None,
        None,
        H,
        "Maximum jitter in ms subtracted from the roll time; log.roll.jitter.hours when unset.",
    )
    .define(
        "log.roll.jitter.hours",
        Type.INT,
        0,
        at_least(0),
        H,
        "Maximum jitter in hours subtracted from the roll time; secondary to log.roll.jitter.ms.",
    )
    .define(
        "log.retention.ms",
        Type.LONG,
        None,
        None,
        H,
        "Time in ms a log segment is kept before deletion (-1: no limit); log.retention.minutes when unset.",
    )
    .define(
        "log.retention.minutes",
        Type.INT,
        None,
        None,
        H,
        "Time in minutes a log segment is kept before deletion; secondary to log.retention.ms.",
    )
    .define(
        "log.retention.hours",
        Type.INT,
        168,
        None,
        H,
        "Time in hours a log segment is kept before deletion; tertiary to log.retention.ms.",
    )
    .define(
        "log.retention.bytes",
        Type.LONG,
        -1,
        None,
        H,
        "Maximum size in bytes of a partition's log before old segments are deleted (-1: no limit).",
    )
    .define(
        "log.retention.check.interval.ms",
        Type.LONG,
        300000,
        at_least(1),
        M,
        "Frequency in ms at which logs are checked for segments eligible for deletion.",
    )
    .define(
        "log.cleanup.policy",
        Type.LIST,
        "delete",
        in_values("delete", "compact"),
        M,
        "Default cleanup policy of segments beyond the retention window: delete, compact, or both.",
    )
    .define(
        "log.cleaner.enable",
        Type.BOOLEAN,
        True,
        None,
        M,
        "Whether the log cleaner runs, compacting topics whose cleanup policy is compact.",
    )
    .define(
        "log.cleaner.threads",
        Type.INT,
        1,
        at_least(0),
        M,
        "Number of background threads for log cleaning. Accepted; not used by pykbroker yet.",
    )
    .define(
        "log.cleaner.backoff.ms",
        Type.LONG,
        15000,
        at_least(0),
        M,
        "Time in ms the cleaner sleeps when no log needs cleaning.",
    )
    .define(
        "log.cleaner.min.cleanable.ratio",
        Type.DOUBLE,
        0.5,
        between(0, 1),
        M,
        "Minimum ratio of dirty log to total log for a log to be eligible for cleaning.",
    )
    .define(
        "log.cleaner.delete.retention.ms",
        Type.LONG,
        86400000,
        at_least(0),
        M,
        "Time in ms delete tombstones are kept on compacted topics.",
    )
    .define(
        "log.cleaner.min.compaction.lag.ms",
        Type.LONG,
        0,
        at_least(0),
        M,
        "Minimum time in ms a message stays uncompacted in the log.",
    )
    .define(
        "log.cleaner.max.compaction.lag.ms",
        Type.LONG,
        LONG_MAX,
        at_least(1),
        M,
        "Maximum time in ms a message stays ineligible for compaction in the log.",
    )
    .define(
        "log.cleaner.dedupe.buffer.size",
        Type.LONG,
        134217728,
        None,
        M,
        "Total memory in bytes used for log deduplication across all cleaner threads. Accepted; not used by "
        "pykbroker yet.",
    )
    .define(
        "log.index.size.max.bytes",
        Type.INT,
        10485760,
        at_least(4),
        M,
        "Maximum size in bytes of the offset and time indexes of a segment.",
    )
    .define(
        "log.index.interval.bytes",
        Type.INT,
        4096,
        at_least(0),
        M,
        "Bytes of log appended between two offset index entries.",
    )
    .define(
        "log.flush.interval.messages",
        Type.LONG,
        LONG_MAX,
        at_least(1),
        H,
        "Number of messages accumulated on a partition before its log is flushed to disk.",
    )
    .define(
        "log.flush.interval.ms",
        Type.LONG,
        None,
        None,
        H,
        "Maximum time in ms a message stays unflushed; log.flush.scheduler.interval.ms when unset.",
    )
    .define(
        "log.flush.scheduler.interval.ms",
        Type.LONG,
        LONG_MAX,
        None,
        H,
        "Frequency in ms at which the log flusher checks whether any log needs flushing.",
    )
    .define(
        "log.flush.offset.checkpoint.interval.ms",
        Type.INT,
        60000,
        at_least(0),
        H,
        "Frequency in ms at which the logs' recovery points are checkpointed.",
    )
    .define(
        "log.flush.start.offset.checkpoint.interval.ms",
        Type.INT,
        60000,
        at_least(0),
        H,
        "Frequency in ms at which the logs' start offsets are checkpointed.",
    )
    .define(
        "log.segment.delete.delay.ms",
        Type.LONG,
        60000,
        at_least(0),
        H,
        "Time in ms to wait before deleting a file from the filesystem.",
    )
    .define("log.preallocate", Type.BOOLEAN, False, None, M, "Whether to preallocate the file of a new segment.")
    .define(
        "log.message.timestamp.type",
        Type.STRING,
        "CreateTime",
        in_values("CreateTime", "LogAppendTime"),
        M,
        "Whether record timestamps are the producer's (CreateTime) or the broker's (LogAppendTime).",
    )
    .define(
        "log.message.timestamp.before.max.ms",
        Type.LONG,
        LONG_MAX,
        at_least(0),
        M,
        "Maximum time in ms a CreateTime timestamp may lie before the broker's time.",
    )
    .define(
        "log.message.timestamp.after.max.ms",
        Type.LONG,
        LONG_MAX,
        at_least(0),
        M,
        "Maximum time in ms a CreateTime timestamp may lie after the broker's time.",
    )
    .define(
        "log.message.downconversion.enable",
        Type.BOOLEAN,
        True,
        None,
        L,
        "Whether records are down-converted for consumers using old fetch versions.",
    )
    .define(
        "log.initial.task.delay.ms",
        Type.LONG,
        30000,
        at_least(0),
        L,
        "Delay in ms before the first run of the log background tasks.",
    )
    .define(
        "num.recovery.threads.per.data.dir",
        Type.INT,
        1,
        at_least(1),
        H,
        "Number of threads per data directory for log recovery at start-up and flushing at shutdown. Accepted; "
        "not used by pykbroker yet.",
    )
)
