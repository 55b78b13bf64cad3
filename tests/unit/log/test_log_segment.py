"""LogSegment: append with index entries, read at batch granularity, recovery, rolling, truncation."""

import os

import pytest

from pykbroker.log.log_config import LogConfig
from pykbroker.log.log_segment import LogSegment
from pykbroker.record.default_record_batch import iter_batches
from pykbroker.utils.time import MockTime
from tests.unit.log.log_test_utils import make_batch

SIZE = 161  # make_batch(count=2, payload=100)


@pytest.fixture
def time():
    return MockTime(current_ms=1_000_000)


def open_segment(tmp_path, time, base=0, **overrides):
    cfg = LogConfig({"index.interval.bytes": 300, "segment.index.bytes": 8000, **overrides})
    return LogSegment.open(str(tmp_path), base, cfg, time)


def append_batches(seg, n, start=0, ts=1000):
    for i in range(n):
        data = make_batch(start + 2 * i, 2, 100, max_timestamp=ts + i)
        seg.append(start + 2 * i + 1, ts + i, start + 2 * i + 1, data)


def offsets(info):
    return [(b.base_offset, b.last_offset) for _, b in iter_batches(info.records.read_bytes())]


def test_file_names(tmp_path, time):
    seg = open_segment(tmp_path, time, base=123)
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000000123.index",
        "00000000000000000123.log",
        "00000000000000000123.timeindex",
    ]
    seg.close()


def test_index_entries_map_last_offset_to_start_position(tmp_path, time):
    seg = open_segment(tmp_path, time)
    append_batches(seg, 10)
    # an entry once more than 300 bytes were appended since the previous one: appends 2, 4, 6, 8
    assert seg.offset_index.entries_list() == [(5, 2 * SIZE), (9, 4 * SIZE), (13, 6 * SIZE), (17, 8 * SIZE)]
    assert seg.time_index.entries_list() == [(1002, 5), (1004, 9), (1006, 13), (1008, 17)]
    seg.close()


def test_read_batch_granularity_and_partial_end(tmp_path, time):
    seg = open_segment(tmp_path, time)
    append_batches(seg, 10)
    info = seg.read(5, 2 * SIZE + 10)
    assert info.fetch_offset_metadata == (5, 0, 2 * SIZE)  # starts at the batch holding 5 (4..5)
    assert info.records.size_in_bytes == 2 * SIZE + 10  # ends in a partial batch
    assert offsets(info) == [(4, 5), (6, 7)]
    assert seg.read(100, 1000) is None


def test_read_min_one_message_and_max_position(tmp_path, time):
    seg = open_segment(tmp_path, time)
    append_batches(seg, 10)
    assert seg.read(4, 10, min_one_message=False).first_entry_incomplete
    info = seg.read(4, 10, min_one_message=True)
    assert info.records.size_in_bytes == SIZE and not info.first_entry_incomplete
    info = seg.read(0, 10_000, max_position=3 * SIZE)
    assert offsets(info) == [(0, 1), (2, 3), (4, 5)]


def test_recover_rebuilds_indexes_and_cuts_torn_tail(tmp_path, time):
    seg = open_segment(tmp_path, time)
    append_batches(seg, 10)
    entries = seg.offset_index.entries_list()
    seg.log.append(make_batch(20, 2, 100)[:100])  # half a batch: a torn write
    assert seg.recover() == 100
    assert seg.size == 10 * SIZE
    assert seg.offset_index.entries_list() == entries
    assert seg.time_index.last_entry() == (1009, 19)
    assert seg.read_next_offset() == 20


def test_recover_stops_at_bad_crc(tmp_path, time):
    seg = open_segment(tmp_path, time)
    append_batches(seg, 10)
    seg.flush()
    with open(seg.log.path, "r+b") as f:
        f.seek(5 * SIZE + 80)
        f.write(b"\xff")
    assert seg.recover() == 5 * SIZE
    assert seg.read_next_offset() == 10


def test_recover_rejects_offsets_going_backwards(tmp_path, time):
    seg = open_segment(tmp_path, time)
    append_batches(seg, 3)
    seg.log.append(make_batch(2, 2, 100))  # overlaps offsets already present
    assert seg.recover() == SIZE
    assert seg.read_next_offset() == 6


def test_should_roll_by_size_time_and_offset(tmp_path, time):
    seg = open_segment(tmp_path, time, base=0)
    params = {
        "max_segment_ms": 10_000,
        "max_segment_bytes": 10 * SIZE,
        "max_timestamp_in_messages": 1000,
        "max_offset_in_messages": 1,
        "messages_size": SIZE,
        "now": time.milliseconds(),
    }
    assert not seg.should_roll(**params)
    append_batches(seg, 9)
    assert not seg.should_roll(**params)
    append_batches(seg, 1, start=18)
    assert seg.should_roll(**params)  # size
    seg2 = open_segment(tmp_path, time, base=1000)
    append_batches(seg2, 1, start=1000, ts=5000)
    p = dict(params, max_offset_in_messages=1001)
    assert not seg2.should_roll(**dict(p, max_timestamp_in_messages=15_000))
    assert seg2.should_roll(**dict(p, max_timestamp_in_messages=15_001))  # segment.ms by timestamps
    assert seg2.should_roll(**dict(p, max_offset_in_messages=1000 + (1 << 31)))  # offset overflow


def test_roll_by_wall_clock_without_timestamps(tmp_path, time):
    seg = open_segment(tmp_path, time)
    data = make_batch(0, 1, 10, max_timestamp=-1)
    seg.append(0, -1, 0, data)
    params = (10_000, 1 << 30, -1, 1, 71)  # max_segment_ms, max_segment_bytes, max timestamp, max offset, size
    assert not seg.should_roll(*params, now=time.milliseconds())
    time.sleep(10_001)
    assert seg.should_roll(*params, now=time.milliseconds())


def test_truncate_to(tmp_path, time):
    seg = open_segment(tmp_path, time)
    append_batches(seg, 10)
    assert seg.truncate_to(9) == 6 * SIZE  # the batch holding 9 (8..9) goes too
    assert seg.read_next_offset() == 8
    assert seg.offset_index.entries_list() == [(5, 2 * SIZE)]
    assert seg.max_timestamp_so_far == 1003
    append_batches(seg, 1, start=8, ts=2000)
    assert offsets(seg.read(0, 10_000))[-1] == (8, 9)


def test_close_trims_and_reopen(tmp_path, time):
    seg = open_segment(tmp_path, time)
    append_batches(seg, 10)
    seg.close()
    assert os.path.getsize(tmp_path / "00000000000000000000.index") == 4 * 8
    assert os.path.getsize(tmp_path / "00000000000000000000.timeindex") == 5 * 12  # + final max timestamp
    again = LogSegment.open(str(tmp_path), 0, LogConfig({"index.interval.bytes": 300}), time, file_already_exists=True)
    again.sanity_check()
    assert again.max_timestamp_so_far == 1009 and again.read_next_offset() == 20
    assert again.find_offset_by_timestamp(1004, 0).offset == 8


def test_delete_and_suffix(tmp_path, time):
    seg = open_segment(tmp_path, time)
    append_batches(seg, 2)
    seg.change_file_suffixes("", ".deleted")
    assert all(n.endswith(".deleted") for n in os.listdir(tmp_path))
    seg.delete_if_exists()
    assert os.listdir(tmp_path) == []
