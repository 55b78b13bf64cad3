"""Readers on other threads while the log appends, rolls, deletes by retention and truncates."""

import threading

from pykbroker.log.fetch_data_info import FetchIsolation
from pykbroker.log.log_config import LogConfig
from pykbroker.log.unified_log import UnifiedLog
from pykbroker.protocol.errors import OffsetOutOfRangeError
from pykbroker.record.default_record_batch import iter_batches
from pykbroker.utils.time import MockTime
from tests.unit.log.log_test_utils import assign_offsets, make_batch


def test_reads_during_appends_rolls_and_retention(tmp_path):
    time = MockTime()
    log = UnifiedLog.create(
        str(tmp_path / "c-0"),
        LogConfig(
            {
                "segment.bytes": 20 * 161,
                "index.interval.bytes": 200,
                "retention.bytes": 60 * 161,
                "file.delete.delay.ms": 0,
                "segment.index.bytes": 800,
            }
        ),
        None,
        time,
    )
    stop = threading.Event()
    errors = []
    reads = [0]

    def reader():
        while not stop.is_set():
            start = log.log_start_offset
            end = log.high_watermark
            offset = start + (reads[0] * 7) % max(1, end - start) if end > start else start
            try:
                info = log.read(offset, 4000, FetchIsolation.HIGH_WATERMARK)
                data = info.records.read_bytes()
                previous = None
                for _, batch in iter_batches(data):
                    assert previous is None or batch.base_offset == previous + 1
                    previous = batch.last_offset
                    batch.ensure_valid()
                reads[0] += 1
            except OffsetOutOfRangeError:
                pass  # retention moved the log start past our offset: a legal answer
            except Exception as e:  # noqa: BLE001 - any other error is the reader thread's failure
                errors.append(repr(e))
                return

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for i in range(800):
            log.append_as_leader(make_batch(0, 2, 100), 0, assign_offsets())
            log.update_high_watermark(log.log_end_offset)
            if i % 50 == 0:
                log.delete_old_segments()
            if i % 400 == 399:
                log.truncate_to(log.log_end_offset - 3)
                log.update_high_watermark(log.log_end_offset)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert errors == []
    assert reads[0] > 0
    assert log.log_start_offset > 0 and log.num_segments <= 5
