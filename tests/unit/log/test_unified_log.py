"""UnifiedLog: appends, reads and their bounds, rolling, retention, truncation, ListOffsets, epochs."""

import os

import pytest

from pykbroker.log.fetch_data_info import FetchIsolation
from pykbroker.log.log_config import LogConfig
from pykbroker.log.unified_log import UnexpectedAppendOffsetError, UnifiedLog
from pykbroker.protocol.errors import OffsetOutOfRangeError, RecordBatchTooLargeError
from pykbroker.record.default_record_batch import iter_batches
from pykbroker.utils.scheduler import MockScheduler
from pykbroker.utils.time import MockTime
from tests.unit.log.log_test_utils import assign_offsets, make_batch

SIZE = 161  # make_batch(count=2, payload=100)


@pytest.fixture
def time():
    return MockTime(current_ms=10_000_000)


@pytest.fixture
def scheduler(time):
    return MockScheduler(time)


def new_log(tmp_path, time, scheduler=None, **overrides):
    cfg = LogConfig({"index.interval.bytes": 300, "segment.index.bytes": 8000, "file.delete.delay.ms": 0, **overrides})
    return UnifiedLog.create(str(tmp_path / "topic-0"), cfg, scheduler, time)


def produce(log, n, ts=None, epoch=0, time=None, count=2):
    infos = []
    for _ in range(n):
        stamp = ts if ts is not None else (time.milliseconds() if time else 1000)
        infos.append(log.append_as_leader(make_batch(0, count, 100, max_timestamp=stamp), epoch, assign_offsets(epoch)))
    log.update_high_watermark(log.log_end_offset)
    return infos


def read_offsets(info):
    return [(b.base_offset, b.last_offset) for _, b in iter_batches(info.records.read_bytes())]


def test_append_assigns_offsets_from_leo(tmp_path, time):
    log = new_log(tmp_path, time)
    infos = produce(log, 3)
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 1), (2, 3), (4, 5)]
    assert infos[-1].valid_bytes == SIZE and infos[-1].records_count == 2 and infos[-1].log_start_offset == 0
    assert log.log_end_offset == 6 and log.log_end_offset_metadata == (6, 0, 3 * SIZE)


def test_high_watermark_bounds_reads(tmp_path, time):
    log = new_log(tmp_path, time)
    produce(log, 5)
    log.update_high_watermark(4)
    assert read_offsets(log.read(0, 10_000)) == [(0, 1), (2, 3)]
    assert read_offsets(log.read(0, 10_000, FetchIsolation.LOG_END)) == [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9)]
    empty = log.read(6, 10_000)  # above the HW, below the LEO: empty, not an error
    assert empty.records.size_in_bytes == 0 and empty.fetch_offset_metadata.message_offset == 6


def test_read_at_leo_is_empty_and_beyond_or_below_raises(tmp_path, time, scheduler):
    log = new_log(tmp_path, time, scheduler, **{"segment.bytes": 3 * SIZE, "retention.bytes": 3 * SIZE})
    produce(log, 10)
    at_leo = log.read(20, 1000)
    assert at_leo.records.size_in_bytes == 0 and at_leo.fetch_offset_metadata.message_offset == 20
    with pytest.raises(OffsetOutOfRangeError):
        log.read(21, 1000)
    assert log.delete_old_segments() > 0
    assert log.log_start_offset > 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(log.log_start_offset - 1, 1000)
    assert read_offsets(log.read(log.log_start_offset, 10_000))[0][0] == log.log_start_offset


def test_read_spans_segments_and_min_one_message(tmp_path, time):
    log = new_log(tmp_path, time, **{"segment.bytes": 3 * SIZE})
    produce(log, 7)
    assert log.num_segments == 3
    assert read_offsets(log.read(5, 10_000)) == [(4, 5)]  # one segment per read, from the batch holding 5
    assert read_offsets(log.read(6, 10_000)) == [(6, 7), (8, 9), (10, 11)]
    assert log.read(6, 1).records.size_in_bytes == SIZE  # min_one_message
    assert log.read(6, 1, min_one_message=False).records.size_in_bytes == 1


def test_roll_by_size(tmp_path, time):
    log = new_log(tmp_path, time, **{"segment.bytes": 4 * SIZE})
    produce(log, 9)
    assert log.segments.base_offsets() == (0, 8, 16)
    assert sorted(n for n in os.listdir(log.dir) if n.endswith(".log")) == [
        "00000000000000000000.log",
        "00000000000000000008.log",
        "00000000000000000016.log",
    ]
    assert (
        os.path.getsize(os.path.join(log.dir, "00000000000000000000.index"))
        == 8 * log.segments.get(0).offset_index.entries
    )  # trimmed on roll


def test_roll_by_time(tmp_path, time):
    log = new_log(tmp_path, time, **{"segment.ms": 60_000})
    produce(log, 3, time=time)
    time.sleep(30_000)
    produce(log, 1, time=time)
    assert log.num_segments == 1
    time.sleep(30_001)
    produce(log, 1, time=time)
    assert log.segments.base_offsets() == (0, 8)


def test_roll_flushes_old_segment_asynchronously(tmp_path, time, scheduler):
    log = new_log(tmp_path, time, scheduler, **{"segment.bytes": 2 * SIZE})
    produce(log, 3)
    assert log.recovery_point == 0
    scheduler.tick()
    assert log.recovery_point == 4


def test_flush_messages(tmp_path, time):
    log = new_log(tmp_path, time, **{"flush.messages": 4})
    produce(log, 1)
    assert log.recovery_point == 0
    produce(log, 1)
    assert log.recovery_point == 4


def test_record_list_too_large(tmp_path, time):
    log = new_log(tmp_path, time, **{"segment.bytes": 100})
    with pytest.raises(RecordBatchTooLargeError):
        produce(log, 1)


def test_retention_by_time_advances_log_start(tmp_path, time, scheduler):
    log = new_log(tmp_path, time, scheduler, **{"segment.bytes": 2 * SIZE, "retention.ms": 60_000})
    now = time.milliseconds()
    for i in range(6):
        log.append_as_leader(make_batch(0, 2, 100, max_timestamp=now + i * 10_000), 0, assign_offsets())
    log.update_high_watermark(log.log_end_offset)
    assert log.segments.base_offsets() == (0, 4, 8)
    assert log.delete_old_segments() == 0
    time.sleep(60_000 + 10_001)  # segment 0's largest timestamp (now + 10 s) is now older than 60 s
    assert log.delete_old_segments() == 1
    assert log.log_start_offset == 4 and log.segments.base_offsets() == (4, 8)
    assert any(n.endswith(".deleted") for n in os.listdir(log.dir))
    scheduler.tick()
    assert not any(n.endswith(".deleted") for n in os.listdir(log.dir))


def test_retention_by_bytes(tmp_path, time):
    log = new_log(tmp_path, time, **{"segment.bytes": 2 * SIZE, "retention.bytes": 3 * SIZE})
    produce(log, 7)  # segments 0, 4, 8 (full) and 12 (one batch)
    assert log.delete_old_segments() == 2  # 7 batches - 3 allowed = 4 batches = two whole segments
    assert log.log_start_offset == 8 and log.size == 3 * SIZE


def test_retention_never_passes_high_watermark(tmp_path, time):
    log = new_log(tmp_path, time, **{"segment.bytes": 2 * SIZE, "retention.ms": 1})
    produce(log, 6)
    log.update_high_watermark(5)
    time.sleep(10_000)
    log.delete_old_segments()
    assert log.log_start_offset == 4  # segment 4..7 ends above the HW: kept


def test_retention_deletes_everything_keeps_a_segment(tmp_path, time):
    log = new_log(tmp_path, time, **{"retention.ms": 1})
    produce(log, 3)
    time.sleep(10_000)
    assert log.delete_old_segments() == 1
    assert log.segments.base_offsets() == (6,) and log.log_start_offset == 6 and log.log_end_offset == 6
    produce(log, 1)
    assert log.log_end_offset == 8


def test_delete_records_log_start_offset(tmp_path, time):
    log = new_log(tmp_path, time, **{"segment.bytes": 2 * SIZE})
    produce(log, 6)
    assert log.maybe_increment_log_start_offset(9)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(8, 100)
    assert read_offsets(log.read(9, 10_000))[0] == (8, 9)  # batch granularity
    assert log.delete_old_segments() == 2 and log.segments.base_offsets() == (8,)
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(100)


def test_truncate_to(tmp_path, time):
    log = new_log(tmp_path, time, **{"segment.bytes": 2 * SIZE})
    produce(log, 6)
    assert log.truncate_to(5)
    assert log.log_end_offset == 4 and log.segments.base_offsets() == (0, 4)
    assert log.high_watermark == 4
    produce(log, 1)
    assert read_offsets(log.read(4, 10_000)) == [(4, 5)]
    assert not log.truncate_to(100)
    log.truncate_to(0)
    assert log.log_end_offset == 0 and log.size == 0


def test_truncate_fully_and_start_at(tmp_path, time):
    log = new_log(tmp_path, time)
    produce(log, 3)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (100, 100, 100)
    produce(log, 1)
    assert read_offsets(log.read(100, 1000)) == [(100, 101)]


def test_list_offsets(tmp_path, time):
    log = new_log(tmp_path, time, **{"segment.bytes": 3 * SIZE})
    for i, ts in enumerate([100, 300, 200, 500, 400, 600, 50]):
        log.append_as_leader(make_batch(0, 2, 100, max_timestamp=ts), i // 3, assign_offsets(i // 3))
    log.update_high_watermark(log.log_end_offset)
    assert log.fetch_offset_by_timestamp(-2) == (-1, 0, 0)
    assert log.fetch_offset_by_timestamp(-1) == (-1, 14, 2)
    assert log.fetch_offset_by_timestamp(-3) == (600, 10, 1)
    assert log.fetch_offset_by_timestamp(150).offset == 2
    assert log.fetch_offset_by_timestamp(250).offset == 2  # first batch (in offset order) reaching 250
    assert log.fetch_offset_by_timestamp(450).offset == 6
    assert log.fetch_offset_by_timestamp(601) is None
    refined = log.fetch_offset_by_timestamp(150, refine=lambda data, target, start: (999, 3, 0))
    assert refined == (999, 3, 0)


def test_leader_epoch_cache(tmp_path, time):
    log = new_log(tmp_path, time)
    produce(log, 2, epoch=1)
    produce(log, 2, epoch=3)
    assert log.leader_epoch_cache.epoch_entries() == [(1, 0), (3, 4)]
    assert log.end_offset_for_epoch(1) == (4, 1)
    assert log.end_offset_for_epoch(2) == (4, 1)
    assert log.end_offset_for_epoch(3) == (8, 3)
    assert log.end_offset_for_epoch(4) is None
    with open(os.path.join(log.dir, "leader-epoch-checkpoint")) as f:
        assert f.read() == "0\n2\n1 0\n3 4\n"
    log.truncate_to(3)
    assert log.leader_epoch_cache.epoch_entries() == [(1, 0)]


def test_follower_append(tmp_path, time):
    log = new_log(tmp_path, time)
    data = make_batch(0, 2, 100, leader_epoch=5) + make_batch(2, 3, 100, leader_epoch=5, max_timestamp=7)
    info = log.append_as_follower(data)
    assert (info.first_offset, info.last_offset, info.records_count) == (0, 4, 5)
    assert log.leader_epoch_cache.epoch_entries() == [(5, 0)]
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(make_batch(3, 1, 10))


def test_topic_id_partition_metadata(tmp_path, time):
    import uuid

    from pykbroker.protocol.errors import InconsistentTopicIdError

    tid = uuid.uuid4()
    cfg = LogConfig()
    log = UnifiedLog.create(str(tmp_path / "t-1"), cfg, None, time, topic_id=tid)
    with open(os.path.join(log.dir, "partition.metadata")) as f:
        text = f.read()
    assert text.startswith("version: 0\ntopic_id: ") and len(text.split("topic_id: ")[1].strip()) == 22
    log.close()
    again = UnifiedLog.create(str(tmp_path / "t-1"), cfg, None, time)
    assert again.topic_id == tid
    with pytest.raises(InconsistentTopicIdError):
        again.assign_topic_id(uuid.uuid4())


def test_close_and_reopen_keeps_everything(tmp_path, time):
    log = new_log(tmp_path, time, **{"segment.bytes": 3 * SIZE})
    produce(log, 10)
    log.close()
    again = new_log(tmp_path, time, **{"segment.bytes": 3 * SIZE})
    assert again.log_end_offset == 20 and again.num_segments == 4
    assert read_offsets(again.read(0, 100_000, FetchIsolation.LOG_END))[0] == (0, 1)


def test_with_the_real_log_validator(tmp_path, time):
    """The wiring the ReplicaManager uses: LogValidator under the log lock, result read as is."""
    from functools import partial

    from pykbroker.log.log_validator import LogValidator
    from pykbroker.record.memory_records_builder import MemoryRecordsBuilder

    def validator(epoch, records, next_offset):
        return LogValidator(
            records, "topic-0", time, partition_leader_epoch=epoch
        ).validate_messages_and_assign_offsets(next_offset)

    log = new_log(tmp_path, time)
    for i in range(3):
        builder = MemoryRecordsBuilder(0)
        for j in range(4):
            builder.append(time.milliseconds() + j, None, b"value-%d-%d" % (i, j))
        info = log.append_as_leader(memoryview(bytearray(builder.build())), 7, partial(validator, 7))
        assert (info.first_offset, info.last_offset, info.records_count) == (4 * i, 4 * i + 3, 4)
        assert info.max_timestamp == time.milliseconds() + 3
    log.update_high_watermark(log.log_end_offset)
    [batch] = [b for _, b in iter_batches(log.read(8, 10_000).records.read_bytes())]
    batch.ensure_valid()
    assert batch.base_offset == 8 and batch.partition_leader_epoch == 7
    assert [r.value for r in batch.records()] == [b"value-2-%d" % j for j in range(4)]
    assert log.leader_epoch_cache.epoch_entries() == [(7, 0)]
