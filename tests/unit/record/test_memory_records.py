import pytest

from pykbroker.protocol.errors import CorruptRecordError
from pykbroker.record.default_record import Record
from pykbroker.record.memory_records import EMPTY, MemoryRecords
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from tests.unit.record.helpers import NOW


def test_iterates_batches_and_records_across_codecs():
    parts = []
    offset = 0
    for codec in range(5):
        builder = MemoryRecordsBuilder(offset, codec)
        for i in range(3):
            builder.append(NOW, b"c%d" % codec, b"v%d" % i)
        offset += 3
        parts.append(builder.build())
    records = MemoryRecords(b"".join(parts) + parts[0][:30])  # a trailing partial batch is ignored
    assert [b.compression_type for b in records.batches()] == [0, 1, 2, 3, 4]
    assert [r.offset for r in records.records()] == list(range(15))
    assert records.valid_bytes() == sum(map(len, parts))
    assert records.first_batch().base_offset == 0
    assert len(records) == records.size_in_bytes == sum(map(len, parts)) + 30


def test_with_records():
    built = MemoryRecords.with_records(
        [(NOW, b"k", b"v"), Record(99, NOW + 1, None, b"w", [("h", None)])],
        compression="lz4",
        base_offset=7,
        producer_id=3,
        producer_epoch=0,
        base_sequence=0,
    )
    batch = built.first_batch()
    assert batch.producer_id == 3 and batch.compression_type == 3
    assert list(built.records()) == [Record(7, NOW, b"k", b"v"), Record(8, NOW + 1, None, b"w", [("h", None)])]


def test_empty_and_corrupt():
    assert list(EMPTY.batches()) == [] and EMPTY.to_bytes() == b""
    buf = bytearray(MemoryRecords.with_records([(NOW, b"k", b"v")]).to_bytes())
    buf[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        list(MemoryRecords(buf).records())
