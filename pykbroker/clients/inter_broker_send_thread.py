"""InterBrokerSendThread: one thread sending requests from this node to other nodes of the cluster.

Mirrors Kafka's ``InterBrokerSendThread`` (server-common): a thread that owns a
:class:`~pykbroker.clients.network_client.NetworkClient` and turns queued ``(node, request, callback)``
entries into sends once the node's connection is ready (connected and past ApiVersions). The Raft client's
:class:`~pykbroker.raft.kafka_network_channel.KafkaNetworkChannel` and the broker's
``NodeToControllerChannelManager`` each run one.

* :meth:`send` queues a request for ``node_id``, whose address comes from :meth:`set_address`. The
  request goes out at the version ``min(ours, the node's newest)``; one that needs at least
  ``min_version`` (a field older versions lack, e.g. Vote v2's ``pre_vote``) fails with
  UnsupportedVersionError when the node is older.
* A request waits at most ``request_timeout_ms`` for its connection; a node whose last connection
  attempt failed (still in its reconnect back-off) fails it at once. Once sent, the NetworkClient's own
  ``request.timeout.ms`` applies. When either expires the callback gets :class:`RequestTimeoutError`; a
  dropped connection gives :class:`~pykbroker.clients.network_client.DisconnectError`.
* Callbacks ``callback(response_dict | None, error | None)`` run on this thread. They must be quick and
  must not block.

Threading: :meth:`send`, :meth:`set_address`, :meth:`wakeup` and :meth:`shutdown` are thread-safe; the
NetworkClient and the pending queues belong to the thread.
"""

from __future__ import annotations

import collections
import functools
import heapq
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass

from pykbroker.clients.network_client import DisconnectError, NetworkClient, RequestTimeoutError
from pykbroker.protocol import errors
from pykbroker.security.client_security import PLAINTEXT, ClientSecurity
from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import SYSTEM, Time

Callback = Callable[[dict | None, Exception | None], None]


@dataclass
class _Pending:
    node_id: int
    api_key: int
    version: int
    body: dict
    callback: Callback
    deadline: float  # seconds on the client's clock
    min_version: int = 0


class InterBrokerSendThread:
    def __init__(
        self,
        name: str,
        client_id: str,
        request_timeout_ms: int = 30000,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        max_in_flight: int = 5,
        time: Time = SYSTEM,
        security: ClientSecurity = PLAINTEXT,
    ):
        """``security``: how to reach the other nodes' listener (TLS, SASL), see ClientSecurity."""
        self.name = name
        self.time = time
        self.request_timeout_ms = request_timeout_ms
        self._log = get_logger("InterBrokerSendThread", name=name)
        self.client = NetworkClient(
            client_id,
            request_timeout_ms=request_timeout_ms,
            reconnect_backoff_ms=reconnect_backoff_ms,
            reconnect_backoff_max_ms=reconnect_backoff_max_ms,
            max_in_flight=max_in_flight,
            log=self._log,
            time=time,
            security=security,
        )
        self._lock = threading.Lock()
        self._queued: list[_Pending] = []  # guarded by _lock
        self._addresses: dict[int, tuple[str, int]] = {}  # guarded by _lock
        self._pending: dict[int, collections.deque[_Pending]] = {}  # thread only
        self._timers: list[tuple[float, int, Callable[[], None]]] = []  # heap; guarded by _lock
        self._timer_ids = itertools.count()
        self._running = False
        self._drain_ms = 0
        self._thread: threading.Thread | None = None

    # ---- thread-safe API ---------------------------------------------------------------------
    def start(self) -> None:
        self._running = True
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def set_address(self, node_id: int, host: str, port: int) -> None:
        with self._lock:
            self._addresses[node_id] = (host, port)
        self.client.wakeup()

    def send(
        self, node_id: int, api_key: int, version: int, body: dict, callback: Callback, min_version: int = 0
    ) -> None:
        """Queue ``body`` for ``node_id`` at (at most) ``version``, at least ``min_version``; ``callback``
        runs on this thread."""
        deadline = self.client.now() + self.request_timeout_ms / 1000.0
        with self._lock:
            self._queued.append(_Pending(node_id, api_key, version, body, callback, deadline, min_version))
        self.client.wakeup()

    def schedule(self, delay_ms: float, fn: Callable[[], None]) -> None:
        """Run ``fn()`` on this thread after ``delay_ms`` (retries with back-off)."""
        due = self.client.now() + delay_ms / 1000.0
        with self._lock:
            heapq.heappush(self._timers, (due, next(self._timer_ids), fn))
        self.client.wakeup()

    def wakeup(self) -> None:
        self.client.wakeup()

    def shutdown(self, timeout_s: float = 5.0, drain_ms: int = 0) -> None:
        """Stop the thread. With ``drain_ms`` it first spends up to that long sending what is queued and
        waiting for the answers to what is in flight (a resigning Raft leader's EndQuorumEpoch); then
        the rest get a DisconnectError."""
        self._drain_ms = drain_ms
        self._running = False
        self.client.wakeup()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    # ---- the thread --------------------------------------------------------------------------
    def _run(self) -> None:
        client = self.client
        try:
            while self._running:
                timeout = self._run_timers(client.now())
                self._take_queued()
                timeout = min(timeout, self._send_ready(client.now()))
                client.poll(timeout)
            self._drain(client.now() + self._drain_ms / 1000.0)
        except Exception:  # noqa: BLE001 - the thread's top level: log, then fail what is pending
            self._log.exception("Unexpected error; the send thread stops")
        finally:
            self._fail_all(DisconnectError(f"{self.name} is shutting down"))
            for node_id in list(client.conns):
                client.close(node_id)
            client.selector.close_all()

    def _drain(self, deadline: float) -> None:
        client = self.client
        while client.now() < deadline:
            self._take_queued()
            self._send_ready(client.now())
            if not self._pending and not client.in_flight_count():
                return
            client.poll(0.01)

    def _run_timers(self, now: float) -> float:
        """Run the due timers; returns seconds until the next one (at most 0.5)."""
        due = []
        with self._lock:
            while self._timers and self._timers[0][0] <= now:
                due.append(heapq.heappop(self._timers)[2])
            wait = self._timers[0][0] - now if self._timers else 0.5
        for fn in due:
            try:
                fn()
            except Exception:  # noqa: BLE001 - a failing task must not stop the send thread
                self._log.exception("Scheduled task failed")
        return max(0.0, min(wait, 0.5))

    def _take_queued(self) -> None:
        with self._lock:
            queued, self._queued = self._queued, []
            addresses = dict(self._addresses)
        for node_id, address in addresses.items():
            if self.client.addresses.get(node_id) != address:
                self.client.set_address(node_id, address)
        for p in queued:
            if p.node_id not in addresses:
                self._call(p.callback, None, DisconnectError(f"unknown address of node {p.node_id}"))
                continue
            self._pending.setdefault(p.node_id, collections.deque()).append(p)

    def _send_ready(self, now: float) -> float:
        """Send what can go; expire what waited too long for a connection. Returns the poll timeout (s)."""
        client = self.client
        timeout = 0.5
        for node_id, queue in list(self._pending.items()):
            while queue and client.is_ready(node_id, now):
                p = queue.popleft()
                try:
                    if p.api_key not in client.conns[node_id].versions:
                        raise errors.UnsupportedVersionError(f"node {node_id} does not support API key {p.api_key}")
                    version = client.version_for(node_id, p.api_key, p.version)
                    if version < p.min_version:
                        raise errors.UnsupportedVersionError(
                            f"node {node_id} supports api {p.api_key} up to v{version}, v{p.min_version} needed"
                        )
                    client.send(node_id, p.api_key, version, p.body, functools.partial(self._call, p.callback))
                except Exception as e:  # noqa: BLE001 - unsupported version, encoding error
                    self._call(p.callback, None, e)
            if queue and node_id not in client.conns and client.connection_delay(node_id, now) > 0:
                # The last connection attempt failed and the next waits for its back-off: fail fast, so the
                # caller can go elsewhere (another controller) or back off itself.
                while queue:
                    self._call(
                        queue.popleft().callback,
                        None,
                        DisconnectError(f"node {node_id} is not reachable (reconnect back-off)"),
                    )
            while queue and queue[0].deadline <= now:
                p = queue.popleft()
                self._call(
                    p.callback, None, RequestTimeoutError(f"no connection to node {node_id} within the request timeout")
                )
            if not queue:
                del self._pending[node_id]
            else:
                retry = client.connection_delay(node_id, now)
                timeout = min(timeout, max(0.005, min(retry or 0.05, queue[0].deadline - now)))
        return timeout

    def _fail_all(self, error: Exception) -> None:
        with self._lock:
            queued, self._queued = self._queued, []
        for p in queued:
            self._call(p.callback, None, error)
        for queue in self._pending.values():
            for p in queue:
                self._call(p.callback, None, error)
        self._pending.clear()

    def _call(self, callback: Callback, response: dict | None, error: Exception | None) -> None:
        try:
            callback(response, error)
        except Exception:  # noqa: BLE001 - a failing callback must not stop the send thread
            self._log.exception("Request callback failed")
