"""A buffer of back-to-back record batches. Mirrors ``org.apache.kafka.common.record.MemoryRecords``.

Zero-copy: wraps a ``memoryview`` of the caller's buffer (a produce request's records, a fetch
response's records, a built batch). Iteration reuses
:func:`~pykbroker.record.default_record_batch.iter_batches`, which stops quietly at a trailing
partial batch (fetch responses may end in one) and raises ``CorruptRecordError`` for an impossible
header. Not thread-safe when the buffer is written to concurrently.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pykbroker.record import compression as _compression
from pykbroker.record.batch_records import decode_records
from pykbroker.record.compression import DEFAULT_MAX_DECOMPRESSED_BYTES
from pykbroker.record.default_record import Record
from pykbroker.record.default_record_batch import RecordBatch, iter_batches
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder


class MemoryRecords:
    """Batches in a bytes-like buffer: ``MemoryRecords(buf)``; ``len()`` is its size in bytes."""

    __slots__ = ("buf",)

    def __init__(self, buf=b""):
        self.buf = buf if isinstance(buf, memoryview) else memoryview(buf)

    @property
    def size_in_bytes(self) -> int:
        return len(self.buf)

    def __len__(self) -> int:
        return len(self.buf)

    def batches(self) -> Iterator[RecordBatch]:
        """Every complete batch, in order (views into the buffer; CRCs not checked)."""
        for _, batch in iter_batches(self.buf):
            yield batch

    def first_batch(self) -> RecordBatch | None:
        return next(self.batches(), None)

    def valid_bytes(self) -> int:
        """Bytes covered by complete batches (a trailing partial batch excluded)."""
        end = 0
        for position, batch in iter_batches(self.buf):
            end = position + batch.size_in_bytes
        return end

    def records(
        self, verify_crc: bool = True, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
    ) -> Iterator[Record]:
        """Every record of every batch (decompressing as needed). Raises CorruptRecordError."""
        for _, batch in iter_batches(self.buf):
            yield from decode_records(batch, verify_crc, max_decompressed_bytes)

    def to_bytes(self) -> bytes:
        return self.buf.tobytes()

    def __repr__(self) -> str:
        return f"MemoryRecords(size={len(self.buf)})"

    @classmethod
    def with_records(
        cls, records: Iterable, compression=_compression.NONE, base_offset: int = 0, **builder_args
    ) -> MemoryRecords:
        """One batch holding ``records``: each a :class:`Record` (its offset is ignored; offsets are
        assigned from ``base_offset``) or a tuple ``(timestamp, key, value[, headers])``.
        ``builder_args`` go to :class:`MemoryRecordsBuilder` (producer id, timestamp type, ...)."""
        builder = MemoryRecordsBuilder(base_offset, compression, **builder_args)
        for record in records:
            if isinstance(record, Record):
                builder.append(record.timestamp, record.key, record.value, record.headers)
            else:
                builder.append(*record)
        return cls(builder.build())


EMPTY = MemoryRecords(b"")
