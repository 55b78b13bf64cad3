"""LogValidator: offsets in place, timestamps, limits, rejections, recompression (magic 2)."""

import struct
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykbroker.log.log_validator import AppendOrigin, LogValidator, RecordError, RecordValidationError
from pykbroker.protocol import errors
from pykbroker.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedCompressionTypeError,
)
from pykbroker.record.control_record import ControlRecordType
from pykbroker.record.default_record_batch import ATTRIBUTES_OFFSET, CREATE_TIME, LOG_APPEND_TIME, RecordBatch
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from pykbroker.utils.time import MockTime
from tests.unit.record.helpers import NOW, fix_crc, raw_batch, records_section

HOUR = 3_600_000


@pytest.fixture
def time():
    return MockTime(current_ms=NOW)


def produce(codec=0, n=5, timestamps=None, keys=True, **builder_args) -> bytearray:
    builder = MemoryRecordsBuilder(0, codec, **builder_args)
    for i in range(n):
        ts = NOW if timestamps is None else timestamps[i]
        builder.append(ts, b"key-%d" % i if keys else None, b"value-%d" % i, [("h", b"%d" % i)])
    return bytearray(builder.build())


def validate(records, time, offset=100, **kwargs):
    kwargs.setdefault("partition_leader_epoch", 7)
    return LogValidator(records, "topic-0", time, **kwargs).validate_messages_and_assign_offsets(offset)


def batch_of(result) -> RecordBatch:
    batch = RecordBatch.at(result.validated_records)
    batch.ensure_valid()
    return batch


def changed_ranges(before: bytes, after: bytes) -> set:
    return {i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b}


# -- path 1: uncompressed, in place -----------------------------------------------------------------


def test_uncompressed_offsets_assigned_in_place(time):
    buf = produce()
    original = bytes(buf)
    result = validate(buf, time)
    assert result.validated_records.obj is buf  # stamped in the caller's buffer, no copy
    after = bytes(buf)
    assert changed_ranges(original, after) <= set(range(0, 8)) | set(range(12, 16))  # base offset, leader epoch
    assert after[8:12] == original[8:12] and after[16:] == original[16:]  # length, magic, CRC, body untouched
    batch = batch_of(result)
    assert (batch.base_offset, batch.last_offset, batch.partition_leader_epoch) == (100, 104, 7)
    assert [r.offset for r in batch.records()] == [100, 101, 102, 103, 104]
    assert result[1:] == (100, 104, 5, NOW, NOW, 104, False, 0, 0)


def test_read_only_input_is_copied_once(time):
    data = bytes(produce())
    result = validate(data, time)
    assert bytes(result.validated_records) != data
    assert batch_of(result).base_offset == 100


def test_trailing_partial_batch_is_trimmed(time):
    buf = produce()
    size = len(buf)
    buf += produce()[:40]
    result = validate(buf, time)
    assert len(result.validated_records) == size


def test_log_append_time_stamps_header_and_crc(time):
    buf = produce(timestamps=[NOW - 5000] * 5)
    time.sleep(10)
    result = validate(buf, time, timestamp_type=LOG_APPEND_TIME)
    batch = batch_of(result)  # CRC recomputed and valid
    assert batch.timestamp_type == LOG_APPEND_TIME and batch.max_timestamp == NOW + 10
    assert [r.timestamp for r in batch.records()] == [NOW + 10] * 5
    assert (result.max_timestamp_ms, result.log_append_time_ms, result.shallow_offset_of_max_timestamp) == (
        NOW + 10,
        NOW + 10,
        104,
    )


def test_create_time_max_timestamp_from_header(time):
    result = validate(produce(timestamps=[NOW - 3, NOW - 1, NOW - 2, NOW - 9, NOW - 4]), time)
    assert result.max_timestamp_ms == NOW - 1 and result.shallow_offset_of_max_timestamp == 104


def test_records_without_timestamps(time):
    result = validate(produce(timestamps=[-1] * 5), time, timestamp_before_max_ms=HOUR)
    assert result.max_timestamp_ms == -1 and result.shallow_offset_of_max_timestamp == -1


@pytest.mark.parametrize("codec", [0, 3])
def test_timestamp_out_of_window(time, codec):
    timestamps = [NOW, NOW - 2 * HOUR, NOW, NOW + 2 * HOUR, NOW]
    buf = produce(codec, timestamps=timestamps)
    original = bytes(buf)
    with pytest.raises(RecordValidationError) as info:
        validate(buf, time, timestamp_before_max_ms=HOUR, timestamp_after_max_ms=HOUR)
    assert info.value.code == errors.INVALID_TIMESTAMP and info.value.name == "INVALID_TIMESTAMP"
    assert errors.for_exception(info.value) == errors.INVALID_TIMESTAMP
    assert [e.batch_index for e in info.value.record_errors] == [1, 3]
    assert "out of range" in info.value.record_errors[0].message
    assert bytes(buf) == original  # nothing stamped on failure


def test_header_window_check_is_exact_at_the_edges(time):
    timestamps = [NOW - HOUR, NOW, NOW + HOUR, NOW, NOW]
    validate(produce(timestamps=timestamps), time, timestamp_before_max_ms=HOUR, timestamp_after_max_ms=HOUR)
    with pytest.raises(RecordValidationError):
        validate(produce(timestamps=[NOW - HOUR - 1] + [NOW] * 4), time, timestamp_before_max_ms=HOUR)


def test_documented_deviation_records_below_base_timestamp(time):
    """Uncompressed fast path trusts the header (first/max timestamp); Kafka would walk the records.
    ``verify_uncompressed_records`` restores Kafka's exact behaviour."""
    timestamps = [NOW, NOW - 2 * HOUR, NOW, NOW, NOW]
    validate(produce(timestamps=timestamps), time, timestamp_before_max_ms=HOUR)  # accepted
    with pytest.raises(RecordValidationError) as info:
        validate(produce(timestamps=timestamps), time, timestamp_before_max_ms=HOUR, verify_uncompressed_records=True)
    assert info.value.record_errors == [RecordError(1, info.value.record_errors[0].message)]


def test_producer_claiming_log_append_time(time):
    buf = produce(timestamp_type=LOG_APPEND_TIME, log_append_time=NOW - 10)
    with pytest.raises(RecordValidationError) as info:
        validate(bytearray(buf), time, timestamp_type=LOG_APPEND_TIME)
    assert info.value.code == errors.INVALID_TIMESTAMP and len(info.value.record_errors) == 5
    assert "should not set timestamp type to LogAppendTime" in info.value.record_errors[0].message
    # A CreateTime topic accepts it as Kafka does (each record reports the header timestamp) and
    # clears the flag.
    result = validate(buf, time)
    batch = batch_of(result)
    assert batch.timestamp_type == CREATE_TIME and result.max_timestamp_ms == NOW - 10


@pytest.mark.parametrize("codec", [0, 4])
def test_compacted_topic_requires_keys(time, codec):
    builder = MemoryRecordsBuilder(0, codec)
    for i in range(4):
        builder.append(NOW, None if i in (1, 2) else b"k", b"v")
    with pytest.raises(RecordValidationError) as info:
        validate(bytearray(builder.build()), time, compacted_topic=True)
    assert info.value.code == errors.INVALID_RECORD
    assert [e.batch_index for e in info.value.record_errors] == [1, 2]
    assert "without key" in info.value.record_errors[0].message
    validate(produce(codec), time, compacted_topic=True)


# -- batch-level rejections ------------------------------------------------------------------------


def test_too_large(time):
    buf = produce()
    with pytest.raises(RecordTooLargeError):
        validate(buf, time, max_message_bytes=len(buf) - 1)
    validate(buf, time, max_message_bytes=len(buf))


def test_bad_crc(time):
    buf = produce()
    buf[-1] ^= 0x40
    with pytest.raises(CorruptRecordError):
        validate(buf, time)


def test_control_batch_from_client_rejected(time):
    builder = MemoryRecordsBuilder(0, is_control_batch=True)
    builder.append_control_record(NOW, ControlRecordType.LEADER_CHANGE, b"x")
    data = builder.build()
    with pytest.raises(InvalidRecordError, match="control records"):
        validate(bytearray(data), time)
    # The coordinator may write one, and it stays uncompressed in place even on a compressed topic.
    result = validate(bytearray(data), time, origin=AppendOrigin.COORDINATOR, target_compression="zstd")
    assert batch_of(result).is_control_batch and batch_of(result).compression_type == 0
    assert not result.message_size_maybe_changed


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda b: struct.pack_into(">q", b, 0, 5), "baseOffset"),
        (lambda b: struct.pack_into(">i", b, 23, 7), "Inconsistent batch offset range"),
        (lambda b: struct.pack_into(">i", b, 23, -1), "invalid offset range"),
        (lambda b: struct.pack_into(">i", b, 57, 0), "Invalid reported count"),
    ],
)
def test_inconsistent_client_batches(time, mutate, match):
    buf = produce()
    mutate(buf)
    fix_crc(buf)
    with pytest.raises(InvalidRecordError, match=match):
        validate(buf, time)


def test_idempotent_batch_needs_sequence(time):
    buf = raw_batch(records_section((0, 0, b"k", b"v")), 1, producer_id=9, producer_epoch=0, base_sequence=-1)
    with pytest.raises(InvalidRecordError, match="sequence"):
        validate(buf, time)


def test_exactly_one_batch(time):
    with pytest.raises(InvalidRecordError, match="more than one batch"):
        validate(produce() + produce(), time)
    with pytest.raises(InvalidRecordError, match="no batches"):
        validate(bytearray(), time)
    with pytest.raises(InvalidRecordError, match="no batches"):
        validate(produce()[:30], time)


def test_magic_other_than_2(time):
    buf = raw_batch(records_section((0, 0, b"k", b"v")), 1, magic=1)
    with pytest.raises(InvalidRecordError, match="magic"):
        validate(buf, time)


def test_raft_leader_epoch_must_match(time):
    buf = produce(partition_leader_epoch=3)
    with pytest.raises(InvalidRecordError):
        validate(bytearray(buf), time, origin="raft_leader", partition_leader_epoch=4)
    assert batch_of(validate(buf, time, origin="raft_leader", partition_leader_epoch=3)).partition_leader_epoch == 3


def test_structural_garbage_with_valid_crc_is_invalid_record(time):
    # Header consistent (count 2) but the records section holds one record and junk.
    buf = raw_batch(records_section((0, 0, b"k", b"v")) + b"\x7f\x7f", 2)
    validate(bytearray(buf), time)  # uncompressed fast path trusts the CRC-protected header (documented)
    with pytest.raises(InvalidRecordError, match="invalid record structure"):
        validate(buf, time, verify_uncompressed_records=True)


# -- paths 2 and 3: compressed --------------------------------------------------------------------


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_same_codec_in_place(time, codec):
    buf = produce(codec, n=50)
    original = bytes(buf)
    result = validate(buf, time)
    assert result.validated_records.obj is buf
    assert changed_ranges(original, bytes(buf)) <= set(range(0, 8)) | set(range(12, 16))
    batch = batch_of(result)
    assert batch.compression_type == codec and not result.message_size_maybe_changed
    assert [r.offset for r in batch.records()] == list(range(100, 150))
    assert (result.first_offset, result.last_offset, result.records_count) == (100, 149, 50)


def test_same_codec_with_explicit_target_and_log_append_time(time):
    buf = produce(3)
    result = validate(buf, time, target_compression="lz4", timestamp_type=LOG_APPEND_TIME)
    batch = batch_of(result)
    assert batch.compression_type == 3 and batch.max_timestamp == NOW and not result.message_size_maybe_changed


def test_inner_offsets_not_sequential_are_rebuilt(time):
    section = records_section((0, 0, b"a", b"1"), (0, 1, b"b", b"2"), (2, 2, b"c", b"3"))  # deltas 0, 0, 2
    buf = raw_batch(section, 3, codec=3, max_timestamp=NOW + 2)
    result = validate(buf, time)
    assert result.message_size_maybe_changed
    batch = batch_of(result)
    assert batch.compression_type == 3
    assert [(r.offset, r.key) for r in batch.records()] == [(100, b"a"), (101, b"b"), (102, b"c")]


@pytest.mark.parametrize("source, target", [(3, 4), (0, 1), (4, 0), (1, 2), (2, 3)])
def test_recompression_keeps_producer_state(time, source, target):
    buf = produce(source, n=30, producer_id=42, producer_epoch=3, base_sequence=17, is_transactional=True)
    original = batch_of(validate(bytearray(buf), MockTime(current_ms=NOW), offset=0)).records()
    result = validate(buf, time, target_compression=target, partition_leader_epoch=11)
    assert result.message_size_maybe_changed and result.target_compression == target
    batch = batch_of(result)
    assert batch.compression_type == target
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.is_transactional) == (42, 3, 17, True)
    assert batch.partition_leader_epoch == 11 and batch.base_offset == 100
    assert [tuple(r)[1:] for r in batch.records()] == [tuple(r)[1:] for r in original]
    assert [r.offset for r in batch.records()] == list(range(100, 130))
    assert (result.max_timestamp_ms, result.shallow_offset_of_max_timestamp) == (NOW, 129)


def test_recompression_with_log_append_time(time):
    result = validate(produce(3), time, target_compression="gzip", timestamp_type=LOG_APPEND_TIME)
    batch = batch_of(result)
    assert batch.timestamp_type == LOG_APPEND_TIME and batch.max_timestamp == NOW == result.max_timestamp_ms


def test_recompressed_batch_must_fit(time):
    builder = MemoryRecordsBuilder(0, 4)
    for _ in range(20):
        builder.append(NOW, None, b"a" * 2000)
    buf = bytearray(builder.build())
    with pytest.raises(RecordTooLargeError):
        validate(buf, time, target_compression="none", max_message_bytes=len(buf) + 100)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_garbage_compressed_payload(time, codec):
    buf = produce(codec)
    for i in range(61, len(buf)):
        buf[i] = (buf[i] * 5 + 1) & 0xFF
    fix_crc(buf)
    with pytest.raises(CorruptRecordError):
        validate(buf, time)


def test_compressed_count_mismatch_is_invalid_record(time):
    buf = raw_batch(records_section((0, 0, b"k", b"v")), 2, codec=4)
    with pytest.raises(InvalidRecordError):
        validate(buf, time)


def test_decompression_bomb_capped(time):
    builder = MemoryRecordsBuilder(0, 4)
    builder.append(NOW, None, b"\x00" * 3_000_000)
    with pytest.raises(CorruptRecordError, match="exceeds the limit"):
        validate(bytearray(builder.build()), time, max_decompressed_bytes=1_000_000)


def test_unknown_codec(time):
    buf = produce()
    buf[ATTRIBUTES_OFFSET + 1] |= 5
    fix_crc(buf)
    with pytest.raises(UnsupportedCompressionTypeError):
        validate(buf, time)


def test_record_validation_error_for_invalid_record_only(time):
    builder = MemoryRecordsBuilder(0, 3)
    builder.append(NOW, None, b"v")
    with pytest.raises(RecordValidationError) as info:
        validate(bytearray(builder.build()), time, compacted_topic=True)
    assert isinstance(info.value.invalid_exception, InvalidRecordError)
    assert "1 record errors in total" in str(info.value)


# -- property: any codec in, any target out, records survive with offsets assigned -------------------


@settings(max_examples=25, deadline=None)
@given(
    specs=st.lists(
        st.tuples(
            st.integers(NOW - HOUR, NOW + HOUR),
            st.none() | st.binary(max_size=50),
            st.none() | st.binary(max_size=300),
            st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2),
        ),
        min_size=1,
        max_size=30,
    ),
    codec=st.sampled_from([0, 1, 2, 3, 4]),
    target=st.sampled_from([None, 0, 1, 2, 3, 4]),
    offset=st.integers(0, 2**40),
    timestamp_type=st.sampled_from([CREATE_TIME, LOG_APPEND_TIME]),
)
def test_validated_batches_keep_their_records(specs, codec, target, offset, timestamp_type):
    builder = MemoryRecordsBuilder(0, codec, producer_id=5, producer_epoch=1, base_sequence=3)
    for ts, key, value, headers in specs:
        builder.append(ts, key, value, headers)
    clock = MockTime(current_ms=NOW)
    result = validate(
        bytearray(builder.build()),
        clock,
        offset=offset,
        target_compression=target,
        timestamp_type=timestamp_type,
        timestamp_before_max_ms=HOUR,
        timestamp_after_max_ms=HOUR,
    )
    batch = batch_of(result)
    assert batch.compression_type == (codec if target is None else target)
    assert (
        (result.first_offset, result.last_offset)
        == (offset, offset + len(specs) - 1)
        == (batch.base_offset, batch.last_offset)
    )
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.partition_leader_epoch) == (5, 1, 3, 7)
    expected_ts = [NOW] * len(specs) if timestamp_type == LOG_APPEND_TIME else [ts for ts, *_ in specs]
    assert [tuple(r)[:5] for r in batch.records()] == [
        (offset + i, ts, k, v, h) for i, (ts, (_, k, v, h)) in enumerate(zip(expected_ts, specs, strict=True))
    ]
    assert result.max_timestamp_ms == batch.max_timestamp == max(expected_ts)
    assert result.message_size_maybe_changed == (target is not None and target != codec)


@pytest.mark.parametrize(
    ("origin", "name"),
    [
        (AppendOrigin.CLIENT, "CLIENT"),
        (AppendOrigin.COORDINATOR, "COORDINATOR"),
        (AppendOrigin.REPLICATION, "REPLICATION"),
        ("raft_leader", "RAFT_LEADER"),  # an origin this module's enum lacks, named by a string
        (SimpleNamespace(name="raft_leader"), "RAFT_LEADER"),  # or by anything with a name
    ],
)
def test_origin_name_from_the_member_table_or_the_name(time, origin, name):
    assert LogValidator(produce(), "topic-0", time, origin=origin)._origin_name == name


def test_enum_origin_is_named_without_str(time, monkeypatch):
    # str(origin) was built for every append even when the enum member has a name (three Python calls per append)
    def no_str(self):
        raise AssertionError("str(AppendOrigin) called")

    monkeypatch.setattr(AppendOrigin, "__str__", no_str)
    assert LogValidator(produce(), "topic-0", time, origin=AppendOrigin.CLIENT)._origin_name == "CLIENT"


def test_decompression_limit_defaults_from_max_message_bytes_or_is_given(time):
    from pykbroker.record.compression import decompression_limit

    assert LogValidator(produce(), "topic-0", time, max_message_bytes=5000).max_decompressed_bytes == (
        decompression_limit(5000)
    )
    assert LogValidator(produce(), "topic-0", time, max_decompressed_bytes=123).max_decompressed_bytes == 123
