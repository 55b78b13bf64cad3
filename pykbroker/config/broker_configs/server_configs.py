"""The broker's core keys: Kafka's ``ServerConfigs`` (broker id and rack, I/O threads, message and fetch
sizes, request timeout, compression) and ``MetricConfigs`` (metric reporters).

Part of the broker's ConfigDef (:data:`pykbroker.config.kafka_config_def.BROKER_CONFIG_DEF`, the merge of
these per-area ConfigDefs, as Kafka's ``AbstractKafkaConfig.CONFIG_DEF``). Every key has a one-sentence doc with its
unit; keys that pykbroker accepts for compatibility but does not act on yet say so in their doc.
"""

from __future__ import annotations

from pykbroker.config.broker_configs.common import COMPRESSION_TYPES, H, L, M, host_port
from pykbroker.config.config_def import ConfigDef, Type, at_least, in_values

SERVER_CONFIG_DEF = (
    ConfigDef()
    .define("broker.id", Type.INT, -1, None, H, "Alias of node.id, kept for compatibility.")
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
        host_port,
        L,
        "host:port of the HTTP endpoint /metrics of the PrometheusReporter (a pykbroker key; port 0 = an "
        "ephemeral port, logged as 'Prometheus metrics endpoint listening on host:port').",
    )
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
)
