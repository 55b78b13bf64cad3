"""The Acceptor leaves its select loop as soon as it is told to shut down (Kafka's ``Acceptor.beginShutdown``
wakes its nioSelector), instead of at the next 0.5 s select timeout: every broker stop waited that out."""

from __future__ import annotations

import threading

from tests.unit.network.harness import EchoServer, echo


def test_begin_shutdown_wakes_the_acceptors_select():
    server = EchoServer()
    (acceptor,) = server.socket_server.data_plane_acceptors.values()
    real_select = acceptor.selector.select
    calls: list[list] = []
    selecting = threading.Event()

    def recording_select(timeout=None):
        selecting.set()
        ready = real_select(timeout)
        calls.append(ready)
        return ready

    acceptor.selector.select = recording_select
    with server:
        with server.connect() as sock:
            echo(sock, 1)  # the acceptor is up and has handed a connection over
        selecting.clear()
        assert selecting.wait(10)  # it is (back) in select
    # __exit__ shut the socket server down: the acceptor's last select was woken, it did not time out
    assert not acceptor.is_alive()
    assert calls and calls[-1], "the acceptor's last select returned nothing: it waited for its timeout"
