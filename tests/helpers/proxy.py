"""A TCP proxy on 127.0.0.1 that can cut the network between its clients and one port.

Loopback never loses a segment: a process stopped with SIGSTOP answers everything queued for it once it
resumes. A network partition loses what is sent while it lasts, and the connection is not closed -- the
sender learns nothing until a timeout. ``NetworkCutProxy(target_port)`` stands in for that network:
it forwards bytes both ways until :meth:`cut`, after which every connection through it, the open ones
and the new ones, is a black hole (what arrives is discarded; nothing is closed). :meth:`heal` lets new
connections through again; those cut stay dead, as a connection whose request was lost stays waiting
for an answer that never comes. Point a broker's ``advertised.listeners`` at :attr:`port` so other
brokers reach it through the proxy.

Threading: one daemon thread runs a selector over the listening socket and every connection;
``cut``/``heal``/``close`` may be called from any thread.
"""

from __future__ import annotations

import selectors
import socket
import threading


class _Link:
    __slots__ = ("dead", "peer", "sock")

    def __init__(self, sock: socket.socket, dead: bool):
        self.sock = sock
        self.peer: _Link | None = None
        self.dead = dead


class NetworkCutProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1"):
        self.target = (target_host, target_port)
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.setblocking(False)
        self.port: int = self._server.getsockname()[1]
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._server, selectors.EVENT_READ, None)
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._lock = threading.Lock()
        self._links: list[_Link] = []
        self._cut = False
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"proxy-{self.port}", daemon=True)
        self._thread.start()

    def cut(self) -> None:
        """From now on nothing passes: open connections and new ones are black holes."""
        with self._lock:
            self._cut = True
            for link in self._links:
                link.dead = True

    def heal(self) -> None:
        """New connections pass again; the ones cut stay dead."""
        with self._lock:
            self._cut = False

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._wake_w.send(b"x")
        self._thread.join(5)

    # -- the proxy's thread -------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while True:
                with self._lock:
                    if self._closed:
                        return
                for key, _ in self._selector.select(0.5):
                    if key.data == "wake":
                        self._wake_r.recv(64)
                    elif key.data is None:
                        self._accept()
                    else:
                        self._pump(key.data)
        finally:
            for link in list(self._links):
                link.sock.close()
            self._selector.close()
            self._server.close()
            self._wake_r.close()
            self._wake_w.close()

    def _accept(self) -> None:
        try:
            client, _ = self._server.accept()
        except BlockingIOError:
            return
        with self._lock:
            cut = self._cut
        downstream = _Link(client, dead=cut)
        links = [downstream]
        if not cut:
            upstream_sock = socket.create_connection(self.target, timeout=5)
            upstream = _Link(upstream_sock, dead=False)
            downstream.peer, upstream.peer = upstream, downstream
            links.append(upstream)
        with self._lock:
            for link in links:
                link.sock.setblocking(True)
                self._links.append(link)
                self._selector.register(link.sock, selectors.EVENT_READ, link)

    def _pump(self, link: _Link) -> None:
        try:
            data = link.sock.recv(1 << 16)
        except OSError:
            data = b""
        with self._lock:
            dead = link.dead
        if dead:  # lost in the network; nothing is closed either
            if not data:
                self._selector.unregister(link.sock)  # closed on its side: nothing more to read
            return
        if not data:
            self._drop(link)
            return
        assert link.peer is not None
        try:
            link.peer.sock.sendall(data)
        except OSError:
            self._drop(link)

    def _drop(self, link: _Link) -> None:
        for end in (link, link.peer):
            if end is None:
                continue
            with self._lock:
                if end in self._links:
                    self._links.remove(end)
            try:
                self._selector.unregister(end.sock)
            except (KeyError, ValueError):
                pass
            end.sock.close()
