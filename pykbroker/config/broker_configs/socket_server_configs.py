"""Listener and socket keys: Kafka's ``SocketServerConfigs`` (listeners, network threads, request queue,
socket buffers, connection limits and idle/authentication-failure delays).

Part of the broker's ConfigDef (:data:`pykbroker.config.kafka_config_def.BROKER_CONFIG_DEF`, the merge of
these per-area ConfigDefs, as Kafka's ``AbstractKafkaConfig.CONFIG_DEF``). Every key has a one-sentence doc with its
unit; keys that pykbroker accepts for compatibility but does not act on yet say so in their doc.
"""

from __future__ import annotations

from pykbroker.config.broker_configs.common import INT_MAX, H, L, M
from pykbroker.config.config_def import ConfigDef, Type, at_least

# The key names (Kafka's ``*_CONFIG`` constants), each named after its key (``log.retention.ms`` ->
# ``LOG_RETENTION_MS_CONFIG``): the one spelling of each key, imported by the code that reads it.
CONTROL_PLANE_LISTENER_NAME_CONFIG = "control.plane.listener.name"
LISTENERS_CONFIG = "listeners"
ADVERTISED_LISTENERS_CONFIG = "advertised.listeners"
LISTENER_SECURITY_PROTOCOL_MAP_CONFIG = "listener.security.protocol.map"
NUM_NETWORK_THREADS_CONFIG = "num.network.threads"
QUEUED_MAX_REQUESTS_CONFIG = "queued.max.requests"
QUEUED_MAX_REQUEST_BYTES_CONFIG = "queued.max.request.bytes"
SOCKET_SEND_BUFFER_BYTES_CONFIG = "socket.send.buffer.bytes"
SOCKET_RECEIVE_BUFFER_BYTES_CONFIG = "socket.receive.buffer.bytes"
SOCKET_REQUEST_MAX_BYTES_CONFIG = "socket.request.max.bytes"
SOCKET_LISTEN_BACKLOG_SIZE_CONFIG = "socket.listen.backlog.size"
MAX_CONNECTIONS_PER_IP_CONFIG = "max.connections.per.ip"
MAX_CONNECTIONS_PER_IP_OVERRIDES_CONFIG = "max.connections.per.ip.overrides"
MAX_CONNECTIONS_CONFIG = "max.connections"
MAX_CONNECTION_CREATION_RATE_CONFIG = "max.connection.creation.rate"
CONNECTIONS_MAX_IDLE_MS_CONFIG = "connections.max.idle.ms"
CONNECTION_FAILED_AUTHENTICATION_DELAY_MS_CONFIG = "connection.failed.authentication.delay.ms"

SOCKET_SERVER_CONFIG_DEF = (
    ConfigDef()
    .define(
        CONTROL_PLANE_LISTENER_NAME_CONFIG,
        Type.STRING,
        None,
        None,
        H,
        "Name of the listener used for communication between controller and brokers.",
    )
    .define(
        LISTENERS_CONFIG,
        Type.LIST,
        "PLAINTEXT://:9092",
        None,
        H,
        "Comma-separated listener URIs (NAME://host:port) the server binds; port 0 picks a free port.",
    )
    .define(
        ADVERTISED_LISTENERS_CONFIG,
        Type.LIST,
        None,
        None,
        H,
        "Listeners published to clients in metadata when they differ from listeners.",
    )
    .define(
        LISTENER_SECURITY_PROTOCOL_MAP_CONFIG,
        Type.STRING,
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        None,
        L,
        "Map of listener names to security protocols, as NAME:PROTOCOL,...",
    )
    .define(
        NUM_NETWORK_THREADS_CONFIG,
        Type.INT,
        3,
        at_least(1),
        H,
        "Number of network threads (Processors) per listener that receive requests and send responses.",
    )
    .define(
        QUEUED_MAX_REQUESTS_CONFIG,
        Type.INT,
        500,
        at_least(1),
        H,
        "Number of requests queued for the request handlers before the network threads stop reading.",
    )
    .define(
        QUEUED_MAX_REQUEST_BYTES_CONFIG,
        Type.LONG,
        -1,
        None,
        M,
        "Number of queued request bytes allowed before no more requests are read (-1: no limit).",
    )
    .define(
        SOCKET_SEND_BUFFER_BYTES_CONFIG,
        Type.INT,
        102400,
        None,
        H,
        "SO_SNDBUF of the server's sockets in bytes (-1: the OS default).",
    )
    .define(
        SOCKET_RECEIVE_BUFFER_BYTES_CONFIG,
        Type.INT,
        102400,
        None,
        H,
        "SO_RCVBUF of the server's sockets in bytes (-1: the OS default).",
    )
    .define(SOCKET_REQUEST_MAX_BYTES_CONFIG, Type.INT, 104857600, at_least(1), H, "Maximum size in bytes of a request.")
    .define(
        SOCKET_LISTEN_BACKLOG_SIZE_CONFIG,
        Type.INT,
        50,
        at_least(1),
        M,
        "Maximum number of pending connections on a listening socket.",
    )
    .define(
        MAX_CONNECTIONS_PER_IP_CONFIG,
        Type.INT,
        INT_MAX,
        at_least(0),
        M,
        "Maximum number of connections allowed from one IP address.",
    )
    .define(
        MAX_CONNECTIONS_PER_IP_OVERRIDES_CONFIG,
        Type.STRING,
        "",
        None,
        M,
        "Per-IP or per-hostname overrides of max.connections.per.ip, as host:count,...",
    )
    .define(
        MAX_CONNECTIONS_CONFIG,
        Type.INT,
        INT_MAX,
        at_least(0),
        M,
        "Maximum number of connections the broker allows at any time.",
    )
    .define(
        MAX_CONNECTION_CREATION_RATE_CONFIG,
        Type.INT,
        INT_MAX,
        at_least(0),
        M,
        "Maximum rate of new connections the broker accepts, in connections per second (KIP-612; the inter-broker "
        "listener is exempt when there are several listeners).",
    )
    .define(
        CONNECTIONS_MAX_IDLE_MS_CONFIG,
        Type.LONG,
        600000,
        None,
        M,
        "Time in ms after which the network threads close an idle connection.",
    )
    .define(
        CONNECTION_FAILED_AUTHENTICATION_DELAY_MS_CONFIG,
        Type.INT,
        100,
        at_least(0),
        L,
        "Delay in ms before closing a connection whose authentication failed. Accepted; not used by pykbroker yet.",
    )
)
