"""Processor health after injected KSelector faults (after Kafka's SocketServerTest.TestableSelector).

A real SocketServer on 127.0.0.1 (one Processor) and real client sockets; the test thread plays the
request handler, echoing each request frame back. A fault fails the next matching KSelector operation:
the one connection it hits is closed and counted out of ConnectionQuotas, every other connection and
the Processor thread carry on.
"""
from __future__ import annotations

import socket
import struct
import threading

import pytest

from pykbroker.config.kafka_config import KafkaConfig
from pykbroker.network.channel import NetworkSend
from pykbroker.network.request_channel import SHUTDOWN_REQUEST, SendResponse
from pykbroker.network.selector import KSelector
from pykbroker.network.socket_server import SocketServer, SocketServerConfig
from pykbroker.utils.metrics import MetricsRegistry
from tests.helpers.wait import wait_until


class TestableKSelector(KSelector):
    """Fails the next ``failures[op]`` operations of a kind: ``register`` raises, ``send`` breaks the
    socket under the real write path (EPIPE), ``poll`` makes the epoll wait raise."""

    __test__ = False
    instances: list["TestableKSelector"] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.failures = {"register": 0, "send": 0, "poll": 0}
        self.injected = {"register": 0, "send": 0, "poll": 0}
        TestableKSelector.instances.append(self)

    def _take(self, op: str) -> bool:
        if self.failures[op] > 0:
            self.failures[op] -= 1
            self.injected[op] += 1
            return True
        return False

    def register(self, channel_id, sock):
        if self._take("register"):
            raise OSError("injected register failure")
        return super().register(channel_id, sock)

    def send(self, send):
        channel = self.channels.get(send.destination)
        if channel is not None and self._take("send"):
            channel.sock.shutdown(socket.SHUT_WR)  # the next write fails with EPIPE
        super().send(send)

    def _select(self, timeout_s):
        if self._take("poll"):
            raise OSError("injected poll failure")
        return super()._select(timeout_s)


class EchoHandler(threading.Thread):
    """Plays KafkaRequestHandler: answers every request with its own frame."""

    def __init__(self, channel):
        super().__init__(daemon=True)
        self.channel = channel

    def run(self):
        while True:
            request = self.channel.receive_request(100)
            if request is SHUTDOWN_REQUEST:
                return
            if request is None:
                continue
            payload = bytes(request.buffer)
            send = NetworkSend(request.context.connection_id, [struct.pack(">i", len(payload)), payload])
            self.channel.send_response(SendResponse(request, send))


@pytest.fixture
def server():
    TestableKSelector.instances.clear()
    config = KafkaConfig({
        "process.roles": "broker,controller", "node.id": "1",
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "num.network.threads": "1"})
    s = SocketServer(SocketServerConfig.from_kafka_config(config), MetricsRegistry(),
                     lambda listener, key, version: True, selector_factory=TestableKSelector)
    handler = EchoHandler(s.data_plane_request_channel)
    handler.start()
    s.enable_request_processing()
    yield s
    s.data_plane_request_channel.send_shutdown_request()
    s.shutdown()
    handler.join(5)


def data_processor(server):
    (acceptor,) = server.data_plane_acceptors.values()
    (processor,) = acceptor.processors
    return processor


def connect(server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.bound_port("PLAINTEXT")), timeout=5)


def request_frame(correlation_id: int) -> bytes:
    client_id = b"faults"
    payload = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id  # ApiVersions v0
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


def assert_closed_by_broker(sock: socket.socket) -> None:
    sock.settimeout(5)
    try:
        assert sock.recv(1) == b""
    except ConnectionResetError:
        pass


def assert_processor_healthy(server, open_clients: list[socket.socket]) -> None:
    """The Processor is alive, serves a new connection, and holds exactly the open clients."""
    processor = data_processor(server)
    assert processor.is_alive()
    with connect(server) as fresh:
        for i in range(3):
            echo(fresh, 1000 + i)
        wait_until(lambda: processor.connection_count == len(open_clients) + 1, timeout=5,
                   message="processor connection count")
    for i, sock in enumerate(open_clients):
        echo(sock, 2000 + i)
    wait_until(lambda: processor.connection_count == len(open_clients), timeout=5,
               message="closed connection removed")
    wait_until(lambda: server.connection_quotas.get("127.0.0.1") == len(open_clients), timeout=5,
               message="ConnectionQuotas back to the open clients")


def selector(server) -> TestableKSelector:
    (sel,) = [s for s in TestableKSelector.instances if s is data_processor(server).selector]
    return sel


def test_register_failure_closes_only_the_new_connection(server):
    survivor = connect(server)
    echo(survivor, 1)
    selector(server).failures["register"] = 1
    victim = connect(server)
    assert_closed_by_broker(victim)
    assert selector(server).injected["register"] == 1
    assert_processor_healthy(server, [survivor])
    survivor.close()
    victim.close()


def test_send_failure_closes_only_that_connection(server):
    survivor = connect(server)
    victim = connect(server)
    echo(survivor, 1)
    echo(victim, 1)
    selector(server).failures["send"] = 1
    victim.sendall(request_frame(2))
    with pytest.raises(ConnectionError):
        read_frame(victim)
    assert selector(server).injected["send"] == 1
    # The Processor drops the lost response when it handles the disconnect (after the client saw EOF).
    wait_until(lambda: not data_processor(server).inflight_responses, timeout=5,
               message="in-flight response of the failed send dropped")
    assert_processor_healthy(server, [survivor])
    survivor.close()
    victim.close()


def test_poll_failures_leave_connections_served(server):
    clients = [connect(server) for _ in range(3)]
    for i, sock in enumerate(clients):
        echo(sock, i)
    selector(server).failures["poll"] = 5
    wait_until(lambda: selector(server).injected["poll"] == 5, timeout=10, message="poll faults injected")
    assert_processor_healthy(server, clients)
    for sock in clients:
        sock.close()
