"""Draining a listening socket's accept queue in one go: the Acceptor's batch ``accept``.

Why: ``socket.accept`` releases the interpreter lock around every ``accept4`` call; when the broker's
other threads are busy, getting the lock back costs up to one switch interval (5 ms), so an Acceptor
accepting one connection per lock round trip manages only a few hundred connections a second and a
burst overflows the ``socket.listen.backlog.size`` accept queue (the kernel then drops SYNs and
clients retry after 1, 3, 7 ... s). On Linux :func:`accept_batch` calls ``accept4`` through ctypes
*without* releasing the lock: the listening socket is non-blocking, so each call returns at once, and
a whole queue of connections is taken in one lock hold. Elsewhere it falls back to ``socket.accept``.

Accepted sockets are non-blocking, close-on-exec, and carry the peer address parsed from the kernel's
``sockaddr`` (no ``getpeername`` call).
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import struct
from collections.abc import Callable

SOCK_NONBLOCK = getattr(socket, "SOCK_NONBLOCK", 0)
SOCK_CLOEXEC = getattr(socket, "SOCK_CLOEXEC", 0)
_SOCKADDR_STORAGE_BYTES = 128
_RETRY = (errno.EAGAIN, errno.EWOULDBLOCK)
#: accept4 errors that concern only the connection being accepted (Linux accept(2)): skip it, go on.
_CONNECTION_ERRORS = (errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.EINTR)

_accept4: Callable[..., int] | None
try:
    _libc = ctypes.PyDLL(None, use_errno=True)  # PyDLL: the interpreter lock is held during the call
    _fn = _libc.accept4
    _fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32), ctypes.c_int]
    _fn.restype = ctypes.c_int
    _accept4 = _fn
except (AttributeError, OSError):  # not Linux/glibc
    _accept4 = None


def _parse_sockaddr(buf: bytes) -> tuple[int, tuple]:
    family = ctypes.c_ushort.from_buffer_copy(buf[:2]).value
    port = struct.unpack_from(">H", buf, 2)[0]
    if family == socket.AF_INET:
        return family, (socket.inet_ntop(socket.AF_INET, buf[4:8]), port)
    if family == socket.AF_INET6:
        return family, (socket.inet_ntop(socket.AF_INET6, buf[8:24]), port, 0, 0)
    return family, ("", 0)


def accept_batch(server_socket: socket.socket, max_count: int) -> list[tuple[socket.socket, tuple]]:
    """Accept up to ``max_count`` pending connections from the non-blocking ``server_socket``.

    Returns ``[(socket, peer_address)]`` (possibly empty). Errors that concern one connection are
    skipped; any other ``OSError`` (e.g. EMFILE: the process is out of file descriptors) is raised
    after the connections accepted so far are handed back through ``OSError.accepted``.
    """
    if _accept4 is None:
        return _accept_batch_portable(server_socket, max_count)
    accepted: list[tuple[socket.socket, tuple]] = []
    listen_fd = server_socket.fileno()
    buf = ctypes.create_string_buffer(_SOCKADDR_STORAGE_BYTES)
    length = ctypes.c_uint32()
    flags = SOCK_NONBLOCK | SOCK_CLOEXEC
    while len(accepted) < max_count:
        length.value = _SOCKADDR_STORAGE_BYTES
        fd = _accept4(listen_fd, buf, ctypes.byref(length), flags)
        if fd < 0:
            err = ctypes.get_errno()
            if err in _RETRY:
                break
            if err in _CONNECTION_ERRORS:
                continue
            exc = OSError(err, f"accept failed: {errno.errorcode.get(err, err)}")
            exc.accepted = accepted  # type: ignore[attr-defined]
            raise exc
        family, address = _parse_sockaddr(buf.raw[: length.value])
        try:
            sock = socket.socket(family, socket.SOCK_STREAM, 0, fileno=fd)
        except OSError:
            os.close(fd)
            continue
        accepted.append((sock, address))
    return accepted


def _accept_batch_portable(server_socket: socket.socket, max_count: int) -> list[tuple[socket.socket, tuple]]:
    accepted: list[tuple[socket.socket, tuple]] = []
    while len(accepted) < max_count:
        try:
            sock, address = server_socket.accept()
        except (BlockingIOError, InterruptedError):
            break
        except OSError as e:
            e.accepted = accepted  # type: ignore[attr-defined]
            raise
        sock.setblocking(False)
        accepted.append((sock, address))
    return accepted
