"""LogCleaner: compaction of ``cleanup.policy=compact`` logs (``kafka.log.LogCleaner`` / ``Cleaner``).

Every ``log.cleaner.backoff.ms`` the cleaner looks at each compacted log. The cleanable range is the
closed segments (never the active one) whose records are older than ``min.compaction.lag.ms`` and
below the high watermark. It maps every key in that range to its latest offset (Kafka's offset map),
and cleans when the share of records that would go is at least ``min.cleanable.dirty.ratio``:

* a record is kept when it is the latest for its key within the range (records without a key stay);
* a tombstone (null value) is kept until it is older than ``delete.retention.ms``, then removed;
* control batches stay; a batch whose records all stay is copied byte for byte; a partly kept batch is
  rebuilt with the same base offset, last offset, producer state and compression, so offsets keep
  their gaps and nothing is renumbered.

Crash safety, one segment at a time: the cleaned file is written as ``<segment>.log.cleaned`` and
fsynced; then (under the log lock) the segment's index files are removed, the file atomically
replaces ``<segment>.log`` (``os.replace``) and the indexes are rebuilt from it. A crash before the
replace leaves the old segment (the ``.cleaned`` file is deleted at load); after it, the new one with
missing indexes, which reads correctly and is re-indexed. Readers holding the old file keep reading
it (the inode stays alive), so zero-copy fetches in flight are unaffected.

Threading: runs on the broker scheduler's threads; it takes each log's lock only to swap a segment.
"""

from __future__ import annotations

import os

from pykbroker.log.log_segment import LogSegment
from pykbroker.protocol.errors import KafkaStorageError
from pykbroker.record.control_record import ControlRecordType
from pykbroker.record.default_record_batch import LOG_APPEND_TIME, NO_TIMESTAMP, iter_batches
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from pykbroker.utils.logging import get_logger

_log = get_logger("LogCleaner")


class LogCleaner:
    def __init__(self, log_manager, time, backoff_ms: int = 15000, enabled: bool = True):
        self.log_manager = log_manager
        self.time = time
        self.backoff_ms = backoff_ms
        self.enabled = enabled
        self.stats = {"cleanings": 0, "records_removed": 0}

    def startup(self, scheduler) -> None:
        if self.enabled:
            scheduler.schedule("kafka-log-cleaner-thread-0", self.clean_all, self.backoff_ms, self.backoff_ms)

    def clean_all(self) -> int:
        removed = 0
        for log in self.log_manager.all_logs():
            if log.config.compact:
                try:
                    removed += self.clean(log)
                except OSError as e:  # Kafka: an IOException takes the log's directory offline
                    parent = log.parent_dir
                    msg = f"Failed to clean up log for {log.name} in dir {parent} due to IOException: {e}"
                    channel = getattr(log, "log_dir_failure_channel", None)
                    if channel is not None:
                        channel.maybe_add_offline_log_dir(parent, msg, e)
                    else:
                        _log.error(msg)
                except KafkaStorageError as e:  # already reported (one ERROR line), or the log closed meanwhile
                    _log.warning("Cleaning skipped", partition=log.name, error=str(e))
                except Exception as e:  # noqa: BLE001 - one bad log must not stop the cleaner
                    _log.error("Error cleaning log", partition=log.name, error=repr(e), exc_info=True)
        return removed

    # -- one log -------------------------------------------------------------------------------------
    def _cleanable_segments(self, log) -> list[LogSegment]:
        now = self.time.milliseconds()
        lag = log.config.min_compaction_lag_ms
        hw = log.high_watermark
        segments = list(log.segments.values())[:-1]  # never the active segment
        out = []
        for i, segment in enumerate(segments):
            next_base = segments[i + 1].base_offset if i + 1 < len(segments) else log.active_segment.base_offset
            if next_base > hw or (lag > 0 and now - segment.largest_timestamp < lag):
                break
            out.append(segment)
        return out

    def clean(self, log) -> int:
        """Compact ``log`` once if it is dirty enough; returns the number of records removed."""
        segments = self._cleanable_segments(log)
        if not segments:
            return 0
        upper = log.segments.higher_segment(segments[-1].base_offset)
        upper_offset = upper.base_offset if upper is not None else log.log_end_offset
        aborted = sorted(
            log.collect_aborted_transactions(segments[0].base_offset, upper_offset), key=lambda t: t.first_offset
        )
        latest: dict[bytes, int] = {}
        total = 0
        txns = _CleanedTransactionMetadata(aborted)
        for segment in segments:
            for _, batch in iter_batches(memoryview(segment.log.read(0, segment.size))):
                if batch.is_control_batch:
                    txns.on_control_batch_read(batch)
                    total += 1
                    continue
                if txns.on_batch_read(batch):
                    total += batch.last_offset - batch.base_offset + 1  # aborted: never the latest of a key
                    continue
                for r in batch.records():
                    total += 1
                    if r.key is not None:
                        latest[bytes(r.key)] = r.offset
        now = self.time.milliseconds()
        retention = log.config.delete_retention_ms

        def keep(r) -> bool:
            if r.key is None:
                return True
            if latest.get(bytes(r.key)) != r.offset:
                return False
            return r.value is not None or now - r.timestamp < retention

        doomed = 0
        plans = []
        txns = _CleanedTransactionMetadata(aborted)
        for segment in segments:
            data = segment.log.read(0, segment.size)
            kept_parts, removed = [], 0
            for _, batch in iter_batches(memoryview(data)):
                if batch.is_control_batch:
                    # A marker goes once no data of its transaction is left and delete.retention.ms passed
                    # (the horizon tombstones get); an aborted transaction whose data remains keeps both.
                    if txns.on_control_batch_read(batch) and now - batch.max_timestamp >= retention:
                        removed += 1
                    else:
                        kept_parts.append(bytes(batch.buf))
                    continue
                if txns.on_batch_read(batch):
                    removed += batch.last_offset - batch.base_offset + 1  # data of an aborted transaction
                    continue
                records = batch.records()
                kept = [r for r in records if keep(r)]
                removed += len(records) - len(kept)
                if len(kept) == len(records):
                    kept_parts.append(bytes(batch.buf))
                elif kept:
                    kept_parts.append(_rebuild(batch, kept))
            if removed:
                plans.append((segment, kept_parts, removed))
                doomed += removed
        if not plans or total == 0 or doomed / total < log.config.min_cleanable_dirty_ratio:
            return 0
        for segment, parts, _removed in plans:
            self._replace_segment(log, segment, b"".join(parts))
        self.stats["cleanings"] += 1
        self.stats["records_removed"] += doomed
        _log.info("Cleaned log", partition=log.name, segments=len(plans), records_removed=doomed, records_before=total)
        return doomed

    def _replace_segment(self, log, segment: LogSegment, data: bytes) -> None:
        path = segment.log.path
        cleaned = path + ".cleaned"
        with open(cleaned, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        with log._lock:
            if log.segments.get(segment.base_offset) is not segment:
                os.unlink(cleaned)  # the segment was deleted or replaced meanwhile (retention, truncation)
                return
            segment.close_handlers()
            for index_path in (segment.offset_index_path, segment.time_index_path):
                try:
                    os.unlink(index_path)
                except FileNotFoundError:
                    pass
            os.replace(cleaned, path)
            fresh = LogSegment.open(log.dir, segment.base_offset, log.config, self.time, file_already_exists=True)
            fresh.recover()
            # The aborted-transaction entries stay only for the markers the cleaned file still holds.
            markers = {b.last_offset for b in fresh.log.batches_from(0) if b.is_control_batch}
            entries = segment.txn_index.entries
            kept = [t for t in entries if t.last_offset in markers]
            if len(kept) != len(entries):
                fresh.txn_index.reset()
                for t in kept:
                    fresh.txn_index.append(t)
            log.segments.add(fresh)


class _CleanedTransactionMetadata:
    """Kafka's ``CleanedTransactionMetadata``: walking the cleaned range in offset order with the aborted
    transactions of the txn indexes, which data batches belong to aborted transactions (discarded) and
    which markers may go (no batch of their transaction was seen: it was cleaned before, or a COMMIT of a
    transaction with no data left here)."""

    def __init__(self, aborted: list):
        self._aborted = aborted
        self._next = 0
        self._ongoing_aborted: dict[int, bool] = {}  # producer id -> a batch of it was seen
        self._ongoing_committed: set[int] = set()

    def _consume_up_to(self, offset: int) -> None:
        while self._next < len(self._aborted) and self._aborted[self._next].first_offset <= offset:
            self._ongoing_aborted[self._aborted[self._next].producer_id] = False
            self._next += 1

    def on_batch_read(self, batch) -> bool:
        """True when ``batch`` is data of an aborted transaction (to discard)."""
        self._consume_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        if batch.producer_id in self._ongoing_aborted:
            self._ongoing_aborted[batch.producer_id] = True
            return True
        self._ongoing_committed.add(batch.producer_id)
        return False

    def on_control_batch_read(self, batch) -> bool:
        """True when the marker ``batch`` may be discarded."""
        self._consume_up_to(batch.last_offset)
        records = batch.records()
        if not records or records[0].key is None:
            return False
        kind = ControlRecordType.parse(records[0].key)
        pid = batch.producer_id
        if kind is ControlRecordType.ABORT:
            seen = self._ongoing_aborted.pop(pid, None)
            return not seen  # retained while this pass still saw (and dropped) data of the transaction
        if kind is ControlRecordType.COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False


def _rebuild(batch, records) -> bytes:
    """A batch holding ``records`` with the original batch's base/last offsets and producer state."""
    builder = MemoryRecordsBuilder(
        base_offset=batch.base_offset,
        compression=batch.compression_type,
        timestamp_type=batch.timestamp_type,
        log_append_time=batch.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME else NO_TIMESTAMP,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        partition_leader_epoch=batch.partition_leader_epoch,
    )
    for r in records:
        builder.append_with_offset(r.offset, r.timestamp, r.key, r.value, r.headers)
    builder.override_last_offset(batch.last_offset)
    return builder.build()
