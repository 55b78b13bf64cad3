"""LogManager: creation, checkpoints, clean and unclean restarts, deletion, retention task, configs."""

import os
import threading
import uuid

import pytest

from pykbroker.log.checkpoints import OffsetCheckpointFile
from pykbroker.log.fetch_data_info import FetchIsolation
from pykbroker.log.log_manager import LogManager
from pykbroker.protocol.errors import InvalidConfigurationError
from pykbroker.record.default_record_batch import iter_batches
from pykbroker.utils.scheduler import MockScheduler
from pykbroker.utils.time import MockTime
from tests.unit.log.log_test_utils import assign_offsets, make_batch

SIZE = 161
BROKER = {
    "log.segment.bytes": str(4 * SIZE),
    "log.index.interval.bytes": "300",
    "log.segment.delete.delay.ms": "0",
    "log.retention.check.interval.ms": "1000",
    "log.initial.task.delay.ms": "0",
}


@pytest.fixture
def time():
    return MockTime(current_ms=50_000_000)


def manager(dirs, time, **extra):
    return LogManager.from_broker_config([str(d) for d in dirs], {**BROKER, **extra}, MockScheduler(time), time)


def produce(log, n, ts=1000):
    for _ in range(n):
        log.append_as_leader(make_batch(0, 2, 100, max_timestamp=ts), 0, assign_offsets())
    log.update_high_watermark(log.log_end_offset)


def batch_offsets(log):
    data = b""
    offset = log.log_start_offset
    out = []
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20, FetchIsolation.LOG_END).records.read_bytes()
        batches = [b for _, b in iter_batches(data)]
        out += [b.base_offset for b in batches]
        offset = batches[-1].next_offset
    return out


def test_create_and_clean_restart(tmp_path, time):
    lm = manager([tmp_path], time)
    lm.startup()
    tid = uuid.uuid4()
    log = lm.get_or_create_log("orders", 0, tid)
    assert lm.get_or_create_log("orders", 0) is log
    produce(log, 10)
    lm.shutdown()
    assert os.path.exists(tmp_path / ".kafka_cleanshutdown")
    assert OffsetCheckpointFile(str(tmp_path / "recovery-point-offset-checkpoint")).read() == {("orders", 0): 20}
    assert OffsetCheckpointFile(str(tmp_path / "replication-offset-checkpoint")).read() == {("orders", 0): 20}

    lm2 = manager([tmp_path], time)
    lm2.startup()
    assert lm2.had_clean_shutdown[str(tmp_path)]
    assert not os.path.exists(tmp_path / ".kafka_cleanshutdown")  # removed once loaded
    log2 = lm2.get_log("orders", 0)
    assert log2.log_end_offset == 20 and log2.high_watermark == 20 and log2.topic_id == tid
    assert log2.recovery_report.recovered_segments == 0


def test_broker_epoch_of_the_clean_shutdown_markers(tmp_path, time):
    """The BrokerRegistration's ``previous_broker_epoch`` (Kafka's readBrokerEpochFromCleanShutdownFiles): the
    epoch every directory's marker held at load, else -1 (a directory without a marker, or different epochs)."""
    a, b = tmp_path / "a", tmp_path / "b"
    lm = manager([a, b], time)
    lm.startup()
    assert lm.broker_epoch_from_clean_shutdown() == -1  # a first start: no marker
    lm.shutdown(42)
    lm = manager([a, b], time)
    lm.startup()
    assert lm.broker_epoch_from_clean_shutdown() == 42
    lm.shutdown(43)
    (b / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":7}')
    lm = manager([a, b], time)
    lm.startup()
    assert lm.broker_epoch_from_clean_shutdown() == -1  # the directories disagree
    lm.shutdown(44)
    os.unlink(a / ".kafka_cleanshutdown")  # a crash in one directory
    lm = manager([a, b], time)
    lm.startup()
    assert lm.broker_epoch_from_clean_shutdown() == -1


def test_unclean_restart_keeps_every_whole_batch(tmp_path, time):
    lm = manager([tmp_path], time)
    lm.startup()
    log = lm.get_or_create_log("t", 3)
    produce(log, 11)
    lm.checkpoint_log_recovery_offsets()
    with open(log.segments.active_segment.log.path, "ab") as f:
        f.write(make_batch(22, 2, 100)[:77])  # torn write
    # crash: no shutdown, no marker
    lm2 = manager([tmp_path], time)
    lm2.startup()
    assert not lm2.had_clean_shutdown[str(tmp_path)]
    log2 = lm2.get_log("t", 3)
    assert log2.log_end_offset == 22 and batch_offsets(log2) == list(range(0, 22, 2))
    assert log2.recovery_report.truncated_bytes == 77


def test_checkpoint_file_format(tmp_path, time):
    lm = manager([tmp_path], time)
    lm.startup()
    produce(lm.get_or_create_log("a", 0), 1)
    produce(lm.get_or_create_log("b-c", 12), 2)
    lm.get_log("a", 0).flush()
    lm.checkpoint_log_recovery_offsets()
    text = (tmp_path / "recovery-point-offset-checkpoint").read_text()
    assert text == "0\n2\na 0 2\nb-c 12 0\n"
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_log_start_offset_checkpoint(tmp_path, time):
    lm = manager([tmp_path], time)
    lm.startup()
    log = lm.get_or_create_log("t", 0)
    produce(log, 6)
    log.maybe_increment_log_start_offset(3)
    lm.checkpoint_log_start_offsets()
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\nt 0 3\n"
    lm.shutdown()
    lm2 = manager([tmp_path], time)
    lm2.startup()
    assert lm2.get_log("t", 0).log_start_offset == 3


def test_retention_task_runs_on_schedule(tmp_path, time):
    lm = manager([tmp_path], time, **{"log.retention.ms": "60000"})
    lm.startup()
    log = lm.get_or_create_log("t", 0)
    produce(log, 8, ts=time.milliseconds())
    assert log.num_segments == 2
    time.sleep(60_001)
    produce(log, 1, ts=time.milliseconds())  # rolls: segments 0, 8 (old) and 16
    assert log.log_start_offset == 0 and log.num_segments == 3
    lm._scheduler.tick()
    assert log.log_start_offset == 16 and log.segments.base_offsets() == (16,)


def test_async_delete(tmp_path, time):
    lm = manager([tmp_path], time, **{"log.segment.delete.delay.ms": "5000"})
    lm.startup()
    log = lm.get_or_create_log("gone", 1)
    produce(log, 2)
    lm.async_delete("gone", 1)
    assert lm.get_log("gone", 1) is None
    [name] = [n for n in os.listdir(tmp_path) if n.endswith("-delete")]
    assert name.startswith("gone-1.")
    time.sleep(5000)
    lm._scheduler.tick()
    assert not any(n.endswith("-delete") for n in os.listdir(tmp_path))


def test_async_delete_waits_the_broker_default_not_the_topic_override(tmp_path, time):
    """Kafka's LogManager deletes a whole log after the broker's ``log.segment.delete.delay.ms``
    (``currentDefaultConfig.fileDeleteDelayMs``); a topic's ``file.delete.delay.ms`` applies to its segments."""
    lm = manager([tmp_path], time, **{"log.segment.delete.delay.ms": "5000"})
    lm.startup({"gone": {"file.delete.delay.ms": "600000"}})
    produce(lm.get_or_create_log("gone", 1), 2)
    lm.async_delete("gone", 1)
    time.sleep(4999)
    lm._scheduler.tick()
    assert any(n.endswith("-delete") for n in os.listdir(tmp_path))
    time.sleep(1)
    lm._scheduler.tick()
    assert not any(n.endswith("-delete") for n in os.listdir(tmp_path))


def test_topic_config_overrides(tmp_path, time):
    lm = manager([tmp_path], time)
    lm.startup({"big": {"segment.bytes": "100000"}})
    assert lm.get_or_create_log("big", 0).config.segment_bytes == 100000
    assert lm.get_or_create_log("small", 0).config.segment_bytes == 4 * SIZE
    lm.update_topic_config("small", {"retention.ms": "1234"})
    assert lm.get_log("small", 0).config.retention_ms == 1234
    with pytest.raises(InvalidConfigurationError):
        lm.update_topic_config("small", {"retention.ms": "soon"})


def test_multiple_log_dirs_balance(tmp_path, time):
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = manager(dirs, time)
    lm.startup()
    for p in range(4):
        lm.get_or_create_log("t", p)
    assert sorted(len([n for n in os.listdir(d) if n.startswith("t-")]) for d in dirs) == [2, 2]
    lm.shutdown()
    lm2 = manager(dirs, time)
    lm2.startup()
    assert len(lm2.all_logs()) == 4


def test_corrupt_checkpoint_means_full_recovery(tmp_path, time):
    lm = manager([tmp_path], time)
    lm.startup()
    produce(lm.get_or_create_log("t", 0), 5)
    lm.shutdown()
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n7\nnonsense\n")
    os.unlink(tmp_path / ".kafka_cleanshutdown")
    lm2 = manager([tmp_path], time)
    lm2.startup()
    assert lm2.get_log("t", 0).log_end_offset == 10
    assert lm2.get_log("t", 0).recovery_report.recovered_segments == 2


def test_unchanged_high_watermarks_are_not_rewritten(tmp_path, time):
    """Issue 31: the periodic high-watermark checkpoint skips a write that would leave the file as it is (an idle
    broker rewrote and fsynced it every 5 s); any change, and the shutdown, write it."""
    lm = manager([tmp_path], time)
    log = lm.get_or_create_log("t", 0)
    produce(log, 2)
    path = tmp_path / "replication-offset-checkpoint"
    lm.checkpoint_high_watermarks()
    first = path.stat().st_ino
    assert path.read_text().splitlines()[2] == "t 0 4"
    lm.checkpoint_high_watermarks()
    assert path.stat().st_ino == first  # not replaced
    log.update_high_watermark(2)
    lm.checkpoint_high_watermarks()
    assert path.stat().st_ino != first and path.read_text().splitlines()[2] == "t 0 2"
    second = path.stat().st_ino
    lm.shutdown()
    assert path.stat().st_ino != second and path.read_text().splitlines()[2] == "t 0 2"


def test_shutdown_closes_the_logs_on_the_recovery_threads(tmp_path, time, monkeypatch):
    """Kafka's LogManager.shutdown closes a dir's logs on a pool of ``num.recovery.threads.per.data.dir``
    threads: every log is closed there, the dir is marked clean and every log's data is there after a restart."""
    from pykbroker.log.unified_log import UnifiedLog

    closed_on: dict[str, str] = {}
    real_close = UnifiedLog.close

    def close(log):
        closed_on[log.name] = threading.current_thread().name
        real_close(log)

    monkeypatch.setattr(UnifiedLog, "close", close)
    lm = manager([tmp_path], time, **{"num.recovery.threads.per.data.dir": "3"})
    lm.startup()
    tid = uuid.uuid4()
    for p in range(12):
        produce(lm.get_or_create_log("orders", p, tid), p % 3)
    lm.shutdown()
    assert len(closed_on) == 12
    assert all(name.startswith("log-closer") for name in closed_on.values()), closed_on
    assert os.path.exists(tmp_path / ".kafka_cleanshutdown")

    lm2 = manager([tmp_path], time)
    lm2.startup()
    assert lm2.had_clean_shutdown[str(tmp_path)]
    for p in range(12):
        log = lm2.get_log("orders", p)
        assert log.log_end_offset == 2 * (p % 3) and log.recovery_report.recovered_segments == 0
        assert len(batch_offsets(log)) == p % 3
    lm2.shutdown()


def test_startup_loads_the_logs_on_the_recovery_threads(tmp_path, time, monkeypatch):
    """Kafka's LogManager.loadLogs loads a dir's logs on ``num.recovery.threads.per.data.dir`` threads: every log
    is loaded there, with its recovery after an unclean shutdown, and each has its own data."""
    from pykbroker.log.unified_log import UnifiedLog

    lm = manager([tmp_path], time)
    lm.startup()
    tid = uuid.uuid4()
    for p in range(12):
        produce(lm.get_or_create_log("orders", p, tid), p % 3)
        lm.get_log("orders", p).flush()
    # no shutdown: the next start recovers every log (unclean)

    loaded_on: dict[str, str] = {}
    real_create = UnifiedLog.create.__func__

    def create(cls, path, *args, **kwargs):
        log = real_create(cls, path, *args, **kwargs)
        loaded_on[log.name] = threading.current_thread().name
        return log

    monkeypatch.setattr(UnifiedLog, "create", classmethod(create))
    lm2 = manager([tmp_path], time, **{"num.recovery.threads.per.data.dir": "3"})
    lm2.startup()
    assert not lm2.had_clean_shutdown[str(tmp_path)]
    assert len(loaded_on) == 12
    assert all(name.startswith("log-loader") for name in loaded_on.values()), loaded_on
    for p in range(12):
        log = lm2.get_log("orders", p)
        assert log.log_end_offset == 2 * (p % 3)
        assert len(batch_offsets(log)) == p % 3
    lm2.shutdown()


def test_shutdown_with_one_recovery_thread_closes_on_the_calling_thread(tmp_path, time, monkeypatch):
    from pykbroker.log.unified_log import UnifiedLog

    threads: set[str] = set()
    real_close = UnifiedLog.close
    monkeypatch.setattr(
        UnifiedLog, "close", lambda log: (threads.add(threading.current_thread().name), real_close(log))
    )
    lm = manager([tmp_path], time)
    lm.startup()
    for p in range(3):
        produce(lm.get_or_create_log("orders", p, uuid.uuid4() if p == 0 else None), 1)
    lm.shutdown()
    assert threads == {threading.current_thread().name}
