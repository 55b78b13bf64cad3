"""ClientQuotaManager: per-client byte-rate quotas for produce and fetch (Kafka's ``ClientQuotaManager`` with its
``DefaultQuotaCallback``, KIP-13/KIP-55), throttled as KIP-219 says.

**Limits** come from the metadata image's client quotas (:meth:`update_quotas`, called by the metadata
publisher): ``producer_byte_rate`` for the Produce manager, ``consumer_byte_rate`` for the Fetch manager. For
a request of user ``U`` (the principal's name: ``ANONYMOUS`` on PLAINTEXT) and client id ``C`` the first
configured entity in Kafka's order applies: (U, C), (U, default client), U, (default user, C), (default user,
default client), default user, C, default client. The matched level also decides who shares a rate: a
user-level quota is shared by all of that user's clients, a (user, client) or client-level one is per client
id (Kafka's quota metric tags).

**Measuring**: each sharing key has a :class:`~pykbroker.server.quotas.sampled_rate.SampledRate` of
``quota.window.num`` windows of ``quota.window.size.seconds``. :meth:`record_and_get_throttle_time_ms`
records the request's bytes and, when the rate now exceeds the limit, answers Kafka's throttle time
``(rate - limit) / limit * window`` in ms. With no quota of this kind configured it answers 0 without
looking anything up (the fast path: one attribute read).

**Throttling** (KIP-219): the handler sends its response at once with ``throttle_time_ms`` set, and calls
:meth:`throttle`, which mutes the client's channel (``RequestChannel.start_throttling``: the Processor moves it
to a THROTTLED mute state) until the :class:`ThrottledChannelReaper` thread ends the throttle after that many
ms; the channel then reads the client's next request. A client that ignores ``throttle_time_ms`` therefore
gains nothing.

Threading: ``record_*``, ``max_value_in_quota_window`` and ``throttle`` are called from request handler
threads, ``update_quotas`` from the metadata loader thread; one lock guards the rates and the resolution cache
(the limits are an immutable dict swapped by reference). The reaper is its own thread
(``ThrottledChannelReaper-<Produce|Fetch>``).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable, Mapping

from pykbroker.server.quotas.sampled_rate import SampledRate
from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import SYSTEM, Time
from pykbroker.utils.windowed_stats import SampledAvg

_ABSENT = False  # an entity without this component (None is the default entity)
_MAX_SENSORS = 100_000


class ThrottledChannelReaper:
    """Kafka's ``ThrottledChannelReaper`` over a ``DelayQueue``: ends each throttle when its time is up.

    Thread: ``ThrottledChannelReaper-<name>``, started by :meth:`start`; ``add`` is called from handler
    threads."""

    def __init__(self, name: str, time: Time = SYSTEM):
        self.name = name
        self.time = time
        self._heap: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._running = False
        self._thread: threading.Thread | None = None
        self.log = get_logger("ThrottledChannelReaper", name=name)

    def start(self) -> None:
        self._running = True
        self._thread = threading.Thread(target=self._run, name=f"ThrottledChannelReaper-{self.name}", daemon=True)
        self._thread.start()

    def add(self, delay_ms: int, end_throttling: Callable[[], None]) -> None:
        due = self.time.milliseconds() + delay_ms
        with self._cond:
            heapq.heappush(self._heap, (due, next(self._seq), end_throttling))
            self._cond.notify()

    @property
    def size(self) -> int:
        return len(self._heap)

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._running:
                    now = self.time.milliseconds()
                    if self._heap and self._heap[0][0] <= now:
                        break
                    self._cond.wait(((self._heap[0][0] - now) / 1000.0) if self._heap else 1.0)
                if not self._running:
                    return
                _, _, end = heapq.heappop(self._heap)
            try:
                end()
            except Exception as e:  # noqa: BLE001 - never kill the reaper
                self.log.error("Ending a throttle failed.", error=repr(e))

    def shutdown(self) -> None:
        with self._cond:
            self._running = False
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(5)


class ClientQuotaManager:
    """Metrics (Kafka's per-client quota sensors, JMX ``kafka.server:type=<name>,user=<u>,client-id=<c>``), one
    series per sharing key that recorded bytes (user ``""`` for a client-id level quota, client id ``""`` for a
    user level one): ``byte-rate`` (bytes/s over the quota windows) and ``throttle-time`` (average of the non-zero
    throttle times answered, ms, over two 30 s windows as Kafka's ``Avg``; NaN when none). Registered as gauge
    families ``kafka.server:type=<name>,name=byte-rate`` / ``name=throttle-time`` with keys ``user``,
    ``clientId`` (the Prometheus JMX exporter's quota labels)."""

    def __init__(self, name: str, quota_key: str, samples: int, window_seconds: int, time: Time = SYSTEM, metrics=None):
        """``name`` ``Produce`` or ``Fetch``; ``quota_key`` ``producer_byte_rate`` or ``consumer_byte_rate``;
        ``metrics``: the broker's MetricsRegistry (optional)."""
        self.name = name
        self.quota_key = quota_key
        self.samples = samples
        self.window_ms = window_seconds * 1000
        self.time = time
        #: (user part, client part) -> limit; a part is a name, None (default) or _ABSENT
        self._limits: Mapping[tuple, float] = {}
        #: whether any quota of this type is configured (``bool(self._limits)``, kept with it: a plain attribute,
        #: read once or twice per produce and fetch request)
        self.quotas_enabled = False
        self._lock = threading.Lock()
        self._resolved: dict[tuple[str, str], tuple[tuple[str, str], float] | None] = {}
        self._rates: dict[tuple[str, str], SampledRate] = {}
        self._throttle_avgs: dict[tuple[str, str], SampledAvg] = {}
        #: a cap on the throttle time (ms): None here; one quota window for the request quota (Kafka's
        #: ``ClientRequestQuotaManager.maxThrottleTimeMs``)
        self.max_throttle_time_ms: int | None = None
        self.reaper = ThrottledChannelReaper(name, time)
        if metrics is not None:
            keys = ("user", "clientId")
            metrics.gauge_family(f"kafka.server:type={name},name=byte-rate", keys, self._byte_rates)
            metrics.gauge_family(f"kafka.server:type={name},name=throttle-time", keys, self._throttle_times)

    def _byte_rates(self) -> list[tuple[tuple, float]]:
        now = self.time.milliseconds()
        with self._lock:
            return [(key, rate.measure(now)) for key, rate in self._rates.items()]

    def _throttle_times(self) -> list[tuple[tuple, float]]:
        now = self.time.milliseconds()
        with self._lock:
            return [
                (key, avg.measure(now) if (avg := self._throttle_avgs.get(key)) is not None else float("nan"))
                for key in self._rates
            ]

    def update_quotas(self, client_quotas: Mapping[tuple, Mapping[str, float]]) -> None:
        """From ``MetadataImage.client_quotas`` (entity ``((type, name | None), ...)`` -> {key: value})."""
        limits: dict[tuple, float] = {}
        for entity, values in client_quotas.items():
            value = values.get(self.quota_key)
            if value is None:
                continue
            parts = dict(entity)
            if "ip" in parts:
                continue
            limits[(parts.get("user", _ABSENT), parts.get("client-id", _ABSENT))] = float(value)
        with self._lock:
            self._limits = limits
            self.quotas_enabled = bool(limits)
            self._resolved.clear()

    def _resolve(self, user: str, client_id: str) -> tuple[tuple[str, str], float] | None:
        """(sharing key, limit) of Kafka's DefaultQuotaCallback, or None when no quota applies."""
        limits = self._limits
        levels = (
            ((user, client_id), (user, client_id)),
            ((user, None), (user, client_id)),
            ((user, _ABSENT), (user, "")),
            ((None, client_id), (user, client_id)),
            ((None, None), (user, client_id)),
            ((None, _ABSENT), (user, "")),
            ((_ABSENT, client_id), ("", client_id)),
            ((_ABSENT, None), ("", client_id)),
        )
        for entity, key in levels:
            limit = limits.get(entity)
            if limit is not None:
                return key, limit
        return None

    def _lookup(self, user: str, client_id: str) -> tuple[tuple[str, str], float] | None:
        ident = (user, client_id)
        found = self._resolved.get(ident, _ABSENT)
        if found is _ABSENT:
            found = self._resolve(user, client_id)
            if len(self._resolved) > _MAX_SENSORS:
                self._resolved.clear()
            self._resolved[ident] = found
        return found  # type: ignore[return-value]

    def _rate(self, key: tuple[str, str], now_ms: int) -> SampledRate:
        rate = self._rates.get(key)
        if rate is None:
            if len(self._rates) > _MAX_SENSORS:  # bounded: forget the idle ones (Kafka expires sensors)
                horizon = now_ms - self.samples * self.window_ms
                self._rates = {k: r for k, r in self._rates.items() if max(r.starts) > horizon}
                self._throttle_avgs = {k: a for k, a in self._throttle_avgs.items() if k in self._rates}
            rate = self._rates[key] = SampledRate(self.samples, self.window_ms, now_ms)
        return rate

    def record_and_get_throttle_time_ms(self, user: str, client_id: str, value: float) -> int:
        """Record ``value`` (bytes) for the client; the throttle time in ms (0 when within its quota or
        without one). Kafka's ``maybeRecordAndGetThrottleTimeMs``."""
        if not self._limits:
            return 0
        now = self.time.milliseconds()
        with self._lock:
            found = self._lookup(user, client_id)
            if found is None:
                return 0
            key, limit = found
            rate = self._rate(key, now)
            rate.record(value, now)
            measured = rate.measure(now)
            if measured <= limit:
                return 0
            throttle = round((measured - limit) / limit * rate.window_size_ms(now))
            if self.max_throttle_time_ms is not None:
                throttle = min(throttle, self.max_throttle_time_ms)
            if throttle > 0:
                avg = self._throttle_avgs.get(key)
                if avg is None:
                    avg = self._throttle_avgs[key] = SampledAvg(2, 30_000, now)
                avg.record(throttle, now)
        return int(throttle)

    def unrecord(self, user: str, client_id: str, value: float) -> None:
        """Take back bytes recorded for a response that is not sent (a throttled fetch answers empty)."""
        if not self._limits:
            return
        with self._lock:
            found = self._lookup(user, client_id)
            if found is not None and found[0] in self._rates:
                self._rates[found[0]].unrecord(value)

    def max_value_in_quota_window(self, user: str, client_id: str) -> float:
        """The most bytes the client may take in one quota window: ``limit * (samples - 1) * window seconds``
        (Kafka's ``getMaxValueInQuotaWindow``, which bounds a fetch's size); infinity without a quota."""
        if not self._limits:
            return float("inf")
        with self._lock:
            found = self._lookup(user, client_id)
        if found is None:
            return float("inf")
        return found[1] * (self.samples - 1) * self.window_ms / 1000.0

    def throttle(self, start_throttling: Callable[[], None], end_throttling: Callable[[], None], ms: int) -> None:
        """Mute the channel now and unmute it after ``ms`` (Kafka's ``ThrottledChannel``)."""
        if ms <= 0:
            return
        start_throttling()
        self.reaper.add(ms, end_throttling)


def user_of(principal: str | None) -> str:
    """The user name of a principal string (``User:alice`` -> ``alice``; Kafka's ``KafkaPrincipal.getName``)."""
    if not principal:
        return "ANONYMOUS"
    return principal.split(":", 1)[1] if ":" in principal else principal


class QuotaManagers:
    """Kafka's ``QuotaFactory.QuotaManagers``: the broker's produce, fetch, request (``request_percentage``) and
    controller mutation (``controller_mutation_rate``) managers, from ``quota.window.num`` and
    ``quota.window.size.seconds``."""

    def __init__(self, samples: int, window_seconds: int, time: Time = SYSTEM, metrics=None):
        from pykbroker.server.quotas.client_request_quota_manager import ClientRequestQuotaManager
        from pykbroker.server.quotas.controller_mutation_quota_manager import ControllerMutationQuotaManager

        self.produce = ClientQuotaManager("Produce", "producer_byte_rate", samples, window_seconds, time, metrics)
        self.fetch = ClientQuotaManager("Fetch", "consumer_byte_rate", samples, window_seconds, time, metrics)
        self.request = ClientRequestQuotaManager(samples, window_seconds, time)
        self.controller_mutation = ControllerMutationQuotaManager(samples, window_seconds, time)

    def all(self) -> tuple[ClientQuotaManager, ...]:
        return (self.produce, self.fetch, self.request, self.controller_mutation)

    def update_quotas(self, client_quotas: Mapping[tuple, Mapping[str, float]]) -> None:
        for m in self.all():
            m.update_quotas(client_quotas)

    def start(self) -> None:
        for m in self.all():
            m.reaper.start()

    def shutdown(self) -> None:
        for m in self.all():
            m.reaper.shutdown()
