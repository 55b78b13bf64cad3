"""KafkaRaftClient: the Raft replica of the ``__cluster_metadata`` partition (Kafka's ``KafkaRaftClient``).

Theory of operation. ``poll_once()`` is the whole client: it drives the epoch state machine
(:class:`~pykbroker.raft.quorum_state.QuorumState`), moves appended records from the
:class:`~pykbroker.raft.batch_accumulator.BatchAccumulator` into the :class:`ReplicatedLog`, advances the
high watermark, and delivers committed batches and leader changes to the registered listeners. It does no
waiting; ``poll()`` adds the wait (on a condition woken by appends, registrations and shutdown). The
:class:`~pykbroker.raft.kafka_raft_client_driver.KafkaRaftClientDriver` thread calls ``poll()`` in a loop.

Single voter (the only mode implemented): on start the node's stored election state is loaded (a node
that led the stored epoch comes back Resigned), it becomes Candidate in ``epoch + 1`` (persisted), has its
own vote and so becomes Leader at once, appends a LeaderChange control batch at the epoch start offset,
flushes, and the high watermark - the majority end offset, here its own - moves past it; everything in the
log is then committed and replayed to listeners from offset 0.

TODO(multi-voter): Vote / BeginQuorumEpoch / EndQuorumEpoch / Fetch handling, election and fetch
timeouts, observers. The states, the transition table and ``LeaderState.update_replica_end_offset`` are
ready for it; the constructor refuses configurations that need it.

Threading: the IO thread owns the quorum state, the log and listener delivery. ``prepare_append``,
``schedule_prepared_append``, ``schedule_append``, ``register``, ``unregister``, ``leader_and_epoch``,
``high_watermark``, ``log_end_offset``, ``wakeup`` and ``begin_shutdown`` are safe from any thread.
"""

from __future__ import annotations

import random as _random
import threading
from collections.abc import Sequence
from typing import Generic, TypeVar

from pykbroker.raft.batch_accumulator import BatchAccumulator, NotLeaderError
from pykbroker.raft.control_records import LEADER_CHANGE, LeaderChangeMessage, control_key, parse_control_type
from pykbroker.raft.epoch_state import LeaderState, StateKind
from pykbroker.raft.quorum_state import QuorumState
from pykbroker.raft.quorum_state_store import NO_ID, QuorumStateStore
from pykbroker.raft.raft_client import UNKNOWN_LEADER, Batch, LeaderAndEpoch, RaftClientListener, RecordSerde
from pykbroker.raft.replicated_log import LogBatch, LogRecord, ReplicatedLog
from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import SYSTEM, Time

T = TypeVar("T")

MAX_POLL_WAIT_MS = 500


class _ListenerContext:
    """Delivery cursor of one registered listener. IO thread only."""

    __slots__ = ("listener", "next_offset", "last_fired")

    def __init__(self, listener: RaftClientListener):
        self.listener = listener
        self.next_offset = 0
        self.last_fired: LeaderAndEpoch | None = None


class KafkaRaftClient(Generic[T]):
    """See the module docstring. Offsets are Kafka offsets; times are ms of the injected ``time``."""

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
    ):
        self.node_id = node_id
        self.log = log
        self.serde = serde
        self.time = time
        self.append_linger_ms = append_linger_ms
        self.quorum = QuorumState(
            node_id, frozenset(voters), store, time, election_timeout_ms, fetch_timeout_ms, random
        )
        if not self.quorum.is_only_voter():
            raise NotImplementedError(
                f"KafkaRaftClient supports a single voter that is the local node (node {node_id}, voters "
                f"{sorted(voters)}); Vote/Fetch RPCs for more voters and observers are not implemented yet"
            )
        self._log = get_logger("RaftManager", id=node_id)
        self._cond = threading.Condition()
        self._woken = False  # guarded by _cond
        self._state_lock = threading.Lock()  # guards _accumulator, _leader_and_epoch, _high_watermark
        self._accumulator: BatchAccumulator | None = None
        self._leader_and_epoch: LeaderAndEpoch = UNKNOWN_LEADER
        self._high_watermark: int | None = None
        self._reg_lock = threading.Lock()
        self._pending_registrations: list[tuple[bool, RaftClientListener]] = []  # (register?, listener)
        self._contexts: list[_ListenerContext] = []
        self._shutting_down = False
        self._initialized = False

    # ---- thread-safe API ---------------------------------------------------------------------
    def register(self, listener: RaftClientListener[T]) -> None:
        """Start delivering to ``listener`` from offset 0 on the next poll."""
        with self._reg_lock:
            self._pending_registrations.append((True, listener))
        self.wakeup()

    def unregister(self, listener: RaftClientListener[T]) -> None:
        with self._reg_lock:
            self._pending_registrations.append((False, listener))
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

    def wakeup(self) -> None:
        with self._cond:
            self._woken = True
            self._cond.notify_all()

    # ---- IO thread ---------------------------------------------------------------------------
    def initialize(self) -> None:
        """Load the election state and the log position (call before the first poll)."""
        self.quorum.initialize(self.log.last_fetched_epoch())
        self._initialized = True
        self._log.info("Initialized quorum state", state=repr(self.quorum.state), log_end_offset=self.log.end_offset())

    def poll(self) -> None:
        """One ``poll_once`` and then wait until the next deadline or a wakeup."""
        wait_ms = self.poll_once()
        with self._cond:
            if not self._woken and wait_ms > 0:
                self._cond.wait(wait_ms / 1000.0)
            self._woken = False

    def poll_once(self) -> int:
        """Do all due work without waiting; returns ms until something is next due."""
        if not self._initialized:
            self.initialize()
        self._apply_registrations()
        self._advance_election()
        if self.quorum.is_leader():
            self._drain_appends(force=self._shutting_down)
        self._poll_listeners()
        acc = self._accumulator
        due = acc.time_until_drain_ms() if acc is not None else None
        return MAX_POLL_WAIT_MS if due is None else min(due, MAX_POLL_WAIT_MS)

    def _apply_registrations(self) -> None:
        with self._reg_lock:
            pending, self._pending_registrations = self._pending_registrations, []
        for register, listener in pending:
            if register:
                self._contexts.append(_ListenerContext(listener))
            else:
                self._contexts = [c for c in self._contexts if c.listener is not listener]

    def _advance_election(self) -> None:
        kind = self.quorum.kind
        if self._shutting_down:
            return
        if kind in (StateKind.UNATTACHED, StateKind.RESIGNED, StateKind.FOLLOWER) and self.quorum.is_only_voter():
            self.quorum.transition_to_candidate()
            self._log.info("Transitioned to Candidate", epoch=self.quorum.epoch)
            kind = self.quorum.kind
        if kind is StateKind.CANDIDATE and self.quorum.state.is_vote_granted():  # type: ignore[union-attr]
            self._become_leader()

    def _become_leader(self) -> None:
        start = self.log.end_offset()
        leader = self.quorum.transition_to_leader(start)
        epoch = leader.epoch
        message = LeaderChangeMessage(self.node_id, tuple(sorted(leader.voters)), (self.node_id,))
        self.log.append_as_leader(
            [LogRecord(control_key(LEADER_CHANGE), message.encode())],
            epoch,
            control=True,
            append_time_ms=self.time.milliseconds(),
        )
        acc = BatchAccumulator(epoch, start + 1, self.append_linger_ms, self.time, self.wakeup)
        with self._state_lock:
            self._accumulator = acc
            self._leader_and_epoch = LeaderAndEpoch(self.node_id, epoch)
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
        for records in batches:
            self.log.append_as_leader(records, state.epoch, control=False, append_time_ms=now)
        self._flush_and_update_hw(state)

    def _flush_and_update_hw(self, leader: LeaderState) -> None:
        self.log.flush()
        if leader.update_local_end_offset(self.log.end_offset()):
            assert leader.high_watermark is not None
            self.log.update_high_watermark(leader.high_watermark)
            with self._state_lock:
                self._high_watermark = leader.high_watermark

    def _poll_listeners(self) -> None:
        hw = self._high_watermark
        decoded: dict[int, Batch[T]] = {}
        for ctx in list(self._contexts):
            if hw is not None and ctx.next_offset < hw:
                for log_batch in self.log.read(ctx.next_offset, hw):
                    batch = decoded.get(log_batch.base_offset)
                    if batch is None:
                        batch = decoded[log_batch.base_offset] = self._to_batch(log_batch)
                    self._call(ctx.listener.handle_commit, batch)
                    ctx.next_offset = log_batch.next_offset
            self._maybe_fire_leader_change(ctx)

    def _maybe_fire_leader_change(self, ctx: _ListenerContext) -> None:
        current = self._leader_and_epoch
        if ctx.last_fired == current or current.epoch == 0 and current.leader_id == NO_ID:
            return
        state = self.quorum.state
        if (
            current.is_leader(self.node_id)
            and isinstance(state, LeaderState)
            and ctx.next_offset < state.epoch_start_offset
        ):
            return  # the listener must see everything before our epoch before it may act as leader
        ctx.last_fired = current
        self._call(ctx.listener.handle_leader_change, current)

    def _to_batch(self, log_batch: LogBatch) -> Batch[T]:
        size = sum(len(r.value or b"") for r in log_batch.records)
        if log_batch.control:
            control = [(parse_control_type(r.key), r.value or b"") for r in log_batch.records]
            return Batch(
                log_batch.base_offset,
                log_batch.epoch,
                log_batch.last_offset,
                [],
                control,
                log_batch.append_time_ms,
                size,
            )
        records = [self.serde.read(r.value or b"") for r in log_batch.records]
        return Batch(
            log_batch.base_offset, log_batch.epoch, log_batch.last_offset, records, [], log_batch.append_time_ms, size
        )

    def _call(self, fn, arg) -> None:
        try:
            fn(arg)
        except Exception:  # noqa: BLE001 - a listener must not stop the IO thread
            self._log.exception("Listener callback failed", callback=getattr(fn, "__qualname__", fn))

    # ---- shutdown ----------------------------------------------------------------------------
    def begin_shutdown(self) -> None:
        """Stop electing; the next poll writes what is queued. Safe from any thread."""
        self._shutting_down = True
        self.wakeup()

    def close(self) -> None:
        """On the IO thread (or after it stopped): flush queued appends, deliver commits, tell the
        listeners, drop leadership in memory. The log itself is closed by its owner."""
        self._shutting_down = True
        if self._initialized and self.quorum.is_leader():
            self._drain_appends(force=True)
            self._poll_listeners()
        with self._state_lock:
            acc, self._accumulator = self._accumulator, None
        if acc is not None:
            dropped = acc.close()
            if dropped:
                self._log.warning("Dropped queued records at shutdown", records=dropped)
        for ctx in self._contexts:
            self._call(lambda _, ctx=ctx: ctx.listener.begin_shutdown(), None)
        self.log.flush()
