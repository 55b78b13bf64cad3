"""ConnectionQuotas: per-IP and broker-wide connection limits and connection creation rates (KIP-612).

Mirrors ``kafka.network.ConnectionQuotas``. ``inc`` runs on an Acceptor thread, for each accepted socket:

1. **creation rate of the broker and the listener** (``max.connection.creation.rate``,
   ``listener.name.<l>.max.connection.creation.rate``, the listener's falling back to the broker's as
   Kafka's ``valuesWithPrefixOverride``): the connection is recorded in the listener's rate and, unless the
   listener is the protected inter-broker listener (several listeners, as Kafka), in the broker's; when a
   rate now exceeds its limit the Acceptor waits Kafka's throttle time ``(rate - limit) / limit * window``
   ms (at most ``quota.window.size.seconds``) before going on, so connections queue in the listen backlog;
   then it waits (bounded, interruptible) while the broker is at ``max.connections`` (non-protected listener);
2. **creation rate of the IP** (``connection_creation_rate`` of the ``ip`` client-quota entity, a specific IP
   before the default IP; off when neither is set): over the limit, the connection is taken back from the
   IP's, listener's and broker's rates and :class:`ConnectionThrottledError` is raised; the Acceptor closes
   the socket once the throttle time is up (Kafka's delayed close: the client is not told sooner to retry);
3. **counts**: counted, then :class:`TooManyConnectionsError` if the IP was already at its limit
   (``max.connections.per.ip`` or a ``max.connections.per.ip.overrides`` entry); the caller closes the
   socket, which calls ``dec``.

Rates are :class:`~pykbroker.server.quotas.sampled_rate.SampledRate` of ``quota.window.num`` windows of
``quota.window.size.seconds`` (Kafka's ``Rate`` with a ``Quota`` bound, per second). Metrics (Kafka's
``socket-server-metrics`` group): ``broker-connection-accept-rate``, ``connection-accept-rate`` per
``listener`` and per ``ip`` (IPs with a rate quota), ``connection-accept-throttle-time`` and
``ip-connection-accept-throttle-time`` per listener (average of the non-zero throttle times, ms, over two
30 s windows as Kafka's ``Avg``; NaN when none).

All state is guarded by one condition; thread-safe. The limits are updated by the dynamic broker config
(broker and listener rates) and by the metadata publisher (IP rates), applied to the next connection.
"""

from __future__ import annotations

import ipaddress
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping

from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import SYSTEM, Time
from pykbroker.utils.windowed_stats import SampledAvg, SampledRate

INT_MAX = 2**31 - 1
#: Kafka's QuotaConfig.IP_CONNECTION_RATE_DEFAULT: no IP rate quota
IP_CONNECTION_RATE_DEFAULT = INT_MAX
IP_CONNECTION_RATE = "connection_creation_rate"
_METRICS_GROUP = "kafka.server:type=socket-server-metrics"
_MAX_IP_RATES = 10_000  # IP rate sensors kept (Kafka expires an IP's after an hour idle)
_log = get_logger("ConnectionQuotas")


class TooManyConnectionsError(Exception):
    def __init__(self, ip: str, count: int):
        super().__init__(f"Too many connections from {ip} (maximum = {count})")
        self.ip, self.count = ip, count


class ConnectionThrottledError(Exception):
    """The IP is over its ``connection_creation_rate``: close the socket at ``start_ms + throttle_ms`` (Kafka's
    ``ConnectionThrottledException``)."""

    def __init__(self, ip: str, start_ms: int, throttle_ms: int):
        super().__init__(f"{ip} throttled for {throttle_ms} ms")
        self.ip, self.start_ms, self.throttle_ms = ip, start_ms, throttle_ms


def normalize_ip(name: str) -> str | None:
    """The address as the Acceptor sees peers (``inet_ntop`` form), None if ``name`` is not an IP."""
    try:
        return ipaddress.ip_address(name).compressed
    except ValueError:
        return None


class _RateQuota:
    """One connection-rate sensor with its limit (connections per second)."""

    __slots__ = ("rate", "limit", "last_ms")

    def __init__(self, samples: int, window_ms: int, now_ms: int, limit: float):
        self.rate = SampledRate(samples, window_ms, now_ms)
        self.limit = limit
        self.last_ms = now_ms

    def record_and_get_throttle_ms(self, now_ms: int, max_throttle_ms: int) -> int:
        """Record one connection; Kafka's bounded throttle time when the rate now exceeds the limit, else 0."""
        self.rate.record(1.0, now_ms)
        self.last_ms = now_ms
        if self.limit >= INT_MAX:
            return 0
        measured = self.rate.measure(now_ms)
        if measured <= self.limit:
            return 0
        if self.limit <= 0:
            return max_throttle_ms
        return int(min(round((measured - self.limit) / self.limit * self.rate.window_size_ms(now_ms)), max_throttle_ms))


class ConnectionQuotas:
    def __init__(
        self,
        max_connections_per_ip: int,
        overrides: dict[str, int],
        max_connections: int,
        protected_listener: str | None = None,
        *,
        max_connection_creation_rate: int = INT_MAX,
        listener_connection_creation_rates: Mapping[str, int] | None = None,
        listeners: Iterable[str] = (),
        quota_window_num: int = 11,
        quota_window_size_seconds: int = 1,
        metrics=None,
        time: Time = SYSTEM,
    ):
        """``listeners``: the listener names served (each gets its rate and metrics);
        ``listener_connection_creation_rates``: listener -> its own ``max.connection.creation.rate``."""
        self.default_max_per_ip = max_connections_per_ip
        self.overrides = dict(overrides)
        self.max_connections = max_connections
        self.protected_listener = protected_listener
        self.time = time
        self.samples = quota_window_num
        self.window_ms = quota_window_size_seconds * 1000
        self.max_throttle_ms = self.window_ms
        self._cond = threading.Condition()
        self.counts: dict[str, int] = defaultdict(int)
        self.listener_counts: dict[str, int] = defaultdict(int)
        self.total = 0
        now = time.milliseconds()
        self.broker_rate = _RateQuota(self.samples, self.window_ms, now, max_connection_creation_rate)
        self.listener_rates: dict[str, _RateQuota] = {}
        #: listener -> (broker/listener throttle times, IP throttle times), ms
        self.throttle_times: dict[str, tuple[SampledAvg, SampledAvg]] = {}
        self.default_ip_rate = IP_CONNECTION_RATE_DEFAULT
        self.ip_rate_overrides: dict[str, int] = {}
        self.ip_rates: dict[str, _RateQuota] = {}
        self._metrics = metrics
        rates = dict(listener_connection_creation_rates or {})
        for listener in listeners:
            self._add_listener(listener, rates.get(listener, max_connection_creation_rate), now)
        if metrics is not None:
            metrics.gauge(
                f"{_METRICS_GROUP},name=broker-connection-accept-rate", lambda: self._measure(self.broker_rate)
            )
            metrics.gauge_family(f"{_METRICS_GROUP},name=connection-accept-rate", ("ip",), self._ip_rate_values)

    def _add_listener(self, listener: str, limit: int, now_ms: int) -> None:
        quota = self.listener_rates[listener] = _RateQuota(self.samples, self.window_ms, now_ms, limit)
        avgs = self.throttle_times[listener] = (SampledAvg(2, 30_000, now_ms), SampledAvg(2, 30_000, now_ms))
        if self._metrics is not None:
            tag = f"listener={listener}"
            self._metrics.gauge(f"{_METRICS_GROUP},name=connection-accept-rate,{tag}", lambda: self._measure(quota))
            for prefix, avg in zip(("", "ip-"), avgs, strict=True):
                self._metrics.gauge(
                    f"{_METRICS_GROUP},name={prefix}connection-accept-throttle-time,{tag}",
                    lambda a=avg: self._measure_avg(a),
                )

    def _measure(self, quota: _RateQuota) -> float:
        with self._cond:
            return quota.rate.measure(self.time.milliseconds())

    def _measure_avg(self, avg: SampledAvg) -> float:
        with self._cond:
            return avg.measure(self.time.milliseconds())

    def _ip_rate_values(self) -> list[tuple[tuple, float]]:
        with self._cond:
            now = self.time.milliseconds()
            return [((ip,), q.rate.measure(now)) for ip, q in self.ip_rates.items()]

    def max_for_ip(self, ip: str) -> int:
        return self.overrides.get(ip, self.default_max_per_ip)

    def connection_rate_for_ip(self, ip: str) -> int:
        """The IP's ``connection_creation_rate``: its own entity's, else the default IP entity's, else off (INT_MAX)."""
        return self.ip_rate_overrides.get(ip, self.default_ip_rate)

    def inc(self, listener: str, ip: str, should_run=lambda: True) -> None:
        """Count a new connection of ``ip`` on ``listener``, waiting first as the creation rates and
        ``max.connections`` require. Raises :class:`ConnectionThrottledError` (IP over its creation rate: not
        counted) or :class:`TooManyConnectionsError` (counted: the caller closes and calls ``dec``)."""
        with self._cond:
            self._wait_for_connection_slot(listener, should_run)
            self._record_ip_connection_maybe_throttle(listener, ip)
            previous = self.counts[ip]
            self.counts[ip] = previous + 1
            self.listener_counts[listener] += 1
            self.total += 1
            limit = self.max_for_ip(ip)
            if previous >= limit:
                raise TooManyConnectionsError(ip, limit)

    def _slot_available(self, listener: str) -> bool:
        return listener == self.protected_listener or self.total < self.max_connections

    def _wait_for_connection_slot(self, listener: str, should_run) -> None:
        start = self.time.milliseconds()
        throttle = self._record_connection_and_get_throttle_ms(listener, start)
        if throttle <= 0 and self._slot_available(listener):
            return
        end = start + throttle
        remaining = throttle
        while should_run() and (remaining > 0 or not self._slot_available(listener)):
            self._cond.wait(min(remaining, 500) / 1000.0 if remaining > 0 else 0.5)
            remaining = max(end - self.time.milliseconds(), 0)

    def _record_connection_and_get_throttle_ms(self, listener: str, now_ms: int) -> int:
        """Kafka's ``recordConnectionAndGetThrottleTimeMs``: the longer of the broker's and the listener's
        delays (the broker's not for the protected listener)."""
        throttle = 0
        if listener != self.protected_listener:
            throttle = self.broker_rate.record_and_get_throttle_ms(now_ms, self.max_throttle_ms)
        quota = self.listener_rates.get(listener)
        if quota is None:
            return throttle
        throttle = max(throttle, quota.record_and_get_throttle_ms(now_ms, self.max_throttle_ms))
        if throttle > 0:
            self.throttle_times[listener][0].record(throttle, now_ms)
        return throttle

    def _record_ip_connection_maybe_throttle(self, listener: str, ip: str) -> None:
        limit = self.connection_rate_for_ip(ip)
        if limit == IP_CONNECTION_RATE_DEFAULT:
            return
        now = self.time.milliseconds()
        quota = self.ip_rates.get(ip)
        if quota is None:
            if len(self.ip_rates) >= _MAX_IP_RATES:
                horizon = now - self.samples * self.window_ms
                self.ip_rates = {k: q for k, q in self.ip_rates.items() if q.last_ms > horizon}
            quota = self.ip_rates[ip] = _RateQuota(self.samples, self.window_ms, now, limit)
        throttle = quota.record_and_get_throttle_ms(now, self.max_throttle_ms)
        if throttle <= 0:
            return
        # not accepted: take the connection back from every rate it was recorded in (Kafka's updateListenerMetrics)
        quota.rate.unrecord(1.0)
        if listener != self.protected_listener:
            self.broker_rate.rate.unrecord(1.0)
        if listener in self.listener_rates:
            self.listener_rates[listener].rate.unrecord(1.0)
            self.throttle_times[listener][1].record(throttle, now)
        raise ConnectionThrottledError(ip, now, throttle)

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

    def update_connection_creation_rates(self, broker_rate: int, listener_rates: Mapping[str, int]) -> None:
        """New ``max.connection.creation.rate`` (broker-wide) and per-listener limits (Kafka's
        ``updateBrokerMaxConnectionRate`` and ``ListenerConnectionQuota.reconfigure``). An Acceptor already
        waiting keeps its delay, as in Kafka."""
        with self._cond:
            if broker_rate != self.broker_rate.limit:
                _log.info(f"Updating broker-wide maxConnectionCreationRate: {broker_rate}")
                self.broker_rate.limit = broker_rate
            for listener, limit in listener_rates.items():
                quota = self.listener_rates.get(listener)
                if quota is None:
                    self._add_listener(listener, limit, self.time.milliseconds())
                elif quota.limit != limit:
                    _log.info(f"Updated listener {listener} max connection creation rate to {limit}")
                    quota.limit = limit
            self._cond.notify_all()

    def update_ip_connection_rates(self, client_quotas: Mapping[tuple, Mapping[str, float]]) -> None:
        """The ``connection_creation_rate`` of the ``ip`` entities of the metadata image's client quotas
        (entity ``(("ip", name | None),)`` -> {key: value}); Kafka's ``updateIpConnectionRateQuota``."""
        default = IP_CONNECTION_RATE_DEFAULT
        overrides: dict[str, int] = {}
        for entity, values in client_quotas.items():
            if len(entity) != 1 or entity[0][0] != "ip" or IP_CONNECTION_RATE not in values:
                continue
            name = entity[0][1]
            rate = int(values[IP_CONNECTION_RATE])
            if name is None:
                default = rate
            else:
                ip = normalize_ip(name)
                if ip is not None:
                    overrides[ip] = rate
        with self._cond:
            if default == self.default_ip_rate and overrides == self.ip_rate_overrides:
                return
            self.default_ip_rate = default
            self.ip_rate_overrides = overrides
            for ip, quota in list(self.ip_rates.items()):
                limit = self.connection_rate_for_ip(ip)
                if limit == IP_CONNECTION_RATE_DEFAULT:
                    del self.ip_rates[ip]
                else:
                    quota.limit = limit
            _log.info(
                "Updated IP connection creation rates",
                default=None if default == IP_CONNECTION_RATE_DEFAULT else default,
                overrides=overrides,
            )
