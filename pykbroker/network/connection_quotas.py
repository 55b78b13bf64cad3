"""ConnectionQuotas: per-IP and broker-wide connection limits.

Mirrors ``kafka.network.ConnectionQuotas`` (connection counts; the creation-rate quotas are not
implemented). ``inc`` runs on an Acceptor thread: it waits (bounded, interruptible) while the broker
is at ``max.connections`` for a non-protected listener, then counts the connection and raises
:class:`TooManyConnectionsError` if the IP was already at its limit (``max.connections.per.ip`` or a
``max.connections.per.ip.overrides`` entry); the caller closes the socket, which calls ``dec``.
All state is guarded by one condition; thread-safe.
"""

from __future__ import annotations

import threading
from collections import defaultdict


class TooManyConnectionsError(Exception):
    def __init__(self, ip: str, count: int):
        super().__init__(f"Too many connections from {ip} (maximum = {count})")
        self.ip, self.count = ip, count


class ConnectionQuotas:
    def __init__(
        self,
        max_connections_per_ip: int,
        overrides: dict[str, int],
        max_connections: int,
        protected_listener: str | None = None,
    ):
        self.default_max_per_ip = max_connections_per_ip
        self.overrides = dict(overrides)
        self.max_connections = max_connections
        self.protected_listener = protected_listener
        self._cond = threading.Condition()
        self.counts: dict[str, int] = defaultdict(int)
        self.listener_counts: dict[str, int] = defaultdict(int)
        self.total = 0

    def max_for_ip(self, ip: str) -> int:
        return self.overrides.get(ip, self.default_max_per_ip)

    def inc(self, listener: str, ip: str, should_run=lambda: True) -> None:
        with self._cond:
            if listener != self.protected_listener:
                while self.total >= self.max_connections and should_run():
                    self._cond.wait(0.5)
            previous = self.counts[ip]
            self.counts[ip] = previous + 1
            self.listener_counts[listener] += 1
            self.total += 1
            limit = self.max_for_ip(ip)
            if previous >= limit:
                raise TooManyConnectionsError(ip, limit)

    def dec(self, listener: str, ip: str) -> None:
        with self._cond:
            n = self.counts.get(ip, 0)
            if n <= 0:
                return
            if n == 1:
                del self.counts[ip]
            else:
                self.counts[ip] = n - 1
            self.listener_counts[listener] -= 1
            self.total -= 1
            self._cond.notify_all()

    def get(self, ip: str) -> int:
        with self._cond:
            return self.counts.get(ip, 0)

    def max_connections_exceeded(self, listener: str) -> bool:
        return self.total > self.max_connections and listener != self.protected_listener

    def update(
        self,
        max_connections_per_ip: int | None = None,
        overrides: dict[str, int] | None = None,
        max_connections: int | None = None,
    ) -> None:
        with self._cond:
            if max_connections_per_ip is not None:
                self.default_max_per_ip = max_connections_per_ip
            if overrides is not None:
                self.overrides = dict(overrides)
            if max_connections is not None:
                self.max_connections = max_connections
            self._cond.notify_all()
