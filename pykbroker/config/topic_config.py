"""Topic-level configuration key names: Kafka's ``org.apache.kafka.common.config.TopicConfig``.

The one spelling of each key of :data:`pykbroker.log.log_config.TOPIC_CONFIG_DEF` (where each is defined with its
type, default, validator, doc and broker synonyms); code that names a topic key imports it from here. A constant is
named after its key (``retention.ms`` -> ``RETENTION_MS_CONFIG``, as Kafka's mostly are). Keys that are also broker
keys (``min.insync.replicas``, ``unclean.leader.election.enable``, ``compression.type``) are the same constants in
their broker area module, as Kafka's ``ServerLogConfigs.MIN_IN_SYNC_REPLICAS_CONFIG`` is
``TopicConfig.MIN_IN_SYNC_REPLICAS_CONFIG``.
"""

from __future__ import annotations

SEGMENT_BYTES_CONFIG = "segment.bytes"
SEGMENT_MS_CONFIG = "segment.ms"
SEGMENT_JITTER_MS_CONFIG = "segment.jitter.ms"
SEGMENT_INDEX_BYTES_CONFIG = "segment.index.bytes"
FLUSH_MESSAGES_CONFIG = "flush.messages"
FLUSH_MS_CONFIG = "flush.ms"
RETENTION_BYTES_CONFIG = "retention.bytes"
RETENTION_MS_CONFIG = "retention.ms"
MAX_MESSAGE_BYTES_CONFIG = "max.message.bytes"
INDEX_INTERVAL_BYTES_CONFIG = "index.interval.bytes"
DELETE_RETENTION_MS_CONFIG = "delete.retention.ms"
MIN_COMPACTION_LAG_MS_CONFIG = "min.compaction.lag.ms"
MAX_COMPACTION_LAG_MS_CONFIG = "max.compaction.lag.ms"
FILE_DELETE_DELAY_MS_CONFIG = "file.delete.delay.ms"
MIN_CLEANABLE_DIRTY_RATIO_CONFIG = "min.cleanable.dirty.ratio"
CLEANUP_POLICY_CONFIG = "cleanup.policy"
UNCLEAN_LEADER_ELECTION_ENABLE_CONFIG = "unclean.leader.election.enable"
MIN_INSYNC_REPLICAS_CONFIG = "min.insync.replicas"
COMPRESSION_TYPE_CONFIG = "compression.type"
COMPRESSION_GZIP_LEVEL_CONFIG = "compression.gzip.level"
COMPRESSION_LZ4_LEVEL_CONFIG = "compression.lz4.level"
COMPRESSION_ZSTD_LEVEL_CONFIG = "compression.zstd.level"
PREALLOCATE_CONFIG = "preallocate"
MESSAGE_TIMESTAMP_TYPE_CONFIG = "message.timestamp.type"
MESSAGE_TIMESTAMP_DIFFERENCE_MAX_MS_CONFIG = "message.timestamp.difference.max.ms"
MESSAGE_TIMESTAMP_BEFORE_MAX_MS_CONFIG = "message.timestamp.before.max.ms"
MESSAGE_TIMESTAMP_AFTER_MAX_MS_CONFIG = "message.timestamp.after.max.ms"
LEADER_REPLICATION_THROTTLED_REPLICAS_CONFIG = "leader.replication.throttled.replicas"
FOLLOWER_REPLICATION_THROTTLED_REPLICAS_CONFIG = "follower.replication.throttled.replicas"
MESSAGE_DOWNCONVERSION_ENABLE_CONFIG = "message.downconversion.enable"
REMOTE_STORAGE_ENABLE_CONFIG = "remote.storage.enable"
LOCAL_RETENTION_MS_CONFIG = "local.retention.ms"
LOCAL_RETENTION_BYTES_CONFIG = "local.retention.bytes"
REMOTE_LOG_COPY_DISABLE_CONFIG = "remote.log.copy.disable"
REMOTE_LOG_DELETE_ON_DISABLE_CONFIG = "remote.log.delete.on.disable"
