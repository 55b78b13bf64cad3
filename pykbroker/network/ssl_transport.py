"""SslTransportLayer: TLS under a KafkaChannel (Kafka's ``SslTransportLayer``).

Wraps a non-blocking ``ssl.SSLSocket`` (server side for listeners; client side, verifying
``server_hostname``, for this node's connections to other nodes) and presents the plain socket calls the channel uses
(``recv_into``, ``send``, ``fileno``, ``close``...): the handshake is driven from the first read (a
``do_handshake`` that wants more bytes or room is a would-block, ``BlockingIOError``, and the next read
event resumes it); TLS "want read/write" become ``BlockingIOError``; a TLS close or EOF reads as 0 bytes.
``recv_into`` keeps reading TLS records until the buffer is full or the socket is drained, so a short read
still means "nothing more until the next edge" for the edge-triggered selector. ``tls`` tells
``NetworkSend`` that zero-copy ``sendfile`` is impossible here: file regions are read into memory first,
as Kafka does for SSL. After the handshake ``peer_certificate`` holds the client's certificate (DER dict
of ``getpeercert``) when the listener asked for one.

A client-side transport does not wait for a read to start: the client's selector drives
:meth:`handshake` step by step (it answers which readiness it waits for) before the connection counts as
connected, as Kafka's ``SslTransportLayer.handshake`` under ``Selector.pollSelectionKeys``.

Threading: owned by the connection's Processor thread.
"""

from __future__ import annotations

import socket
import ssl


class TlsHandshakeError(ConnectionError):
    """The TLS handshake failed (bad or missing client certificate, protocol mismatch...)."""


class SslTransportLayer:
    tls = True

    def __init__(
        self, sock: socket.socket, context: ssl.SSLContext, server_side: bool = True, server_hostname: str | None = None
    ):
        self._raw = sock
        self.sock = context.wrap_socket(
            sock,
            server_side=server_side,
            do_handshake_on_connect=False,
            server_hostname=None if server_side else server_hostname,
        )
        self.handshake_complete = False
        self.peer_certificate: dict | None = None

    # -- plain socket surface ----------------------------------------------------------------
    def fileno(self) -> int:
        return self.sock.fileno()

    def getpeername(self):
        return self.sock.getpeername()

    def getsockname(self):
        return self.sock.getsockname()

    def setblocking(self, flag: bool) -> None:
        self.sock.setblocking(flag)

    def setsockopt(self, *args) -> None:
        self.sock.setsockopt(*args)

    def close(self) -> None:
        try:
            self.sock.close()
        finally:
            self._raw.close()

    # -- TLS ---------------------------------------------------------------------------------
    def _handshake(self) -> None:
        try:
            self.sock.do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise BlockingIOError("TLS handshake in progress") from None
        except ssl.SSLError as e:
            raise TlsHandshakeError(f"TLS handshake failed: {e.reason or e}") from None
        self.handshake_complete = True
        self.peer_certificate = self.sock.getpeercert() or None

    def handshake(self) -> str | None:
        """One step of the handshake: None once it is complete, else ``"read"`` or ``"write"`` (what the
        handshake waits for). Raises TlsHandshakeError (certificate not trusted, host name mismatch, reset)."""
        try:
            self.sock.do_handshake()
        except ssl.SSLWantReadError:
            return "read"
        except ssl.SSLWantWriteError:
            return "write"
        except ssl.SSLError as e:
            detail = getattr(e, "verify_message", None) or e.reason or e
            raise TlsHandshakeError(f"TLS handshake failed: {detail}") from None
        except OSError as e:
            raise TlsHandshakeError(f"TLS handshake failed: {e.strerror or e}") from None
        self.handshake_complete = True
        self.peer_certificate = self.sock.getpeercert() or None
        return None

    def recv_into(self, buffer, nbytes: int = 0) -> int:
        if not self.handshake_complete:
            self._handshake()
        view = memoryview(buffer)
        limit = nbytes or len(view)
        total = 0
        while total < limit:
            try:
                n = self.sock.recv_into(view[total:limit], limit - total)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                if total:
                    return total
                raise BlockingIOError("no TLS record available") from None
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return total
            except ssl.SSLError as e:
                raise ConnectionError(f"TLS error: {e.reason or e}") from None
            if n == 0:
                return total
            total += n
        return total

    def send(self, data) -> int:
        if not self.handshake_complete:
            self._handshake()
        try:
            return self.sock.send(data)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise BlockingIOError("TLS send would block") from None
        except ssl.SSLError as e:
            raise ConnectionError(f"TLS error: {e.reason or e}") from None
