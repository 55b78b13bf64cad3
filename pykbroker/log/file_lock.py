"""An exclusive lock on a file, held by this process until released (the ``.lock`` of a data directory).

Mirrors Kafka's ``FileLock`` (a ``FileChannel.tryLock``): an exclusive POSIX record lock
(``fcntl.lockf``, what the JVM uses on Linux) on the whole file, taken without blocking. POSIX locks
belong to the process, so a second lock on the same file from this process would silently succeed; as
the JVM does (``OverlappingFileLockException``), a process-wide registry refuses it. The file itself is
never deleted: another process may be waiting on it.

Threading: ``_registry_lock`` guards the registry; one FileLock object is used by one thread at a time.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading

_registry_lock = threading.Lock()
_held: set[str] = set()  # real paths of the files locked by this process


class FileLock:
    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        self._fd: int | None = None
        self._key: str | None = None

    @property
    def locked(self) -> bool:
        return self._fd is not None

    def try_lock(self) -> bool:
        """Create the file if needed and lock it; False if another process (or another FileLock of this
        process) holds it. Raises OSError if the file cannot be opened."""
        if self._fd is not None:
            return True
        key = os.path.realpath(self.path)
        with _registry_lock:
            # Checked before opening: closing any descriptor of a file drops this process's POSIX locks
            # on it, so a file we already lock must not even be opened again.
            if key in _held:
                return False
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.EACCES, errno.EAGAIN):
                    return False
                raise
            _held.add(key)
        self._fd, self._key = fd, key
        return True

    def release(self) -> None:
        """Unlock and close (idempotent)."""
        with _registry_lock:
            fd, self._fd = self._fd, None
            if fd is None:
                return
            try:
                fcntl.lockf(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
                _held.discard(self._key)

    def __repr__(self) -> str:
        return f"FileLock({self.path}, locked={self.locked})"
