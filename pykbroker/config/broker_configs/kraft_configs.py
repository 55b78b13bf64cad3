"""KRaft keys: Kafka's ``KRaftConfigs`` (roles, node id, controller listeners, broker heartbeats and
registration), ``QuorumConfig`` (controller.quorum.*) and ``MetadataLogConfig`` (metadata.log.*, metadata.max.*).

Part of the broker's ConfigDef (:data:`pykbroker.config.kafka_config_def.BROKER_CONFIG_DEF`, the merge of
these per-area ConfigDefs, as Kafka's ``AbstractKafkaConfig.CONFIG_DEF``). Every key has a one-sentence doc with its
unit; keys that pykbroker accepts for compatibility but does not act on yet say so in their doc.
"""

from __future__ import annotations

from pykbroker.config.broker_configs.common import H, L, M
from pykbroker.config.config_def import ConfigDef, Type, at_least, in_values

# The key names (Kafka's ``*_CONFIG`` constants), each named after its key (``log.retention.ms`` ->
# ``LOG_RETENTION_MS_CONFIG``): the one spelling of each key, imported by the code that reads it.
PROCESS_ROLES_CONFIG = "process.roles"
NODE_ID_CONFIG = "node.id"
CONTROLLER_LISTENER_NAMES_CONFIG = "controller.listener.names"
CONTROLLER_QUORUM_VOTERS_CONFIG = "controller.quorum.voters"
CONTROLLER_QUORUM_BOOTSTRAP_SERVERS_CONFIG = "controller.quorum.bootstrap.servers"
CONTROLLER_QUORUM_ELECTION_TIMEOUT_MS_CONFIG = "controller.quorum.election.timeout.ms"
CONTROLLER_QUORUM_FETCH_TIMEOUT_MS_CONFIG = "controller.quorum.fetch.timeout.ms"
CONTROLLER_QUORUM_ELECTION_BACKOFF_MAX_MS_CONFIG = "controller.quorum.election.backoff.max.ms"
CONTROLLER_QUORUM_APPEND_LINGER_MS_CONFIG = "controller.quorum.append.linger.ms"
CONTROLLER_QUORUM_REQUEST_TIMEOUT_MS_CONFIG = "controller.quorum.request.timeout.ms"
CONTROLLER_QUORUM_RETRY_BACKOFF_MS_CONFIG = "controller.quorum.retry.backoff.ms"
METADATA_LOG_DIR_CONFIG = "metadata.log.dir"
METADATA_LOG_SEGMENT_BYTES_CONFIG = "metadata.log.segment.bytes"
METADATA_LOG_MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS_CONFIG = "metadata.log.max.record.bytes.between.snapshots"
METADATA_LOG_MAX_SNAPSHOT_INTERVAL_MS_CONFIG = "metadata.log.max.snapshot.interval.ms"
METADATA_MAX_RETENTION_BYTES_CONFIG = "metadata.max.retention.bytes"
METADATA_MAX_RETENTION_MS_CONFIG = "metadata.max.retention.ms"
METADATA_MAX_IDLE_INTERVAL_MS_CONFIG = "metadata.max.idle.interval.ms"
BROKER_HEARTBEAT_INTERVAL_MS_CONFIG = "broker.heartbeat.interval.ms"
BROKER_SESSION_TIMEOUT_MS_CONFIG = "broker.session.timeout.ms"
INITIAL_BROKER_REGISTRATION_TIMEOUT_MS_CONFIG = "initial.broker.registration.timeout.ms"
SASL_MECHANISM_CONTROLLER_PROTOCOL_CONFIG = "sasl.mechanism.controller.protocol"

KRAFT_CONFIG_DEF = (
    ConfigDef()
    .define(
        PROCESS_ROLES_CONFIG,
        Type.LIST,
        None,
        in_values("broker", "controller"),
        H,
        "The roles this process plays: 'broker', 'controller', or 'broker,controller'.",
    )
    .define(NODE_ID_CONFIG, Type.INT, -1, None, H, "The node ID associated with the roles this process plays.")
    .define(
        CONTROLLER_LISTENER_NAMES_CONFIG,
        Type.LIST,
        None,
        None,
        H,
        "Comma-separated names of the listeners used by the controller.",
    )
    .define(
        CONTROLLER_QUORUM_VOTERS_CONFIG,
        Type.LIST,
        "",
        None,
        H,
        "The static voter set of the metadata quorum, as a comma-separated list of id@host:port entries.",
    )
    .define(
        CONTROLLER_QUORUM_BOOTSTRAP_SERVERS_CONFIG,
        Type.LIST,
        "",
        None,
        H,
        "Comma-separated host:port list of controllers used to discover the metadata quorum (KIP-853: the voters "
        "then come from the metadata log).",
    )
    .define(
        CONTROLLER_QUORUM_ELECTION_TIMEOUT_MS_CONFIG,
        Type.INT,
        1000,
        None,
        H,
        "Maximum time in ms without fetching from the leader before a voter starts a new election. Accepted; not "
        "used by pykbroker yet.",
    )
    .define(
        CONTROLLER_QUORUM_FETCH_TIMEOUT_MS_CONFIG,
        Type.INT,
        2000,
        None,
        H,
        "Maximum time in ms without a successful fetch from the leader before a voter becomes a candidate. "
        "Accepted; not used by pykbroker yet.",
    )
    .define(
        CONTROLLER_QUORUM_ELECTION_BACKOFF_MAX_MS_CONFIG,
        Type.INT,
        1000,
        None,
        H,
        "Maximum time in ms to back off before starting a new election, against split votes. Accepted; not used "
        "by pykbroker yet.",
    )
    .define(
        CONTROLLER_QUORUM_APPEND_LINGER_MS_CONFIG,
        Type.INT,
        25,
        None,
        M,
        "Time in ms the quorum leader lets writes accumulate before appending and flushing them.",
    )
    .define(
        CONTROLLER_QUORUM_REQUEST_TIMEOUT_MS_CONFIG,
        Type.INT,
        2000,
        None,
        M,
        "Maximum time in ms to wait for the response to a quorum request. Accepted; not used by pykbroker yet.",
    )
    .define(
        CONTROLLER_QUORUM_RETRY_BACKOFF_MS_CONFIG,
        Type.INT,
        20,
        None,
        L,
        "Time in ms to wait before retrying a failed quorum request. Accepted; not used by pykbroker yet.",
    )
    .define(
        METADATA_LOG_DIR_CONFIG,
        Type.STRING,
        None,
        None,
        H,
        "Directory of the cluster metadata log (__cluster_metadata); the first of log.dirs when unset.",
    )
    .define(
        METADATA_LOG_SEGMENT_BYTES_CONFIG,
        Type.INT,
        1073741824,
        at_least(12),
        H,
        "Maximum size in bytes of a segment of the cluster metadata log.",
    )
    .define(
        METADATA_LOG_MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS_CONFIG,
        Type.LONG,
        20 * 1024 * 1024,
        at_least(1),
        H,
        "The maximum number of bytes in the log between the latest snapshot and the high-watermark needed "
        "before generating a new snapshot.",
    )
    .define(
        METADATA_LOG_MAX_SNAPSHOT_INTERVAL_MS_CONFIG,
        Type.LONG,
        60 * 60 * 1000,
        at_least(0),
        H,
        "The maximum number of milliseconds to wait to generate a snapshot if there are committed records in "
        "the log that are not included in the latest snapshot. A value of zero disables time based snapshot "
        "generation.",
    )
    .define(
        METADATA_MAX_RETENTION_BYTES_CONFIG,
        Type.LONG,
        100 * 1024 * 1024,
        None,
        H,
        "The maximum combined size of the metadata log and snapshots before deleting old snapshots and log "
        "files. Accepted; not enforced by pykbroker: the metadata log is cleaned up to its newest snapshot as "
        "soon as the snapshot is written.",
    )
    .define(
        METADATA_MAX_RETENTION_MS_CONFIG,
        Type.LONG,
        7 * 24 * 60 * 60 * 1000,
        None,
        H,
        "The number of milliseconds to keep a metadata log file or snapshot before deleting it. Accepted; not "
        "enforced by pykbroker: the metadata log is cleaned up to its newest snapshot as soon as the snapshot "
        "is written.",
    )
    .define(
        METADATA_MAX_IDLE_INTERVAL_MS_CONFIG,
        Type.INT,
        500,
        at_least(0),
        L,
        "Frequency in ms at which the active controller appends no-op records to advance the metadata high "
        "watermark (0 disables). Accepted; not used by pykbroker yet.",
    )
    .define(
        BROKER_HEARTBEAT_INTERVAL_MS_CONFIG,
        Type.INT,
        2000,
        None,
        M,
        "The length of time in milliseconds between broker heartbeats. Used when running in KRaft mode.",
    )
    .define(
        BROKER_SESSION_TIMEOUT_MS_CONFIG,
        Type.INT,
        9000,
        None,
        M,
        "The length of time in milliseconds that a broker lease lasts if no heartbeats are made (the active "
        "controller then fences the broker). Used when running in KRaft mode.",
    )
    .define(
        INITIAL_BROKER_REGISTRATION_TIMEOUT_MS_CONFIG,
        Type.INT,
        60000,
        None,
        M,
        "Maximum time in ms a starting broker waits to register with the controller quorum before it fails.",
    )
    .define(
        SASL_MECHANISM_CONTROLLER_PROTOCOL_CONFIG,
        Type.STRING,
        "GSSAPI",
        None,
        M,
        "SASL mechanism of this node's connections to the controllers when the controller listener is "
        "SASL_PLAINTEXT or SASL_SSL (use PLAIN or OAUTHBEARER: SCRAM credentials live in the metadata log the "
        "controllers serve; credentials from listener.name.<listener>.<mechanism>.sasl.jaas.config).",
    )
)
