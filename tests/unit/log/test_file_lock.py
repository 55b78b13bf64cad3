"""The exclusive ``.lock`` of data directories (Kafka's FileLock / LogManager.lockLogDirs)."""

import subprocess
import sys

import pytest

from pykbroker.log.file_lock import FileLock
from pykbroker.log.log_manager import LogDirLockError, lock_log_dirs


def test_lock_is_exclusive_within_the_process_and_released(tmp_path):
    first = FileLock(str(tmp_path / ".lock"))
    assert first.try_lock()
    second = FileLock(str(tmp_path / ".lock"))
    assert not second.try_lock()
    assert first.locked  # refusing the second did not drop the first (POSIX locks are per process)
    first.release()
    assert second.try_lock()
    second.release()


def test_lock_log_dirs_names_the_dir_in_use_and_keeps_nothing_on_failure(tmp_path):
    a, b = tmp_path / "a", tmp_path / "meta"
    held = lock_log_dirs([str(b)])
    with pytest.raises(LogDirLockError) as e:
        lock_log_dirs([str(a), str(b)])
    assert str(e.value) == (
        f"Failed to acquire lock on file .lock in {b}. "
        "A Kafka instance in another process or thread is using this directory."
    )
    again = lock_log_dirs([str(a)])  # the lock on a taken before the failure was released
    for lock in held + again:
        lock.release()


def test_lock_is_exclusive_across_processes(tmp_path):
    held = lock_log_dirs([str(tmp_path)])
    code = (
        "import sys; from pykbroker.log.log_manager import lock_log_dirs, LogDirLockError\n"
        f"try: lock_log_dirs([{str(tmp_path)!r}])\nexcept LogDirLockError: sys.exit(3)\n"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=30).returncode == 3
    held[0].release()
    assert subprocess.run([sys.executable, "-c", code], timeout=30).returncode == 0
