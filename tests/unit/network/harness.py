"""A real SocketServer on 127.0.0.1 with the test playing the request handler (Kafka's SocketServerTest
set-up): ``EchoServer`` answers every request with its own frame, optionally held back by a gate."""

from __future__ import annotations

import socket
import struct
import threading

from pykbroker.config.kafka_config import KafkaConfig
from pykbroker.network.channel import NetworkSend
from pykbroker.network.request_channel import SHUTDOWN_REQUEST, SendResponse
from pykbroker.network.selector import KSelector
from pykbroker.network.socket_server import SocketServer, SocketServerConfig
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.utils.metrics import MetricsRegistry


class EchoHandler(threading.Thread):
    """Plays KafkaRequestHandler: answers every request with :meth:`answer` (its own frame once ``gate`` is set),
    then releases the request's buffer (its memory-pool bytes), as the real handler does."""

    def __init__(self, channel):
        super().__init__(daemon=True)
        self.channel = channel
        self.gate = threading.Event()
        self.gate.set()

    def answer(self, request) -> bytes:
        """The response body for ``request``: its own frame, once ``gate`` is set."""
        self.gate.wait(30)
        return bytes(request.buffer)

    def run(self):
        while True:
            request = self.channel.receive_request(100)
            if request is SHUTDOWN_REQUEST:
                return
            if request is None:
                continue
            payload = self.answer(request)
            request.release_buffer()
            send = NetworkSend(request.context.connection_id, [struct.pack(">i", len(payload)), payload])
            self.channel.send_response(SendResponse(request, send))


class EchoServer:
    """SocketServer (one data-plane Processor) + EchoHandler; ``overrides`` are server.properties keys."""

    def __init__(self, selector_factory=KSelector, is_api_allowed=None, **overrides: str):
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "num.network.threads": "1",
        }
        props.update(overrides)
        self.metrics = MetricsRegistry()
        self.socket_server = SocketServer(
            SocketServerConfig.from_kafka_config(KafkaConfig(props)),
            self.metrics,
            is_api_allowed or (lambda listener, key, version: True),
            selector_factory=selector_factory,
        )
        self.handler = EchoHandler(self.socket_server.data_plane_request_channel)

    def __enter__(self) -> EchoServer:
        self.handler.start()
        self.socket_server.enable_request_processing()
        return self

    def __exit__(self, *exc) -> None:
        self.handler.gate.set()
        self.socket_server.data_plane_request_channel.send_shutdown_request()
        self.socket_server.shutdown()
        self.handler.join(5)

    @property
    def processor(self):
        (acceptor,) = self.socket_server.data_plane_acceptors.values()
        (processor,) = acceptor.processors
        return processor

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.socket_server.bound_port("PLAINTEXT")), timeout=5)


def request_frame(
    correlation_id: int, client_id: bytes = b"faults", api_key: int = ApiKeys.API_VERSIONS, api_version: int = 0
) -> bytes:
    """A framed request header v1 with an empty body (by default ApiVersions v0; ``client_id`` sets the size)."""
    payload = struct.pack(">hhih", api_key, api_version, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(payload)) + payload


def read_frame(sock: socket.socket) -> bytes:
    def exactly(n):
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by the broker")
            buf += chunk
        return buf

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def echo(sock: socket.socket, correlation_id: int) -> None:
    frame = request_frame(correlation_id)
    sock.sendall(frame)
    assert read_frame(sock) == frame[4:]
