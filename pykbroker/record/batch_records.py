"""Reading the records of one v2 batch: decompress when needed, then decode or scan.

Mirrors ``DefaultRecordBatch.iterator()`` / ``streamingIterator()`` (:func:`decode_records`) and
``skipKeyValueIterator()`` (:func:`scan_batch_records`). Both work on a
:class:`~pykbroker.record.default_record_batch.RecordBatch` view and never return garbage: a bad
CRC, an unknown codec, an invalid or oversized compressed blob, or records that do not match the
header's count raise ``CorruptRecordError`` (``UnsupportedCompressionTypeError`` for codec ids 5-7).
"""

from __future__ import annotations

from pykbroker.protocol.errors import CorruptRecordError
from pykbroker.record import compression as _compression
from pykbroker.record.compression import DEFAULT_MAX_DECOMPRESSED_BYTES
from pykbroker.record.default_record import Record, RecordsScan, read_records, scan_records
from pykbroker.record.default_record_batch import (
    COMPRESSION_CODEC_MASK,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    RecordBatch,
)


def records_data(batch: RecordBatch, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> bytes:
    """The batch's records section as ``bytes``, decompressed if the codec is not none.
    Does not check the CRC. Raises CorruptRecordError (bad or oversized compressed data)."""
    body = batch.buf[RECORDS_OFFSET:]
    codec_id = batch.attributes & COMPRESSION_CODEC_MASK
    if codec_id == _compression.NONE:
        return bytes(body)
    return _compression.for_id(codec_id).decompress(body, max_decompressed_bytes)


def decode_records(
    batch: RecordBatch, verify_crc: bool = True, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> list[Record]:
    """All records of ``batch`` with absolute offsets and timestamps (LogAppendTime batches report
    the batch max timestamp for every record). ``verify_crc`` checks the CRC-32C first."""
    if verify_crc:
        batch.ensure_valid()
    (
        base_offset,
        _length,
        _epoch,
        _magic,
        _crc,
        attributes,
        _delta,
        base_timestamp,
        max_timestamp,
        _pid,
        _pepoch,
        _seq,
        count,
    ) = batch.header()
    if count < 0:
        raise CorruptRecordError(f"Found invalid record count {count} in magic v2 batch")
    data = records_data(batch, max_decompressed_bytes)
    log_append_time = max_timestamp if attributes & TIMESTAMP_TYPE_MASK else None
    return read_records(data, count, base_offset, base_timestamp, log_append_time)


def scan_batch_records(batch: RecordBatch, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> RecordsScan:
    """Timestamp/offset deltas and null-key indexes of every record, without copying keys and
    values. Does not check the CRC (the caller has). Raises CorruptRecordError."""
    count = batch.records_count
    if count < 0:
        raise CorruptRecordError(f"Found invalid record count {count} in magic v2 batch")
    return scan_records(records_data(batch, max_decompressed_bytes), count)
