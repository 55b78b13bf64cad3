import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykbroker.record import compression
from pykbroker.record.control_record import ControlRecordType, EndTransactionMarker
from pykbroker.record.default_record import Record
from pykbroker.record.default_record_batch import CREATE_TIME, LOG_APPEND_TIME, RECORD_BATCH_OVERHEAD, RecordBatch
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder, RecordsInfo
from tests.unit.record.helpers import NOW

CODECS = [0, 1, 2, 3, 4]
blobs = st.none() | st.binary(max_size=200)
headers = st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)), max_size=3)
timestamps = st.one_of(st.just(-1), st.integers(NOW - 10**9, NOW + 10**9))
records = st.lists(st.tuples(timestamps, blobs, blobs, headers), min_size=1, max_size=40)


def build(codec, specs, base_offset=0, **kwargs):
    builder = MemoryRecordsBuilder(base_offset, codec, **kwargs)
    for ts, key, value, hdrs in specs:
        builder.append(ts, key, value, hdrs)
    return builder, builder.build()


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=40, deadline=None)
@given(specs=records, base_offset=st.integers(0, 2**40))
def test_build_decode_round_trip(codec, specs, base_offset):
    builder, data = build(codec, specs, base_offset)
    batch = RecordBatch.at(memoryview(data))
    batch.ensure_valid()
    assert batch.size_in_bytes == len(data)
    assert batch.compression_type == codec
    assert batch.base_offset == base_offset and batch.last_offset == base_offset + len(specs) - 1
    assert batch.records_count == len(specs)
    assert batch.base_timestamp == specs[0][0]
    assert batch.max_timestamp == max(ts for ts, *_ in specs)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.partition_leader_epoch) == (-1,) * 4
    assert batch.records() == [Record(base_offset + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(specs)]
    assert builder.info() == RecordsInfo(batch.max_timestamp, batch.last_offset if batch.max_timestamp != -1 else -1)


@pytest.mark.parametrize("codec", CODECS)
def test_large_values_cross_compression_blocks(codec):
    specs = [(NOW, b"k%d" % i, os.urandom(70_000) if i % 2 else b"z" * 150_000, None) for i in range(6)]
    _, data = build(codec, specs)
    assert [(r.key, r.value) for r in RecordBatch.at(memoryview(data)).records()] == [(k, v) for _, k, v, _ in specs]


@pytest.mark.parametrize("codec", CODECS)
def test_null_and_empty_keys_values(codec):
    specs = [(NOW, None, None, None), (NOW, b"", b"", []), (NOW, b"k", None, [("h", None), ("", b"")])]
    _, data = build(codec, specs)
    assert [tuple(r)[2:5] for r in RecordBatch.at(memoryview(data)).records()] == [
        (None, None, []),
        (b"", b"", []),
        (b"k", None, [("h", None), ("", b"")]),
    ]


def test_header_fields_and_attributes():
    builder = MemoryRecordsBuilder(
        10,
        compression.ZSTD,
        LOG_APPEND_TIME,
        log_append_time=NOW + 5,
        producer_id=77,
        producer_epoch=3,
        base_sequence=41,
        is_transactional=True,
        partition_leader_epoch=9,
    )
    builder.append(NOW, b"k", b"v")
    builder.append(NOW + 1, b"k", b"v")
    batch = RecordBatch.at(memoryview(builder.build()))
    batch.ensure_valid()
    assert batch.attributes == 4 | 0x08 | 0x10
    assert batch.timestamp_type == LOG_APPEND_TIME and batch.max_timestamp == NOW + 5
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.last_sequence) == (77, 3, 41, 42)
    assert batch.partition_leader_epoch == 9 and batch.is_transactional and not batch.is_control_batch
    assert [r.timestamp for r in batch.records()] == [NOW + 5, NOW + 5]  # as Kafka reports LogAppendTime
    assert builder.info() == RecordsInfo(NOW + 5, 11)


def test_append_with_offset_gaps_and_monotonic_check():
    builder = MemoryRecordsBuilder(100)
    builder.append_with_offset(100, NOW, None, b"a")
    builder.append_with_offset(105, NOW, None, b"b")
    assert builder.append(NOW, None, b"c") == 106
    with pytest.raises(ValueError):
        builder.append_with_offset(106, NOW, None, b"d")
    batch = RecordBatch.at(memoryview(builder.build()))
    assert batch.last_offset_delta == 6 and batch.records_count == 3
    assert [r.offset for r in batch.records()] == [100, 105, 106]


def test_invalid_timestamp_rejected():
    with pytest.raises(ValueError):
        MemoryRecordsBuilder().append(-2, None, b"v")


def test_empty_build_is_empty():
    builder = MemoryRecordsBuilder()
    assert builder.build() == b"" and builder.info() == RecordsInfo(-1, -1)


def test_build_is_idempotent_and_closes_appends():
    builder = MemoryRecordsBuilder()
    builder.append(NOW, None, b"v")
    assert builder.build() is builder.build()
    assert builder.is_closed() and builder.is_full()
    with pytest.raises(RuntimeError):
        builder.append(NOW, None, b"w")


def test_abort():
    builder = MemoryRecordsBuilder()
    builder.append(NOW, None, b"v")
    builder.abort()
    with pytest.raises(RuntimeError):
        builder.build()


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(is_transactional=True),
        dict(producer_id=5),
        dict(producer_id=5, producer_epoch=0),
    ],
)
def test_inconsistent_producer_state_rejected(kwargs):
    builder = MemoryRecordsBuilder(**kwargs)
    builder.append(NOW, None, b"v")
    with pytest.raises(ValueError):
        builder.build()


def test_set_producer_state_and_reopen():
    builder = MemoryRecordsBuilder()
    builder.append(NOW, None, b"v")
    builder.set_producer_state(8, 1, 0, False)
    first = RecordBatch.at(memoryview(builder.build()))
    assert (first.producer_id, first.base_sequence) == (8, 0)
    with pytest.raises(RuntimeError):
        builder.set_producer_state(9, 1, 0, False)
    builder.reopen_and_rewrite_producer_state(9, 2, 5, True)
    second = RecordBatch.at(memoryview(builder.build()))
    second.ensure_valid()
    assert (second.producer_id, second.producer_epoch, second.base_sequence, second.is_transactional) == (9, 2, 5, True)


def test_write_limit_and_room():
    builder = MemoryRecordsBuilder(write_limit=RECORD_BATCH_OVERHEAD + 300)
    value = b"x" * 100
    assert builder.has_room_for(NOW, None, value)  # the first record always fits
    builder.append(NOW, None, value)
    assert builder.has_room_for(NOW, None, value)
    builder.append(NOW, None, value)
    assert not builder.has_room_for(NOW, None, value)
    assert builder.estimated_size_in_bytes() == builder.uncompressed_bytes_written()
    builder.append(NOW, None, value)
    assert builder.is_full()
    assert len(builder.build()) == builder.estimated_size_in_bytes()


def test_compressed_estimate_uses_ratio():
    builder = MemoryRecordsBuilder(compression=compression.LZ4)
    builder.set_estimated_compression_ratio(0.5)
    builder.append(NOW, None, b"a" * 10_000)
    records_size = builder.uncompressed_bytes_written() - RECORD_BATCH_OVERHEAD
    assert builder.estimated_bytes_written() == RECORD_BATCH_OVERHEAD + int(records_size * 0.5 * 1.05)
    builder.build()
    assert builder.compression_ratio < 0.05


def test_control_batch_records():
    builder = MemoryRecordsBuilder(50, producer_id=4, producer_epoch=1, is_transactional=True, is_control_batch=True)
    with pytest.raises(ValueError):
        builder.append(NOW, b"k", b"v")
    builder.append_end_txn_marker(NOW, EndTransactionMarker(ControlRecordType.COMMIT, 12))
    batch = RecordBatch.at(memoryview(builder.build()))
    batch.ensure_valid()
    assert batch.is_control_batch and batch.is_transactional and batch.base_sequence == -1
    (record,) = batch.records()
    assert ControlRecordType.parse(record.key) is ControlRecordType.COMMIT
    marker = EndTransactionMarker.deserialize(record.key, record.value)
    assert marker == EndTransactionMarker(ControlRecordType.COMMIT, 12)


def test_leader_change_control_record():
    builder = MemoryRecordsBuilder(0, is_control_batch=True, partition_leader_epoch=3)
    builder.append_control_record(NOW, ControlRecordType.LEADER_CHANGE, b"\x00\x00payload")
    (record,) = RecordBatch.at(memoryview(builder.build())).records()
    assert record.key == b"\x00\x00\x00\x02" and record.value == b"\x00\x00payload"


def test_end_txn_marker_needs_producer_and_transaction():
    with pytest.raises(ValueError):
        MemoryRecordsBuilder(is_control_batch=True).append_end_txn_marker(
            NOW, EndTransactionMarker(ControlRecordType.ABORT, 0)
        )


def test_delete_horizon():
    builder = MemoryRecordsBuilder(delete_horizon_ms=NOW - 100)
    builder.append(NOW, b"k", None)
    batch = RecordBatch.at(memoryview(builder.build()))
    assert batch.attributes & 0x40 and batch.base_timestamp == NOW - 100
    assert batch.records()[0].timestamp == NOW


def test_create_time_default():
    assert RecordBatch.at(memoryview(build(0, [(NOW, None, b"v", None)])[1])).timestamp_type == CREATE_TIME
