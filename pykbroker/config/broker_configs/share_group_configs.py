"""Share-group data-path keys (KIP-932, part of Kafka's ``ShareGroupConfig``): the delivery count limit, the
in-flight record locks of one share partition, the share sessions a broker keeps and the ShareFetch purgatory's
purge interval.

Part of the broker's ConfigDef (:data:`pykbroker.config.kafka_config_def.BROKER_CONFIG_DEF`). The share-group keys
that bound group configs (``group.share.[min.|max.]record.lock.duration.ms``, session timeouts, heartbeat
intervals) and the membership keys live beside the other group coordinator keys (:mod:`.group_coordinator_configs`).
"""

from __future__ import annotations

from pykbroker.config.broker_configs.common import M
from pykbroker.config.config_def import ConfigDef, Type, at_least, between

GROUP_SHARE_DELIVERY_COUNT_LIMIT_CONFIG = "group.share.delivery.count.limit"
GROUP_SHARE_PARTITION_MAX_RECORD_LOCKS_CONFIG = "group.share.partition.max.record.locks"
GROUP_SHARE_MAX_SHARE_SESSIONS_CONFIG = "group.share.max.share.sessions"
SHARE_FETCH_PURGATORY_PURGE_INTERVAL_REQUESTS_CONFIG = "share.fetch.purgatory.purge.interval.requests"

SHARE_GROUP_CONFIG_DEF = (
    ConfigDef()
    .define(
        GROUP_SHARE_DELIVERY_COUNT_LIMIT_CONFIG,
        Type.INT,
        5,
        between(2, 10),
        M,
        "The number of times a record is delivered to share consumers before it is archived (never delivered again).",
    )
    .define(
        GROUP_SHARE_PARTITION_MAX_RECORD_LOCKS_CONFIG,
        Type.INT,
        2000,
        between(100, 10000),
        M,
        "The most records of one share partition that can be in flight (acquired, awaiting acknowledgement) at once.",
    )
    .define(
        GROUP_SHARE_MAX_SHARE_SESSIONS_CONFIG,
        Type.INT,
        2000,
        at_least(1),
        M,
        "The number of share sessions (one per share consumer and broker) a broker keeps.",
    )
    .define(
        SHARE_FETCH_PURGATORY_PURGE_INTERVAL_REQUESTS_CONFIG,
        Type.INT,
        1000,
        None,
        M,
        "The purge interval (in number of requests) of the share fetch request purgatory.",
    )
)
