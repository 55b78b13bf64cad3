"""KafkaChannel, NetworkReceive and NetworkSend: per-connection framing and the mute state machine.

Mirrors ``org.apache.kafka.common.network.{KafkaChannel,NetworkReceive,NetworkSend,ByteBufferSend}``.

Framing: every frame is a 4-byte big-endian size N followed by N bytes. A receive reads exactly the
bytes it still needs (``recv_into`` bounded by the remaining size), so plaintext never reads past the
current request and no "buffered read" bookkeeping is needed.

A send is a list of parts: bytes-like runs, and *deferred regions* (objects with ``size_in_bytes``
and ``write_to(sock, offset, max_bytes) -> int``, e.g. a log-file slice written with ``os.sendfile``),
which is how fetch responses go out zero-copy.

Memory: a receive takes its frame's bytes from a :mod:`~pykbroker.network.memory_pool` once the size
is known; when the pool is out of memory the channel mutes itself (Kafka's KafkaChannel.read) and
its KSelector unmutes it when memory comes back. The bytes go back to the pool when the request is
done (``NetworkReceive.release``, through ``Request.release_buffer``) or the channel closes.

Large requests (issue 31): when the read of a frame that did not fit the first ``recv`` stops short (the socket is
drained) or completes, the channel sets ``TCP_QUICKACK`` (Linux; not on TLS): the segments that arrived are
acknowledged now. Without it Linux delays those ACKs (the broker's side of a request/response connection is in its
delayed-ACK "pingpong" mode), and a producer that pipelines large requests on a muted connection (acks=all: the
answer waits for the followers) was left with unacknowledged segments until its tail-loss probe retransmitted one,
about once per request (``tests/unit/network/test_large_request_acks.py``). Small requests cost no extra call.

Threading: a channel is owned by one Processor thread (through its KSelector); nothing here locks.
"""

from __future__ import annotations

import enum
import socket
import struct
from collections.abc import Callable
from typing import Any

from pykbroker.network.memory_pool import NONE as _UNBOUNDED_POOL
from pykbroker.network.memory_pool import MemoryPool

_SIZE = struct.Struct(">i")
#: First allocation for a frame's body (bytes); the buffer grows as data arrives, up to the frame size.
INITIAL_CHUNK_BYTES = 64 * 1024
#: Each growth of a frame's buffer multiplies its length by this (capped at the frame size): a 1 MB produce request
#: is read into one 64 KB buffer grown once, not four times. Each growth allocates and copies the buffer, and on a
#: loaded machine the fresh pages of each step cost page faults: 4 doublings made a Processor's 1 MB request
#: cost ~3.3 ms instead of ~1.0-2.6 ms (issue 31). Kafka allocates the whole announced size at once.
GROWTH_FACTOR = 16
#: ``max_size`` of a receive with no limit but the int32 size prefix (Kafka's ``NetworkReceive.UNLIMITED``,
#: used by clients reading responses).
UNLIMITED = 0x7FFFFFFF


#: Linux's TCP_QUICKACK option (None elsewhere)
_TCP_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)


def quickack(sock: Any) -> None:
    """Acknowledge the segments received on ``sock`` now (Linux's TCP_QUICKACK, which lasts until the connection
    looks interactive again; a no-op on a TLS transport or where unsupported)."""
    if _TCP_QUICKACK is None or getattr(sock, "tls", False):
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, _TCP_QUICKACK, 1)
    except OSError:
        pass


class InvalidReceiveError(Exception):
    """A frame size prefix is negative or above ``socket.request.max.bytes`` (Kafka's
    ``InvalidReceiveException``): the connection is closed without a response."""


class TruncatedReceiveError(EOFError):
    """The peer closed the connection in the middle of a frame."""


class NetworkReceive:
    """One size-prefixed frame being read. ``payload`` is a ``bytearray`` that holds exactly N bytes once
    the frame is complete. It is created once ``pool`` grants the N bytes (``memory_pending`` while it
    has not), at most ``INITIAL_CHUNK_BYTES`` long, and grows ``GROWTH_FACTOR``-fold when full, so the memory a
    connection pins is bounded by what it actually sent (at most ``GROWTH_FACTOR`` times that), not by the size it
    announced."""

    __slots__ = (
        "max_size",
        "size_buf",
        "size_read",
        "payload",
        "payload_read",
        "size",
        "pool",
        "allocated",
        "initial_chunk",
    )

    def __init__(self, max_size: int, pool: MemoryPool = _UNBOUNDED_POOL, initial_chunk: int = INITIAL_CHUNK_BYTES):
        """``initial_chunk``: the first allocation for the body (bytes); a client reading a broker's answers passes
        a larger one, so that a large response (a follower's fetch) is read in place, not copied as it grows."""
        self.initial_chunk = initial_chunk
        self.max_size = max_size
        self.size_buf = bytearray(4)
        self.size_read = 0
        self.payload: bytearray | None = None
        self.payload_read = 0
        self.size = -1
        self.pool = pool
        self.allocated = False

    @property
    def memory_pending(self) -> bool:
        """The size is known but the pool has not granted the bytes yet."""
        return self.payload is None and self.size_read == 4

    def release(self) -> None:
        """Give the payload's bytes back to the pool (idempotent)."""
        if self.allocated:
            self.allocated = False
            self.pool.release(self.size)

    def complete(self) -> bool:
        return self.payload is not None and self.payload_read == self.size

    def _set_size(self) -> None:
        size = _SIZE.unpack(self.size_buf)[0]
        if size < 0:
            raise InvalidReceiveError(f"Invalid receive (size = {size})")
        if size > self.max_size:
            raise InvalidReceiveError(f"Invalid receive (size = {size} larger than {self.max_size})")
        self.size = size
        if size == 0:
            self.payload = bytearray(0)

    def consume(self, data: memoryview) -> int:
        """Take this frame's bytes from ``data`` (bytes already read from the socket, e.g. past the end
        of the previous frame); returns how many were used. Stops short when the frame is complete
        or the pool cannot grant the frame's bytes yet (``memory_pending``)."""
        n = len(data)
        used = 0
        if self.size_read < 4:
            used = min(4 - self.size_read, n)
            self.size_buf[self.size_read : self.size_read + used] = data[:used]
            self.size_read += used
            if self.size_read < 4:
                return used
            self._set_size()
        if self.payload is None:
            pool = self.pool
            if pool is not _UNBOUNDED_POOL:  # the unbounded pool grants everything and counts nothing: no call
                if not pool.try_allocate(self.size):
                    return used
                self.allocated = True
            if n - used >= self.size:  # the whole frame is here: one copy
                self.payload = bytearray(data[used : used + self.size])
                self.payload_read = self.size
                return used + self.size
            self.payload = bytearray(min(self.size, max(self.initial_chunk, n - used)))
        take = min(self.size - self.payload_read, n - used)
        if take:
            end = self.payload_read + take
            if end > len(self.payload):  # grow geometrically, never past the frame size
                self.payload += bytes(min(self.size, max(GROWTH_FACTOR * len(self.payload), end)) - len(self.payload))
            self.payload[self.payload_read : end] = data[used : used + take]
            self.payload_read = end
        return used + take

    def read_from(self, sock: socket.socket, await_bytes: Callable[[int], None] | None = None) -> int:
        """Read what is available, up to the end of this frame. Returns bytes read (0 = would block).
        Raises InvalidReceiveError for a bad size, EOFError/TruncatedReceiveError when the peer closed.
        ``await_bytes(remaining)`` is called before each read of the body with the bytes still due (a blocking
        client sets its socket's low-water mark there, see :mod:`pykbroker.clients.broker_connection`)."""
        total = 0
        if self.size_read < 4:
            try:
                n = sock.recv_into(memoryview(self.size_buf)[self.size_read :], 4 - self.size_read)
            except (BlockingIOError, InterruptedError):
                return total
            if n == 0:
                if self.size_read:
                    raise TruncatedReceiveError(f"connection closed after {self.size_read} of 4 size bytes")
                raise EOFError("connection closed by peer")
            self.size_read += n
            total += n
            if self.size_read < 4:
                return total
            self._set_size()
            if self.size == 0:
                return total
        if self.payload is None:
            pool = self.pool
            if pool is not _UNBOUNDED_POOL:
                if not pool.try_allocate(self.size):
                    return total  # out of memory: the channel mutes itself until the pool recovers
                self.allocated = True
            # The pool is charged the whole frame, but memory is only committed as bytes arrive: a peer
            # that announces socket.request.max.bytes and sends nothing pins INITIAL_CHUNK_BYTES.
            self.payload = bytearray(min(self.size, self.initial_chunk))
        payload = self.payload
        while self.payload_read < self.size:
            capacity = len(payload)
            if self.payload_read == capacity:  # full: grow geometrically, never past the frame size
                payload += bytes(min(self.size, capacity * GROWTH_FACTOR) - capacity)
                capacity = len(payload)
            if await_bytes is not None:
                await_bytes(self.size - self.payload_read)
            with memoryview(payload) as view:
                try:
                    n = sock.recv_into(view[self.payload_read :], capacity - self.payload_read)
                except (BlockingIOError, InterruptedError):
                    break
            if n == 0:
                raise TruncatedReceiveError(f"connection closed after {self.payload_read} of {self.size} frame bytes")
            self.payload_read += n
            total += n
        return total


class NetworkSend:
    """A response (or request, on the client side) to write: ``parts`` = bytes-like runs and deferred
    regions. ``destination`` is the connection id. ``size`` is the total number of bytes."""

    __slots__ = ("destination", "parts", "index", "offset", "size")

    def __init__(self, destination: str, parts: list):
        self.destination = destination
        self.parts = parts
        self.index = 0
        self.offset = 0
        size = 0
        for p in parts:  # (a loop, not sum() over a generator: one frame less per response)
            size += len(p) if isinstance(p, (bytes, bytearray, memoryview)) else p.size_in_bytes
        self.size = size

    def completed(self) -> bool:
        return self.index >= len(self.parts)

    def write_to(self, sock: socket.socket) -> bool:
        """Write as much as the socket takes. Returns True once everything is written.
        Socket errors (peer gone) propagate as OSError."""
        parts = self.parts
        while self.index < len(parts):
            part = parts[self.index]
            if isinstance(part, (bytes, bytearray, memoryview)):
                remaining = len(part) - self.offset
                if remaining > 0:
                    try:
                        n = sock.send(memoryview(part)[self.offset :] if self.offset else part)
                    except (BlockingIOError, InterruptedError):
                        return False
                    self.offset += n
                    if n < remaining:
                        return False
            else:
                if getattr(sock, "tls", False):
                    # TLS: no sendfile; the region is read into memory and sent encrypted (as Kafka does).
                    parts[self.index] = memoryview(part.read_bytes())
                    continue
                remaining = part.size_in_bytes - self.offset
                while remaining > 0:
                    n = part.write_to(sock, self.offset, remaining)
                    if n <= 0:
                        return False
                    self.offset += n
                    remaining -= n
            self.index += 1
            self.offset = 0
        return True


class ChannelMuteState(enum.Enum):
    NOT_MUTED = "NOT_MUTED"
    MUTED = "MUTED"
    MUTED_AND_RESPONSE_PENDING = "MUTED_AND_RESPONSE_PENDING"
    MUTED_AND_THROTTLED = "MUTED_AND_THROTTLED"
    MUTED_AND_THROTTLED_AND_RESPONSE_PENDING = "MUTED_AND_THROTTLED_AND_RESPONSE_PENDING"

    # MUTE_TRANSITIONS is looked up twice per request: members are singletons, so identity hashing is the
    # same mapping without Enum.__hash__'s Python-level call (hash of the name)
    __hash__ = object.__hash__


class ChannelMuteEvent(enum.Enum):
    REQUEST_RECEIVED = "REQUEST_RECEIVED"
    RESPONSE_SENT = "RESPONSE_SENT"
    THROTTLE_STARTED = "THROTTLE_STARTED"
    THROTTLE_ENDED = "THROTTLE_ENDED"

    __hash__ = object.__hash__  # as ChannelMuteState's


_S, _E = ChannelMuteState, ChannelMuteEvent
# (state, event) -> next state; any other pair is illegal (KafkaChannel.handleChannelMuteEvent).
MUTE_TRANSITIONS: dict[tuple[ChannelMuteState, ChannelMuteEvent], ChannelMuteState] = {
    (_S.MUTED, _E.REQUEST_RECEIVED): _S.MUTED_AND_RESPONSE_PENDING,
    (_S.MUTED_AND_RESPONSE_PENDING, _E.RESPONSE_SENT): _S.MUTED,
    (_S.MUTED_AND_THROTTLED_AND_RESPONSE_PENDING, _E.RESPONSE_SENT): _S.MUTED_AND_THROTTLED,
    (_S.MUTED_AND_RESPONSE_PENDING, _E.THROTTLE_STARTED): _S.MUTED_AND_THROTTLED_AND_RESPONSE_PENDING,
    (_S.MUTED_AND_THROTTLED, _E.THROTTLE_ENDED): _S.MUTED,
    (_S.MUTED_AND_THROTTLED_AND_RESPONSE_PENDING, _E.THROTTLE_ENDED): _S.MUTED_AND_RESPONSE_PENDING,
}


class IllegalMuteTransition(RuntimeError):
    pass


class KafkaChannel:
    """One connection: socket, the receive in progress, the send in progress and the mute state."""

    __slots__ = (
        "id",
        "sock",
        "fileno",
        "max_receive_size",
        "receive",
        "send",
        "mute_state",
        "registered_events",
        "client_software_name",
        "client_software_version",
        "memory_pool",
        "read_ready",
        "buffered",
        "peer_closed",
        "authenticator",
        "principal",
        "token_authenticated",
        "client_address",
        "thread_time_ns",
        "sasl_mechanism",
        "session_expiration_ns",
        "reauthentication_start_ns",
    )

    def __init__(
        self, channel_id: str, sock: socket.socket, max_receive_size: int, memory_pool: MemoryPool = _UNBOUNDED_POOL
    ):
        self.id = channel_id
        self.memory_pool = memory_pool
        self.sock = sock
        self.fileno = sock.fileno()
        self.max_receive_size = max_receive_size
        self.receive: NetworkReceive | None = None
        self.send: NetworkSend | None = None
        self.mute_state = ChannelMuteState.NOT_MUTED
        self.registered_events = 0
        self.client_software_name = "unknown"
        self.client_address: tuple[str, int] | None = None  # (host, port) of the peer, parsed once
        self.client_software_version = "unknown"
        # The socket may hold unread bytes: cleared only when a read comes back short (so an
        # edge-triggered poller knows when it must wait for the next edge), set again by the poller.
        self.read_ready = True
        self.buffered: memoryview | None = None  # bytes read past the end of the previous frame
        self.peer_closed = False  # the poller saw the peer's FIN/HUP: read on until EOF, short reads or not
        #: SASL listeners: the connection's authenticator until it completes (then None); a
        #: security.SaslServerAuthenticator, which the network layer does not import
        self.authenticator: Any = None
        self.principal = "User:ANONYMOUS"
        #: the SASL session logged in with a delegation token (KIP-48; Kafka's ``tokenAuthenticated``)
        self.token_authenticated = False
        #: SASL: the mechanism the connection authenticated with, when its session expires (monotonic ns;
        #: None: never, KIP-368 connections.max.reauth.ms) and when its last re-authentication began (0: never)
        self.sasl_mechanism: str | None = None
        self.session_expiration_ns: int | None = None
        self.reauthentication_start_ns = 0
        #: ns the network thread spent reading and writing this channel since the last completed response
        #: (Kafka's KafkaChannel network thread time, for the request quota's network share)
        self.thread_time_ns = 0

    def read(self, scratch: bytearray | None = None) -> NetworkReceive | None:
        """Read; return the completed receive (and reset) or None if more bytes are needed. When the
        memory pool cannot hold the frame the channel mutes itself (it stays readable in the socket).

        With ``scratch`` (a buffer owned by the calling thread), the start of a frame is read with one
        ``recv`` of up to ``len(scratch)`` bytes: a small request costs one system call instead of two
        (size, then body), and bytes past the frame (a pipelined next request) are kept in ``buffered``
        for the next read; a large frame's remainder is still read straight into its payload.

        Through the unbounded pool, a frame that is whole in ``buffered`` or in that first ``recv`` (a usual
        request) is taken on the spot (``read_whole_frame``); anything else (a partial frame, a bad size, a
        bounded pool) goes through the general path below, which judges it."""
        receive = self.receive
        if receive is None:
            if scratch is not None and self.memory_pool is _UNBOUNDED_POOL:
                whole = self.read_whole_frame(scratch)
                if whole is not None:
                    return whole
                receive = self.receive  # begun there when its recv brought part of a frame
            if receive is None:
                receive = self.receive = NetworkReceive(self.max_receive_size, self.memory_pool)
        while True:
            buffered = self.buffered
            if buffered is not None:
                used = receive.consume(buffered)
                self.buffered = buffered[used:] if used < len(buffered) else None
            if receive.complete():
                self.receive = None
                return receive
            if receive.memory_pending:
                if self.mute_state is ChannelMuteState.NOT_MUTED:
                    self.mute_state = ChannelMuteState.MUTED
                return None
            if not self.read_ready:
                return None
            if scratch is not None and receive.payload is None:
                n = self._recv_scratch(scratch, receive.size_read)
                if n == 0:
                    return None
                self._consume_scratch(receive, scratch, n)
            else:
                n = receive.read_from(self.sock)
                if not receive.complete() and not receive.memory_pending and (n == 0 or not self.peer_closed):
                    self.read_ready = False  # read_from stops short only when the socket has nothing more
                if not self.read_ready or receive.complete():
                    quickack(self.sock)  # a large frame: acknowledge its segments now (module docstring)

    def _recv_scratch(self, scratch: bytearray, size_read: int) -> int:
        """One ``recv`` into ``scratch``: the bytes read, 0 when the socket has none now (``read_ready`` cleared, as
        after a short read unless the peer has closed). The peer's close raises EOFError, or TruncatedReceiveError
        after ``size_read`` (1-3) bytes of a frame's size."""
        try:
            n = self.sock.recv_into(scratch)
        except (BlockingIOError, InterruptedError):
            self.read_ready = False
            return 0
        if n == 0:
            if size_read:
                raise TruncatedReceiveError(f"connection closed after {size_read} of 4 size bytes")
            raise EOFError("connection closed by peer")
        if n < len(scratch) and not self.peer_closed:
            self.read_ready = False
        return n

    def _consume_scratch(self, receive: NetworkReceive, scratch: bytearray, n: int) -> None:
        """Feed ``receive`` the first ``n`` bytes of ``scratch``; what it does not take (the next frames) is kept
        in ``buffered``."""
        with memoryview(scratch) as view:
            used = receive.consume(view[:n])
            if used < n:
                self.buffered = memoryview(bytes(view[used:n]))

    def read_whole_frame(self, scratch: bytearray) -> NetworkReceive | None:
        """``read``'s fast path (unbounded pool, no frame begun): the next frame when it is whole in ``buffered``
        or in one ``recv`` into ``scratch`` (bytes past it stay in ``buffered``), else None, for the general path to
        go on: a frame that is not whole in ``buffered`` is left there; one whose recv brought only part of it is
        begun (``self.receive``) from ``scratch`` as the general path's own recv does (no copy through ``buffered``),
        which judges its size (InvalidReceiveError)."""
        data = self.buffered
        if data is None:
            if not self.read_ready:
                return None
            n = self._recv_scratch(scratch, 0)
            if n == 0:
                return None
            size = _SIZE.unpack_from(scratch)[0] if n >= 4 else -1
            if 0 <= size <= self.max_receive_size and n >= 4 + size:
                with memoryview(scratch) as view:
                    payload = bytearray(view[4 : 4 + size])
                    if n > 4 + size:
                        self.buffered = memoryview(bytes(view[4 + size : n]))
            else:
                self.receive = NetworkReceive(self.max_receive_size, _UNBOUNDED_POOL)
                self._consume_scratch(self.receive, scratch, n)  # (as read does: no copy through buffered)
                return None
        else:
            n = len(data)
            size = _SIZE.unpack_from(data)[0] if n >= 4 else -1
            if size < 0 or size > self.max_receive_size or n < 4 + size:
                return None
            payload = bytearray(data[4 : 4 + size])
            self.buffered = data[4 + size :] if n > 4 + size else None
        receive = NetworkReceive(self.max_receive_size, _UNBOUNDED_POOL)
        receive.size_read = 4
        receive.size = receive.payload_read = size
        receive.payload = payload
        return receive

    def set_send(self, send: NetworkSend) -> None:
        if self.send is not None:
            raise RuntimeError(
                "Attempt to begin a send operation with prior send operation still in progress, connection id "
                f"is {self.id}"
            )
        self.send = send

    def write(self) -> NetworkSend | None:
        """Write the pending send; return it once complete (and clear it), else None."""
        send = self.send
        if send is not None and send.write_to(self.sock):
            self.send = None
            return send
        return None

    # -- mute state machine --------------------------------------------------------------------
    def mute(self) -> None:
        if self.mute_state is ChannelMuteState.NOT_MUTED:
            self.mute_state = ChannelMuteState.MUTED

    def maybe_unmute(self) -> bool:
        """Unmute only from MUTED (response sent, no throttle). Returns whether now NOT_MUTED."""
        if self.mute_state is ChannelMuteState.MUTED:
            self.mute_state = ChannelMuteState.NOT_MUTED
        return self.mute_state is ChannelMuteState.NOT_MUTED

    def handle_mute_event(self, event: ChannelMuteEvent) -> None:
        nxt = MUTE_TRANSITIONS.get((self.mute_state, event))
        if nxt is None:
            raise IllegalMuteTransition(f"Cannot transition from {self.mute_state.name} for {event.name}")
        self.mute_state = nxt

    def close(self) -> None:
        self.buffered = None
        if self.receive is not None:
            self.receive.release()
            self.receive = None
        try:
            self.sock.close()
        except OSError:
            pass
