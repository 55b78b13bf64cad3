"""Transaction keys: Kafka's ``TransactionLogConfig`` and ``TransactionStateManagerConfig`` (the
__transaction_state topic, timeouts, expiration) and ``ProducerStateManagerConfig`` (producer id expiration).

Part of the broker's ConfigDef (:data:`pykbroker.config.kafka_config_def.BROKER_CONFIG_DEF`, the merge of
these per-area ConfigDefs, as Kafka's ``AbstractKafkaConfig.CONFIG_DEF``). Every key has a one-sentence doc with its
unit; keys that pykbroker accepts for compatibility but does not act on yet say so in their doc.
"""

from __future__ import annotations

from pykbroker.config.broker_configs.common import H, L
from pykbroker.config.config_def import ConfigDef, Type, at_least

# The key names (Kafka's ``*_CONFIG`` constants), each named after its key (``log.retention.ms`` ->
# ``LOG_RETENTION_MS_CONFIG``): the one spelling of each key, imported by the code that reads it.
PRODUCER_ID_EXPIRATION_MS_CONFIG = "producer.id.expiration.ms"
TRANSACTION_STATE_LOG_NUM_PARTITIONS_CONFIG = "transaction.state.log.num.partitions"
TRANSACTION_STATE_LOG_REPLICATION_FACTOR_CONFIG = "transaction.state.log.replication.factor"
TRANSACTION_STATE_LOG_MIN_ISR_CONFIG = "transaction.state.log.min.isr"
TRANSACTION_STATE_LOG_SEGMENT_BYTES_CONFIG = "transaction.state.log.segment.bytes"
TRANSACTION_MAX_TIMEOUT_MS_CONFIG = "transaction.max.timeout.ms"
TRANSACTIONAL_ID_EXPIRATION_MS_CONFIG = "transactional.id.expiration.ms"
TRANSACTION_PARTITION_VERIFICATION_ENABLE_CONFIG = "transaction.partition.verification.enable"
TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS_CONFIG = (
    "transaction.abort.timed.out.transaction.cleanup.interval.ms"
)
TRANSACTION_REMOVE_EXPIRED_TRANSACTION_CLEANUP_INTERVAL_MS_CONFIG = (
    "transaction.remove.expired.transaction.cleanup.interval.ms"
)

TRANSACTION_CONFIG_DEF = (
    ConfigDef()
    .define(
        PRODUCER_ID_EXPIRATION_MS_CONFIG,
        Type.INT,
        86400000,
        at_least(1),
        L,
        "Time in ms a partition leader keeps the state of a producer ID that has not written to it.",
    )
    .define(
        TRANSACTION_STATE_LOG_NUM_PARTITIONS_CONFIG,
        Type.INT,
        50,
        at_least(1),
        H,
        "Number of partitions of the transaction topic (__transaction_state), created on the first transactional "
        "FindCoordinator.",
    )
    .define(
        TRANSACTION_STATE_LOG_REPLICATION_FACTOR_CONFIG,
        Type.SHORT,
        3,
        at_least(1),
        H,
        "Replication factor of the transaction topic (capped at the live brokers).",
    )
    .define(
        TRANSACTION_STATE_LOG_MIN_ISR_CONFIG,
        Type.INT,
        2,
        at_least(1),
        H,
        "min.insync.replicas of the transaction topic (capped at its replication factor).",
    )
    .define(
        TRANSACTION_STATE_LOG_SEGMENT_BYTES_CONFIG,
        Type.INT,
        104857600,
        at_least(1),
        H,
        "Segment size in bytes of the transaction topic.",
    )
    .define(
        TRANSACTION_MAX_TIMEOUT_MS_CONFIG,
        Type.INT,
        900000,
        at_least(1),
        H,
        "Maximum transaction timeout in ms a producer may ask for (larger: INVALID_TRANSACTION_TIMEOUT).",
    )
    .define(
        TRANSACTIONAL_ID_EXPIRATION_MS_CONFIG,
        Type.INT,
        604800000,
        at_least(1),
        H,
        "Time in ms the coordinator keeps a transactional ID that receives no transaction status updates.",
    )
    .define(
        TRANSACTION_PARTITION_VERIFICATION_ENABLE_CONFIG,
        Type.BOOLEAN,
        True,
        None,
        L,
        "Whether a partition leader verifies with the transaction coordinator that the partition is in the "
        "producer's transaction before its first transactional write (KIP-890 part 1).",
    )
    .define(
        TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS_CONFIG,
        Type.INT,
        10000,
        at_least(1),
        L,
        "Interval in ms at which the coordinator aborts transactions that exceeded their timeout.",
    )
    .define(
        TRANSACTION_REMOVE_EXPIRED_TRANSACTION_CLEANUP_INTERVAL_MS_CONFIG,
        Type.INT,
        3600000,
        at_least(1),
        L,
        "Interval in ms at which the coordinator removes transactional IDs expired by transactional.id.expiration.ms.",
    )
)
