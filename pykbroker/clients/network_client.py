"""NetworkClient: non-blocking request/response connections to brokers for one I/O thread.

Mirrors Kafka's ``NetworkClient``, sitting (as Kafka's does on ``Selector``) on the broker's own network
layer: a :class:`~pykbroker.network.selector.ClientSelector` does the connecting and the framing
(``NetworkSend`` / ``NetworkReceive``). On top: one connection per node (the bootstrap addresses get
negative ids), connect with exponential back-off (``reconnect.backoff.ms`` .. ``reconnect.backoff.max.ms``),
an ApiVersions exchange before a connection is ready (versions are then picked as ``min(ours, broker's)``),
with a :class:`~pykbroker.security.client_security.ClientSecurity` a TLS handshake before it (done by the
selector) and SASL after it (SaslHandshake v1, then SaslAuthenticate rounds until the mechanism is complete,
as Kafka's ``SaslClientAuthenticator``; a failure closes the connection with its error message; when the
node answers a ``session_lifetime_ms`` the same exchange runs again on the connection at 85-95% of it, KIP-368,
new requests waiting until it completes),
``InFlightRequests`` capped per connection, responses matched to requests in order by correlation id,
``request.timeout.ms`` per request, and every in-flight request failed with :class:`DisconnectError` when
its connection drops. A connection that cannot be established logs Kafka's WARN
``Connection to node N (host:port) could not be established. Node may not be available.``

Time: ``now`` arguments and deadlines are seconds on the injected :class:`~pykbroker.utils.time.Time`'s
monotonic clock (``nanoseconds() / 1e9``), so timeouts are testable with ``MockTime``.

Threading: owned by one thread (the producer's Sender); ``wakeup`` is thread-safe.
"""

from __future__ import annotations

import collections
import random
import struct
from collections.abc import Callable

from pykbroker.network.channel import NetworkReceive, NetworkSend
from pykbroker.network.selector import AUTHENTICATION_FAILED, FAILED_SEND, NOT_CONNECTED, ClientSelector
from pykbroker.protocol import decode_response, encode_request, errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.header import response_header_version
from pykbroker.security.client_security import PLAINTEXT, ClientSecurity
from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import SYSTEM, Time

_CORR = struct.Struct(">i")
API_VERSIONS_VERSION = 3
CONNECTING, CHECKING_API_VERSIONS, READY = "CONNECTING", "CHECKING_API_VERSIONS", "READY"
AUTHENTICATING = "AUTHENTICATING"
SASL_AUTHENTICATE_VERSION = 2
_MAX_SASL_ROUNDS = 10


class DisconnectError(ConnectionError):
    """The connection to a node dropped (or never came up) with the request in flight."""


class AuthenticationFailedError(DisconnectError):
    """SASL authentication with a node failed (SASL_AUTHENTICATION_FAILED, unsupported mechanism...)."""


class RequestTimeoutError(TimeoutError):
    """No response within ``request.timeout.ms``."""


class _InFlight:
    __slots__ = ("correlation_id", "api_key", "version", "callback", "sent_at")

    def __init__(self, correlation_id, api_key, version, callback, sent_at):
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.version = version
        self.callback = callback
        self.sent_at = sent_at  # seconds, on the client's Time


class _Connection:
    __slots__ = ("node_id", "channel_id", "state", "in_flight", "versions", "reauth_at")

    def __init__(self, node_id: int):
        self.node_id = node_id
        self.channel_id = str(node_id)
        self.state = CONNECTING
        self.in_flight: collections.deque[_InFlight] = collections.deque()
        self.versions: dict[int, tuple[int, int]] = {}
        self.reauth_at: float | None = None  # KIP-368: when to re-authenticate (client clock, s)


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
        time: Time = SYSTEM,
        security: ClientSecurity = PLAINTEXT,
    ):
        self.client_id = client_id
        self.security = security
        self.log = log or get_logger("NetworkClient", clientId=client_id)
        self.time = time
        self.request_timeout = request_timeout_ms / 1000.0
        self.backoff = reconnect_backoff_ms / 1000.0
        self.backoff_max = reconnect_backoff_max_ms / 1000.0
        self.max_in_flight = max_in_flight
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        self.close_errors: dict[str, BaseException] = {}
        self.selector = ClientSelector(time, on_close_error=self.close_errors.__setitem__)
        self.conns: dict[int, _Connection] = {}
        self.channel_conns: dict[str, _Connection] = {}
        self.addresses: dict[int, tuple[str, int]] = {}
        self.failures: dict[int, tuple[int, float]] = {}  # node -> (consecutive failures, retry at)
        self.next_correlation_id = 0
        self.reauthenticates = False  # some node gave a SASL session lifetime (poll then checks reauth_at)

    def now(self) -> float:
        """Seconds on this client's monotonic clock (the unit of every ``now`` argument)."""
        return self.time.nanoseconds() / 1e9

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
        if conn.reauth_at is not None and now >= conn.reauth_at and conn.state == READY:
            self._reauthenticate(conn)
        return conn.state == READY and len(conn.in_flight) < self.max_in_flight

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
        conn = _Connection(node_id)
        try:
            self.selector.connect(
                conn.channel_id,
                address,
                self.send_buffer_bytes,
                self.receive_buffer_bytes,
                self.security.transport_factory(address[0]),
            )
        except OSError as e:
            self._connect_failed(node_id, address)
            self._record_failure(node_id)
            self.log.debug("connect failed", node=node_id, address=address, error=str(e))
            return
        self.conns[node_id] = conn
        self.channel_conns[conn.channel_id] = conn

    def _connect_failed(self, node_id: int, address) -> None:
        where = f"{address[0]}:{address[1]}" if address else "unknown address"
        self.log.warning(f"Connection to node {node_id} ({where}) could not be established. Node may not be available.")

    def _record_failure(self, node_id: int) -> None:
        count = self.failures.get(node_id, (0, 0.0))[0] + 1
        delay = min(self.backoff * (2 ** (count - 1)), self.backoff_max)
        self.failures[node_id] = (count, self.now() + delay)

    def close(self, node_id: int, cause: Exception | None = None) -> None:
        conn = self.conns.pop(node_id, None)
        if conn is None:
            return
        del self.channel_conns[conn.channel_id]
        self.selector.close(conn.channel_id)  # no-op when the selector already closed it
        self.close_errors.pop(conn.channel_id, None)
        self._record_failure(node_id)
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
            conn.in_flight.append(_InFlight(correlation_id, api_key, version, callback, self.now()))
        selector = self.selector
        selector.send(NetworkSend(conn.channel_id, [frame]))  # written at once as far as the socket takes
        if selector.disconnected:
            self._handle_disconnections()

    # -- I/O ---------------------------------------------------------------------------------------
    def wakeup(self) -> None:
        self.selector.wakeup()

    def poll(self, timeout_s: float) -> None:
        selector = self.selector
        selector.poll(timeout_s * 1000.0 if timeout_s > 0 else 0)
        if selector.completed_sends:
            selector.clear_completed_sends()
        if selector.completed_receives:
            receives = selector.completed_receives
            selector.clear_completed_receives()
            for channel_id, receive in receives.items():
                conn = self.channel_conns.get(channel_id)
                if conn is not None:
                    self._handle_response(conn, receive)
        if selector.disconnected:
            self._handle_disconnections()
        if selector.connected:
            connected = selector.connected
            selector.clear_connected()
            for channel_id in connected:
                conn = self.channel_conns.get(channel_id)
                if conn is not None:
                    self._handle_connected(conn)
        now = self.now()
        if self.reauthenticates:
            for conn in list(self.conns.values()):
                if conn.reauth_at is not None and now >= conn.reauth_at and conn.state == READY:
                    self._reauthenticate(conn)
        self._expire_requests(now)

    def _handle_disconnections(self) -> None:
        selector = self.selector
        while selector.disconnected:
            disconnected = selector.disconnected
            selector.clear_disconnected()
            for channel_id, reason in disconnected.items():
                conn = self.channel_conns.get(channel_id)
                if conn is None:
                    continue
                node_id = conn.node_id
                error = self.close_errors.pop(channel_id, None)
                if reason == NOT_CONNECTED:
                    self._connect_failed(node_id, self.addresses.get(node_id))
                    cause = DisconnectError(f"connect to node {node_id} failed: {error}")
                elif reason == AUTHENTICATION_FAILED:
                    self.log.error(f"Failed authentication with node {node_id}: {error}")
                    cause = AuthenticationFailedError(f"TLS handshake with node {node_id} failed: {error}")
                elif reason == FAILED_SEND:
                    cause = DisconnectError(f"send to node {node_id} failed: {error}")
                elif error is None:
                    cause = DisconnectError(f"node {node_id} closed the connection")
                else:
                    cause = DisconnectError(f"receive from node {node_id} failed: {error}")
                self.close(node_id, cause)

    def _handle_connected(self, conn: _Connection) -> None:
        conn.state = CHECKING_API_VERSIONS
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
        if self.security.sasl_mechanism is None:
            self._ready(conn)
            return
        conn.state = AUTHENTICATING
        self._enqueue(
            conn,
            ApiKeys.SASL_HANDSHAKE,
            1,
            {"mechanism": self.security.sasl_mechanism},
            lambda resp, err, c=conn: self._on_sasl_handshake(c, resp, err),
        )

    def _reauthenticate(self, conn: _Connection) -> None:
        """KIP-368 (Kafka's ``maybeBeginClientReauthentication``): SaslHandshake and SaslAuthenticate again on
        the connection; it is not READY (no new request) until they complete."""
        conn.reauth_at = None
        conn.state = AUTHENTICATING
        self.log.debug(f"Re-authenticating with node {conn.node_id}")
        self._enqueue(
            conn,
            ApiKeys.SASL_HANDSHAKE,
            1,
            {"mechanism": self.security.sasl_mechanism},
            lambda resp, err, c=conn: self._on_sasl_handshake(c, resp, err),
        )

    def _ready(self, conn: _Connection) -> None:
        conn.state = READY
        self.failures.pop(conn.node_id, None)  # the back-off restarts only once a connection was usable

    # -- SASL (Kafka's SaslClientAuthenticator) ------------------------------------------------------
    def _auth_failed(self, conn: _Connection, message: str) -> None:
        self.log.error(f"Failed authentication with node {conn.node_id}: {message}")
        self.close(conn.node_id, AuthenticationFailedError(message))

    def _on_sasl_handshake(self, conn: _Connection, response, error) -> None:
        if error is not None or self.conns.get(conn.node_id) is not conn:
            return
        if response["error_code"] != errors.NONE:
            self._auth_failed(
                conn,
                f"SaslHandshake: {errors.name_of(response['error_code'])}, "
                f"the node enables {response.get('mechanisms')}",
            )
            return
        try:
            sasl = self.security.new_sasl_client()
            token = sasl.initial_response()
        except Exception as e:  # noqa: BLE001 - a client-side SASL error fails only this connection
            self._auth_failed(conn, str(e))
            return
        self._sasl_authenticate(conn, sasl, token, 1)

    def _sasl_authenticate(self, conn: _Connection, sasl, token: bytes, round_: int) -> None:
        version = self.version_for(conn.node_id, ApiKeys.SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION)
        self._enqueue(
            conn,
            ApiKeys.SASL_AUTHENTICATE,
            version,
            {"auth_bytes": token},
            lambda resp, err: self._on_sasl_authenticate(conn, sasl, round_, resp, err),
        )

    def _on_sasl_authenticate(self, conn: _Connection, sasl, round_: int, response, error) -> None:
        if error is not None or self.conns.get(conn.node_id) is not conn:
            return
        if response["error_code"] != errors.NONE:
            self._auth_failed(conn, response.get("error_message") or errors.name_of(response["error_code"]))
            return
        try:
            token = sasl.evaluate_challenge(response["auth_bytes"])
        except Exception as e:  # noqa: BLE001 - e.g. a SCRAM server signature that does not match
            self._auth_failed(conn, str(e))
            return
        if token is None and sasl.complete:
            lifetime_ms = response.get("session_lifetime_ms") or 0
            if lifetime_ms > 0:  # re-authenticate at 85-95% of the session, as Kafka's clients
                conn.reauth_at = self.now() + lifetime_ms / 1000.0 * random.uniform(0.85, 0.95)
                self.reauthenticates = True
            self._ready(conn)
        elif token is None or round_ >= _MAX_SASL_ROUNDS:
            self._auth_failed(conn, f"SASL {self.security.sasl_mechanism} exchange did not complete")
        else:
            self._sasl_authenticate(conn, sasl, token, round_ + 1)

    def _handle_response(self, conn: _Connection, receive: NetworkReceive) -> None:
        if self.conns.get(conn.node_id) is not conn:
            return  # closed while handling an earlier response of this poll
        if not conn.in_flight:
            self.close(conn.node_id, DisconnectError("response without a request"))
            return
        req = conn.in_flight.popleft()
        frame = receive.payload
        assert frame is not None  # a completed receive
        try:
            (corr,) = _CORR.unpack_from(frame, 0)
            if corr != req.correlation_id:
                raise ValueError(f"correlation id {corr} does not match {req.correlation_id}")
            offset = 4 + (1 if response_header_version(req.api_key, req.version) >= 1 else 0)
            response = decode_response(req.api_key, req.version, bytes(memoryview(frame)[offset:]))
        except Exception as e:  # noqa: BLE001 - a broken response breaks only this connection
            self.close(conn.node_id, DisconnectError(f"bad response from node {conn.node_id}: {e}"))
            return
        req.callback(response, None)

    def _expire_requests(self, now: float) -> None:
        for node_id, conn in list(self.conns.items()):
            if conn.in_flight and now - conn.in_flight[0].sent_at > self.request_timeout:
                self.close(node_id, RequestTimeoutError(f"Disconnecting from node {node_id} due to request timeout."))

    def close_all(self) -> None:
        for node_id in list(self.conns):
            self.close(node_id, DisconnectError("client closed"))
        self.selector.close_all()
