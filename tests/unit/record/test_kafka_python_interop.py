"""Byte-level interop with kafka-python's own v2 batch code (``kafka.record.default_records``):
its batches decode with ours and ours with its, for every codec."""

import os
import types

import cramjam
import pytest

from pykbroker.record.default_record_batch import RecordBatch
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from tests.unit.record.helpers import NOW

kafka_records = pytest.importorskip("kafka.record.default_records")
CODECS = [0, 1, 2, 3, 4]


@pytest.fixture(autouse=True)
def snappy_for_kafka_python(monkeypatch):
    from kafka import codec

    # kafka-python takes raw snappy blocks from python-snappy (not installed); its xerial framing
    # code is its own, so lending it cramjam's raw blocks still tests the framing.
    monkeypatch.setattr(
        codec,
        "snappy",
        types.SimpleNamespace(
            compress=lambda b: bytes(cramjam.snappy.compress_raw(b)),
            decompress=lambda b: bytes(cramjam.snappy.decompress_raw(b)),
        ),
    )


def sample():
    out = []
    for i in range(300):
        key = None if i % 7 == 0 else b"key-%d" % i
        value = None if i % 11 == 0 else (os.urandom(i * 3) if i % 2 else b"v" * (i * 5))
        headers = [("trace", b"%d" % i), ("empty", None)] if i % 4 == 0 else []
        out.append((NOW + (i % 13) - 5, key, value, headers))
    out.append((NOW, b"big", os.urandom(100_000), []))  # crosses lz4/snappy block boundaries
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_decode_with_ours(codec):
    builder = kafka_records.DefaultRecordBatchBuilder(2, codec, True, 1234, 5, 99, 10 << 20)
    specs = sample()
    for i, (ts, key, value, headers) in enumerate(specs):
        builder.append(i, ts, key, value, headers)
    data = bytes(builder.build())
    batch = RecordBatch.at(memoryview(data))
    batch.ensure_valid()
    assert batch.compression_type == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.is_transactional) == (1234, 5, 99, True)
    decoded = batch.records()
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded] == [
        (i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(specs)
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_decode_with_kafka_python(codec):
    specs = sample()
    builder = MemoryRecordsBuilder(
        0, codec, producer_id=1234, producer_epoch=5, base_sequence=99, is_transactional=True
    )
    for ts, key, value, headers in specs:
        builder.append(ts, key, value, headers)
    theirs = kafka_records.DefaultRecordBatch(bytearray(builder.build()))
    assert theirs.validate_crc()
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (1234, 5, 99)
    assert theirs.compression_type == codec and theirs.is_transactional
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs] == [
        (i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(specs)
    ]


def test_uncompressed_bytes_identical_to_kafka_python():
    specs = sample()
    ours = MemoryRecordsBuilder(0)
    theirs = kafka_records.DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 10 << 20)
    for i, (ts, key, value, headers) in enumerate(specs):
        ours.append(ts, key, value, headers)
        theirs.append(i, ts, key, value, headers)
    a, b = bytearray(ours.build()), bytearray(theirs.build())
    # kafka-python writes partitionLeaderEpoch 0 where Java (and we) write -1; it is outside the CRC.
    assert a[12:16] == b"\xff\xff\xff\xff" and b[12:16] == b"\x00\x00\x00\x00"
    a[12:16] = b[12:16]
    assert a == b
