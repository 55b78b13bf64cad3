"""KafkaRaftClient: the Raft replica of the ``__cluster_metadata`` partition (Kafka's ``KafkaRaftClient``).

Theory of operation. The client is sans-I/O: ``poll_once()`` consumes the inbound RPCs queued by
``handle(message)``, fires the due timers of the current epoch state
(:class:`~pykbroker.raft.quorum_state.QuorumState`), queues outbound RPCs (Vote, BeginQuorumEpoch,
EndQuorumEpoch, Fetch - :mod:`pykbroker.raft.raft_messages`) that the owner takes with
``drain_outbound()`` and delivers, moves appended records from the
:class:`~pykbroker.raft.batch_accumulator.BatchAccumulator` into the :class:`ReplicatedLog`, advances the
high watermark and delivers committed batches and leader changes to the registered listeners. It does no
waiting; ``poll()`` adds the wait (on a condition woken by appends, inbound messages, registrations and
shutdown). The :class:`~pykbroker.raft.kafka_raft_client_driver.KafkaRaftClientDriver` thread calls
``poll()`` in a loop. Time comes from the injected ``Time`` only.

Single voter (today's combined node): on start the stored election state is loaded (a node that led the
stored epoch comes back Resigned), it becomes Candidate in ``epoch + 1`` (persisted), has its own vote and
so becomes Leader at once, appends a LeaderChange control batch at the epoch start offset, flushes, and the
high watermark - the majority end offset, here its own - moves past it. No RPC is ever produced.

Several voters (Kafka's protocol, with KIP-996 pre-vote): an Unattached voter whose randomized election
timeout (``election_timeout_ms`` + up to as much again) expires - or a Follower whose leader went silent for
``fetch_timeout_ms``, or a Resigned leader - becomes Prospective in the *same* epoch and sends pre-votes (Vote
v2 with ``pre_vote``, ``candidate_epoch`` = epoch + 1) to every voter. A voter grants a pre-vote, changing
nothing, when the prospective's log is at least as up to date as its own and it knows no healthy leader (it
is not Leader or Resigned, and as a Follower has not had a Fetch answered within its fetch timeout). Only with
a majority of pre-votes does the Prospective become Candidate in a new epoch and send Vote to every voter;
losing (a majority refused, or its election timeout passed) takes it back to following its leader, or to
Unattached, in the same epoch. So a voter that was partitioned or paused cannot bump the epoch and depose a
healthy leader when it comes back. A voter grants at most one (binding) vote per epoch (persisted in the
quorum-state file before it answers), only to a candidate whose log (last epoch, end offset) is at least as
up to date as its own. A candidate with a majority becomes Leader, appends LeaderChange and sends
BeginQuorumEpoch until each voter acknowledged; a failed election backs off (binary exponential, capped by
``election_backoff_max_ms``) and then becomes Prospective again. A peer that does not support Vote v2 answers
UNSUPPORTED_VERSION, on which the Prospective stands at once (Kafka's fallback for a partly upgraded quorum).
Followers (and observers - nodes that are not voters, which never vote or stand) send Fetch with
``fetch_offset`` = their log end and ``last_fetched_epoch``; the leader answers ``diverging_epoch`` when they
disagree (the follower truncates and refetches), else records and its high watermark, parking an empty fetch
up to ``max_wait_ms`` unless the fetch's ``high_watermark`` (Fetch v18, KIP-1166: the one the fetcher knows,
-1 for none) is below the leader's (the leader's side of Fetch and FetchSnapshot is
:class:`pykbroker.raft.leader_fetch.LeaderFetchHandler`). Each state has its poll, as Kafka's
(``_poll_leader``, ``_poll_candidate``, ``_poll_follower``, ``_poll_unattached``, ``_poll_resigned``). The
leader's high watermark is the offset a majority of voters has reached, once above its epoch start offset
(Raft's commit rule). A follower that hears nothing from its leader for ``fetch_timeout_ms`` stands for
election; a leader that has not been fetched from by a majority for 1.5 x ``fetch_timeout_ms`` resigns
(check-quorum). A resigning leader sends EndQuorumEpoch naming its preferred successors, which stand at once
or after a short backoff. One request is in flight per destination; one not answered within
``request_timeout_ms`` is dropped and retried after ``retry_backoff_ms``; responses that do not answer the
in-flight request are ignored, so lost, late, duplicated and reordered messages are harmless.

Snapshots (KIP-630). A state machine writes one with ``create_snapshot`` (at most at the high watermark);
each poll the log is cleaned up to its newest snapshot (``ReplicatedLog.maybe_clean``). A Fetch below the
leader's log start offset (or in an epoch older than its oldest snapshot) is answered with the latest
``snapshot_id``; the follower then downloads it with FetchSnapshot requests (one in flight, chunks of at
most ``fetch_snapshot_max_bytes``, each answered with the bytes at ``position``), freezes it, empties its
log to start at the snapshot's end offset, takes that offset as its high watermark and resumes fetching
from there (:class:`pykbroker.raft.follower_snapshot_fetch.FollowerSnapshotFetch`). Losing the leader or the
leader losing the snapshot (SNAPSHOT_NOT_FOUND) discards the partial download. Listeners get
``handle_load_snapshot`` first when they register and a snapshot exists, and
whenever their position falls below the log start offset (Kafka's ``updateListenersProgress``).

Dynamic quorums (KIP-853). The voter set is the latest VotersRecord in the log or in the snapshot the log
starts at (:class:`~pykbroker.raft.voter_set.VoterSetHistory`, Kafka's ``KRaftControlRecordStateMachine``), in
effect as soon as it is appended (and forgotten when the log is truncated below it); without one it is the
static ``voters`` (``controller.quorum.voters``). A node formatted ``--standalone`` has its set in the bootstrap
snapshot ``00000000000000000000-0000000000``; the first leader writes it into the log with its LeaderChange. A
node with no voter set yet (``--no-initial-controllers``) is an observer that finds the leader through its
``bootstrap_servers`` (negative ids the network channel maps to ``controller.quorum.bootstrap.servers``).
``add_voter`` / ``remove_voter`` (AddRaftVoter / RemoveRaftVoter, Kafka's ``AddVoterHandler`` /
``RemoveVoterHandler``) are handled by the leader on its IO thread, one change at a time: the leader must have
committed in its epoch and the previous change must be committed, a new voter must be an observer that is
caught up (fetched up to the leader's end within ``fetch_timeout_ms``); the new VotersRecord is appended as a
control batch and the request is answered once it commits (REQUEST_TIMED_OUT at its deadline). A leader that
removed itself resigns once the removal is committed; a removed node becomes an observer. In a dynamic quorum
Vote, BeginQuorumEpoch and EndQuorumEpoch are answered whatever the sender's or this node's membership (a
replica may not have the latest voter set yet). UpdateRaftVoter (Kafka's ``UpdateVoterHandler``, see
:mod:`pykbroker.raft.update_voter_handler`): a follower that is a voter, given its ``directory_id`` and
``local_listeners``, whose stored voter entry differs (other endpoints or ``kraft.version`` range, e.g. after
a restart on another port) sends one to the leader every ``3 * fetch_timeout_ms`` of following until the
set matches; the leader appends the updated VotersRecord and answers at once. The client speaks to the
other voters through a ``NetworkChannel``: :mod:`pykbroker.raft.kafka_network_channel` over the controller
listener, which the server wires in (``KafkaRaftServer``).

Threading: the IO thread owns the quorum state, the log and listener delivery. ``handle``,
``drain_outbound``, ``prepare_append``, ``schedule_prepared_append``, ``schedule_append``, ``register``,
``unregister``, ``resign``, ``leader_and_epoch``, ``high_watermark``, ``log_end_offset``, ``wakeup``,
``create_snapshot``, ``latest_snapshot_id`` and ``begin_shutdown`` are safe from any thread.
"""

from __future__ import annotations

import dataclasses
import random as _random
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pykbroker.protocol.errors import (
    DUPLICATE_VOTER,
    FENCED_LEADER_EPOCH,
    INCONSISTENT_CLUSTER_ID,
    INCONSISTENT_VOTER_SET,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    REQUEST_TIMED_OUT,
    UNSUPPORTED_VERSION,
    VOTER_NOT_FOUND,
)
from pykbroker.raft.batch_accumulator import BatchAccumulator, NotLeaderError
from pykbroker.raft.control_records import (
    KRAFT_VERSION,
    KRAFT_VOTERS,
    LEADER_CHANGE,
    KRaftVersionRecord,
    LeaderChangeMessage,
    Voter,
    VoterEndpoint,
    control_key,
)
from pykbroker.raft.epoch_state import (
    CandidateState,
    FollowerState,
    LeaderState,
    ProspectiveState,
    ResignedState,
    StateKind,
    UnattachedState,
)
from pykbroker.raft.follower_snapshot_fetch import FollowerSnapshotFetch
from pykbroker.raft.leader_fetch import LeaderFetchHandler
from pykbroker.raft.listener_delivery import ListenerDelivery
from pykbroker.raft.quorum_state import QuorumState
from pykbroker.raft.quorum_state_store import NO_ID, QuorumStateStore
from pykbroker.raft.raft_client import (
    UNKNOWN_LEADER,
    LeaderAndEpoch,
    RaftClientListener,
    RaftInvariantError,
    RecordSerde,
)
from pykbroker.raft.raft_messages import (
    BeginQuorumEpochRequestData,
    BeginQuorumEpochResponseData,
    EndQuorumEpochRequestData,
    EndQuorumEpochResponseData,
    EpochEndOffset,
    FetchRequestData,
    FetchResponseData,
    FetchSnapshotResponseData,
    RaftMessage,
    RaftRequest,
    RaftResponse,
    RequestData,
    ResponseData,
    SnapshotId,
    UpdateRaftVoterRequestData,
    UpdateRaftVoterResponseData,
    VoteRequestData,
    VoteResponseData,
    error_response,
)
from pykbroker.raft.records_snapshot import CorruptSnapshotError, RecordsSnapshotReader, RecordsSnapshotWriter
from pykbroker.raft.replicated_log import LogBatch, LogRecord, ReplicatedLog
from pykbroker.raft.update_voter_handler import needs_update, update_voter
from pykbroker.raft.voter_set import NO_DIRECTORY_ID, VoterSet, VoterSetHistory, scan_control_batches
from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import SYSTEM, Time

if TYPE_CHECKING:
    from pykbroker.raft.kafka_raft_metrics import KafkaRaftMetrics

T = TypeVar("T")

MAX_POLL_WAIT_MS = 500
RETRY_BACKOFF_BASE_MS = 100
"""Unit of the election backoffs (Kafka's ``KafkaRaftClient.RETRY_BACKOFF_BASE_MS``)."""
FETCH_SNAPSHOT_MAX_BYTES = 8 << 20
"""Chunk size asked for by FetchSnapshot (Kafka's ``KafkaRaftClient.MAX_FETCH_SIZE_BYTES``)."""
"""A new listener's position: it gets the latest snapshot, if any, before any batch."""


@dataclass
class _InFlight:
    """The one request in flight to a destination (Kafka's ``RequestManager`` connection state)."""

    correlation_id: int
    data: RequestData
    deadline_ms: int


@dataclass
class _VoterChange:
    """An AddRaftVoter (``add``) or RemoveRaftVoter (``remove``: id, directory id) waiting on the leader;
    ``future`` gets ``(error_code, error_message)``; ``offset``: where its VotersRecord went (-1: not yet)."""

    add: Voter | None
    remove: tuple[int, uuid.UUID] | None
    future: Future
    timeout_ms: int
    deadline_ms: int = 0
    offset: int = -1
    epoch: int = -1


class KafkaRaftClient(Generic[T]):
    """See the module docstring. Offsets are Kafka offsets; times are ms of the injected ``time``.
    ``voters`` is the static voter set (``controller.quorum.voters``), used while the log holds no
    VotersRecord; a ``node_id`` outside the voter set is an observer. ``bootstrap_servers``: negative ids of
    ``controller.quorum.bootstrap.servers`` an observer that knows no leader fetches from (KIP-853).
    ``directory_id`` (the metadata log directory's ``directory.id``), ``local_listeners`` (this node's
    controller endpoints, the default listener first) and ``kraft_version_range`` (the ``kraft.version``
    levels it supports) describe this replica for UpdateRaftVoter (KIP-853)."""

    def __init__(
        self,
        node_id: int,
        voters: Sequence[int] | frozenset[int],
        log: ReplicatedLog,
        store: QuorumStateStore,
        serde: RecordSerde[T],
        time: Time = SYSTEM,
        append_linger_ms: int = 25,
        election_timeout_ms: int = 1000,
        fetch_timeout_ms: int = 2000,
        random: _random.Random | None = None,
        election_backoff_max_ms: int = 1000,
        request_timeout_ms: int = 2000,
        retry_backoff_ms: int = 20,
        fetch_max_wait_ms: int = 500,
        cluster_id: str | None = None,
        fetch_snapshot_max_bytes: int = FETCH_SNAPSHOT_MAX_BYTES,
        bootstrap_servers: Sequence[int] = (),
        directory_id: uuid.UUID | None = None,
        local_listeners: Sequence[VoterEndpoint] = (),
        kraft_version_range: tuple[int, int] = (0, 1),
    ):
        self.node_id = node_id
        self.directory_id = directory_id or NO_DIRECTORY_ID
        self.local_listeners = tuple(local_listeners)
        self.kraft_version_range = kraft_version_range
        #: a follower sends UpdateRaftVoter when its stored voter entry differs, at most once per this period
        self._update_voter_deadline_ms = 0
        self.bootstrap_servers = tuple(bootstrap_servers)
        #: the voter sets in the log (KIP-853); the static ``voters`` until it has one
        self.voter_history = VoterSetHistory(VoterSet.static(voters) if voters else None)
        self.fetch_snapshot_max_bytes = fetch_snapshot_max_bytes
        self.log = log
        self.serde = serde
        self.time = time
        self.append_linger_ms = append_linger_ms
        self.election_backoff_max_ms = election_backoff_max_ms
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_timeout_ms = fetch_timeout_ms
        self.cluster_id = cluster_id
        self.random = random or _random.Random()
        self.quorum = QuorumState(
            node_id, frozenset(voters), store, time, election_timeout_ms, fetch_timeout_ms, self.random
        )
        if not self.quorum.voters and not bootstrap_servers and log.latest_snapshot_id() is None:
            raise ValueError("The voter set is empty")
        if fetch_max_wait_ms >= request_timeout_ms:
            raise ValueError(
                f"fetch_max_wait_ms ({fetch_max_wait_ms}) must be below request_timeout_ms ({request_timeout_ms}): "
                "a parked Fetch would time out before the leader answers it"
            )
        self._log = get_logger("RaftManager", id=node_id)
        self._cond = threading.Condition()
        self._woken = False  # guarded by _cond
        self._state_lock = threading.Lock()  # guards _accumulator, _leader_and_epoch, _high_watermark
        self._accumulator: BatchAccumulator | None = None
        self._leader_and_epoch: LeaderAndEpoch = UNKNOWN_LEADER
        self._high_watermark: int | None = None
        self._listeners: ListenerDelivery[T] = ListenerDelivery(node_id, log, serde, self._log)
        self._io_lock = threading.Lock()  # guards _inbound, _outbound, _resign_requested
        self._inbound: list[RaftMessage] = []
        self._outbound: list[RaftMessage] = []
        self._resign_requested: int | None = None
        self._next_correlation_id = 0
        self._in_flight: dict[int, _InFlight] = {}  # destination -> request
        self._backoff_until: dict[int, int] = {}  # destination -> ms
        #: the leader's side of Fetch and FetchSnapshot, with the fetches it holds
        self._leader_fetch = LeaderFetchHandler(
            node_id, log, self.quorum, time, self._set_high_watermark, self._send_response, MAX_POLL_WAIT_MS
        )
        #: a follower's download of the leader's snapshot
        self._snapshot_fetch = FollowerSnapshotFetch(node_id, log, self._set_high_watermark, self._log.info)
        self._shutting_down = False
        self._initialized = False
        self.metrics: KafkaRaftMetrics | None = None  # set by KafkaRaftMetrics; recorded on the Raft thread
        self._uncommitted: list[tuple[int, int]] = []  # leader: (next offset, append ms) of batches not committed
        self._voter_requests: list[_VoterChange] = []  # guarded by _io_lock
        self._voter_change: _VoterChange | None = None  # the leader's change in progress (IO thread)

    # ---- thread-safe API ---------------------------------------------------------------------
    def register(self, listener: RaftClientListener[T]) -> None:
        """Start delivering to ``listener`` from offset 0 on the next poll."""
        self._listeners.register(listener)
        self.wakeup()

    def unregister(self, listener: RaftClientListener[T]) -> None:
        self._listeners.unregister(listener)
        self.wakeup()

    @property
    def leader_and_epoch(self) -> LeaderAndEpoch:
        return self._leader_and_epoch

    def high_watermark(self) -> int | None:
        return self._high_watermark

    def log_end_offset(self) -> int:
        """The offset the next appended record gets (leader: including queued appends)."""
        with self._state_lock:
            acc = self._accumulator
        return acc.next_offset() if acc is not None else self.log.end_offset()

    def prepare_append(self, epoch: int, records: Sequence[T]) -> int:
        """Reserve offsets for ``records`` (atomically, one batch) in ``epoch``; returns the last
        offset. They reach the log after ``append_linger_ms`` or on ``schedule_prepared_append``.
        Raises NotLeaderError when this node does not lead ``epoch``."""
        with self._state_lock:
            acc = self._accumulator
        if acc is None:
            raise NotLeaderError(f"Node {self.node_id} is not the leader (append in epoch {epoch})")
        values = [LogRecord(None, self.serde.write(r)) for r in records]
        return acc.prepare_append(epoch, values)

    def schedule_prepared_append(self) -> None:
        with self._state_lock:
            acc = self._accumulator
        if acc is not None:
            acc.schedule_drain()

    def schedule_append(self, epoch: int, records: Sequence[T]) -> int:
        """``prepare_append`` with the linger time (Kafka's ``scheduleAppend``/``scheduleAtomicAppend``:
        one call is always one atomic batch here)."""
        return self.prepare_append(epoch, records)

    schedule_atomic_append = schedule_append

    def create_snapshot(
        self, snapshot_id: SnapshotId, last_contained_log_time_ms: int
    ) -> RecordsSnapshotWriter[T] | None:
        """A writer for a snapshot of the state after every record below ``snapshot_id.end_offset``, whose
        ``epoch`` is that of the record at ``end_offset - 1`` (Kafka's ``RaftClient.createSnapshot``).
        None when it exists already or is below the log start offset; ValueError above the high watermark
        or for a wrong epoch. The caller appends its records, then ``freeze()``s (or ``close()``s to give
        up); the log is cleaned up to it on a later poll."""
        raw = self.log.create_new_snapshot(snapshot_id)
        if raw is None:
            return None
        control: list[LogRecord] = []
        history = self.voter_history
        if history.is_dynamic():  # KIP-853: the snapshot carries the kraft.version and voter set at its end
            control.append(LogRecord(control_key(KRAFT_VERSION), KRaftVersionRecord(history.kraft_version).encode()))
            voters = history.voter_set_at(snapshot_id.end_offset - 1)
            if voters is not None:
                control.append(LogRecord(control_key(KRAFT_VOTERS), voters.to_record().encode()))
        return RecordsSnapshotWriter(raw, self.serde, last_contained_log_time_ms, control)

    def latest_snapshot_id(self) -> SnapshotId | None:
        return self.log.latest_snapshot_id()

    def add_voter(self, voter: Voter, timeout_ms: int) -> Future:
        """AddRaftVoter (KIP-853): ``voter`` joins the voter set. The future gets ``(error_code, message)``
        once the new VotersRecord is committed (NONE), or the refusal: NOT_LEADER_OR_FOLLOWER,
        UNSUPPORTED_VERSION (a static quorum), DUPLICATE_VOTER, REQUEST_TIMED_OUT (another change pending, the
        voter not caught up, or no commit within ``timeout_ms``). Safe from any thread."""
        return self._queue_voter_change(_VoterChange(voter, None, Future(), timeout_ms))

    def remove_voter(self, voter_id: int, directory_id: uuid.UUID, timeout_ms: int) -> Future:
        """RemoveRaftVoter (KIP-853): as ``add_voter``; VOTER_NOT_FOUND when ``(voter_id, directory_id)`` is
        not a voter (or is the last one). Safe from any thread."""
        return self._queue_voter_change(_VoterChange(None, (voter_id, directory_id), Future(), timeout_ms))

    def _queue_voter_change(self, change: _VoterChange) -> Future:
        with self._io_lock:
            self._voter_requests.append(change)
        self.wakeup()
        return change.future

    def voter_set(self) -> VoterSet | None:
        """The voter set in effect (immutable; safe from any thread)."""
        return self.voter_history.latest()

    def kraft_version(self) -> int:
        """The latest ``kraft.version`` in the log, maybe uncommitted (Kafka's ``RaftClient.kraftVersion``): 1 in a
        dynamic quorum, 0 in a static one. Safe from any thread."""
        return self.voter_history.kraft_version

    def wakeup(self) -> None:
        with self._cond:
            self._woken = True
            self._cond.notify_all()

    def handle(self, message: RaftMessage) -> None:
        """Queue an inbound request or response for the next poll."""
        with self._io_lock:
            self._inbound.append(message)
        self.wakeup()

    def drain_outbound(self) -> list[RaftMessage]:
        """Take the requests and responses produced since the last call, oldest first."""
        with self._io_lock:
            out, self._outbound = self._outbound, []
        return out

    def resign(self, epoch: int) -> None:
        """Give up leadership of ``epoch`` (Kafka's ``RaftClient.resign``); done on the next poll, a no-op
        if this node no longer leads ``epoch``."""
        with self._io_lock:
            self._resign_requested = epoch
        self.wakeup()

    # ---- IO thread ---------------------------------------------------------------------------
    def initialize(self) -> None:
        """Load the voter set, the election state and the log position (call before the first poll)."""
        self._load_voter_history()
        if not self.quorum.voters and not self.bootstrap_servers:
            raise ValueError("The voter set is empty")
        self.quorum.initialize(self.log.last_fetched_epoch())
        # a restarted follower (FollowerState from the store) also fetches a few rounds before an UpdateRaftVoter
        self._update_voter_deadline_ms = self._now() + 3 * self.fetch_timeout_ms
        self._initialized = True
        self._update_leader_and_epoch()
        self._log.info("Initialized quorum state", state=repr(self.quorum.state), log_end_offset=self.log.end_offset())

    def poll(self) -> None:
        """One ``poll_once`` and then wait until the next deadline or a wakeup."""
        self.await_wakeup(self.poll_once())

    def await_wakeup(self, wait_ms: int) -> None:
        """Wait up to ``wait_ms`` for a wakeup (an inbound message, an append, a registration...)."""
        with self._cond:
            if not self._woken and wait_ms > 0:
                self._cond.wait(wait_ms / 1000.0)
            self._woken = False

    def poll_once(self) -> int:
        """Do all due work without waiting; returns ms until something is next due."""
        if not self._initialized:
            self.initialize()
        self._apply_registrations()
        self._handle_inbound()
        now = self._now()
        self._expire_requests(now)
        self._maybe_resign()
        wait_ms = self._poll_state()
        self._poll_voter_changes(self._now())
        self.log.maybe_clean()
        if self.quorum.is_leader():
            self._drain_appends(force=self._shutting_down)
            wait_ms = min(wait_ms, self._leader_fetch.complete_parked(self._now()))
        self._poll_listeners()
        acc = self._accumulator
        due = acc.time_until_drain_ms() if acc is not None else None
        if due is not None:
            wait_ms = min(wait_ms, due)
        return max(0, min(wait_ms, MAX_POLL_WAIT_MS))

    def _now(self) -> int:
        return self.time.hi_res_milliseconds()

    def _apply_registrations(self) -> None:
        self._listeners.apply_registrations()

    # ---- transitions -------------------------------------------------------------------------
    def _transition(self, move: Callable[[], Any]) -> None:
        """Run one QuorumState transition (durable before it takes effect) and reset what belonged to
        the old state: in-flight requests (late answers are ignored), the accumulator and parked
        fetches of a former leader."""
        before = self.quorum.state
        move()
        after = self.quorum.state
        self._uncommitted.clear()
        metrics = self.metrics
        if metrics is not None:  # Kafka: an election runs from standing to knowing a leader
            if after.kind is StateKind.CANDIDATE and before.kind is not StateKind.CANDIDATE:
                metrics.update_election_start_ms(self.time.milliseconds())
            elif after.kind in (StateKind.LEADER, StateKind.FOLLOWER):
                metrics.maybe_update_election_latency(self.time.milliseconds())
        self._in_flight.clear()
        self._backoff_until.clear()
        self._abandon_snapshot_fetch()
        if isinstance(after, FollowerState):  # Kafka: a few rounds of Fetch before an UpdateRaftVoter
            self._update_voter_deadline_ms = self._now() + 3 * self.fetch_timeout_ms
        if not isinstance(after, LeaderState):
            with self._state_lock:
                acc, self._accumulator = self._accumulator, None
            if acc is not None:
                dropped = acc.close()
                if dropped:
                    self._log.warning("Dropped queued records on losing leadership", records=dropped)
            self._leader_fetch.fail_parked()
        self._update_leader_and_epoch()
        self._log.info("Transitioned", old=repr(before), new=repr(after))

    def _update_leader_and_epoch(self) -> None:
        with self._state_lock:
            self._leader_and_epoch = LeaderAndEpoch(self.quorum.leader_id, self.quorum.epoch)

    def _maybe_transition(self, leader_id: int, epoch: int) -> None:
        """Learned (from any RPC) that ``leader_id`` (or nobody, -1) leads ``epoch`` (Kafka's
        ``maybeTransition``)."""
        q = self.quorum
        if epoch < q.epoch:
            return
        if leader_id == NO_ID or leader_id == self.node_id:
            # an observer cannot stand, so a newer epoch without a leader is no use to it: it would only
            # stop following the leader it has until someone wins that epoch
            if epoch > q.epoch and q.is_voter():
                self._transition(lambda: q.transition_to_unattached(epoch))
            return
        if epoch > q.epoch or not (q.kind is StateKind.FOLLOWER and q.leader_id == leader_id):
            self._transition(lambda: q.transition_to_follower(epoch, leader_id))

    def _transition_to_candidate(self, skip_pre_vote: bool = False) -> None:
        self._transition(lambda: self.quorum.transition_to_candidate(skip_pre_vote))

    def _transition_to_prospective(self) -> None:
        self._transition(self.quorum.transition_to_prospective)

    def _election_backoff_ms(self, retries: int) -> int:
        """Kafka's ``binaryExponentialElectionBackoffMs``."""
        jitter = self.random.randrange(2 << (max(retries, 1) - 1))
        return min(RETRY_BACKOFF_BASE_MS * jitter, self.election_backoff_max_ms)

    def _end_epoch_backoff_ms(self, preferred_successors: Sequence[int]) -> int:
        """How long a follower told EndQuorumEpoch waits before standing (Kafka's
        ``strictExponentialElectionBackoffMs`` by position among the preferred successors)."""
        if self.node_id not in preferred_successors:
            return self.election_backoff_max_ms
        position = list(preferred_successors).index(self.node_id)
        if position == 0:
            return 0
        return min(RETRY_BACKOFF_BASE_MS << (position - 1), self.election_backoff_max_ms)

    # ---- the state machine -------------------------------------------------------------------
    def _poll_state(self) -> int:
        """Fire due timers and send what the current state owes; returns ms until the next timer."""
        for _ in range(4):  # a transition may make the new state's work due at once
            state = self.quorum.state
            wait_ms = self._poll_current(state, self._now())
            if self.quorum.state is state:
                return wait_ms
        return 0

    def _poll_current(self, state: Any, now: int) -> int:
        """The current state's poll (Kafka's ``pollCurrentState``): the single-voter shortcut, else
        pollLeader / pollCandidate / pollFollower / pollUnattached / pollResigned; returns ms until the
        next timer. RaftInvariantError for a state that has no poll."""
        may_elect = not self._shutting_down and self.quorum.is_voter()
        if self.quorum.is_only_voter():
            return self._poll_only_voter(state, may_elect)
        if isinstance(state, LeaderState):
            return self._poll_leader(state, now)
        if isinstance(state, ProspectiveState):
            return self._poll_prospective(state, now, may_elect)
        if isinstance(state, CandidateState):
            return self._poll_candidate(state, now, may_elect)
        if isinstance(state, FollowerState):
            return self._poll_follower(state, now, may_elect)
        if isinstance(state, UnattachedState):
            return self._poll_unattached(state, now, may_elect)
        if isinstance(state, ResignedState):
            return self._poll_resigned(state, now, may_elect)
        raise RaftInvariantError(f"Unexpected quorum state {state!r}")

    def _poll_only_voter(self, state: Any, may_elect: bool) -> int:
        """The only voter elects itself at once (no request to send)."""
        if may_elect and state.kind in (
            StateKind.UNATTACHED,
            StateKind.PROSPECTIVE,
            StateKind.RESIGNED,
            StateKind.FOLLOWER,
        ):
            self._transition_to_candidate()
        elif isinstance(state, CandidateState) and state.is_vote_granted():
            self._become_leader(state)
        return MAX_POLL_WAIT_MS

    def _poll_leader(self, state: LeaderState, now: int) -> int:
        """Kafka's ``pollLeader``: resign when shutting down or when check-quorum expired, else send
        BeginQuorumEpoch to the voters that have not acknowledged this epoch."""
        if self._shutting_down:
            self._resign(state)
            return 0
        if state.has_check_quorum_expired(now):
            self._log.info("No fetch from a majority of the voters in time; resigning", epoch=state.epoch)
            self._resign(state)
            return 0
        for voter in sorted(state.non_acknowledging_voters()):
            if self._can_send(voter, now):
                begin = BeginQuorumEpochRequestData(self.node_id, state.epoch, self.cluster_id, voter)
                self._send_request(voter, begin)
        return self._next_retry_ms(now)

    def _poll_prospective(self, state: ProspectiveState, now: int, may_elect: bool) -> int:
        """Kafka's ``pollProspective`` (KIP-996): stand (Candidate, epoch + 1) once a majority granted the
        pre-vote; after losing it (a majority refused, or the election timeout passed) go back to following
        the leader it had, else to Unattached, in the same epoch; else ask the voters not heard from yet."""
        if state.is_vote_granted() and may_elect:
            self._transition_to_candidate()
            return 0
        if now >= state.election_deadline_ms or state.is_vote_rejected():
            self._log.info("Pre-vote election lost", epoch=state.epoch, granted=sorted(state.granted))
            self._prospective_lost(state)
            return 0
        request = VoteRequestData(
            state.epoch + 1,
            self.node_id,
            self.log.last_fetched_epoch(),
            self.log.end_offset(),
            self.cluster_id,
            pre_vote=True,
        )
        for voter in sorted(state.unrecorded_voters()):
            if self._can_send(voter, now):
                self._send_request(voter, dataclasses.replace(request, voter_id=voter))
        return max(0, min(state.election_deadline_ms - now, self._next_retry_ms(now)))

    def _prospective_lost(self, state: ProspectiveState) -> None:
        """Kafka's ``prospectiveTransitionAfterElectionLoss``."""
        q = self.quorum
        if state.leader != NO_ID:
            self._transition(lambda: q.transition_to_follower(state.epoch, state.leader))
        else:
            self._transition(lambda: q.transition_to_unattached(state.epoch))

    def _poll_candidate(self, state: CandidateState, now: int, may_elect: bool) -> int:
        """Kafka's ``pollCandidate``: become leader once granted; after a failed election back off, then
        become Prospective again (ask for pre-votes before another epoch); else ask the voters not heard
        from yet for their vote."""
        if state.is_vote_granted():
            self._become_leader(state)
            return 0
        if state.backoff_deadline_ms is not None:
            if now >= state.backoff_deadline_ms and may_elect:
                self._transition_to_prospective()
                return 0
            return state.backoff_deadline_ms - now
        if now >= state.election_deadline_ms or state.is_vote_rejected():
            state.start_backing_off(now, self._election_backoff_ms(state.retries))
            self._log.info("Election failed; backing off", epoch=state.epoch, retries=state.retries)
            return 0
        request = VoteRequestData(
            state.epoch, self.node_id, self.log.last_fetched_epoch(), self.log.end_offset(), self.cluster_id
        )
        for voter in sorted(state.unrecorded_voters()):
            if self._can_send(voter, now):
                self._send_request(voter, dataclasses.replace(request, voter_id=voter))
        return min(state.election_deadline_ms - now, self._next_retry_ms(now))

    def _poll_follower(self, state: FollowerState, now: int, may_elect: bool) -> int:
        """Kafka's ``pollFollower`` (voter or observer): stand for election when the leader went silent
        (an observer looks for the current leader instead), else fetch from the leader (a snapshot while
        one is being fetched)."""
        if now >= state.fetch_deadline_ms:
            if may_elect:
                self._log.info(
                    "No fetch from the leader in time; asking for pre-votes", epoch=state.epoch, leader=state.leader
                )
                self._transition_to_prospective()
                return 0
            if not self.quorum.is_voter():
                self._abandon_snapshot_fetch()  # the leader may be gone: look for the current one
                self._maybe_send_fetch(self._random_voter(), now)  # observer: look for the leader
                return self._next_retry_ms(now)
        wait = max(0, state.fetch_deadline_ms - now)
        if self._maybe_send_update_voter(state, now):
            return min(wait, self._next_retry_ms(now))
        if self._snapshot_fetch.in_progress:
            self._maybe_send_fetch_snapshot(state.leader, now)
        else:
            self._maybe_send_fetch(state.leader, now)
        if self._local_voter_needs_update():
            wait = min(wait, max(0, self._update_voter_deadline_ms - now))
        return min(wait, self._next_retry_ms(now))

    def _local_voter(self) -> Voter:
        low, high = self.kraft_version_range
        return Voter(self.node_id, self.directory_id, self.local_listeners, low, high)

    def _local_voter_needs_update(self) -> bool:
        return (
            bool(self.local_listeners)
            and self.voter_history.kraft_version >= 1
            and needs_update(self.voter_history.latest(), self._local_voter())
        )

    def _maybe_send_update_voter(self, state: FollowerState, now: int) -> bool:
        """Kafka's ``pollFollowerAsVoter``: once the update period passed, a voter whose stored entry differs
        sends UpdateRaftVoter instead of its next Fetch (then waits for another period)."""
        if now < self._update_voter_deadline_ms or not self.quorum.is_voter():
            return False
        if not self._local_voter_needs_update() or not self._can_send(state.leader, now):
            return False
        self._update_voter_deadline_ms = now + 3 * self.fetch_timeout_ms
        low, high = self.kraft_version_range
        self._log.info("Sending UpdateRaftVoter", leader=state.leader, listeners=self.local_listeners)
        self._send_request(
            state.leader,
            UpdateRaftVoterRequestData(
                state.epoch, self.node_id, self.directory_id, self.local_listeners, low, high, self.cluster_id
            ),
        )
        return True

    def _poll_unattached(self, state: UnattachedState, now: int, may_elect: bool) -> int:
        """Kafka's ``pollUnattached``: a voter stands for election when its election timeout passes; an
        observer fetches from a random voter to discover the leader."""
        if self.quorum.is_voter():
            if now >= state.election_deadline_ms and may_elect:
                self._transition_to_prospective()
                return 0
            return max(0, state.election_deadline_ms - now)
        self._maybe_send_fetch(self._random_voter(), now)  # observer: discover the leader
        return self._next_retry_ms(now)

    def _poll_resigned(self, state: ResignedState, now: int, may_elect: bool) -> int:
        """Kafka's ``pollResigned``: stand again when the election timeout passes, else send
        EndQuorumEpoch to the voters that have not acknowledged the resignation."""
        if now >= state.election_deadline_ms and may_elect:
            self._transition_to_prospective()
            return 0
        if now >= state.election_deadline_ms and not self.quorum.is_voter() and not self._shutting_down:
            # removed from the voter set (KIP-853): an observer from now on, in an epoch the voters will reach
            self._transition(lambda: self.quorum.transition_to_unattached(state.epoch + 1))
            return 0
        end_epoch = EndQuorumEpochRequestData(self.node_id, state.epoch, state.preferred_successors, self.cluster_id)
        for voter in sorted(state.unacknowledged):
            if self._can_send(voter, now):
                self._send_request(voter, end_epoch)
        return min(max(0, state.election_deadline_ms - now), self._next_retry_ms(now))

    def _random_voter(self) -> int:
        """Where an observer looks for the leader: a bootstrap server (KIP-853), else a voter."""
        if self.bootstrap_servers:
            return self.random.choice(self.bootstrap_servers)
        return self.random.choice(sorted(self.quorum.voters))

    def _maybe_resign(self) -> None:
        with self._io_lock:
            epoch, self._resign_requested = self._resign_requested, None
        state = self.quorum.state
        if epoch is not None and isinstance(state, LeaderState) and state.epoch == epoch:
            self._resign(state)

    def _resign(self, leader: LeaderState) -> None:
        self._log.info("Resigning", epoch=leader.epoch)
        self._transition(self.quorum.transition_to_resigned)

    def _become_leader(self, candidate: CandidateState) -> None:
        start = self.log.end_offset()
        self._transition(lambda: self.quorum.transition_to_leader(start))
        leader = self.quorum.state
        assert isinstance(leader, LeaderState)
        if not self.quorum.is_only_voter():
            leader.start_check_quorum(self._now(), self.fetch_timeout_ms * 3 // 2)
        epoch = leader.epoch
        message = LeaderChangeMessage(self.node_id, tuple(sorted(leader.voters)), tuple(sorted(candidate.granted)))
        records = [LogRecord(control_key(LEADER_CHANGE), message.encode())]
        history = self.voter_history
        bootstrap = history.latest()
        if history.is_dynamic() and history.latest_offset() == -1 and bootstrap is not None:
            # KIP-853: the voter set came from the bootstrap snapshot; write it into the log with the epoch start
            records.append(LogRecord(control_key(KRAFT_VERSION), KRaftVersionRecord(history.kraft_version).encode()))
            records.append(LogRecord(control_key(KRAFT_VOTERS), bootstrap.to_record().encode()))
        self.log.append_as_leader(records, epoch, control=True, append_time_ms=self.time.milliseconds())
        self._after_append(self.log.read(start))
        acc = BatchAccumulator(epoch, start + len(records), self.append_linger_ms, self.time, self.wakeup)
        with self._state_lock:
            self._accumulator = acc
        self._flush_and_update_hw(leader)
        self._log.info(
            "Completed transition to Leader", epoch=epoch, epoch_start_offset=start, high_watermark=self._high_watermark
        )

    def _drain_appends(self, force: bool) -> None:
        acc = self._accumulator
        state = self.quorum.state
        if acc is None or not isinstance(state, LeaderState):
            return
        batches = acc.drain(force=force)
        if not batches:
            return
        now = self.time.milliseconds()
        for records, control in batches:
            start = self.log.end_offset()
            self.log.append_as_leader(records, state.epoch, control=control, append_time_ms=now)
            if control:
                self._after_append(self.log.read(start))
        if self.metrics is not None:
            self.metrics.update_append_records(sum(len(records) for records, control in batches if not control))
            self._uncommitted.append((self.log.end_offset(), now))
        self._flush_and_update_hw(state)

    def _flush_and_update_hw(self, leader: LeaderState) -> None:
        self.log.flush()
        if leader.update_local_end_offset(self.log.end_offset()):
            assert leader.high_watermark is not None
            self._set_high_watermark(leader.high_watermark)

    def _set_high_watermark(self, hw: int) -> None:
        """The high watermark only moves forward."""
        if self._high_watermark is not None and hw <= self._high_watermark:
            return
        self.log.update_high_watermark(hw)
        with self._state_lock:
            self._high_watermark = hw
        if self._uncommitted and self.metrics is not None:  # Kafka's commit latency: append to commit
            now = self.time.milliseconds()
            while self._uncommitted and self._uncommitted[0][0] <= hw:
                self.metrics.update_commit_latency(max(0, now - self._uncommitted.pop(0)[1]))

    # ---- the voter set (KIP-853) --------------------------------------------------------------
    def _load_voter_history(self) -> None:
        """Rebuild the voter sets from the snapshot the log starts at and the log after it (start-up, or a
        follower that installed a snapshot), then use the latest."""
        history = self.voter_history
        entries: list[tuple[int, VoterSet | int]] = []
        raw = self.log.latest_snapshot()
        if raw is not None:
            try:
                control = RecordsSnapshotReader(raw, self.serde).control_batches
            except CorruptSnapshotError:
                control = []
            end = raw.snapshot_id.end_offset
            for _, entry in scan_control_batches(control):
                entries.append((end - 1, entry))
        history.reset(entries)
        history.add_batches(b for b in self.log.read(self.log.start_offset()) if b.control)
        self._apply_voters()

    def _after_append(self, batches: Sequence[LogBatch]) -> None:
        if self.voter_history.add_batches(b for b in batches if b.control):
            self._apply_voters()

    def _apply_voters(self) -> None:
        """Use the latest voter set (QuorumState, and the leader's replica states and high watermark)."""
        latest = self.voter_history.latest()
        q = self.quorum
        q.dynamic = self.voter_history.is_dynamic()
        ids = latest.ids() if latest is not None else frozenset()
        if ids == q.voters:
            return
        self._log.info("Voter set changed", old=sorted(q.voters), new=sorted(ids))
        moved = q.update_voters(ids)
        state = q.state
        if isinstance(state, LeaderState):
            if state.check_quorum_timeout_ms == 0 and not q.is_only_voter():
                state.start_check_quorum(self._now(), self.fetch_timeout_ms * 3 // 2)
            if moved and state.high_watermark is not None:
                self._set_high_watermark(state.high_watermark)

    def _poll_voter_changes(self, now: int) -> None:
        """The leader's AddRaftVoter / RemoveRaftVoter handling (Kafka's ``AddVoterHandler`` /
        ``RemoveVoterHandler``): complete the change in progress once committed, then start queued ones."""
        with self._io_lock:
            queued, self._voter_requests = self._voter_requests, []
        state = self.quorum.state
        change = self._voter_change
        if change is not None:
            hw = self._high_watermark
            if not isinstance(state, LeaderState) or state.epoch != change.epoch:
                self._complete_change(change, NOT_LEADER_OR_FOLLOWER, None)
            elif hw is not None and hw > change.offset:
                self._complete_change(change, NONE, None)
                if self.node_id not in self.quorum.voters:
                    self._log.info("This leader was removed from the voter set; resigning", epoch=state.epoch)
                    self._resign(state)
                    for pending in queued:
                        pending.future.set_result((NOT_LEADER_OR_FOLLOWER, None))
                    return
            elif now >= change.deadline_ms:
                self._complete_change(
                    change, REQUEST_TIMED_OUT, "Request timed out waiting for the voter change to commit"
                )
        for change in queued:
            change.deadline_ms = now + change.timeout_ms
            error, message = self._start_voter_change(change)
            if error != NONE:
                change.future.set_result((error, message))

    def _complete_change(self, change: _VoterChange, error: int, message: str | None) -> None:
        self._voter_change = None
        self._log.info("Voter change done", add=change.add, remove=change.remove, error=error)
        change.future.set_result((error, message))

    def _start_voter_change(self, change: _VoterChange) -> tuple[int, str | None]:
        state = self.quorum.state
        history = self.voter_history
        if not isinstance(state, LeaderState) or self._accumulator is None:
            return NOT_LEADER_OR_FOLLOWER, None
        if history.kraft_version < 1:
            return UNSUPPORTED_VERSION, (
                "Cluster doesn't support changing the voter set because the kraft.version feature is "
                f"{history.kraft_version}"
            )
        if self._voter_change is not None:
            return REQUEST_TIMED_OUT, "Request timed out waiting for leader to handle previous voter change request"
        hw = self._high_watermark
        if state.high_watermark is None or hw is None:
            return REQUEST_TIMED_OUT, (
                "Request timed out waiting for leader to establish HWM and fence previous voter changes"
            )
        latest_offset = history.latest_offset()
        if latest_offset is not None and latest_offset >= hw:
            return REQUEST_TIMED_OUT, "Request timed out waiting for voters to commit the latest voter change"
        voters = history.latest()
        assert voters is not None
        if change.add is not None:
            new_voter = change.add
            if new_voter.voter_id in voters.voters:
                return DUPLICATE_VOTER, (
                    f"The voter id for ReplicaKey(id={new_voter.voter_id}, directoryId={new_voter.directory_id}) "
                    f"is already part of the set of voters {sorted(voters.ids())}."
                )
            replica = state.observer_states.get(new_voter.voter_id)
            wall = self.time.milliseconds()
            if replica is None or replica.directory_id != new_voter.directory_id:  # another replica of that id
                return REQUEST_TIMED_OUT, (
                    f"Aborted add voter operation for ReplicaKey(id={new_voter.voter_id}, "
                    f"directoryId={new_voter.directory_id}) since it is lagging behind"
                )
            if replica.last_caught_up_timestamp < wall - self.fetch_timeout_ms:
                return REQUEST_TIMED_OUT, (
                    f"Request timed out waiting for the new voter {new_voter.voter_id} to catch up with the leader"
                )
            new_set = voters.add(new_voter)
        else:
            assert change.remove is not None
            voter_id, directory_id = change.remove
            new_set = voters.remove(voter_id, directory_id)
            if new_set is None:
                return VOTER_NOT_FOUND, (
                    f"Cannot remove voter ReplicaKey(id={voter_id}, directoryId={directory_id}) from the set of "
                    f"voters {sorted(voters.ids())}"
                )
        assert new_set is not None
        record = LogRecord(control_key(KRAFT_VOTERS), new_set.to_record().encode())
        try:
            change.offset = self._accumulator.append_control([record])
        except NotLeaderError:
            return NOT_LEADER_OR_FOLLOWER, None
        change.epoch = state.epoch
        self._voter_change = change
        self._log.info("Appending a new voter set", voters=sorted(new_set.ids()), offset=change.offset)
        self._drain_appends(force=True)
        return NONE, None

    # ---- outbound requests -------------------------------------------------------------------
    def _can_send(self, destination: int, now: int) -> bool:
        return destination not in self._in_flight and self._backoff_until.get(destination, 0) <= now

    def _next_retry_ms(self, now: int) -> int:
        deadlines = [r.deadline_ms for r in self._in_flight.values()] + list(self._backoff_until.values())
        future = [d - now for d in deadlines if d > now]
        return min(future, default=MAX_POLL_WAIT_MS)

    def _send_request(self, destination: int, data: RequestData) -> None:
        now = self._now()
        self._next_correlation_id += 1
        cid = self._next_correlation_id
        self._in_flight[destination] = _InFlight(cid, data, now + self.request_timeout_ms)
        with self._io_lock:
            self._outbound.append(RaftRequest(cid, self.node_id, destination, data, now))

    def _send_response(self, request: RaftRequest, data: ResponseData) -> None:
        with self._io_lock:
            self._outbound.append(RaftResponse(request.correlation_id, self.node_id, request.source_id, data))

    def _expire_requests(self, now: int) -> None:
        for destination, request in list(self._in_flight.items()):
            if now >= request.deadline_ms:
                del self._in_flight[destination]
                self._backoff_until[destination] = now + self.retry_backoff_ms

    def _maybe_send_fetch(self, destination: int, now: int) -> None:
        if destination == self.node_id or not self._can_send(destination, now):
            return
        self._send_request(
            destination,
            FetchRequestData(
                self.node_id,
                self.quorum.epoch,
                self.log.end_offset(),
                self.log.last_fetched_epoch(),
                self.fetch_max_wait_ms,
                cluster_id=self.cluster_id,
                replica_directory_id=self.directory_id,
                high_watermark=-1 if self._high_watermark is None else self._high_watermark,
            ),
        )

    def _maybe_send_fetch_snapshot(self, destination: int, now: int) -> None:
        if destination == self.node_id or not self._can_send(destination, now):
            return
        request = self._snapshot_fetch.request(
            self.node_id, self.quorum.epoch, self.fetch_snapshot_max_bytes, self.cluster_id
        )
        if request is not None:
            self._send_request(destination, request)

    # ---- inbound -----------------------------------------------------------------------------
    def _handle_inbound(self) -> None:
        with self._io_lock:
            messages, self._inbound = self._inbound, []
        for message in messages:
            if message.destination_id != self.node_id:
                continue
            if isinstance(message, RaftRequest):
                self._handle_request(message)
            else:
                self._handle_response(message)

    def _handle_request(self, request: RaftRequest) -> None:
        data = request.data
        response: ResponseData | None
        if self.cluster_id is not None and data.cluster_id is not None and data.cluster_id != self.cluster_id:
            response = error_response(data, INCONSISTENT_CLUSTER_ID, self.quorum.leader_id, self.quorum.epoch)
        elif isinstance(data, VoteRequestData):
            response = self._handle_vote_request(data)
        elif isinstance(data, BeginQuorumEpochRequestData):
            response = self._handle_begin_quorum_epoch_request(data)
        elif isinstance(data, EndQuorumEpochRequestData):
            response = self._handle_end_quorum_epoch_request(data)
        elif isinstance(data, FetchRequestData):
            response = self._leader_fetch.handle_fetch_request(request, data)
        elif isinstance(data, UpdateRaftVoterRequestData):
            response = self._handle_update_voter_request(data)
        else:
            response = self._leader_fetch.handle_fetch_snapshot_request(data)
        if response is not None:
            self._send_response(request, response)

    def _handle_vote_request(self, data: VoteRequestData) -> VoteResponseData:
        q = self.quorum
        if not q.dynamic and (not q.is_voter() or data.candidate_id not in q.voters):
            return VoteResponseData(INCONSISTENT_VOTER_SET, q.leader_id, q.epoch, False)
        if data.candidate_epoch < q.epoch:
            return VoteResponseData(FENCED_LEADER_EPOCH, q.leader_id, q.epoch, False)
        if data.pre_vote:  # KIP-996: answer without changing any state (no epoch, no vote)
            log_ok = (data.last_offset_epoch, data.last_offset) >= (
                self.log.last_fetched_epoch(),
                self.log.end_offset(),
            )
            granted = log_ok and q.state.can_grant_pre_vote(self._now())
            self._log.debug("Pre-vote", candidate=data.candidate_id, epoch=data.candidate_epoch, granted=granted)
            return VoteResponseData(NONE, q.leader_id, q.epoch, granted)
        if data.candidate_epoch > q.epoch:
            self._transition(lambda: q.transition_to_unattached(data.candidate_epoch))
        state = q.state
        log_ok = (data.last_offset_epoch, data.last_offset) >= (self.log.last_fetched_epoch(), self.log.end_offset())
        granted = state.can_grant_vote(data.candidate_id) and log_ok
        if granted and isinstance(state, UnattachedState | ProspectiveState) and state.voted_id == NO_ID:
            self._transition(lambda: q.transition_to_unattached_voted(data.candidate_epoch, data.candidate_id))
        self._log.debug("Vote request", candidate=data.candidate_id, epoch=data.candidate_epoch, granted=granted)
        return VoteResponseData(NONE, q.leader_id, q.epoch, granted)

    def _handle_begin_quorum_epoch_request(self, data: BeginQuorumEpochRequestData) -> BeginQuorumEpochResponseData:
        q = self.quorum
        if data.leader_id not in q.voters and not q.dynamic:
            return BeginQuorumEpochResponseData(INCONSISTENT_VOTER_SET, q.leader_id, q.epoch)
        if data.leader_epoch < q.epoch:
            return BeginQuorumEpochResponseData(FENCED_LEADER_EPOCH, q.leader_id, q.epoch)
        self._maybe_transition(data.leader_id, data.leader_epoch)
        return BeginQuorumEpochResponseData(NONE, q.leader_id, q.epoch)

    def _handle_end_quorum_epoch_request(self, data: EndQuorumEpochRequestData) -> EndQuorumEpochResponseData:
        q = self.quorum
        if data.leader_id not in q.voters and not q.dynamic:
            return EndQuorumEpochResponseData(INCONSISTENT_VOTER_SET, q.leader_id, q.epoch)
        if data.leader_epoch < q.epoch:
            return EndQuorumEpochResponseData(FENCED_LEADER_EPOCH, q.leader_id, q.epoch)
        self._maybe_transition(data.leader_id, data.leader_epoch)
        state = q.state
        if isinstance(state, FollowerState) and state.leader == data.leader_id and q.is_voter():
            state.override_fetch_timeout(self._now(), self._end_epoch_backoff_ms(data.preferred_successors))
        return EndQuorumEpochResponseData(NONE, q.leader_id, q.epoch)

    def _handle_update_voter_request(self, data: UpdateRaftVoterRequestData) -> UpdateRaftVoterResponseData:
        q = self.quorum
        state = q.state
        leading = isinstance(state, LeaderState) and self._accumulator is not None
        hw = self._high_watermark if isinstance(state, LeaderState) and state.high_watermark is not None else None
        default_listener = self.local_listeners[0].name if self.local_listeners else None
        error, new_set = update_voter(
            data, leading, q.epoch, hw, self._voter_change is not None, self.voter_history, default_listener
        )
        if error == NONE and new_set is not None and self._accumulator is not None:
            record = LogRecord(control_key(KRAFT_VOTERS), new_set.to_record().encode())
            try:
                offset = self._accumulator.append_control([record])
            except NotLeaderError:
                error = NOT_LEADER_OR_FOLLOWER
            else:
                self._log.info("Updating a voter", voter=data.voter_id, listeners=data.listeners, offset=offset)
                self._drain_appends(force=True)
        return UpdateRaftVoterResponseData(error, q.leader_id, q.epoch)

    # ---- responses ---------------------------------------------------------------------------
    def _handle_response(self, response: RaftResponse) -> None:
        pending = self._in_flight.get(response.source_id)
        if pending is None or pending.correlation_id != response.correlation_id:
            return  # late, duplicated or from an older state
        del self._in_flight[response.source_id]
        data = response.data
        if data.api_key != pending.data.api_key:
            return
        source = response.source_id
        if isinstance(data, VoteResponseData):
            self._handle_vote_response(source, data)
        elif isinstance(data, BeginQuorumEpochResponseData):
            if not self._handle_epoch_info(source, data.error_code, data.leader_id, data.leader_epoch):
                state = self.quorum.state
                if isinstance(state, LeaderState) and data.leader_epoch == state.epoch:
                    state.add_acknowledgement(source)
        elif isinstance(data, EndQuorumEpochResponseData):
            if not self._handle_epoch_info(source, data.error_code, data.leader_id, data.leader_epoch):
                state = self.quorum.state
                if isinstance(state, ResignedState) and data.leader_epoch == state.epoch:
                    state.unacknowledged.discard(source)
        elif isinstance(data, FetchResponseData):
            request = pending.data
            assert isinstance(request, FetchRequestData)
            self._handle_fetch_response(source, request, data)
        elif isinstance(data, FetchSnapshotResponseData):
            self._handle_fetch_snapshot_response(source, data)
        elif isinstance(data, UpdateRaftVoterResponseData):
            self._handle_epoch_info(source, data.error_code, data.leader_id, data.leader_epoch)

    def _handle_epoch_info(self, source: int, error: int, leader_id: int, epoch: int) -> bool:
        """Kafka's ``maybeHandleCommonResponse``: a newer epoch (or the leader of ours) moves us on;
        an error backs this destination off. True when the response needs no further handling."""
        q = self.quorum
        if epoch > q.epoch or (epoch == q.epoch and leader_id not in (NO_ID, self.node_id) and q.leader_id == NO_ID):
            self._maybe_transition(leader_id, epoch)
            return True
        if error != NONE:
            self._backoff_until[source] = self._now() + self.retry_backoff_ms
            return True
        return False

    def _handle_vote_response(self, source: int, data: VoteResponseData) -> None:
        q = self.quorum
        if data.leader_epoch > q.epoch:
            self._maybe_transition(data.leader_id, data.leader_epoch)
            return
        state = q.state
        if data.error_code == UNSUPPORTED_VERSION and isinstance(state, ProspectiveState):
            # a voter without Vote v2: the quorum cannot pre-vote, so stand at once (Kafka's fallback)
            self._log.warning("A voter does not support pre-vote; standing at once", voter=source, epoch=q.epoch)
            self._transition_to_candidate(skip_pre_vote=True)
            return
        if data.error_code != NONE:
            self._backoff_until[source] = self._now() + self.retry_backoff_ms
            return
        if isinstance(state, CandidateState | ProspectiveState) and data.leader_epoch == state.epoch:
            if data.vote_granted:
                state.record_granted_vote(source)
            else:
                state.record_rejected_vote(source)
            learnt_leader = data.leader_id not in (NO_ID, self.node_id)
            if isinstance(state, ProspectiveState) and state.leader == NO_ID and learnt_leader:
                self._maybe_transition(data.leader_id, data.leader_epoch)  # a leader we did not know of
        elif data.leader_epoch == q.epoch and data.leader_id not in (NO_ID, self.node_id):
            self._maybe_transition(data.leader_id, data.leader_epoch)

    def _handle_fetch_response(self, source: int, request: FetchRequestData, data: FetchResponseData) -> None:
        leader_id, epoch = data.current_leader
        if self._handle_epoch_info(source, data.error_code, leader_id, epoch) and data.error_code != NONE:
            return
        state = self.quorum.state
        if data.error_code != NONE or not (
            isinstance(state, FollowerState) and state.leader == source and epoch == state.epoch
        ):
            return
        if request.fetch_offset != self.log.end_offset():
            return  # the log moved since the request was sent
        state.record_successful_fetch(self._now(), self.fetch_timeout_ms)
        if data.diverging_epoch is not None:
            self._truncate_to_end_offset(data.diverging_epoch)
            return
        if data.snapshot_id is not None:
            self._snapshot_fetch.start(state, data.snapshot_id)
            return
        if data.records:
            if data.records[0].base_offset != self.log.end_offset():
                return
            self.log.append_as_follower(list(data.records))
            self.log.flush()
            self._after_append(data.records)
            if self.metrics is not None:
                self.metrics.update_fetched_records(sum(len(b.records) for b in data.records))
        if data.high_watermark >= 0:
            hw = min(data.high_watermark, self.log.end_offset())
            state.update_high_watermark(hw)
            self._set_high_watermark(hw)

    def _handle_fetch_snapshot_response(self, source: int, data: FetchSnapshotResponseData) -> None:
        """Kafka's ``handleFetchSnapshotResponse``: the epoch news, then the chunk (FollowerSnapshotFetch)
        when it comes from the current leader in its epoch."""
        leader_id, epoch = data.current_leader
        handled = self._handle_epoch_info(source, data.error_code, leader_id, epoch)
        state = self.quorum.state
        if not self._snapshot_fetch.in_progress or not (
            isinstance(state, FollowerState) and state.leader == source and epoch == state.epoch
        ):
            return
        before = self.log.latest_snapshot_id()
        if self._snapshot_fetch.handle_response(state, data, handled):
            state.record_successful_fetch(self._now(), self.fetch_timeout_ms)
        if self.log.latest_snapshot_id() != before:
            self._load_voter_history()  # installed a snapshot: its voter set, and nothing after it

    def _abandon_snapshot_fetch(self) -> None:
        self._snapshot_fetch.abandon()

    def _truncate_to_end_offset(self, diverging: EpochEndOffset) -> None:
        """Kafka's ``truncateToEndOffset``: cut the log back to where it agrees with the leader."""
        if diverging.epoch == 0:
            offset = min(diverging.end_offset, self.log.end_offset())
        else:
            local = self.log.end_offset_for_epoch(diverging.epoch)
            offset = min(local.offset, diverging.end_offset) if local.epoch == diverging.epoch else local.offset
        hw = self._high_watermark
        if hw is not None and offset < hw:
            raise RaftInvariantError(f"Node {self.node_id}: truncation to {offset} below the high watermark {hw}")
        self._log.info("Truncating to the leader's log", offset=offset, diverging=diverging)
        self.log.truncate_to(offset)
        self.voter_history.truncate_new_entries(offset)
        self._apply_voters()

    def _poll_listeners(self) -> None:
        state = self.quorum.state
        epoch_start = state.epoch_start_offset if isinstance(state, LeaderState) else None
        self._listeners.poll(self._high_watermark, self._leader_and_epoch, epoch_start)

    # ---- shutdown ----------------------------------------------------------------------------
    def begin_shutdown(self) -> None:
        """Stop electing; the next poll writes what is queued. Safe from any thread."""
        self._shutting_down = True
        self.wakeup()

    def close(self) -> None:
        """On the IO thread (or after it stopped): flush queued appends, deliver commits, tell the
        listeners, drop leadership in memory. The log itself is closed by its owner. A leader of several
        voters resigns and queues EndQuorumEpoch (best effort: the owner sends ``drain_outbound()``)."""
        self._shutting_down = True
        state = self.quorum.state
        if self._initialized and isinstance(state, LeaderState):
            self._drain_appends(force=True)
            self._poll_listeners()
            if not self.quorum.is_only_voter():
                self._resign(state)
                self._poll_state()
        with self._state_lock:
            acc, self._accumulator = self._accumulator, None
        if acc is not None:
            dropped = acc.close()
            if dropped:
                self._log.warning("Dropped queued records at shutdown", records=dropped)
        with self._io_lock:
            queued, self._voter_requests = self._voter_requests, []
        if self._voter_change is not None:
            queued.append(self._voter_change)
            self._voter_change = None
        for change in queued:  # Kafka: pending voter changes fail when the client shuts down
            if not change.future.done():
                change.future.set_result((NOT_LEADER_OR_FOLLOWER, None))
        self._listeners.begin_shutdown()
        self.log.flush()
