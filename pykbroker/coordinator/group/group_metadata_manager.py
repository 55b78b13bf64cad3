"""GroupMetadataManager: groups and committed offsets persisted in ``__consumer_offsets``.

Mirrors ``kafka.coordinator.group.GroupMetadataManager`` (classic groups): a group lives in partition
``abs(hash(group id)) % offsets.topic.num.partitions`` of the internal compacted topic; offset commits
and group metadata are written there as records (keys/values in :mod:`record_codec`) through the
ReplicaManager (acks=1, internal topic writes allowed) and read back when the coordinator first
touches the partition after a start (its "load"). Expired offsets (``offsets.retention.minutes``
after the commit, only while the group is Empty) are removed with tombstones by a scheduled task
(``offsets.retention.check.interval.ms``).

Threading: ``_lock`` guards the group map and the loaded-partition set; each group's own state is
guarded by its lock. Appends run on the calling handler thread.
"""

from __future__ import annotations

import threading

from pykbroker.coordinator.group import record_codec as codec
from pykbroker.coordinator.group.group_metadata import GroupMetadata, GroupState, OffsetAndMetadata
from pykbroker.metadata.topic_names import GROUP_METADATA_TOPIC_NAME
from pykbroker.protocol import errors
from pykbroker.record.default_record_batch import iter_batches
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from pykbroker.utils.logging import get_logger

_log = get_logger("GroupMetadataManager")


class GroupMetadataManager:
    def __init__(self, replica_manager, log_manager, num_partitions: int, time, offsets_retention_ms: int):
        self.replica_manager = replica_manager
        self.log_manager = log_manager
        self.num_partitions = num_partitions
        self.time = time
        self.offsets_retention_ms = offsets_retention_ms
        self.groups: dict[str, GroupMetadata] = {}
        self.loaded: set[int] = set()
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

    # -- load ------------------------------------------------------------------------------------------
    def ensure_loaded(self, partition: int) -> None:
        with self._lock:
            if partition in self.loaded:
                return
            log = self.log_manager.get_log(GROUP_METADATA_TOPIC_NAME, partition)
            cache = getattr(self.replica_manager, "metadata_cache", None)
            registration = cache.partition(GROUP_METADATA_TOPIC_NAME, partition) if cache is not None else None
            if registration is not None and registration.leader != self.replica_manager.node_id:
                # Another broker leads this partition: it is the group's coordinator (clients re-run
                # FindCoordinator on NOT_COORDINATOR).
                raise errors.NotCoordinatorError(
                    f"This broker is not the coordinator of {GROUP_METADATA_TOPIC_NAME}-{partition}"
                )
            if log is None or self.replica_manager.get_partition(GROUP_METADATA_TOPIC_NAME, partition) is None:
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
        offset, end, count = log.log_start_offset, log.high_watermark, 0
        while offset < end:
            info = log.read(offset, 1 << 20)
            data = info.records.read_bytes()
            if not data:
                break
            for _, batch in iter_batches(memoryview(data)):
                if batch.last_offset < offset:
                    continue
                if not batch.is_control_batch:
                    for r in batch.records():
                        if r.offset >= offset and r.key is not None:
                            self._replay(r.key, r.value)
                            count += 1
                offset = batch.next_offset
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
    def append(self, group_id: str, records: list[tuple[bytes, bytes | None]], callback) -> None:
        """Append ``[(key, value or None)]`` to the group's partition; ``callback(error_code)`` once."""
        builder = MemoryRecordsBuilder()
        now = self.time.milliseconds()
        for key, value in records:
            builder.append(now, key, value)
        batch = builder.build()
        tp = (GROUP_METADATA_TOPIC_NAME, self.partition_for(group_id))

        def done(responses: dict) -> None:
            code = responses[tp]["error_code"]
            if code in (errors.UNKNOWN_TOPIC_OR_PARTITION, errors.NOT_LEADER_OR_FOLLOWER):
                code = errors.NOT_COORDINATOR
            elif code in (errors.MESSAGE_TOO_LARGE, errors.RECORD_LIST_TOO_LARGE, errors.INVALID_FETCH_SIZE):
                code = errors.INVALID_COMMIT_OFFSET_SIZE
            callback(code)

        self.replica_manager.append_records(5000, 1, True, {tp: memoryview(batch)}, done)

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
