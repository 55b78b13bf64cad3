"""File helpers: the one atomic file write, and fsync of files and directories.

:func:`atomic_write` is Kafka's write-temp-then-rename (``Utils.atomicMoveWithFallback`` after writing and
flushing ``<file>.tmp``): the data goes to ``<path>.tmp``, which is fsynced and renamed over ``path``, and then the
directory is fsynced so the rename itself is durable. A crash leaves either the old or the new content, never a mix;
a failure before the rename removes the temp file and leaves ``path`` untouched.
"""

from __future__ import annotations

import os


def fsync_dir(path: str) -> None:
    """fsync a directory so that renames and creations in it are durable (best effort: a directory that cannot
    be opened or fsynced, as on some filesystems, is skipped)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_file(path: str) -> None:
    """fsync ``path`` if it exists."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes, sync: bool = True) -> None:
    """Replace ``path``'s content with ``data`` atomically: write ``<path>.tmp``, fsync it (when ``sync``), rename
    it over ``path``, fsync the directory (when ``sync``). On any failure before the rename the temp file is
    removed and the error propagates."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if sync:
        fsync_dir(os.path.dirname(os.path.abspath(path)))
