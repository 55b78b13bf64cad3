"""Partition: one topic-partition hosted by this broker — its log, its leader/ISR state and, on the
leader, what it knows of each follower.

Mirrors ``kafka.cluster.Partition``:

* ``make_leader`` / ``make_follower`` apply a PartitionRegistration from the metadata log (a registration
  older than the partition epoch already known, e.g. from an AlterPartition response, is skipped).
  A new leader epoch starts at the leader's LEO in the leader-epoch cache and resets the followers'
  state (ISR members count as caught up now).
* Leader: ``append_records_to_leader`` validates (LogValidator) and appends under the log's lock;
  acks=-1 with fewer than ``min.insync.replicas`` in the (committed) ISR is refused before the append
  with NOT_ENOUGH_REPLICAS. Each follower Fetch updates that follower's :class:`Replica`
  (``update_follower_fetch_state``), which may move the high watermark and may add the follower to the
  ISR. HW = the smallest LEO over the leader and the replicas of the *maximal* ISR (the committed ISR
  plus a pending expansion; during a pending shrink the removed replica still counts) and over caught-up
  ISR-eligible replicas about to join, as Kafka's ``maybeIncrementLeaderHW``; a leader without followers
  moves it to its LEO after each append (``UnifiedLog.maybe_increment_high_watermark_to_end``, the same
  result). The LogValidator is kept per (config, leader epoch, origin) and validates every append.
* Broker epochs (KIP-903): each follower Fetch carries the follower's broker epoch, kept in its
  :class:`Replica`. A Fetch with an epoch older than the follower's live (unfenced) registration in the
  metadata is refused with NOT_LEADER_OR_FOLLOWER (Kafka's ``updateFetchStateOrThrow``). A follower is
  ISR-eligible only if it is not fenced, not in controlled shutdown, and its last Fetch's epoch is its
  registered one (-1, a Fetch without an epoch, skips that check), as Kafka's ``isReplicaIsrEligible``;
  so a restarted incarnation does not join under its predecessor's registration. The AlterPartition
  names each ISR member with the epoch of its last Fetch (the leader: its own; -1 if unknown), as
  Kafka's ``addBrokerEpochToIsr``, and the controller checks them (INELIGIBLE_REPLICA).
* ISR changes go to the controller as AlterPartition (``AlterPartitionManager``), one in flight per
  partition: expand when a follower reaches the HW and the current leader epoch's start offset; shrink
  (``maybe_shrink_isr``, called periodically) when a follower has not caught up for
  ``replica.lag.time.max.ms``. No change is proposed while one is pending, neither the partition's own
  (Kafka's PendingExpandIsr / PendingShrinkIsr) nor one the AlterPartitionManager still holds for this
  partition after the metadata log replaced the pending state (it would be refused with
  OPERATION_NOT_ATTEMPTED). The committed ISR changes only with the controller's answer (or the
  metadata log), never on the leader's word alone (KIP-497).
* Follower: ``append_records_as_follower`` keeps the leader's batches and offsets byte for byte; the
  follower's HW is the leader's, capped by its own LEO; ``truncate_to`` removes a divergent tail.
* ``check_enough_replicas_reach_offset`` is DelayedProduce's test: done once HW >= the offset, with
  NOT_ENOUGH_REPLICAS_AFTER_APPEND when the maximal ISR is then below ``min.insync.replicas``.

Idle fetch sessions (issue 31): a leader's fetch session may *park* a caught-up ISR follower on this partition
(``park_follower``): the session then skips the partition until ``notify_fetch_watchers`` marks it changed, which
happens whenever the log end offset, high watermark or log start offset may have moved (the UnifiedLog's
``change_listener``), on every leader/follower state change from the metadata, and when the partition stops being
served here (deleted, offline). See :mod:`pykbroker.server.replica` for how the parked follower's caught-up time
stays Kafka's.

Threading: ``_state_lock`` guards leader epoch, ISR, pending AlterPartition and the Replica states
(metadata publisher, request handler threads, the AlterPartition callback thread, the ISR-expiration
task). Log appends and reads are serialised by the UnifiedLog's own lock; the lock order is state lock
then log lock, never the reverse. ``AlterPartitionManager.is_pending`` takes the manager's lock under
the state lock; ``submit`` is called outside it, and the manager runs callbacks (which take the state
lock) outside its own lock. ``on_high_watermark_increment`` (set by the ReplicaManager) is
called outside the state lock when an AlterPartition answer moved the HW.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from pykbroker.log.fetch_data_info import FetchIsolation
from pykbroker.log.log_validator import LogValidator
from pykbroker.protocol import errors
from pykbroker.record.default_record_batch import CREATE_TIME, LOG_APPEND_TIME
from pykbroker.server.replica import Replica
from pykbroker.utils.logging import get_logger

_log = get_logger("Partition")

# AlterPartition errors after which the leader goes back to its committed ISR at once (Kafka's
# handleAlterPartitionError); for the others the metadata log brings the partition's new state.
_REVERT_ON = frozenset({errors.OPERATION_NOT_ATTEMPTED, errors.INELIGIBLE_REPLICA})


class PendingIsrChange:
    """An AlterPartition in flight: ``kind`` "expand" or "shrink", the proposed ISR as
    ``((broker id, broker epoch), ...)``, and the leader and partition epochs it was based on (Kafka's
    PendingExpandIsr / PendingShrinkIsr with its ``sentLeaderAndIsr``)."""

    __slots__ = ("kind", "new_isr_with_epochs", "leader_epoch", "partition_epoch")

    def __init__(
        self, kind: str, new_isr_with_epochs: tuple[tuple[int, int], ...], leader_epoch: int, partition_epoch: int
    ):
        self.kind = kind
        self.new_isr_with_epochs = new_isr_with_epochs
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch

    @property
    def new_isr(self) -> tuple[int, ...]:
        return tuple(b for b, _ in self.new_isr_with_epochs)


class IsrChangeListener:
    """Counts ISR changes (the ReplicaManager's IsrExpandsPerSec / IsrShrinksPerSec /
    FailedIsrUpdatesPerSec meters)."""

    def mark_expand(self) -> None:
        pass

    def mark_shrink(self) -> None:
        pass

    def mark_failed(self) -> None:
        pass


class Partition:
    """One hosted topic-partition. ``metadata_cache``: the broker's view of the brokers' registrations
    (``is_broker_fenced``, ``is_broker_shutting_down``, ``get_alive_broker_epoch``, as Kafka's
    KRaftMetadataCache); None makes every follower ISR-eligible and skips the broker epoch checks.
    ``local_broker_epoch()``: this broker's registered epoch (-1 before registration), sent for itself
    in AlterPartition."""

    def __init__(
        self,
        topic: str,
        partition: int,
        topic_id,
        log,
        local_broker_id: int,
        time,
        replica_lag_time_max_ms: int = 30000,
        alter_partition_manager=None,
        metadata_cache=None,
        isr_listener: IsrChangeListener | None = None,
        local_broker_epoch: Callable[[], int] | None = None,
    ):
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.log = log
        self.local_broker_id = local_broker_id
        self.time = time
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.alter_partition_manager = alter_partition_manager
        self.metadata_cache = metadata_cache
        self.local_broker_epoch = local_broker_epoch or (lambda: -1)
        self.isr_listener = isr_listener or IsrChangeListener()
        self.on_high_watermark_increment: Callable[[], None] = lambda: None
        self._state_lock = threading.Lock()
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.leader_epoch_start_offset = -1
        self.replicas: tuple[int, ...] = ()
        #: an ongoing reassignment's (KIP-455) replicas, from the registration
        self.adding_replicas: tuple[int, ...] = ()
        self.removing_replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.maximal_isr: tuple[int, ...] = ()
        self.pending_isr_change: PendingIsrChange | None = None
        self.remote_replicas: dict[int, Replica] = {}
        self.name = f"{topic}-{partition}"
        #: fetch sessions parked here: session id -> callable marking this partition changed in that session.
        #: Replaced (not mutated) by ``notify_fetch_watchers``; ``_watch_lock`` guards registration and the swap.
        self._fetch_watchers: dict[int, Callable[[], None]] = {}
        self._watch_lock = threading.Lock()
        #: (LogConfig, leader epoch, origin, a LogValidator's ``validate``) of leader appends: rebuilt when one of the
        #: three changes (the validator's settings are read only: appends on any thread share it)
        self._validator: tuple | None = None
        if log is not None and hasattr(log, "change_listener"):
            log.change_listener = self.notify_fetch_watchers

    # -- idle fetch sessions -------------------------------------------------------------------
    def notify_fetch_watchers(self) -> None:
        """This partition may have changed (offsets, leadership, being served here): every fetch session parked
        on it is told so (once; it must park again). Cheap when none is parked; takes only ``_watch_lock``."""
        if not self._fetch_watchers:
            return
        with self._watch_lock:
            watchers, self._fetch_watchers = self._fetch_watchers, {}
        for changed in watchers.values():
            changed()

    def park_follower(
        self,
        replica_id: int,
        fetch_offset: int,
        high_watermark: int,
        log_start_offset: int,
        clock,
        session_id: int,
        changed: Callable[[], None],
    ) -> bool:
        """Park follower ``replica_id``'s fetch session ``session_id`` on this partition, if the follower's fetch
        at ``fetch_offset`` (already recorded by ``update_follower_fetch_state``) was at this leader's LEO, it is
        in the committed ISR with no ISR change pending, and the session has just been sent ``high_watermark``
        and ``log_start_offset``, which are still current. Then the session may skip the partition until
        ``changed()`` is called, and the replica's fetch times follow ``clock`` (a
        :class:`~pykbroker.server.replica.FollowerFetchClock`). True if parked."""
        with self._state_lock:
            replica = self.remote_replicas.get(replica_id)
            if (
                replica is None
                or self.leader_id != self.local_broker_id
                or self.pending_isr_change is not None
                or replica_id not in self.isr
                or replica.log_end_offset != fetch_offset
            ):
                return False
            with self._watch_lock:  # registered before the checks below: a change after them notifies it
                self._fetch_watchers[session_id] = changed
            log = self.log
            if (
                log.log_end_offset != fetch_offset
                or log.high_watermark != high_watermark
                or log.log_start_offset != log_start_offset
            ):
                with self._watch_lock:
                    if self._fetch_watchers.get(session_id) is changed:
                        del self._fetch_watchers[session_id]
                return False
            replica.park(clock)
            return True

    def unpark_follower(self, replica_id: int) -> None:
        """Follower ``replica_id``'s fetch times stop following its session clock (see ``park_follower``)."""
        with self._state_lock:
            replica = self.remote_replicas.get(replica_id)
            if replica is not None:
                replica.unpark()

    # -- state from metadata -------------------------------------------------------------------
    def make_leader(self, registration) -> bool:
        """Become (or stay) leader per ``registration``; True if this is a new leadership or leader
        epoch (Kafka's ``makeLeader``). A registration with an older partition epoch is skipped."""
        with self._state_lock:
            if registration.partition_epoch < self.partition_epoch:
                _log.info(
                    f"Skipped the become-leader state change for {self.name} since it is already at partition "
                    f"epoch {self.partition_epoch} (registration has {registration.partition_epoch})"
                )
                return False
            new_leader = self.leader_id != self.local_broker_id
            new = new_leader or self.leader_epoch != registration.leader_epoch
            self.leader_id = self.local_broker_id
            self.leader_epoch = registration.leader_epoch
            self.partition_epoch = registration.partition_epoch
            self._update_assignment_and_isr(registration)
            if new:  # Kafka's maybeAssignEpochStartOffset: the new epoch starts at the current LEO
                leo = self.log.log_end_offset
                self.log.maybe_assign_epoch_start_offset(registration.leader_epoch, leo)
                self.leader_epoch_start_offset = leo
                now = self.time.milliseconds()
                for r in self.remote_replicas.values():
                    r.reset(now, leo, r.broker_id in self.isr, new_leader)
            hw_incremented = self._maybe_increment_leader_hw_locked()
        self.notify_fetch_watchers()
        if hw_incremented:
            self.on_high_watermark_increment()
        return new

    def make_follower(self, registration) -> bool:
        """Follow ``registration.leader``; True if the leader or leader epoch changed (the fetcher must
        then (re)start from a truncation). A registration with an older partition epoch is skipped."""
        with self._state_lock:
            if registration.partition_epoch < self.partition_epoch:
                _log.info(
                    f"Skipped the become-follower state change for {self.name} since it is already at partition "
                    f"epoch {self.partition_epoch} (registration has {registration.partition_epoch})"
                )
                return False
            new = self.leader_id != registration.leader or self.leader_epoch != registration.leader_epoch
            self.leader_id = registration.leader
            self.leader_epoch = registration.leader_epoch
            self.partition_epoch = registration.partition_epoch
            self.leader_epoch_start_offset = -1
            self._update_assignment_and_isr(registration)
            self.remote_replicas = {}
        self.notify_fetch_watchers()
        return new

    def _update_assignment_and_isr(self, registration) -> None:
        self.replicas = tuple(registration.replicas)
        self.adding_replicas = tuple(getattr(registration, "adding_replicas", ()))
        self.removing_replicas = tuple(getattr(registration, "removing_replicas", ()))
        self.isr = self.maximal_isr = tuple(registration.isr)
        self.pending_isr_change = None
        if self.leader_id == self.local_broker_id:
            old = self.remote_replicas
            self.remote_replicas = {b: old.get(b) or Replica(b) for b in self.replicas if b != self.local_broker_id}

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    # Kafka's Partition gauges, summed by the ReplicaManager's UnderReplicatedPartitions etc.
    @property
    def is_under_replicated(self) -> bool:
        # Kafka's assignmentState.replicationFactor: a reassignment's removing replicas do not count
        return self.is_leader and len(self.isr) < len(self.replicas) - len(self.removing_replicas)

    @property
    def is_reassigning(self) -> bool:
        """A leader whose partition has a reassignment in progress (Kafka's ``Partition.isReassigning``)."""
        return self.is_leader and bool(self.adding_replicas or self.removing_replicas)

    @property
    def is_under_min_isr(self) -> bool:
        return self.is_leader and len(self.isr) < self.log.config.min_insync_replicas

    @property
    def is_at_min_isr(self) -> bool:
        return self.is_leader and len(self.isr) == self.log.config.min_insync_replicas

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """Kafka's leader-epoch fencing for client requests: -1 means "not provided"."""
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise errors.FencedLeaderEpochError(
                f"The leader epoch in the request {current_leader_epoch} is older than {self.leader_epoch} for "
                f"{self.name}"
            )
        if current_leader_epoch > self.leader_epoch:
            raise errors.UnknownLeaderEpochError(
                f"The leader epoch in the request {current_leader_epoch} is newer than {self.leader_epoch} for "
                f"{self.name}"
            )

    def leader_log_or_raise(self, current_leader_epoch: int = -1):
        if not self.is_leader:
            raise errors.NotLeaderOrFollowerError(
                f"Leader not local for partition {self.name} on broker {self.local_broker_id}"
            )
        self.check_leader_epoch(current_leader_epoch)
        return self.log

    def local_log_or_raise(self, current_leader_epoch: int = -1, require_leader: bool = True):
        """Kafka's ``localLogWithEpochOrThrow``: the log to read, leader or not unless ``require_leader``
        (a consumer's Fetch v11+ may read a follower, KIP-392). Raises FencedLeaderEpochError /
        UnknownLeaderEpochError when ``current_leader_epoch`` (-1: not provided) is older / newer than this
        replica's, NotLeaderOrFollowerError when ``require_leader`` and this broker does not lead."""
        if require_leader:
            return self.leader_log_or_raise(current_leader_epoch)
        self.check_leader_epoch(current_leader_epoch)
        return self.log

    def in_sync_follower_states(self) -> list[tuple[int, int, int, int]]:
        """On the leader: ``[(broker id, log end offset, log start offset, last caught-up time ms)]`` of
        the followers in the ISR, as last seen from their fetches (Kafka's ``remoteReplicas`` state
        snapshots filtered by ``inSyncReplicaIds``, for the preferred read replica); [] on a follower."""
        with self._state_lock:
            if self.leader_id != self.local_broker_id:
                return []
            return [
                (r.broker_id, r.log_end_offset, r.log_start_offset, r.last_caught_up_time_ms)
                for r in self.remote_replicas.values()
                if r.broker_id in self.isr
            ]

    # -- appends -------------------------------------------------------------------------------
    def append_records_to_leader(self, records: memoryview, required_acks: int, origin=None, verification_guard=None):
        """Validate and append; returns ``(LogAppendInfo, hw_incremented)``.
        Raises NotLeaderOrFollowerError, NotEnoughReplicasError (acks=-1 below min ISR), or the
        validator's errors (CorruptRecordError, InvalidRecordError, RecordTooLargeError, ...).
        The high watermark then moves (``_maybe_increment_leader_hw_locked``); for a leader without
        followers (the HW is its LEO) directly (``UnifiedLog.maybe_increment_high_watermark_to_end``)."""
        with self._state_lock:
            if self.leader_id != self.local_broker_id:
                raise errors.NotLeaderOrFollowerError(
                    f"Leader not local for partition {self.name} on broker {self.local_broker_id}"
                )
            epoch = self.leader_epoch
            isr_size = len(self.isr)
        log = self.log
        config = log.config
        if required_acks == -1 and isr_size < config.min_insync_replicas:
            raise errors.NotEnoughReplicasError(
                f"The size of the current ISR {isr_size} is insufficient to satisfy the min.isr requirement "
                f"of {config.min_insync_replicas} for partition {self.name}"
            )
        cached = self._validator
        if cached is None or cached[0] is not config or cached[1] != epoch or cached[2] is not origin:
            validator = LogValidator(b"", self.name, self.time, **_validator_kwargs(config, epoch, origin))
            cached = self._validator = (config, epoch, origin, validator.validate)
        validate = cached[3]
        if origin is None and verification_guard is None:
            info = log.append_as_leader(records, epoch, validate)
        else:
            kwargs: dict = {"origin": origin} if origin is not None else {}
            if verification_guard is not None:
                kwargs["verification_guard"] = verification_guard
            info = log.append_as_leader(records, epoch, validate, **kwargs)
        if info.duplicate:
            return info, False
        with self._state_lock:
            if self.leader_id != self.local_broker_id:
                return info, False
            if not self.remote_replicas:  # _maybe_increment_leader_hw_locked's result without followers: the LEO
                return info, log.maybe_increment_high_watermark_to_end()
            return info, self._maybe_increment_leader_hw_locked()

    def _maybe_increment_leader_hw_locked(self) -> bool:
        if self.leader_id != self.local_broker_id:
            return False
        leo = self.log.log_end_offset
        new_hw = leo
        now = None
        for r in self.remote_replicas.values():
            if r.log_end_offset >= new_hw:
                continue
            if r.broker_id in self.maximal_isr:
                new_hw = r.log_end_offset
                continue
            if now is None:
                now = self.time.milliseconds()
            # Kafka's shouldWaitForReplicaToJoinIsr: a caught-up, eligible replica is about to join.
            if r.is_caught_up(leo, now, self.replica_lag_time_max_ms) and self._is_replica_isr_eligible(r):
                new_hw = r.log_end_offset
        if new_hw < 0:
            return False
        return self.log.maybe_increment_high_watermark(new_hw) is not None

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, int]:
        """DelayedProduce's check (Kafka's ``checkEnoughReplicasReachOffset``): ``(done, error code)``."""
        if self.leader_id != self.local_broker_id:
            return True, errors.NOT_LEADER_OR_FOLLOWER
        log = self.log
        if log.high_watermark >= required_offset:
            if len(self.maximal_isr) < log.config.min_insync_replicas:
                return True, errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return True, errors.NONE
        return False, errors.NONE

    # -- followers, seen from the leader -------------------------------------------------------
    def update_follower_fetch_state(
        self,
        replica_id: int,
        fetch_offset: int,
        log_start_offset: int,
        fetch_time_ms: int,
        leader_end_offset: int,
        broker_epoch: int = -1,
    ) -> bool:
        """A Fetch from follower ``replica_id`` (its incarnation ``broker_epoch``; -1: not sent) at
        ``fetch_offset`` read when the leader's LEO was ``leader_end_offset``: update its Replica, maybe
        expand the ISR, maybe move the HW. True if the HW moved (the caller completes delayed produces
        and fetches). Raises NotLeaderOrFollowerError when this broker does not lead, ``replica_id`` is
        not an assigned follower, or ``broker_epoch`` is older than the follower's live registration
        (a previous incarnation's Fetch; Kafka's ``Replica.updateFetchStateOrThrow``)."""
        alter = None
        with self._state_lock:
            replica = self.remote_replicas.get(replica_id)
            if replica is None or self.leader_id != self.local_broker_id:
                raise errors.NotLeaderOrFollowerError(
                    f"Replica {replica_id} is not recognized as a valid replica of {self.name} led by "
                    f"{self.leader_id} (this broker is {self.local_broker_id})"
                )
            if broker_epoch != -1 and self.metadata_cache is not None:
                registered = self.metadata_cache.get_alive_broker_epoch(replica_id)
                if registered is not None and registered > broker_epoch:
                    raise errors.NotLeaderOrFollowerError(
                        f"Received stale fetch state update for {self.name} from replica {replica_id}: broker "
                        f"epoch {broker_epoch} vs expected {registered}"
                    )
            previous = replica.log_end_offset
            replica.update_fetch_state(fetch_offset, log_start_offset, fetch_time_ms, leader_end_offset, broker_epoch)
            alter = self._maybe_prepare_expand(replica)
            hw_incremented = previous != fetch_offset and self._maybe_increment_leader_hw_locked()
        if alter is not None:
            self._submit(alter)
        return hw_incremented

    def _maybe_prepare_expand(self, replica: Replica) -> PendingIsrChange | None:
        """Kafka's ``maybeExpandIsr`` / ``isFollowerInSync``: an ISR-eligible follower outside the ISR
        that reached the HW and the current epoch's start offset joins (one AlterPartition in flight at
        a time)."""
        if (
            replica.broker_id in self.isr
            or replica.log_end_offset < self.log.high_watermark
            or replica.log_end_offset < self.leader_epoch_start_offset
            or self._alter_partition_in_flight()
            or not self._is_replica_isr_eligible(replica)
        ):
            return None
        new_isr = (*self.isr, replica.broker_id)
        pending = PendingIsrChange(
            "expand", self._isr_with_broker_epochs(new_isr), self.leader_epoch, self.partition_epoch
        )
        self.pending_isr_change = pending
        self.maximal_isr = new_isr
        _log.info(
            f"ISR updated for {self.name}: expanding from {list(self.isr)} to {list(new_isr)} (pending; broker "
            f"epochs {dict(pending.new_isr_with_epochs)})"
        )
        return pending

    def _alter_partition_in_flight(self) -> bool:
        """An ISR change is pending: this partition's own (Kafka's ``partitionState.isInflight``), or one
        the AlterPartitionManager still holds for this partition although the metadata log replaced the
        pending state since (a new one would be refused with OPERATION_NOT_ATTEMPTED). True without an
        AlterPartitionManager: no change can be proposed."""
        manager = self.alter_partition_manager
        return (
            self.pending_isr_change is not None or manager is None or manager.is_pending(self.topic_id, self.partition)
        )

    def _is_replica_isr_eligible(self, replica: Replica) -> bool:
        """Kafka's ``isReplicaIsrEligible`` (KRaft): the follower is neither fenced nor in controlled
        shutdown, and the broker epoch of its last Fetch is its live registration's (a Fetch without an
        epoch, -1, skips that check; no Fetch yet, or no live registration: not eligible)."""
        cache = self.metadata_cache
        if cache is None:
            return True
        broker_id = replica.broker_id
        if cache.is_broker_fenced(broker_id) or cache.is_broker_shutting_down(broker_id):
            return False
        registered = cache.get_alive_broker_epoch(broker_id)
        fetched = replica.broker_epoch
        return fetched is not None and registered is not None and (fetched == -1 or fetched == registered)

    def _isr_with_broker_epochs(self, isr: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
        """Kafka's ``addBrokerEpochToIsr``: this broker with its own epoch, each follower with the epoch
        of its last Fetch, or -1 when none was seen in this leadership (safe: a replica that crashed
        meanwhile leaves the ISR on the controller, whose new partition epoch then refuses the change)."""
        out = []
        for b in isr:
            if b == self.local_broker_id:
                out.append((b, self.local_broker_epoch()))
                continue
            replica = self.remote_replicas.get(b)
            epoch = replica.broker_epoch if replica is not None else None
            out.append((b, -1 if epoch is None else epoch))
        return tuple(out)

    def maybe_shrink_isr(self) -> bool:
        """Kafka's ``maybeShrinkIsr`` (the ``isr-expiration`` task): ISR followers that have not caught up
        within ``replica.lag.time.max.ms`` leave through an AlterPartition. True if one was sent."""
        with self._state_lock:
            if self.leader_id != self.local_broker_id or self._alter_partition_in_flight():
                return False
            now = self.time.milliseconds()
            leo = self.log.log_end_offset
            out = [
                b
                for b in self.isr
                if b != self.local_broker_id
                and (r := self.remote_replicas.get(b)) is not None
                and not r.is_caught_up(leo, now, self.replica_lag_time_max_ms)
            ]
            if not out:
                return False
            new_isr = tuple(b for b in self.isr if b not in out)
            pending = PendingIsrChange(
                "shrink", self._isr_with_broker_epochs(new_isr), self.leader_epoch, self.partition_epoch
            )
            self.pending_isr_change = pending  # the maximal ISR stays the current one until committed
            lags = {b: (now - self.remote_replicas[b].last_caught_up_time_ms) for b in out}
            _log.info(
                f"Shrinking ISR of {self.name} from {list(self.isr)} to {list(new_isr)}: out-of-sync replicas "
                f"{out}, ms since caught up {lags}, leader LEO {leo}, HW {self.log.high_watermark}"
            )
        self._submit(pending)
        return True

    def _submit(self, pending: PendingIsrChange) -> None:
        self.alter_partition_manager.submit(
            self.topic_id,
            self.partition,
            pending.leader_epoch,
            pending.new_isr_with_epochs,
            pending.partition_epoch,
            lambda code, result: self._handle_alter_partition_response(pending, code, result),
        )

    def _handle_alter_partition_response(self, pending: PendingIsrChange, code: int, result: dict | None) -> None:
        """The controller's answer to ``pending`` (Kafka's ``handleAlterPartitionUpdate`` /
        ``handleAlterPartitionError``). ``result``: ``{leader_id, leader_epoch, isr, partition_epoch}``."""
        hw_incremented = False
        with self._state_lock:
            if self.pending_isr_change is not pending:
                return  # superseded by the metadata log
            if code != errors.NONE:
                self.isr_listener.mark_failed()
                if code in _REVERT_ON:
                    self.pending_isr_change = None
                    self.maximal_isr = self.isr
                _log.info(
                    f"Failed to {pending.kind} the ISR of {self.name} to {list(pending.new_isr)}: "
                    f"{errors.for_code(code).name}"
                    + ("; back to the committed ISR" if code in _REVERT_ON else "; waiting for the metadata log")
                )
                return
            assert result is not None
            if result["leader_epoch"] != self.leader_epoch or result["partition_epoch"] < self.partition_epoch:
                return  # stale: the partition moved on
            self.isr = self.maximal_isr = tuple(result["isr"])
            self.partition_epoch = result["partition_epoch"]
            self.pending_isr_change = None
            (self.isr_listener.mark_expand if pending.kind == "expand" else self.isr_listener.mark_shrink)()
            _log.info(
                f"ISR updated to {list(self.isr)} and partition epoch updated to {self.partition_epoch} for {self.name}"
            )
            hw_incremented = self._maybe_increment_leader_hw_locked()
        self.notify_fetch_watchers()  # the ISR changed
        if hw_incremented:
            self.on_high_watermark_increment()

    # -- follower ------------------------------------------------------------------------------
    def append_records_as_follower(self, records, leader_high_watermark: int, leader_log_start_offset: int):
        """Append the leader's batches as they are (offsets, epochs, producer state), then take the
        leader's HW (capped by this LEO) and log start offset. Returns the LogAppendInfo."""
        info = None
        if len(records):
            info = self.log.append_as_follower(records)
        self.log.update_high_watermark(min(leader_high_watermark, self.log.log_end_offset))
        if 0 <= leader_log_start_offset <= self.log.high_watermark:
            self.log.maybe_increment_log_start_offset(leader_log_start_offset, "leader offset increment")
        return info

    def truncate_to(self, offset: int) -> bool:
        """Remove this follower's log from ``offset`` on (a divergent tail)."""
        return self.log.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)

    # -- record deletion -----------------------------------------------------------------------
    def delete_records_on_leader(self, offset: int) -> tuple[int, int]:
        """DeleteRecords on the leader (``Partition.deleteRecordsOnLeader``): move the log start offset to
        ``offset`` (-1 means the high watermark). Returns ``(requested offset, low watermark)`` (Kafka's
        ``LogDeleteRecordsResult``): the low watermark (:meth:`low_watermark_if_leader`) reaches the requested
        offset once every live follower has moved its own log start offset (the DelayedDeleteRecords wait).

        Raises NotLeaderOrFollowerError; PolicyViolationError when ``cleanup.policy`` has no ``delete``;
        OffsetOutOfRangeError for a negative offset or one above the high watermark."""
        log = self.leader_log_or_raise()
        if not log.config.delete:
            raise errors.PolicyViolationError(
                f"Records of partition {self.name} can not be deleted due to the configured policy"
            )
        target = log.high_watermark if offset == -1 else offset
        if target < 0:
            raise errors.OffsetOutOfRangeError(f"The offset {target} for partition {self.name} is not valid")
        log.maybe_increment_log_start_offset(target, "client delete records")
        return target, self.low_watermark_if_leader()

    def low_watermark_if_leader(self) -> int:
        """Kafka's ``lowWatermarkIfLeader``: the smallest log start offset of this leader and of its followers
        on live (registered, unfenced) brokers; a follower that has not fetched since this broker became leader
        counts as -1. Raises NotLeaderOrFollowerError when this broker does not lead."""
        log = self.leader_log_or_raise()
        low = log.log_start_offset
        cache = self.metadata_cache
        for r in list(self.remote_replicas.values()):
            if r.log_start_offset < low and (cache is None or cache.has_alive_broker(r.broker_id)):
                low = r.log_start_offset
        return low

    # -- reads ---------------------------------------------------------------------------------
    def read_records(
        self,
        fetch_offset: int,
        current_leader_epoch: int,
        max_bytes: int,
        isolation: FetchIsolation,
        min_one_message: bool,
    ):
        log = self.leader_log_or_raise(current_leader_epoch)
        return log.read(fetch_offset, max_bytes, isolation, min_one_message)


def _validator_kwargs(config, epoch: int, origin) -> dict:
    """The LogValidator keyword arguments of a leader append under ``config`` (a LogConfig) at ``epoch``."""
    kwargs = {
        "target_compression": config.compression_type,
        "compacted_topic": config.compact,
        "partition_leader_epoch": epoch,
        "timestamp_type": LOG_APPEND_TIME if config.message_timestamp_type == "LogAppendTime" else CREATE_TIME,
        "timestamp_before_max_ms": config.message_timestamp_before_max_ms,
        "timestamp_after_max_ms": config.message_timestamp_after_max_ms,
        "max_message_bytes": config.max_message_bytes,
    }
    if origin is not None:
        kwargs["origin"] = origin
    return kwargs
