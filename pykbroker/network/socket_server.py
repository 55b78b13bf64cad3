"""SocketServer, Acceptor and Processor: Kafka's network threads.

Mirrors ``kafka.network.SocketServer`` thread for thread (docs/ARCHITECTURE.md §2):

* one :class:`Acceptor` thread per listener: non-blocking listening socket (``listen`` with
  ``socket.listen.backlog.size``), ``select(500 ms)``, then every pending connection is accepted in
  batches (:mod:`pykbroker.network.accept`), counted by ``ConnectionQuotas.inc`` (which may first wait
  out the broker's or listener's connection creation rate, KIP-612), given its socket options and handed
  round-robin through each Processor's bounded ``new_connections`` queue (non-blocking offers, a blocking
  put on the last try); each Processor is woken once per batch. A connection of an IP over its
  ``connection_creation_rate`` is held unanswered and closed when its throttle time is up;
* :class:`Processor` threads (``num.network.threads`` per data-plane listener, exactly one for the
  control-plane listener), each owning a :class:`KSelector` and running Kafka's loop order:
  configure new connections, process new responses (and, at once, the sends they completed by an
  optimistic write), poll, process completed receives, process completed sends, process disconnected,
  close excess connections; each stage is entered only when it has work (a lone request costs two passes:
  the one that reads it, the one that writes its response). Request headers and bodies are
  parsed on the Processor; a malformed or disallowed request closes only its connection. A channel is
  muted from request receipt until its response has been written, so responses leave in request order;
* planes: the data plane has one :class:`RequestChannel` of ``queued.max.requests`` shared by all its
  Processors; the control plane one of 20.

Threading: the Acceptor owns its listening socket; a Processor owns its selector, channels and
``inflight_responses``; other threads talk to a Processor only through ``accept`` (new connection
queue) and ``enqueue_response`` (response queue), both of which wake its selector.
"""

from __future__ import annotations

import errno
import heapq
import queue
import resource
import selectors
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, cast

from pykbroker.config.broker_configs.quota_configs import QUOTA_WINDOW_NUM_CONFIG, QUOTA_WINDOW_SIZE_SECONDS_CONFIG
from pykbroker.config.broker_configs.socket_server_configs import (
    CONNECTIONS_MAX_IDLE_MS_CONFIG,
    MAX_CONNECTION_CREATION_RATE_CONFIG,
    MAX_CONNECTIONS_CONFIG,
    MAX_CONNECTIONS_PER_IP_CONFIG,
    NUM_NETWORK_THREADS_CONFIG,
    QUEUED_MAX_REQUEST_BYTES_CONFIG,
    QUEUED_MAX_REQUESTS_CONFIG,
    SOCKET_LISTEN_BACKLOG_SIZE_CONFIG,
    SOCKET_RECEIVE_BUFFER_BYTES_CONFIG,
    SOCKET_REQUEST_MAX_BYTES_CONFIG,
    SOCKET_SEND_BUFFER_BYTES_CONFIG,
)
from pykbroker.config.endpoint import EndPoint
from pykbroker.network.accept import accept_batch
from pykbroker.network.channel import (
    ChannelMuteEvent,
    ChannelMuteState,
    IllegalMuteTransition,
    InvalidReceiveError,
    NetworkSend,
    TruncatedReceiveError,
)
from pykbroker.network.connection_quotas import ConnectionQuotas, ConnectionThrottledError, TooManyConnectionsError
from pykbroker.network.memory_pool import NONE as UNBOUNDED_POOL
from pykbroker.network.memory_pool import MemoryPool, SimpleMemoryPool
from pykbroker.network.request_channel import (
    CloseConnectionResponse,
    EndThrottlingResponse,
    NoOpResponse,
    Request,
    RequestChannel,
    RequestContext,
    Response,
    SendResponse,
    StartThrottlingResponse,
)
from pykbroker.network.selector import KSelector
from pykbroker.network.ssl_transport import SslTransportLayer, TlsHandshakeError
from pykbroker.protocol import api_keys as _api_keys
from pykbroker.protocol import decode_request
from pykbroker.protocol.header import RequestHeader, parse_request_header, peek_api_key_version
from pykbroker.protocol.produce_request import decode_produce_request
from pykbroker.utils.logging import get_logger
from pykbroker.utils.metrics import MetricsRegistry
from pykbroker.utils.time import SYSTEM, Time
from pykbroker.utils.windowed_stats import SampledRate

ANONYMOUS = "User:ANONYMOUS"
DATA_PLANE = "data-plane"
CONTROL_PLANE = "control-plane"
CONNECTION_QUEUE_SIZE = 20
INT_MAX = 2**31 - 1
#: a request header v1/v2's fixed start: api key, api version, correlation id, client id length
_HEADER_V1 = struct.Struct(">hhih")
_NOT_MUTED = ChannelMuteState.NOT_MUTED
_MUTED_AND_RESPONSE_PENDING = ChannelMuteState.MUTED_AND_RESPONSE_PENDING
#: Upper bound on a TLS handshake plus SASL authentication (ms), see Processor.authentication_deadlines
AUTHENTICATION_TIMEOUT_MS = 30_000
ACCEPT_BATCH_SIZE = 64  # connections taken per accept batch (the Acceptor loops until none is pending)
ACCEPT_BACKOFF_MS = 100  # pause after EMFILE/ENFILE so a full fd table does not spin the Acceptor


class SocketServerConfig:
    """The network layer's own small view of the broker configuration."""

    def __init__(
        self,
        node_id: int,
        num_network_threads: int,
        queued_max_requests: int,
        socket_send_buffer_bytes: int,
        socket_receive_buffer_bytes: int,
        socket_request_max_bytes: int,
        socket_listen_backlog_size: int,
        connections_max_idle_ms: int,
        max_connections_per_ip: int,
        max_connections_per_ip_overrides: dict[str, int],
        max_connections: int,
        data_plane_listeners: list[EndPoint],
        control_plane_listener: EndPoint | None,
        inter_broker_listener_name: str | None = None,
        queued_max_request_bytes: int = -1,
        max_connection_creation_rate: int = INT_MAX,
        listener_connection_creation_rates: dict[str, int] | None = None,
        quota_window_num: int = 11,
        quota_window_size_seconds: int = 1,
    ):
        """``listener_connection_creation_rates``: listener name -> its
        ``listener.name.<l>.max.connection.creation.rate`` (the others follow ``max_connection_creation_rate``)."""
        self.node_id = node_id
        self.num_network_threads = num_network_threads
        self.queued_max_requests = queued_max_requests
        self.socket_send_buffer_bytes = socket_send_buffer_bytes
        self.socket_receive_buffer_bytes = socket_receive_buffer_bytes
        self.socket_request_max_bytes = socket_request_max_bytes
        self.socket_listen_backlog_size = socket_listen_backlog_size
        self.connections_max_idle_ms = connections_max_idle_ms
        self.max_connections_per_ip = max_connections_per_ip
        self.max_connections_per_ip_overrides = max_connections_per_ip_overrides
        self.max_connections = max_connections
        self.data_plane_listeners = data_plane_listeners
        self.control_plane_listener = control_plane_listener
        self.inter_broker_listener_name = inter_broker_listener_name
        self.queued_max_request_bytes = queued_max_request_bytes
        self.max_connection_creation_rate = max_connection_creation_rate
        self.listener_connection_creation_rates = listener_connection_creation_rates
        self.quota_window_num = quota_window_num
        self.quota_window_size_seconds = quota_window_size_seconds

    @classmethod
    def from_kafka_config(cls, config) -> SocketServerConfig:
        return cls(
            node_id=config.node_id,
            num_network_threads=config[NUM_NETWORK_THREADS_CONFIG],
            queued_max_requests=config[QUEUED_MAX_REQUESTS_CONFIG],
            socket_send_buffer_bytes=config[SOCKET_SEND_BUFFER_BYTES_CONFIG],
            socket_receive_buffer_bytes=config[SOCKET_RECEIVE_BUFFER_BYTES_CONFIG],
            socket_request_max_bytes=config[SOCKET_REQUEST_MAX_BYTES_CONFIG],
            socket_listen_backlog_size=config[SOCKET_LISTEN_BACKLOG_SIZE_CONFIG],
            connections_max_idle_ms=config[CONNECTIONS_MAX_IDLE_MS_CONFIG],
            max_connections_per_ip=config[MAX_CONNECTIONS_PER_IP_CONFIG],
            max_connections_per_ip_overrides=config.max_connections_per_ip_overrides,
            max_connections=config[MAX_CONNECTIONS_CONFIG],
            data_plane_listeners=config.data_plane_listeners,
            control_plane_listener=config.control_plane_listener,
            inter_broker_listener_name=config.inter_broker_listener_name,
            queued_max_request_bytes=config[QUEUED_MAX_REQUEST_BYTES_CONFIG],
            max_connection_creation_rate=config[MAX_CONNECTION_CREATION_RATE_CONFIG],
            listener_connection_creation_rates=config.listener_connection_creation_rates,
            quota_window_num=config[QUOTA_WINDOW_NUM_CONFIG],
            quota_window_size_seconds=config[QUOTA_WINDOW_SIZE_SECONDS_CONFIG],
        )


class Processor(threading.Thread):
    """One network thread: owns a KSelector and the connections the Acceptor hands it."""

    def __init__(
        self,
        processor_id: int,
        plane: str,
        endpoint: EndPoint,
        config: SocketServerConfig,
        request_channel: RequestChannel,
        connection_quotas: ConnectionQuotas,
        is_api_allowed: Callable[[int, int], bool],
        metrics: MetricsRegistry,
        time: Time = SYSTEM,
        selector_factory: Callable[..., KSelector] = KSelector,
        memory_pool: MemoryPool = UNBOUNDED_POOL,
        authenticator_factory: Callable[[], object] | None = None,
        sasl_max_receive_size: int = 524288,
        transport_factory: Callable[[socket.socket], object] | None = None,
        principal_builder: Callable[[dict | None], str] | None = None,
    ):
        super().__init__(
            name=f"{plane}-kafka-network-thread-{config.node_id}-{endpoint.listener_name}-"
            f"{endpoint.security_protocol}-{processor_id}",
            daemon=False,
        )
        self.id = processor_id
        self.plane = plane
        self.endpoint = endpoint
        self.listener_name = endpoint.listener_name
        self.security_protocol = endpoint.security_protocol
        self.request_channel = request_channel
        self.connection_quotas = connection_quotas
        self.is_api_allowed = is_api_allowed
        self.allowed_apis: set[tuple[int, int]] = set()  # (api key, version) found allowed (_api_allowed)
        #: (api key, version) -> (request header version, api name, is Produce) of the allowed pairs parsed once
        #: by :meth:`_parse_request` (not ApiVersions, not header v0): parsed in one step after that
        self.request_kinds: dict[tuple[int, int], tuple[int, str, bool]] = {}
        self.time = time
        self.metrics = metrics
        self.log = get_logger("SocketServer", listenerType="BROKER", nodeId=config.node_id, processor=processor_id)
        self.selector = selector_factory(
            config.socket_request_max_bytes,
            config.connections_max_idle_ms,
            time,
            on_close_error=self._on_close_error,
            memory_pool=memory_pool,
        )
        self.new_connections: queue.Queue = queue.Queue(maxsize=CONNECTION_QUEUE_SIZE)
        #: responses from the handler threads (any thread appends; only this thread pops): a deque, whose
        #: append/popleft are atomic, so the loop tests it for work without a call
        self.response_queue: deque[Response] = deque()
        self.inflight_responses: dict[str, SendResponse] = {}
        #: SASL listeners: a new authenticator per connection (the network layer only runs its frames)
        self.authenticator_factory = authenticator_factory
        #: SSL / SASL_SSL listeners: wraps each accepted socket (SslTransportLayer); the principal of a
        #: TLS connection without SASL comes from its client certificate (principal_builder)
        self.transport_factory = transport_factory
        self.principal_builder = principal_builder
        self.sasl_max_receive_size = sasl_max_receive_size
        self.socket_request_max_bytes = config.socket_request_max_bytes
        self.auth_sends: dict[str, bool] = {}  # connection id -> close once the SASL answer is sent
        #: failed authentications are closed connection.failed.authentication.delay.ms (100) after the
        #: answer went out, so the client reads it (Kafka's delayed close); connection id -> deadline (ns)
        self.delayed_closes: dict[str, int] = {}
        self.failed_authentication_delay_ns = 100_000_000
        #: TLS and SASL connections must finish their handshake and authentication within
        #: min(connections.max.idle.ms, 30 s) of being accepted (30 s: the clients' own
        #: socket.connection.setup.timeout.max.ms); bytes trickled in do not extend it, unlike the idle
        #: expiry. Connection id -> deadline (ns), in accept order, so in deadline order.
        self.authentication_deadlines: dict[str, int] = {}
        idle_ms = config.connections_max_idle_ms
        self.authentication_timeout_ns = (
            min(idle_ms, AUTHENTICATION_TIMEOUT_MS) if idle_ms >= 0 else AUTHENTICATION_TIMEOUT_MS
        ) * 1_000_000
        self.next_connection_index = 0
        #: requests parsed by this iteration's receive pass, handed to the RequestChannel just before the next
        #: poll (see run): a handler woken earlier would only wait for the GIL this thread holds
        self.parsed_requests: list = []
        self.should_run = True
        self.idle = metrics.idle_ratio(
            "kafka.network:type=SocketServer,name="
            f"{'ControlPlane' if plane == CONTROL_PLANE else ''}NetworkProcessorAvgIdlePercent"
        )
        #: Kafka's per-Processor ``kafka.network:type=Processor,name=IdlePercent,networkProcessor=<id>``
        #: (removed with the Processor, see :meth:`remove_metrics`)
        self.idle_metric_name = f"kafka.network:type=Processor,name=IdlePercent,networkProcessor={processor_id}"
        self.own_idle = metrics.idle_ratio(self.idle_metric_name)
        #: Kafka's Selector ``connection-creation-rate`` / ``-total`` (socket-server-metrics, tags listener and
        #: networkProcessor): connections this Processor registered, per second over two 30 s windows
        self.connection_creations = SampledRate(2, 30_000, time.milliseconds())
        self.connection_creation_total = 0
        self._creation_lock = threading.Lock()
        #: KIP-368: connections closed because their SASL session expired before a request (Kafka's
        #: expired-connections-killed-count) and re-authentications that succeeded / failed (the Selector's
        #: successful-reauthentication-total, failed-reauthentication-total); written by this thread only
        self.expired_connections_killed = 0
        self.successful_reauthentications = 0
        self.failed_reauthentications = 0
        tags = f"listener={endpoint.listener_name},networkProcessor={processor_id}"
        gauges = {
            "connection-creation-rate": self._connection_creation_rate,
            "connection-creation-total": lambda: self.connection_creation_total,
            "expired-connections-killed-count": lambda: self.expired_connections_killed,
            "successful-reauthentication-total": lambda: self.successful_reauthentications,
            "failed-reauthentication-total": lambda: self.failed_reauthentications,
        }
        self.selector_metric_names = []
        for name, value in gauges.items():
            metric_name = f"kafka.server:type=socket-server-metrics,name={name},{tags}"
            metrics.gauge(metric_name, value)
            self.selector_metric_names.append(metric_name)
        self.started = threading.Event()

    # -- cross-thread entry points -------------------------------------------------------------
    def accept(self, sock: socket.socket, may_block: bool) -> bool:
        """Queue a new connection (Acceptor thread). Returns False if the queue is full and not may_block.
        The caller wakes the Processor (:meth:`wakeup`) once per batch of connections."""
        try:
            if may_block:
                self.selector.wakeup()  # the queue is full: make sure the Processor is draining it
                self.new_connections.put(sock)
            else:
                self.new_connections.put_nowait(sock)
        except queue.Full:
            return False
        return True

    def enqueue_response(self, response, wakeup: bool = True) -> None:
        self.response_queue.append(response)
        if wakeup:
            self.selector.wakeup()

    def wakeup(self) -> None:
        self.selector.wakeup()

    def begin_shutdown(self) -> None:
        self.should_run = False
        self.selector.wakeup(force=True)

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> None:
        self.started.set()
        sel, responses, quotas = self.selector, self.response_queue, self.connection_quotas
        select_before = sel.select_time_ns
        loop_start = self.time.nanoseconds()
        try:
            # Each stage is entered only when it has work, tested without a call (a lone request costs two
            # passes of this loop: the one that reads it and the one that writes its response)
            while self.should_run:
                try:
                    if self.new_connections.queue:  # unlocked peek: the Acceptor wakes us after each put
                        self._configure_new_connections()
                    if responses:
                        self._process_new_responses()
                    if sel.completed_sends:
                        # responses written at once (optimistic write): unmute their channels before the
                        # poll, so a client's next request is read by this poll instead of being seen on
                        # a still-muted channel (which would cost an epoll interest flip each way)
                        self._process_completed_sends()
                    # the poll (inline: two passes per lone request). From here on other threads' wakeups
                    # write the eventfd (KSelector.prepare_to_block, inline); before, they only queue: whatever
                    # they queued is seen by the checks below, so nothing is missed. Don't block while work is
                    # already pending: queued responses or connections, or sends that completed (optimistic
                    # writes) / channels that closed since the last poll and still need processing.
                    sel._lazy_wakeup = sel._may_block = True
                    if self.parsed_requests:
                        # this pass's parsed requests go to the RequestChannel (blocking while it is full, Kafka's
                        # back-pressure) right before the poll releases the GIL: the handler each put wakes finds
                        # the GIL free instead of waking to wait for it while this thread finishes its pass (one
                        # GIL hand-off per request instead of two; each request's channel was muted when it was
                        # parsed, as in Kafka)
                        requests, self.parsed_requests = self.parsed_requests, []
                        send_request = self.request_channel.send_request
                        for request in requests:
                            send_request(request)
                    if (
                        responses
                        or self.new_connections.queue
                        or sel.completed_sends
                        or sel.disconnected
                        or not self.should_run
                    ):
                        timeout = 0
                    else:
                        timeout = 50 if self.delayed_closes else 300
                    try:
                        sel.poll(timeout)
                    except OSError as e:
                        self.log.error("Processor poll failed.", error=repr(e))
                    if sel.completed_receives:
                        self._process_completed_receives()
                    if sel.completed_sends:
                        self._process_completed_sends()
                    if sel.disconnected:
                        self._process_disconnected()
                    if quotas.total > quotas.max_connections:  # max_connections_exceeded's first test, inline
                        self._close_excess_connections()
                    if self.delayed_closes:
                        self._close_delayed()
                    if self.authentication_deadlines:
                        self._expire_unauthenticated()
                except Exception as e:  # never let one failure kill the network thread
                    self.log.error("Processor got uncaught exception.", error=repr(e), exc_info=True)
                now = sel.poll_end_ns  # the clock read when this pass's poll returned
                if now - loop_start > 100_000_000:
                    idle = self.selector.select_time_ns - select_before
                    self.idle.record(idle, now - loop_start)
                    self.own_idle.record(idle, now - loop_start)
                    select_before, loop_start = self.selector.select_time_ns, now
        finally:
            for request in self.parsed_requests:  # shutting down before they were handed over: dropped
                request.release_buffer()
            self.parsed_requests = []
            self._close_all()

    def _configure_new_connections(self) -> None:
        for _ in range(CONNECTION_QUEUE_SIZE):
            try:
                sock = self.new_connections.get_nowait()
            except queue.Empty:
                return
            try:
                sock.setblocking(False)  # already non-blocking in the kernel (SOCK_NONBLOCK); align the object
                local = sock.getsockname()
                remote = sock.getpeername()
                connection_id = f"{local[0]}:{local[1]}-{remote[0]}:{remote[1]}-{self.id}-{self.next_connection_index}"
                if self.transport_factory is not None:
                    sock = self.transport_factory(sock)
                self.next_connection_index = (
                    0 if self.next_connection_index == INT_MAX else self.next_connection_index + 1
                )
                self.selector.register(connection_id, sock)
                with self._creation_lock:
                    self.connection_creations.record(1.0, self.time.milliseconds())
                    self.connection_creation_total += 1
                if self.authenticator_factory is not None:
                    channel = self.selector.channel(connection_id)
                    assert channel is not None  # registered just above
                    channel.authenticator = self.authenticator_factory()
                    channel.max_receive_size = self.sasl_max_receive_size  # bounded until authenticated
                if self.authenticator_factory is not None or self.transport_factory is not None:
                    self.authentication_deadlines[connection_id] = (
                        self.time.nanoseconds() + self.authentication_timeout_ns
                    )
            except Exception as e:  # noqa: BLE001 - a failed registration closes only this socket
                if isinstance(e, ConnectionError) or getattr(e, "errno", None) == errno.ENOTCONN:
                    self.log.debug("Connection closed by the client before its registration.", error=repr(e))
                else:
                    self.log.error("Processor closed connection due to error during registration.", error=repr(e))
                self._close_socket(sock)

    def _close_socket(self, sock: socket.socket) -> None:
        try:
            ip = sock.getpeername()[0]
        except OSError:
            ip = None
        try:
            sock.close()
        finally:
            if ip is not None:
                self.connection_quotas.dec(self.listener_name, ip)

    def _process_new_responses(self) -> None:
        """Take every queued response (one clock read for the batch: their dequeue time). A SendResponse is
        written at once when the socket takes it (KSelector.send's optimistic write), else when it is writable;
        either way its completion (request metrics, unmute) is :meth:`_process_completed_sends`' work, which the
        loop does right after this (before its poll) for the sends written here."""
        responses = self.response_queue
        sel = self.selector
        channels = sel.channels
        inflight = self.inflight_responses
        now = self.time.nanoseconds()
        while responses:  # this thread is the only consumer: a non-empty deque's popleft cannot fail
            response = responses.popleft()
            request = response.request
            connection_id = request.context.connection_id
            request.response_dequeue_time_ns = now
            channel = channels.get(connection_id)
            if isinstance(response, SendResponse):
                if channel is None:
                    self.request_channel.update_request_metrics(request, now)
                    continue
                inflight[connection_id] = response
                sel.send(response.send)
            elif isinstance(response, NoOpResponse):
                self.request_channel.update_request_metrics(request, now)
                if channel is not None:
                    channel.handle_mute_event(ChannelMuteEvent.RESPONSE_SENT)
                    sel.unmute(connection_id)
            elif isinstance(response, CloseConnectionResponse):
                self.request_channel.update_request_metrics(request, now)
                self._close(connection_id)
            elif isinstance(response, StartThrottlingResponse):
                self._throttle_event(channel, ChannelMuteEvent.THROTTLE_STARTED)
            elif isinstance(response, EndThrottlingResponse):
                # unmuted only if the response has been sent already (else when it is)
                if self._throttle_event(channel, ChannelMuteEvent.THROTTLE_ENDED):
                    sel.unmute(connection_id)
            else:
                raise ValueError(f"Unknown response type {type(response)}")

    def _throttle_event(self, channel, event: ChannelMuteEvent) -> bool:
        """A quota throttle starts or ends on ``channel`` (KIP-219 mute states); False when the channel is gone
        or not in a state for it (closed and reused ids, a NoOp response that already unmuted it)."""
        if channel is None:
            return False
        try:
            channel.handle_mute_event(event)
        except IllegalMuteTransition as e:
            self.log.debug("Ignoring a throttle event.", error=str(e))
            return False
        return True

    def _process_completed_receives(self) -> None:
        """Parse and dispatch this poll's receives. The batch is taken from the selector before the
        first one is handled, so closing a connection (which drops its entry from the selector) can
        neither disturb the iteration nor leave already-dispatched receives to be dispatched again;
        a failure on one connection closes that connection only.

        A usual request (an authenticated or plain connection whose address is known, an (api key, version)
        already parsed once on this Processor: see ``request_kinds``, a header v1/v2 with no tagged fields) is
        parsed here in one step: header fields read with one unpack, RequestContext and Request built at once, the
        body decoder known; its channel is muted inline (NOT_MUTED -> MUTED_AND_RESPONSE_PENDING). Anything else
        goes through :meth:`_parse_request` and the mute state machine, which judge it as before."""
        sel = self.selector
        receives = sel.completed_receives
        sel.completed_receives = {}  # (KSelector.clear_completed_receives, inline)
        channels = sel.channels
        explicitly_muted = sel.explicitly_muted
        kinds = self.request_kinds
        parsed = self.parsed_requests
        now = sel.poll_end_ns  # received when this pass's poll returned (no clock read of its own)
        for connection_id, receive in receives.items():
            channel = channels.get(connection_id)
            if channel is None:
                receive.release()
                continue
            if channel.authenticator is not None or channel.session_expiration_ns is not None:
                if (
                    channel.session_expiration_ns is not None
                    and channel.authenticator is None
                    and self._expired_or_reauthenticating(connection_id, channel, receive)
                ):
                    continue
                if channel.authenticator is not None and not self._authenticate(connection_id, channel, receive):
                    continue
            if self.principal_builder is not None and channel.principal == ANONYMOUS:
                channel.principal = self.principal_builder(getattr(channel.sock, "peer_certificate", None))
            try:
                request = None
                payload: bytearray = receive.payload  # type: ignore[assignment]  # a completed receive's
                size = receive.size
                address = channel.client_address
                if size >= 10 and address is not None:
                    api_key, api_version, correlation_id, length = _HEADER_V1.unpack_from(payload)
                    kind = kinds.get((api_key, api_version))
                    pos = 10 + length if length > 0 else 10
                    if kind is not None and length >= -1 and pos <= size:
                        header_version, name, produce = kind
                        if header_version == 1 or (pos < size and payload[pos] == 0):  # v2: no tagged fields
                            view = memoryview(payload)
                            client_id = str(view[10:pos], "utf-8", "replace") if length > 0 else ""
                            if header_version == 2:
                                pos += 1
                            body = decode_produce_request(api_version, view[pos:]) if produce else None
                            if body is None:
                                body = decode_request(api_key, api_version, view[pos:])
                            request = self._request(
                                connection_id,
                                channel,
                                address,
                                RequestHeader(api_key, api_version, correlation_id, client_id, header_version),
                                body,
                                receive,
                                now,
                                name,
                                False,
                            )
                if request is None:
                    request = self._parse_request(connection_id, channel, receive)
            except Exception as e:  # noqa: BLE001 - a request that cannot be parsed closes only its connection
                self.log.warning(
                    f"Closing connection {connection_id}: cannot parse request: {e}", error=type(e).__name__
                )
                receive.release()
                self._close(connection_id)
                continue
            parsed.append(request)  # queued for the handlers by the next poll
            if channel.mute_state is _NOT_MUTED:  # KSelector.mute + REQUEST_RECEIVED, inline
                channel.mute_state = _MUTED_AND_RESPONSE_PENDING
                explicitly_muted.add(connection_id)
            else:
                sel.mute(connection_id)
                channel.handle_mute_event(ChannelMuteEvent.REQUEST_RECEIVED)

    def _expired_or_reauthenticating(self, connection_id: str, channel, receive) -> bool:
        """KIP-368 on an authenticated connection whose SASL session expires (Kafka's
        ``maybeBeginServerReauthentication`` / ``serverAuthenticationSessionExpired``): a SaslHandshake begins
        a re-authentication (a new authenticator takes the frame; at most one per second, a second one is a
        request as any other, refused ILLEGAL_SASL_STATE); any other request of an expired session closes
        the connection unserved. True when the frame was consumed here (closed)."""
        now = self.time.nanoseconds()
        try:
            api_key = peek_api_key_version(memoryview(receive.payload))[0]
        except Exception:  # noqa: BLE001 - a frame too short for a header: _parse_request closes the connection
            api_key = -1
        if (
            api_key == _api_keys.ApiKeys.SASL_HANDSHAKE
            and self.authenticator_factory is not None
            and (channel.reauthentication_start_ns == 0 or now - channel.reauthentication_start_ns >= 1_000_000_000)
        ):
            channel.reauthentication_start_ns = now
            authenticator: Any = self.authenticator_factory()
            authenticator.reauthenticate(channel.sasl_mechanism, channel.principal)
            channel.authenticator = authenticator
            channel.max_receive_size = self.sasl_max_receive_size
            self.authentication_deadlines.pop(connection_id, None)  # re-inserted last: deadlines stay in order
            self.authentication_deadlines[connection_id] = now + self.authentication_timeout_ns
            self.log.debug(f"Begin re-authentication of connection {connection_id}")
            return False
        expiration = channel.session_expiration_ns
        if expiration is not None and now > expiration:
            receive.release()
            self.log.info(
                f"Closing connection {connection_id} of {channel.principal}: its SASL session expired "
                f"{(now - expiration) // 1_000_000} ms ago and it did not re-authenticate (connections.max.reauth.ms)"
            )
            self._close(connection_id)
            self.expired_connections_killed += 1
            return True
        return False

    def _authenticate(self, connection_id: str, channel, receive) -> bool:
        """Run a frame of an unauthenticated SASL connection through its authenticator. True when the
        frame is a request to dispatch as usual (ApiVersions during the handshake)."""
        authenticator = channel.authenticator
        try:
            action, result, close_after = authenticator.handle(memoryview(receive.payload))
        except Exception as e:  # noqa: BLE001 - a malformed frame closes its own connection only
            action, result, close_after = "CLOSE", f"invalid SASL request: {e}", False
        if action == "PASS":
            return True
        receive.release()
        host = connection_id.split("-")[1].rpartition(":")[0]
        what = "re-authentication" if getattr(authenticator, "reauthenticating", False) else "authentication"
        if action == "CLOSE":
            self.log.info(f"Failed {what} with /{host} (channelId={connection_id}) ({result})")
            self.failed_reauthentications += what == "re-authentication"
            self._close(connection_id)
            return False
        if close_after:
            self.log.info(f"Failed {what} with /{host} (channelId={connection_id}) ({authenticator.failure})")
            self.failed_reauthentications += what == "re-authentication"
        elif authenticator.complete:
            channel.principal = authenticator.principal
            channel.token_authenticated = getattr(authenticator, "token_authenticated", False)
            channel.authenticator = None
            channel.max_receive_size = self.socket_request_max_bytes
            lifetime_ms = getattr(authenticator, "session_lifetime_ms", None)
            channel.sasl_mechanism = authenticator.mechanism
            channel.session_expiration_ns = (
                None if lifetime_ms is None else self.time.nanoseconds() + lifetime_ms * 1_000_000
            )
            if what == "re-authentication":
                self.successful_reauthentications += 1
                self.log.debug(f"Re-authenticated connection {connection_id} of {channel.principal}")
        self.selector.mute(connection_id)
        channel.handle_mute_event(ChannelMuteEvent.REQUEST_RECEIVED)
        self.auth_sends[connection_id] = close_after
        self.selector.send(NetworkSend(connection_id, [result]))
        return False

    def _parse_request(self, connection_id: str, channel, receive) -> Request:
        now = self.selector.poll_end_ns  # received when this pass's poll returned (no clock read of its own)
        payload = memoryview(receive.payload)
        peeked = api_key, api_version, correlation_id = peek_api_key_version(payload)
        address = channel.client_address
        if address is None:
            remote = connection_id.split("-")[1]
            host, _, port = remote.rpartition(":")
            address = channel.client_address = (host, int(port or 0))
        allowed = (api_key, api_version) in self.allowed_apis or self._api_allowed(api_key, api_version)
        if api_key == _api_keys.ApiKeys.API_VERSIONS and not allowed:
            # KIP-511: any ApiVersions version is accepted; a too-new one is answered as v0.
            header = RequestHeader(
                api_key=api_key, api_version=api_version, correlation_id=correlation_id, client_id="", header_version=1
            )
            body, unsupported = None, True
        else:
            if not allowed:
                raise ValueError(
                    f"API key {api_key} version {api_version} is not enabled on listener "
                    f"{self.listener_name} (correlation id {correlation_id})"
                )
            header, header_size = parse_request_header(payload, peeked)
            body = decode_request(api_key, api_version, payload[header_size:])
            unsupported = False
            if header.header_version and api_key != _api_keys.ApiKeys.API_VERSIONS:
                # parsed in one step from now on (_process_completed_receives); a bounded map: allowed pairs only
                self.request_kinds[(api_key, api_version)] = (
                    header.header_version,
                    _api_keys.api_name(api_key),
                    api_key == _api_keys.ApiKeys.PRODUCE,
                )
            if api_key == _api_keys.ApiKeys.API_VERSIONS and body is not None:
                channel.client_software_name = body.get("client_software_name") or "unknown"
                channel.client_software_version = body.get("client_software_version") or "unknown"
        return self._request(
            connection_id, channel, address, header, body, receive, now, _api_keys.api_name(api_key), unsupported
        )

    def _request(
        self,
        connection_id: str,
        channel,
        address: tuple,
        header: RequestHeader,
        body,
        receive,
        now: int,
        api_name: str,
        unsupported: bool,
    ) -> Request:
        """The Request of a completed ``receive`` on ``channel`` (its RequestContext from the channel's peer address,
        listener, client software and principal); received at ``now`` (ns); its size counts the 4 size bytes."""
        context = RequestContext(
            header,
            connection_id,
            address[0],
            address[1],
            self.listener_name,
            self.security_protocol,
            channel.client_software_name,
            channel.client_software_version,
            channel.principal,
            channel.token_authenticated,
        )
        return Request(
            self.id,
            context,
            body,
            receive.payload,
            now,
            api_name,
            receive.size + 4,
            unsupported,
            receive.release if receive.allocated else None,  # nothing to give back to an unbounded pool
        )

    def _api_allowed(self, api_key: int, api_version: int) -> bool:
        """``is_api_allowed``, remembering the allowed pairs (a bounded set: the listener's ApiVersions
        ranges never change while it runs); refused pairs are not kept, so bad input cannot grow it."""
        if self.is_api_allowed(api_key, api_version):
            self.allowed_apis.add((api_key, api_version))
            return True
        return False

    def _process_completed_sends(self) -> None:
        """Finish the responses written since the last call: their request metrics (one clock read for the batch:
        their end time), the network thread time of their channels, and unmute those channels."""
        sel = self.selector
        channels = sel.channels
        now = self.time.nanoseconds()
        for send in sel.completed_sends:
            response = self.inflight_responses.pop(send.destination, None)
            if response is None:
                close_after = self.auth_sends.pop(send.destination, None)
                if close_after:
                    self.delayed_closes[send.destination] = now + self.failed_authentication_delay_ns
                elif close_after is not None and (channel := channels.get(send.destination)) is not None:
                    channel.handle_mute_event(ChannelMuteEvent.RESPONSE_SENT)
                    sel.unmute(send.destination)
                continue
            if response.on_complete is not None:
                try:
                    response.on_complete()
                except Exception as e:  # noqa: BLE001 - a failing callback must not stop the processor
                    self.log.error("Response on_complete callback failed.", error=repr(e))
            request = response.request
            self.request_channel.update_request_metrics(request, now)
            channel = channels.get(send.destination)
            if channel is not None:
                # Kafka's getAndResetNetworkThreadTimeNanos: the channel's read/write time goes to the request
                # quota of the request whose response completed (when it has one)
                thread_time_ns, channel.thread_time_ns = channel.thread_time_ns, 0
                if request.record_network_thread_time is not None:
                    try:
                        request.record_network_thread_time(thread_time_ns)
                    except Exception as e:  # noqa: BLE001 - quota accounting must not stop the processor
                        self.log.error("Recording network thread time failed.", error=repr(e))
                if channel.mute_state is _MUTED_AND_RESPONSE_PENDING:
                    # RESPONSE_SENT (-> MUTED) then KSelector.unmute (MUTED -> NOT_MUTED), inline
                    channel.mute_state = _NOT_MUTED
                    sel.explicitly_muted.discard(send.destination)
                else:
                    channel.handle_mute_event(ChannelMuteEvent.RESPONSE_SENT)
                    sel.unmute(send.destination)
        sel.completed_sends = []  # (KSelector.clear_completed_sends, inline)

    def _process_disconnected(self) -> None:
        for connection_id, _reason in self.selector.disconnected.items():
            remote_host = connection_id.split("-")[1].rpartition(":")[0]
            response = self.inflight_responses.pop(connection_id, None)
            if response is not None:
                self.request_channel.update_request_metrics(response.request, self.time.nanoseconds())
            self.auth_sends.pop(connection_id, None)
            self.delayed_closes.pop(connection_id, None)
            self.authentication_deadlines.pop(connection_id, None)
            self.connection_quotas.dec(self.listener_name, remote_host)
            self._notify_closed(connection_id)
        self.selector.clear_disconnected()

    def _notify_closed(self, connection_id: str) -> None:
        if self.request_channel.disconnect_listeners:
            try:
                self.request_channel.connection_closed(connection_id)
            except Exception as e:  # noqa: BLE001 - a listener's failure must not stop the processor
                self.log.error("A connection disconnect listener failed.", error=repr(e))

    def _close_delayed(self) -> None:
        now = self.time.nanoseconds()
        for connection_id in [c for c, deadline in self.delayed_closes.items() if deadline <= now]:
            del self.delayed_closes[connection_id]
            self._close(connection_id)

    def _expire_unauthenticated(self) -> None:
        """Close the connections whose TLS handshake or SASL authentication is still not complete at their
        deadline; drop the entries of those that completed (checked lazily, here)."""
        now = self.time.nanoseconds()
        deadlines = self.authentication_deadlines
        while deadlines:
            connection_id, deadline = next(iter(deadlines.items()))
            if deadline > now:
                return
            del deadlines[connection_id]
            channel = self.selector.channel(connection_id)
            if channel is None:
                continue
            # a socket with ``tls`` is an SslTransportLayer (KafkaChannel.sock is typed as the plain socket)
            tls_pending = (
                getattr(channel.sock, "tls", False) and not cast(SslTransportLayer, channel.sock).handshake_complete
            )
            if channel.authenticator is not None or tls_pending:
                host = connection_id.split("-")[1].rpartition(":")[0]
                what = "TLS handshake" if tls_pending else "SASL authentication"
                self.log.info(
                    f"Failed authentication with /{host} (channelId={connection_id}) "
                    f"({what} not complete within {self.authentication_timeout_ns // 1_000_000} ms)"
                )
                self._close(connection_id)

    def _close_excess_connections(self) -> None:
        if self.connection_quotas.max_connections_exceeded(self.listener_name):
            channel = self.selector.lowest_priority_channel()
            if channel is not None:
                self._close(channel.id)

    def _close(self, connection_id: str) -> None:
        """Local close: quota decrement, the disconnect listeners told (not the selector's disconnected list), drop
        any in-flight response."""
        if self.selector.channel(connection_id) is not None:
            self.selector.close(connection_id)
            remote_host = connection_id.split("-")[1].rpartition(":")[0]
            self.connection_quotas.dec(self.listener_name, remote_host)
            self._notify_closed(connection_id)
        self.inflight_responses.pop(connection_id, None)
        self.auth_sends.pop(connection_id, None)
        self.delayed_closes.pop(connection_id, None)
        self.authentication_deadlines.pop(connection_id, None)

    def _on_close_error(self, connection_id: str, exc: BaseException) -> None:
        if isinstance(exc, TlsHandshakeError):
            host = connection_id.split("-")[1].rpartition(":")[0]
            self.log.info(f"Failed authentication with /{host} (channelId={connection_id}) ({exc})")
        elif isinstance(exc, InvalidReceiveError):
            self.log.warning(f"Closing connection {connection_id}: {exc}")
        elif isinstance(exc, TruncatedReceiveError):
            self.log.warning(f"Closing connection {connection_id}: truncated frame, {exc}")
        elif isinstance(exc, ConnectionError):  # the peer reset or went away: routine, as Kafka's Selector
            self.log.debug(f"Connection {connection_id} closed: {exc!r}")
        else:
            self.log.warning(f"Unexpected error from {connection_id}; closing connection: {exc!r}")

    def _close_all(self) -> None:
        while True:
            try:
                self._close_socket(self.new_connections.get_nowait())
            except queue.Empty:
                break
        for connection_id in list(self.selector.channels):
            self._close(connection_id)
        self.selector.close_all()

    @property
    def connection_count(self) -> int:
        return len(self.selector.channels)

    def _connection_creation_rate(self) -> float:
        with self._creation_lock:
            return self.connection_creations.measure(self.time.milliseconds())

    def remove_metrics(self) -> None:
        self.metrics.remove(self.idle_metric_name)
        for name in self.selector_metric_names:
            self.metrics.remove(name)


class Acceptor(threading.Thread):
    """Accepts connections on one listener and hands them round-robin to its Processors.

    The Processor list can change while the Acceptor runs (dynamic ``num.network.threads``, Kafka's
    ``addProcessors``/``removeProcessors``): ``_lock`` guards it, and a connection is chosen a Processor
    and handed to it under the lock, so a Processor taken out of the list never receives another one."""

    def __init__(
        self,
        plane: str,
        endpoint: EndPoint,
        config: SocketServerConfig,
        connection_quotas: ConnectionQuotas,
        time: Time = SYSTEM,
    ):
        super().__init__(
            name=f"{plane}-kafka-socket-acceptor-{endpoint.listener_name}-{endpoint.security_protocol}-{endpoint.port}",
            daemon=False,
        )
        self.plane = plane
        self.endpoint = endpoint
        self.config = config
        self.connection_quotas = connection_quotas
        self.time = time
        self.processors: list[Processor] = []
        self._lock = threading.Lock()
        self.current_processor_index = 0
        self.should_run = True
        self.log = get_logger("SocketServer", listenerType="BROKER", nodeId=config.node_id)
        self.server_socket: socket.socket | None = None
        self.selector = selectors.DefaultSelector()
        #: written once by ``begin_shutdown`` so the loop leaves its select at once (Kafka's ``nioSelector.wakeup()``)
        self._wakeup_r, self._wakeup_w = socket.socketpair()
        self._wakeup_r.setblocking(False)
        self._wakeup_w.setblocking(False)
        #: sockets of IPs over their connection creation rate, closed when their throttle ends
        #: (Kafka's ``throttledSockets``): a heap of (end ms, sequence, socket)
        self.throttled_sockets: list[tuple[int, int, socket.socket]] = []
        self._throttled_seq = 0
        if endpoint.port == 0:  # ephemeral ports are bound early so the real port is known
            self.open_server_socket()

    def open_server_socket(self) -> None:
        if self.server_socket is not None:
            return
        host = self.endpoint.host or "0.0.0.0"
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if self.config.socket_receive_buffer_bytes != -1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.config.socket_receive_buffer_bytes)
        try:
            sock.bind((host, self.endpoint.port))
        except OSError as e:
            sock.close()
            raise OSError(e.errno, f"Socket server failed to bind to {host}:{self.endpoint.port}: {e.strerror}.") from e
        sock.listen(self.config.socket_listen_backlog_size)
        sock.setblocking(False)
        self.server_socket = sock
        self.bound_port = sock.getsockname()[1]
        self.log.info(f"Awaiting socket connections on {host}:{self.bound_port}.", listener=self.endpoint.listener_name)

    def add_processors(self, processors: list[Processor]) -> None:
        """Add ``processors`` (started here if the Acceptor runs already, Kafka's ``addProcessors``)."""
        if self.ident is not None:
            for p in processors:
                p.start()
        with self._lock:
            self.processors = [*self.processors, *processors]

    def remove_processors(self, count: int, timeout: float = 5.0) -> list[Processor]:
        """Kafka's ``removeProcessors``: take the last ``count`` Processors out of the rotation, then stop
        them; each closes its connections (and those still queued for it) on its own thread, and the
        clients reconnect. Waits up to ``timeout`` seconds for each to stop; returns them."""
        with self._lock:
            removed = self.processors[len(self.processors) - count :]
            self.processors = self.processors[: len(self.processors) - count]
        for p in removed:
            p.begin_shutdown()
        for p in removed:
            if p.is_alive():
                p.join(timeout)
            elif p.ident is None:  # never started: close what was queued for it here
                p._close_all()
            p.remove_metrics()
        return removed

    def start(self) -> None:
        self.open_server_socket()
        for p in self.processors:
            if not p.is_alive():
                p.start()
        super().start()

    def run(self) -> None:
        server_socket = self.server_socket
        assert server_socket is not None  # opened by start()
        self.selector.register(server_socket, selectors.EVENT_READ)
        self.selector.register(self._wakeup_r, selectors.EVENT_READ)
        try:
            while self.should_run:
                try:
                    self._accept_new_connections()
                    if self.throttled_sockets:
                        self._close_throttled_connections()
                except Exception as e:  # noqa: BLE001 - the acceptor's loop logs and goes on, as Kafka's
                    self.log.error("Error occurred in acceptor", error=repr(e))
        finally:
            try:
                self.selector.close()
            finally:
                server_socket.close()
                self._wakeup_r.close()
                self._wakeup_w.close()
                for _, _, sock in self.throttled_sockets:
                    sock.close()
                self.throttled_sockets.clear()

    def _close_throttled_connections(self) -> None:
        """Close the sockets whose IP throttle is over (Kafka's ``closeThrottledConnections``)."""
        now = self.time.milliseconds()
        heap = self.throttled_sockets
        while heap and heap[0][0] <= now:
            heapq.heappop(heap)[2].close()

    def _accept_new_connections(self) -> None:
        """One wake-up: drain every pending connection (in batches, see :mod:`.accept`), count each in
        ConnectionQuotas, set its socket options and hand it round-robin to a Processor; each Processor
        that received connections is woken once per batch."""
        timeout = 0.5
        if self.throttled_sockets:
            timeout = min(timeout, max(0.0, (self.throttled_sockets[0][0] - self.time.milliseconds()) / 1000.0))
        ready = self.selector.select(timeout)
        if not any(key.fileobj is self.server_socket for key, _ in ready):
            return  # timed out, or woken by begin_shutdown
        server_socket = self.server_socket
        assert server_socket is not None  # opened by start(), never unset
        while self.should_run:
            try:
                batch = accept_batch(server_socket, ACCEPT_BATCH_SIZE)
            except OSError as e:
                batch = getattr(e, "accepted", [])
                if e.errno in (errno.EMFILE, errno.ENFILE):
                    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
                    self.log.error(
                        f"Error accepting connections: too many open files (the process limit "
                        f"RLIMIT_NOFILE is {soft}); backing off {ACCEPT_BACKOFF_MS} ms."
                    )
                    self.time.sleep(ACCEPT_BACKOFF_MS)
                else:
                    self.log.error("Error accepting connection", error=repr(e))
                self._hand_off(batch)
                return
            self._hand_off(batch)
            if len(batch) < ACCEPT_BATCH_SIZE:
                return

    def _hand_off(self, batch: list[tuple[socket.socket, tuple]]) -> None:
        woken: set[Processor] = set()
        for sock, addr in batch:
            ip = addr[0]
            try:
                self.connection_quotas.inc(self.endpoint.listener_name, ip, lambda: self.should_run)
            except TooManyConnectionsError as e:
                self.log.info(
                    f"Rejected connection from {ip}, address already has the configured maximum "
                    f"of {e.count} connections."
                )
                sock.close()
                self.connection_quotas.dec(self.endpoint.listener_name, ip)
                continue
            except ConnectionThrottledError as e:
                self.log.debug(f"Delaying closing of connection from {ip} for {e.throttle_ms} ms")
                self._throttled_seq += 1
                heapq.heappush(self.throttled_sockets, (e.start_ms + e.throttle_ms, self._throttled_seq, sock))
                continue
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                if self.config.socket_send_buffer_bytes != -1:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.config.socket_send_buffer_bytes)
            except OSError:
                sock.close()
                self.connection_quotas.dec(self.endpoint.listener_name, ip)
                continue
            woken.add(self._assign_new_connection(sock))
        for processor in woken:
            processor.wakeup()

    def _assign_new_connection(self, sock: socket.socket) -> Processor:
        """Offer ``sock`` to the Processors round-robin (non-blocking offers, a blocking put on the last
        try); returns the Processor that took it. The caller wakes it."""
        with self._lock:
            processors = self.processors
            retries_left = len(processors)
            while True:
                retries_left -= 1
                processor = processors[self.current_processor_index % len(processors)]
                self.current_processor_index += 1
                if processor.accept(sock, may_block=retries_left == 0):
                    return processor

    def begin_shutdown(self) -> None:
        """Stop accepting: the loop is woken at once instead of at its next 0.5 s select timeout."""
        self.should_run = False
        try:
            self._wakeup_w.send(b"\0")
        except OSError:  # already closed (the loop ended) or the one-byte buffer is full: it is awake anyway
            pass
        for p in self.processors:
            p.begin_shutdown()

    def close(self, timeout: float = 5.0) -> None:
        if self.is_alive():
            self.join(timeout)
        else:
            if self.server_socket is not None:
                self.server_socket.close()
            self._wakeup_r.close()
            self._wakeup_w.close()
        for p in self.processors:
            if p.is_alive():
                p.join(timeout)


class SocketServer:
    """Owns the planes: acceptors, processors and request channels. Lifecycle:
    construct (binds ephemeral ports) -> ``enable_request_processing`` (starts processors then
    acceptors: network threads start last) -> ``stop_processing_requests`` -> ``shutdown``.

    The data plane's Processors share one memory pool of ``queued.max.request.bytes`` (unbounded at
    -1, the default; gauges ``MemoryPoolAvailable`` / ``MemoryPoolUsed``); the control plane's is unbounded.

    ``selector_factory`` builds each Processor's KSelector (tests pass a fault-injecting subclass, as
    Kafka's SocketServerTest does with its TestableSelector)."""

    def __init__(
        self,
        config: SocketServerConfig,
        metrics: MetricsRegistry,
        is_api_allowed: Callable[[str, int, int], bool],
        time: Time = SYSTEM,
        selector_factory: Callable[..., KSelector] = KSelector,
        authenticator_factories: dict[str, Callable[[], object]] | None = None,
        sasl_max_receive_size: int = 524288,
        transport_factories: dict[str, tuple[Callable, Callable]] | None = None,
    ):
        """``authenticator_factories``: listener name -> a new SASL authenticator per connection (SASL
        listeners; see :mod:`pykbroker.security.sasl_server_authenticator`)."""
        self.config = config
        self.selector_factory = selector_factory
        self.authenticator_factories = authenticator_factories or {}
        #: listener name -> (transport factory, principal builder) of TLS listeners
        self.transport_factories = transport_factories or {}
        self.sasl_max_receive_size = sasl_max_receive_size
        self.data_plane_memory_pool: MemoryPool = (
            SimpleMemoryPool(config.queued_max_request_bytes, config.socket_request_max_bytes)
            if config.queued_max_request_bytes > 0
            else UNBOUNDED_POOL
        )
        pool = self.data_plane_memory_pool
        metrics.gauge("kafka.network:type=SocketServer,name=MemoryPoolAvailable", lambda: pool.available_memory)
        metrics.gauge("kafka.network:type=SocketServer,name=MemoryPoolUsed", lambda: pool.used_memory)
        self.metrics = metrics
        self.time = time
        self.log = get_logger("SocketServer", listenerType="BROKER", nodeId=config.node_id)
        protected = config.inter_broker_listener_name if len(config.data_plane_listeners) > 1 else None
        listeners = [
            e.listener_name for e in [*config.data_plane_listeners, *filter(None, [config.control_plane_listener])]
        ]
        self.connection_quotas = ConnectionQuotas(
            config.max_connections_per_ip,
            config.max_connections_per_ip_overrides,
            config.max_connections,
            protected,
            max_connection_creation_rate=config.max_connection_creation_rate,
            listener_connection_creation_rates=config.listener_connection_creation_rates,
            listeners=listeners,
            quota_window_num=config.quota_window_num,
            quota_window_size_seconds=config.quota_window_size_seconds,
            metrics=metrics,
            time=time,
        )
        self.data_plane_request_channel = RequestChannel(config.queued_max_requests, "", time, metrics)
        self.control_plane_request_channel = (
            RequestChannel(20, "ControlPlane", time, metrics) if config.control_plane_listener else None
        )
        self.is_api_allowed = is_api_allowed
        self.next_processor_id = 0
        self._resize_lock = threading.Lock()  # one num.network.threads change at a time
        self.data_plane_acceptors: dict[str, Acceptor] = {}
        self.control_plane_acceptor: Acceptor | None = None
        for endpoint in config.data_plane_listeners:
            self.data_plane_acceptors[endpoint.listener_name] = self._create_acceptor(
                DATA_PLANE, endpoint, config.num_network_threads, self.data_plane_request_channel, is_api_allowed
            )
        # Kafka's ExpiredConnectionsKilledCount: the data-plane Processors' expired-connections-killed-count
        metrics.gauge(
            "kafka.network:type=SocketServer,name=ExpiredConnectionsKilledCount",
            lambda: sum(p.expired_connections_killed for a in self.data_plane_acceptors.values() for p in a.processors),
        )
        if config.control_plane_listener is not None:
            self.control_plane_acceptor = self._create_acceptor(
                CONTROL_PLANE, config.control_plane_listener, 1, self.control_plane_request_channel, is_api_allowed
            )
        self.stopped = False

    def _create_acceptor(self, plane, endpoint, n, request_channel, is_api_allowed) -> Acceptor:
        acceptor = Acceptor(plane, endpoint, self.config, self.connection_quotas, self.time)
        acceptor.add_processors([self._new_processor(plane, endpoint, request_channel) for _ in range(n)])
        return acceptor

    def _new_processor(self, plane: str, endpoint: EndPoint, request_channel: RequestChannel) -> Processor:
        """A Processor with the next id (ids are never reused, as Kafka's ``nextProcessorId``), registered
        with ``request_channel``."""
        listener = endpoint.listener_name
        p = Processor(
            self.next_processor_id,
            plane,
            endpoint,
            self.config,
            request_channel,
            self.connection_quotas,
            lambda k, v: self.is_api_allowed(listener, k, v),
            self.metrics,
            self.time,
            self.selector_factory,
            self.data_plane_memory_pool if plane == DATA_PLANE else UNBOUNDED_POOL,
            self.authenticator_factories.get(listener),
            self.sasl_max_receive_size,
            *(self.transport_factories.get(listener) or (None, None)),
        )
        self.next_processor_id += 1
        request_channel.add_processor(p)
        return p

    def processor_count(self, listener_name: str) -> int:
        """The number of Processors of data-plane listener ``listener_name`` (KeyError if none)."""
        return len(self.data_plane_acceptors[listener_name].processors)

    def resize_processors(self, listener_name: str, count: int) -> None:
        """Kafka's ``DataPlaneAcceptor.reconfigure`` for dynamic ``num.network.threads``: add Processors to
        data-plane listener ``listener_name`` (started at once on a running broker), or remove the newest
        ones (their connections are closed, the clients reconnect; responses still due to them are
        dropped by the RequestChannel). ``count`` >= 1; the caller validated the bounds."""
        with self._resize_lock:
            acceptor = self.data_plane_acceptors[listener_name]
            current = len(acceptor.processors)
            if count == current or self.stopped:
                return
            self.log.info(f"Resizing network thread pool size for {listener_name} listener from {current} to {count}")
            channel = self.data_plane_request_channel
            if count > current:
                acceptor.add_processors(
                    [self._new_processor(DATA_PLANE, acceptor.endpoint, channel) for _ in range(count - current)]
                )
            else:
                for p in acceptor.remove_processors(current - count):
                    channel.remove_processor(p.id)

    @property
    def acceptors(self) -> list[Acceptor]:
        return list(self.data_plane_acceptors.values()) + (
            [self.control_plane_acceptor] if self.control_plane_acceptor else []
        )

    def enable_request_processing(self, planes: tuple[str, ...] = (CONTROL_PLANE, DATA_PLANE)) -> None:
        """Start the acceptors (and so their processors) of ``planes``; an acceptor already started is
        left alone. A combined node enables the controller listener first, because its broker part
        registers only once the quorum, which needs that listener, has a leader."""
        for acceptor in self.acceptors:
            plane = CONTROL_PLANE if acceptor is self.control_plane_acceptor else DATA_PLANE
            if plane in planes and acceptor.ident is None:
                acceptor.start()

    def bound_port(self, listener_name: str) -> int:
        for acceptor in self.acceptors:
            if acceptor.endpoint.listener_name == listener_name.upper():
                acceptor.open_server_socket()
                return acceptor.bound_port
        raise KeyError(f"No listener named {listener_name}")

    def stop_processing_requests(self) -> None:
        if self.stopped:
            return
        self.log.info("Stopping socket server request processors")
        for acceptor in self.acceptors:
            acceptor.begin_shutdown()
        for acceptor in self.acceptors:
            acceptor.close()
        self.data_plane_request_channel.clear()
        if self.control_plane_request_channel:
            self.control_plane_request_channel.clear()
        self.stopped = True
        self.log.info("Stopped socket server request processors")

    def shutdown(self) -> None:
        self.log.info("Shutting down socket server")
        self.stop_processing_requests()
        self.log.info("Shutdown completed")
