"""Listener and socket keys: Kafka's ``SocketServerConfigs`` (listeners, network threads, request queue,
socket buffers, connection limits and idle/authentication-failure delays).

Part of the broker's ConfigDef (:data:`pykbroker.config.kafka_config_def.BROKER_CONFIG_DEF`, the merge of
these per-area ConfigDefs, as Kafka's ``AbstractKafkaConfig.CONFIG_DEF``). Every key has a one-sentence doc with its
unit; keys that pykbroker accepts for compatibility but does not act on yet say so in their doc.
"""

from __future__ import annotations

from pykbroker.config.broker_configs.common import INT_MAX, H, L, M
from pykbroker.config.config_def import ConfigDef, Type, at_least

SOCKET_SERVER_CONFIG_DEF = (
    ConfigDef()
    .define(
        "control.plane.listener.name",
        Type.STRING,
        None,
        None,
        H,
        "Name of the listener used for communication between controller and brokers.",
    )
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
        "Maximum rate of new connections the broker accepts, in connections per second (KIP-612; the inter-broker "
        "listener is exempt when there are several listeners).",
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
)
