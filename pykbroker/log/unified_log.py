"""The log of one partition: segments in ``<log.dir>/<topic>-<partition>/`` and their offsets.

Mirrors ``kafka.log.UnifiedLog`` (with ``LocalLog``): appends (leader and follower), reads, rolling,
flushing, the log start offset / high watermark / last stable offset / recovery point, the leader
epoch cache, producer state, truncation and retention. Start-up loading and crash recovery are in
:mod:`pykbroker.log.log_loader`; retention predicates in :mod:`pykbroker.log.log_retention`.

Offsets: ``log_start_offset`` <= ``high_watermark`` <= ``log_end_offset`` (LEO, the next offset to
assign). ``recovery_point``: everything below it is fsynced. ``last_stable_offset``: the HW or the
first offset of the oldest open transaction, whichever is lower.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable

from pykbroker.log.checkpoints import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    LeaderEpochCheckpointFile,
    PartitionMetadataFile,
    as_topic_id,
)
from pykbroker.log.fetch_data_info import (
    FetchDataInfo,
    FetchIsolation,
    LogOffsetMetadata,
)
from pykbroker.log.leader_epoch_cache import LeaderEpochFileCache
from pykbroker.log.log_append_info import (
    LogAppendInfo,
    ValidationResultLike,
)
from pykbroker.log.log_dir_failure_channel import LogDirFailureChannel, storage_task
from pykbroker.log.log_file_utils import (
    DELETED_FILE_SUFFIX,
    log_file,
    offset_index_file,
    parse_topic_partition_name,
    time_index_file,
)
from pykbroker.log.log_loader import LogLoader, RecoveryReport
from pykbroker.log.log_retention import (
    deletable_segments,
    retention_ms_breached,
    retention_size_breached,
    start_offset_breached,
)
from pykbroker.log.log_segment import LogSegment
from pykbroker.log.log_segments import LogSegments
from pykbroker.log.producer_state_entry import AppendOrigin, ProducerAppendInfo, read_end_txn_marker
from pykbroker.log.producer_state_manager import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ProducerStateManager,
)
from pykbroker.log.timestamp_search import (  # noqa: F401 - ListOffsets constants re-exported
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    RecordSearch,
    fetch_offset_by_timestamp,
)
from pykbroker.protocol.errors import (
    CorruptRecordError,
    InconsistentTopicIdError,
    InvalidTxnStateError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
)
from pykbroker.record.default_record_batch import (
    CONTROL_FLAG_MASK,
    CURRENT_MAGIC,
    HEADER,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
)
from pykbroker.record.file_records import (
    BatchHeader,
    TimestampAndOffset,
    iter_batch_headers,
    verify_crc,
)
from pykbroker.utils.logging import get_logger
from pykbroker.utils.scheduler import Scheduler
from pykbroker.utils.time import Time

#: ``tuple.__new__``: a NamedTuple from a tuple of all its fields, without its Python-level ``__new__`` (hot path)
_new_tuple = tuple.__new__


class _IOErrors:
    """``with log._io("appending records to"):`` -- Kafka's ``maybeHandleIOException``: refuse at once if
    the log's directory is already offline; turn an OSError into KAFKA_STORAGE_ERROR after reporting
    the directory to the LogDirFailureChannel (which takes it offline)."""

    __slots__ = ("log", "what")

    def __init__(self, log: UnifiedLog, what: str):
        self.log, self.what = log, what

    def __enter__(self) -> None:
        log = self.log
        channel = log.log_dir_failure_channel
        if channel is not None:
            parent = log._parent_dir
            if channel.has_offline_log_dir(parent):
                raise KafkaStorageError(f"The log dir {parent} is already offline due to a previous IO exception.")

    def __exit__(self, exc_type, exc, tb) -> None:  # never suppresses: re-raised as KAFKA_STORAGE_ERROR
        if exc is None or not isinstance(exc, OSError):
            return
        log = self.log
        parent = log.parent_dir
        msg = f"Error while {self.what} {log.name} in dir {parent}: {exc}"
        if log.log_dir_failure_channel is not None:
            log.log_dir_failure_channel.maybe_add_offline_log_dir(parent, msg, exc)
        raise KafkaStorageError(msg) from exc


class UnexpectedAppendOffsetError(Exception):
    """Appended offsets do not start at the log end offset (Kafka's UnexpectedAppendOffsetException)."""


def _check_transaction_verified(psm, info, header: BatchHeader, verification_guard) -> None:
    """KIP-890 part 1: a transactional data batch (``header``) may start a transaction (``info``, the producer's
    pending ProducerAppendInfo, has none open) only after the coordinator confirmed the partition is in it and no
    marker came in between, i.e. ``verification_guard`` is the producer's current guard. InvalidTxnStateError
    otherwise; nothing to check for a non-transactional batch or when verification is off."""
    if (
        header.is_transactional
        and psm.transaction_verification_enabled
        and info.updated.current_txn_first_offset is None
        and (verification_guard is None or psm.verification_guard(header.producer_id) is not verification_guard)
    ):
        raise InvalidTxnStateError("Record was not part of an ongoing transaction")


class UnifiedLog:
    """A partition's log (see module docstring).

    Threading model: ``_lock`` (the "log lock", re-entrant) serialises every mutation: append, roll,
    truncate, retention, log start offset / high watermark / recovery point updates, producer state
    and close. Reads (``read``, ``fetch_offset_by_timestamp``, offset properties) take no lock: they
    use the immutable ``LogOffsetMetadata`` values and the copy-on-write segment list published by
    writers, and segment data that is only ever appended after being made visible. Slices returned
    by ``read`` keep their file open, so retention deleting a segment never breaks a send in flight.
    ``flush`` does its fsyncs outside the lock and then records the new recovery point under it.
    """

    def __init__(
        self,
        directory: str,
        config,
        segments: LogSegments,
        log_start_offset: int,
        recovery_point: int,
        next_offset_metadata: LogOffsetMetadata,
        scheduler: Scheduler | None,
        time: Time,
        topic_partition: tuple[str, int],
        leader_epoch_cache: LeaderEpochFileCache,
        producer_state_manager: ProducerStateManager,
        topic_id=None,
        recovery_report: RecoveryReport | None = None,
    ):
        self._lock = threading.RLock()
        self._dir = directory
        self._parent_dir = os.path.dirname(directory)  # read on every append (_IOErrors)
        self._config = config
        self._segments = segments
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._next_offset_metadata = next_offset_metadata
        self._high_watermark_metadata = LogOffsetMetadata(log_start_offset)
        self._first_unstable_offset: int | None = None
        self._scheduler = scheduler
        self._time = time
        self.topic_partition = topic_partition
        self.leader_epoch_cache = leader_epoch_cache
        self.producer_state_manager = producer_state_manager
        self._partition_metadata = PartitionMetadataFile(directory)
        self._topic_id = as_topic_id(topic_id)
        self._last_flushed_ms = time.milliseconds()
        self._closed = False
        self.recovery_report = recovery_report or RecoveryReport(0, 0, None, ())
        # Set by the LogManager: I/O errors take the log's directory offline (KAFKA_STORAGE_ERROR).
        self.log_dir_failure_channel: LogDirFailureChannel | None = None
        #: called (under the log lock, so it must be cheap and take no other lock than its own) after the log end
        #: offset, high watermark or log start offset may have changed; set by the Partition (idle fetch sessions)
        self.change_listener: Callable[[], None] | None = None
        self._log = self._logger()
        self._appending = _IOErrors(self, "appending records to")  # stateless: one per log, entered per append

    def _logger(self):
        """Kafka's log prefix: ``[UnifiedLog partition=t-0, dir=/data]`` (the partition's log directory)."""
        topic, partition = self.topic_partition
        return get_logger("UnifiedLog", partition=f"{topic}-{partition}", dir=self.parent_dir)

    def _io(self, what: str) -> _IOErrors:
        return _IOErrors(self, what)

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        directory: str,
        config,
        scheduler: Scheduler | None,
        time: Time,
        *,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        had_clean_shutdown: bool = True,
        topic_id=None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        topic_partition: tuple[str, int] | None = None,
    ) -> UnifiedLog:
        """Open (creating if needed) and load the log in ``directory`` (``<topic>-<partition>``),
        recovering from ``recovery_point`` unless ``had_clean_shutdown``. With ``topic_id``, write or
        verify ``partition.metadata`` (InconsistentTopicIdError on a mismatch)."""
        os.makedirs(directory, exist_ok=True)
        tp = topic_partition or parse_topic_partition_name(os.path.basename(os.path.normpath(directory)))
        cache = LeaderEpochFileCache(
            tp, LeaderEpochCheckpointFile(os.path.join(directory, LEADER_EPOCH_CHECKPOINT_FILE))
        )
        psm = ProducerStateManager(tp, directory, producer_id_expiration_ms)
        segments = LogSegments(tp)
        loader = LogLoader(
            directory, tp, config, time, had_clean_shutdown, segments, log_start_offset, recovery_point, cache
        )
        offsets = loader.load()
        log = cls(
            directory,
            config,
            segments,
            offsets.log_start_offset,
            offsets.recovery_point,
            offsets.next_offset_metadata,
            scheduler,
            time,
            tp,
            cache,
            psm,
            None,
            loader.report,
        )
        log._high_watermark_metadata = LogOffsetMetadata(offsets.log_start_offset)
        psm.remove_stray_snapshots(segments.base_offsets())
        log._rebuild_producer_state(offsets.next_offset_metadata.message_offset, had_clean_shutdown)
        log._init_topic_id(topic_id)
        return log

    def _init_topic_id(self, topic_id) -> None:
        stored = self._partition_metadata.read() if self._partition_metadata.exists() else None
        wanted = as_topic_id(topic_id)
        if wanted is not None and stored is not None and stored != wanted:
            raise InconsistentTopicIdError(
                f"Tried to assign topic ID {wanted} to log for topic partition {self.name}, but log already "
                f"contained topic ID {stored}"
            )
        if wanted is not None and stored is None:
            if self._scheduler is None:
                self._partition_metadata.write(wanted)
            else:  # Kafka's flush-metadata-file task: the file is written off the thread creating the log
                self._partition_metadata.record(wanted)
                self._scheduler.schedule_once(
                    "flush-metadata-file", storage_task("flush-metadata-file", self._flush_metadata_file, self._log)
                )
        self._topic_id = wanted or stored

    def _flush_metadata_file(self) -> None:
        """Write a recorded ``partition.metadata`` (Kafka's ``maybeFlushMetadataFile``); nothing once the log is
        deleted. Not under the log lock (appends and leader changes do not wait for its fsyncs): ``delete`` and
        ``rename_dir`` take the recorded id back first, which waits for a write in progress."""
        metadata = self._partition_metadata
        if metadata.dirty is None:
            return
        with self._io("writing the partition metadata file of"):
            metadata.maybe_flush()

    def assign_topic_id(self, topic_id) -> None:
        """Record the topic id (writes ``partition.metadata``); InconsistentTopicIdError on a mismatch."""
        with self._lock:
            self._init_topic_id(topic_id)

    # -- properties ---------------------------------------------------------------------------
    @property
    def parent_dir(self) -> str:
        """The log directory holding this partition's directory."""
        return self._parent_dir

    @property
    def dir(self) -> str:
        return self._dir

    @property
    def name(self) -> str:
        return os.path.basename(self._dir)

    @property
    def topic_id(self):
        return self._topic_id

    @property
    def config(self):
        return self._config

    def update_config(self, config) -> None:
        """Switch to a new LogConfig (topic config change); applies to the next append/roll."""
        self._config = config

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._next_offset_metadata.message_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self._next_offset_metadata

    @property
    def high_watermark(self) -> int:
        return self._high_watermark_metadata.message_offset

    @high_watermark.setter
    def high_watermark(self, hw: int) -> None:
        self.update_high_watermark(hw)

    @property
    def last_stable_offset(self) -> int:
        fuo, hw = self._first_unstable_offset, self.high_watermark
        return fuo if fuo is not None and fuo < hw else hw

    @property
    def first_unstable_offset(self) -> int | None:
        return self._first_unstable_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def last_flush_time_ms(self) -> int:
        return self._last_flushed_ms

    @property
    def segments(self) -> LogSegments:
        return self._segments

    @property
    def active_segment(self) -> LogSegment:
        return self._segments.active_segment

    @property
    def num_segments(self) -> int:
        return len(self._segments)

    @property
    def size(self) -> int:
        """Bytes in all segments."""
        return self._segments.size_in_bytes()

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    def unflushed_messages(self) -> int:
        return self.log_end_offset - self._recovery_point

    # -- appends ------------------------------------------------------------------------------
    def append_as_leader(
        self,
        records,
        leader_epoch: int,
        validate: Callable[[memoryview, int], ValidationResultLike],
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard=None,
    ) -> LogAppendInfo:
        """Validate and append client (or coordinator) records as the partition leader.

        Under the log lock: ``validate(records, log_end_offset)`` assigns offsets from the LEO, stamps
        ``leader_epoch`` and checks the records (the LogValidator; it may raise any Kafka error); then
        producer state is checked (InvalidProducerEpochError, OutOfOrderSequenceError; a
        duplicate of one of the producer's last 5 batches returns the original offsets with
        ``duplicate=True`` and writes nothing), the segment is rolled if needed, the bytes are written,
        the LEO advances and, past ``flush.messages`` unflushed messages, the log is fsynced. The high
        watermark is not moved here (the partition does that). Raises RecordBatchTooLargeError if the
        batches exceed ``segment.bytes``.
        """
        mv = records if isinstance(records, memoryview) else memoryview(records)
        with self._lock, self._appending:
            if self._closed:
                raise KafkaStorageError(f"The log for partition {self.name} is closed")
            leo = self._next_offset_metadata.message_offset
            v = validate(mv, leo)
            buf = v.validated_records
            if type(buf) is not memoryview:
                buf = memoryview(buf)
            n = len(buf)
            if n == 0:
                return LogAppendInfo(leo, leo - 1, log_start_offset=self._log_start_offset)
            if v.first_offset != leo:
                raise UnexpectedAppendOffsetError(
                    f"Validator assigned first offset {v.first_offset} but the log end offset of {self.name} is {leo}"
                )
            log_append_time = v.log_append_time_ms if self._config.message_timestamp_type == "LogAppendTime" else -1
            if n >= RECORD_BATCH_OVERHEAD and leader_epoch >= 0:
                fields = HEADER.unpack_from(buf, 0)
                if (
                    fields[1] + LOG_OVERHEAD == n
                    and fields[3] == CURRENT_MAGIC
                    and (fields[9] < 0 or (origin is AppendOrigin.CLIENT and not fields[5] & CONTROL_FLAG_MASK))
                ):
                    # one whole batch (the LogValidator's result), without a producer id or a client's idempotent
                    # or transactional data batch: _append_plain_locked
                    last_offset = fields[0] + fields[6]
                    if last_offset != v.last_offset:
                        raise UnexpectedAppendOffsetError(
                            f"Validator reported last offset {v.last_offset} but the last batch ends at "
                            f"{last_offset} in {self.name}"
                        )
                    return self._append_plain_locked(
                        buf,
                        leo,
                        last_offset,
                        v.max_timestamp_ms,
                        v.shallow_offset_of_max_timestamp,
                        v.records_count,
                        log_append_time,
                        leader_epoch,
                        BatchHeader(0, fields) if fields[9] >= 0 else None,
                        verification_guard,
                    )
            headers = self._batch_headers(buf, verify=False)
            if headers[-1].last_offset != v.last_offset:
                raise UnexpectedAppendOffsetError(
                    f"Validator reported last offset {v.last_offset} but the last batch ends at "
                    f"{headers[-1].last_offset} in {self.name}"
                )
            return self._append_locked(
                buf,
                headers,
                v.first_offset,
                v.last_offset,
                v.max_timestamp_ms,
                v.shallow_offset_of_max_timestamp,
                v.records_count,
                log_append_time,
                origin,
                leader_epoch if leader_epoch >= 0 else None,
                verification_guard,
            )

    def append_as_follower(self, records) -> LogAppendInfo:
        """Append batches whose offsets were assigned by the leader (replication, Raft). CRCs are
        checked; the first batch must start at or after the LEO (UnexpectedAppendOffsetError).
        Leader epochs come from the batches."""
        buf = records if isinstance(records, memoryview) else memoryview(records)
        headers = self._batch_headers(buf, verify=True)
        if not headers:
            return LogAppendInfo(self.log_end_offset, self.log_end_offset - 1, log_start_offset=self._log_start_offset)
        end = sum(h.size_in_bytes for h in headers)
        buf = buf[:end]  # drop a trailing partial batch
        max_ts, offset_of_max, count = -1, headers[0].last_offset, 0
        previous_last = headers[0].base_offset - 1
        for h in headers:
            if h.base_offset <= previous_last:
                raise CorruptRecordError(
                    f"Out of order offsets in follower append to {self.name}: batch "
                    f"{h.base_offset} after {previous_last}"
                )
            previous_last = h.last_offset
            count += h.records_count
            if h.max_timestamp > max_ts:
                max_ts, offset_of_max = h.max_timestamp, h.last_offset
        with self._lock, self._io("appending records to"):
            self._check_open()
            if headers[0].base_offset < self.log_end_offset:
                raise UnexpectedAppendOffsetError(
                    f"Unexpected offset in append to {self.name}. First offset {headers[0].base_offset} is less than "
                    f"the next offset {self.log_end_offset}"
                )
            return self._append_locked(
                buf,
                headers,
                headers[0].base_offset,
                headers[-1].last_offset,
                max_ts,
                offset_of_max,
                count,
                -1,
                AppendOrigin.REPLICATION,
                None,
            )

    def _batch_headers(self, buf: memoryview, verify: bool) -> list[BatchHeader]:
        headers = list(iter_batch_headers(buf))
        if verify:
            for h in headers:
                verify_crc(h, buf[h.position : h.position + h.size_in_bytes])
        elif not headers or sum(h.size_in_bytes for h in headers) != len(buf):
            raise CorruptRecordError(f"Validated records for {self.name} are not a sequence of whole batches")
        return headers

    def _append_locked(
        self,
        buf: memoryview,
        headers: list[BatchHeader],
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
        records_count: int,
        log_append_time: int,
        origin: AppendOrigin,
        leader_epoch: int | None,
        verification_guard=None,
    ) -> LogAppendInfo:
        config = self._config
        self._check_fits_segment(len(buf))
        # Producer state: duplicates and sequence/epoch checks, before anything is written.
        psm = self.producer_state_manager
        updated: dict[int, ProducerAppendInfo] = {}
        for h in headers:
            if not h.has_producer_id:
                continue
            if origin is AppendOrigin.CLIENT:
                duplicate = self._duplicate_of(h, max_timestamp, offset_of_max_timestamp, records_count, leader_epoch)
                if duplicate is not None:
                    return duplicate
            info = updated.get(h.producer_id)
            if info is None:
                info = updated[h.producer_id] = psm.prepare_update(h.producer_id, origin)
            if h.is_control_batch and h.is_transactional:
                info.append(h, read_end_txn_marker(buf[h.position : h.position + h.size_in_bytes]))
            else:
                if origin in (AppendOrigin.CLIENT, AppendOrigin.COORDINATOR):
                    # a client's produce, or a group coordinator's TxnOffsetCommit write (control batches are exempt)
                    _check_transaction_verified(psm, info, h, verification_guard)
                info.append(h)
        # Leader epoch cache.
        if leader_epoch is not None:
            self._maybe_assign_epoch_start_offset(leader_epoch, first_offset)
        else:
            for h in headers:
                self._maybe_assign_epoch_start_offset(h.partition_leader_epoch, h.base_offset)
        segment = self._maybe_roll(len(buf), max_timestamp, first_offset, last_offset)
        segment.append(last_offset, max_timestamp, offset_of_max_timestamp, buf)
        self._update_log_end_offset(last_offset + 1)
        completed = []
        for info in updated.values():
            psm.update(info)
            completed.extend(info.completed_txns)
        for txn in sorted(completed, key=lambda t: t.last_offset):
            # Kafka's order: the LSO is taken before the transaction completes; aborted ones are indexed.
            if txn.is_aborted:
                segment.update_txn_index(
                    txn.producer_id, txn.first_offset, txn.last_offset, psm.last_stable_offset(txn)
                )
            psm.complete_txn(txn)
        psm.update_map_end_offset(last_offset + 1)
        self._first_unstable_offset = psm.first_unstable_offset
        if self.unflushed_messages() >= config.flush_interval_messages:
            self.flush()
        last_epoch = headers[-1].partition_leader_epoch
        return LogAppendInfo(
            first_offset,
            last_offset,
            max_timestamp,
            offset_of_max_timestamp,
            log_append_time,
            self._log_start_offset,
            records_count,
            len(buf),
            leader_epoch if leader_epoch is not None else (last_epoch if last_epoch >= 0 else None),
        )

    def _append_plain_locked(
        self,
        buf: memoryview,
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
        records_count: int,
        log_append_time: int,
        leader_epoch: int,
        idempotent: BatchHeader | None = None,
        verification_guard=None,
    ) -> LogAppendInfo:
        """:meth:`_append_locked` for one batch stamped with ``leader_epoch`` (>= 0), the common leader append, in
        fewer steps: the batch has no producer id, or is a client's idempotent or transactional data batch whose
        header is ``idempotent`` (its duplicate check, sequence/epoch checks, KIP-890 transaction verification
        against ``verification_guard`` and producer state update as in the general path); the roll check fused
        with the segment append (``LogSegment.append_unless_roll``); the log end offset updated in place. Same
        effects and errors as the general path. Caller holds the log lock."""
        config = self._config
        size = len(buf)
        self._check_fits_segment(size)
        psm = self.producer_state_manager
        update = None
        if idempotent is not None:
            duplicate = self._duplicate_of(
                idempotent, max_timestamp, offset_of_max_timestamp, records_count, leader_epoch
            )
            if duplicate is not None:
                return duplicate
            update = psm.prepare_update(idempotent.producer_id, AppendOrigin.CLIENT)
            _check_transaction_verified(psm, update, idempotent, verification_guard)
            update.append(idempotent)  # a data batch: completes no transaction
        cache = self.leader_epoch_cache
        latest = cache.latest_epoch
        if latest is None or leader_epoch > latest:
            cache.assign(leader_epoch, first_offset)
        segment = self._segments.active_segment
        segment_size = segment.append_unless_roll(
            last_offset,
            max_timestamp,
            offset_of_max_timestamp,
            buf,
            self._max_segment_ms() if config.compact else config.segment_ms,
            config.segment_bytes,
            self._time,
        )
        if segment_size < 0:
            segment = self._maybe_roll(size, max_timestamp, first_offset, last_offset)
            segment.append(last_offset, max_timestamp, offset_of_max_timestamp, buf)
            segment_size = segment.size
        end = last_offset + 1
        self._update_log_end_offset(end, segment_size)  # segment is the active one (appended to, or rolled)
        if update is not None:
            psm.update(update)
        psm.update_map_end_offset(end)
        self._first_unstable_offset = psm.first_unstable_offset
        if end - self._recovery_point >= config.flush_interval_messages:
            self.flush()
        return LogAppendInfo(
            first_offset,
            last_offset,
            max_timestamp,
            offset_of_max_timestamp,
            log_append_time,
            self._log_start_offset,
            records_count,
            size,
            leader_epoch,
        )

    def maybe_start_transaction_verification(
        self, producer_id: int, producer_epoch: int, supports_epoch_bump: bool = False
    ):
        """A VerificationGuard when the producer has no transaction of this epoch open here (the leader must
        ask the coordinator before the first transactional write), else None (Kafka's
        ``maybeStartTransactionVerification``). A transaction open at an older epoch needs the coordinator too:
        at transaction version 2 the next transaction's epoch may arrive before the previous one's marker.
        ``supports_epoch_bump`` (a Produce v12 write): that marker, which carries the write's epoch, leaves the
        guard in place (Kafka 4.0); any other marker ends the verification."""
        with self._lock:
            psm = self.producer_state_manager
            entry = psm.last_entry(producer_id)
            if (
                entry is not None
                and entry.current_txn_first_offset is not None
                and entry.producer_epoch == producer_epoch
            ):
                return None
            return psm.maybe_create_verification_guard(producer_id, producer_epoch, supports_epoch_bump)

    def maybe_assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` if it is newer than the latest known epoch
        (a new leader calls this with its LEO, Kafka's ``maybeAssignEpochStartOffset``)."""
        with self._lock:
            latest = self.leader_epoch_cache.latest_epoch
            if epoch >= 0 and (latest is None or epoch > latest):
                self.leader_epoch_cache.assign(epoch, start_offset)

    _maybe_assign_epoch_start_offset = maybe_assign_epoch_start_offset

    def _update_log_end_offset(self, end_offset: int, active_size: int | None = None) -> None:
        """The log end offset is now ``end_offset`` (the active segment ends there; ``active_size``: its size in
        bytes when the caller has it, e.g. the leader append); the recovery point and the HW come down to it if
        above. Caller holds the log lock."""
        active = self._segments.active_segment
        metadata = self._next_offset_metadata = _new_tuple(
            LogOffsetMetadata, (end_offset, active.base_offset, active.size if active_size is None else active_size)
        )
        if self._recovery_point > end_offset:
            self._recovery_point = end_offset
        if self._high_watermark_metadata.message_offset > end_offset:
            self._high_watermark_metadata = metadata
        listener = self.change_listener
        if listener is not None:
            listener()

    def _check_fits_segment(self, size: int) -> None:
        """RecordBatchTooLargeError when an append of ``size`` bytes exceeds ``segment.bytes``."""
        if size > self._config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"Message batch size is {size} bytes in append to partition {self.name}, which exceeds the "
                f"maximum configured segment size of {self._config.segment_bytes}."
            )

    def _duplicate_of(
        self,
        header: BatchHeader,
        max_timestamp: int,
        offset_of_max_timestamp: int,
        records_count: int,
        leader_epoch: int | None,
    ) -> LogAppendInfo | None:
        """The answer to a client's batch its producer already appended (Kafka's duplicate check on the last
        five batches of the producer: the original's offsets and timestamp, nothing written), or None."""
        entry = self.producer_state_manager.last_entry(header.producer_id)
        duplicate = entry.find_duplicate_batch(header) if entry is not None else None
        if duplicate is None:
            return None
        return LogAppendInfo(
            duplicate.first_offset,
            duplicate.last_offset,
            max_timestamp,
            offset_of_max_timestamp,
            duplicate.timestamp,
            self._log_start_offset,
            records_count,
            0,
            leader_epoch,
            duplicate=True,
        )

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"The log for partition {self.name} is closed")

    # -- rolling ------------------------------------------------------------------------------
    def _max_segment_ms(self) -> int:
        c = self._config
        return min(c.max_compaction_lag_ms, c.segment_ms) if c.compact and c.max_compaction_lag_ms > 0 else c.segment_ms

    def _maybe_roll(self, messages_size: int, max_timestamp: int, first_offset: int, last_offset: int) -> LogSegment:
        segment = self._segments.active_segment
        now = self._time.milliseconds()
        if segment.should_roll(
            self._max_segment_ms(), self._config.segment_bytes, max_timestamp, last_offset, messages_size, now
        ):
            self._log.debug(
                "Rolling new log segment",
                log_size=segment.size,
                time_since_roll_ms=segment.time_waited_for_roll(now, max_timestamp),
            )
            return self.roll(first_offset)
        return segment

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``max(expected_next_offset, log_end_offset)``: trim the old
        one, snapshot producer state at the new base offset, and schedule a flush of the old segment."""
        with self._lock, self._io("rolling a log segment for"):
            self._check_open()
            new_offset = max(expected_next_offset or 0, self.log_end_offset)
            active = self._segments.last_segment()
            if self._segments.contains(new_offset):
                if active is not None and active.base_offset == new_offset and active.size == 0:
                    self._log.warning(
                        "Trying to roll a new segment whose base offset equals the empty active segment's; "
                        "recreating it",
                        offset=new_offset,
                    )
                    self._segments.remove(new_offset)
                    active.delete_if_exists()
                else:
                    raise RuntimeError(
                        f"Trying to roll a new log segment for {self.name} with start offset "
                        f"{new_offset} while it already exists"
                    )
            elif active is not None and new_offset < active.base_offset:
                raise RuntimeError(
                    f"Trying to roll a new log segment for {self.name} with start offset {new_offset} "
                    f"lower than the active segment's base offset {active.base_offset}"
                )
            else:
                for path in (
                    log_file(self._dir, new_offset),
                    offset_index_file(self._dir, new_offset),
                    time_index_file(self._dir, new_offset),
                ):
                    if os.path.exists(path):
                        self._log.warning("Newly rolled segment file already exists; deleting it first", file=path)
                        os.unlink(path)
                if active is not None:
                    active.on_become_inactive_segment()
            segment = LogSegment.open(
                self._dir,
                new_offset,
                self._config,
                self._time,
                init_file_size=self._config.segment_bytes,
                preallocate=self._config.preallocate,
            )
            self._segments.add(segment)
            self._update_log_end_offset(self.log_end_offset)
            psm = self.producer_state_manager
            psm.update_map_end_offset(new_offset)
            psm.take_snapshot(sync=False)
            if self._scheduler is not None:
                self._scheduler.schedule_once(
                    "flush-log",
                    storage_task("flush-log", lambda: self.flush_up_to_offset_exclusive(new_offset), self._log),
                )
            self._log.info("Rolled new log segment", base_offset=new_offset)
            return segment

    # -- flush --------------------------------------------------------------------------------
    def flush(self, offset: int | None = None) -> None:
        """fsync every segment below ``offset`` (default: the LEO) not yet flushed, then advance the
        recovery point. The fsyncs run outside the log lock."""
        self.flush_up_to_offset_exclusive(self.log_end_offset if offset is None else offset)

    def flush_up_to_offset_exclusive(self, offset: int) -> None:
        with self._io("flushing the log of"):
            self._flush_up_to_offset_exclusive(offset)

    def _flush_up_to_offset_exclusive(self, offset: int) -> None:
        self._flush_metadata_file()
        recovery_point = self._recovery_point
        if offset <= recovery_point:
            return
        for segment in self._segments.values_between(recovery_point, offset):
            try:
                segment.flush()
            except ValueError:  # closed underneath us (deleted by retention or truncation)
                continue
        psm = self.producer_state_manager
        for snapshot in psm.snapshot_offsets():
            if recovery_point < snapshot <= offset:
                psm.flush_snapshot(snapshot)
        with self._lock:
            if offset > self._recovery_point:
                self._recovery_point = min(offset, self.log_end_offset)
                self._last_flushed_ms = self._time.milliseconds()

    # -- reads --------------------------------------------------------------------------------
    def read(
        self,
        start_offset: int,
        max_length: int,
        isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK,
        min_one_message: bool = True,
    ) -> FetchDataInfo:
        """Read up to ``max_length`` bytes from the batch holding ``start_offset``, bounded by the LEO,
        HW or LSO per ``isolation``. At least one whole batch when ``min_one_message``. Returns empty
        records at the bound; raises OffsetOutOfRangeError below ``log_start_offset`` or above the LEO.
        The records are a zero-copy FileRecordsSlice. A segment deleted or truncated under the read
        (retention, truncation) makes it start again against the new state."""
        end_metadata = self._next_offset_metadata
        if start_offset == end_metadata.message_offset:  # a caught-up fetch (every idle follower's): no I/O
            channel = self.log_dir_failure_channel
            if channel is None or not channel.has_offline_log_dir(self.parent_dir):
                return FetchDataInfo.empty(end_metadata)
        for attempt in range(3):
            try:
                with self._io("reading from"):
                    return self._read_once(start_offset, max_length, isolation, min_one_message)
            except ValueError:  # a segment was closed under us
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _read_once(
        self, start_offset: int, max_length: int, isolation: FetchIsolation, min_one_message: bool
    ) -> FetchDataInfo:
        end_metadata = self._next_offset_metadata
        end_offset = end_metadata.message_offset
        if start_offset == end_offset:
            return FetchDataInfo.empty(end_metadata)
        log_start = self._log_start_offset
        if start_offset > end_offset or start_offset < log_start:
            raise OffsetOutOfRangeError(
                f"Received request for offset {start_offset} for partition {self.name}, but we only have log "
                f"segments in the range {log_start} to {end_offset}."
            )
        if isolation is FetchIsolation.LOG_END:
            max_metadata = end_metadata
        elif isolation is FetchIsolation.HIGH_WATERMARK:
            max_metadata = self.fetch_high_watermark_metadata()
        else:
            max_metadata = self.fetch_last_stable_offset_metadata()
        if start_offset > max_metadata.message_offset:
            return FetchDataInfo.empty(LogOffsetMetadata(start_offset))
        info = self._read_segments(start_offset, max_length, max_metadata, min_one_message, end_metadata)
        if isolation is FetchIsolation.TXN_COMMITTED:
            info = info._replace(
                aborted_transactions=self.collect_aborted_transactions(start_offset, max_metadata.message_offset)
            )
        return info

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list:
        """Aborted transactions (``AbortedTxn``) overlapping ``[start_offset, upper_bound_offset)``, from
        the txn indexes of the segments from the one holding ``start_offset`` on (Kafka's
        ``collectAbortedTransactions``). The upper bound is the read bound (the LSO): transactions past
        the returned data are harmless to clients, which match them against the batches they get."""
        out: list = []
        segments = self._segments
        segment = segments.floor_segment(start_offset)
        while segment is not None and segment.base_offset < upper_bound_offset:
            found, complete = segment.collect_aborted_txns(start_offset, upper_bound_offset)
            out.extend(found)
            if complete:
                break
            segment = segments.higher_segment(segment.base_offset)
        return out

    def _read_segments(
        self,
        start_offset: int,
        max_length: int,
        max_metadata: LogOffsetMetadata,
        min_one_message: bool,
        end_metadata: LogOffsetMetadata,
    ) -> FetchDataInfo:
        segments = self._segments
        segment = segments.floor_segment(start_offset)
        while segment is not None:
            max_position = (
                max_metadata.relative_position_in_segment
                if max_metadata.segment_base_offset == segment.base_offset
                else segment.size
            )
            info = segment.read(start_offset, max_length, max_position, min_one_message)
            if info is not None:
                return info
            segment = segments.higher_segment(segment.base_offset)
        return FetchDataInfo.empty(end_metadata)

    def _convert_to_offset_metadata(self, offset: int) -> LogOffsetMetadata:
        info = self._read_segments(offset, 1, self._next_offset_metadata, False, self._next_offset_metadata)
        return info.fetch_offset_metadata

    def fetch_high_watermark_metadata(self) -> LogOffsetMetadata:
        """The HW with its segment and position (resolved from the offset and cached if needed);
        DelayedFetch compares positions with it."""
        hw = self._high_watermark_metadata
        if not hw.message_offset_only:
            return hw
        with self._lock:
            hw = self._high_watermark_metadata
            if hw.message_offset_only:
                if hw.message_offset >= self.log_end_offset:
                    hw = self._next_offset_metadata
                else:
                    hw = self._convert_to_offset_metadata(hw.message_offset)
                self._high_watermark_metadata = hw
            return hw

    _fetch_high_watermark_metadata = fetch_high_watermark_metadata

    def fetch_last_stable_offset_metadata(self) -> LogOffsetMetadata:
        """The LSO with its segment and position (read_committed fetch bound)."""
        hw = self.fetch_high_watermark_metadata()
        fuo = self._first_unstable_offset
        if fuo is None or fuo >= hw.message_offset:
            return hw
        return self._convert_to_offset_metadata(fuo)

    def fetch_offset_by_timestamp(
        self, target_timestamp: int, refine: RecordSearch | None = None
    ) -> TimestampAndOffset | None:
        """ListOffsets: -2 earliest (log start offset), -1 latest (LEO; the partition caps it at the HW
        or LSO), -3 the batch holding the max timestamp, -4 earliest local (= earliest), -5 latest
        tiered (none: offset -1), >= 0 the first batch with max timestamp >= target (time index +
        offset index + header scan). Without ``refine`` the answer is batch-granular: the base offset of
        that batch and its max timestamp; ``refine`` (a record decoder) can pin the exact record.
        Returns None when no batch qualifies. See :mod:`pykbroker.log.timestamp_search`."""
        return fetch_offset_by_timestamp(
            self._segments.values(),
            target_timestamp,
            self._log_start_offset,
            self.log_end_offset,
            self.leader_epoch_cache,
            refine,
        )

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int] | None:
        """OffsetForLeaderEpoch: ``(end_offset, epoch)`` or None if unknown."""
        epoch, offset = self.leader_epoch_cache.end_offset_for_epoch(leader_epoch, self.log_end_offset)
        return None if offset == -1 else (offset, epoch)

    # -- offsets ------------------------------------------------------------------------------
    def update_high_watermark(self, hw: int) -> int:
        """Set the HW, clamped to [log start offset, LEO]. Returns the value set."""
        with self._lock:
            end = self._next_offset_metadata
            if hw >= end.message_offset:
                self._high_watermark_metadata = end
                self._on_high_watermark_updated(end.message_offset)
                return end.message_offset
            hw = max(hw, self._log_start_offset)
            self._high_watermark_metadata = LogOffsetMetadata(hw)
            self._on_high_watermark_updated(hw)
            return hw

    def _on_high_watermark_updated(self, hw: int) -> None:
        """Completed transactions below the HW stop holding the LSO back. Caller holds the lock."""
        psm = self.producer_state_manager
        if psm.has_unreplicated_txns:
            psm.on_high_watermark_updated(hw)
            self._first_unstable_offset = psm.first_unstable_offset
        listener = self.change_listener
        if listener is not None:
            listener()

    def maybe_increment_high_watermark(self, new_hw: LogOffsetMetadata | int) -> int | None:
        """Raise the HW to ``new_hw`` (<= LEO) if that is an increase. Returns the old HW or None."""
        if isinstance(new_hw, int):
            new_hw = self._next_offset_metadata if new_hw == self.log_end_offset else LogOffsetMetadata(new_hw)
        with self._lock:
            if new_hw.message_offset > self.log_end_offset:
                raise ValueError(
                    f"High watermark {new_hw.message_offset} update exceeds current log end offset "
                    f"{self.log_end_offset}"
                )
            old = self._high_watermark_metadata
            if old.message_offset < new_hw.message_offset or (
                old.message_offset == new_hw.message_offset
                and old.message_offset_only
                and not new_hw.message_offset_only
            ):
                self._high_watermark_metadata = new_hw
                self._on_high_watermark_updated(new_hw.message_offset)
                return old.message_offset
            return None

    def maybe_increment_high_watermark_to_end(self) -> bool:
        """``maybe_increment_high_watermark(log_end_offset)`` (the leader without followers after an append),
        reading the LEO under the log lock: True if the HW moved."""
        with self._lock:
            end = self._next_offset_metadata
            old = self._high_watermark_metadata
            if old.message_offset < end.message_offset or (
                old.message_offset == end.message_offset and old.message_offset_only and not end.message_offset_only
            ):
                self._high_watermark_metadata = end
                self._on_high_watermark_updated(end.message_offset)
                return True
            return False

    def maybe_increment_log_start_offset(self, new_log_start_offset: int, reason: str = "client delete") -> bool:
        """Advance the log start offset (DeleteRecords, retention). Raises OffsetOutOfRangeError above
        the HW. Returns True if it moved."""
        with self._lock:
            if new_log_start_offset > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"Cannot increment the log start offset to {new_log_start_offset} of partition {self.name} "
                    f"since it is larger than the high watermark {self.high_watermark}"
                )
            if new_log_start_offset <= self._log_start_offset:
                return False
            self._log_start_offset = new_log_start_offset
            self._recovery_point = max(self._recovery_point, new_log_start_offset)
            self.leader_epoch_cache.truncate_from_start(new_log_start_offset)
            self.producer_state_manager.on_log_start_offset_incremented(new_log_start_offset)
            self._first_unstable_offset = self.producer_state_manager.first_unstable_offset
            listener = self.change_listener
            if listener is not None:
                listener()
            self._log.info("Incremented log start offset", log_start_offset=new_log_start_offset, reason=reason)
            return True

    # -- retention ----------------------------------------------------------------------------
    def delete_old_segments(self) -> int:
        """Delete whole non-active segments breaching ``retention.ms`` (by largest timestamp),
        ``retention.bytes``, or lying below the log start offset; advance the log start offset to the
        new first segment. Only segments wholly below the HW go. Returns the number deleted."""
        config = self._config
        deleted = self._delete_segments_matching(start_offset_breached(self), "log start offset breach")
        if config.delete:
            deleted += self._delete_segments_matching(
                retention_size_breached(self, config.retention_bytes), "retention size breach"
            )
            deleted += self._delete_segments_matching(
                retention_ms_breached(self._time.milliseconds(), config.retention_ms), "retention time breach"
            )
        return deleted

    def _delete_segments_matching(self, predicate, reason: str) -> int:
        if predicate is None:
            return 0
        with self._lock, self._io("deleting segments of"):
            deletable = deletable_segments(self._segments.values(), predicate, self.high_watermark, self.log_end_offset)
            if not deletable:
                return 0
            to_delete = list(deletable)
            if len(self._segments) == len(to_delete):
                new_segment = self.roll()
                if to_delete[-1].base_offset == new_segment.base_offset:
                    to_delete.pop()
            self._remove_and_delete_segments(to_delete, async_delete=True)
            for segment in deletable:
                self.producer_state_manager.delete_snapshot(segment.base_offset)
            first = self._segments.first_segment()
            self._log.info("Deleting segments", reason=reason, segments=[s.base_offset for s in to_delete])
            if first is not None:
                self.maybe_increment_log_start_offset(first.base_offset, reason)
            return len(deletable)

    def _remove_and_delete_segments(self, segments: list[LogSegment], async_delete: bool) -> None:
        for segment in segments:
            self._segments.remove(segment.base_offset)
        for segment in segments:
            try:
                segment.change_file_suffixes("", DELETED_FILE_SUFFIX)
            except OSError as e:
                self._log.warning("Failed to rename segment for deletion", segment=segment.log.path, error=str(e))

        def delete_files() -> None:
            with self._io("deleting segment files of"):
                for s in segments:
                    s.delete_if_exists()

        delay = self._config.file_delete_delay_ms
        if async_delete and self._scheduler is not None:
            self._scheduler.schedule_once("delete-file", storage_task("delete-file", delete_files, self._log), delay)
        else:
            delete_files()

    # -- truncation ---------------------------------------------------------------------------
    def truncate_to(self, target_offset: int) -> bool:
        """Remove everything at and after ``target_offset`` (follower truncation), by whole batches: if
        a batch straddles the target it goes too and the LEO ends below the target. Returns False if
        the log already ends at or before it."""
        if target_offset < 0:
            raise ValueError(f"Cannot truncate partition {self.name} to a negative offset ({target_offset}).")
        with self._lock, self._io(f"truncating to offset {target_offset} the log of"):
            self._check_open()
            if target_offset >= self.log_end_offset:
                return False
            self._log.info("Truncating log", target_offset=target_offset)
            first = self._segments.first_segment()
            if first is None or first.base_offset > target_offset:
                self.truncate_fully_and_start_at(target_offset)
                return True
            later = [s for s in self._segments.values() if s.base_offset > target_offset]
            self._remove_and_delete_segments(later, async_delete=True)
            active = self._segments.active_segment
            active.truncate_to(target_offset)
            # Whole batches go: a batch straddling the target is removed, so the log may end below it.
            new_end = min(target_offset, max(active.read_next_offset(), self._log_start_offset))
            self.leader_epoch_cache.truncate_from_end(new_end)
            self._update_log_end_offset(new_end)
            self._recovery_point = min(self._recovery_point, new_end)
            self._log_start_offset = min(self._log_start_offset, new_end)
            self._rebuild_producer_state(new_end, False)
            if self.high_watermark >= new_end:
                self._high_watermark_metadata = self._next_offset_metadata
            return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and restart the log, empty, at ``new_offset``."""
        with self._lock, self._io(f"truncating fully to start at {new_offset} the log of"):
            self._check_open()
            self._remove_and_delete_segments(list(self._segments.values()), async_delete=True)
            segment = LogSegment.open(
                self._dir,
                new_offset,
                self._config,
                self._time,
                init_file_size=self._config.segment_bytes,
                preallocate=self._config.preallocate,
            )
            self._segments.add(segment)
            self._update_log_end_offset(new_offset)
            self.leader_epoch_cache.clear_and_flush()
            self.producer_state_manager.truncate_fully_and_start_at(new_offset)
            self._first_unstable_offset = None
            self._log_start_offset = new_offset
            self._recovery_point = new_offset
            self._high_watermark_metadata = self._next_offset_metadata

    # -- producer state -----------------------------------------------------------------------
    def _rebuild_producer_state(self, last_offset: int, reload_from_clean_shutdown: bool) -> None:
        """Load the latest snapshot <= ``last_offset`` and replay batch headers up to ``last_offset``."""
        psm = self.producer_state_manager
        if psm.latest_snapshot_offset() is None and reload_from_clean_shutdown:
            psm.update_map_end_offset(last_offset)  # nothing was snapshotted: no producers to rebuild
            psm.take_snapshot(sync=False)
            return
        psm.truncate_and_reload(self._log_start_offset, last_offset, self._time.milliseconds())
        if last_offset > psm.map_end_offset:
            replay_start = psm.map_end_offset
            for segment in self._segments.values_between(psm.map_end_offset, last_offset):
                # The replay rebuilds the aborted-transaction entries of what it covers.
                segment.txn_index.truncate_to(max(replay_start, segment.base_offset))
            for segment in self._segments.values_between(psm.map_end_offset, last_offset):
                start = max(segment.base_offset, psm.map_end_offset, self._log_start_offset)
                psm.update_map_end_offset(start)
                found = segment.translate_offset(start)
                if found is None:
                    continue

                def marker_of(batch, log=segment.log):
                    return read_end_txn_marker(log.slice(batch.position, batch.size_in_bytes).read_bytes())

                def on_completed(txn, lso, segment=segment):
                    if txn.is_aborted:
                        segment.update_txn_index(txn.producer_id, txn.first_offset, txn.last_offset, lso)

                psm.apply_batches(
                    (b for b in segment.log.batches_from(found.position) if b.base_offset < last_offset),
                    marker_of=marker_of,
                    on_completed=on_completed,
                )
        psm.update_map_end_offset(last_offset)
        psm.take_snapshot(sync=False)
        self._first_unstable_offset = psm.first_unstable_offset

    def active_producers(self) -> list:
        """A copy of the producer state entries (DescribeProducers)."""
        with self._lock:
            return [self._entry_copy(e) for e in self.producer_state_manager.producers.values()]

    @staticmethod
    def _entry_copy(entry):
        copy = entry.copy_without_batches()
        copy.batch_metadata.extend(entry.batch_metadata)
        return copy

    def remove_expired_producers(self) -> int:
        with self._lock:
            return self.producer_state_manager.remove_expired_producers(self._time.milliseconds())

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        """Snapshot producer state at the LEO and close (flush, trim) every segment."""
        with self._lock:
            if self._closed:
                return
            self._flush_metadata_file()
            psm = self.producer_state_manager
            psm.update_map_end_offset(self.log_end_offset)
            psm.take_snapshot(sync=True)
            for segment in self._segments.values():
                segment.close()
            self._closed = True

    def close_handlers(self) -> None:
        """Release descriptors and mappings without flushing (before a directory delete)."""
        with self._lock:
            for segment in self._segments.values():
                segment.close_handlers()
            self._closed = True

    def rename_dir(self, name: str) -> None:
        """Rename the partition directory (e.g. to ``...-delete``) keeping every handle valid."""
        with self._lock:
            new_dir = os.path.join(os.path.dirname(self._dir), name)
            pending_topic_id = self._partition_metadata.discard()  # waits for a write in progress
            os.replace(self._dir, new_dir)
            self._dir = new_dir
            self._parent_dir = os.path.dirname(new_dir)
            for segment in self._segments.values():
                segment.update_parent_dir(new_dir)
            self.producer_state_manager.update_parent_dir(new_dir)
            self.leader_epoch_cache.update_checkpoint(
                LeaderEpochCheckpointFile(os.path.join(new_dir, LEADER_EPOCH_CHECKPOINT_FILE))
            )
            self._partition_metadata = PartitionMetadataFile(new_dir, pending_topic_id)
            self._log = self._logger()

    def delete(self) -> None:
        """Delete every file and the directory."""
        with self._lock:
            for segment in self._segments.clear():
                segment.delete_if_exists()
            self._closed = True
            self._partition_metadata.discard()
            self.leader_epoch_cache.update_checkpoint(None)
            shutil.rmtree(self._dir, ignore_errors=True)

    def __repr__(self) -> str:
        return (
            f"UnifiedLog(dir={self._dir}, log_start_offset={self._log_start_offset}, "
            f"log_end_offset={self.log_end_offset}, high_watermark={self.high_watermark})"
        )
