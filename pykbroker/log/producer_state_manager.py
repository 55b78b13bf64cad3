"""Producer state of one partition: idempotence/transaction bookkeeping plus its snapshots.

Mirrors ``org.apache.kafka.storage.internals.log.ProducerStateManager``. The state covers the log up
to ``map_end_offset``; it is snapshotted to ``<map_end_offset>.snapshot`` on segment roll and on clean
shutdown, and rebuilt at load time from the latest snapshot plus a header-only scan of the batches
after it (see ``UnifiedLog``). Expired producers (no batch for ``producer.id.expiration.ms`` and no
open transaction) are dropped by a periodic task.
"""

from __future__ import annotations

import bisect
import os

from pykbroker.log.log_file_utils import (
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    offset_from_file_name,
    producer_snapshot_file,
)
from pykbroker.log.producer_state_entry import (
    AppendOrigin,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateEntry,
)
from pykbroker.log.producer_state_snapshot import (
    CorruptSnapshotError,
    read_snapshot,
    write_snapshot,
)
from pykbroker.utils.files import fsync_file
from pykbroker.utils.logging import get_logger

DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000


class VerificationGuard:
    """Proof that a partition leader asked the transaction coordinator whether the partition is in the
    producer's transaction (KIP-890 part 1, Kafka's ``VerificationGuard``): the append that starts the
    transaction must present the guard the log handed out; a marker in between invalidates it."""

    __slots__ = ()


class ProducerStateManager:
    """Not thread-safe: every method runs under the owning log's lock (as in Kafka)."""

    def __init__(
        self,
        topic_partition: tuple[str, int],
        log_dir: str,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ):
        self.topic_partition = topic_partition
        self.log_dir = log_dir
        self._log = get_logger("ProducerStateManager", partition=self._tp())
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self._ongoing_txns: dict[int, int] = {}  # first offset -> producer id
        # Completed transactions whose marker the high watermark has not passed yet: they still hold
        # the last stable offset back (Kafka's unreplicatedTxns). first offset -> CompletedTxn.
        self._unreplicated_txns: dict[int, CompletedTxn] = {}
        #: ``transaction.partition.verification.enable``: the first transactional write of a producer needs
        #: a verification guard (set by the LogManager from the broker config)
        self.transaction_verification_enabled = False
        #: producer id -> (guard, epoch, supports epoch bump: a transaction version 2 write asked for it)
        self._verification: dict[int, tuple[VerificationGuard, int, bool]] = {}
        self.map_end_offset = 0
        #: the log start offset last seen (load, truncation, DeleteRecords/retention): the floor of the first
        #: unstable offset
        self._log_start_offset = 0
        self._snapshots: list[int] = self._list_snapshots()

    def _list_snapshots(self) -> list[int]:
        offsets = []
        try:
            names = os.listdir(self.log_dir)
        except FileNotFoundError:
            return []
        for name in names:
            if name.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX):
                try:
                    offsets.append(offset_from_file_name(name))
                except ValueError:
                    continue
        return sorted(offsets)

    # -- queries ------------------------------------------------------------------------------
    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest transaction that is open, or completed with its marker not yet
        below the high watermark, but no lower than the log start offset (a transaction may have started
        below it: Kafka's ``UnifiedLog.maybeIncrementFirstUnstableOffset``); None if there is none."""
        if not self._ongoing_txns and not self._unreplicated_txns:
            return None
        first = min(min(self._ongoing_txns, default=1 << 63), min(self._unreplicated_txns, default=1 << 63))
        return max(first, self._log_start_offset)

    @property
    def has_unreplicated_txns(self) -> bool:
        return bool(self._unreplicated_txns)

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` is done: the first offset of the oldest other open transaction, else
        the offset after its marker (Kafka's ``lastStableOffset``)."""
        others = [o for o, pid in self._ongoing_txns.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Completed transactions whose marker is now below the HW stop holding the LSO back."""
        if self._unreplicated_txns:
            for first in [o for o, t in self._unreplicated_txns.items() if t.last_offset < high_watermark]:
                del self._unreplicated_txns[first]

    def snapshot_offsets(self) -> list[int]:
        return list(self._snapshots)

    def latest_snapshot_offset(self) -> int | None:
        return self._snapshots[-1] if self._snapshots else None

    # -- appends ------------------------------------------------------------------------------
    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        return ProducerAppendInfo(self.topic_partition, producer_id, self.producers.get(producer_id), origin)

    # -- transaction verification (KIP-890 part 1) ----------------------------------------------
    def maybe_create_verification_guard(
        self, producer_id: int, producer_epoch: int, supports_epoch_bump: bool = False
    ) -> VerificationGuard:
        """The producer's guard (a new one unless one of this or a newer epoch is waiting).
        ``supports_epoch_bump``: the write is of a transaction version 2 client (Produce v12), whose next
        transaction's epoch may arrive before the previous transaction's marker (which carries that epoch)."""
        current = self._verification.get(producer_id)
        if current is not None and current[1] >= producer_epoch:
            if current[1] == producer_epoch and supports_epoch_bump and not current[2]:
                self._verification[producer_id] = (current[0], current[1], True)
            return current[0]
        guard = VerificationGuard()
        self._verification[producer_id] = (guard, producer_epoch, supports_epoch_bump)
        return guard

    def verification_guard(self, producer_id: int) -> VerificationGuard | None:
        entry = self._verification.get(producer_id)
        return None if entry is None else entry[0]

    def update(self, info: ProducerAppendInfo) -> None:
        """Apply a validated append (after its bytes were written)."""
        entry = self.producers.get(info.producer_id)
        if entry is None:
            entry = self.producers[info.producer_id] = ProducerStateEntry(info.producer_id)
        entry.update(info.updated)
        for first_offset in info.started_txn_first_offsets:
            self._ongoing_txns[first_offset] = info.producer_id
        if info.started_txn_first_offsets:
            self._verification.pop(info.producer_id, None)  # a guard serves one transaction start
        elif info.completed_txns:
            # A marker ends any verification in progress, except (Kafka 4.0's UnifiedLog.updateProducers) one a
            # transaction version 2 write of the next transaction started: the marker of the previous one carries
            # the bumped epoch that write has, and the coordinator adds the partition once the markers are written.
            current = self._verification.get(info.producer_id)
            if current is None or not (current[2] and current[1] == info.updated.producer_epoch):
                self._verification.pop(info.producer_id, None)

    def complete_txn(self, txn: CompletedTxn) -> None:
        """``txn`` is over (after the caller indexed it if aborted): it waits for the HW."""
        if self._ongoing_txns.pop(txn.first_offset, None) is not None:
            self._unreplicated_txns[txn.first_offset] = txn

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    def apply_batches(
        self, batches, origin: AppendOrigin = AppendOrigin.REPLICATION, marker_of=None, on_completed=None
    ) -> None:
        """Replay batch headers (recovery/rebuild): no validation failures, state and map end offset
        advance past each batch. ``marker_of(batch)`` reads the end-transaction marker of a
        transactional control batch (None: markers are not read and transactions stay open);
        ``on_completed(txn, last_stable_offset)`` is called for each transaction a marker completes,
        before it is completed (the log indexes the aborted ones)."""
        infos: dict[int, ProducerAppendInfo] = {}
        end = None

        def flush() -> None:
            for info in infos.values():
                self.update(info)
            infos.clear()

        for batch in batches:
            if batch.has_producer_id:
                if batch.is_control_batch:
                    flush()  # the transaction's data must be applied before its marker completes it
                    marker = marker_of(batch) if marker_of is not None and batch.is_transactional else None
                    marker_info = self.prepare_update(batch.producer_id, origin)
                    marker_info.append(batch, marker)
                    self.update(marker_info)
                    for txn in marker_info.completed_txns:
                        if on_completed is not None:
                            on_completed(txn, self.last_stable_offset(txn))
                        self.complete_txn(txn)
                else:
                    data_info = infos.get(batch.producer_id)
                    if data_info is None:
                        data_info = infos[batch.producer_id] = self.prepare_update(batch.producer_id, origin)
                    data_info.append(batch)
            end = batch.next_offset
        flush()
        if end is not None:
            self.map_end_offset = end

    # -- expiration and truncation ------------------------------------------------------------
    def remove_expired_producers(self, now_ms: int) -> int:
        """Drop producers idle for ``producer_id_expiration_ms`` without an open transaction."""
        expired = [
            pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset is None and now_ms - e.last_timestamp >= self.producer_id_expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Completed transactions whose marker is below the new log start no longer hold the LSO back
        (Kafka's ``removeUnreplicatedTransactions``). An open transaction that started below it stays open,
        so that its data after the log start stays out of read_committed reads and its marker still
        completes (and, aborted, indexes) it. The map end offset never lags the log start offset."""
        for first_offset in [o for o, t in self._unreplicated_txns.items() if t.last_offset < log_start_offset]:
            del self._unreplicated_txns[first_offset]
        self._log_start_offset = max(self._log_start_offset, log_start_offset)
        self.map_end_offset = max(self.map_end_offset, log_start_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything (log truncated to empty, starting at ``offset``)."""
        self.producers.clear()
        self._ongoing_txns.clear()
        self._unreplicated_txns.clear()
        for snap in list(self._snapshots):
            self._remove_snapshot(snap)
        self.map_end_offset = offset
        self._log_start_offset = offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> None:
        """Delete snapshots outside ``(log_start_offset, log_end_offset]``; if the state is not exactly
        at ``log_end_offset``, reload from the latest remaining snapshot (the caller then replays the
        batches from ``map_end_offset`` to the log end)."""
        self._log_start_offset = log_start_offset
        for snap in list(self._snapshots):
            if snap > log_end_offset or snap <= log_start_offset:
                self._remove_snapshot(snap)
        if log_end_offset != self.map_end_offset:
            self.producers.clear()
            self._ongoing_txns.clear()
            self._unreplicated_txns.clear()
            self._load_from_snapshot(log_start_offset, now_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        while self._snapshots:
            offset = self._snapshots[-1]
            path = producer_snapshot_file(self.log_dir, offset)
            try:
                entries = read_snapshot(path)
            except (OSError, CorruptSnapshotError) as e:
                self._log.warning(
                    "Failed to load producer snapshot; deleting it and trying an older one", snapshot=path, error=str(e)
                )
                self._remove_snapshot(offset)
                continue
            for entry in entries:
                if (
                    entry.current_txn_first_offset is None
                    and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
                ):
                    continue
                self.producers[entry.producer_id] = entry
                if entry.current_txn_first_offset is not None:
                    self._ongoing_txns[entry.current_txn_first_offset] = entry.producer_id
            self.map_end_offset = offset
            self._log.info("Loaded producer state from snapshot", offset=offset, producers=len(self.producers))
            return
        self.map_end_offset = log_start_offset

    # -- snapshots ----------------------------------------------------------------------------
    def take_snapshot(self, sync: bool = True) -> str | None:
        """Write ``<map_end_offset>.snapshot`` unless it exists, or unless the offset is 0 with no snapshot and no
        producer (Kafka's takeSnapshot writes only past its last snapshot offset, 0 before any: a new, empty log
        gets no ``0.snapshot``, one file creation fewer per partition created). Returns its path or None."""
        offset = self.map_end_offset
        if offset in self._snapshots or (offset == 0 and not self._snapshots and not self.producers):
            return None
        path = producer_snapshot_file(self.log_dir, offset)
        write_snapshot(path, list(self.producers.values()), sync)
        bisect.insort(self._snapshots, offset)
        return path

    def flush_snapshot(self, offset: int) -> None:
        """fsync the snapshot at ``offset`` if it exists (after an unsynced ``take_snapshot``)."""
        if offset in self._snapshots:
            fsync_file(producer_snapshot_file(self.log_dir, offset))

    def remove_stray_snapshots(self, segment_base_offsets: tuple[int, ...]) -> None:
        """Kafka's ``removeStraySnapshots`` (at load, before the rebuild): re-read the directory and delete
        every snapshot whose offset is no segment's base offset, except the largest such one when it lies past
        the last segment's base (the snapshot a shutdown wrote at the log end)."""
        bases = set(segment_base_offsets)
        self._snapshots = self._list_snapshots()
        strays = [offset for offset in self._snapshots if offset not in bases]
        if strays and (not bases or strays[-1] > max(bases)):
            strays.pop()  # the largest stray is kept
        for offset in strays:
            self._log.info("Deleting a stray producer snapshot", offset=offset)
            self._remove_snapshot(offset)

    def delete_snapshot(self, offset: int) -> None:
        """Delete the snapshot at ``offset`` if there is one (its segment was deleted)."""
        if offset in self._snapshots:
            self._remove_snapshot(offset)

    def _remove_snapshot(self, offset: int) -> None:
        try:
            self._snapshots.remove(offset)
        except ValueError:
            pass
        try:
            os.unlink(producer_snapshot_file(self.log_dir, offset))
        except FileNotFoundError:
            pass

    def update_parent_dir(self, log_dir: str) -> None:
        self.log_dir = log_dir

    def _tp(self) -> str:
        return f"{self.topic_partition[0]}-{self.topic_partition[1]}"
