"""Shared read-write memory mappings of index files that keep no file descriptor open, and the
allocation of a file's blocks before they are written through a mapping.

Java's ``MappedByteBuffer`` outlives the channel it was mapped from, so Kafka's mmap'd indexes cost
no file descriptor: a partition holds one descriptor per segment (its ``.log``). CPython's
``mmap.mmap`` keeps a duplicate of the descriptor until it is closed (``trackfd=False`` only exists
from Python 3.13), which would make every mapped index cost one more descriptor. On Linux the mapping
is therefore made with libc's ``mmap`` through ctypes and the descriptor is closed right after
mapping, as the JVM does; elsewhere ``mmap.mmap`` is used (with ``trackfd=False`` when available).

A write through a shared mapping into a block the filesystem could not allocate (a full disk, a
sparse file) is a SIGBUS that kills the process. :func:`allocate` reserves the blocks of a range with
``posix_fallocate`` (or by writing zeros where the filesystem does not support it), so the failure
is an ``OSError`` (ENOSPC) raised before anything is written through the mapping.

Safety: a :class:`MappedBuffer`'s ``buf`` must not be used after ``close`` (the memory is unmapped:
a segfault, not an exception). Its owner (AbstractIndex) serialises every access and the close under
one lock and drops its reference to ``buf`` when closing.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import sys
from typing import Any

_ZEROS = bytes(64 * 1024)
_UNSUPPORTED = (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


def allocate(fd: int, offset: int, length: int) -> None:
    """Make sure the blocks of ``[offset, offset + length)`` of ``fd`` are allocated (the file grows if
    needed). Raises OSError (ENOSPC on a full disk). Falls back to writing zeros when
    ``posix_fallocate`` is not supported: only use it on a range that holds no data."""
    if length <= 0:
        return
    fallocate = getattr(os, "posix_fallocate", None)
    if fallocate is not None:
        try:
            fallocate(fd, offset, length)
            return
        except OSError as e:
            if e.errno not in _UNSUPPORTED:
                raise
    position, end = offset, offset + length
    while position < end:
        position += os.pwrite(fd, _ZEROS[: min(len(_ZEROS), end - position)], position)


class MappedBuffer:
    """``length`` bytes of a file mapped shared and read-write. ``buf`` supports the buffer protocol
    (``struct.pack_into``/``unpack_from``) and slicing (to bytes)."""

    __slots__ = ("buf", "length", "_addr", "_mmap", "__weakref__")

    def __init__(self, fd: int, length: int):
        self.length = length
        self._addr: int | None = None
        self._mmap: mmap.mmap | None = None
        self.buf: Any = None  # a writable buffer over the mapping (ctypes array or mmap)
        if _libc is not None:
            addr = _libc.mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
            if addr is None or addr == _MAP_FAILED:
                err = ctypes.get_errno()
                raise OSError(err, f"mmap failed: {os.strerror(err)}")
            self._addr = addr
            self.buf = (ctypes.c_char * length).from_address(addr)
            self.buf._region = self  # a live buf keeps the mapping (unmapped by __del__) alive
        else:
            kwargs = {"trackfd": False} if sys.version_info >= (3, 13) else {}
            self._mmap = self.buf = mmap.mmap(fd, length, **kwargs)

    def flush(self) -> None:
        """Write the dirty pages to the file (msync)."""
        if self._addr is not None:
            if _libc.msync(self._addr, self.length, _MS_SYNC) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"msync failed: {os.strerror(err)}")
        elif self._mmap is not None:
            self._mmap.flush()

    def close(self) -> None:
        """Unmap (idempotent). ``buf`` must not be used afterwards."""
        addr, self._addr = self._addr, None
        if addr is not None:
            self.buf = None
            _libc.munmap(addr, self.length)
        elif self._mmap is not None:
            self._mmap.close()
            self._mmap = None

    def __del__(self) -> None:
        addr = getattr(self, "_addr", None)
        if addr is not None and _libc is not None:
            _libc.munmap(addr, self.length)


def _load_libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        libc.munmap.restype = ctypes.c_int
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.msync.restype = ctypes.c_int
        libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        return libc
    except (OSError, AttributeError):
        return None


_libc = _load_libc()
_MAP_FAILED = ctypes.c_void_p(-1).value
_MS_SYNC = 4  # Linux
