"""A request the Processor closes its connection for never disturbs other connections' requests.

Regression: closing a connection while handling a poll's completed receives changed the dict being
iterated; the rest of the batch stayed in the selector and was dispatched a second time on the next
pass (duplicate requests, responses answering the wrong correlation id, IllegalMuteTransition).

A gate in the KSelector holds the Processor before its epoll wait until every client has written, so
good and bad frames arrive in one poll, in one batch of completed receives.
"""

from __future__ import annotations

import socket
import struct
import threading

from pykbroker.network.selector import KSelector
from tests.helpers.wait import wait_until
from tests.unit.network.harness import EchoServer, read_frame, request_frame

DISABLED_API_KEY = 19  # CreateTopics: "not enabled on this listener" for the test's is_api_allowed


class GatedKSelector(KSelector):
    """Blocks the owning Processor before each epoll wait while ``gate`` is clear."""

    __test__ = False
    gate = threading.Event()

    def _select(self, timeout_s):
        GatedKSelector.gate.wait(10)
        return super()._select(timeout_s)


def bad_frames() -> list[bytes]:
    disabled = request_frame(7, api_key=DISABLED_API_KEY, api_version=0)
    unknown_key = request_frame(8, api_key=999, api_version=0)
    garbage = struct.pack(">i", 3) + b"\xff\xfe\xfd"  # shorter than a request header
    return [disabled, unknown_key, garbage]


def test_closed_connections_in_one_batch_do_not_redispatch_others():
    allowed = lambda listener, key, version: key != DISABLED_API_KEY  # noqa: E731
    GatedKSelector.gate.set()
    with EchoServer(selector_factory=GatedKSelector, is_api_allowed=allowed) as server:
        processor = server.processor
        good = [server.connect() for _ in range(12)]
        bad = [server.connect() for _ in range(12)]
        wait_until(lambda: processor.connection_count == 24, timeout=5, message="all connections registered")
        for round_ in range(3):
            GatedKSelector.gate.clear()
            # Let the Processor finish its current pass and park at the gate.
            wait_until(lambda: processor.is_alive(), timeout=1)
            frames = bad_frames()
            for i, sock in enumerate(good):
                sock.sendall(request_frame(round_ * 100 + i))
            for i, sock in enumerate(bad):
                sock.sendall(frames[i % len(frames)])
            GatedKSelector.gate.set()
            for i, sock in enumerate(good):
                expected = request_frame(round_ * 100 + i)[4:]
                assert read_frame(sock) == expected, f"connection {i} got another request's response"
            for sock in bad:
                sock.settimeout(5)
                try:
                    assert sock.recv(1) == b"", "a rejected request got a response"
                except ConnectionResetError:
                    pass
                sock.close()
            bad = [server.connect() for _ in range(12)]
            wait_until(lambda: processor.connection_count == 24, timeout=5, message="reconnected")
        # A follow-up request on each good connection is answered next: no duplicate was queued before it.
        for i, sock in enumerate(good):
            sock.sendall(request_frame(5000 + i))
            assert read_frame(sock) == request_frame(5000 + i)[4:]
        assert processor.is_alive()
        for sock in good + bad:
            sock.close()


def test_partial_frame_announcing_max_size_pins_little_memory():
    """A peer that announces socket.request.max.bytes and sends a few bytes pins a small buffer,
    not the announced size (the memory pool is still charged the whole frame)."""
    from pykbroker.network.channel import GROWTH_FACTOR, INITIAL_CHUNK_BYTES, NetworkReceive

    a, b = socket.socketpair()
    try:
        b.setblocking(False)
        receive = NetworkReceive(100 * 1024 * 1024)
        a.sendall(struct.pack(">i", 100 * 1024 * 1024) + b"x" * 1000)
        wait_until(lambda: receive.read_from(b) or receive.payload_read, timeout=5, message="bytes read")
        assert receive.size == 100 * 1024 * 1024
        assert len(receive.payload) <= INITIAL_CHUNK_BYTES
        # The buffer grows with what arrives (never more than GROWTH_FACTOR times it) and holds it all, in order.
        total = 1000 + 3 * 1024 * 1024
        writer = threading.Thread(target=a.sendall, args=(b"y" * (total - 1000),), daemon=True)
        writer.start()

        def read_some():
            receive.read_from(b)
            assert len(receive.payload) <= max(INITIAL_CHUNK_BYTES, GROWTH_FACTOR * receive.payload_read)
            return receive.payload_read >= total

        wait_until(read_some, timeout=10, interval=0.001, message="3 MiB read")
        writer.join(5)
        assert receive.payload_read == total and not receive.complete()
        assert bytes(receive.payload[:1000]) == b"x" * 1000 and bytes(receive.payload[1000:1010]) == b"y" * 10
    finally:
        a.close()
        b.close()


def test_small_frame_round_trip_exact_size():
    from pykbroker.network.channel import NetworkReceive

    a, b = socket.socketpair()
    b.setblocking(False)
    try:
        for size in (0, 1, 65535, 65536, 65537, 300_000):
            body = bytes(range(256)) * (size // 256) + bytes(size % 256)
            writer = threading.Thread(target=a.sendall, args=(struct.pack(">i", size) + body,), daemon=True)
            writer.start()
            receive = NetworkReceive(1 << 20)
            wait_until(lambda r=receive: (r.read_from(b), r.complete())[1], timeout=5, interval=0.001, message="frame")
            writer.join(5)
            assert bytes(receive.payload) == body and len(receive.payload) == size
    finally:
        a.close()
        b.close()
