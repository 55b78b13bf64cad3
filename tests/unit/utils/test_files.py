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


def test_deferred_sync_writes_at_once_and_fsyncs_every_file_and_directory_at_the_flush(tmp_path, monkeypatch):
    """Issue 31: inside deferred_sync a synchronous atomic_write is visible at once but fsynced only by the
    batch's flush (in parallel, on the deferred-fsync threads), files first, then their directories."""
    synced = _fsynced(monkeypatch)
    dirs = [tmp_path / f"p{i}" for i in range(5)]
    for d in dirs:
        d.mkdir()
    with files.deferred_sync() as batch:
        for d in dirs:
            atomic_write(str(d / "leader-epoch-checkpoint"), b"0\n1\n0 0\n")
            atomic_write(str(d / "leader-epoch-checkpoint"), b"0\n1\n1 5\n")  # the same file twice: one fsync
        with files.deferred_sync() as inner:  # a nested block shares the batch
            atomic_write(str(dirs[0] / "partition.metadata"), b"version: 0\n")
        assert inner is batch and len(batch) == 6
        assert synced == []
        assert all((d / "leader-epoch-checkpoint").read_bytes() == b"0\n1\n1 5\n" for d in dirs)
        assert batch.flush() == []
        assert len(batch) == 0
    checkpoints = [str(d / "leader-epoch-checkpoint") for d in dirs]
    assert sorted(synced[:6]) == sorted([*checkpoints, str(dirs[0] / "partition.metadata")])
    assert sorted(synced[6:]) == sorted(str(d) for d in dirs)
    atomic_write(str(tmp_path / "after"), b"x")  # outside the block: synchronous again
    assert synced[-2:] == [str(tmp_path / "after.tmp"), str(tmp_path)]


def test_deferred_sync_flush_reports_a_failed_fsync(tmp_path, monkeypatch):
    def failing(path):
        raise OSError(5, "Input/output error", path)

    monkeypatch.setattr(files, "fsync_file", failing)
    with files.deferred_sync() as batch:
        atomic_write(str(tmp_path / "a"), b"1")
        atomic_write(str(tmp_path / "b"), b"2")
        failed = batch.flush()
    assert sorted((path, e.errno) for path, e in failed) == [(str(tmp_path / "a"), 5), (str(tmp_path / "b"), 5)]
