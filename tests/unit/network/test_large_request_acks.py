"""The Processor acknowledging a large request's segments at once (issue 31).

A producer pipelines 1 MB produce requests on one connection; the broker reads one, mutes the connection and answers
only when the request is done (acks=all: when the followers have fetched it, several ms later). Linux's delayed ACKs
(the broker's side of a request/response connection is in its "pingpong" mode) left the last segments the producer
sent unacknowledged while the broker waited, until the producer's tail-loss probe retransmitted one (~1 per request).
The Processor sets TCP_QUICKACK when a large frame's read stops short or completes: no retransmission. Small
requests (read whole by the first ``recv``) are untouched.

A real SocketServer (tests/unit/network/harness.py) with a handler that answers each request after a delay."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from tests.helpers.tcp import total_retransmissions
from tests.unit.network.harness import EchoHandler, EchoServer, read_frame, request_frame

#: how long the handler holds each request before answering (s): an acks=all produce waiting for its followers
ANSWER_DELAY_S = 0.02
BODY_BYTES = 1_000_000


class DelayedHandler(EchoHandler):
    """Answers every request with ``b"done"`` ``ANSWER_DELAY_S`` after taking it."""

    def answer(self, request) -> bytes:
        time.sleep(ANSWER_DELAY_S)
        return b"done"


def large_frame(correlation_id: int) -> bytes:
    """An ApiVersions request header followed by ``BODY_BYTES`` of body (the handler does not parse it)."""
    small = request_frame(correlation_id)
    return struct.pack(">i", len(small) - 4 + BODY_BYTES) + small[4:] + b"x" * BODY_BYTES


@pytest.mark.skipif(not hasattr(socket, "TCP_INFO"), reason="Linux TCP_INFO")
def test_pipelined_large_requests_answered_late_need_no_retransmission():
    rounds = 20
    server = EchoServer(**{"socket.receive.buffer.bytes": "102400"})
    server.handler = DelayedHandler(server.socket_server.data_plane_request_channel)
    with server:
        sock = server.connect()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        frames = [large_frame(i) for i in range(rounds)]

        def produce() -> None:  # the producer sends on without waiting for answers (max.in.flight > 1)
            for frame in frames:
                sock.sendall(frame)

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        try:
            for _ in range(rounds):
                assert read_frame(sock) == b"done"
            producer.join(5)
            total_retrans = total_retransmissions(sock)
            # A few may still be probed when this machine is too busy to run the Processor for a few ms.
            assert total_retrans <= rounds // 5, f"{total_retrans} retransmissions in {rounds} requests"
        finally:
            sock.close()


def test_a_large_frame_arriving_in_pieces_grows_its_buffer_once():
    """A 1 MB request read as it arrives, 64 KB at a time: its buffer starts at INITIAL_CHUNK_BYTES and grows once,
    to the frame size (GROWTH_FACTOR), instead of doubling four times (each growth allocates and copies the buffer,
    ~1 ms per MB of fresh pages on a loaded machine); the bytes are all there, in order."""
    from pykbroker.network.channel import INITIAL_CHUNK_BYTES, NetworkReceive

    size = BODY_BYTES
    body = bytes(range(256)) * (size // 256) + b"z" * (size % 256)
    a, b = socket.socketpair()
    try:
        b.setblocking(False)
        receive = NetworkReceive(2 * size)
        lengths = []
        pieces = [struct.pack(">i", size) + body[:INITIAL_CHUNK_BYTES]]
        pieces += [body[i : i + INITIAL_CHUNK_BYTES] for i in range(INITIAL_CHUNK_BYTES, size, INITIAL_CHUNK_BYTES)]
        for piece in pieces:
            a.sendall(piece)
            expected = receive.payload_read + len(piece) - (4 if receive.size < 0 else 0)
            while receive.payload_read < expected:
                receive.read_from(b)
                if receive.payload is not None and (not lengths or lengths[-1] != len(receive.payload)):
                    lengths.append(len(receive.payload))
        assert receive.complete() and receive.payload == body
        # grown once, when the first INITIAL_CHUNK_BYTES were in (before: 128 KB, 256 KB, 512 KB, then 1 MB)
        assert lengths == [size]
    finally:
        a.close()
        b.close()
