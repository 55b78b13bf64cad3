"""ReplicaFetcherThread: a follower's fetch loop against one leader broker.

Mirrors ``kafka.server.AbstractFetcherThread`` + ``ReplicaFetcherThread``. The thread owns a blocking
connection to the leader's inter-broker listener and a map of partitions, each in one of two states:

* **truncating** (every partition starts here after a leader change, Kafka's pre-KIP-595 path):
  OffsetForLeaderEpoch (v4, ``replica_id`` = this broker) asks the leader where this replica's latest
  epoch ends; the log is truncated there (KIP-101/KIP-279: a leader answering with an older epoch makes
  the follower truncate to that epoch's end on its own side and ask again). A replica without epochs
  truncates to its high watermark. The partition then goes to fetching at its LEO.
* **fetching**: one Fetch (v15: topic ids, ``replica_state`` with this broker's id and epoch) for all
  fetching partitions at their LEO in a KIP-227 incremental fetch session
  (:class:`~pykbroker.server.fetch_session_handler.FetchSessionHandler`: a full Fetch opens it, later ones
  list only the partitions whose fetch offset or request data changed, and the leader answers only those
  whose data, HW or log start offset changed; a session error makes the next Fetch a full one at once),
  waiting up to ``replica.fetch.wait.max.ms``
  for ``replica.fetch.min.bytes``, at most ``replica.fetch.max.bytes`` per partition and
  ``replica.fetch.response.max.bytes`` in all. Records are appended as they are
  (``Partition.append_records_as_follower``), then the leader's HW and log start offset are taken; a
  moved HW completes the consumers' delayed fetches waiting on this follower (KIP-392). A
  ``diverging_epoch`` in the answer sends the partition back to truncating. OFFSET_OUT_OF_RANGE resets
  the fetch offset from the leader's earliest/latest offsets (Kafka's ``fetchOffsetAndTruncate``).
  Partition errors (NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_*) delay that
  partition by ``replica.fetch.backoff.ms`` until the metadata log moves it; a connection error delays
  them all and reconnects.

No Fetch is sent before this broker has registered (its broker epoch is -1): the metadata publisher
starts fetchers as soon as the local metadata is loaded, which after a restart can be long before the
registration (refused with DUPLICATE_BROKER_REGISTRATION while the previous incarnation's session
lasts), and a Fetch without an epoch would let the leader count this incarnation as in sync under its
predecessor's registration (KIP-903 skips the epoch check for -1). Truncation may go ahead meanwhile.

The connection is blocking (``replica.socket.timeout.ms`` bounds each wait), but never stuck: any
thread can abandon the request in flight with :meth:`ReplicaFetcherThread.reset_connection` (the
ReplicaFetcherManager does when the metadata shows the leader or this broker came back after losing its
session, or the leader moved to a new endpoint), and :meth:`~ReplicaFetcherThread.shutdown` the same way.
Both shut the socket down, which makes a blocked connect, TLS handshake, send or receive fail at once;
the fetcher thread then closes it, and after a reset sends its next request on a new connection at once,
without the back-off of a connection error. (Kafka's fetcher is non-blocking through NetworkClient and
is woken by ``initiateClose``; a network partition that lost the request otherwise costs the whole socket
timeout, or the TCP retransmission back-off after the network heals.)

Threading: one thread per (leader broker, fetcher id). ``_lock`` (Kafka's partitionMapLock) guards the
partition map and is held while a response is applied, so once ``remove_partitions`` returns no
append for those partitions happens any more (the ReplicaManager relies on it before making a replica
leader or deleting it). Network waits happen outside the lock (except the ListOffsets of an
out-of-range reset, as in Kafka). ``_conn_lock`` guards the interrupt handle (a ``dup`` of the socket,
owned by this object) and the pending reset: a handle is shut down and closed only under it, so an
interrupt can never reach a reused descriptor. Only the fetcher thread opens and closes the connection.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.config.broker_configs.replication_configs import (
    REPLICA_FETCH_BACKOFF_MS_CONFIG,
    REPLICA_FETCH_MAX_BYTES_CONFIG,
    REPLICA_FETCH_MIN_BYTES_CONFIG,
    REPLICA_FETCH_RESPONSE_MAX_BYTES_CONFIG,
    REPLICA_FETCH_WAIT_MAX_MS_CONFIG,
    REPLICA_SOCKET_RECEIVE_BUFFER_BYTES_CONFIG,
    REPLICA_SOCKET_TIMEOUT_MS_CONFIG,
)
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server.fetch_session_handler import INITIAL_EPOCH, FetchSessionHandler, PartitionData
from pykbroker.utils.logging import get_logger

FETCH_VERSION = 15
FULL_REBUILD_MS = 5000
"""An incremental round trip rebuilds only the partitions applied from the last answer; every partition is looked
at again at least this often (a log start offset moved by retention is then reported to the leader)."""
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
LIST_OFFSETS_VERSION = 7
TRUNCATING, FETCHING = "truncating", "fetching"

# Errors after which the partition waits replica.fetch.backoff.ms (the metadata log will move it).
_BACK_OFF = frozenset(
    {
        errors.NOT_LEADER_OR_FOLLOWER,
        errors.FENCED_LEADER_EPOCH,
        errors.UNKNOWN_LEADER_EPOCH,
        errors.UNKNOWN_TOPIC_OR_PARTITION,
        errors.UNKNOWN_TOPIC_ID,
        errors.REPLICA_NOT_AVAILABLE,
        errors.KAFKA_STORAGE_ERROR,
        errors.OFFSET_NOT_AVAILABLE,
    }
)

# Top-level errors of an incremental fetch session: the next Fetch is a full one, sent without a back-off.
_SESSION_ERRORS = frozenset({errors.FETCH_SESSION_ID_NOT_FOUND, errors.INVALID_FETCH_SESSION_EPOCH})


@dataclass(frozen=True)
class BrokerEndPoint:
    id: int
    host: str
    port: int


@dataclass
class PartitionFetchState:
    """One partition's place in the fetcher: ``fetch_offset`` (the follower's LEO once fetching),
    ``current_leader_epoch`` (sent for fencing), ``state`` TRUNCATING/FETCHING, ``delay_until_ms``."""

    topic_id: object
    fetch_offset: int
    current_leader_epoch: int
    state: str = TRUNCATING
    delay_until_ms: float = 0.0
    lag: int = 0  # the leader's HW minus the fetch offset, from the last answer (Kafka's FetcherLagStats)


class ReplicaFetcherThread(threading.Thread):
    """One fetcher thread (see the module docstring). ``config`` maps the ``replica.*`` keys to their values;
    ``time`` is a :class:`~pykbroker.utils.time.Time`. ``connection_factory`` opens the connection to the leader
    (called as :class:`~pykbroker.clients.broker_connection.BrokerConnection` is, which it defaults to; tests
    pass a fake leader)."""

    def __init__(
        self,
        name: str,
        fetcher_id: int,
        source: BrokerEndPoint,
        replica_manager,
        config,
        time,
        connection_factory: Callable[..., BrokerConnection] = BrokerConnection,
    ):
        super().__init__(name=name, daemon=True)
        self.fetcher_id = fetcher_id
        self.source = source
        self.replica_manager = replica_manager
        self.node_id = replica_manager.node_id
        self.time = time
        self.max_wait_ms = config[REPLICA_FETCH_WAIT_MAX_MS_CONFIG]
        self.min_bytes = config[REPLICA_FETCH_MIN_BYTES_CONFIG]
        self.max_bytes = config[REPLICA_FETCH_RESPONSE_MAX_BYTES_CONFIG]
        self.partition_max_bytes = config[REPLICA_FETCH_MAX_BYTES_CONFIG]
        self.backoff_ms = config[REPLICA_FETCH_BACKOFF_MS_CONFIG]
        self.socket_timeout_s = max(config[REPLICA_SOCKET_TIMEOUT_MS_CONFIG], self.max_wait_ms + 1000) / 1000
        #: SO_RCVBUF of the connection to the leader (bytes), -1: the OS default (auto-tuned). Applied only when
        #: ``replica.socket.receive.buffer.bytes`` is set in the broker's properties (a plain mapping counts as
        #: set): left at its default (64 KB) the OS's auto-tuned buffer is kept (issue 31: a fixed 64 KB window
        #: cuts a 1 MB fetch answer into ~30 wake-ups of this thread and of the leader's Processor; see
        #: docs/ARCHITECTURE.md). Kafka's NetworkClient applies the default too.
        originals = getattr(config, "originals", config)
        explicit = REPLICA_SOCKET_RECEIVE_BUFFER_BYTES_CONFIG in originals
        self.receive_buffer_bytes = config[REPLICA_SOCKET_RECEIVE_BUFFER_BYTES_CONFIG] if explicit else -1
        self.partitions: dict[tuple[str, int], PartitionFetchState] = {}
        self._lock = threading.RLock()  # re-entered by _send's back-off while a response is applied
        self._work = threading.Event()  # set when partitions are added or the thread must stop
        self._running = True
        self._logged_unregistered = False
        self._conn: BrokerConnection | None = None
        self._connection_factory = connection_factory
        #: Kafka's FetcherStats ``RequestsPerSec`` meter of this thread (set by the ReplicaFetcherManager)
        self.requests_meter = None
        self._conn_lock = threading.Lock()
        self._interrupt_handle: socket.socket | None = None  # a dup of the connection's socket
        self._reset_reason: str | None = None
        #: the KIP-227 session with the leader (only this thread uses it)
        self.session = FetchSessionHandler()
        # The last request's partitions, kept between requests (issue 31: an idle round builds no partition):
        # ``_wanted`` their request data, ``_sent`` (state, fetch offset) to match the answer against, ``_names``
        # topic id -> name. The next request rebuilds only ``_touched`` (partitions applied from the last answer)
        # unless ``_rebuild`` is set (partitions added/removed, a state or back-off change, a partition left out)
        # or the last full build is older than FULL_REBUILD_MS (to pick up log start offsets moved by retention).
        self._wanted: dict[tuple[str, int], PartitionData] = {}
        self._sent: dict[tuple[str, int], tuple[PartitionFetchState, int]] = {}
        self._names: dict[object, str] = {}
        self._touched: list[tuple[str, int]] = []
        self._rebuild = True
        self._full_build_ms = 0.0
        self.log = get_logger("ReplicaFetcherThread", broker=self.node_id, leader=source.id, fetcher=fetcher_id)

    # -- partition map (other threads) ---------------------------------------------------------
    def add_partitions(self, states: dict[tuple[str, int], PartitionFetchState]) -> None:
        with self._lock:
            self.partitions.update(states)
            self._rebuild = True
        self._work.set()

    def remove_partitions(self, tps) -> None:
        with self._lock:
            for tp in tps:
                self.partitions.pop(tp, None)
            self._rebuild = True

    def remove_all_partitions(self) -> dict[tuple[str, int], PartitionFetchState]:
        """Take every partition out of this thread (Kafka's ``removeAllPartitions``); returns their states.
        A fetch answer that arrives afterwards is not applied to them."""
        with self._lock:
            states, self.partitions = self.partitions, {}
            self._rebuild = True
            return states

    def partition_count(self) -> int:
        return len(self.partitions)  # no lock: never waits behind a ListOffsets sent under it

    def max_lag(self) -> int:
        with self._lock:
            return max((st.lag for st in self.partitions.values()), default=0)

    def reset_connection(self, reason: str) -> None:
        """Abandon the request in flight, if any, and send the next one on a new connection (any thread;
        returns at once). ``reason`` is logged by the fetcher thread."""
        with self._conn_lock:
            self._reset_reason = reason
            self._interrupt_locked()

    def initiate_shutdown(self) -> None:
        """Ask the loop to stop and interrupt its network wait; returns at once (Kafka's
        ``initiateShutdown``, which closes the fetcher's network client)."""
        self._running = False
        with self._conn_lock:
            self._interrupt_locked()
        self._work.set()

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Stop the loop (a blocked network call is interrupted) and wait for it."""
        self.initiate_shutdown()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout_s)

    def _interrupt_locked(self) -> None:
        handle = self._interrupt_handle
        if handle is not None:
            try:
                handle.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # not connected yet (the connect fails on its own) or already closed by the peer

    # -- loop ------------------------------------------------------------------------------------
    def run(self) -> None:
        self.log.info("Starting")
        try:
            while self._running:
                try:
                    self.do_work()
                except Exception as e:  # keep fetching; back off
                    if not self._running:
                        break
                    self.log.warning(f"Error in fetcher loop: {e!r}", exc_info=True)
                    self._close_connection()
                    self._delay_all()
        finally:
            self._close_connection()
            self.log.info("Stopped")

    def do_work(self) -> None:
        self._maybe_truncate()
        self._maybe_fetch()

    def _ready(self, state: str) -> dict[tuple[str, int], PartitionFetchState]:
        now = self.time.milliseconds()
        return {tp: st for tp, st in self.partitions.items() if st.state == state and st.delay_until_ms <= now}

    def _wait_for_work(self) -> None:
        """Nothing to do: sleep until a partition is added, the thread must stop or the nearest back-off
        ends. (The event is cleared before the checks, so a wake-up between them is not lost.)"""
        self._work.clear()
        with self._lock:
            if not self._running or self._ready(FETCHING) or self._ready(TRUNCATING):
                return
            now = self.time.milliseconds()
            delays = [st.delay_until_ms - now for st in self.partitions.values()]
            timeout = min([d for d in delays if d > 0], default=self.backoff_ms)
        self._work.wait(max(1, min(timeout, self.backoff_ms)) / 1000)

    def _await_registration(self) -> None:
        """This broker has no broker epoch yet: wait ``replica.fetch.backoff.ms`` (or until shut down: shutdown
        sets ``_work``)."""
        if not self._logged_unregistered:
            self._logged_unregistered = True
            self.log.info("Waiting for this broker's registration (its broker epoch) before fetching")
        self._work.clear()
        if self._running:
            self._work.wait(self.backoff_ms / 1000)

    def _connection(self) -> BrokerConnection:
        """The connection to the leader, made when there is none. It reads every answer into one reused buffer
        (``reuse_receive_buffer``, issue 31: no fresh zeroed ~1 MB buffer per fetch answer); the answer's record
        views are dropped once it is applied (``_maybe_fetch`` returns), and the connection never refills a buffer
        a live view still refers to."""
        if self._conn is not None and self._reset_reason is not None:
            reason = self._take_reset_reason()
            self.log.info(f"Reconnecting to broker {self.source.id}: {reason}")
            self._close_connection()
        if self._conn is None:
            with self._conn_lock:
                self._reset_reason = None  # the connection about to be made is the new one
            try:
                self._conn = self._connection_factory(
                    self.source.host,
                    self.source.port,
                    client_id=f"broker-{self.node_id}-fetcher-{self.fetcher_id}",
                    timeout=self.socket_timeout_s,
                    security=self.replica_manager.inter_broker_security,
                    on_socket=self._register_socket,
                    reuse_receive_buffer=True,
                )
            except BaseException:
                self._release_interrupt_handle()
                raise
        return self._conn

    def _register_socket(self, sock: socket.socket) -> None:
        """The new connection's socket, before its connect: its receive buffer is set to
        ``replica.socket.receive.buffer.bytes`` when that is set and not -1 (``receive_buffer_bytes``; before the
        connect, as Kafka's ``Selector.connect`` does, so the TCP window scale fits it), and a dup is kept to
        interrupt it with."""
        if self.receive_buffer_bytes != -1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)
        handle = sock.dup()
        with self._conn_lock:
            previous, self._interrupt_handle = self._interrupt_handle, handle
            if previous is not None:
                previous.close()
            if not self._running:
                self._interrupt_locked()

    def _release_interrupt_handle(self) -> None:
        with self._conn_lock:
            handle, self._interrupt_handle = self._interrupt_handle, None
            if handle is not None:
                handle.close()

    def _take_reset_reason(self) -> str | None:
        with self._conn_lock:
            reason, self._reset_reason = self._reset_reason, None
            return reason

    def _close_connection(self) -> None:
        conn, self._conn = self._conn, None
        self._release_interrupt_handle()
        if conn is not None:
            conn.close()

    def _delay_all(self) -> None:
        """Every partition waits ``replica.fetch.backoff.ms`` (the loop sleeps in ``_wait_for_work``)."""
        until = self.time.milliseconds() + self.backoff_ms
        with self._lock:
            for st in self.partitions.values():
                st.delay_until_ms = until
            self._rebuild = True

    def _send(self, api_key: int, version: int, body: dict) -> dict | None:
        """One request and its answer; None after a connection error (every partition then backs off
        ``replica.fetch.backoff.ms``) or a reset (no back-off: the caller's next request reconnects)."""
        try:
            return self._connection().request(api_key, version, body)
        except (OSError, ConnectionError, TimeoutError) as e:
            self._close_connection()
            if not self._running:
                return None
            reason = self._take_reset_reason()
            if reason is not None:
                self.log.info(
                    f"Abandoned {ApiKeys(api_key).name} to broker {self.source.id} at "
                    f"{self.source.host}:{self.source.port} ({reason}); reconnecting"
                )
                return None
            self.log.warning(
                f"Error sending {ApiKeys(api_key).name} to broker {self.source.id} at "
                f"{self.source.host}:{self.source.port}: {e!r}"
            )
            self._delay_all()
            return None

    # -- truncation ------------------------------------------------------------------------------
    def _maybe_truncate(self) -> None:
        with self._lock:
            if not self._rebuild:  # every partition was fetching at the last build and none changed state since
                return
            ready = self._ready(TRUNCATING)
            if not ready:
                return
            ask: dict[tuple[str, int], tuple[PartitionFetchState, int]] = {}
            for tp, st in ready.items():
                partition = self.replica_manager.get_partition(*tp)
                if partition is None:
                    continue
                epoch = partition.log.latest_epoch
                if epoch is None:  # no epochs: Kafka truncates to the high watermark
                    self._truncate(tp, partition, st, st.fetch_offset)
                else:
                    ask[tp] = (st, epoch)
        if not ask:
            return
        topics: dict[str, list[dict]] = {}
        for (topic, index), (st, epoch) in ask.items():
            topics.setdefault(topic, []).append(
                {"partition": index, "current_leader_epoch": st.current_leader_epoch, "leader_epoch": epoch}
            )
        response = self._send(
            ApiKeys.OFFSET_FOR_LEADER_EPOCH,
            OFFSET_FOR_LEADER_EPOCH_VERSION,
            {
                "replica_id": self.node_id,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            },
        )
        if response is None:
            return
        with self._lock:
            for t in response["topics"]:
                for p in t["partitions"]:
                    tp = (t["topic"], p["partition"])
                    asked = ask.get(tp)
                    current = self.partitions.get(tp)
                    if asked is None or current is None or current is not asked[0]:
                        continue  # removed or replaced meanwhile
                    partition = self.replica_manager.get_partition(*tp)
                    if partition is None:
                        continue
                    if p["error_code"] != errors.NONE:
                        self._partition_error(tp, current, p["error_code"], "OffsetForLeaderEpoch")
                        continue
                    self._apply_epoch_end_offset(tp, partition, current, p["leader_epoch"], p["end_offset"])

    def _apply_epoch_end_offset(self, tp, partition, st: PartitionFetchState, leader_epoch: int, end_offset: int):
        """Kafka's ``getOffsetTruncationState`` for the leader's answer ``(leader_epoch, end_offset)``."""
        log = partition.log
        leo = log.log_end_offset
        if end_offset < 0:
            self._truncate(tp, partition, st, st.fetch_offset)
            return
        if leader_epoch < 0:
            self._truncate(tp, partition, st, min(end_offset, leo))
            return
        ours = log.end_offset_for_epoch(leader_epoch)
        if ours is None:
            self._truncate(tp, partition, st, min(end_offset, leo))
            return
        follower_end, follower_epoch = ours
        if follower_epoch != leader_epoch:
            # The leader's epoch is unknown here: truncate to our end of the largest smaller epoch, ask again.
            target = min(follower_end, leo)
            self.log.info(
                f"Leader replied with epoch {leader_epoch} unknown to the replica for {tp[0]}-{tp[1]}; "
                f"truncating to {target} and asking again"
            )
            partition.truncate_to(target)
            return
        self._truncate(tp, partition, st, min(follower_end, end_offset, leo))

    def _truncate(self, tp, partition, st: PartitionFetchState, offset: int) -> None:
        offset = max(offset, 0)
        if partition.truncate_to(offset):
            self.log.info(f"Truncated {tp[0]}-{tp[1]} to offset {offset} (leader epoch {st.current_leader_epoch})")
        st.fetch_offset = partition.log.log_end_offset
        st.state = FETCHING

    # -- fetch -----------------------------------------------------------------------------------
    def _maybe_fetch(self) -> None:
        broker_epoch = self.replica_manager.broker_epoch()
        if broker_epoch < 0:
            self._await_registration()
            return
        held_back = False
        with self._lock:
            changes = self._changed_partitions()
            if changes is None:  # a full build over every ready partition
                held_back = self._build_all()
            sent, names = self._sent, self._names
        if not sent:
            self.session.handle_error()  # the next Fetch closes the session (its partitions are gone) and opens one
            if held_back:  # only throttled partitions: wait for the rate to come down (Kafka's fetch backoff)
                self._work.clear()
                self._work.wait(self.backoff_ms / 1000)
                return
            self._wait_for_work()
            return
        if self.requests_meter is not None:
            self.requests_meter.mark()
        data = self.session.build(self._wanted) if changes is None else self.session.build_changes(changes)
        response = self._send(
            ApiKeys.FETCH,
            FETCH_VERSION,
            {
                "replica_state": {"replica_id": self.node_id, "replica_epoch": broker_epoch},
                "max_wait_ms": self.max_wait_ms,
                "min_bytes": self.min_bytes,
                "max_bytes": self.max_bytes,
                "isolation_level": 0,
                "session_id": data.session_id,
                "session_epoch": data.session_epoch,
                "topics": data.topics,
                "forgotten_topics_data": data.forgotten_topics_data,
                "rack_id": "",
            },
        )
        if response is None:
            self.session.handle_error()
            return
        if not self.session.handle_response(response, data.is_full):
            code = response["error_code"]
            name = errors.for_code(code).name
            if code in _SESSION_ERRORS:  # Kafka: an empty answer; the next Fetch (a full one) goes at once
                self.log.info(f"Fetch session {data.session_id} with broker {self.source.id}: {name}; full fetch")
                return
            self.log.warning(f"Fetch from broker {self.source.id} failed: {name}")
            self._delay_all()
            return
        new_high_watermark: list[tuple[str, int]] = []
        now = self.time.milliseconds()
        with self._lock:
            for t in response["responses"]:
                topic = names.get(t["topic_id"])
                if topic is None:
                    continue
                for p in t["partitions"]:
                    tp = (topic, p["partition_index"])
                    entry = sent.get(tp)
                    current = self.partitions.get(tp)
                    if (
                        entry is None
                        or current is None
                        or current is not entry[0]
                        or current.fetch_offset != entry[1]
                        or current.state != FETCHING
                    ):
                        continue  # removed, replaced or truncated meanwhile
                    if self._process_partition(tp, current, p):
                        new_high_watermark.append(tp)
                    if (
                        current.state == FETCHING
                        and current.delay_until_ms <= now
                        and self.partitions.get(tp) is current
                    ):
                        self._touched.append(tp)
                    else:  # truncating, backing off or gone: the next request is built from every partition
                        self._rebuild = True
        if new_high_watermark:  # consumers waiting on this follower (KIP-392) see the new high watermark
            self.replica_manager.complete_delayed_fetch_requests(new_high_watermark)

    def _changed_partitions(self) -> dict[tuple[str, int], PartitionData] | None:
        """The request data of the partitions applied from the last answer (their fetch offsets moved), when
        nothing else can have changed since the last request; None when every partition must be looked at
        (:meth:`_build_all`). Caller holds ``_lock``."""
        touched, self._touched = self._touched, []
        quota = getattr(self.replica_manager, "follower_quota", None)
        if (
            self._rebuild
            or self.session.epoch == INITIAL_EPOCH
            or self.time.milliseconds() - self._full_build_ms >= FULL_REBUILD_MS
            or (quota is not None and quota.throttles_any())
        ):
            return None
        changes: dict[tuple[str, int], PartitionData] = {}
        for tp in touched:
            st = self.partitions.get(tp)
            partition = self.replica_manager.get_partition(*tp)
            if st is None or partition is None or st.state != FETCHING:
                return None
            data = self._partition_data(st, partition)
            self._sent[tp] = (st, st.fetch_offset)
            if self._wanted.get(tp) != data:
                self._wanted[tp] = changes[tp] = data
        return changes

    def _build_all(self) -> bool:
        """Rebuild the request data of every ready partition (``_wanted``, ``_sent``, ``_names``); True if a
        throttled partition was held back. Caller holds ``_lock``."""
        now = self.time.milliseconds()
        ready = self._ready(FETCHING)
        sent: dict[tuple[str, int], tuple[PartitionFetchState, int]] = {}
        wanted: dict[tuple[str, int], PartitionData] = {}
        quota = getattr(self.replica_manager, "follower_quota", None)
        if quota is not None and not quota.throttles_any():
            quota = None  # no throttled replica: no per-partition test
        held_back = False
        for tp, st in ready.items():
            partition = self.replica_manager.get_partition(*tp)
            if partition is None:
                continue
            if quota is not None and self._follower_throttled(quota, tp, partition):
                held_back = True
                continue
            wanted[tp] = self._partition_data(st, partition)
            sent[tp] = (st, st.fetch_offset)
        self._wanted, self._sent = wanted, sent
        self._names = {st.topic_id: tp[0] for tp, (st, _) in sent.items()}
        self._full_build_ms = now
        # Partitions left out (truncating, backing off, gone, held back) need a full build next time too.
        self._rebuild = len(sent) != len(self.partitions)
        return held_back

    def _partition_data(self, st: PartitionFetchState, partition) -> PartitionData:
        """One partition's Fetch request data from its log (the fetch offset is the log end offset)."""
        log = partition.log
        st.fetch_offset = log.log_end_offset
        latest = log.latest_epoch
        return PartitionData(
            st.topic_id,
            st.fetch_offset,
            st.current_leader_epoch,
            latest if latest is not None else -1,
            log.log_start_offset,
            self.partition_max_bytes,
        )

    def _follower_throttled(self, quota, tp, partition) -> bool:
        """Kafka's ``shouldFollowerThrottle``: a throttled partition this replica is not in the ISR of, while the
        follower quota is exceeded, is left out of the fetch."""
        return quota.is_throttled(*tp) and self.node_id not in partition.isr and quota.is_quota_exceeded()

    def _process_partition(self, tp, st: PartitionFetchState, p: dict) -> bool:
        """Apply one partition of the leader's response; True if this replica's high watermark moved."""
        partition = self.replica_manager.get_partition(*tp)
        if partition is None:
            return False
        code = p["error_code"]
        quota = getattr(self.replica_manager, "follower_quota", None)
        if code == errors.NONE and quota is not None and quota.is_throttled(*tp):
            received = p.get("records")
            size = getattr(received, "size_in_bytes", None)
            quota.record(size if isinstance(size, int) else len(received or b""))
        if code == errors.NONE:
            diverging = p.get("diverging_epoch") or {}
            if diverging.get("epoch", -1) >= 0 or diverging.get("end_offset", -1) >= 0:
                self.log.info(
                    f"Leader reported a diverging epoch for {tp[0]}-{tp[1]} at fetch offset {st.fetch_offset}: "
                    f"{diverging}; truncating"
                )
                st.state = TRUNCATING
                return False
            records = p.get("records")
            data = records if records is not None else b""
            hw_before = partition.log.high_watermark
            try:
                partition.append_records_as_follower(data, p["high_watermark"], p["log_start_offset"])
            except errors.KafkaStorageError as e:
                self.log.error(f"Storage error appending to {tp[0]}-{tp[1]} as follower: {e}")
                self.partitions.pop(tp, None)
                return False
            except Exception as e:  # noqa: BLE001 - e.g. an unexpected offset: truncate and retry
                self.log.warning(f"Error appending to {tp[0]}-{tp[1]} as follower: {e!r}; truncating")
                st.state = TRUNCATING
                st.delay_until_ms = self.time.milliseconds() + self.backoff_ms
                return False
            st.fetch_offset = partition.log.log_end_offset
            st.lag = max(0, p["high_watermark"] - st.fetch_offset)
            return partition.log.high_watermark > hw_before
        if code == errors.OFFSET_OUT_OF_RANGE:
            self._handle_out_of_range(tp, partition, st)
        else:
            self._partition_error(tp, st, code, "Fetch")
        return False

    def _partition_error(self, tp, st: PartitionFetchState, code: int, what: str) -> None:
        name = errors.for_code(code).name
        if code not in _BACK_OFF:
            self.log.warning(f"{what} of {tp[0]}-{tp[1]} from broker {self.source.id} failed: {name}")
        st.delay_until_ms = self.time.milliseconds() + self.backoff_ms

    def _handle_out_of_range(self, tp, partition, st: PartitionFetchState) -> None:
        """Kafka's ``fetchOffsetAndTruncate``: below the leader's end, resume from max(our LEO, the
        leader's log start offset); past it (after an unclean election), truncate to the leader's end."""
        latest = self._list_offset(tp, st, -1)
        earliest = self._list_offset(tp, st, -2) if latest is not None else None
        if latest is None or earliest is None:
            st.delay_until_ms = self.time.milliseconds() + self.backoff_ms
            return
        leo = partition.log.log_end_offset
        if latest < leo:
            self.log.warning(f"Reset fetch offset for {tp[0]}-{tp[1]} from {leo} to the leader's latest {latest}")
            partition.truncate_to(latest)
        elif earliest > leo:
            self.log.warning(
                f"Truncate fully and reset fetch offset for {tp[0]}-{tp[1]} from {leo} to the leader's start offset "
                f"{earliest}"
            )
            partition.truncate_fully_and_start_at(earliest)
        st.fetch_offset = partition.log.log_end_offset

    def _list_offset(self, tp, st: PartitionFetchState, timestamp: int) -> int | None:
        # Called with _lock held (Kafka does this under the partition map lock too); the wait is bounded
        # by the socket timeout.
        response = self._send(
            ApiKeys.LIST_OFFSETS,
            LIST_OFFSETS_VERSION,
            {
                "replica_id": self.node_id,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": tp[0],
                        "partitions": [
                            {
                                "partition_index": tp[1],
                                "current_leader_epoch": st.current_leader_epoch,
                                "timestamp": timestamp,
                            }
                        ],
                    }
                ],
            },
        )
        if response is None:
            return None
        p = response["topics"][0]["partitions"][0]
        return p["offset"] if p["error_code"] == errors.NONE else None
