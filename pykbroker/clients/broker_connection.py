"""A blocking connection to one broker: send requests, read responses in order (pipelining allowed).

Used by pykbroker's command-line tools, benchmarks and tests. Encoding and decoding go through
:mod:`pykbroker.protocol` (``encode_request`` / ``decode_response``); the response header version is
derived from the request's API and version (ApiVersions always uses header v0). Frames are read and
written with the broker's own :class:`~pykbroker.network.channel.NetworkReceive` /
:class:`~pykbroker.network.channel.NetworkSend` (as Kafka's clients share ``org.apache.kafka.common.network``),
here over a blocking socket bounded by ``timeout``. With a
:class:`~pykbroker.security.client_security.ClientSecurity` the connection does the TLS handshake and the
SASL exchange (SaslHandshake v1, SaslAuthenticate v2) before it is returned; a failed authentication
raises :class:`~pykbroker.protocol.errors.SaslAuthenticationError` with the broker's message. When the broker
answers a ``session_lifetime_ms`` (KIP-368), the exchange runs again before the first request sent after 85-95%
of it (with no answer pending).
Not thread-safe: one connection per thread. Another thread can still interrupt a blocked connect, read
or write: ``on_socket`` hands it the socket before the connect starts, and a ``shutdown(SHUT_RDWR)``
of that socket (or of a ``dup`` of it) makes the blocked call fail at once (the broker's
ReplicaFetcherThread does so to abandon a request in flight).

Large responses (issue 31). A response body is allocated whole when its size prefix arrives (up to
``RESPONSE_INITIAL_CHUNK_BYTES``) and read in place. While the rest of a body larger than ``LOW_WATER_MIN_BYTES``
is awaited, the socket's ``SO_RCVLOWAT`` is set to the bytes still due (at most ``LOW_WATER_MAX_BYTES``; back to 1
after the frame; not on TLS sockets, whose buffered records the kernel does not see): the reader is woken once
they are all in the socket buffer instead of once per chunk, and Linux then acknowledges the segments as they
arrive instead of when the reader drains them, so the broker's send buffer (``socket.send.buffer.bytes``) empties
without waiting for this thread. A follower's 1 MB fetch answer thus costs one wake-up of the fetcher thread
instead of one per send-buffer's worth (each a scheduling delay on a loaded machine); the bytes read, the
timeouts (each wait is still bounded by ``timeout``) and the protocol are unchanged.

With ``reuse_receive_buffer`` (the ReplicaFetcherThread's connection, issue 31) every response is read into one
buffer kept by the connection, grown (never shrunk) when a larger one comes, instead of a fresh zeroed ~1 MB
``bytearray`` per fetch answer; :meth:`BrokerConnection.receive_frame` then returns a ``memoryview`` of it, and the
decoded response's ``records`` are views of it too. The buffer is refilled only when nothing refers to it any more:
a reference to its memory is a buffer export (a ``memoryview``), and while one is alive (a caller kept a view of an
earlier answer) the next response goes to a new buffer, which the connection keeps from then on; a view taken from
an answer thus never sees a later one.

Each such wait also sets ``TCP_QUICKACK`` (Linux): the answer's segments are acknowledged as they arrive. Without
it Linux delays some ACKs on this request/response connection (its delayed-ACK "pingpong" mode, which it enters
as this side sends each request soon after an answer), and a broker whose send buffer (``socket.send.buffer.bytes``,
100 KB by default) is smaller than the answer is left with unacknowledged segments until its tail-loss probe
retransmits one, at least 10 ms later: 1 MB answers behind a 100 KB send buffer took ~9 ms each instead of
~0.4 ms (a retransmission for 4 answers in 5; ``tests/unit/clients/test_broker_connection_receive.py``). The option
lasts until the connection looks interactive again (the next request), so it is set for each answer.
"""

from __future__ import annotations

import random
import socket
import ssl
import struct
import time
from collections.abc import Callable

from pykbroker.network.channel import UNLIMITED, InvalidReceiveError, NetworkReceive, NetworkSend, quickack
from pykbroker.protocol import decode_response, encode_request, errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.header import response_header_version
from pykbroker.security.client_security import PLAINTEXT, ClientSecurity

_CORR = struct.Struct(">i")
_SIZE = struct.Struct(">i")
#: A response body up to this size (bytes) is allocated whole when its size prefix arrives and read in place (a
#: follower's 1 MB fetch answer is not copied as its buffer grows); a larger one starts here and grows.
RESPONSE_INITIAL_CHUNK_BYTES = 16 * 1024 * 1024
#: A response body with more than this many bytes still to come is awaited with SO_RCVLOWAT (module docstring)
LOW_WATER_MIN_BYTES = 64 * 1024
#: ... for at most this many bytes per wait (so a wait needs no more than this within the socket timeout)
LOW_WATER_MAX_BYTES = 1024 * 1024


def _connect(host: str, port: int, timeout: float, on_socket: Callable[[socket.socket], None] | None):
    """``socket.create_connection`` that shows each socket to ``on_socket`` before connecting it."""
    error: OSError | None = None
    for family, kind, proto, _, address in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            if on_socket is not None:
                on_socket(sock)
            sock.connect(address)
            return sock
        except OSError as e:
            sock.close()
            error = e
    raise error if error is not None else OSError(f"getaddrinfo returns an empty list for {host}:{port}")


class ConnectionClosedError(ConnectionError):
    pass


def _exported(buf: bytearray) -> bool:
    """Whether a live buffer export (a ``memoryview``) refers to ``buf``: a resize fails then (O(1): appending a byte
    to a bytearray only reallocates beyond its spare capacity)."""
    try:
        buf.append(0)
    except BufferError:
        return True
    del buf[-1]
    return False


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """``"h1:9092, [::1]:9093"`` -> ``[("h1", 9092), ("::1", 9093)]`` (Kafka's ClientUtils.parseAndValidateAddresses:
    a bad entry raises ValueError naming it)."""
    out = []
    for entry in bootstrap.split(","):
        entry = entry.strip()
        if not entry:
            continue
        host, sep, port = entry.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"Invalid url in bootstrap.servers: {entry}")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("No resolvable bootstrap urls given in bootstrap.servers")
    return out


class BrokerConnection:
    def __init__(
        self,
        host: str,
        port: int,
        client_id: str = "pykbroker",
        timeout: float = 30.0,
        security: ClientSecurity = PLAINTEXT,
        on_socket: Callable[[socket.socket], None] | None = None,
        reuse_receive_buffer: bool = False,
    ):
        """Connect to ``host:port`` (TLS handshake and SASL included), every blocking call bounded by
        ``timeout`` seconds. ``on_socket(sock)`` is called with each socket before its connect (see the
        module docstring). ``reuse_receive_buffer``: read every response into one buffer (module docstring).
        Raises OSError (the connect's, ``TimeoutError``, ``ssl.SSLError``) or
        SaslAuthenticationError."""
        sock = _connect(host, port, timeout, on_socket)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock = security.wrap_blocking(sock, host)
        except BaseException:
            sock.close()
            raise
        self.client_id = client_id
        self.node = f"{host}:{port}"
        self.next_correlation_id = 0
        self.pending: list[tuple[int, int, int]] = []  # (correlation id, api key, version)
        self.security = security
        #: the socket's SO_RCVLOWAT as last set (bytes); None: not used on this socket (TLS, or refused by the OS)
        self._low_water: int | None = None if isinstance(self.sock, ssl.SSLSocket) else 1
        #: ``reuse_receive_buffer``: the buffer responses are read into (None: a new one per response)
        self._receive_buffer: bytearray | None = bytearray(0) if reuse_receive_buffer else None
        self._size_buf = bytearray(4)
        #: KIP-368: when (time.monotonic()) to re-authenticate before the next request, None: never
        self.reauth_at: float | None = None
        if security.sasl_mechanism is not None:
            try:
                self._authenticate(security)
            except BaseException:
                self.close()
                raise

    def _authenticate(self, security: ClientSecurity) -> None:
        handshake = self.request(ApiKeys.SASL_HANDSHAKE, 1, {"mechanism": security.sasl_mechanism})
        if handshake["error_code"] != errors.NONE:
            raise errors.SaslAuthenticationError(
                f"SaslHandshake: {errors.name_of(handshake['error_code'])}, the broker enables "
                f"{handshake.get('mechanisms')}"
            )
        sasl = security.new_sasl_client()
        token: bytes | None = sasl.initial_response()
        for _ in range(10):
            assert token is not None
            response = self.request(ApiKeys.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
            if response["error_code"] != errors.NONE:
                raise errors.SaslAuthenticationError(
                    response.get("error_message") or errors.name_of(response["error_code"])
                )
            token = sasl.evaluate_challenge(response["auth_bytes"])
            if token is None:
                lifetime_ms = response.get("session_lifetime_ms") or 0
                self.reauth_at = (
                    time.monotonic() + lifetime_ms / 1000.0 * random.uniform(0.85, 0.95) if lifetime_ms > 0 else None
                )
                return
        raise errors.SaslAuthenticationError(f"SASL {security.sasl_mechanism} exchange did not complete")

    @classmethod
    def to(cls, bootstrap: str, **kw) -> BrokerConnection:
        """A connection to the first reachable address of ``bootstrap`` (``host:port[,host:port...]``,
        tried in order, as Kafka's clients go through ``bootstrap.servers``). Raises ConnectionError naming
        every address when none answers, ValueError for an address without a port."""
        addresses = parse_bootstrap(bootstrap)
        if len(addresses) == 1:
            return cls(*addresses[0], **kw)  # the socket's own error (ConnectionRefusedError, ...)
        failures = []
        for host, port in addresses:
            try:
                return cls(host, port, **kw)
            except OSError as e:
                failures.append(f"{host}:{port} ({e.strerror or e})")
        raise ConnectionError("Could not connect to any of the bootstrap servers: " + ", ".join(failures))

    def send(self, api_key: int, version: int, body: dict) -> int:
        """Write one request; returns its correlation id (read the answer with :meth:`receive`). When the SASL
        session is due for re-authentication (KIP-368: the broker's ``session_lifetime_ms``) and no answer is
        pending, the connection re-authenticates first (SaslAuthenticationError if that fails)."""
        if self.reauth_at is not None and not self.pending and time.monotonic() >= self.reauth_at:
            self.reauth_at = None
            self._authenticate(self.security)
        correlation_id = self.next_correlation_id
        self.next_correlation_id += 1
        self._write(encode_request(api_key, version, correlation_id, self.client_id, body))
        self.pending.append((correlation_id, api_key, version))
        return correlation_id

    def send_raw(self, data: bytes) -> None:
        """Write ``data`` as is (no size prefix added: tests use it to send malformed frames)."""
        self._write(data)

    def _write(self, data: bytes) -> None:
        send = NetworkSend(self.node, [data])
        while not send.write_to(self.sock):  # blocking socket: each pass writes at least one byte
            pass

    def receive_frame(self) -> bytearray | memoryview:
        """Read one size-prefixed frame; returns its body (a ``memoryview`` of the connection's buffer with
        ``reuse_receive_buffer``: valid until the next frame is read, see the module docstring). Raises
        ConnectionClosedError when the broker closes the connection, ``TimeoutError`` after ``timeout`` without
        data, InvalidReceiveError for a negative size."""
        if self._receive_buffer is not None:
            return self._receive_into_buffer()
        receive = NetworkReceive(UNLIMITED, initial_chunk=RESPONSE_INITIAL_CHUNK_BYTES)
        await_bytes = self._await_bytes if self._low_water is not None else None
        try:
            while not receive.complete():
                receive.read_from(self.sock, await_bytes)
        except EOFError as e:  # TruncatedReceiveError included
            raise ConnectionClosedError(f"connection closed by broker: {e}") from None
        finally:
            if self._low_water is not None and self._low_water != 1:
                self._set_low_water(1)
        payload = receive.payload
        assert payload is not None  # set once the receive is complete
        return payload

    def _receive_into_buffer(self) -> memoryview:
        """:meth:`receive_frame` into the reused buffer (``reuse_receive_buffer``)."""
        sock = self.sock
        size_buf = self._size_buf
        read = 0
        while read < 4:
            n = sock.recv_into(memoryview(size_buf)[read:], 4 - read)
            if n == 0:
                where = f"after {read} of 4 size bytes" if read else "by broker"
                raise ConnectionClosedError(f"connection closed {where}")
            read += n
        size = _SIZE.unpack(size_buf)[0]
        if size < 0:
            raise InvalidReceiveError(f"Invalid receive (size = {size})")
        buf = self._buffer_for(size)
        view = memoryview(buf)[:size]
        await_bytes = self._await_bytes if self._low_water is not None else None
        read = 0
        try:
            while read < size:
                if await_bytes is not None:
                    await_bytes(size - read)
                n = sock.recv_into(view[read:], size - read)
                if n == 0:
                    raise ConnectionClosedError(f"connection closed by broker after {read} of {size} frame bytes")
                read += n
        except BaseException:
            view.release()
            raise
        finally:
            if self._low_water is not None and self._low_water != 1:
                self._set_low_water(1)
        return view

    def _buffer_for(self, size: int) -> bytearray:
        """The reused buffer, at least ``size`` bytes: a new one when it is too small (with an eighth more, so that
        answers of about the same size do not each grow it again) or still referred to (exported to a live
        ``memoryview``: the bytes of an earlier answer someone kept). Zeroed only when made."""
        buf = self._receive_buffer
        assert buf is not None
        if len(buf) < size:
            buf = self._receive_buffer = bytearray(size + (size >> 3))
        elif _exported(buf):
            buf = self._receive_buffer = bytearray(len(buf))
        return buf

    def _await_bytes(self, remaining: int) -> None:
        """Before each blocking read of a frame body with ``remaining`` bytes still due: the socket's low-water mark
        (module docstring)."""
        want = min(remaining, LOW_WATER_MAX_BYTES) if remaining > LOW_WATER_MIN_BYTES else 1
        if want != self._low_water:
            self._set_low_water(want)

    def _set_low_water(self, n: int) -> None:
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, n)
            self._low_water = n
        except OSError:  # not supported here: read as before
            self._low_water = None
            return
        if n > 1:  # acknowledge what arrives while we wait (module docstring)
            quickack(self.sock)

    def receive(self) -> tuple[int, dict]:
        """Read the next response: ``(correlation id, body dict)``; checks the correlation id matches."""
        correlation_id, api_key, version = self.pending.pop(0)
        frame = memoryview(self.receive_frame())
        got = _CORR.unpack_from(frame, 0)[0]
        if got != correlation_id:
            raise ConnectionError(f"correlation id mismatch: expected {correlation_id}, got {got}")
        offset = 4
        if response_header_version(api_key, version) >= 1:
            offset += 1  # empty tagged-field section (brokers send no header tags)
            if frame[4] != 0:
                raise ConnectionError("unexpected tagged fields in response header")
        return correlation_id, decode_response(api_key, version, frame[offset:])

    def request(self, api_key: int, version: int, body: dict) -> dict:
        self.send(api_key, version, body)
        return self.receive()[1]

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
