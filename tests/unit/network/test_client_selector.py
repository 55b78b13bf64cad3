"""ClientSelector, the client-side KSelector under NetworkClient: connect completes in poll (``connected``),
a refused connect is reported as NOT_CONNECTED, sends queued behind a pending one go out in order,
responses come back as NetworkReceives."""

from __future__ import annotations

import socket
import struct
import time as wall

import pytest

from pykbroker.network.channel import NetworkReceive, NetworkSend
from pykbroker.network.selector import NOT_CONNECTED, ClientSelector


def _poll_until(selector: ClientSelector, condition, what: str) -> None:
    deadline = wall.monotonic() + 10  # real sockets: a bound on the wait, not a sleep
    while not condition():
        assert wall.monotonic() < deadline, f"timed out waiting for {what}"
        selector.poll(50)


@pytest.fixture
def selector():
    errors: list = []
    s = ClientSelector(on_close_error=lambda channel_id, e: errors.append((channel_id, e)))
    s.errors = errors
    yield s
    s.close_all()


@pytest.fixture
def server():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    yield srv
    srv.close()


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_connect_then_send_queued_in_order_and_receive(selector, server):
    selector.connect("1", server.getsockname(), 0, 4096)
    peer, _ = server.accept()
    with peer:
        _poll_until(selector, lambda: selector.connected, "the connection")
        assert selector.connected == ["1"]
        selector.clear_connected()
        # Larger than the socket buffers: the first send stays pending and the others queue behind it.
        big = bytes(range(256)) * 16384
        frames = [_frame(big), _frame(b"second"), _frame(b"third")]
        for frame in frames:
            selector.send(NetworkSend("1", [frame]))
        assert selector.queued_sends["1"]
        expected = b"".join(frames)
        received = bytearray()
        peer.setblocking(False)

        def drained() -> bool:
            try:
                received.extend(peer.recv(1 << 20))
            except BlockingIOError:
                pass
            return len(received) >= len(expected)

        _poll_until(selector, drained, "every queued send")
        assert bytes(received) == expected
        assert "1" not in selector.queued_sends
        assert len(selector.completed_sends) == 3
        peer.sendall(_frame(b"response"))
        _poll_until(selector, lambda: selector.completed_receives, "the response")
        receive = selector.completed_receives["1"]
        assert isinstance(receive, NetworkReceive) and bytes(receive.payload) == b"response"


def test_refused_connect_is_reported_not_connected(selector):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = s.getsockname()  # bound, not listening: refused
        selector.connect("7", address, 0, 0)
        _poll_until(selector, lambda: selector.disconnected, "the refused connection")
    assert selector.disconnected == {"7": NOT_CONNECTED}
    assert selector.connected == [] and selector.channel("7") is None
    assert [c for c, _ in selector.errors] == ["7"] and isinstance(selector.errors[0][1], ConnectionRefusedError)
