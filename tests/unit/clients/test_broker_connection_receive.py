"""BrokerConnection reading large responses (issue 31): the body is awaited with SO_RCVLOWAT, so the reader is
woken once the bytes still due are in the socket buffer rather than once per chunk the broker's send buffer
lets through; the bytes read and the timeouts are unchanged.

A real TCP listener on 127.0.0.1 plays the broker: it writes frames (4-byte size prefix + body) in pieces with
pauses between them, as a broker whose send buffer is full does."""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from tests.helpers.tcp import total_retransmissions

LOW_WATER_MAX_BYTES = 1 << 20


class CountingSocket(socket.socket):
    """The connection's socket, counting the reads (``recv_into`` calls) made on it."""

    reads = 0

    def recv_into(self, *args, **kwargs):  # type: ignore[override]
        self.reads += 1
        return super().recv_into(*args, **kwargs)


class Broker:
    """Accepts one connection; ``send(*pieces, pause=s)`` writes the pieces with ``s`` seconds between them."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.peer: socket.socket | None = None
        self._accepted = threading.Thread(target=self._accept, daemon=True)
        self._accepted.start()

    def _accept(self) -> None:
        self.peer, _ = self.server.accept()

    def send(self, *pieces: bytes, pause: float = 0.0) -> threading.Thread:
        self._accepted.join(5)
        assert self.peer is not None

        def run() -> None:
            for i, piece in enumerate(pieces):
                if i and pause:
                    time.sleep(pause)
                self.peer.sendall(piece)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    def close(self) -> None:
        if self.peer is not None:
            self.peer.close()
        self.server.close()


@pytest.fixture
def broker():
    b = Broker()
    yield b
    b.close()


def connect(broker: Broker, timeout: float = 5.0) -> BrokerConnection:
    conn = BrokerConnection("127.0.0.1", broker.port, timeout=timeout)
    plain = conn.sock
    conn.sock = CountingSocket(plain.family, plain.type, plain.proto, fileno=plain.detach())
    conn.sock.settimeout(timeout)
    return conn


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def body_of(size: int, seed: int = 0) -> bytes:
    return bytes((i * 7 + seed) % 251 for i in range(size))


def test_large_body_is_not_read_piece_by_piece(broker):
    """1 MB arriving in 16 pieces 10 ms apart: the reader sleeps until the bytes due are buffered (a wait ends
    early only when the receive window is full), so it reads far fewer times than there are pieces (before:
    at least once per piece)."""
    conn = connect(broker)
    body = body_of(1 << 20)
    data = frame(body)
    sender = broker.send(data[:4], *(data[i : i + 65536] for i in range(4, len(data), 65536)), pause=0.01)
    try:
        assert conn.receive_frame() == body
        assert conn.sock.reads <= 6
        assert conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1
    finally:
        sender.join(5)
        conn.close()


def test_dribbling_body_larger_than_one_wait_then_a_small_frame(broker):
    """A 3 MB body (more than LOW_WATER_MAX_BYTES: several waits) arriving in 30 pieces is read whole, and the
    small frame after it is read too (the low-water mark is back to 1; else the read of its size prefix would
    wait for a megabyte and raise TimeoutError)."""
    conn = connect(broker, timeout=3.0)
    big, small = body_of(3 * LOW_WATER_MAX_BYTES, 1), b"0123456789"
    data = frame(big) + frame(small)
    step = len(data) // 30 + 1
    sender = broker.send(*(data[i : i + step] for i in range(0, len(data), step)), pause=0.005)
    try:
        assert conn.receive_frame() == big
        assert conn.receive_frame() == small
    finally:
        sender.join(5)
        conn.close()


def test_small_bodies_leave_the_low_water_mark_alone(broker):
    conn = connect(broker)
    bodies = [body_of(n, n) for n in (0, 1, 60_000)]
    sender = broker.send(b"".join(frame(b) for b in bodies))
    try:
        assert [conn.receive_frame() for _ in bodies] == bodies
        assert conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1
    finally:
        sender.join(5)
        conn.close()


def test_broker_closing_mid_body_is_a_closed_connection(broker):
    from pykbroker.clients.broker_connection import ConnectionClosedError

    conn = connect(broker)
    data = frame(body_of(1 << 20))
    sender = broker.send(data[:500_000])
    sender.join(5)
    broker.peer.close()
    try:
        with pytest.raises(ConnectionClosedError):
            conn.receive_frame()
    finally:
        conn.close()


def test_shutdown_from_another_thread_interrupts_a_wait_for_the_body(broker):
    """The ReplicaFetcherThread's reset: a shutdown of a dup of the socket ends a wait on the low-water mark at
    once (well before the 5 s timeout)."""
    conn = connect(broker)
    handle = conn.sock.dup()
    data = frame(body_of(1 << 20))
    sender = broker.send(data[:300_000])
    threading.Timer(0.3, lambda: handle.shutdown(socket.SHUT_RDWR)).start()
    started = time.monotonic()
    try:
        with pytest.raises(OSError):  # ConnectionClosedError (a ConnectionError) when the read sees the shutdown
            conn.receive_frame()
        assert time.monotonic() - started < 4.0
    finally:
        sender.join(5)
        handle.close()
        conn.close()


@pytest.mark.skipif(not hasattr(socket, "TCP_INFO"), reason="Linux TCP_INFO")
def test_request_answer_rounds_behind_a_small_send_buffer_need_no_retransmission(broker):
    """A replica fetcher's rounds: a small request, then a 1 MB answer from a broker socket whose send buffer is
    Kafka's default socket.send.buffer.bytes (102400). Every segment of the answer is acknowledged as it arrives
    (TCP_QUICKACK with the low-water mark), so the broker does not wait for its tail-loss probe: no retransmission
    (before: Linux's delayed ACKs left the broker's last segments unacknowledged until a probe retransmitted one,
    in most rounds, each ~10 ms). A few may still be probed when this machine is too busy to run the reader for ~10 ms
    after an answer starts arriving."""
    rounds = 30
    body = body_of(1_000_000)
    data = frame(body)
    conn = connect(broker)
    broker._accepted.join(5)
    peer = broker.peer
    assert peer is not None
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 102400)

    def serve() -> None:
        for _ in range(rounds):
            if not peer.recv(100):
                return
            peer.sendall(data)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        for _ in range(rounds):
            conn.sock.sendall(b"fetch")
            assert conn.receive_frame() == body
        server.join(5)
        total_retrans = total_retransmissions(peer)
        assert total_retrans <= rounds // 6, f"{total_retrans} retransmissions in {rounds} answers"
    finally:
        conn.close()


def reusing(broker: Broker, timeout: float = 5.0) -> BrokerConnection:
    return BrokerConnection("127.0.0.1", broker.port, timeout=timeout, reuse_receive_buffer=True)


def test_reused_buffer_is_refilled_only_when_no_view_of_it_is_alive(broker):
    """``reuse_receive_buffer`` (the replica fetcher's connection, issue 31): answers are read into one buffer, not a
    fresh zeroed one per answer, but a view kept from an answer never sees a later one: while it is alive the next
    answer goes to a new buffer (kept from then on); a larger answer grows the buffer, with room for answers a little
    larger still."""
    a, b, c, d = body_of(300_000, 1), body_of(300_000, 2), body_of(300_000, 3), body_of(700_000, 4)
    e = body_of(750_000, 5)
    conn = reusing(broker)
    sender = broker.send(frame(a) + frame(b) + frame(c) + frame(d) + frame(e))
    try:
        first = conn.receive_frame()
        assert isinstance(first, memoryview) and first == a
        second = conn.receive_frame()  # ``first`` is alive: a new buffer, ``first`` untouched
        assert second == b and first == a
        assert first.obj is not second.obj
        buffer = second.obj
        del first, second
        third = conn.receive_frame()  # nothing refers to the buffer any more: refilled in place
        assert third == c and third.obj is buffer
        del third
        fourth = conn.receive_frame()  # larger than the buffer: grown, with an eighth to spare
        assert fourth == d and len(fourth.obj) == len(d) + len(d) // 8
        buffer = fourth.obj
        del fourth
        fifth = conn.receive_frame()  # a little larger again: fits the spare room
        assert fifth == e and fifth.obj is buffer
    finally:
        sender.join(5)
        conn.close()


def test_reused_buffer_keeps_decoded_records_of_a_kept_answer(broker):
    """The decoded response's ``records`` are views of the buffer: a caller keeping them across the next receive
    still reads its own answer's records; once dropped, the next answer reuses the buffer."""
    from pykbroker.protocol import encode_response
    from pykbroker.protocol.api_keys import ApiKeys

    def answer(correlation_id: int, records: bytes) -> bytes:
        body = {
            "error_code": 0,
            "session_id": 1,
            "responses": [
                {
                    "topic_id": uuid.UUID(int=7),
                    "partitions": [{"partition_index": 0, "high_watermark": 5, "records": records}],
                }
            ],
        }
        return encode_response(ApiKeys.FETCH, 15, correlation_id, body)

    records = [body_of(200_000, seed) for seed in (5, 6, 7)]
    conn = reusing(broker)
    sender = broker.send(b"".join(answer(i, r) for i, r in enumerate(records)))
    try:

        def receive(correlation_id: int):
            conn.pending.append((correlation_id, ApiKeys.FETCH, 15))
            return conn.receive()[1]["responses"][0]["partitions"][0]["records"]

        kept = receive(0)
        second = receive(1)  # ``kept`` is alive: read into a new buffer, which the connection keeps
        assert second == records[1] and kept == records[0]
        assert kept.obj is not second.obj
        buffer = second.obj
        del kept, second
        third = receive(2)
        assert third == records[2] and third.obj is buffer
    finally:
        sender.join(5)
        conn.close()
