"""GroupMetadataManager: groups and committed offsets persisted in ``__consumer_offsets``.

Mirrors ``kafka.coordinator.group.GroupMetadataManager`` (classic groups): a group lives in partition
``abs(hash(group id)) % offsets.topic.num.partitions`` of the internal compacted topic; offset commits
and group metadata are written there as records (keys/values in :mod:`record_codec`) through the
ReplicaManager with ``offsets.commit.required.acks`` (default -1: the whole ISR has them before the
commit is answered, so a commit survives the coordinator's broker) and ``offsets.commit.timeout.ms``.
In-memory offsets change only once the append succeeded. The coordinator of a group is the leader of
its partition: the metadata publisher calls ``on_election`` / ``on_resignation`` as leadership moves;
a led partition is loaded on first use from the log start offset to the log end offset (a new leader's
log is the partition's history), a resigned one is unloaded and answers NOT_COORDINATOR. Expired
offsets (``offsets.retention.minutes`` after the commit, only while the group is Empty) are removed with
tombstones by a scheduled task (``offsets.retention.check.interval.ms``).

Threading: ``_lock`` guards the group map, the loaded-partition set and the partition epochs; each
group's own state is guarded by its lock. Appends run on the calling handler thread; their callbacks
run on the thread that completes the append (at once with a single replica, else the thread whose
follower fetch moved the high watermark, or the purgatory's reaper on timeout).
"""

from __future__ import annotations

import threading

from pykbroker.coordinator.group import record_codec as codec
from pykbroker.coordinator.group.group_metadata import GroupMetadata, GroupState, OffsetAndMetadata
from pykbroker.log.fetch_data_info import FetchIsolation
from pykbroker.log.producer_state_entry import AppendOrigin
from pykbroker.metadata.topic_names import GROUP_METADATA_TOPIC_NAME
from pykbroker.protocol import errors
from pykbroker.record.control_record import ControlRecordType
from pykbroker.record.default_record_batch import iter_batches
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from pykbroker.utils.logging import get_logger

_log = get_logger("GroupMetadataManager")

# Append errors as the coordinator answers them (Kafka's GroupMetadataManager.storeOffsets/storeGroup):
# the partition is not ready or its ISR too small -> retry later; it moved -> find the coordinator again.
_APPEND_ERRORS = {
    errors.UNKNOWN_TOPIC_OR_PARTITION: errors.COORDINATOR_NOT_AVAILABLE,
    errors.NOT_ENOUGH_REPLICAS: errors.COORDINATOR_NOT_AVAILABLE,
    errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: errors.COORDINATOR_NOT_AVAILABLE,
    errors.REQUEST_TIMED_OUT: errors.COORDINATOR_NOT_AVAILABLE,
    errors.NOT_LEADER_OR_FOLLOWER: errors.NOT_COORDINATOR,
    errors.KAFKA_STORAGE_ERROR: errors.NOT_COORDINATOR,
    errors.MESSAGE_TOO_LARGE: errors.INVALID_COMMIT_OFFSET_SIZE,
    errors.RECORD_LIST_TOO_LARGE: errors.INVALID_COMMIT_OFFSET_SIZE,
    errors.INVALID_FETCH_SIZE: errors.INVALID_COMMIT_OFFSET_SIZE,
}


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
    ):
        """``required_acks`` / ``commit_timeout_ms``: ``offsets.commit.required.acks`` and
        ``offsets.commit.timeout.ms``, used for every append (offsets and group metadata)."""
        self.replica_manager = replica_manager
        self.log_manager = log_manager
        self.num_partitions = num_partitions
        self.time = time
        self.offsets_retention_ms = offsets_retention_ms
        self.required_acks = required_acks
        self.commit_timeout_ms = commit_timeout_ms
        self.groups: dict[str, GroupMetadata] = {}
        self.loaded: set[int] = set()
        #: partition -> leader epoch of its latest election or resignation (Kafka's epochForPartitionId)
        self.epochs: dict[int, int] = {}
        self._lock = threading.RLock()

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

    def partition_for(self, group_id: str) -> int:
        return codec.partition_for(group_id, self.num_partitions)

    # -- groups ----------------------------------------------------------------------------------------
    def get_group(self, group_id: str, create: bool = False) -> GroupMetadata | None:
        """The group (loading its partition first). Raises CoordinatorNotAvailableError while
        ``__consumer_offsets`` does not exist here yet."""
        self.ensure_loaded(self.partition_for(group_id))
        with self._lock:
            group = self.groups.get(group_id)
            if group is None and create:
                group = self.groups[group_id] = GroupMetadata(group_id)
            return group

    def remove_group(self, group: GroupMetadata) -> None:
        with self._lock:
            if self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]

    def all_groups(self) -> list[GroupMetadata]:
        for p in range(self.num_partitions):
            try:
                self.ensure_loaded(p)
            except errors.KafkaError:
                pass
        with self._lock:
            return list(self.groups.values())

    # -- leadership ------------------------------------------------------------------------------------
    def on_election(self, partition: int, leader_epoch: int) -> None:
        """This broker leads ``partition`` at ``leader_epoch`` (Kafka's ``onElection``): its groups are
        loaded on first use, from the log as this leader has it (up to its log end offset)."""
        with self._lock:
            if self.epochs.get(partition, -1) > leader_epoch:
                return  # a stale notification
            self.epochs[partition] = leader_epoch

    def on_resignation(self, partition: int, leader_epoch: int | None, on_unloaded) -> None:
        """This broker no longer leads ``partition`` (Kafka's ``onResignation`` ->
        ``removeGroupsForPartition``): its groups leave memory, ``on_unloaded(group)`` is called for each
        (the coordinator answers their waiting members NOT_COORDINATOR), and requests for them get
        NOT_COORDINATOR until this broker leads the partition again."""
        with self._lock:
            if leader_epoch is not None:
                if self.epochs.get(partition, -1) > leader_epoch:
                    return
                self.epochs[partition] = leader_epoch
            self.loaded.discard(partition)
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
    def ensure_loaded(self, partition: int) -> None:
        """Load ``partition``'s groups if this broker leads it. Raises NotCoordinatorError when another
        broker leads it, CoordinatorNotAvailableError when it does not exist here yet."""
        with self._lock:
            if partition in self.loaded:
                return
            log = self.log_manager.get_log(GROUP_METADATA_TOPIC_NAME, partition)
            cache = getattr(self.replica_manager, "metadata_cache", None)
            registration = cache.partition(GROUP_METADATA_TOPIC_NAME, partition) if cache is not None else None
            local = self.replica_manager.get_partition(GROUP_METADATA_TOPIC_NAME, partition)
            if (registration is not None and registration.leader != self.replica_manager.node_id) or (
                local is not None and not getattr(local, "is_leader", True)
            ):
                # Another broker leads this partition: it is the group's coordinator (clients re-run
                # FindCoordinator on NOT_COORDINATOR).
                raise errors.NotCoordinatorError(
                    f"This broker is not the coordinator of {GROUP_METADATA_TOPIC_NAME}-{partition}"
                )
            if log is None or local is None:
                raise errors.CoordinatorNotAvailableError(
                    f"{GROUP_METADATA_TOPIC_NAME}-{partition} is not available on this broker yet"
                )
            count = self._load(log)
            self.loaded.add(partition)
            if count:
                _log.info(
                    "Loaded group metadata and offsets",
                    partition=f"{GROUP_METADATA_TOPIC_NAME}-{partition}",
                    records=count,
                )

    def _load(self, log) -> int:
        # Up to the log end offset, as Kafka's doLoadGroupsAndOffsets: a new leader's whole log is the
        # partition's history from now on (its HW catches up as the followers fetch). Offsets of
        # transactional batches wait per producer id for their COMMIT/ABORT marker.
        offset, end, count = log.log_start_offset, log.log_end_offset, 0
        pending: dict[int, list[tuple[bytes, bytes | None]]] = {}
        while offset < end:
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
                                self._replay(key, value)
                elif batch.is_transactional:
                    for r in batch.records():
                        if r.offset >= offset and r.key is not None:
                            pending.setdefault(batch.producer_id, []).append((r.key, r.value))
                            count += 1
                else:
                    for r in batch.records():
                        if r.offset >= offset and r.key is not None:
                            self._replay(r.key, r.value)
                            count += 1
                offset = batch.next_offset
        # Transactions still open at the log end: their offsets stay pending until the marker arrives.
        for producer_id, records in pending.items():
            for key, value in records:
                kind = codec.decode_key(key)
                if kind[0] != "offset" or value is None:
                    continue
                _, group_id, topic, partition = kind
                group = self.groups.get(group_id)
                if group is None:
                    group = self.groups[group_id] = GroupMetadata(group_id)
                group.pending_transactional_offsets.setdefault(producer_id, {})[(topic, partition)] = OffsetAndMetadata(
                    *codec.decode_offset_value(value)
                )
        return count

    def _replay(self, key: bytes, value: bytes | None) -> None:
        kind = codec.decode_key(key)
        if kind[0] == "offset":
            _, group_id, topic, partition = kind
            group = self.groups.get(group_id)
            if value is None:
                if group is not None:
                    group.offsets.pop((topic, partition), None)
                return
            if group is None:
                group = self.groups[group_id] = GroupMetadata(group_id)
            group.offsets[(topic, partition)] = OffsetAndMetadata(*codec.decode_offset_value(value))
        else:
            group_id = kind[1]
            if value is None:
                self.groups.pop(group_id, None)
                return
            group = self.groups.get(group_id)
            if group is None:
                group = self.groups[group_id] = GroupMetadata(group_id)
            meta = codec.decode_group_value(value)
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
        records: list[tuple[bytes, bytes | None]],
        callback,
        producer: tuple[int, int] | None = None,
    ) -> None:
        """Append ``[(key, value or None)]`` to the group's partition; ``callback(error_code)`` once.
        ``producer``: (producer id, epoch) of a transactional offset commit (a transactional batch,
        appended with the coordinator's origin: epoch checks, no sequence checks)."""
        builder = MemoryRecordsBuilder(is_transactional=producer is not None)
        if producer is not None:
            builder.set_producer_state(producer[0], producer[1], 0, True)
        now = self.time.milliseconds()
        for key, value in records:
            builder.append(now, key, value)
        batch = builder.build()
        tp = (GROUP_METADATA_TOPIC_NAME, self.partition_for(group_id))

        def done(responses: dict) -> None:
            callback(_APPEND_ERRORS.get(responses[tp]["error_code"], responses[tp]["error_code"]))

        entries = {tp: memoryview(batch)}
        if producer is None:
            self.replica_manager.append_records(self.commit_timeout_ms, self.required_acks, True, entries, done)
        else:
            self.replica_manager.append_records(
                self.commit_timeout_ms, self.required_acks, True, entries, done, origin=AppendOrigin.COORDINATOR
            )

    def store_group(self, group: GroupMetadata, callback) -> None:
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
        self.append(group.group_id, [(codec.group_key(group.group_id), value)], callback)

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

    def store_transactional_offsets(
        self,
        group: GroupMetadata,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[tuple[str, int], OffsetAndMetadata],
        callback,
    ) -> None:
        """TxnOffsetCommit: append the offsets in a transactional batch of the producer; once written
        they are pending until the transaction's marker (``handle_txn_completion``)."""
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

        self.append(group.group_id, records, done, (producer_id, producer_epoch))

    def handle_txn_completion(self, producer_id: int, partitions: set[int], commit: bool) -> None:
        """A COMMIT/ABORT marker of ``producer_id`` was written to these ``__consumer_offsets``
        partitions: their groups apply or drop its pending offsets (Kafka's handleTxnCompletion)."""
        with self._lock:
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
        records = [(codec.offset_key(group.group_id, t, p), None) for t, p in group.offsets]
        records.append((codec.group_key(group.group_id), None))
        with group.lock:
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
                if group.state is not GroupState.EMPTY:
                    continue
                expired = [
                    tp
                    for tp, o in group.offsets.items()
                    if o.commit_timestamp >= 0 and now - o.commit_timestamp >= self.offsets_retention_ms
                ]
            if expired:
                removed += len(expired)
                self.delete_offsets(group, expired, lambda code: None)
            with group.lock:
                if not group.offsets and not group.members and group.state is GroupState.EMPTY:
                    group.transition_to(GroupState.DEAD, now)
                    self.delete_group(group, lambda code: None)
        return removed
