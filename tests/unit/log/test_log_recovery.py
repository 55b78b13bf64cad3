"""Crash recovery: torn tails, corrupt batches mid-log, missing indexes, and a killed process."""

import multiprocessing
import os

from pykbroker.log.fetch_data_info import FetchIsolation
from pykbroker.log.log_config import LogConfig
from pykbroker.log.unified_log import UnifiedLog
from pykbroker.record.default_record_batch import iter_batches
from pykbroker.utils.time import MockTime
from tests.unit.log.log_test_utils import assign_offsets, make_batch

SIZE = 161
CONFIG = {"segment.bytes": 5 * SIZE, "index.interval.bytes": 300}


def new_log(path, clean=True, recovery_point=0):
    return UnifiedLog.create(
        str(path), LogConfig(CONFIG), None, MockTime(), had_clean_shutdown=clean, recovery_point=recovery_point
    )


def produce(log, n):
    for _ in range(n):
        log.append_as_leader(make_batch(0, 2, 100), 0, assign_offsets())


def all_offsets(log):
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20, FetchIsolation.LOG_END).records.read_bytes()
        batches = [b for _, b in iter_batches(data)]
        out += [(b.base_offset, b.last_offset) for b in batches]
        offset = batches[-1].next_offset
    return out


def test_torn_tail_truncated_to_last_whole_batch(tmp_path):
    log = new_log(tmp_path / "t-0")
    produce(log, 12)  # segments 0, 10, 20 (last holds 2 batches)
    active = log.segments.active_segment
    entries_before = active.offset_index.entries_list()
    with open(active.log.path, "ab") as f:
        f.write(make_batch(24, 2, 100)[:120])  # half a batch reached the disk
    del log  # crash: nothing closed
    again = new_log(tmp_path / "t-0", clean=False)
    assert again.recovery_report.truncated_bytes == 120
    assert again.recovery_report.truncated_segment == 20
    assert again.log_end_offset == 24
    assert all_offsets(again) == [(i, i + 1) for i in range(0, 24, 2)]
    assert again.segments.active_segment.offset_index.entries_list() == entries_before
    produce(again, 1)
    assert all_offsets(again)[-1] == (24, 25)


def test_corrupt_crc_mid_log_truncates_there_and_deletes_later_segments(tmp_path):
    log = new_log(tmp_path / "t-0")
    produce(log, 12)
    first = log.segments.get(0).log.path
    del log
    with open(first, "r+b") as f:
        f.seek(2 * SIZE + 100)  # inside the third batch's records: its CRC no longer matches
        f.write(b"\x00\x01\x02")
    again = new_log(tmp_path / "t-0", clean=False)
    report = again.recovery_report
    assert report.truncated_segment == 0 and report.truncated_bytes == 3 * SIZE
    assert report.deleted_segments == (10, 20)
    assert again.segments.base_offsets() == (0,) and again.log_end_offset == 4
    assert sorted(n for n in os.listdir(again.dir) if n.endswith(".log")) == ["00000000000000000000.log"]
    assert all_offsets(again) == [(0, 1), (2, 3)]


def test_clean_shutdown_skips_recovery_below_recovery_point(tmp_path):
    log = new_log(tmp_path / "t-0")
    produce(log, 12)
    log.flush()
    rp = log.recovery_point
    log.close()
    again = new_log(tmp_path / "t-0", clean=False, recovery_point=rp)
    assert again.recovery_report.recovered_segments == 1  # only the segment holding the recovery point
    assert again.log_end_offset == 24


def test_missing_index_is_rebuilt(tmp_path):
    log = new_log(tmp_path / "t-0")
    produce(log, 12)
    entries = log.segments.get(0).offset_index.entries_list()
    log.close()
    os.unlink(tmp_path / "t-0" / "00000000000000000000.index")
    os.unlink(tmp_path / "t-0" / "00000000000000000000.timeindex")
    again = new_log(tmp_path / "t-0", clean=True)
    assert again.segments.get(0).offset_index.entries_list() == entries
    assert again.fetch_offset_by_timestamp(1000).offset == 0


def test_garbage_index_is_rebuilt(tmp_path):
    log = new_log(tmp_path / "t-0")
    produce(log, 12)
    log.close()
    with open(tmp_path / "t-0" / "00000000000000000000.index", "r+b") as f:
        f.write(b"\x7f\x00\x00\x00\x00\x00\x00\x01")  # first entry after the last one
    again = new_log(tmp_path / "t-0", clean=True)
    again.segments.get(0).offset_index.sanity_check()
    assert all_offsets(again) == [(i, i + 1) for i in range(0, 24, 2)]


def test_stray_files_are_removed(tmp_path):
    log = new_log(tmp_path / "t-0")
    produce(log, 3)
    log.close()
    for name in ("00000000000000000000.log.deleted", "00000000000000000099.index", "x.cleaned"):
        (tmp_path / "t-0" / name).write_bytes(b"junk")
    again = new_log(tmp_path / "t-0")
    names = os.listdir(again.dir)
    assert not any(n.endswith((".deleted", ".cleaned")) or n.startswith("00000000000000000099") for n in names)
    assert again.log_end_offset == 6


def _append_then_die(path: str, n: int, conn) -> None:
    log = UnifiedLog.create(path, LogConfig(CONFIG), None, MockTime())
    for _ in range(n):
        log.append_as_leader(make_batch(0, 2, 100), 0, assign_offsets())
    conn.send(log.log_end_offset)
    conn.close()
    os._exit(0)  # no close, no flush, no snapshot: bytes only handed to the OS


def test_killed_process_loses_nothing_acknowledged(tmp_path):
    path = str(tmp_path / "crash-0")
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_append_then_die, args=(path, 37, child))
    proc.start()
    acknowledged = parent.recv()
    proc.join(30)
    assert proc.exitcode == 0 and acknowledged == 74
    again = new_log(path, clean=False)
    assert again.log_end_offset == 74
    assert all_offsets(again) == [(i, i + 1) for i in range(0, 74, 2)]
    produce(again, 1)
    assert again.log_end_offset == 76
