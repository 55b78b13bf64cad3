"""ShareCoordinator: the share partitions' durable state, kept in ``__share_group_state`` by the leader of each of
its partitions (KIP-932).

Mirrors Kafka's ``ShareCoordinatorService`` over the coordinator runtime, in the way pykbroker's transaction state
manager keeps ``__transaction_state``: a share partition ``(group, topic id, partition)`` lives in partition
``partition_for(coordinator_key)`` of the topic; ``on_election`` loads that partition from its log into a
:class:`~pykbroker.coordinator.share.share_coordinator_shard.ShareCoordinatorShard` (on the scheduler; requests
meanwhile get COORDINATOR_LOAD_IN_PROGRESS), ``on_resignation`` drops it (NOT_COORDINATOR afterwards, also for
the operations still queued). Each operation runs against the shard's state; the records it produces are appended
with acks=-1 and ``share.coordinator.write.timeout.ms``, replayed into the shard once written, and only then
answered. Operations of one shard run one at a time in arrival order, so each sees the state its predecessors
wrote (Kafka's runtime serialises a shard's writes on its event loop). Append errors as Kafka's
``ShareCoordinatorService`` answers them: NOT_ENOUGH_REPLICAS(_AFTER_APPEND) / REQUEST_TIMED_OUT /
UNKNOWN_TOPIC_OR_PARTITION -> COORDINATOR_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER / KAFKA_STORAGE_ERROR ->
NOT_COORDINATOR, record size errors -> UNKNOWN_SERVER_ERROR.

Every operation takes a callback called once with the result (a Kafka error code, or a
:class:`~pykbroker.coordinator.share.persister.ReadStateResult` / ``ReadSummaryResult``), on the caller's thread
when nothing is written, else on the thread completing the append.

Threading: ``_lock`` guards the shard table; each shard's state and queue are guarded by the shard's lock.
"""

from __future__ import annotations

import collections
import threading
import uuid
from collections.abc import Callable
from typing import Any

from pykbroker.config.broker_configs.share_coordinator_configs import (
    SHARE_COORDINATOR_SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT_CONFIG,
    SHARE_COORDINATOR_STATE_TOPIC_NUM_PARTITIONS_CONFIG,
    SHARE_COORDINATOR_STATE_TOPIC_PRUNE_INTERVAL_MS_CONFIG,
    SHARE_COORDINATOR_WRITE_TIMEOUT_MS_CONFIG,
)
from pykbroker.coordinator.append_errors import COORDINATOR_APPEND_ERRORS
from pykbroker.coordinator.share.persister import (
    PersisterStateBatch,
    ReadStateResult,
    ReadSummaryResult,
)
from pykbroker.coordinator.share.share_coordinator_records import coordinator_key, partition_for
from pykbroker.coordinator.share.share_coordinator_shard import Records, ShareCoordinatorShard
from pykbroker.log.fetch_data_info import FetchIsolation
from pykbroker.log.producer_state_entry import AppendOrigin
from pykbroker.metadata.topic_names import SHARE_GROUP_STATE_TOPIC_NAME
from pykbroker.protocol import errors
from pykbroker.record.default_record_batch import iter_batches
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from pykbroker.utils.logging import get_logger

_log = get_logger("ShareCoordinator")


# An operation: computes (records, result) from the shard; its callback gets the result or an error code.
_Op = tuple[Callable[[ShareCoordinatorShard], tuple[Records, Any]], Callable[[int], Any], Callable[[Any], None]]


class _LoadedShard:
    __slots__ = ("busy", "epoch", "lock", "queue", "shard", "unloaded")

    def __init__(self, epoch: int, shard: ShareCoordinatorShard):
        self.epoch = epoch
        self.shard = shard
        self.lock = threading.Lock()
        self.queue: collections.deque[_Op] = collections.deque()
        self.busy = False
        self.unloaded = False


class ShareCoordinator:
    def __init__(self, node_id: int, replica_manager, log_manager, config, time, scheduler, topic_exists=None):
        """``topic_exists(topic_id, partition) -> bool``: whether the metadata knows the share partition's topic
        partition (writes and reads of others get UNKNOWN_TOPIC_OR_PARTITION); None: every one exists."""
        self.node_id = node_id
        self.replica_manager = replica_manager
        self.log_manager = log_manager
        self.time = time
        self.scheduler = scheduler
        self.num_partitions: int = config[SHARE_COORDINATOR_STATE_TOPIC_NUM_PARTITIONS_CONFIG]
        self.records_per_snapshot: int = config[SHARE_COORDINATOR_SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT_CONFIG]
        self.write_timeout_ms: int = config[SHARE_COORDINATOR_WRITE_TIMEOUT_MS_CONFIG]
        self.topic_exists: Callable[[uuid.UUID, int], bool] = topic_exists or (lambda tid, p: True)
        self._lock = threading.Lock()
        self._shards: dict[int, _LoadedShard] = {}
        self._loading: dict[int, int] = {}  # partition -> leader epoch being loaded
        self._epochs: dict[int, int] = {}  # partition -> latest leader epoch seen
        #: partition -> the offset last pruned to (DeleteRecords answered), Kafka's last-pruned-offset
        self.last_pruned_offsets: dict[int, int] = {}
        registry = getattr(replica_manager, "metrics", None)
        if registry is not None:  # Kafka's share-coordinator-metrics last-pruned-offset{topic, partition}
            registry.gauge_family(
                "kafka.server:type=share-coordinator-metrics,name=last-pruned-offset",
                ("topic", "partition"),
                self._last_pruned_rows,
            )
        prune_ms = int(config[SHARE_COORDINATOR_STATE_TOPIC_PRUNE_INTERVAL_MS_CONFIG])
        self._prune_task = scheduler.schedule("share-coordinator-prune", self.prune, prune_ms, prune_ms)

    def partition_for(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        return partition_for(coordinator_key(group_id, topic_id, partition), self.num_partitions)

    def shutdown(self) -> None:
        self._prune_task.cancel()
        with self._lock:
            partitions = list(self._shards)
        for p in partitions:
            self.on_resignation(p, None)

    # -- leadership -----------------------------------------------------------------------------------
    def on_election(self, partition: int, leader_epoch: int) -> None:
        """Lead ``__share_group_state-<partition>`` at ``leader_epoch``: load it on the scheduler."""
        with self._lock:
            if self._epochs.get(partition, -1) > leader_epoch:
                return
            self._epochs[partition] = leader_epoch
            old = self._shards.pop(partition, None)
            self._loading[partition] = leader_epoch
        if old is not None:
            self._unload(old)
        self.scheduler.schedule(
            f"load-share-state-{SHARE_GROUP_STATE_TOPIC_NAME}-{partition}",
            lambda: self._load_partition(partition, leader_epoch),
        )

    def on_resignation(self, partition: int, leader_epoch: int | None) -> None:
        """Stop leading the partition (``leader_epoch`` None: deleted); its queued operations get NOT_COORDINATOR."""
        with self._lock:
            if leader_epoch is not None:
                if self._epochs.get(partition, -1) > leader_epoch:
                    return
                self._epochs[partition] = leader_epoch
            self._loading.pop(partition, None)
            removed = self._shards.pop(partition, None)
        if removed is not None:
            self._unload(removed)
            _log.info("Unloaded share group state", partition=f"{SHARE_GROUP_STATE_TOPIC_NAME}-{partition}")

    @staticmethod
    def _unload(loaded: _LoadedShard) -> None:
        with loaded.lock:
            loaded.unloaded = True
            queued = list(loaded.queue)
            loaded.queue.clear()
        for _, fail, callback in queued:
            callback(fail(errors.NOT_COORDINATOR))

    def _load_partition(self, partition: int, leader_epoch: int) -> None:
        shard = ShareCoordinatorShard(self.records_per_snapshot)
        try:
            self._read_partition(partition, shard)
        except Exception as e:  # noqa: BLE001 - a load that fails leaves the partition unloaded (NOT_COORDINATOR)
            _log.error("Failed to load share group state", partition=partition, error=str(e))
            with self._lock:
                if self._loading.get(partition) == leader_epoch:
                    del self._loading[partition]
            return
        with self._lock:
            if self._loading.get(partition) != leader_epoch:
                return  # resigned or re-elected meanwhile
            del self._loading[partition]
            self._shards[partition] = _LoadedShard(leader_epoch, shard)
        _log.info(
            "Loaded share group state",
            partition=f"{SHARE_GROUP_STATE_TOPIC_NAME}-{partition}",
            share_partitions=len(shard.states),
            leader_epoch=leader_epoch,
        )

    def _read_partition(self, partition: int, shard: ShareCoordinatorShard) -> None:
        log = self.log_manager.get_log(SHARE_GROUP_STATE_TOPIC_NAME, partition)
        if log is None:
            return
        offset, end = log.log_start_offset, log.log_end_offset
        while offset < end:
            data = log.read(offset, 1 << 20, FetchIsolation.LOG_END).records.read_bytes()
            if not data:
                break
            progressed = False
            for _, batch in iter_batches(memoryview(data)):
                if batch.last_offset < offset:
                    continue
                if not batch.is_control_batch:
                    for r in batch.records():
                        if r.offset >= offset and r.key is not None:
                            shard.replay(r.key, r.value, r.offset)
                offset = batch.next_offset
                progressed = True
            if not progressed:
                break

    # -- operations -----------------------------------------------------------------------------------
    def initialize_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, start_offset: int, callback
    ) -> None:
        """InitializeShareGroupState of one share partition; ``callback(error code)``."""
        key = (group_id, topic_id, partition)
        self._submit(key, lambda s: s.initialize_state(key, state_epoch, start_offset), lambda code: code, callback)

    def write_state(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: tuple[PersisterStateBatch, ...],
        callback,
        delivery_complete_count: int = -1,
    ) -> None:
        """WriteShareGroupState of one share partition; ``callback(error code)``."""
        key = (group_id, topic_id, partition)
        if partition >= 0 and not self.topic_exists(topic_id, partition):
            callback(errors.UNKNOWN_TOPIC_OR_PARTITION)
            return
        self._submit(
            key,
            lambda s: s.write_state(key, state_epoch, leader_epoch, start_offset, batches, delivery_complete_count),
            lambda code: code,
            callback,
        )

    def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int, callback) -> None:
        """ReadShareGroupState of one share partition; ``callback(ReadStateResult)``."""
        key = (group_id, topic_id, partition)
        if partition >= 0 and not self.topic_exists(topic_id, partition):
            callback(ReadStateResult(errors.UNKNOWN_TOPIC_OR_PARTITION, -1, -1))
            return
        self._submit(
            key, lambda s: s.read_state(key, leader_epoch), lambda code: ReadStateResult(code, -1, -1), callback
        )

    def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int, callback) -> None:
        """ReadShareGroupStateSummary of one share partition; ``callback(ReadSummaryResult)``."""
        key = (group_id, topic_id, partition)
        self._submit(key, lambda s: ([], s.read_summary(key)), lambda code: ReadSummaryResult(code, -1, -1), callback)

    def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int, callback) -> None:
        """DeleteShareGroupState of one share partition; ``callback(error code)``."""
        key = (group_id, topic_id, partition)
        self._submit(key, lambda s: s.delete_state(key), lambda code: code, callback)

    # -- pruning (Kafka 4.1's ShareCoordinatorService pruning job) ----------------------------------------
    def _last_pruned_rows(self) -> list[tuple[tuple, float]]:
        with self._lock:
            return [((SHARE_GROUP_STATE_TOPIC_NAME, p), float(o)) for p, o in sorted(self.last_pruned_offsets.items())]

    def prune(self) -> None:
        """Every ``share.coordinator.state.topic.prune.interval.ms`` (scheduler thread): for each loaded partition,
        DeleteRecords up to its shard's last redundant offset when that moved past the last pruned one (the
        internal topic's records are deleted as Kafka's coordinator does, ``internal_topics_allowed``)."""
        with self._lock:
            loaded_shards = list(self._shards.items())
        for partition, loaded in loaded_shards:
            with loaded.lock:
                if loaded.unloaded:
                    continue
                offset = loaded.shard.last_redundant_offset()
            if offset is None or offset <= self.last_pruned_offsets.get(partition, 0):
                continue
            tp = (SHARE_GROUP_STATE_TOPIC_NAME, partition)

            def pruned(results: dict, partition=partition, offset=offset, tp=tp) -> None:
                _low, code = results[tp]
                if code == errors.NONE:
                    with self._lock:
                        if offset > self.last_pruned_offsets.get(partition, 0):
                            self.last_pruned_offsets[partition] = offset
                    _log.debug("Pruned share group state", partition=f"{tp[0]}-{partition}", offset=offset)
                else:
                    _log.info(
                        "Pruning share group state failed",
                        partition=f"{tp[0]}-{partition}",
                        offset=offset,
                        error=errors.name_of(code),
                    )

            try:
                self.replica_manager.delete_records(
                    self.write_timeout_ms, {tp: offset}, pruned, internal_topics_allowed=True
                )
            except Exception as e:  # noqa: BLE001 - the next run tries again
                _log.error("Pruning share group state failed", partition=partition, error=str(e))

    # -- the per-shard queue --------------------------------------------------------------------------
    def _submit(self, key, compute, fail, callback) -> None:
        partition = self.partition_for(*key)
        with self._lock:
            loading = partition in self._loading
            loaded = self._shards.get(partition)
        if loading:
            callback(fail(errors.COORDINATOR_LOAD_IN_PROGRESS))
            return
        if loaded is None:
            callback(fail(errors.NOT_COORDINATOR))
            return
        with loaded.lock:
            rejected = loaded.unloaded
            start = False
            if not rejected:
                loaded.queue.append((compute, fail, callback))
                start = not loaded.busy
                loaded.busy = True
        if rejected:
            callback(fail(errors.NOT_COORDINATOR))
        elif start:
            self._drain(partition, loaded)

    def _drain(self, partition: int, loaded: _LoadedShard) -> None:
        while True:
            with loaded.lock:
                if not loaded.queue or loaded.unloaded:
                    loaded.busy = False
                    return
                compute, fail, callback = loaded.queue.popleft()
                try:
                    records, result = compute(loaded.shard)
                except Exception as e:  # noqa: BLE001 - a bug answers the caller, never kills the queue
                    _log.error("Share coordinator operation failed", error=str(e))
                    records, result = [], fail(errors.UNKNOWN_SERVER_ERROR)
            if not records:
                callback(result)
                continue
            if not self._append(partition, loaded, records, result, fail, callback):
                return  # the append completes later and drains the rest

    def _append(self, partition: int, loaded: _LoadedShard, records: Records, result, fail, callback) -> bool:
        """Append ``records``; True when the append completed at once (the caller goes on draining)."""
        builder = MemoryRecordsBuilder()
        now = self.time.milliseconds()
        for k, v in records:
            builder.append(now, k, v)
        tp = (SHARE_GROUP_STATE_TOPIC_NAME, partition)
        state = {"sync": True, "done": False}

        def done(responses: dict) -> None:
            code = responses[tp].error_code
            code = COORDINATOR_APPEND_ERRORS.get(code, code)
            answer = result
            with loaded.lock:
                if loaded.unloaded:
                    answer = fail(errors.NOT_COORDINATOR)
                elif code != errors.NONE:
                    answer = fail(code)
                else:
                    try:
                        base = responses[tp].base_offset
                        for i, (k, v) in enumerate(records):
                            loaded.shard.replay(k, v, base + i if base >= 0 else None)
                    except Exception as e:  # noqa: BLE001 - our own records: a bug, answered as such
                        _log.error("Replaying a share coordinator record failed", error=str(e))
                        answer = fail(errors.UNKNOWN_SERVER_ERROR)
                finished_at_once = state["sync"]
                state["done"] = True
            callback(answer)
            if not finished_at_once:
                self._drain(partition, loaded)

        self.replica_manager.append_records(
            self.write_timeout_ms, -1, True, {tp: memoryview(builder.build())}, done, AppendOrigin.COORDINATOR
        )
        with loaded.lock:
            state["sync"] = False
            return bool(state["done"])
