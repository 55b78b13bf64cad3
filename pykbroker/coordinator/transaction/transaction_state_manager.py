"""TransactionStateManager: the transactional ids of the ``__transaction_state`` partitions this broker
leads, persisted as records of that compacted topic.

Mirrors ``kafka.coordinator.transaction.TransactionStateManager``. A transactional id lives in partition
``abs(javaHashCode(id)) % transaction.state.log.num.partitions``; its coordinator is that partition's
leader. Leadership comes from the metadata publisher: ``on_election`` loads the partition from its log
(log start to log end, on the scheduler; requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS) and then
hands transactions caught in PrepareCommit/PrepareAbort to the marker channel, so their markers are
(re)written (records whose key has a version it does not know are skipped with a warning, as Kafka's
``UnknownKey``); ``on_resignation`` drops the partition (NOT_COORDINATOR afterwards). The partition's leader
epoch is the *coordinator epoch* written into every marker, so partitions reject markers of an older
coordinator.

Every transition is appended with acks=-1 and ``request.timeout.ms``; the in-memory state changes only
when the append succeeded (Kafka's ``appendTransactionToLog``), with Kafka's error mapping. Scheduled
tasks list the transactions that outlived their timeout (the coordinator aborts them) and remove
transactional ids idle for ``transactional.id.expiration.ms`` (a tombstone each).

Threading: ``_lock`` guards the partition maps; each TransactionMetadata is guarded by its own lock.
Append callbacks run on the thread completing the append (at once with one replica, else the follower
fetch that moves the high watermark, or the purgatory's reaper on timeout).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import NamedTuple

from pykbroker.config.broker_configs.server_configs import REQUEST_TIMEOUT_MS_CONFIG
from pykbroker.config.broker_configs.transaction_configs import (
    TRANSACTION_MAX_TIMEOUT_MS_CONFIG,
    TRANSACTION_STATE_LOG_NUM_PARTITIONS_CONFIG,
    TRANSACTIONAL_ID_EXPIRATION_MS_CONFIG,
)
from pykbroker.coordinator.append_errors import COORDINATOR_APPEND_ERRORS
from pykbroker.coordinator.transaction import transaction_log as txn_log
from pykbroker.coordinator.transaction.transaction_metadata import (
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from pykbroker.log.fetch_data_info import FetchIsolation
from pykbroker.log.producer_state_entry import AppendOrigin
from pykbroker.metadata.topic_names import TRANSACTION_STATE_TOPIC_NAME
from pykbroker.protocol import errors
from pykbroker.record.default_record_batch import iter_batches
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from pykbroker.utils.logging import get_logger

_log = get_logger("TransactionStateManager")


class CoordinatorEpochAndMetadata(NamedTuple):
    coordinator_epoch: int
    metadata: TransactionMetadata


class _PartitionCache:
    def __init__(self, coordinator_epoch: int):
        self.coordinator_epoch = coordinator_epoch
        self.metadata: dict[str, TransactionMetadata] = {}


class TransactionStateManager:
    def __init__(
        self,
        node_id: int,
        replica_manager,
        log_manager,
        config,
        time,
        scheduler,
        transaction_version: Callable[[], int] | None = None,
    ):
        """``transaction_version()``: the finalized ``transaction.version`` (None: always 0)."""
        self.node_id = node_id
        self.replica_manager = replica_manager
        self.log_manager = log_manager
        self.time = time
        self.scheduler = scheduler
        self.num_partitions = config[TRANSACTION_STATE_LOG_NUM_PARTITIONS_CONFIG]
        self.max_timeout_ms = config[TRANSACTION_MAX_TIMEOUT_MS_CONFIG]
        self.expiration_ms = config[TRANSACTIONAL_ID_EXPIRATION_MS_CONFIG]
        self.request_timeout_ms = config[REQUEST_TIMEOUT_MS_CONFIG]
        self._lock = threading.RLock()
        self._caches: dict[int, _PartitionCache] = {}
        #: the finalized ``transaction.version`` (KIP-890): from 1 on, values are written as flexible v1
        self.transaction_version: Callable[[], int] = transaction_version or (lambda: 0)
        self._loading: dict[int, int] = {}  # partition -> coordinator epoch being loaded
        self._epochs: dict[int, int] = {}  # partition -> latest leader epoch seen (election or resignation)

    # -- lookups ------------------------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return txn_log.partition_for(transactional_id, self.num_partitions)

    def validate_transaction_timeout_ms(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.max_timeout_ms

    def get_transaction_state(self, transactional_id: str) -> CoordinatorEpochAndMetadata | None:
        """The id's metadata with the coordinator epoch, or None if unknown. Raises NotCoordinatorError
        when this broker does not lead the id's partition, CoordinatorLoadInProgressError while it loads."""
        partition = self.partition_for(transactional_id)
        with self._lock:
            if partition in self._loading:
                raise errors.CoordinatorLoadInProgressError(
                    f"{TRANSACTION_STATE_TOPIC_NAME}-{partition} is being loaded"
                )
            cache = self._caches.get(partition)
            if cache is None:
                raise errors.NotCoordinatorError(
                    f"This broker is not the coordinator of {TRANSACTION_STATE_TOPIC_NAME}-{partition}"
                )
            metadata = cache.metadata.get(transactional_id)
            return None if metadata is None else CoordinatorEpochAndMetadata(cache.coordinator_epoch, metadata)

    def put_transaction_state_if_not_exists(self, metadata: TransactionMetadata) -> CoordinatorEpochAndMetadata:
        partition = self.partition_for(metadata.transactional_id)
        with self._lock:
            cache = self._caches.get(partition)
            if cache is None or partition in self._loading:
                raise errors.NotCoordinatorError(
                    f"This broker is not the coordinator of {TRANSACTION_STATE_TOPIC_NAME}-{partition}"
                )
            existing = cache.metadata.setdefault(metadata.transactional_id, metadata)
            return CoordinatorEpochAndMetadata(cache.coordinator_epoch, existing)

    def coordinator_epoch_of(self, partition: int) -> int | None:
        with self._lock:
            cache = self._caches.get(partition)
            return None if cache is None or partition in self._loading else cache.coordinator_epoch

    def all_transactions(self) -> list[TransactionMetadata]:
        """Every loaded transaction (a snapshot of the list; read each under its lock)."""
        with self._lock:
            return [m for p, c in self._caches.items() if p not in self._loading for m in list(c.metadata.values())]

    @property
    def is_loading(self) -> bool:
        with self._lock:
            return bool(self._loading)

    def timed_out_transactions(self) -> list[tuple[str, int, int]]:
        """``[(transactional id, producer id, producer epoch)]`` of Ongoing transactions older than their
        timeout and not in a transition (Kafka's ``timedOutTransactions``)."""
        now = self.time.milliseconds()
        out = []
        for m in self.all_transactions():
            with m.lock:
                if (
                    m.state is TransactionState.ONGOING
                    and not m.pending_transition_in_progress
                    and m.txn_start_timestamp + m.txn_timeout_ms < now
                ):
                    out.append((m.transactional_id, m.producer_id, m.producer_epoch))
        return out

    # -- leadership ---------------------------------------------------------------------------
    def on_election(self, partition: int, coordinator_epoch: int, send_markers) -> None:
        """Lead ``partition`` at ``coordinator_epoch``: load it on the scheduler, then call
        ``send_markers(coordinator_epoch, commit, metadata, transit)`` for each transaction caught
        between prepare and complete."""
        with self._lock:
            if self._epochs.get(partition, -1) > coordinator_epoch:
                return
            self._epochs[partition] = coordinator_epoch
            self._caches.pop(partition, None)
            self._loading[partition] = coordinator_epoch
        self.scheduler.schedule(
            f"load-txns-for-partition-{TRANSACTION_STATE_TOPIC_NAME}-{partition}",
            lambda: self._load_partition(partition, coordinator_epoch, send_markers),
        )

    def on_resignation(self, partition: int, coordinator_epoch: int | None) -> None:
        with self._lock:
            if coordinator_epoch is not None:
                if self._epochs.get(partition, -1) > coordinator_epoch:
                    return
                self._epochs[partition] = coordinator_epoch
            self._loading.pop(partition, None)
            removed = self._caches.pop(partition, None)
        if removed is not None:
            _log.info(
                "Unloaded transaction metadata",
                partition=f"{TRANSACTION_STATE_TOPIC_NAME}-{partition}",
                transactions=len(removed.metadata),
            )

    def _load_partition(self, partition: int, coordinator_epoch: int, send_markers) -> None:
        try:
            loaded = self._read_partition(partition)
        except Exception as e:  # noqa: BLE001 - a load that fails leaves the partition unloaded (NOT_COORDINATOR)
            _log.error("Failed to load transaction metadata", partition=partition, error=str(e))
            with self._lock:
                if self._loading.get(partition) == coordinator_epoch:
                    del self._loading[partition]
            return
        cache = _PartitionCache(coordinator_epoch)
        cache.metadata = loaded
        with self._lock:
            if self._loading.get(partition) != coordinator_epoch:
                return  # resigned or re-elected meanwhile
            self._caches[partition] = cache
            del self._loading[partition]
        _log.info(
            "Loaded transaction metadata",
            partition=f"{TRANSACTION_STATE_TOPIC_NAME}-{partition}",
            transactions=len(loaded),
            coordinator_epoch=coordinator_epoch,
        )
        for m in loaded.values():
            with m.lock:
                if m.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
                    commit = m.state is TransactionState.PREPARE_COMMIT
                    transit = m.prepare_no_transit()
                    pending = m.state
                else:
                    continue
            _log.info(
                "Sending markers of a transaction found in the log",
                transactional_id=m.transactional_id,
                state=pending.state_name,
            )
            send_markers(coordinator_epoch, commit, m, transit)

    def _read_partition(self, partition: int) -> dict[str, TransactionMetadata]:
        log = self.log_manager.get_log(TRANSACTION_STATE_TOPIC_NAME, partition)
        loaded: dict[str, TransactionMetadata] = {}
        if log is None:
            return loaded
        offset, end = log.log_start_offset, log.log_end_offset
        while offset < end:
            info = log.read(offset, 1 << 20, FetchIsolation.LOG_END)
            data = info.records.read_bytes()
            if not data:
                break
            progressed = False
            for _, batch in iter_batches(memoryview(data)):
                if batch.last_offset < offset:
                    continue
                if not batch.is_control_batch:
                    for r in batch.records():
                        if r.offset < offset or r.key is None:
                            continue
                        version = txn_log.key_version(r.key)
                        if version != txn_log.KEY_VERSION:
                            _log.warning(
                                "Unknown message key version while loading transaction state; ignoring it (it could "
                                "be a left over from an aborted upgrade)",
                                partition=f"{TRANSACTION_STATE_TOPIC_NAME}-{partition}",
                                version=version,
                            )
                            continue
                        tid = txn_log.decode_key(r.key)
                        if r.value is None:
                            loaded.pop(tid, None)
                        else:
                            loaded[tid] = txn_log.decode_value(tid, r.value)
                offset = batch.next_offset
                progressed = True
            if not progressed:
                break
        return loaded

    # -- appends ------------------------------------------------------------------------------
    def append_transaction_to_log(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        transit: TxnTransitMetadata,
        callback,
        retry_on_error=lambda code: False,
    ) -> None:
        """Append ``transit`` (a tombstone for Dead) and complete the transition on success;
        ``callback(error_code)`` once, after the in-memory state changed. On an error for which
        ``retry_on_error(code)`` is true the pending state stays (the caller retries). An append that succeeded
        after the partition was resigned or is led at another coordinator epoch answers NOT_COORDINATOR, or
        COORDINATOR_LOAD_IN_PROGRESS while the partition is being loaded again (the state is not changed)."""
        partition = self.partition_for(transactional_id)
        value = None
        if transit.txn_state is not TransactionState.DEAD:
            flexible = self.transaction_version() >= 1 or transit.client_transaction_version >= 2
            value = txn_log.value_bytes(transit, 1 if flexible else 0)
        builder = MemoryRecordsBuilder()
        builder.append(self.time.milliseconds(), txn_log.key_bytes(transactional_id), value)
        tp = (TRANSACTION_STATE_TOPIC_NAME, partition)

        def done(responses: dict) -> None:
            code = responses[tp].error_code
            code = COORDINATOR_APPEND_ERRORS.get(code, code)
            with self._lock:
                loading = partition in self._loading
                cache = self._caches.get(partition)
                current = None if cache is None else cache.metadata.get(transactional_id)
                epoch_ok = cache is not None and cache.coordinator_epoch == coordinator_epoch
            if code == errors.NONE:
                if loading:  # re-elected meanwhile (Kafka: getTransactionState's error)
                    code = errors.COORDINATOR_LOAD_IN_PROGRESS
                elif current is None or not epoch_ok:
                    code = errors.NOT_COORDINATOR
                else:
                    with current.lock:
                        try:
                            current.complete_transition_to(transit)
                        except Exception as e:  # noqa: BLE001 - a state-machine bug answers the client, never the thread
                            _log.error("Transaction state transition failed", error=str(e))
                            code = errors.UNKNOWN_SERVER_ERROR
                    if transit.txn_state is TransactionState.DEAD and code == errors.NONE:
                        with self._lock:
                            if cache is not None and cache.metadata.get(transactional_id) is current:
                                del cache.metadata[transactional_id]
            else:
                _log.info(
                    "Appending transaction state to the log failed",
                    transactional_id=transactional_id,
                    state=transit.txn_state.state_name,
                    error=errors.name_of(code),
                )
                if current is not None and epoch_ok and not retry_on_error(code):
                    with current.lock:
                        current.abort_transition()
            callback(code)

        self.replica_manager.append_records(
            self.request_timeout_ms,
            -1,
            True,
            {tp: memoryview(builder.build())},
            done,
            AppendOrigin.COORDINATOR,
        )

    # -- expiration ---------------------------------------------------------------------------
    def remove_expired_transactional_ids(self) -> int:
        """Tombstone ids idle for ``transactional.id.expiration.ms`` in Empty/Complete* states."""
        now = self.time.milliseconds()
        expired = 0
        for m in self.all_transactions():
            partition = self.partition_for(m.transactional_id)
            epoch = self.coordinator_epoch_of(partition)
            if epoch is None:
                continue
            with m.lock:
                if (
                    not m.state.is_expiration_allowed
                    or m.pending_transition_in_progress
                    or m.txn_last_update_timestamp + self.expiration_ms > now
                ):
                    continue
                transit = m.prepare_dead()
            expired += 1
            self.append_transaction_to_log(m.transactional_id, epoch, transit, lambda code: None)
        return expired
