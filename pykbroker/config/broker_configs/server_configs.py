"""The broker's core keys: Kafka's ``ServerConfigs`` (broker id and rack, I/O threads, message and fetch
sizes, request timeout, compression) and ``MetricConfigs`` (metric reporters).

Part of the broker's ConfigDef (:data:`pykbroker.config.kafka_config_def.BROKER_CONFIG_DEF`, the merge of
these per-area ConfigDefs, as Kafka's ``AbstractKafkaConfig.CONFIG_DEF``). Every key has a one-sentence doc with its
unit; keys that pykbroker accepts for compatibility but does not act on yet say so in their doc.
"""

from __future__ import annotations

from pykbroker.config.broker_configs.common import COMPRESSION_TYPES, H, L, M, host_port
from pykbroker.config.config_def import ConfigDef, Type, at_least, in_values
from pykbroker.config.topic_config import COMPRESSION_TYPE_CONFIG

# The key names (Kafka's ``*_CONFIG`` constants), each named after its key (``log.retention.ms`` ->
# ``LOG_RETENTION_MS_CONFIG``): the one spelling of each key, imported by the code that reads it.
BROKER_ID_CONFIG = "broker.id"
BROKER_RACK_CONFIG = "broker.rack"
NUM_IO_THREADS_CONFIG = "num.io.threads"
BACKGROUND_THREADS_CONFIG = "background.threads"
MESSAGE_MAX_BYTES_CONFIG = "message.max.bytes"
REQUEST_TIMEOUT_MS_CONFIG = "request.timeout.ms"
DELETE_TOPIC_ENABLE_CONFIG = "delete.topic.enable"
FETCH_MAX_BYTES_CONFIG = "fetch.max.bytes"
MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS_CONFIG = "max.incremental.fetch.session.cache.slots"
MAX_REQUEST_PARTITION_SIZE_LIMIT_CONFIG = "max.request.partition.size.limit"
METRIC_REPORTERS_CONFIG = "metric.reporters"
PROMETHEUS_METRICS_LISTENER_CONFIG = "prometheus.metrics.listener"
CLUSTER_ID_CONFIG = "cluster.id"
KAFKA_METRICS_REPORTERS_CONFIG = "kafka.metrics.reporters"

SERVER_CONFIG_DEF = (
    ConfigDef()
    .define(BROKER_ID_CONFIG, Type.INT, -1, None, H, "Alias of node.id, kept for compatibility.")
    .define(
        BROKER_RACK_CONFIG,
        Type.STRING,
        None,
        None,
        M,
        "Rack of the broker, used by rack-aware replica placement and by the RackAwareReplicaSelector (KIP-392) "
        "(e.g. 'us-east-1d').",
    )
    .define(
        NUM_IO_THREADS_CONFIG,
        Type.INT,
        8,
        at_least(1),
        H,
        "Number of request handler threads the server uses to process requests, including disk I/O.",
    )
    .define(
        BACKGROUND_THREADS_CONFIG,
        Type.INT,
        10,
        at_least(1),
        H,
        "Number of threads for background tasks (retention, flushes, checkpoints).",
    )
    .define(
        MESSAGE_MAX_BYTES_CONFIG,
        Type.INT,
        1048588,
        at_least(0),
        H,
        "Largest record batch size in bytes the broker accepts (after compression); the default of topics' "
        "max.message.bytes.",
    )
    .define(
        REQUEST_TIMEOUT_MS_CONFIG,
        Type.INT,
        30000,
        None,
        M,
        "Maximum time in ms the broker waits for the response to a request it sent.",
    )
    .define(
        DELETE_TOPIC_ENABLE_CONFIG,
        Type.BOOLEAN,
        True,
        None,
        H,
        "Whether topics can be deleted; when false, DeleteTopics has no effect.",
    )
    .define(
        COMPRESSION_TYPE_CONFIG,
        Type.STRING,
        "producer",
        in_values(*COMPRESSION_TYPES),
        H,
        "Final compression type of topics: uncompressed, gzip, snappy, lz4, zstd, or 'producer' to keep the "
        "producer's codec.",
    )
    .define(
        FETCH_MAX_BYTES_CONFIG,
        Type.INT,
        57671680,
        at_least(1024),
        M,
        "Maximum number of bytes returned for a fetch request (at least 1024).",
    )
    .define(
        MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS_CONFIG,
        Type.INT,
        1000,
        at_least(0),
        M,
        "Maximum number of incremental fetch sessions cached by the broker.",
    )
    .define(
        MAX_REQUEST_PARTITION_SIZE_LIMIT_CONFIG,
        Type.INT,
        2000,
        at_least(1),
        M,
        "The maximum number of partitions can be served in one request (DescribeTopicPartitions).",
    )
    .define(
        METRIC_REPORTERS_CONFIG,
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
        PROMETHEUS_METRICS_LISTENER_CONFIG,
        Type.STRING,
        "0.0.0.0:9404",
        host_port,
        L,
        "host:port of the HTTP endpoint /metrics of the PrometheusReporter (a pykbroker key; port 0 = an "
        "ephemeral port, logged as 'Prometheus metrics endpoint listening on host:port').",
    )
    .define(
        CLUSTER_ID_CONFIG,
        Type.STRING,
        None,
        None,
        L,
        "Ignored in KRaft mode: the cluster ID comes from meta.properties.",
    )
    .define(
        KAFKA_METRICS_REPORTERS_CONFIG,
        Type.LIST,
        "",
        None,
        L,
        "Classes used as Yammer metrics reporters. Accepted; not used by pykbroker yet.",
    )
)
