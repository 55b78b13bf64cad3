import os

import pytest

from pykbroker.utils import files
from pykbroker.utils.files import atomic_write


def _fsynced(monkeypatch) -> list[str]:
    """Record what each os.fsync call syncs: the fd's path (a file, or a directory)."""
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


def test_replaces_content_and_fsyncs_file_then_directory(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint"
    path.write_bytes(b"old content, longer than the new one")
    synced = _fsynced(monkeypatch)
    atomic_write(str(path), b"new")
    assert path.read_bytes() == b"new"
    assert sorted(os.listdir(tmp_path)) == ["checkpoint"]  # no temp file left
    # The temp file is fsynced before the rename, the directory after it.
    assert synced == [str(tmp_path / "checkpoint.tmp"), str(tmp_path)]


def test_without_sync_nothing_is_fsynced(tmp_path, monkeypatch):
    synced = _fsynced(monkeypatch)
    atomic_write(str(tmp_path / "f"), b"x", sync=False)
    assert (tmp_path / "f").read_bytes() == b"x" and synced == []


def test_failure_before_rename_keeps_old_content_and_removes_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "quorum-state"
    path.write_bytes(b"old")

    def failing_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="No space left"):
        atomic_write(str(path), b"new")
    assert path.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["quorum-state"]


def test_failed_rename_removes_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "meta.properties"
    path.write_bytes(b"old")

    def failing_replace(src, dst):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(files.os, "replace", failing_replace)
    with pytest.raises(OSError, match="Input/output"):
        atomic_write(str(path), b"new")
    assert path.read_bytes() == b"old" and sorted(os.listdir(tmp_path)) == ["meta.properties"]
