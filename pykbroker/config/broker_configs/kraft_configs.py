"""KRaft keys: Kafka's ``KRaftConfigs`` (roles, node id, controller listeners, broker heartbeats and
registration), ``QuorumConfig`` (controller.quorum.*) and ``MetadataLogConfig`` (metadata.log.*, metadata.max.*).

Part of the broker's ConfigDef (:data:`pykbroker.config.kafka_config_def.BROKER_CONFIG_DEF`, the merge of
these per-area ConfigDefs, as Kafka's ``AbstractKafkaConfig.CONFIG_DEF``). Every key has a one-sentence doc with its
unit; keys that pykbroker accepts for compatibility but does not act on yet say so in their doc.
"""

from __future__ import annotations

from pykbroker.config.broker_configs.common import H, L, M
from pykbroker.config.config_def import ConfigDef, Type, at_least, in_values

KRAFT_CONFIG_DEF = (
    ConfigDef()
    .define(
        "process.roles",
        Type.LIST,
        None,
        in_values("broker", "controller"),
        H,
        "The roles this process plays: 'broker', 'controller', or 'broker,controller'.",
    )
    .define("node.id", Type.INT, -1, None, H, "The node ID associated with the roles this process plays.")
    .define(
        "controller.listener.names",
        Type.LIST,
        None,
        None,
        H,
        "Comma-separated names of the listeners used by the controller.",
    )
    .define(
        "controller.quorum.voters",
        Type.LIST,
        "",
        None,
        H,
        "The static voter set of the metadata quorum, as a comma-separated list of id@host:port entries.",
    )
    .define(
        "controller.quorum.bootstrap.servers",
        Type.LIST,
        "",
        None,
        H,
        "Comma-separated host:port list of controllers used to discover the metadata quorum. Accepted; not used "
        "by pykbroker yet.",
    )
    .define(
        "controller.quorum.election.timeout.ms",
        Type.INT,
        1000,
        None,
        H,
        "Maximum time in ms without fetching from the leader before a voter starts a new election. Accepted; not "
        "used by pykbroker yet.",
    )
    .define(
        "controller.quorum.fetch.timeout.ms",
        Type.INT,
        2000,
        None,
        H,
        "Maximum time in ms without a successful fetch from the leader before a voter becomes a candidate. "
        "Accepted; not used by pykbroker yet.",
    )
    .define(
        "controller.quorum.election.backoff.max.ms",
        Type.INT,
        1000,
        None,
        H,
        "Maximum time in ms to back off before starting a new election, against split votes. Accepted; not used "
        "by pykbroker yet.",
    )
    .define(
        "controller.quorum.append.linger.ms",
        Type.INT,
        25,
        None,
        M,
        "Time in ms the quorum leader lets writes accumulate before appending and flushing them.",
    )
    .define(
        "controller.quorum.request.timeout.ms",
        Type.INT,
        2000,
        None,
        M,
        "Maximum time in ms to wait for the response to a quorum request. Accepted; not used by pykbroker yet.",
    )
    .define(
        "controller.quorum.retry.backoff.ms",
        Type.INT,
        20,
        None,
        L,
        "Time in ms to wait before retrying a failed quorum request. Accepted; not used by pykbroker yet.",
    )
    .define(
        "metadata.log.dir",
        Type.STRING,
        None,
        None,
        H,
        "Directory of the cluster metadata log (__cluster_metadata); the first of log.dirs when unset.",
    )
    .define(
        "metadata.log.segment.bytes",
        Type.INT,
        1073741824,
        at_least(12),
        H,
        "Maximum size in bytes of a segment of the cluster metadata log.",
    )
    .define(
        "metadata.log.max.record.bytes.between.snapshots",
        Type.LONG,
        20 * 1024 * 1024,
        at_least(1),
        H,
        "The maximum number of bytes in the log between the latest snapshot and the high-watermark needed "
        "before generating a new snapshot.",
    )
    .define(
        "metadata.log.max.snapshot.interval.ms",
        Type.LONG,
        60 * 60 * 1000,
        at_least(0),
        H,
        "The maximum number of milliseconds to wait to generate a snapshot if there are committed records in "
        "the log that are not included in the latest snapshot. A value of zero disables time based snapshot "
        "generation.",
    )
    .define(
        "metadata.max.retention.bytes",
        Type.LONG,
        100 * 1024 * 1024,
        None,
        H,
        "The maximum combined size of the metadata log and snapshots before deleting old snapshots and log "
        "files. Accepted; not enforced by pykbroker: the metadata log is cleaned up to its newest snapshot as "
        "soon as the snapshot is written.",
    )
    .define(
        "metadata.max.retention.ms",
        Type.LONG,
        7 * 24 * 60 * 60 * 1000,
        None,
        H,
        "The number of milliseconds to keep a metadata log file or snapshot before deleting it. Accepted; not "
        "enforced by pykbroker: the metadata log is cleaned up to its newest snapshot as soon as the snapshot "
        "is written.",
    )
    .define(
        "metadata.max.idle.interval.ms",
        Type.INT,
        500,
        at_least(0),
        L,
        "Frequency in ms at which the active controller appends no-op records to advance the metadata high "
        "watermark (0 disables). Accepted; not used by pykbroker yet.",
    )
    .define(
        "broker.heartbeat.interval.ms",
        Type.INT,
        2000,
        None,
        M,
        "The length of time in milliseconds between broker heartbeats. Used when running in KRaft mode.",
    )
    .define(
        "broker.session.timeout.ms",
        Type.INT,
        9000,
        None,
        M,
        "The length of time in milliseconds that a broker lease lasts if no heartbeats are made (the active "
        "controller then fences the broker). Used when running in KRaft mode.",
    )
    .define(
        "initial.broker.registration.timeout.ms",
        Type.INT,
        60000,
        None,
        M,
        "Maximum time in ms a starting broker waits to register with the controller quorum before it fails.",
    )
    .define(
        "sasl.mechanism.controller.protocol",
        Type.STRING,
        "GSSAPI",
        None,
        M,
        "SASL mechanism of this node's connections to the controllers when the controller listener is "
        "SASL_PLAINTEXT or SASL_SSL (use PLAIN or OAUTHBEARER: SCRAM credentials live in the metadata log the "
        "controllers serve; credentials from listener.name.<listener>.<mechanism>.sasl.jaas.config).",
    )
)
