"""NetworkClient: non-blocking request/response connections to brokers for one I/O thread.

Mirrors the client side of Kafka's ``NetworkClient`` + ``Selector``: one connection per node (the
bootstrap addresses get negative ids), connect with exponential back-off (``reconnect.backoff.ms`` ..
``reconnect.backoff.max.ms``), an ApiVersions exchange before a connection is ready (versions are then
picked as ``min(ours, broker's)``), ``InFlightRequests`` capped per connection, responses matched to
requests in order by correlation id, ``request.timeout.ms`` per request, and every in-flight request
failed with :class:`DisconnectError` when its connection drops. A connection that cannot be established
logs Kafka's WARN ``Connection to node N (host:port) could not be established. Node may not be available.``

Threading: owned by one thread (the producer's Sender); ``wakeup`` is thread-safe.
"""

from __future__ import annotations

import collections
import os
import selectors
import socket
import struct
import time
from collections.abc import Callable

from pykbroker.protocol import decode_response, encode_request, errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.header import response_header_version
from pykbroker.utils.logging import get_logger

_SIZE = struct.Struct(">i")
API_VERSIONS_VERSION = 3
CONNECTING, CHECKING_API_VERSIONS, READY = "CONNECTING", "CHECKING_API_VERSIONS", "READY"


class DisconnectError(ConnectionError):
    """The connection to a node dropped (or never came up) with the request in flight."""


class RequestTimeoutError(TimeoutError):
    """No response within ``request.timeout.ms``."""


class _InFlight:
    __slots__ = ("correlation_id", "api_key", "version", "callback", "sent_at")

    def __init__(self, correlation_id, api_key, version, callback, sent_at):
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.version = version
        self.callback = callback
        self.sent_at = sent_at


class _Connection:
    __slots__ = ("node_id", "sock", "state", "in_flight", "out", "out_pos", "recv", "versions", "events")

    def __init__(self, node_id: int, sock: socket.socket):
        self.node_id = node_id
        self.sock = sock
        self.state = CONNECTING
        self.in_flight: collections.deque[_InFlight] = collections.deque()
        self.out: collections.deque = collections.deque()  # frames (bytes) still to write
        self.out_pos = 0
        self.recv = bytearray()
        self.versions: dict[int, tuple[int, int]] = {}
        self.events = 0


class NetworkClient:
    def __init__(
        self,
        client_id: str,
        request_timeout_ms: int = 30000,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        max_in_flight: int = 5,
        send_buffer_bytes: int = 131072,
        receive_buffer_bytes: int = 32768,
        log=None,
    ):
        self.client_id = client_id
        self.log = log or get_logger("NetworkClient", clientId=client_id)
        self.request_timeout = request_timeout_ms / 1000.0
        self.backoff = reconnect_backoff_ms / 1000.0
        self.backoff_max = reconnect_backoff_max_ms / 1000.0
        self.max_in_flight = max_in_flight
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        self.selector = selectors.DefaultSelector()
        self.conns: dict[int, _Connection] = {}
        self.addresses: dict[int, tuple[str, int]] = {}
        self.failures: dict[int, tuple[int, float]] = {}  # node -> (consecutive failures, retry at)
        self.next_correlation_id = 0
        self._wakeup_r, self._wakeup_w = os.pipe()
        os.set_blocking(self._wakeup_r, False)
        os.set_blocking(self._wakeup_w, False)
        self.selector.register(self._wakeup_r, selectors.EVENT_READ, None)

    # -- connections -----------------------------------------------------------------------------
    def set_address(self, node_id: int, address: tuple[str, int]) -> None:
        old = self.addresses.get(node_id)
        self.addresses[node_id] = address
        if old is not None and old != address and node_id in self.conns:
            self.close(node_id, DisconnectError(f"node {node_id} moved to {address}"))

    def is_ready(self, node_id: int, now: float) -> bool:
        """True when a request can be sent to ``node_id`` now; starts connecting if needed."""
        conn = self.conns.get(node_id)
        if conn is None:
            self._maybe_connect(node_id, now)
            return False
        return conn.state == READY and len(conn.in_flight) < self.max_in_flight

    def is_connected(self, node_id: int) -> bool:
        conn = self.conns.get(node_id)
        return conn is not None and conn.state == READY

    def connection_delay(self, node_id: int, now: float) -> float:
        failures = self.failures.get(node_id)
        return 0.0 if failures is None else max(0.0, failures[1] - now)

    def in_flight_count(self, node_id: int | None = None) -> int:
        if node_id is not None:
            conn = self.conns.get(node_id)
            return len(conn.in_flight) if conn else 0
        return sum(len(c.in_flight) for c in self.conns.values())

    def _maybe_connect(self, node_id: int, now: float) -> None:
        address = self.addresses.get(node_id)
        if address is None or self.connection_delay(node_id, now) > 0:
            return
        sock = socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.send_buffer_bytes > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
        if self.receive_buffer_bytes > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)
        conn = _Connection(node_id, sock)
        self.conns[node_id] = conn
        try:
            sock.connect(address)
        except BlockingIOError:
            pass
        except OSError as e:
            self._connect_failed(node_id, address)
            self.close(node_id, DisconnectError(f"connect to node {node_id} at {address} failed: {e}"))
            return
        self._set_events(conn, selectors.EVENT_WRITE)

    def _connect_failed(self, node_id: int, address) -> None:
        where = f"{address[0]}:{address[1]}" if address else "unknown address"
        self.log.warning(f"Connection to node {node_id} ({where}) could not be established. Node may not be available.")

    def _set_events(self, conn: _Connection, events: int) -> None:
        if events == conn.events:
            return
        if conn.events == 0:
            self.selector.register(conn.sock, events, conn)
        elif events == 0:
            self.selector.unregister(conn.sock)
        else:
            self.selector.modify(conn.sock, events, conn)
        conn.events = events

    def close(self, node_id: int, cause: Exception | None = None) -> None:
        conn = self.conns.pop(node_id, None)
        if conn is None:
            return
        if conn.events:
            self.selector.unregister(conn.sock)
        conn.sock.close()
        count = self.failures.get(node_id, (0, 0.0))[0] + 1
        delay = min(self.backoff * (2 ** (count - 1)), self.backoff_max)
        self.failures[node_id] = (count, time.monotonic() + delay)
        cause = cause or DisconnectError(f"connection to node {node_id} closed")
        in_flight, conn.in_flight = conn.in_flight, collections.deque()
        for req in in_flight:
            if req.callback is not None:
                req.callback(None, cause)

    # -- requests ---------------------------------------------------------------------------------
    def version_for(self, node_id: int, api_key: int, ours: int) -> int:
        conn = self.conns.get(node_id)
        theirs = conn.versions.get(api_key) if conn else None
        if theirs is None:
            return ours
        if theirs[0] > ours:
            raise errors.UnsupportedVersionError(
                f"node {node_id} supports api {api_key} from v{theirs[0]}, we at most v{ours}"
            )
        return min(ours, theirs[1])

    def send(
        self,
        node_id: int,
        api_key: int,
        version: int,
        body: dict,
        callback: Callable[[dict | None, Exception | None], None] | None,
        expect_response: bool = True,
    ) -> None:
        """Queue a request; ``callback(response, error)`` runs on this thread when it completes.
        With ``expect_response=False`` (acks=0 produce) the callback runs once the bytes are queued."""
        conn = self.conns[node_id]
        self._enqueue(conn, api_key, version, body, callback if expect_response else None)
        if not expect_response and callback is not None:
            callback({}, None)

    def _enqueue(self, conn: _Connection, api_key: int, version: int, body: dict, callback) -> None:
        correlation_id = self.next_correlation_id
        self.next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        frame = encode_request(api_key, version, correlation_id, self.client_id, body)
        if callback is not None:
            conn.in_flight.append(_InFlight(correlation_id, api_key, version, callback, time.monotonic()))
        conn.out.append(frame)
        self._flush(conn)

    def _flush(self, conn: _Connection) -> None:
        out = conn.out
        try:
            while out:
                frame = out[0]
                n = conn.sock.send(memoryview(frame)[conn.out_pos :])
                conn.out_pos += n
                if conn.out_pos < len(frame):
                    break
                out.popleft()
                conn.out_pos = 0
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as e:
            self.close(conn.node_id, DisconnectError(f"send to node {conn.node_id} failed: {e}"))
            return
        self._set_events(conn, selectors.EVENT_READ | (selectors.EVENT_WRITE if out else 0))

    # -- I/O ---------------------------------------------------------------------------------------
    def wakeup(self) -> None:
        try:
            os.write(self._wakeup_w, b"x")
        except (BlockingIOError, OSError):
            pass

    def poll(self, timeout_s: float) -> None:
        for key, events in self.selector.select(max(0.0, timeout_s)):
            conn: _Connection | None = key.data
            if conn is None:
                try:
                    while os.read(self._wakeup_r, 4096):
                        pass
                except (BlockingIOError, OSError):
                    pass
                continue
            if self.conns.get(conn.node_id) is not conn:
                continue
            if conn.state == CONNECTING:
                self._finish_connect(conn)
                continue
            if events & selectors.EVENT_WRITE and conn.out:
                self._flush(conn)
                if self.conns.get(conn.node_id) is not conn:
                    continue
            if events & selectors.EVENT_READ:
                self._read(conn)
        self._expire_requests(time.monotonic())

    def _finish_connect(self, conn: _Connection) -> None:
        err = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            self._connect_failed(conn.node_id, self.addresses.get(conn.node_id))
            self.close(conn.node_id, DisconnectError(f"connect to node {conn.node_id} failed: {os.strerror(err)}"))
            return
        conn.state = CHECKING_API_VERSIONS
        self.failures.pop(conn.node_id, None)
        self._set_events(conn, selectors.EVENT_READ)
        self._enqueue(
            conn,
            ApiKeys.API_VERSIONS,
            API_VERSIONS_VERSION,
            {"client_software_name": "pykbroker", "client_software_version": "0.1.0"},
            lambda resp, err, c=conn: self._on_api_versions(c, resp, err),
        )

    def _on_api_versions(self, conn: _Connection, response, error) -> None:
        if error is not None:
            return
        if response["error_code"] != errors.NONE:
            self.close(conn.node_id, DisconnectError(f"ApiVersions failed: {errors.name_of(response['error_code'])}"))
            return
        conn.versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in response["api_keys"]}
        conn.state = READY

    def _read(self, conn: _Connection) -> None:
        try:
            data = conn.sock.recv(1 << 20)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self.close(conn.node_id, DisconnectError(f"receive from node {conn.node_id} failed: {e}"))
            return
        if not data:
            self.close(conn.node_id, DisconnectError(f"node {conn.node_id} closed the connection"))
            return
        buf = conn.recv
        buf += data
        pos = 0
        while len(buf) - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if len(buf) - pos - 4 < size:
                break
            frame = memoryview(buf)[pos + 4 : pos + 4 + size]
            pos += 4 + size
            if not conn.in_flight:
                frame.release()
                self.close(conn.node_id, DisconnectError("response without a request"))
                return
            req = conn.in_flight.popleft()
            try:
                (corr,) = _SIZE.unpack_from(frame, 0)
                if corr != req.correlation_id:
                    raise ValueError(f"correlation id {corr} does not match {req.correlation_id}")
                offset = 4 + (1 if response_header_version(req.api_key, req.version) >= 1 else 0)
                response = decode_response(req.api_key, req.version, bytes(frame[offset:]))
            except Exception as e:  # noqa: BLE001 - a broken response breaks only this connection
                frame.release()
                self.close(conn.node_id, DisconnectError(f"bad response from node {conn.node_id}: {e}"))
                return
            frame.release()
            req.callback(response, None)
            if self.conns.get(conn.node_id) is not conn:
                return
        del buf[:pos]

    def _expire_requests(self, now: float) -> None:
        for node_id, conn in list(self.conns.items()):
            if conn.in_flight and now - conn.in_flight[0].sent_at > self.request_timeout:
                self.close(node_id, RequestTimeoutError(f"Disconnecting from node {node_id} due to request timeout."))

    def close_all(self) -> None:
        for node_id in list(self.conns):
            self.close(node_id, DisconnectError("client closed"))
        self.selector.close()
        os.close(self._wakeup_r)
        os.close(self._wakeup_w)
