"""TCP facts read off a socket for tests (Linux)."""

from __future__ import annotations

import socket
import struct

#: ``struct tcp_info`` up to and including ``tcpi_total_retrans`` (a u32 at byte 100)
_TCP_INFO_BYTES = 104
_TOTAL_RETRANS_OFFSET = 100


def total_retransmissions(sock: socket.socket) -> int:
    """Segments ``sock`` has retransmitted since it was opened (``tcp_info.tcpi_total_retrans``; Linux only:
    callers skip where ``socket.TCP_INFO`` is missing)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_BYTES)
    return struct.unpack_from("I", info, _TOTAL_RETRANS_OFFSET)[0]
