"""I/O errors in the log layer's scheduled tasks (the ``flush-log`` task of a roll, the checkpoint tasks,
the ``delete-file`` task of retention, the cleaner) go the way of an append's (Kafka's
``maybeHandleIOException`` -> ``LogDirFailureChannel.maybeAddOfflineLogDir``): the directory is reported
once, with one ERROR line, and the scheduler logs no traceback -- also when the task runs after another
thread has already reported the directory (the race behind a flaky full-disk integration test)."""

from __future__ import annotations

import errno
import io
import os

import pytest

from pykbroker.log.checkpoints import RECOVERY_POINT_CHECKPOINT_FILE
from pykbroker.log.log_cleaner import LogCleaner
from pykbroker.log.log_manager import LogManager
from pykbroker.protocol.errors import KafkaStorageError
from pykbroker.utils import logging as plog
from pykbroker.utils.scheduler import MockScheduler
from pykbroker.utils.time import MockTime
from tests.unit.log.log_test_utils import assign_offsets, inject_enospc, make_batch

SIZE = 161  # make_batch(0, 2, 100)


@pytest.fixture
def output():
    """Everything the broker's loggers write, as text."""
    saved = plog.saved_config()
    console = io.StringIO()
    plog.configure("info", stream=console)
    yield console
    plog.restore(saved)


def _manager(dirs, **extra):
    time = MockTime(current_ms=50_000_000)
    props = {"log.segment.bytes": str(4 * SIZE), "log.index.interval.bytes": "1", **extra}
    scheduler = MockScheduler(time)
    lm = LogManager.from_broker_config([str(d) for d in dirs], props, scheduler, time)
    lm.startup()
    return lm, scheduler, time


def _append(log):
    return log.append_as_leader(make_batch(0, 2, 100), 0, assign_offsets())


def _roll_pending_flush(lm, scheduler, tp=("t", 0)):
    """A log whose active segment just rolled: its ``flush-log`` task is due, not run yet."""
    log = lm.get_or_create_log(*tp)
    for _ in range(5):  # the fifth append rolls
        _append(log)
    assert log.num_segments == 2
    assert [t.name for t in scheduler.pending() if t.name == "flush-log"] == ["flush-log"]
    return log


def _fail_fsync_under(monkeypatch, directory, code=errno.ENOSPC) -> None:
    root = os.path.realpath(str(directory)) + os.sep
    real = os.fsync

    def fsync(fd):
        try:
            inside = os.readlink(f"/proc/self/fd/{fd}").startswith(root)
        except OSError:
            inside = False
        if inside:
            raise OSError(code, os.strerror(code))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def _no_traceback(text: str) -> None:
    assert "Traceback" not in text and "Uncaught exception in scheduled task" not in text, text


def _error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if " ERROR " in line]


def test_flush_log_task_hitting_a_full_disk_takes_the_dir_offline_with_one_error_line(tmp_path, monkeypatch, output):
    lm, scheduler, _ = _manager([tmp_path / "d"])
    _roll_pending_flush(lm, scheduler)
    _fail_fsync_under(monkeypatch, tmp_path / "d")
    scheduler.tick()
    channel = lm.log_dir_failure_channel
    assert channel.offline_log_dirs() == [str(tmp_path / "d")]
    text = output.getvalue()
    _no_traceback(text)
    errors = _error_lines(text)
    assert len(errors) == 1 and "[LogDirFailureChannel]" in errors[0] and "No space left" in errors[0], errors


def test_flush_log_task_running_after_an_append_took_the_dir_offline_logs_no_traceback(tmp_path, monkeypatch, output):
    """The race of a full disk under load: a roll schedules ``flush-log``, the next append fails with
    ENOSPC and reports the directory, then the task runs: it stops there, one line, no traceback."""
    lm, scheduler, _ = _manager([tmp_path / "d"])
    log = _roll_pending_flush(lm, scheduler)
    inject_enospc(monkeypatch, tmp_path / "d")
    with pytest.raises(KafkaStorageError):
        _append(log)
    scheduler.tick()
    text = output.getvalue()
    _no_traceback(text)
    assert len(_error_lines(text)) == 1, text  # the append's report, once
    assert "Scheduled task flush-log skipped" in text and "already offline" in text, text


def test_checkpoint_task_on_a_failing_dir_still_checkpoints_the_other_dirs(tmp_path, monkeypatch, output):
    full, ok = tmp_path / "full", tmp_path / "ok"
    lm, scheduler, time = _manager([full, ok], **{"log.flush.offset.checkpoint.interval.ms": "1000"})
    for partition in (0, 1):
        _append(lm.get_or_create_log("t", partition))
    assert (lm.log_dir_of("t", 0), lm.log_dir_of("t", 1)) == (str(full), str(ok))
    lm.get_log("t", 1).flush()
    inject_enospc(monkeypatch, full)
    time.sleep(lm.initial_task_delay_ms + 1000)
    scheduler.tick()
    assert lm.log_dir_failure_channel.offline_log_dirs() == [str(full)]
    assert (ok / RECOVERY_POINT_CHECKPOINT_FILE).read_text().splitlines()[2:] == ["t 1 2"]  # written all the same
    text = output.getvalue()
    _no_traceback(text)
    assert len(_error_lines(text)) == 1, text


def test_segment_file_deletion_failing_in_its_task_takes_the_dir_offline(tmp_path, monkeypatch, output):
    lm, scheduler, time = _manager([tmp_path / "d"], **{"log.retention.bytes": str(4 * SIZE)})
    log = _roll_pending_flush(lm, scheduler)
    for _ in range(4):
        _append(log)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 1  # the first segment goes: renamed .deleted, a delete-file task
    root = os.path.realpath(str(tmp_path / "d")) + os.sep
    real = os.unlink

    def unlink(path, *args, **kwargs):
        if os.path.realpath(str(path)).startswith(root):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    time.sleep(log.config.file_delete_delay_ms)
    scheduler.tick()
    assert lm.log_dir_failure_channel.offline_log_dirs() == [str(tmp_path / "d")]
    text = output.getvalue()
    _no_traceback(text)
    errors = _error_lines(text)
    assert len(errors) == 1 and "deleting segment files" in errors[0], errors


def test_cleaner_io_error_takes_the_dir_offline_without_a_traceback(tmp_path, monkeypatch, output):
    lm, scheduler, _ = _manager([tmp_path / "d"], **{"log.cleanup.policy": "compact"})
    log = _roll_pending_flush(lm, scheduler)
    for _ in range(4):
        _append(log)
    log.update_high_watermark(log.log_end_offset)

    def broken_clean(_log):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    cleaner = LogCleaner(lm, lm._time, backoff_ms=1000)
    monkeypatch.setattr(cleaner, "clean", broken_clean)
    cleaner.clean_all()
    assert lm.log_dir_failure_channel.offline_log_dirs() == [str(tmp_path / "d")]
    text = output.getvalue()
    _no_traceback(text)
    assert len(_error_lines(text)) == 1, text
