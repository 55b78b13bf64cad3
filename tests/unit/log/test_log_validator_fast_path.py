"""LogValidator's fast path (one plain batch checked from its header) gives what the general path gives."""

import struct

import pytest

from pykbroker.log.log_validator import AppendOrigin, LogValidator
from pykbroker.protocol.errors import KafkaError
from pykbroker.record.default_record_batch import CREATE_TIME, LOG_APPEND_TIME
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from pykbroker.utils.time import MockTime
from tests.unit.record.helpers import NOW, fix_crc

HOUR = 3_600_000


def batch(n=3, codec=0, timestamps=None, **builder_args) -> bytearray:
    builder = MemoryRecordsBuilder(0, codec, **builder_args)
    for i in range(n):
        ts = NOW if timestamps is None else timestamps[i]
        builder.append(ts, b"k%d" % i, b"value-%d" % i)
    return bytearray(builder.build())


def with_base_offset(buf: bytearray, offset: int) -> bytearray:
    struct.pack_into(">q", buf, 0, offset)
    return buf


def corrupt(buf: bytearray) -> bytearray:
    buf[-1] ^= 0xFF
    return buf


def with_count(buf: bytearray, count: int) -> bytearray:
    struct.pack_into(">i", buf, 57, count)
    return fix_crc(buf)


def with_sequence(buf: bytearray, sequence: int) -> bytearray:
    struct.pack_into(">i", buf, 53, sequence)
    return fix_crc(buf)


def with_attributes(buf: bytearray, flags: int) -> bytearray:
    struct.pack_into(">h", buf, 21, struct.unpack_from(">h", buf, 21)[0] | flags)
    return fix_crc(buf)


# (records, LogValidator keyword arguments): plain batches the fast path takes, and every way off it
CASES = {
    "plain": (batch(), {}),
    "one record": (batch(n=1), {}),
    "no timestamps": (batch(timestamps=[-1, -1, -1]), {}),
    "idempotent": (batch(producer_id=7, producer_epoch=1, base_sequence=5), {}),
    "transactional": (batch(producer_id=7, producer_epoch=1, base_sequence=0, is_transactional=True), {}),
    "log append time topic": (batch(), {"timestamp_type": LOG_APPEND_TIME}),
    "producer claims log append time": (batch(timestamp_type=LOG_APPEND_TIME, log_append_time=NOW - 5), {}),
    "coordinator": (batch(), {"origin": AppendOrigin.COORDINATOR}),
    "target uncompressed": (batch(), {"target_compression": "uncompressed"}),
    "timestamp too old": (batch(timestamps=[NOW - 3 * HOUR] * 3), {"timestamp_before_max_ms": HOUR}),
    "timestamp too new": (batch(timestamps=[NOW + 3 * HOUR] * 3), {"timestamp_after_max_ms": HOUR}),
    "timestamps out of order": (batch(timestamps=[NOW, NOW - 10, NOW - 5]), {"timestamp_before_max_ms": HOUR}),
    "base offset not 0": (with_base_offset(batch(), 5), {}),
    "base offset not 0 from the coordinator": (with_base_offset(batch(), 5), {"origin": AppendOrigin.COORDINATOR}),
    "corrupt": (corrupt(batch()), {}),
    "too large": (batch(n=20), {"max_message_bytes": 100}),
    "count mismatch": (with_count(batch(), 2), {}),
    "zero count": (with_count(batch(), 0), {}),
    "bad sequence": (with_sequence(batch(producer_id=7, producer_epoch=1, base_sequence=5), -3), {}),
    "control batch": (with_attributes(batch(), 0x20), {}),
    "trailing partial batch": (batch() + batch()[:30], {}),
    "two batches": (batch() + batch(), {}),
    "bad magic": (bytearray(batch()[:16]) + b"\x01" + batch()[17:], {}),
    "truncated": (batch()[:40], {}),
    "compacted topic": (batch(), {"compacted_topic": True}),
    "verify records": (batch(), {"verify_uncompressed_records": True}),
    "compressed": (batch(codec=1), {}),
    "recompressed": (batch(), {"target_compression": "gzip"}),
    "raft leader": (batch(partition_leader_epoch=7), {"origin": "raft_leader"}),
    "read-only buffer": (bytes(batch()), {}),
}


def run(method: str, records, kwargs):
    """``method`` "validate_messages_and_assign_offsets" (fast path where it applies) or "general" (the same
    validator with its fast path switched off)."""
    validator = LogValidator(records, "topic-0", MockTime(current_ms=NOW), partition_leader_epoch=7, **kwargs)
    if method == "general":
        validator._fast = False
        method = "validate_messages_and_assign_offsets"
    try:
        result = getattr(validator, method)(100)
    except KafkaError as e:
        return ("error", type(e), e.code, str(e), getattr(e, "record_errors", None))
    return (
        bytes(result.validated_records),
        result.first_offset,
        result.last_offset,
        result.records_count,
        result.log_append_time_ms,
        result.max_timestamp_ms,
        result.shallow_offset_of_max_timestamp,
        result.message_size_maybe_changed,
        result.source_compression,
        result.target_compression,
    )


@pytest.mark.parametrize("case", list(CASES))
def test_fast_path_gives_the_general_paths_result(case):
    records, kwargs = CASES[case]
    original = bytes(records)

    def copy():
        return bytearray(original) if isinstance(records, bytearray) else original

    fast, general = run("validate_messages_and_assign_offsets", copy(), kwargs), run("general", copy(), kwargs)
    assert fast == general
    if fast[0] == "error" or fast[7] or isinstance(records, bytes):
        return
    stamped = copy()  # stamped in place (the caller's writable buffer)
    run("validate_messages_and_assign_offsets", stamped, kwargs)
    assert bytes(stamped[: len(fast[0])]) == fast[0]


FAST = ["plain", "one record", "no timestamps", "idempotent", "transactional", "log append time topic"]
FAST += ["producer claims log append time", "coordinator", "target uncompressed"]


@pytest.mark.parametrize("case", FAST)
def test_plain_batches_take_the_fast_path(case, monkeypatch):
    records, kwargs = CASES[case]

    def general(*args):
        raise AssertionError("general path taken")

    monkeypatch.setattr(LogValidator, "_validate_general", general)
    result = LogValidator(
        bytearray(records), "topic-0", MockTime(current_ms=NOW), partition_leader_epoch=7, **kwargs
    ).validate_messages_and_assign_offsets(100)
    assert (result.first_offset, result.last_offset) == (100, 99 + result.records_count)
    expected_type = LOG_APPEND_TIME if kwargs.get("timestamp_type") == LOG_APPEND_TIME else CREATE_TIME
    assert bool(result.validated_records[22] & 0x08) == (expected_type == LOG_APPEND_TIME)


def test_one_validator_validates_many_appends_as_fresh_ones():
    # a partition leader keeps one LogValidator per (config, epoch, origin) and passes each append's records
    time = MockTime(current_ms=NOW)
    shared = LogValidator(b"", "topic-0", time, partition_leader_epoch=7, timestamp_type=LOG_APPEND_TIME)
    for i, case in enumerate(["plain", "idempotent", "corrupt", "compressed", "timestamps out of order", "plain"]):
        records = CASES[case][0]
        reused, fresh = bytearray(records), bytearray(records)
        try:
            got = shared.validate(reused, 100 + i)
        except KafkaError as e:
            got = (type(e), str(e))
        try:
            expected = LogValidator(
                fresh, "topic-0", time, partition_leader_epoch=7, timestamp_type=LOG_APPEND_TIME
            ).validate_messages_and_assign_offsets(100 + i)
        except KafkaError as e:
            expected = (type(e), str(e))
        if isinstance(expected, tuple) and isinstance(expected[0], type):
            assert got == expected
        else:
            assert got[1:] == expected[1:] and bytes(got[0]) == bytes(expected[0]) and reused == fresh
        time.sleep(1)
