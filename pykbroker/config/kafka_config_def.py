"""The broker's configuration keys: Kafka's names, types, defaults and validators.

Mirrors ``SocketServerConfigs``, ``ServerConfigs``, ``KRaftConfigs``, ``ReplicationConfigs``,
``ServerLogConfigs``, ``GroupCoordinatorConfig`` and ``TransactionLogConfig`` (defaults as in Kafka 4.0).
Every key has a one-sentence doc with its unit; keys that pykbroker accepts for compatibility but does
not act on yet say so in their doc.
"""

from __future__ import annotations

from pykbroker.config.config_def import ConfigDef, ConfigException, Type, at_least, between, in_values

H, M, L = "high", "medium", "low"
INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


def _host_port(key: str, value) -> None:
    _host, sep, port = (value or "").rpartition(":")
    if value is not None and (not sep or not port.isdigit() or int(port) > 65535):
        raise ConfigException(key, value, "Expected host:port (an empty host: every interface; port 0: ephemeral)")


_host_port.__doc__ = "host:port"

BROKER_CONFIG_DEF = (
    ConfigDef()
    # -- KRaft / server core --------------------------------------------------------------------
    .define(
        "process.roles",
        Type.LIST,
        None,
        in_values("broker", "controller"),
        H,
        "The roles this process plays: 'broker', 'controller', or 'broker,controller'.",
    )
    .define("node.id", Type.INT, -1, None, H, "The node ID associated with the roles this process plays.")
    .define("broker.id", Type.INT, -1, None, H, "Alias of node.id, kept for compatibility.")
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
        "broker.rack",
        Type.STRING,
        None,
        None,
        M,
        "Rack of the broker, used by rack-aware replica placement (e.g. 'us-east-1d').",
    )
    .define(
        "num.io.threads",
        Type.INT,
        8,
        at_least(1),
        H,
        "Number of request handler threads the server uses to process requests, including disk I/O.",
    )
    .define(
        "background.threads",
        Type.INT,
        10,
        at_least(1),
        H,
        "Number of threads for background tasks (retention, flushes, checkpoints).",
    )
    .define(
        "message.max.bytes",
        Type.INT,
        1048588,
        at_least(0),
        H,
        "Largest record batch size in bytes the broker accepts (after compression); the default of topics' "
        "max.message.bytes.",
    )
    .define(
        "request.timeout.ms",
        Type.INT,
        30000,
        None,
        M,
        "Maximum time in ms the broker waits for the response to a request it sent.",
    )
    .define(
        "delete.topic.enable",
        Type.BOOLEAN,
        True,
        None,
        H,
        "Whether topics can be deleted; when false, DeleteTopics has no effect.",
    )
    .define(
        "compression.type",
        Type.STRING,
        "producer",
        in_values(*COMPRESSION_TYPES),
        H,
        "Final compression type of topics: uncompressed, gzip, snappy, lz4, zstd, or 'producer' to keep the "
        "producer's codec.",
    )
    .define(
        "fetch.max.bytes",
        Type.INT,
        57671680,
        at_least(1024),
        M,
        "Maximum number of bytes returned for a fetch request (at least 1024).",
    )
    .define(
        "max.incremental.fetch.session.cache.slots",
        Type.INT,
        1000,
        at_least(0),
        M,
        "Maximum number of incremental fetch sessions cached by the broker.",
    )
    .define(
        "max.request.partition.size.limit",
        Type.INT,
        2000,
        at_least(1),
        M,
        "The maximum number of partitions can be served in one request (DescribeTopicPartitions).",
    )
    .define(
        "fetch.purgatory.purge.interval.requests",
        Type.INT,
        1000,
        None,
        M,
        "Number of fetch requests added to the fetch purgatory between two purges of its completed operations.",
    )
    .define(
        "producer.purgatory.purge.interval.requests",
        Type.INT,
        1000,
        None,
        M,
        "Number of produce requests added to the producer purgatory between two purges of its completed operations.",
    )
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
        "default.replication.factor",
        Type.INT,
        1,
        None,
        M,
        "Default replication factor of automatically created topics.",
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
        "replica.lag.time.max.ms",
        Type.LONG,
        30000,
        None,
        H,
        "Time in ms after which a follower that has not caught up with the leader (or not fetched) leaves the ISR.",
    )
    .define(
        "num.replica.fetchers",
        Type.INT,
        1,
        at_least(1),
        H,
        "Number of ReplicaFetcherThreads per source broker; partitions are spread over them by hash.",
    )
    .define(
        "replica.fetch.max.bytes",
        Type.INT,
        1048576,
        at_least(0),
        M,
        "Bytes of messages a follower tries to fetch per partition (at least one batch is always returned).",
    )
    .define(
        "replica.fetch.response.max.bytes",
        Type.INT,
        10485760,
        at_least(0),
        M,
        "Maximum bytes of a whole follower fetch response (at least one batch is always returned).",
    )
    .define(
        "replica.fetch.wait.max.ms",
        Type.INT,
        500,
        None,
        M,
        "Maximum wait in ms of a follower's fetch at the leader; keep it below replica.lag.time.max.ms.",
    )
    .define(
        "replica.fetch.min.bytes",
        Type.INT,
        1,
        None,
        M,
        "Minimum bytes a follower's fetch waits for, up to replica.fetch.wait.max.ms.",
    )
    .define(
        "replica.fetch.backoff.ms",
        Type.INT,
        1000,
        at_least(0),
        M,
        "Time in ms a ReplicaFetcherThread sleeps after a fetch error before it retries.",
    )
    .define(
        "replica.socket.timeout.ms",
        Type.INT,
        30000,
        None,
        H,
        "Socket timeout in ms of follower fetch requests; at least replica.fetch.wait.max.ms.",
    )
    .define(
        "replica.socket.receive.buffer.bytes",
        Type.INT,
        65536,
        None,
        H,
        "SO_RCVBUF of the follower's connection to the leader (-1: the OS default).",
    )
    .define(
        "unclean.leader.election.enable",
        Type.BOOLEAN,
        False,
        None,
        H,
        "Whether replicas not in the ISR may be elected leader as a last resort, at the risk of data loss.",
    )
    .define(
        "auto.leader.rebalance.enable",
        Type.BOOLEAN,
        True,
        None,
        H,
        "Whether the controller moves leadership back to the preferred replicas periodically.",
    )
    .define(
        "leader.imbalance.check.interval.seconds",
        Type.LONG,
        300,
        at_least(1),
        H,
        "Frequency in seconds of the controller's partition-rebalance check.",
    )
    .define(
        "leader.imbalance.per.broker.percentage",
        Type.INT,
        10,
        None,
        H,
        "Leader imbalance allowed per broker, in percent, before a preferred-leader rebalance is triggered.",
    )
    .define(
        "replica.high.watermark.checkpoint.interval.ms",
        Type.LONG,
        5000,
        None,
        H,
        "Frequency in ms at which high watermarks are saved to disk.",
    )
    .define(
        "inter.broker.listener.name",
        Type.STRING,
        None,
        None,
        M,
        "Name of the listener used between brokers; security.inter.broker.protocol's listener when unset.",
    )
    .define(
        "security.inter.broker.protocol",
        Type.STRING,
        "PLAINTEXT",
        in_values(*SECURITY_PROTOCOLS),
        M,
        "Security protocol used between brokers when inter.broker.listener.name is not set.",
    )
    .define(
        "control.plane.listener.name",
        Type.STRING,
        None,
        None,
        H,
        "Name of the listener used for communication between controller and brokers.",
    )
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
    .define(
        "producer.id.expiration.ms",
        Type.INT,
        86400000,
        at_least(1),
        L,
        "Time in ms a partition leader keeps the state of a producer ID that has not written to it.",
    )
    .define(
        "metric.reporters",
        Type.LIST,
        "",
        None,
        L,
        "Classes used as metrics reporters, each built, configured with the broker's configuration and "
        "started at start-up, closed at shutdown. pykbroker.metrics.prometheus.PrometheusReporter serves "
        "the metrics in Prometheus text format on prometheus.metrics.listener (docs/METRICS.md). "
        "org.apache.kafka.common.metrics.JmxReporter is ignored with a warning.",
    )
    .define(
        "prometheus.metrics.listener",
        Type.STRING,
        "0.0.0.0:9404",
        _host_port,
        L,
        "host:port of the HTTP endpoint /metrics of the PrometheusReporter (a pykbroker key; port 0 = an "
        "ephemeral port, logged as 'Prometheus metrics endpoint listening on host:port').",
    )
    # -- socket server ---------------------------------------------------------------------------
    .define(
        "listeners",
        Type.LIST,
        "PLAINTEXT://:9092",
        None,
        H,
        "Comma-separated listener URIs (NAME://host:port) the server binds; port 0 picks a free port.",
    )
    .define(
        "advertised.listeners",
        Type.LIST,
        None,
        None,
        H,
        "Listeners published to clients in metadata when they differ from listeners.",
    )
    .define(
        "listener.security.protocol.map",
        Type.STRING,
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        None,
        L,
        "Map of listener names to security protocols, as NAME:PROTOCOL,...",
    )
    .define(
        "num.network.threads",
        Type.INT,
        3,
        at_least(1),
        H,
        "Number of network threads (Processors) per listener that receive requests and send responses.",
    )
    .define(
        "queued.max.requests",
        Type.INT,
        500,
        at_least(1),
        H,
        "Number of requests queued for the request handlers before the network threads stop reading.",
    )
    .define(
        "queued.max.request.bytes",
        Type.LONG,
        -1,
        None,
        M,
        "Number of queued request bytes allowed before no more requests are read (-1: no limit).",
    )
    .define(
        "socket.send.buffer.bytes",
        Type.INT,
        102400,
        None,
        H,
        "SO_SNDBUF of the server's sockets in bytes (-1: the OS default).",
    )
    .define(
        "socket.receive.buffer.bytes",
        Type.INT,
        102400,
        None,
        H,
        "SO_RCVBUF of the server's sockets in bytes (-1: the OS default).",
    )
    .define("socket.request.max.bytes", Type.INT, 104857600, at_least(1), H, "Maximum size in bytes of a request.")
    .define(
        "socket.listen.backlog.size",
        Type.INT,
        50,
        at_least(1),
        M,
        "Maximum number of pending connections on a listening socket.",
    )
    .define(
        "max.connections.per.ip",
        Type.INT,
        INT_MAX,
        at_least(0),
        M,
        "Maximum number of connections allowed from one IP address.",
    )
    .define(
        "max.connections.per.ip.overrides",
        Type.STRING,
        "",
        None,
        M,
        "Per-IP or per-hostname overrides of max.connections.per.ip, as host:count,...",
    )
    .define(
        "max.connections",
        Type.INT,
        INT_MAX,
        at_least(0),
        M,
        "Maximum number of connections the broker allows at any time.",
    )
    .define(
        "max.connection.creation.rate",
        Type.INT,
        INT_MAX,
        at_least(0),
        M,
        "Maximum rate of new connections the broker accepts, in connections per second. Accepted; not used by "
        "pykbroker yet.",
    )
    .define(
        "connections.max.idle.ms",
        Type.LONG,
        600000,
        None,
        M,
        "Time in ms after which the network threads close an idle connection.",
    )
    .define(
        "connection.failed.authentication.delay.ms",
        Type.INT,
        100,
        at_least(0),
        L,
        "Delay in ms before closing a connection whose authentication failed. Accepted; not used by pykbroker yet.",
    )
    .define(
        "connections.max.reauth.ms",
        Type.LONG,
        0,
        None,
        M,
        "Maximum session lifetime in ms of an authenticated connection before re-authentication (0: none). "
        "Accepted; not used by pykbroker yet.",
    )
    # -- log -------------------------------------------------------------------------------------
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
    # -- group coordinator / offsets -------------------------------------------------------------
    .define(
        "offsets.topic.num.partitions",
        Type.INT,
        50,
        at_least(1),
        H,
        "Number of partitions of the offsets topic (__consumer_offsets); do not change it after deployment.",
    )
    .define(
        "offsets.topic.replication.factor",
        Type.SHORT,
        3,
        at_least(1),
        H,
        "Replication factor of the offsets topic, capped by the number of live brokers.",
    )
    .define(
        "offsets.topic.segment.bytes",
        Type.INT,
        104857600,
        at_least(1),
        H,
        "Segment size in bytes of the offsets topic, kept small for fast compaction and loading.",
    )
    .define(
        "offsets.topic.compression.codec",
        Type.INT,
        0,
        None,
        H,
        "Compression codec id of the offsets topic's batches (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd). Accepted;"
        " not used by pykbroker yet.",
    )
    .define(
        "offsets.retention.minutes",
        Type.INT,
        10080,
        at_least(1),
        H,
        "Time in minutes the committed offsets of a group without members are kept.",
    )
    .define(
        "offsets.retention.check.interval.ms",
        Type.LONG,
        600000,
        at_least(1),
        H,
        "Frequency in ms at which expired committed offsets are removed.",
    )
    .define(
        "offsets.commit.timeout.ms",
        Type.INT,
        5000,
        at_least(1),
        H,
        "Maximum time in ms an offset commit waits for the offsets topic's replicas to acknowledge it.",
    )
    .define(
        "offsets.commit.required.acks",
        Type.SHORT,
        -1,
        None,
        H,
        "Acks required before an offset commit (or group metadata write) is accepted; -1: the whole ISR.",
    )
    .define(
        "offsets.load.buffer.size",
        Type.INT,
        5242880,
        at_least(1),
        H,
        "Batch size in bytes for reading the offsets topic when a coordinator loads its groups. Accepted; not "
        "used by pykbroker yet.",
    )
    .define(
        "offset.metadata.max.bytes",
        Type.INT,
        4096,
        None,
        H,
        "Maximum size in bytes of the metadata string attached to a committed offset.",
    )
    .define(
        "group.initial.rebalance.delay.ms",
        Type.INT,
        3000,
        None,
        M,
        "Time in ms the coordinator waits for more members to join a new group before its first rebalance.",
    )
    .define(
        "group.min.session.timeout.ms",
        Type.INT,
        6000,
        None,
        M,
        "Minimum session timeout in ms a classic group member may ask for.",
    )
    .define(
        "group.max.session.timeout.ms",
        Type.INT,
        1800000,
        None,
        M,
        "Maximum session timeout in ms a classic group member may ask for.",
    )
    .define(
        "group.max.size", Type.INT, INT_MAX, at_least(1), M, "Maximum number of members in a single consumer group."
    )
    .define(
        "group.coordinator.rebalance.protocols",
        Type.LIST,
        "classic,consumer",
        None,
        M,
        "Rebalance protocols the group coordinator supports (classic, consumer). Accepted; not used by pykbroker yet.",
    )
    # defaults and bounds of the per-group configs consumer.session.timeout.ms / consumer.heartbeat.interval.ms
    .define(
        "group.consumer.session.timeout.ms",
        Type.INT,
        45000,
        at_least(1),
        M,
        "Default session timeout in ms of consumer-protocol group members.",
    )
    .define(
        "group.consumer.min.session.timeout.ms",
        Type.INT,
        45000,
        at_least(1),
        M,
        "Minimum session timeout in ms a consumer group may configure.",
    )
    .define(
        "group.consumer.max.session.timeout.ms",
        Type.INT,
        60000,
        at_least(1),
        M,
        "Maximum session timeout in ms a consumer group may configure.",
    )
    .define(
        "group.consumer.heartbeat.interval.ms",
        Type.INT,
        5000,
        at_least(1),
        M,
        "Default heartbeat interval in ms of consumer-protocol group members.",
    )
    .define(
        "group.consumer.min.heartbeat.interval.ms",
        Type.INT,
        5000,
        at_least(1),
        M,
        "Minimum heartbeat interval in ms a consumer group may configure.",
    )
    .define(
        "group.consumer.max.heartbeat.interval.ms",
        Type.INT,
        15000,
        at_least(1),
        M,
        "Maximum heartbeat interval in ms a consumer group may configure.",
    )
    # -- transactions ----------------------------------------------------------------------------
    .define(
        "transaction.state.log.num.partitions",
        Type.INT,
        50,
        at_least(1),
        H,
        "Number of partitions of the transaction topic (__transaction_state), created on the first transactional "
        "FindCoordinator.",
    )
    .define(
        "transaction.state.log.replication.factor",
        Type.SHORT,
        3,
        at_least(1),
        H,
        "Replication factor of the transaction topic (capped at the live brokers).",
    )
    .define(
        "transaction.state.log.min.isr",
        Type.INT,
        2,
        at_least(1),
        H,
        "min.insync.replicas of the transaction topic (capped at its replication factor).",
    )
    .define(
        "transaction.state.log.segment.bytes",
        Type.INT,
        104857600,
        at_least(1),
        H,
        "Segment size in bytes of the transaction topic.",
    )
    .define(
        "transaction.max.timeout.ms",
        Type.INT,
        900000,
        at_least(1),
        H,
        "Maximum transaction timeout in ms a producer may ask for (larger: INVALID_TRANSACTION_TIMEOUT).",
    )
    .define(
        "transactional.id.expiration.ms",
        Type.INT,
        604800000,
        at_least(1),
        H,
        "Time in ms the coordinator keeps a transactional ID that receives no transaction status updates.",
    )
    .define(
        "transaction.partition.verification.enable",
        Type.BOOLEAN,
        True,
        None,
        L,
        "Whether a partition leader verifies with the transaction coordinator that the partition is in the "
        "producer's transaction before its first transactional write (KIP-890 part 1).",
    )
    .define(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        Type.INT,
        10000,
        at_least(1),
        L,
        "Interval in ms at which the coordinator aborts transactions that exceeded their timeout.",
    )
    .define(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        Type.INT,
        3600000,
        at_least(1),
        L,
        "Interval in ms at which the coordinator removes transactional IDs expired by transactional.id.expiration.ms.",
    )
    # -- misc ------------------------------------------------------------------------------------
    .define(
        "cluster.id", Type.STRING, None, None, L, "Ignored in KRaft mode: the cluster ID comes from meta.properties."
    )
    .define(
        "kafka.metrics.reporters",
        Type.LIST,
        "",
        None,
        L,
        "Classes used as Yammer metrics reporters. Accepted; not used by pykbroker yet.",
    )
    .define(
        "authorizer.class.name",
        Type.STRING,
        "",
        None,
        L,
        "Class of the authorizer of requests (empty: no authorization): "
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer (ACLs in the metadata log).",
    )
    .define(
        "super.users",
        Type.STRING,
        "",
        None,
        L,
        "Principals allowed everything by the StandardAuthorizer, separated by semicolons (User:admin;User:ops).",
    )
    .define(
        "allow.everyone.if.no.acl.found",
        Type.BOOLEAN,
        False,
        None,
        L,
        "Whether the StandardAuthorizer allows access to resources no ACL applies to.",
    )
    .define(
        "sasl.enabled.mechanisms",
        Type.LIST,
        "GSSAPI",
        None,
        M,
        "SASL mechanisms enabled on the server's SASL listeners (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 are "
        "supported; per listener: listener.name.<listener>.sasl.enabled.mechanisms).",
    )
    .define(
        "sasl.server.max.receive.size",
        Type.INT,
        524288,
        at_least(1),
        L,
        "Largest SASL frame in bytes accepted before a connection is authenticated.",
    )
    .define(
        "sasl.mechanism.inter.broker.protocol",
        Type.STRING,
        "GSSAPI",
        None,
        M,
        "SASL mechanism of this broker's connections to other brokers when the inter-broker listener is "
        "SASL_PLAINTEXT or SASL_SSL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; credentials from the username and "
        "password of listener.name.<listener>.<mechanism>.sasl.jaas.config).",
    )
    .define(
        "sasl.mechanism.controller.protocol",
        Type.STRING,
        "GSSAPI",
        None,
        M,
        "SASL mechanism of this node's connections to the controllers when the controller listener is "
        "SASL_PLAINTEXT or SASL_SSL (use PLAIN: SCRAM credentials live in the metadata log the controllers "
        "serve; credentials from listener.name.<listener>.<mechanism>.sasl.jaas.config).",
    )
    .define(
        "group.coordinator.new.enable",
        Type.BOOLEAN,
        False,
        None,
        L,
        "Whether the new group coordinator is enabled (obsolete in Kafka 4.0). Accepted; not used by pykbroker yet.",
    )
)

# Prefixes under which per-listener or per-mechanism overrides are legal (not "unknown").
KNOWN_PREFIXES = ("listener.name.", "ssl.", "sasl.", "log4j.", "metrics.", "confluent.", "zookeeper.")
