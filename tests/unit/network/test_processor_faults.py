"""Processor health after injected KSelector faults (after Kafka's SocketServerTest.TestableSelector).

A real SocketServer on 127.0.0.1 (one Processor) and real client sockets; the test thread plays the
request handler, echoing each request frame back. A fault fails the next matching KSelector operation:
the one connection it hits is closed and counted out of ConnectionQuotas, every other connection and
the Processor thread carry on.
"""

from __future__ import annotations

import socket
from typing import ClassVar

import pytest

from pykbroker.network.selector import KSelector
from tests.helpers.wait import wait_until
from tests.unit.network.harness import EchoServer, echo, read_frame, request_frame


class TestableKSelector(KSelector):
    """Fails the next ``failures[op]`` operations of a kind: ``register`` raises, ``send`` breaks the
    socket under the real write path (EPIPE), ``poll`` makes the epoll wait raise."""

    __test__ = False
    instances: ClassVar[list[TestableKSelector]] = []

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


@pytest.fixture
def server():
    TestableKSelector.instances.clear()
    with EchoServer(selector_factory=TestableKSelector) as s:
        yield s


def assert_closed_by_broker(sock: socket.socket) -> None:
    sock.settimeout(5)
    try:
        assert sock.recv(1) == b""
    except ConnectionResetError:
        pass


def assert_processor_healthy(server, open_clients: list[socket.socket]) -> None:
    """The Processor is alive, serves a new connection, and holds exactly the open clients."""
    processor = server.processor
    assert processor.is_alive()
    with server.connect() as fresh:
        for i in range(3):
            echo(fresh, 1000 + i)
        wait_until(
            lambda: processor.connection_count == len(open_clients) + 1, timeout=5, message="processor connection count"
        )
    for i, sock in enumerate(open_clients):
        echo(sock, 2000 + i)
    wait_until(lambda: processor.connection_count == len(open_clients), timeout=5, message="closed connection removed")
    wait_until(
        lambda: server.socket_server.connection_quotas.get("127.0.0.1") == len(open_clients),
        timeout=5,
        message="ConnectionQuotas back to the open clients",
    )


def selector(server) -> TestableKSelector:
    (sel,) = [s for s in TestableKSelector.instances if s is server.processor.selector]
    return sel


def test_register_failure_closes_only_the_new_connection(server):
    survivor = server.connect()
    echo(survivor, 1)
    selector(server).failures["register"] = 1
    victim = server.connect()
    assert_closed_by_broker(victim)
    assert selector(server).injected["register"] == 1
    assert_processor_healthy(server, [survivor])
    survivor.close()
    victim.close()


def test_send_failure_closes_only_that_connection(server):
    survivor = server.connect()
    victim = server.connect()
    echo(survivor, 1)
    echo(victim, 1)
    selector(server).failures["send"] = 1
    victim.sendall(request_frame(2))
    with pytest.raises(ConnectionError):
        read_frame(victim)
    assert selector(server).injected["send"] == 1
    # The Processor drops the lost response when it handles the disconnect (after the client saw EOF).
    wait_until(
        lambda: not server.processor.inflight_responses,
        timeout=5,
        message="in-flight response of the failed send dropped",
    )
    assert_processor_healthy(server, [survivor])
    survivor.close()
    victim.close()


def test_poll_failures_leave_connections_served(server):
    clients = [server.connect() for _ in range(3)]
    for i, sock in enumerate(clients):
        echo(sock, i)
    selector(server).failures["poll"] = 5
    wait_until(lambda: selector(server).injected["poll"] == 5, timeout=10, message="poll faults injected")
    assert_processor_healthy(server, clients)
    for sock in clients:
        sock.close()
