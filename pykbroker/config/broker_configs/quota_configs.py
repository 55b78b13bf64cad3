"""Quota keys: Kafka's ``QuotaConfig`` (the sample windows of the client quota managers).

Part of the broker's ConfigDef (:data:`pykbroker.config.kafka_config_def.BROKER_CONFIG_DEF`, the merge of
these per-area ConfigDefs, as Kafka's ``AbstractKafkaConfig.CONFIG_DEF``). Every key has a one-sentence doc with its
unit; keys that pykbroker accepts for compatibility but does not act on yet say so in their doc.
"""

from __future__ import annotations

from pykbroker.config.broker_configs.common import L
from pykbroker.config.config_def import ConfigDef, Type, at_least

# The key names (Kafka's ``*_CONFIG`` constants), each named after its key (``log.retention.ms`` ->
# ``LOG_RETENTION_MS_CONFIG``): the one spelling of each key, imported by the code that reads it.
QUOTA_WINDOW_NUM_CONFIG = "quota.window.num"
QUOTA_WINDOW_SIZE_SECONDS_CONFIG = "quota.window.size.seconds"

QUOTA_CONFIG_DEF = (
    ConfigDef()
    .define(
        QUOTA_WINDOW_NUM_CONFIG,
        Type.INT,
        11,
        at_least(1),
        L,
        "Number of samples kept in memory for client quotas (produce and fetch byte rates).",
    )
    .define(
        QUOTA_WINDOW_SIZE_SECONDS_CONFIG,
        Type.INT,
        1,
        at_least(1),
        L,
        "Time span in seconds of each sample of client quotas.",
    )
)
