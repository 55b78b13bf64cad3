"""Validate a produce request's records for one partition and assign their offsets.

Mirrors ``org.apache.kafka.storage.internals.log.LogValidator.validateMessagesAndAssignOffsets``
for magic 2, together with the per-batch checks of ``UnifiedLog.analyzeAndValidateRecords`` that
precede it (base offset 0 from clients, ``max.message.bytes``, CRC), so the caller runs one step.

Theory of operation
-------------------
The input holds exactly one v2 batch (Kafka requires that for magic 2; a trailing partial batch
is trimmed). Checks, in Kafka's order: magic 2 (INVALID_RECORD), client batches have base offset
0 (INVALID_RECORD), size <= ``max.message.bytes`` (MESSAGE_TOO_LARGE), CRC-32C (CORRUPT_MESSAGE),
then ``validateBatch``: for clients ``lastOffsetDelta + 1 == recordsCount > 0``, no control
batches, idempotent batches need ``baseSequence >= 0`` (INVALID_RECORD). Then one of three paths:

1. **Uncompressed in, uncompressed target: in place, no per-record Python.** Kafka walks every
   record here to check timestamps and count them. We do not: the header gives the record count
   (``lastOffsetDelta + 1 == recordsCount``), the first record's timestamp (``baseTimestamp``)
   and the max (``maxTimestamp``), so the window check is ``now - before.max.ms <= baseTimestamp
   <= maxTimestamp <= now + after.max.ms``, and the batch CRC already proves the bytes are the
   producer's. **Deviation from Kafka, on purpose:** a record whose timestamp is below the batch's
   first one, a header ``maxTimestamp`` that understates the records, and records whose structure
   contradicts the header's count are not detected on this path (Kafka would answer
   INVALID_TIMESTAMP / INVALID_RECORD). Only a buggy or hostile producer can send such a batch,
   and it can only hurt its own partition (consumers reject malformed records themselves); in
   exchange the broker's hot path costs the same for 1 or 10,000 records. Whenever the header
   check does not pass (or is inconclusive), the records are walked exactly as Kafka does, so
   every rejection carries Kafka's per-record ``record_errors``. Records are also walked for
   compacted topics (every record needs a key) and when ``verify_uncompressed_records`` is set.
   Stamping: ``set_last_offset``, ``set_partition_leader_epoch`` (both outside the CRC) and, only
   for LogAppendTime topics (or a producer claiming LogAppendTime), ``set_max_timestamp``, which
   recomputes the CRC. The common case (one writable plain batch, every check passing) is done from
   one header read with one struct stamp (``validate_messages_and_assign_offsets``'s fast path);
   anything else takes the general path (``_validate_general``), which gives the same result.
2. **Compressed, source codec == target codec (``compression.type=producer`` or equal): in
   place.** As Kafka: decompress and walk every record (skipping keys and values), validate keys
   and timestamps, and check that inner offset deltas are ``0..n-1``; if they are not, fall
   through to 3. Then stamp the outer header as in 1.
3. **Codec differs from the target (or bad inner offsets): re-build.** Decompress, decode,
   validate, and build a new batch with the target codec (keeping producer id/epoch/sequence and
   the transactional flag), offsets assigned from ``offset_counter``. The new batch must still fit
   ``max.message.bytes`` (MESSAGE_TOO_LARGE). Uncompressed control batches stay in place.

Per-record problems are collected as ``RecordError(batch_index, message)`` and raised together
as :class:`RecordValidationError`, whose code is INVALID_TIMESTAMP if any timestamp failed, else
INVALID_RECORD (``RecordValidationException``). Structural garbage inside a batch whose CRC holds
is INVALID_RECORD (Kafka's ``InvalidRecordException``); a compressed blob that does not decompress
is CORRUPT_MESSAGE. Decompressed output is capped at ``decompression_limit(max.message.bytes)``.

Buffers: stamping writes into the caller's buffer when it is writable (pass the request's
``bytearray``); a read-only buffer is copied once. The result's ``validated_records`` is a
memoryview of the bytes to append. Sans-I/O and stateless: one instance per append, or one per
partition leader's settings validating many appends (``validate(records, offset)``), any thread.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from pykbroker.log.producer_state_entry import AppendOrigin  # the log's one AppendOrigin enum
from pykbroker.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaError,
    RecordTooLargeError,
)
from pykbroker.record import compression as _compression
from pykbroker.record.batch_records import records_data
from pykbroker.record.compression import Compression, decompression_limit
from pykbroker.record.crc import crc32c as _crc32c  # crc32c.crc32c without the package's __init__ (start-up)
from pykbroker.record.default_record import read_records, scan_records
from pykbroker.record.default_record_batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    CREATE_TIME,
    CURRENT_MAGIC,
    HEADER,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    RecordBatch,
    iter_batches,
)
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder, encode_batch

DEFAULT_MAX_MESSAGE_BYTES = 1048588  # max.message.bytes default
LONG_MAX = 2**63 - 1


class RecordError(NamedTuple):
    """``ProduceResponse.RecordError``: the index of the bad record in its batch and why."""

    batch_index: int
    message: str | None = None


class RecordValidationError(KafkaError):
    """``RecordValidationException``: ``invalid_exception`` is the InvalidTimestampError or
    InvalidRecordError the produce response reports (this exception's ``code``/``name`` are its),
    ``record_errors`` the per-record details for the response's ``record_errors`` field."""

    def __init__(self, invalid_exception: KafkaError, record_errors: list[RecordError]):
        super().__init__(str(invalid_exception))
        self.invalid_exception = invalid_exception
        self.record_errors = record_errors
        self.code = invalid_exception.code
        self.name = invalid_exception.name
        self.retriable = invalid_exception.retriable


class MetricsRecorder:
    """``LogValidator.MetricsRecorder``: hooks for BrokerTopicStats; the default does nothing."""

    def record_invalid_magic(self) -> None: ...

    def record_invalid_offset(self) -> None: ...

    def record_invalid_sequence(self) -> None: ...

    def record_invalid_checksums(self) -> None: ...

    def record_no_key_compacted_topic(self) -> None: ...


_NO_METRICS = MetricsRecorder()

# Indexes of RecordBatch.header()'s fields (HEADER's layout order)
_BASE_OFFSET, _LENGTH, _MAGIC, _CRC, _ATTRIBUTES, _LAST_OFFSET_DELTA, _BASE_TIMESTAMP, _MAX_TIMESTAMP = (
    0,
    1,
    3,
    4,
    5,
    6,
    7,
    8,
)
_PRODUCER_ID, _BASE_SEQUENCE, _RECORDS_COUNT = 9, 11, 12

#: the fast path's stamps: baseOffset, batchLength (rewritten unchanged), partitionLeaderEpoch (all outside the CRC)
_PREFIX_AND_EPOCH = struct.Struct(">qii")
#: attributes (int16) and maxTimestamp (int64) are not adjacent: two stamps, then the CRC (uint32 at 17)
_ATTRIBUTES_STAMP = struct.Struct(">h")
_MAX_TIMESTAMP_STAMP = struct.Struct(">q")
_CRC_STAMP = struct.Struct(">I")
#: attributes that keep a batch off the fast path: a codec or the control flag
_NOT_PLAIN = COMPRESSION_CODEC_MASK | CONTROL_FLAG_MASK

#: AppendOrigin member -> its name (an enum's ``name`` is a Python-level property: read once here, not per append)
_ORIGIN_NAMES: dict = {id(origin): origin.name for origin in AppendOrigin}


#: ``tuple.__new__``: builds a NamedTuple from a tuple of all its fields without the Python-level ``__new__``
_new_tuple = tuple.__new__


class ValidationResult(NamedTuple):
    """What the log appends. ``validated_records``: the bytes to write (memoryview; the caller's
    buffer when stamped in place). Offsets are absolute; ``max_timestamp_ms`` is -1 when no record
    has a timestamp, with ``shallow_offset_of_max_timestamp`` the batch's last offset (-1 then).
    ``message_size_maybe_changed`` is True only when the batch was re-built."""

    validated_records: memoryview
    first_offset: int
    last_offset: int
    records_count: int
    log_append_time_ms: int
    max_timestamp_ms: int
    shallow_offset_of_max_timestamp: int
    message_size_maybe_changed: bool
    source_compression: int
    target_compression: int


class LogValidator:
    """An append's validation (see the module docstring); :meth:`validate` takes the records of further appends
    with the same settings.

    ``records``: the partition's records from the produce request (bytes-like; writable to stamp in
    place). ``topic_partition``: for messages. ``time``: a ``Time`` (``milliseconds()``).
    ``target_compression``: the topic's ``compression.type`` as a codec (id, name or Compression),
    or None/``"producer"`` to keep the producer's codec. ``timestamp_type``: CREATE_TIME or
    LOG_APPEND_TIME. ``timestamp_before_max_ms``/``timestamp_after_max_ms``: the window around now
    for CreateTime. ``max_message_bytes``: batch size limit. ``partition_leader_epoch``: stamped
    into the batch. ``max_decompressed_bytes``: None = ``decompression_limit(max_message_bytes)``.
    """

    def __init__(
        self,
        records,
        topic_partition: str,
        time,
        *,
        target_compression=None,
        compacted_topic: bool = False,
        timestamp_type: int = CREATE_TIME,
        timestamp_before_max_ms: int = LONG_MAX,
        timestamp_after_max_ms: int = LONG_MAX,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        partition_leader_epoch: int = -1,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        max_decompressed_bytes: int | None = None,
        verify_uncompressed_records: bool = False,
        metrics_recorder: MetricsRecorder = _NO_METRICS,
    ):
        self.records = records
        self.topic_partition = topic_partition
        self.time = time
        self.target_compression: Compression | None = (
            None
            if target_compression is None or target_compression == "producer"
            else _compression.of(target_compression)
        )
        self.compacted_topic = compacted_topic
        self.timestamp_type = timestamp_type
        self.timestamp_before_max_ms = timestamp_before_max_ms
        self.timestamp_after_max_ms = timestamp_after_max_ms
        self.max_message_bytes = max_message_bytes
        self.partition_leader_epoch = partition_leader_epoch
        self.origin = origin
        # Compared by name: AppendOrigin (CLIENT, COORDINATOR, REPLICATION) has no RAFT_LEADER yet.
        if type(origin) is AppendOrigin:
            self._origin_name = _ORIGIN_NAMES[id(origin)]  # by identity: an enum member's hash is a Python call
        else:
            self._origin_name = (getattr(origin, "name", None) or str(origin)).upper()
        self._max_decompressed_bytes = max_decompressed_bytes  # None: computed when a compressed batch needs it
        self.verify_uncompressed_records = verify_uncompressed_records
        self.metrics = metrics_recorder
        # the fast path (see validate_messages_and_assign_offsets) applies: path 1 without a record walk, for a
        # client's or a coordinator's append (RAFT_LEADER checks the stamped epoch: general path)
        self._fast = (
            (self.target_compression is None or self.target_compression.id == _compression.NONE)
            and not compacted_topic
            and not verify_uncompressed_records
            and self._origin_name in ("CLIENT", "COORDINATOR")
        )

    @property
    def max_decompressed_bytes(self) -> int:
        """The decompressed-size limit of a compressed batch (``decompression_limit(max_message_bytes)`` unless
        given): computed on first use, as an uncompressed append never needs it."""
        limit = self._max_decompressed_bytes
        if limit is None:
            limit = self._max_decompressed_bytes = decompression_limit(self.max_message_bytes)
        return limit

    # -- entry point -----------------------------------------------------------------------------
    def validate_messages_and_assign_offsets(self, offset_counter: int) -> ValidationResult:
        """Validate this validator's ``records`` and assign offsets from ``offset_counter``: :meth:`validate`."""
        return self.validate(self.records, offset_counter)

    def validate(self, records, offset_counter: int) -> ValidationResult:
        """Validate ``records`` (as the constructor's) and assign offsets starting at ``offset_counter`` (the log
        end offset). The settings are read only, so one validator may validate many appends (a partition
        leader's, while its config, epoch and origin hold), from any thread.
        Raises InvalidRecordError, RecordTooLargeError, CorruptRecordError,
        UnsupportedCompressionTypeError or RecordValidationError, having modified nothing (stamping
        is the last step).

        Fast path (the common produce): a writable buffer holding exactly one uncompressed, non-control magic-2
        batch with base offset 0, within ``max.message.bytes``, whose CRC holds, whose header passes
        ``validateBatch`` and the timestamp window, for an uncompressed target on a non-compacted topic: checked
        from one header read and stamped in place, with the same result as the general path ``_validate_general`` (which
        runs whenever any of this does not hold, and raises Kafka's error)."""
        now = self.time.milliseconds()
        buf = records if type(records) is memoryview else memoryview(records)
        n = len(buf)
        if self._fast and n >= RECORD_BATCH_OVERHEAD and not buf.readonly:
            h = HEADER.unpack_from(buf, 0)
            attrs = h[_ATTRIBUTES]
            count = h[_RECORDS_COUNT]
            if (
                h[_MAGIC] == CURRENT_MAGIC
                and h[_LENGTH] + LOG_OVERHEAD == n  # one whole batch, nothing after it
                and h[_BASE_OFFSET] == 0
                and n <= self.max_message_bytes
                and not attrs & _NOT_PLAIN
                and count > 0
                and h[_LAST_OFFSET_DELTA] + 1 == count
                and (h[_PRODUCER_ID] == NO_PRODUCER_ID or h[_BASE_SEQUENCE] >= 0)
                and self._header_timestamps_valid(h, now)
                and h[_CRC] == _crc32c(buf[ATTRIBUTES_OFFSET:])
            ):
                # _stamp_in_place's stamps: offsets from offset_counter (baseOffset = last - lastOffsetDelta),
                # the leader epoch, and the timestamp type / max timestamp (re-CRC only if they change)
                last_offset = offset_counter + count - 1
                _PREFIX_AND_EPOCH.pack_into(buf, 0, offset_counter, h[_LENGTH], self.partition_leader_epoch)
                max_timestamp = h[_MAX_TIMESTAMP]
                if self.timestamp_type == LOG_APPEND_TIME:
                    max_timestamp = now
                    new_attrs = attrs | TIMESTAMP_TYPE_MASK
                else:
                    new_attrs = attrs & ~TIMESTAMP_TYPE_MASK
                if new_attrs != attrs or max_timestamp != h[_MAX_TIMESTAMP]:
                    _ATTRIBUTES_STAMP.pack_into(buf, ATTRIBUTES_OFFSET, new_attrs)
                    _MAX_TIMESTAMP_STAMP.pack_into(buf, MAX_TIMESTAMP_OFFSET, max_timestamp)
                    _CRC_STAMP.pack_into(buf, CRC_OFFSET, _crc32c(buf[ATTRIBUTES_OFFSET:]))
                # tuple.__new__ directly: the NamedTuple's own __new__ is a Python-level lambda (one call less)
                return _new_tuple(
                    ValidationResult,
                    (
                        buf,
                        offset_counter,
                        last_offset,
                        count,
                        now,
                        max_timestamp,
                        last_offset if max_timestamp > NO_TIMESTAMP else -1,
                        False,
                        _compression.NONE,
                        _compression.NONE,
                    ),
                )
        return self._validate_general(buf, offset_counter, now)

    def _validate_general(self, buf: memoryview, offset_counter: int, now: int) -> ValidationResult:
        batch = self._single_batch(buf)
        header = batch.header()  # the 13 header fields read once (one struct call), see RecordBatch.header
        self._validate_batch(batch, header)
        source = header[_ATTRIBUTES] & COMPRESSION_CODEC_MASK
        target = source if self.target_compression is None else self.target_compression.id
        if source == _compression.NONE and target == _compression.NONE:
            return self._assign_offsets_non_compressed(batch, offset_counter, now, header)
        return self._validate_compressed(batch, offset_counter, now, source)

    # -- batch level -----------------------------------------------------------------------------
    def _single_batch(self, buf: memoryview) -> RecordBatch:
        tp = self.topic_partition
        if len(buf) > MAGIC_OFFSET and buf[MAGIC_OFFSET] != CURRENT_MAGIC:
            self.metrics.record_invalid_magic()
            raise InvalidRecordError(
                f"Produce requests to {tp} are only allowed to contain record batches "
                f"with magic version {CURRENT_MAGIC}, not {buf[MAGIC_OFFSET]}"
            )
        batches = iter_batches(buf)
        first = next(batches, None)
        if first is None:
            raise InvalidRecordError(f"Record batch has no batches at all in topic partition {tp}")
        if next(batches, None) is not None:
            raise InvalidRecordError(f"Compressed outer record has more than one batch in topic partition {tp}")
        _, batch = first
        if self._origin_name == "CLIENT" and batch.base_offset != 0:
            raise InvalidRecordError(
                f"The baseOffset of the record batch in the append to {tp} should be 0, but it is {batch.base_offset}"
            )
        if self._origin_name == "RAFT_LEADER" and batch.partition_leader_epoch != self.partition_leader_epoch:
            raise InvalidRecordError("Append from Raft leader did not set the batch epoch correctly")
        if batch.size_in_bytes > self.max_message_bytes:
            raise RecordTooLargeError(
                f"The record batch size in the append to {tp} is {batch.size_in_bytes} "
                f"bytes which exceeds the maximum configured value of {self.max_message_bytes}."
            )
        if not batch.is_valid():
            self.metrics.record_invalid_checksums()
            raise CorruptRecordError(f"Record is corrupt (stored crc = {batch.checksum}) in topic partition {tp}.")
        return batch

    def _validate_batch(self, batch: RecordBatch, header: tuple) -> None:
        """Kafka's ``validateBatch`` (client appends only); ``header``: ``batch.header()``."""
        if self._origin_name != "CLIENT":
            return
        tp = self.topic_partition
        base = header[_BASE_OFFSET]
        last = base + header[_LAST_OFFSET_DELTA]
        count_from_offsets = last - base + 1
        if count_from_offsets <= 0:
            self.metrics.record_invalid_offset()
            raise InvalidRecordError(f"Batch has an invalid offset range: [{base}, {last}] in topic partition {tp}")
        count = header[_RECORDS_COUNT]
        if count <= 0:
            self.metrics.record_invalid_offset()
            raise InvalidRecordError(f"Invalid reported count for record batch: {count} in topic partition {tp}")
        if count_from_offsets != count:
            self.metrics.record_invalid_offset()
            raise InvalidRecordError(
                f"Inconsistent batch offset range [{base}, {last}] and count of records {count} in topic partition {tp}"
            )
        if header[_ATTRIBUTES] & CONTROL_FLAG_MASK:
            self.metrics.record_invalid_offset()
            raise InvalidRecordError(f"Clients are not allowed to write control records in topic partition {tp}")
        if header[_PRODUCER_ID] != NO_PRODUCER_ID and header[_BASE_SEQUENCE] < 0:
            self.metrics.record_invalid_sequence()
            raise InvalidRecordError(
                f"Invalid sequence number {batch.base_sequence} in record batch with "
                f"producerId {batch.producer_id} in topic partition {tp}"
            )

    # -- path 1: uncompressed in place ------------------------------------------------------------
    def _assign_offsets_non_compressed(
        self, batch: RecordBatch, offset_counter: int, now: int, header: tuple
    ) -> ValidationResult:
        count = header[_RECORDS_COUNT]
        max_timestamp = header[_MAX_TIMESTAMP]
        if self.compacted_topic or self.verify_uncompressed_records or not self._header_timestamps_valid(header, now):
            timestamps = self._walk_and_validate(batch, now)[1]
            max_timestamp = max(timestamps, default=NO_TIMESTAMP)
        shallow_needs_timestamp = True  # Kafka: no shallow offset when no record has a timestamp
        return self._stamp_in_place(
            batch,
            offset_counter,
            count,
            max_timestamp,
            now,
            _compression.NONE,
            _compression.NONE,
            shallow_needs_timestamp,
        )

    def _header_timestamps_valid(self, header: tuple, now: int) -> bool:
        """True when the header (``RecordBatch.header()``) alone proves every record passes
        ``validateTimestamp``; False means "walk the records" (they may still be fine)."""
        base_ts, max_ts = header[_BASE_TIMESTAMP], header[_MAX_TIMESTAMP]
        batch_claims_log_append = bool(header[_ATTRIBUTES] & TIMESTAMP_TYPE_MASK)
        if self.timestamp_type != CREATE_TIME:
            return not batch_claims_log_append
        lower, upper = now - self.timestamp_before_max_ms, now + self.timestamp_after_max_ms
        if batch_claims_log_append:  # every record reports the header's max timestamp
            return max_ts != NO_TIMESTAMP and lower <= max_ts <= upper
        if base_ts == NO_TIMESTAMP and max_ts == NO_TIMESTAMP:
            return True  # no record carries a timestamp
        return lower <= base_ts <= max_ts <= upper

    # -- paths 2 and 3: compressed ----------------------------------------------------------------
    def _validate_compressed(self, batch: RecordBatch, offset_counter: int, now: int, source: int) -> ValidationResult:
        target = self.target_compression if self.target_compression is not None else _compression.for_id(source)
        # Uncompressed control batches are not compressed unless written compressed.
        in_place = source == target.id or (source == _compression.NONE and batch.is_control_batch)
        data, timestamps, offsets_in_order = self._walk_and_validate(batch, now)
        if offsets_in_order and in_place:
            return self._stamp_in_place(
                batch,
                offset_counter,
                len(timestamps),
                max(timestamps, default=NO_TIMESTAMP),
                now,
                source,
                target.id,
                False,
            )
        if offsets_in_order and batch.timestamp_type == CREATE_TIME and not batch.is_control_batch:
            return self._recompress(batch, data, timestamps, offset_counter, now, source, target)
        return self._build_and_assign_offsets(batch, data, offset_counter, now, source, target)

    def _recompress(
        self,
        batch: RecordBatch,
        data: bytes,
        timestamps: list,
        offset_counter: int,
        now: int,
        source: int,
        target: Compression,
    ) -> ValidationResult:
        """Re-build when only the codec changes: the records section (offset deltas 0..n-1, deltas
        relative to the batch's base timestamp) is already what a builder would write, so it is
        compressed again as it is instead of being decoded and re-encoded record by record."""
        count = len(timestamps)
        last_offset = offset_counter + count - 1
        if self.timestamp_type == LOG_APPEND_TIME:
            max_timestamp, shallow = now, last_offset
        else:
            max_timestamp = max(timestamps, default=NO_TIMESTAMP)
            shallow = last_offset if max_timestamp != NO_TIMESTAMP else -1
        built = encode_batch(
            data,
            count,
            offset_counter,
            count - 1,
            batch.base_timestamp,
            max_timestamp,
            target,
            self.timestamp_type,
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
            batch.is_transactional,
            False,
            self.partition_leader_epoch,
        )
        self._check_rebuilt_size(built)
        return ValidationResult(
            memoryview(built), offset_counter, last_offset, count, now, max_timestamp, shallow, True, source, target.id
        )

    def _build_and_assign_offsets(
        self, batch: RecordBatch, data: bytes, offset_counter: int, now: int, source: int, target: Compression
    ) -> ValidationResult:
        """Re-build record by record (``buildRecordsAndAssignOffsets``): inner offsets out of order,
        a producer claiming LogAppendTime, or a compressed control batch changing codec."""
        log_append_time = batch.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME else None
        try:
            records = read_records(data, batch.records_count, batch.base_offset, batch.base_timestamp, log_append_time)
        except CorruptRecordError as e:
            raise InvalidRecordError(f"{e} in topic partition {self.topic_partition}") from None
        builder = MemoryRecordsBuilder(
            offset_counter,
            target,
            self.timestamp_type,
            now,
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
            batch.is_transactional,
            False,
            self.partition_leader_epoch,
        )
        offset = offset_counter
        try:
            for record in records:
                builder.append_with_offset(offset, record.timestamp, record.key, record.value, record.headers)
                offset += 1
            built = builder.build()
        except ValueError as e:  # a negative timestamp, inconsistent producer state
            raise InvalidRecordError(f"{e} in topic partition {self.topic_partition}") from None
        self._check_rebuilt_size(built)
        info = builder.info()
        return ValidationResult(
            memoryview(built),
            offset_counter,
            offset - 1,
            len(records),
            now,
            info.max_timestamp,
            info.shallow_offset_of_max_timestamp,
            True,
            source,
            target.id,
        )

    def _check_rebuilt_size(self, built: bytes) -> None:
        if len(built) > self.max_message_bytes:
            raise RecordTooLargeError(
                f"The record batch size in the append to {self.topic_partition} is {len(built)} bytes which "
                f"exceeds the maximum configured value of {self.max_message_bytes}."
            )

    # -- records ---------------------------------------------------------------------------------
    def _walk_and_validate(self, batch: RecordBatch, now: int) -> tuple[bytes, list, bool]:
        """Decompress and walk the records without copying keys/values (``skipKeyValueIterator``),
        raising on any record error. Returns (uncompressed records section, record timestamps,
        whether inner offsets are the expected 0..n-1)."""
        data = records_data(batch, self.max_decompressed_bytes)
        try:
            scan = scan_records(data, batch.records_count)
        except CorruptRecordError as e:
            raise InvalidRecordError(f"{e} in topic partition {self.topic_partition}") from None
        n = len(scan.offset_deltas)
        if batch.timestamp_type == LOG_APPEND_TIME:
            timestamps = [batch.max_timestamp] * n
        else:
            base_ts = batch.base_timestamp
            timestamps = [base_ts + delta for delta in scan.timestamp_deltas]
        self._check_records(batch, now, timestamps, scan.null_key_indexes)
        base = batch.base_offset
        return data, timestamps, scan.offset_deltas == list(range(-base, n - base))

    def _check_records(self, batch: RecordBatch, now: int, timestamps: list, null_key_indexes: list) -> None:
        """``validateRecord`` over all records at once: keys (compacted topics) and timestamps.
        Cheap aggregate checks first; the per-record loop runs only to describe a failure."""
        errors: list[tuple[RecordError, bool]] = []  # (error, is_timestamp_error)
        tp = self.topic_partition
        if self.compacted_topic and null_key_indexes:
            for index in null_key_indexes:
                self.metrics.record_no_key_compacted_topic()
                errors.append(
                    (
                        RecordError(
                            index, f"Compacted topic cannot accept message without key in topic partition {tp}"
                        ),
                        False,
                    )
                )
        claims_log_append = batch.timestamp_type == LOG_APPEND_TIME
        lower, upper = now - self.timestamp_before_max_ms, now + self.timestamp_after_max_ms
        create_time = self.timestamp_type == CREATE_TIME
        if timestamps and (
            claims_log_append or (create_time and not (lower <= min(timestamps) and max(timestamps) <= upper))
        ):
            skip = set(null_key_indexes) if self.compacted_topic else ()
            base = batch.base_offset
            for index, ts in enumerate(timestamps):
                if index in skip:
                    continue
                if create_time and ts != NO_TIMESTAMP:
                    if now - ts > self.timestamp_before_max_ms or ts - now > self.timestamp_after_max_ms:
                        errors.append(
                            (
                                RecordError(
                                    index,
                                    f"Timestamp {ts} of message with offset {base + index} is "
                                    f"out of range. The timestamp should be within "
                                    f"[{lower}, {upper}]",
                                ),
                                True,
                            )
                        )
                elif claims_log_append:
                    errors.append(
                        (
                            RecordError(
                                index,
                                f"Invalid timestamp type in message with offset "
                                f"{base + index}. Producer should not set timestamp type "
                                "to LogAppendTime.",
                            ),
                            True,
                        )
                    )
        if errors:
            errors.sort(key=lambda e: e[0].batch_index)
            record_errors = [e for e, _ in errors]
            if any(is_ts for _, is_ts in errors):
                cause: KafkaError = InvalidTimestampError(
                    "One or more records have been rejected due to invalid timestamp"
                )
            else:
                cause = InvalidRecordError(
                    f"One or more records have been rejected due to {len(record_errors)} "
                    "record errors in total, and only showing the first three errors at "
                    f"most: {record_errors[:3]}"
                )
            raise RecordValidationError(cause, record_errors)

    # -- stamping --------------------------------------------------------------------------------
    def _stamp_in_place(
        self,
        batch: RecordBatch,
        offset_counter: int,
        count: int,
        max_timestamp: int,
        now: int,
        source: int,
        target: int,
        shallow_needs_timestamp: bool,
    ) -> ValidationResult:
        if batch.buf.readonly:
            batch = RecordBatch(memoryview(bytearray(batch.buf)))  # read-only input: the one copy
        last_offset = offset_counter + count - 1
        batch.set_last_offset(last_offset)
        batch.set_partition_leader_epoch(self.partition_leader_epoch)
        if self.timestamp_type == LOG_APPEND_TIME:
            max_timestamp = now
        batch.set_max_timestamp(self.timestamp_type, max_timestamp)
        shallow = last_offset if not shallow_needs_timestamp or max_timestamp > NO_TIMESTAMP else -1
        return ValidationResult(
            batch.buf, offset_counter, last_offset, count, now, max_timestamp, shallow, False, source, target
        )
