"""A corrupt batch never decodes to garbage: CorruptRecordError every time."""

import struct

import pytest

from pykbroker.protocol.errors import CorruptRecordError
from pykbroker.record.batch_records import decode_records, scan_batch_records
from pykbroker.record.default_record_batch import (
    ATTRIBUTES_OFFSET,
    RECORDS_COUNT_OFFSET,
    RECORDS_OFFSET,
    RecordBatch,
    iter_batches,
)
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from tests.unit.record.helpers import NOW, fix_crc, raw_batch, records_section

CODECS = [0, 1, 2, 3, 4]


def batch_bytes(codec: int, n: int = 20) -> bytearray:
    builder = MemoryRecordsBuilder(0, codec)
    for i in range(n):
        builder.append(NOW + i, b"key-%d" % i, b"value-%d" % i * 5, [("h", b"%d" % i)])
    return bytearray(builder.build())


def decode(buf) -> list:
    return RecordBatch.at(memoryview(buf)).records()


@pytest.mark.parametrize("codec", CODECS)
def test_every_flipped_byte_in_crc_range_is_detected(codec):
    good = batch_bytes(codec)
    for position in range(ATTRIBUTES_OFFSET - 4, len(good)):  # the CRC itself and everything it covers
        bad = bytearray(good)
        bad[position] ^= 0x01
        with pytest.raises(CorruptRecordError):
            decode(bad)


@pytest.mark.parametrize("codec", CODECS)
def test_truncated_batch(codec):
    good = batch_bytes(codec)
    for cut in (len(good) - 1, len(good) // 2, RECORDS_OFFSET, 20):
        with pytest.raises(CorruptRecordError):
            RecordBatch.at(memoryview(good[:cut]))
        assert list(iter_batches(good[:cut])) == []  # a fetch may end in a partial batch: skipped


def test_length_field_past_the_end():
    good = batch_bytes(0)
    struct.pack_into(">i", good, 8, len(good))
    with pytest.raises(CorruptRecordError):
        RecordBatch.at(memoryview(good))


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("count", [19, 21, 0, -1, 10**6])
def test_count_mismatch_with_valid_crc(codec, count):
    bad = batch_bytes(codec)
    struct.pack_into(">i", bad, RECORDS_COUNT_OFFSET, count)
    fix_crc(bad)
    with pytest.raises(CorruptRecordError):
        decode(bad)
    with pytest.raises(CorruptRecordError):
        scan_batch_records(RecordBatch.at(memoryview(bad)))


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_garbage_compressed_payload_with_valid_crc(codec):
    bad = batch_bytes(codec)
    for i in range(RECORDS_OFFSET, len(bad)):
        bad[i] = (bad[i] * 7 + 3) & 0xFF
    fix_crc(bad)
    with pytest.raises(CorruptRecordError):
        decode(bad)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_truncated_compressed_payload_with_valid_crc(codec):
    good = batch_bytes(codec, 200)
    bad = good[: len(good) - 9]
    struct.pack_into(">i", bad, 8, len(bad) - 12)
    fix_crc(bad)
    with pytest.raises(CorruptRecordError):
        decode(bad)


def test_uncompressed_data_inside_compressed_wrapper():
    bad = raw_batch(records_section((0, 0, b"k", b"v")), 1)
    bad[ATTRIBUTES_OFFSET + 1] |= 3  # claims lz4 but holds raw records
    fix_crc(bad)
    with pytest.raises(CorruptRecordError):
        decode(bad)


def test_unknown_codec_id():
    from pykbroker.protocol.errors import UnsupportedCompressionTypeError

    bad = raw_batch(records_section((0, 0, b"k", b"v")), 1)
    bad[ATTRIBUTES_OFFSET + 1] |= 6
    fix_crc(bad)
    with pytest.raises(UnsupportedCompressionTypeError):
        decode(bad)


def test_oversized_decompression_capped():
    builder = MemoryRecordsBuilder(0, 4)
    builder.append(NOW, None, b"\x00" * 5_000_000)
    batch = RecordBatch.at(memoryview(builder.build()))
    with pytest.raises(CorruptRecordError, match="exceeds the limit"):
        decode_records(batch, max_decompressed_bytes=1_000_000)


def test_crc_check_can_be_skipped_for_trusted_data():
    bad = batch_bytes(0)
    struct.pack_into(">I", bad, 17, 0)
    assert len(decode_records(RecordBatch.at(memoryview(bad)), verify_crc=False)) == 20
