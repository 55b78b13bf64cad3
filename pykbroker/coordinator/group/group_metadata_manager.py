"""GroupMetadataManager: groups and committed offsets persisted in ``__consumer_offsets``.

Mirrors ``kafka.coordinator.group.GroupMetadataManager`` (classic groups): a group lives in partition
``abs(hash(group id)) % offsets.topic.num.partitions`` of the internal compacted topic; offset commits
and group metadata are written there as records (keys/values in :mod:`record_codec`) through the
ReplicaManager with ``offsets.commit.required.acks`` (default -1: the whole ISR has them before the
commit is answered, so a commit survives the coordinator's broker) and ``offsets.commit.timeout.ms``.
In-memory offsets change only once the append succeeded.

Leadership (Kafka's ``scheduleLoadGroupAndOffsets`` / ``removeGroupsForPartition``): the coordinator of
a group is the leader of its partition. The metadata publisher calls ``on_election`` when this broker
becomes leader: the partition is *loading* at once and its log is read in the background, on this
manager's own scheduler thread ``group-metadata-manager-0``, from the log start offset to the log end
offset (a new leader's log is the partition's history); requests for its groups raise
CoordinatorLoadInProgressError (COORDINATOR_LOAD_IN_PROGRESS) until the load is done, then the partition
is *owned*. A partition neither loading nor owned raises NotCoordinatorError (NOT_COORDINATOR).
``on_resignation`` unloads the partition at once (a load still running is discarded). Records that do
not decode are skipped with a warning (Kafka ignores unknown key versions). Expired offsets
(``offsets.retention.minutes`` after the commit, only while the group is Empty) are removed with
tombstones by a scheduled task (``offsets.retention.check.interval.ms``).

Threading: ``_lock`` guards the group map, the owned and loading partitions and the partition epochs;
each group's own state is guarded by its lock. Loads run on the scheduler thread and publish their
groups under ``_lock`` only if the partition is still loading at the epoch they started for.
Appends run on the calling thread (a request handler, or the transaction verifier's thread for a
TxnOffsetCommit); their callbacks run on the thread that completes the append (at once with a single
replica, else the thread whose follower fetch moved the high watermark, or the purgatory's reaper on
timeout).
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Sequence

from pykbroker.coordinator.append_errors import COORDINATOR_APPEND_ERRORS
from pykbroker.coordinator.group import record_codec as codec
from pykbroker.coordinator.group.consumer import record_codec as ccodec
from pykbroker.coordinator.group.consumer.group import ConsumerGroup
from pykbroker.coordinator.group.coordinator_metrics import OFFSET_EXPIRED, GroupCoordinatorMetrics
from pykbroker.coordinator.group.group_metadata import GroupMetadata, GroupState, OffsetAndMetadata
from pykbroker.coordinator.group.share import record_codec as scodec
from pykbroker.coordinator.group.share.group import ShareGroup
from pykbroker.log.fetch_data_info import FetchIsolation
from pykbroker.log.producer_state_entry import AppendOrigin
from pykbroker.metadata.topic_names import GROUP_METADATA_TOPIC_NAME
from pykbroker.protocol import errors
from pykbroker.record.control_record import ControlRecordType
from pykbroker.record.default_record_batch import iter_batches
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from pykbroker.utils.logging import get_logger
from pykbroker.utils.scheduler import KafkaScheduler, Scheduler

_log = get_logger("GroupMetadataManager")

# Append errors as the coordinator answers them (Kafka's GroupMetadataManager.storeOffsets/storeGroup):
# the partition is not ready or its ISR too small -> retry later; it moved -> find the coordinator again.
_APPEND_ERRORS = {
    **COORDINATOR_APPEND_ERRORS,
    errors.MESSAGE_TOO_LARGE: errors.INVALID_COMMIT_OFFSET_SIZE,
    errors.RECORD_LIST_TOO_LARGE: errors.INVALID_COMMIT_OFFSET_SIZE,
    errors.INVALID_FETCH_SIZE: errors.INVALID_COMMIT_OFFSET_SIZE,
}

#: what a record of ``__consumer_offsets`` that does not decode raises (unknown version, short buffer)
_UNDECODABLE = (ValueError, struct.error, UnicodeDecodeError)


def _skip_undecodable(e: Exception) -> None:
    _log.warning(f"Ignoring a record of {GROUP_METADATA_TOPIC_NAME} that does not decode while loading", error=str(e))


class GroupMetadataManager:
    def __init__(
        self,
        replica_manager,
        log_manager,
        num_partitions: int,
        time,
        offsets_retention_ms: int,
        required_acks: int = -1,
        commit_timeout_ms: int = 5000,
        scheduler: Scheduler | None = None,
    ):
        """``required_acks`` / ``commit_timeout_ms``: ``offsets.commit.required.acks`` and
        ``offsets.commit.timeout.ms``, used for every append (offsets and group metadata).
        ``scheduler``: where partitions load (default: a KafkaScheduler of one thread
        ``group-metadata-manager-0``, as Kafka's)."""
        self.replica_manager = replica_manager
        self.log_manager = log_manager
        self.num_partitions = num_partitions
        self.time = time
        self.offsets_retention_ms = offsets_retention_ms
        self.required_acks = required_acks
        self.commit_timeout_ms = commit_timeout_ms
        self.scheduler = scheduler if scheduler is not None else KafkaScheduler(1, "group-metadata-manager-")
        self.groups: dict[str, GroupMetadata] = {}
        #: the partitions whose groups are loaded here (Kafka's ownedPartitions)
        self.loaded: set[int] = set()
        #: partition -> the leader epoch it is being loaded for (Kafka's loadingPartitions)
        self.loading: dict[int, int] = {}
        #: partition -> (producer id, commit) of transaction markers written while it loads, applied
        #: to the loaded groups (Kafka runs handleTxnCompletion on the scheduler, after the load)
        self._completions_while_loading: dict[int, list[tuple[int, bool]]] = {}
        #: partition -> leader epoch of its latest election or resignation (Kafka's epochForPartitionId)
        self.epochs: dict[int, int] = {}
        self._lock = threading.RLock()
        self._shutting_down = threading.Event()
        #: called with the groups of a partition once its load is published (on the scheduler thread, no lock
        #: held): the coordinator restarts the session timers of the consumer groups' members
        self.on_loaded = lambda groups: None
        #: Kafka's GroupCoordinatorMetrics (group-coordinator-metrics), recorded by the coordinator and the expiry
        self.coordinator_metrics = GroupCoordinatorMetrics(time)

    def startup(self) -> None:
        self.scheduler.startup()

    def shutdown(self) -> None:
        """Stop loading (a load in progress stops at its next batch) and the scheduler."""
        self._shutting_down.set()
        self.scheduler.shutdown()

    def register_metrics(self, metrics) -> None:
        """Kafka's GroupMetadataManager gauges (``kafka.coordinator.group:type=GroupMetadataManager``),
        read from the loaded groups at report time."""
        prefix = "kafka.coordinator.group:type=GroupMetadataManager,name="

        def groups() -> list[GroupMetadata]:
            with self._lock:
                return list(self.groups.values())

        def in_state(state: GroupState):
            return lambda: sum(1 for g in groups() if g.state is state)

        metrics.gauge(prefix + "NumOffsets", lambda: sum(len(g.offsets) for g in groups()))
        metrics.gauge(prefix + "NumGroups", lambda: len(self.groups))
        metrics.gauge(prefix + "NumGroupsPreparingRebalance", in_state(GroupState.PREPARING_REBALANCE))
        metrics.gauge(prefix + "NumGroupsCompletingRebalance", in_state(GroupState.COMPLETING_REBALANCE))
        metrics.gauge(prefix + "NumGroupsStable", in_state(GroupState.STABLE))
        metrics.gauge(prefix + "NumGroupsDead", in_state(GroupState.DEAD))
        metrics.gauge(prefix + "NumGroupsEmpty", in_state(GroupState.EMPTY))
        self.coordinator_metrics.register(metrics, groups)

    def partition_for(self, group_id: str) -> int:
        return codec.partition_for(group_id, self.num_partitions)

    # -- groups ----------------------------------------------------------------------------------------
    def validate_group_status(self, group_id: str) -> None:
        """Kafka's ``validateGroupStatus`` for the partition of ``group_id``: raises
        CoordinatorLoadInProgressError while it loads, NotCoordinatorError when this broker does not lead
        it (or its leadership was not loaded yet)."""
        with self._lock:
            self._check_owned(self.partition_for(group_id))

    def _check_owned(self, partition: int) -> None:
        if partition in self.loading:
            raise errors.CoordinatorLoadInProgressError(
                f"The coordinator is loading offsets and group metadata from {GROUP_METADATA_TOPIC_NAME}-{partition}"
            )
        if partition not in self.loaded:
            raise errors.NotCoordinatorError(
                f"This broker is not the coordinator of {GROUP_METADATA_TOPIC_NAME}-{partition}"
            )

    def get_group(self, group_id: str, create: bool = False) -> GroupMetadata | None:
        """The group, created Empty if ``create``. Raises as :meth:`validate_group_status`."""
        partition = self.partition_for(group_id)
        with self._lock:
            self._check_owned(partition)
            group = self.groups.get(group_id)
            if group is None and create:
                group = self.groups[group_id] = GroupMetadata(group_id)
            return group

    def remove_group(self, group: GroupMetadata) -> None:
        with self._lock:
            if self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]

    def all_groups(self) -> list[GroupMetadata]:
        """The groups of the partitions loaded here."""
        with self._lock:
            return list(self.groups.values())

    @property
    def is_loading(self) -> bool:
        """Whether some partition is loading (ListGroups then answers COORDINATOR_LOAD_IN_PROGRESS)."""
        with self._lock:
            return bool(self.loading)

    # -- leadership ------------------------------------------------------------------------------------
    def on_election(self, partition: int, leader_epoch: int) -> None:
        """This broker leads ``partition`` at ``leader_epoch`` (Kafka's ``onElection`` ->
        ``scheduleLoadGroupAndOffsets``): unless already loaded or loading, the partition is loading from
        now on and its log is read on the scheduler. A notification older than the latest one is ignored."""
        with self._lock:
            if self.epochs.get(partition, -1) > leader_epoch:
                return  # a stale notification
            self.epochs[partition] = leader_epoch
            if partition in self.loaded or partition in self.loading:
                return  # Kafka's addLoadingPartition: already loaded (or loading) here
            self.loading[partition] = leader_epoch
        name = f"{GROUP_METADATA_TOPIC_NAME}-{partition}"
        _log.info(f"Scheduling loading of offsets and group metadata from {name} for epoch {leader_epoch}")
        scheduled = self.time.milliseconds()
        try:
            self.scheduler.schedule(name, lambda: self._load_partition(partition, leader_epoch, scheduled))
        except RuntimeError:  # the scheduler was shut down: the broker is stopping
            with self._lock:
                if self.loading.get(partition) == leader_epoch:
                    del self.loading[partition]

    def on_resignation(self, partition: int, leader_epoch: int | None, on_unloaded) -> None:
        """This broker no longer leads ``partition`` (Kafka's ``onResignation`` ->
        ``removeGroupsForPartition``): a load in progress is discarded, its groups leave memory,
        ``on_unloaded(group)`` is called for each (the coordinator answers their waiting members
        NOT_COORDINATOR), and requests for them get NOT_COORDINATOR until this broker leads the
        partition again."""
        with self._lock:
            if leader_epoch is not None:
                if self.epochs.get(partition, -1) > leader_epoch:
                    return
                self.epochs[partition] = leader_epoch
            self.loaded.discard(partition)
            self.loading.pop(partition, None)
            self._completions_while_loading.pop(partition, None)
            removed = [g for gid, g in self.groups.items() if self.partition_for(gid) == partition]
            for g in removed:
                del self.groups[g.group_id]
        if removed:
            _log.info(
                "Unloaded group metadata",
                partition=f"{GROUP_METADATA_TOPIC_NAME}-{partition}",
                groups=len(removed),
            )
        for g in removed:
            on_unloaded(g)

    # -- load ------------------------------------------------------------------------------------------
    def _still_loading(self, partition: int, leader_epoch: int) -> bool:
        with self._lock:
            return self.loading.get(partition) == leader_epoch and not self._shutting_down.is_set()

    def _load_partition(self, partition: int, leader_epoch: int, scheduled_ms: int) -> None:
        """The load task (Kafka's ``loadGroupsAndOffsets``), on the scheduler thread: read the log into
        groups of its own, then, if the partition is still loading at ``leader_epoch``, publish them
        (with the markers written meanwhile applied) and own the partition."""
        name = f"{GROUP_METADATA_TOPIC_NAME}-{partition}"
        started = self.time.milliseconds()
        if not self._still_loading(partition, leader_epoch):
            return
        groups: dict[str, GroupMetadata] = {}
        try:
            log = self.log_manager.get_log(GROUP_METADATA_TOPIC_NAME, partition)
            if log is None:
                _log.warning(f"Attempted to load offsets and group metadata from {name}, but found no log")
                count = 0
            else:
                count = self._load(log, groups, lambda: self._still_loading(partition, leader_epoch))
        except errors.KafkaError as e:  # e.g. KAFKA_STORAGE_ERROR: the partition leaves this broker next
            _log.error(f"Error loading offsets from {name}", error=repr(e))
            self._abandon_load(partition, leader_epoch)
            return
        except Exception as e:  # noqa: BLE001 - a bug: say where, and leave the partition not coordinated
            _log.error(f"Error loading offsets from {name}", error=repr(e), exc_info=True)
            self._abandon_load(partition, leader_epoch)
            return
        with self._lock:
            if self.loading.get(partition) != leader_epoch or self._shutting_down.is_set():
                return  # resigned or re-elected meanwhile (a newer load publishes), or stopped part way
            for producer_id, commit in self._completions_while_loading.pop(partition, []):
                for group in groups.values():
                    group.complete_pending_txn_offset_commit(producer_id, commit)
            for group in groups.values():
                if group.consumer_group is not None:
                    group.consumer_group.rebuild_indexes()
                    group.consumer_group.persisted = ccodec.records_of(group.consumer_group)
                if group.share_group is not None:
                    group.share_group.persisted = scodec.records_of(group.share_group)
            self.groups.update(groups)
            del self.loading[partition]
            self.loaded.add(partition)
        self.on_loaded(list(groups.values()))
        done = self.time.milliseconds()
        _log.info(
            f"Finished loading offsets and group metadata from {name} in {done - scheduled_ms} milliseconds "
            f"for epoch {leader_epoch}, of which {started - scheduled_ms} milliseconds was spent in the scheduler.",
            groups=len(groups),
            records=count,
        )

    def _abandon_load(self, partition: int, leader_epoch: int) -> None:
        with self._lock:
            if self.loading.get(partition) == leader_epoch:
                del self.loading[partition]
                self._completions_while_loading.pop(partition, None)

    def _load(self, log, groups: dict[str, GroupMetadata], keep_going=lambda: True) -> int:
        """Replay ``log`` into ``groups``; returns the number of records read. Stops early once
        ``keep_going()`` is false (the partition was resigned, or the broker stops)."""
        # Up to the log end offset, as Kafka's doLoadGroupsAndOffsets: a new leader's whole log is the
        # partition's history from now on (its HW catches up as the followers fetch). Offsets of
        # transactional batches wait per producer id for their COMMIT/ABORT marker.
        offset, end, count = log.log_start_offset, log.log_end_offset, 0
        pending: dict[int, list[tuple[bytes, bytes | None]]] = {}
        while offset < end and keep_going():
            info = log.read(offset, 1 << 20, FetchIsolation.LOG_END)
            data = info.records.read_bytes()
            if not data:
                break
            for _, batch in iter_batches(memoryview(data)):
                if batch.last_offset < offset:
                    continue
                if batch.is_control_batch:
                    if batch.producer_id in pending:
                        commit = any(
                            r.key is not None and ControlRecordType.parse(r.key) is ControlRecordType.COMMIT
                            for r in batch.records()
                        )
                        for key, value in pending.pop(batch.producer_id):
                            if commit:
                                self._replay(groups, key, value)
                elif batch.is_transactional:
                    for r in batch.records():
                        if r.offset >= offset and r.key is not None:
                            pending.setdefault(batch.producer_id, []).append((r.key, r.value))
                            count += 1
                else:
                    for r in batch.records():
                        if r.offset >= offset and r.key is not None:
                            self._replay(groups, r.key, r.value)
                            count += 1
                offset = batch.next_offset
        # Transactions still open at the log end: their offsets stay pending until the marker arrives.
        for producer_id, records in pending.items():
            for key, value in records:
                try:
                    kind = codec.decode_key(key)
                    if kind[0] != "offset" or value is None:
                        continue
                    decoded = OffsetAndMetadata(*codec.decode_offset_value(value))
                except _UNDECODABLE as e:
                    _skip_undecodable(e)
                    continue
                _, group_id, topic, partition = kind
                group = groups.get(group_id)
                if group is None:
                    group = groups[group_id] = GroupMetadata(group_id)
                group.pending_transactional_offsets.setdefault(producer_id, {})[(topic, partition)] = decoded
        return count

    @staticmethod
    def _replay_consumer(groups: dict[str, GroupMetadata], key: bytes, value: bytes | None) -> None:
        """A consumer group record (key versions 3..8): applied to the group's ConsumerGroup, created on its
        first record; the group epoch's tombstone removes the consumer group (and the group, without offsets)."""
        try:
            version, group_id, member_id = ccodec.decode_key(key)
            group = groups.get(group_id)
            if version == ccodec.GROUP_METADATA and value is None:
                if group is not None:
                    group.consumer_group = None
                    if not group.offsets:
                        del groups[group_id]
                return
            if group is None:
                group = groups[group_id] = GroupMetadata(group_id)
            if group.consumer_group is None:
                group.consumer_group = ConsumerGroup(group_id)
            ccodec.replay(group.consumer_group, version, member_id, value)
        except _UNDECODABLE as e:
            _skip_undecodable(e)

    @staticmethod
    def _replay_share(groups: dict[str, GroupMetadata], key: bytes, value: bytes | None) -> None:
        """A share group record (key versions 10..14): applied to the group's ShareGroup, created on its first
        record; the group epoch's tombstone removes the share group (and the group)."""
        try:
            version, group_id, member_id = scodec.decode_key(key)
            group = groups.get(group_id)
            if version == scodec.GROUP_METADATA and value is None:
                if group is not None:
                    group.share_group = None
                    if not group.offsets and group.consumer_group is None:
                        del groups[group_id]
                return
            if group is None:
                group = groups[group_id] = GroupMetadata(group_id)
            if group.share_group is None:
                group.share_group = ShareGroup(group_id)
            scodec.replay(group.share_group, version, member_id, value)
        except _UNDECODABLE as e:
            _skip_undecodable(e)

    @staticmethod
    def _replay(groups: dict[str, GroupMetadata], key: bytes, value: bytes | None) -> None:
        if len(key) >= 2 and struct.unpack_from(">h", key)[0] in ccodec.KEY_VERSIONS:
            GroupMetadataManager._replay_consumer(groups, key, value)
            return
        if len(key) >= 2 and struct.unpack_from(">h", key)[0] in scodec.KEY_VERSIONS:
            GroupMetadataManager._replay_share(groups, key, value)
            return
        try:
            kind = codec.decode_key(key)
            if kind[0] == "offset":
                decoded = None if value is None else OffsetAndMetadata(*codec.decode_offset_value(value))
                meta = None
            else:
                decoded = None
                meta = None if value is None else codec.decode_group_value(value)
        except _UNDECODABLE as e:
            _skip_undecodable(e)
            return
        if kind[0] == "offset":
            _, group_id, topic, partition = kind
            group = groups.get(group_id)
            if decoded is None:
                if group is not None:
                    group.offsets.pop((topic, partition), None)
                return
            if group is None:
                group = groups[group_id] = GroupMetadata(group_id)
            group.offsets[(topic, partition)] = decoded
        else:
            group_id = kind[1]
            if meta is None:
                group = groups.get(group_id)
                if group is not None and (group.offsets or group.consumer_group is not None):
                    # converted to a consumer group (online upgrade): its offsets stay
                    group.generation_id, group.protocol_type, group.protocol_name = 0, None, None
                else:
                    groups.pop(group_id, None)
                return
            group = groups.get(group_id)
            if group is None:
                group = groups[group_id] = GroupMetadata(group_id)
            # Members are not restored: they rejoin (their old generation is then refused), as after a
            # coordinator move. The generation and protocol survive.
            group.generation_id = meta["generation"]
            group.protocol_type = meta["protocol_type"] or None
            group.protocol_name = None
            group.state = GroupState.EMPTY

    # -- store -----------------------------------------------------------------------------------------
    def append(
        self,
        group_id: str,
        records: Sequence[tuple[bytes, bytes | None]],
        callback,
        producer: tuple[int, int] | None = None,
        verification_guard=None,
    ) -> None:
        """Append ``[(key, value or None)]`` to the group's partition; ``callback(error_code)`` once.
        ``producer``: (producer id >= 0, epoch >= 0) of a transactional offset commit (a transactional
        batch, appended with the coordinator's origin: epoch checks, no sequence checks), with the
        ``verification_guard`` of its verified transaction start if one was needed (KIP-890)."""
        builder = MemoryRecordsBuilder(is_transactional=producer is not None)
        if producer is not None:
            builder.set_producer_state(producer[0], producer[1], 0, True)
        now = self.time.milliseconds()
        for key, value in records:
            builder.append(now, key, value)
        batch = builder.build()
        tp = (GROUP_METADATA_TOPIC_NAME, self.partition_for(group_id))

        def done(responses: dict) -> None:
            code = responses[tp].error_code
            callback(_APPEND_ERRORS.get(code, code))

        entries = {tp: memoryview(batch)}
        if producer is None:
            self.replica_manager.append_records(self.commit_timeout_ms, self.required_acks, True, entries, done)
        elif verification_guard is None:
            self.replica_manager.append_records(
                self.commit_timeout_ms, self.required_acks, True, entries, done, origin=AppendOrigin.COORDINATOR
            )
        else:
            self.replica_manager.append_records(
                self.commit_timeout_ms,
                self.required_acks,
                True,
                entries,
                done,
                origin=AppendOrigin.COORDINATOR,
                verification_guards={tp: verification_guard},
            )

    def store_group(self, group: GroupMetadata, callback) -> None:
        self.append(group.group_id, [self.group_record(group)], callback)

    @staticmethod
    def group_record(group: GroupMetadata) -> tuple[bytes, bytes]:
        """The classic group's GroupMetadata record ``(key, value)`` (its tombstone: the key with None)."""
        members = [
            (
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata_for(group.protocol_name) if group.protocol_name else b"",
                m.assignment,
            )
            for m in group.members.values()
        ]
        value = codec.group_value(
            group.protocol_type or "",
            group.generation_id,
            group.protocol_name,
            group.leader_id,
            group.state_timestamp,
            members,
        )
        return codec.group_key(group.group_id), value

    def store_offsets(self, group: GroupMetadata, offsets: dict[tuple[str, int], OffsetAndMetadata], callback) -> None:
        records = [
            (
                codec.offset_key(group.group_id, t, p),
                codec.offset_value(o.offset, o.leader_epoch, o.metadata, o.commit_timestamp),
            )
            for (t, p), o in offsets.items()
        ]

        def done(code: int) -> None:
            if code == errors.NONE:
                with group.lock:
                    group.offsets.update(offsets)
            callback(code)

        self.append(group.group_id, records, done)

    def maybe_start_transaction_verification(
        self,
        group_id: str,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        callback,
        transaction_abortable_supported: bool = False,
    ) -> None:
        """Before a TxnOffsetCommit's append: ``callback(error code, verification guard or None)`` once,
        after the transaction coordinator confirmed that the group's ``__consumer_offsets`` partition is in
        the producer's transaction if this producer has none open there yet (KIP-890 part 1, Kafka's
        ``replicaManager.maybeStartTransactionVerificationForPartition``). The code is converted as
        Kafka's ``maybeConvertOffsetCommitError``: INVALID_PRODUCER_ID_MAPPING (unknown transactional id,
        or another producer id), INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE (or TRANSACTION_ABORTABLE when
        ``transaction_abortable_supported``: the partition was not added), CONCURRENT_TRANSACTIONS,
        INVALID_REQUEST (empty transactional id), COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
        COORDINATOR_LOAD_IN_PROGRESS (the verification request failed)."""
        tp = (GROUP_METADATA_TOPIC_NAME, self.partition_for(group_id))

        def verified(code: int, guard) -> None:
            if code == errors.NETWORK_EXCEPTION:
                code = errors.COORDINATOR_LOAD_IN_PROGRESS  # clients retry it without a coordinator lookup
            callback(_APPEND_ERRORS.get(code, code), guard)

        self.replica_manager.maybe_start_transaction_verification_for_partition(
            tp, transactional_id, producer_id, producer_epoch, verified, transaction_abortable_supported
        )

    def store_transactional_offsets(
        self,
        group: GroupMetadata,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[tuple[str, int], OffsetAndMetadata],
        callback,
        verification_guard=None,
    ) -> None:
        """TxnOffsetCommit: append the offsets in a transactional batch of the producer; once written
        they are pending until the transaction's marker (``handle_txn_completion``). A negative producer
        id answers INVALID_PRODUCER_ID_MAPPING and a negative epoch INVALID_PRODUCER_EPOCH, without an
        append (reached only when ``transaction.partition.verification.enable`` is false: the
        coordinator's verification refuses them first)."""
        if producer_id < 0:
            return callback(errors.INVALID_PRODUCER_ID_MAPPING)
        if producer_epoch < 0:
            return callback(errors.INVALID_PRODUCER_EPOCH)
        records = [
            (
                codec.offset_key(group.group_id, t, p),
                codec.offset_value(o.offset, o.leader_epoch, o.metadata, o.commit_timestamp),
            )
            for (t, p), o in offsets.items()
        ]

        def done(code: int) -> None:
            if code == errors.NONE:
                with group.lock:
                    group.pending_transactional_offsets.setdefault(producer_id, {}).update(offsets)
            callback(code)

        self.append(group.group_id, records, done, (producer_id, producer_epoch), verification_guard)
        return None

    def handle_txn_completion(self, producer_id: int, partitions: set[int], commit: bool) -> None:
        """A COMMIT/ABORT marker of ``producer_id`` was written to these ``__consumer_offsets``
        partitions: their groups apply or drop its pending offsets (Kafka's handleTxnCompletion). A
        partition still loading applies them to its groups once loaded."""
        with self._lock:
            for partition in partitions:
                if partition in self.loading:
                    self._completions_while_loading.setdefault(partition, []).append((producer_id, commit))
            groups = [g for gid, g in self.groups.items() if self.partition_for(gid) in partitions]
        for group in groups:
            with group.lock:
                group.complete_pending_txn_offset_commit(producer_id, commit)

    def delete_offsets(self, group: GroupMetadata, tps: list[tuple[str, int]], callback) -> None:
        records = [(codec.offset_key(group.group_id, t, p), None) for t, p in tps]
        with group.lock:
            for tp in tps:
                group.offsets.pop(tp, None)
        if records:
            self.append(group.group_id, records, callback)
        else:
            callback(errors.NONE)

    def delete_group(self, group: GroupMetadata, callback) -> None:
        records: list[tuple[bytes, bytes | None]] = [
            (codec.offset_key(group.group_id, t, p), None) for t, p in group.offsets
        ]
        records.append((codec.group_key(group.group_id), None))
        with group.lock:
            if group.consumer_group is not None:
                records += ccodec.tombstones(group.consumer_group)
            if group.share_group is not None:
                records += scodec.tombstones(group.share_group)
            group.offsets.clear()
        self.remove_group(group)
        self.append(group.group_id, records, callback)

    # -- expiry ----------------------------------------------------------------------------------------
    def cleanup_expired_offsets(self) -> int:
        """Tombstone offsets older than ``offsets.retention.minutes`` of Empty groups; drop groups left
        with nothing. Returns the number of offsets removed."""
        now = self.time.milliseconds()
        removed = 0
        with self._lock:
            groups = [
                g for p, g in ((self.partition_for(g.group_id), g) for g in self.groups.values()) if p in self.loaded
            ]
        for group in groups:
            with group.lock:
                if group.state is not GroupState.EMPTY or group.is_in_use():
                    continue  # a classic group not Empty, or a consumer group with members
                expired = [
                    tp
                    for tp, o in group.offsets.items()
                    if o.commit_timestamp >= 0 and now - o.commit_timestamp >= self.offsets_retention_ms
                ]
            if expired:
                removed += len(expired)
                self.coordinator_metrics.record(OFFSET_EXPIRED, len(expired))
                self.delete_offsets(group, expired, lambda code: None)
            with group.lock:
                if (
                    not group.offsets
                    and not group.members
                    and group.state is GroupState.EMPTY
                    and not group.is_in_use()
                ):
                    group.transition_to(GroupState.DEAD, now)
                    self.delete_group(group, lambda code: None)
        return removed
