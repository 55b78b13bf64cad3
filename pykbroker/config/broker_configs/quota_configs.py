"""Quota keys: Kafka's ``QuotaConfig`` (the sample windows of the client quota managers).

Part of the broker's ConfigDef (:data:`pykbroker.config.kafka_config_def.BROKER_CONFIG_DEF`, the merge of
these per-area ConfigDefs, as Kafka's ``AbstractKafkaConfig.CONFIG_DEF``). Every key has a one-sentence doc with its
unit; keys that pykbroker accepts for compatibility but does not act on yet say so in their doc.
"""

from __future__ import annotations

from pykbroker.config.broker_configs.common import L
from pykbroker.config.config_def import ConfigDef, Type, at_least

QUOTA_CONFIG_DEF = (
    ConfigDef()
    .define(
        "quota.window.num",
        Type.INT,
        11,
        at_least(1),
        L,
        "Number of samples kept in memory for client quotas (produce and fetch byte rates).",
    )
    .define(
        "quota.window.size.seconds",
        Type.INT,
        1,
        at_least(1),
        L,
        "Time span in seconds of each sample of client quotas.",
    )
)
