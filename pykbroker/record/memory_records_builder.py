"""Build one magic-2 record batch. Mirrors ``org.apache.kafka.common.record.MemoryRecordsBuilder``.

Used by our producer's record accumulator (one builder per open batch), the metadata/raft log
writer (control batches included) and the log validator when it must re-build a batch.

Shape of the work: ``append*`` encodes the record at once into a list of byte pieces (no copy of
the key/value), and :meth:`build` joins them, compresses the blob when a codec is set, writes the
61-byte header and one CRC-32C over ``[attributes, end)``. Compression happens once per batch
(Kafka streams records through the compressor; the output bytes are equivalent for every reader).

``append`` does a handful of list/attribute operations and table lookups for the varints (see
``bench/record_builder.py``). :func:`encode_record` encodes one record for both the builder and the
producer's batches (``clients/producer/producer_batch.py``, which keep their own pieces, have a short path
for key-less records and call :func:`encode_batch`).

Not thread-safe: a builder is owned by one thread at a time.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from pykbroker.record import compression as _compression
from pykbroker.record.control_record import ControlRecordType, EndTransactionMarker
from pykbroker.record.crc import crc32c as _crc32c  # (data, value=running crc) -> crc
from pykbroker.record.default_record import encode_headers, size_in_bytes
from pykbroker.record.default_record_batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    CREATE_TIME,
    CURRENT_MAGIC,
    DELETE_HORIZON_FLAG_MASK,
    HEADER,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
)
from pykbroker.record.varint import ENCODE_TABLE_LIMIT, ZIGZAG_ENCODED, encode_varint

COMPRESSION_RATE_ESTIMATION_FACTOR = 1.05
MAX_WRITE_LIMIT = 2**31 - 1
_INT32_MAX = 2**31 - 1
_U32 = struct.Struct(">I")
_TABLE_HALF = ENCODE_TABLE_LIMIT // 2  # non-negative values below this have their varint in ZIGZAG_ENCODED


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key,
    value,
    headers,
    _zz=ZIGZAG_ENCODED,
    _lim=_TABLE_HALF,
    _enc=encode_varint,
) -> tuple[tuple, int]:
    """One v2 record (Kafka's ``DefaultRecord.writeTo``) as its byte pieces (length, attributes, timestamp delta,
    offset delta, key length, key, value length, value, headers) and its size in bytes, length prefix included.
    ``offset_delta`` >= 0; a ``key``/``value`` of None is written with length -1; ``headers`` is a sequence of
    ``(str key, bytes | None value)`` or None. Varints of small non-negative values come from the varint table.
    The callers check the timestamp and the offset delta's range: it is the one encoder of MemoryRecordsBuilder's
    appends and of the producer's batches (same bytes)."""
    ts_delta = _zz[timestamp_delta << 1] if 0 <= timestamp_delta < _lim else _enc(timestamp_delta)
    off_delta = _zz[offset_delta << 1] if offset_delta < _lim else _enc(offset_delta)
    if key is None:
        key_length = b"\x01"
        key = b""
    else:
        k = len(key)
        key_length = _zz[k << 1] if k < _lim else _enc(k)
    if value is None:
        value_length = b"\x01"
        value = b""
    else:
        v = len(value)
        value_length = _zz[v << 1] if v < _lim else _enc(v)
    header_bytes = b"\x00" if not headers else encode_headers(headers)
    body = (
        1
        + len(ts_delta)
        + len(off_delta)
        + len(key_length)
        + len(key)
        + len(value_length)
        + len(value)
        + len(header_bytes)
    )
    length = _zz[body << 1] if body < _lim else _enc(body)
    pieces = (length, b"\x00", ts_delta, off_delta, key_length, key, value_length, value, header_bytes)
    return pieces, len(length) + body


class RecordsInfo(NamedTuple):
    """``MemoryRecordsBuilder.RecordsInfo``: the batch's max timestamp (ms, -1 if none) and the
    offset the log's time index should point at for it (the batch's last offset, -1 if none)."""

    max_timestamp: int
    shallow_offset_of_max_timestamp: int


class MemoryRecordsBuilder:
    """Accumulates records for one v2 batch and builds its bytes.

    Parameters mirror Kafka's builder: ``base_offset`` (offset of the first record; 0 from a
    producer), ``compression`` (codec id, name or :class:`~pykbroker.record.compression.Compression`),
    ``timestamp_type`` (CREATE_TIME / LOG_APPEND_TIME), ``log_append_time`` (ms; the header's max
    timestamp for LOG_APPEND_TIME), producer id/epoch/base sequence (-1 = not idempotent),
    ``is_transactional``, ``is_control_batch``, ``partition_leader_epoch``, ``write_limit`` (bytes
    the batch may grow to; the first record is always accepted) and ``delete_horizon_ms`` (cleaner).

    Offsets must increase; ``append`` takes the next one. Timestamps are ms (>= 0 or -1). Keys and
    values are bytes-like or None; headers a sequence of ``(str, bytes | None)``.
    """

    __slots__ = (
        "_base_offset",
        "_compression",
        "_timestamp_type",
        "_log_append_time",
        "_producer_id",
        "_producer_epoch",
        "_base_sequence",
        "_is_transactional",
        "_is_control_batch",
        "_partition_leader_epoch",
        "_write_limit",
        "_delete_horizon_ms",
        "_parts",
        "_records_size",
        "_num_records",
        "_last_offset",
        "_base_timestamp",
        "_max_timestamp",
        "_appends_closed",
        "_aborted",
        "_built",
        "_estimated_ratio",
        "_actual_ratio",
        "_uncompressed",
    )

    def __init__(
        self,
        base_offset: int = 0,
        compression=_compression.NONE,
        timestamp_type: int = CREATE_TIME,
        log_append_time: int = NO_TIMESTAMP,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control_batch: bool = False,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        write_limit: int = MAX_WRITE_LIMIT,
        delete_horizon_ms: int = NO_TIMESTAMP,
    ):
        if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise ValueError(f"Timestamp type must be CREATE_TIME or LOG_APPEND_TIME, not {timestamp_type}")
        self._base_offset = base_offset
        self._compression = _compression.of(compression)
        self._uncompressed = self._compression.id == _compression.NONE
        self._timestamp_type = timestamp_type
        self._log_append_time = log_append_time
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._is_transactional = is_transactional
        self._is_control_batch = is_control_batch
        self._partition_leader_epoch = partition_leader_epoch
        self._write_limit = write_limit
        self._delete_horizon_ms = delete_horizon_ms
        self._parts: list = []
        self._records_size = 0
        self._num_records = 0
        self._last_offset: int | None = None
        # With a delete horizon, baseTimestamp holds it and record deltas are relative to it.
        self._base_timestamp: int | None = delete_horizon_ms if delete_horizon_ms >= 0 else None
        self._max_timestamp = NO_TIMESTAMP
        self._appends_closed = False
        self._aborted = False
        self._built: bytes | None = None
        self._estimated_ratio = 1.0
        self._actual_ratio = 1.0

    # -- appends (hot path) ----------------------------------------------------------------------
    def append(self, timestamp: int, key, value, headers=None) -> int:
        """Append a record at the next offset; returns that offset."""
        last = self._last_offset
        offset = self._base_offset if last is None else last + 1
        self.append_with_offset(offset, timestamp, key, value, headers)
        return offset

    def append_with_offset(self, offset: int, timestamp: int, key, value, headers=None, _control: bool = False) -> None:
        """Append a record at ``offset`` (greater than the previous one). Raises ValueError for a
        non-increasing offset, a negative timestamp other than -1 or a control-flag mismatch, and
        RuntimeError once the builder is closed for appends."""
        if self._appends_closed:
            raise RuntimeError("Tried to append a record, but MemoryRecordsBuilder is closed for record appends")
        if _control is not self._is_control_batch:
            raise ValueError("Control records can only be appended to control batches")
        last = self._last_offset
        if last is not None and offset <= last:
            raise ValueError(
                f"Illegal offset {offset} following previous offset {last} (Offsets must increase monotonically)."
            )
        if timestamp < 0 and timestamp != NO_TIMESTAMP:
            raise ValueError(f"Invalid negative timestamp {timestamp}")
        offset_delta = offset - self._base_offset
        if offset_delta > _INT32_MAX or offset_delta < 0:
            raise ValueError(f"Offset delta {offset_delta} out of range (base offset {self._base_offset})")
        base_timestamp = self._base_timestamp
        if base_timestamp is None:
            base_timestamp = self._base_timestamp = timestamp
        pieces, size = encode_record(offset_delta, timestamp - base_timestamp, key, value, headers)
        self._parts += pieces
        self._records_size += size
        self._num_records += 1
        self._last_offset = offset
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp

    def try_append(self, timestamp: int, key, value, headers=None, _lim=_TABLE_HALF) -> int:
        """Append a record at the next offset if it fits under the write
        limit (the first record always fits); returns its offset delta, or -1 when there is no room.
        Encodes the record once (``has_room_for`` + ``append`` would size it twice) with :func:`encode_record`.
        Raises ValueError for a negative timestamp other than -1."""
        if self._appends_closed or self._is_control_batch:
            return -1
        n = self._num_records
        base_timestamp = self._base_timestamp
        if base_timestamp is None:
            if timestamp < 0 and timestamp != NO_TIMESTAMP:
                raise ValueError(f"Invalid negative timestamp {timestamp}")
            base_timestamp = self._base_timestamp = timestamp
        delta = timestamp - base_timestamp
        # base >= -1 and timestamp >= base: a valid timestamp, not checked again
        if not 0 <= delta < _lim and timestamp < 0 and timestamp != NO_TIMESTAMP:
            raise ValueError(f"Invalid negative timestamp {timestamp}")
        pieces, size = encode_record(n, delta, key, value, headers)
        if n:
            if self._uncompressed:
                if RECORD_BATCH_OVERHEAD + self._records_size + size > self._write_limit:
                    return -1
            elif self.estimated_bytes_written() + size > self._write_limit:
                return -1
        self._parts += pieces
        self._records_size += size
        self._num_records = n + 1
        self._last_offset = self._base_offset + n
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        return n

    def append_control_record(self, timestamp: int, control_type: ControlRecordType, value) -> int:
        """Append a control record of ``control_type`` at the next offset (control batches only)."""
        last = self._last_offset
        offset = self._base_offset if last is None else last + 1
        self.append_with_offset(offset, timestamp, ControlRecordType(control_type).record_key(), value, None, True)
        return offset

    def append_end_txn_marker(self, timestamp: int, marker: EndTransactionMarker) -> int:
        """Append a COMMIT/ABORT marker; needs a transactional control batch with a producer id."""
        if self._producer_id == NO_PRODUCER_ID:
            raise ValueError("End transaction marker requires a valid producerId")
        if not self._is_transactional:
            raise ValueError("End transaction marker depends on batch transactional flag being enabled")
        return self.append_control_record(timestamp, marker.control_type, marker.serialize_value())

    # -- sizing ----------------------------------------------------------------------------------
    def estimated_bytes_written(self) -> int:
        if self._compression.id == _compression.NONE:
            return RECORD_BATCH_OVERHEAD + self._records_size
        return RECORD_BATCH_OVERHEAD + int(
            self._records_size * self._estimated_ratio * COMPRESSION_RATE_ESTIMATION_FACTOR
        )

    def estimated_size_in_bytes(self) -> int:
        """The built size if built, else the estimate (compressed size guessed from the ratio)."""
        return len(self._built) if self._built is not None else self.estimated_bytes_written()

    def set_estimated_compression_ratio(self, ratio: float) -> None:
        self._estimated_ratio = ratio

    def has_room_for(self, timestamp: int, key, value, headers=None) -> bool:
        """Whether one more record fits under the write limit (always True for the first record)."""
        if self.is_full():
            return False
        if self._num_records == 0:
            return True
        last = self._last_offset
        assert last is not None  # there is a record
        next_delta = last - self._base_offset + 1
        timestamp_delta = 0 if self._base_timestamp is None else timestamp - self._base_timestamp
        record_size = size_in_bytes(next_delta, timestamp_delta, key, value, headers)
        return self._write_limit >= self.estimated_bytes_written() + record_size

    def is_full(self) -> bool:
        if self._appends_closed:
            return True
        if self._uncompressed:
            return self._num_records > 0 and self._write_limit <= RECORD_BATCH_OVERHEAD + self._records_size
        return self._num_records > 0 and self._write_limit <= self.estimated_bytes_written()

    # -- producer state --------------------------------------------------------------------------
    def set_producer_state(
        self, producer_id: int, producer_epoch: int, base_sequence: int, is_transactional: bool
    ) -> None:
        """Set idempotence fields before building (the producer assigns sequences when draining)."""
        if self._built is not None:
            raise RuntimeError(
                "Trying to set producer state of an already closed batch. This indicates a bug on the client."
            )
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._is_transactional = is_transactional

    def reopen_and_rewrite_producer_state(
        self, producer_id: int, producer_epoch: int, base_sequence: int, is_transactional: bool
    ) -> None:
        """Forget the built bytes and rebuild with new producer state (producer retry after an epoch bump)."""
        if self._aborted:
            raise RuntimeError("Should not reopen a batch which is already aborted.")
        self._built = None
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._is_transactional = is_transactional

    def override_last_offset(self, last_offset: int) -> None:
        if self._built is not None:
            raise RuntimeError("Cannot override the last offset after the records have been built")
        self._last_offset = last_offset

    # -- lifecycle -------------------------------------------------------------------------------
    def abort(self) -> None:
        self._appends_closed = True
        self._aborted = True
        self._parts = []

    def is_closed(self) -> bool:
        return self._built is not None

    def build(self) -> bytes:
        """The batch bytes (``b""`` when no record was appended). Idempotent; closes appends.
        Raises ValueError for inconsistent producer state, RuntimeError if aborted."""
        if self._aborted:
            raise RuntimeError("Attempting to build an aborted record batch")
        if self._built is not None:
            return self._built
        self._validate_producer_state()
        self._appends_closed = True
        if self._num_records == 0:
            self._built = b""
            return self._built
        raw = b"".join(self._parts)
        max_timestamp = self._log_append_time if self._timestamp_type == LOG_APPEND_TIME else self._max_timestamp
        last, base_timestamp = self._last_offset, self._base_timestamp
        assert last is not None and base_timestamp is not None  # set by the first append
        self._built = encode_batch(
            raw,
            self._num_records,
            self._base_offset,
            last - self._base_offset,
            base_timestamp,
            max_timestamp,
            self._compression,
            self._timestamp_type,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            self._is_transactional,
            self._is_control_batch,
            self._partition_leader_epoch,
            self._delete_horizon_ms >= 0,
        )
        self._actual_ratio = (len(self._built) - RECORD_BATCH_OVERHEAD) / len(raw)
        return self._built

    def _validate_producer_state(self) -> None:
        if self._is_transactional and self._producer_id == NO_PRODUCER_ID:
            raise ValueError("Cannot write transactional messages without a valid producer ID")
        if self._producer_id != NO_PRODUCER_ID:
            if self._producer_epoch == NO_PRODUCER_EPOCH:
                raise ValueError("Invalid negative producer epoch")
            if self._base_sequence < 0 and not self._is_control_batch:
                raise ValueError("Invalid negative sequence number used")

    # -- facts -----------------------------------------------------------------------------------
    def info(self) -> RecordsInfo:
        """Max timestamp and its shallow offset, as ``MemoryRecordsBuilder.info()`` for magic 2."""
        if self._timestamp_type == LOG_APPEND_TIME:
            return RecordsInfo(self._log_append_time, self._last_offset if self._last_offset is not None else -1)
        if self._max_timestamp == NO_TIMESTAMP:
            return RecordsInfo(NO_TIMESTAMP, -1)
        return RecordsInfo(self._max_timestamp, self._last_offset if self._last_offset is not None else -1)

    @property
    def num_records(self) -> int:
        return self._num_records

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def last_offset(self) -> int | None:
        return self._last_offset

    @property
    def compression(self):
        return self._compression

    @property
    def compression_ratio(self) -> float:
        """Compressed / uncompressed size of the records, known after :meth:`build` (else 1.0)."""
        return self._actual_ratio

    @property
    def is_control_batch(self) -> bool:
        return self._is_control_batch

    @property
    def is_transactional(self) -> bool:
        return self._is_transactional

    @property
    def producer_id(self) -> int:
        return self._producer_id

    @property
    def producer_epoch(self) -> int:
        return self._producer_epoch

    @property
    def base_sequence(self) -> int:
        return self._base_sequence

    def uncompressed_bytes_written(self) -> int:
        return self._records_size + RECORD_BATCH_OVERHEAD


def encode_batch(
    records: bytes,
    count: int,
    base_offset: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    compression,
    timestamp_type: int = CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control_batch: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    has_delete_horizon: bool = False,
) -> bytes:
    """One batch around an already encoded, uncompressed records section (``count`` records whose
    offset/timestamp deltas are relative to ``base_offset``/``base_timestamp``): compresses it with
    ``compression`` (a :class:`~pykbroker.record.compression.Compression`), writes the header and the
    CRC-32C (``DefaultRecordBatch.writeHeader``). The builder's last step, also used by the log validator
    to re-compress a batch whose records need no change."""
    payload = records if compression.id == _compression.NONE else compression.compress(records)
    attributes = compression.id
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control_batch:
        attributes |= CONTROL_FLAG_MASK
    if has_delete_horizon:
        attributes |= DELETE_HORIZON_FLAG_MASK
    header = HEADER.pack(
        base_offset,
        RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(payload),
        partition_leader_epoch,
        CURRENT_MAGIC,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    crc = _crc32c(payload, _crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
    return b"".join((header[:CRC_OFFSET], _U32.pack(crc), header[ATTRIBUTES_OFFSET:], payload))
