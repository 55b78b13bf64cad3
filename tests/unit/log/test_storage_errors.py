"""I/O errors in the log layer (Kafka's maybeHandleIOException): a full disk on append, on segment roll
and on index growth raises KAFKA_STORAGE_ERROR and reports the log directory to the
LogDirFailureChannel -- never a crash (no SIGBUS: index blocks are allocated before mmap writes)."""

import errno
import os

import pytest

from pykbroker.log.log_dir_failure_channel import LogDirFailureChannel
from pykbroker.log.log_manager import LogManager
from pykbroker.log.offset_index import OffsetIndex
from pykbroker.protocol.errors import KafkaStorageError
from pykbroker.utils.scheduler import MockScheduler
from pykbroker.utils.time import MockTime
from tests.unit.log.log_test_utils import assign_offsets, inject_enospc, make_batch

SIZE = 161  # make_batch(0, 2, 100)


def _manager(dirs, **extra):
    time = MockTime(current_ms=50_000_000)
    props = {"log.segment.bytes": str(4 * SIZE), "log.index.interval.bytes": "1", **extra}
    lm = LogManager.from_broker_config([str(d) for d in dirs], props, MockScheduler(time), time)
    lm.startup()
    return lm


def _append(log):
    return log.append_as_leader(make_batch(0, 2, 100), 0, assign_offsets())


@pytest.mark.parametrize("when", ["append", "roll"])
def test_full_disk_is_a_storage_error_and_takes_the_dir_offline(tmp_path, monkeypatch, when):
    full, ok = tmp_path / "full", tmp_path / "ok"
    lm = _manager([full, ok])
    bad, good = lm.get_or_create_log("t", 0), lm.get_or_create_log("t", 1)
    assert (lm.log_dir_of("t", 0), lm.log_dir_of("t", 1)) == (str(full), str(ok))
    for _ in range(4 if when == "roll" else 1):  # "roll": the active segment is full, the next append rolls
        _append(bad)
    acked = bad.log_end_offset
    _append(good)
    inject_enospc(monkeypatch, full)
    with pytest.raises(KafkaStorageError, match=f"in dir {full}"):
        _append(bad)
    channel = lm.log_dir_failure_channel
    assert channel.has_offline_log_dir(str(full)) and not channel.has_offline_log_dir(str(ok))
    assert channel.take_next_offline_log_dir(0) == str(full)
    assert bad.log_end_offset == acked
    with pytest.raises(KafkaStorageError, match="already offline"):
        bad.read(0, 1000)
    with pytest.raises(KafkaStorageError, match="already offline"):  # a caught-up read too (no I/O)
        bad.read(acked, 1000)
    _append(good)  # the other directory keeps working
    assert lm.handle_log_dir_failure(str(full)) == [("t", 0)]
    assert lm.live_log_dirs == [str(ok)] and lm.get_log("t", 0) is None
    assert lm.get_or_create_log("t", 2) is not None and lm.log_dir_of("t", 2) == str(ok)
    lm.shutdown()
    assert not (full / ".kafka_cleanshutdown").exists() and (ok / ".kafka_cleanshutdown").exists()

    monkeypatch.undo()  # space freed: the next start recovers the offline dir with every acked record
    lm2 = _manager([full, ok])
    assert not lm2.had_clean_shutdown[str(full)]
    assert lm2.get_log("t", 0).log_end_offset == acked
    assert lm2.get_log("t", 1).log_end_offset == 4
    _append(lm2.get_log("t", 0))
    lm2.shutdown()


def test_index_growth_on_a_full_disk_raises_enospc_before_any_mmap_write(tmp_path, monkeypatch):
    index = OffsetIndex(str(tmp_path / "0.index"), 0, 1024 * 1024)
    allocated = os.stat(index.path).st_blocks * 512
    assert 0 < allocated < 1024 * 1024  # sized like Kafka's (sparse), blocks allocated ahead of the writes
    per_chunk = allocated // 8
    for i in range(per_chunk):
        index.append(i, i * 10)
    inject_enospc(monkeypatch, tmp_path)
    with pytest.raises(OSError) as e:
        index.append(per_chunk, per_chunk * 10)
    assert e.value.errno == errno.ENOSPC
    assert index.entries == per_chunk  # nothing written through the mapping
    monkeypatch.undo()
    index.append(per_chunk, per_chunk * 10)
    index.close()


def test_segment_creation_on_a_full_disk(tmp_path, monkeypatch):
    """A new log writes nothing (its first segment's index files are created on first use), so it is created on
    a full disk; its first append, which needs them, is the storage error that takes the dir offline."""
    lm = _manager([tmp_path / "d"])
    inject_enospc(monkeypatch, tmp_path)
    log = lm.get_or_create_log("t", 0)
    with pytest.raises(KafkaStorageError):
        _append(log)
    assert log.log_end_offset == 0
    assert lm.log_dir_failure_channel.has_offline_log_dir(str(tmp_path / "d"))


def test_channel_queues_each_dir_once():
    channel = LogDirFailureChannel(2)
    channel.maybe_add_offline_log_dir("/a", "boom", OSError(errno.EIO, "eio"))
    channel.maybe_add_offline_log_dir("/a", "again")
    assert channel.take_next_offline_log_dir(0) == "/a"
    assert channel.take_next_offline_log_dir(0) is None
    assert channel.offline_log_dirs() == ["/a"]
