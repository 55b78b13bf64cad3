"""Record batch v2 (magic 2) header: layout, a zero-copy view, in-place offset/epoch stamping.

Mirrors ``org.apache.kafka.common.record.DefaultRecordBatch``. A batch on the wire and on disk is:

    offset size field
    0      8    baseOffset           int64   (producer sends 0; the broker overwrites it)
    8      4    batchLength          int32   (bytes after this field = total size - LOG_OVERHEAD)
    12     4    partitionLeaderEpoch int32   (stamped by the leader; outside the CRC)
    16     1    magic                int8    (2)
    17     4    crc                  uint32  (CRC-32C over bytes [21, end of batch))
    21     2    attributes           int16   (bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control,
                                              6 delete horizon)
    23     4    lastOffsetDelta      int32
    27     8    baseTimestamp        int64
    35     8    maxTimestamp         int64
    43     8    producerId           int64
    51     2    producerEpoch        int16
    53     4    baseSequence         int32
    57     4    recordsCount         int32
    61     ...  records (one compressed blob when the codec is not none)

Because baseOffset, batchLength, partitionLeaderEpoch and magic precede the CRC range, offsets and the
leader epoch are assigned by rewriting the header in place without recomputing the CRC.

The view never copies: it wraps a ``memoryview`` (writable when the caller wants to stamp it).
"""

from __future__ import annotations

import struct

from pykbroker.protocol.errors import CorruptRecordError
from pykbroker.record import crc as _crc32c  # crc32c.crc32c without the package's __init__ (start-up time)

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

LOG_OVERHEAD = 12  # baseOffset + batchLength: the prefix every batch (any magic) starts with
RECORD_BATCH_OVERHEAD = RECORDS_OFFSET  # 61 bytes of header before the records
CURRENT_MAGIC = 2

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

# Timestamp types (attribute bit 3)
CREATE_TIME = 0
LOG_APPEND_TIME = 1

# Whole 61-byte header in one struct call.
HEADER = struct.Struct(">qiiBIhiqqqhii")
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_U32 = struct.Struct(">I")
_H = struct.Struct(">h")
_BATCH_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_HEADER_FIELDS_AFTER_LENGTH = struct.Struct(">iB")  # partitionLeaderEpoch, magic


def crc32c(data) -> int:
    """CRC-32C (Castagnoli) of ``data`` (bytes-like), as an unsigned 32-bit int."""
    return _crc32c.crc32c(data)


class RecordBatch:
    """Zero-copy view over one magic-2 batch: ``buf`` must hold exactly the batch's bytes
    (``batch_length + LOG_OVERHEAD``). Stamping methods need a writable buffer.

    Construct with :meth:`RecordBatch.at` to check the size and magic first. Raises
    ``CorruptRecordError`` (CORRUPT_MESSAGE) when the header is not a valid v2 header.
    Not thread-safe; a view is owned by whoever holds the buffer.
    """

    __slots__ = ("buf",)

    def __init__(self, buf: memoryview):
        self.buf = buf

    @classmethod
    def at(cls, buf: memoryview, position: int = 0) -> RecordBatch:
        """The batch starting at ``position`` of ``buf``. Raises CorruptRecordError if the header
        is truncated, has a bad length or is not magic 2, never reads past ``buf``."""
        if len(buf) - position < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"Record batch header truncated: {len(buf) - position} bytes < {RECORD_BATCH_OVERHEAD}"
            )
        _, length = _BATCH_PREFIX.unpack_from(buf, position)
        magic = buf[position + MAGIC_OFFSET]
        if magic != CURRENT_MAGIC:
            raise CorruptRecordError(f"Record batch magic {magic} is not supported (only magic 2)")
        size = length + LOG_OVERHEAD
        if length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD or position + size > len(buf):
            raise CorruptRecordError(
                f"Record batch length {length} is invalid or exceeds the {len(buf) - position} bytes available"
            )
        return cls(buf[position : position + size])

    # -- header fields -------------------------------------------------------------------------
    @property
    def base_offset(self) -> int:
        return _Q.unpack_from(self.buf, BASE_OFFSET_OFFSET)[0]

    @property
    def batch_length(self) -> int:
        return _I.unpack_from(self.buf, LENGTH_OFFSET)[0]

    @property
    def size_in_bytes(self) -> int:
        return len(self.buf)

    @property
    def partition_leader_epoch(self) -> int:
        return _I.unpack_from(self.buf, PARTITION_LEADER_EPOCH_OFFSET)[0]

    @property
    def magic(self) -> int:
        return self.buf[MAGIC_OFFSET]

    @property
    def checksum(self) -> int:
        return _U32.unpack_from(self.buf, CRC_OFFSET)[0]

    @property
    def attributes(self) -> int:
        return _H.unpack_from(self.buf, ATTRIBUTES_OFFSET)[0]

    @property
    def last_offset_delta(self) -> int:
        return _I.unpack_from(self.buf, LAST_OFFSET_DELTA_OFFSET)[0]

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def base_timestamp(self) -> int:
        return _Q.unpack_from(self.buf, BASE_TIMESTAMP_OFFSET)[0]

    @property
    def max_timestamp(self) -> int:
        return _Q.unpack_from(self.buf, MAX_TIMESTAMP_OFFSET)[0]

    @property
    def producer_id(self) -> int:
        return _Q.unpack_from(self.buf, PRODUCER_ID_OFFSET)[0]

    @property
    def producer_epoch(self) -> int:
        return _H.unpack_from(self.buf, PRODUCER_EPOCH_OFFSET)[0]

    @property
    def base_sequence(self) -> int:
        return _I.unpack_from(self.buf, BASE_SEQUENCE_OFFSET)[0]

    @property
    def last_sequence(self) -> int:
        base = self.base_sequence
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        return (base + self.last_offset_delta) & 0x7FFFFFFF

    @property
    def records_count(self) -> int:
        return _I.unpack_from(self.buf, RECORDS_COUNT_OFFSET)[0]

    @property
    def compression_type(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control_batch(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID

    def header(self) -> tuple:
        """All 13 header fields at once (one struct call), in layout order."""
        return HEADER.unpack_from(self.buf, 0)

    # -- integrity ------------------------------------------------------------------------------
    def compute_checksum(self) -> int:
        return crc32c(self.buf[ATTRIBUTES_OFFSET:])

    def is_valid(self) -> bool:
        return len(self.buf) >= RECORD_BATCH_OVERHEAD and self.checksum == self.compute_checksum()

    def ensure_valid(self) -> None:
        """Raise CorruptRecordError (CORRUPT_MESSAGE) unless the size and the CRC-32C hold."""
        if len(self.buf) < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(f"Record batch is only {len(self.buf)} bytes")
        stored, computed = self.checksum, self.compute_checksum()
        if stored != computed:
            raise CorruptRecordError(f"Record batch is corrupt (stored crc = {stored}, computed crc = {computed})")

    # -- records (added by the record owner; decoding lives in batch_records) ------------------
    def records(self, verify_crc: bool = True, max_decompressed_bytes: int | None = None) -> list:
        """All records of this batch as ``Record`` tuples (offset, timestamp, key, value, headers,
        attributes), decompressing as needed; see ``pykbroker.record.batch_records.decode_records``.
        Raises CorruptRecordError for a bad CRC or malformed/oversized records."""
        from pykbroker.record.batch_records import decode_records
        from pykbroker.record.compression import DEFAULT_MAX_DECOMPRESSED_BYTES

        limit = DEFAULT_MAX_DECOMPRESSED_BYTES if max_decompressed_bytes is None else max_decompressed_bytes
        return decode_records(self, verify_crc, limit)

    # -- in-place stamping (writable buffer) ---------------------------------------------------
    def set_last_offset(self, offset: int) -> None:
        """Assign offsets: baseOffset = offset - lastOffsetDelta. Outside the CRC."""
        _Q.pack_into(self.buf, BASE_OFFSET_OFFSET, offset - self.last_offset_delta)

    def set_base_offset(self, offset: int) -> None:
        _Q.pack_into(self.buf, BASE_OFFSET_OFFSET, offset)

    def set_partition_leader_epoch(self, epoch: int) -> None:
        """Stamp the leader epoch. Outside the CRC."""
        _I.pack_into(self.buf, PARTITION_LEADER_EPOCH_OFFSET, epoch)

    def set_max_timestamp(self, timestamp_type: int, max_timestamp: int) -> None:
        """Rewrite the timestamp type bit and maxTimestamp; recompute the CRC only if either changed."""
        attrs = self.attributes
        new_attrs = (
            (attrs | TIMESTAMP_TYPE_MASK) if timestamp_type == LOG_APPEND_TIME else (attrs & ~TIMESTAMP_TYPE_MASK)
        )
        if new_attrs == attrs and self.max_timestamp == max_timestamp:
            return
        _H.pack_into(self.buf, ATTRIBUTES_OFFSET, new_attrs)
        _Q.pack_into(self.buf, MAX_TIMESTAMP_OFFSET, max_timestamp)
        _U32.pack_into(self.buf, CRC_OFFSET, self.compute_checksum())

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.records_count}, size={len(self.buf)}, codec={self.compression_type}, "
            f"max_timestamp={self.max_timestamp})"
        )


def iter_batches(buf, position: int = 0, end: int | None = None):
    """Yield ``(position, RecordBatch)`` for every complete batch in ``buf[position:end]``.

    Stops silently at a trailing partial batch (as a fetch response may end in one); a header with a
    bad magic or impossible length raises CorruptRecordError. CRCs are not checked here.
    """
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = len(mv) if end is None else end
    while end - position >= LOG_OVERHEAD:
        _, length = _BATCH_PREFIX.unpack_from(mv, position)
        size = length + LOG_OVERHEAD
        if position + size > end:
            if length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
                raise CorruptRecordError(f"Record batch length {length} at position {position} is invalid")
            return
        yield position, RecordBatch.at(mv[:end], position)
        position += size
