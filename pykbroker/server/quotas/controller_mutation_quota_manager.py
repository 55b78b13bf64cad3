"""ControllerMutationQuotaManager: the ``controller_mutation_rate`` quota (KIP-599), Kafka's
``ControllerMutationQuotaManager`` with its ``StrictControllerMutationQuota`` / ``PermissiveControllerMutationQuota``.

**What is counted**: partitions mutated per second per user/client-id: each topic a CreateTopics creates counts
its partitions, each topic a DeleteTopics deletes its partitions, each CreatePartitions the partitions it adds.
The controller asks the request's quota while it builds each topic's records (Kafka's
``ControllerRequestContext.applyPartitionChangeQuota`` in ``ReplicationControlManager``).

**Measure**: a :class:`TokenBucket` per sharing key (Kafka's ``TokenBucket`` stat): refilled at ``limit``
tokens per second up to a burst of ``limit * quota.window.num * quota.window.size.seconds``, starting full; the
quota is exhausted while the tokens are below zero, and the throttle time is the time to refill to zero,
``-tokens / limit * 1000`` ms. Limits, precedence and sharing keys are :class:`ClientQuotaManager`'s, with the
quota key ``controller_mutation_rate``.

**Strict vs permissive** (:meth:`ControllerMutationQuotaManager.new_quota_for`): from CreateTopics v6,
DeleteTopics v5 and CreatePartitions v3 the quota is strict: a topic asked while the bucket is below zero is
refused with THROTTLING_QUOTA_EXCEEDED (89, "The throttling quota has been exceeded.") and not mutated; a topic
asked while the bucket is at or above zero is accepted whatever its size (it may take the bucket below zero).
Older versions are permissive: every mutation is accepted, and the throttle time is set once the bucket is below
zero. Either way the response's ``throttle_time_ms`` is the quota's remaining throttle time and the channel is
muted for it (KIP-219). Without any such quota the :data:`UNBOUNDED` quota is used (nothing recorded).

Threading: a quota object lives for one request (built on a handler thread, recorded on the controller's event
thread, read back on the thread that answers); the manager's lock guards the buckets and rates.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import ClassVar

from pykbroker.protocol import errors
from pykbroker.server.quotas.client_quota_manager import _MAX_SENSORS, ClientQuotaManager
from pykbroker.utils.time import SYSTEM, Time

#: ``Errors.THROTTLING_QUOTA_EXCEEDED.message``
THROTTLING_QUOTA_EXCEEDED_MESSAGE = "The throttling quota has been exceeded."


class ThrottlingQuotaExceeded(errors.ThrottlingQuotaExceededError):
    """Kafka's ``ThrottlingQuotaExceededException`` (error code 89) with the throttle time it carries."""

    def __init__(self, throttle_time_ms: int, message: str = THROTTLING_QUOTA_EXCEEDED_MESSAGE):
        super().__init__(message)
        self.throttle_time_ms = throttle_time_ms


class TokenBucket:
    """Kafka's ``TokenBucket`` measurable (seconds as the unit). Not thread-safe."""

    __slots__ = ("tokens", "last_update_ms")

    def __init__(self, burst: float, now_ms: int):
        self.tokens = burst
        self.last_update_ms = now_ms

    def refill(self, quota: float, burst: float, now_ms: int) -> float:
        self.tokens = min(burst, self.tokens + quota * (now_ms - self.last_update_ms) / 1000.0)
        self.last_update_ms = now_ms
        return self.tokens

    def record(self, value: float, quota: float, burst: float, now_ms: int) -> None:
        self.refill(quota, burst, now_ms)
        self.tokens = min(burst, self.tokens - value)


class ControllerMutationQuota:
    """Kafka's ``ControllerMutationQuota`` for one request: :meth:`record` the partitions a topic mutates
    (raises :class:`ThrottlingQuotaExceeded` when a strict quota refuses them), :attr:`throttle_time` the
    throttle time left (ms)."""

    def is_exceeded(self) -> bool:
        return False

    def record(self, permits: float) -> None:
        pass

    @property
    def throttle_time(self) -> int:
        return 0


#: Kafka's ``UnboundedControllerMutationQuota``: no quota configured.
UNBOUNDED = ControllerMutationQuota()


class _BoundedQuota(ControllerMutationQuota):
    """Kafka's ``AbstractControllerMutationQuota``: the throttle time recorded last, less the time since."""

    def __init__(self, manager: ControllerMutationQuotaManager, key: tuple[str, str], limit: float):
        self.manager = manager
        self.key = key
        self.limit = limit
        self.last_throttle_time_ms = 0
        self.last_recorded_time_ms = 0

    def _violated(self, throttle_ms: int, now_ms: int) -> None:
        self.last_throttle_time_ms = throttle_ms
        self.last_recorded_time_ms = now_ms
        self.manager._record_throttle(self.key, throttle_ms, now_ms)

    @property
    def throttle_time(self) -> int:
        elapsed = self.manager.time.milliseconds() - self.last_recorded_time_ms
        return int(max(0, self.last_throttle_time_ms - elapsed))


class StrictControllerMutationQuota(_BoundedQuota):
    """Refuses every mutation once the bucket is below zero, accepts any while it is not."""

    def is_exceeded(self) -> bool:
        return self.last_throttle_time_ms > 0

    def record(self, permits: float) -> None:
        now = self.manager.time.milliseconds()
        throttle = self.manager._check_and_record(self.key, self.limit, permits, now, strict=True)
        if throttle > 0:
            self._violated(throttle, now)
            raise ThrottlingQuotaExceeded(throttle)


class PermissiveControllerMutationQuota(_BoundedQuota):
    """Accepts every mutation; throttles once the bucket is below zero."""

    def record(self, permits: float) -> None:
        now = self.manager.time.milliseconds()
        throttle = self.manager._check_and_record(self.key, self.limit, permits, now, strict=False)
        if throttle > 0:
            self._violated(throttle, now)


class ControllerMutationQuotaManager(ClientQuotaManager):
    """See the module docstring."""

    #: the first strict version of each API (Kafka's ``strictSinceVersion`` in ControllerApis)
    STRICT_SINCE: ClassVar[dict[str, int]] = {"CreateTopics": 6, "DeleteTopics": 5, "CreatePartitions": 3}

    def __init__(self, samples: int, window_seconds: int, time: Time = SYSTEM):
        super().__init__("ControllerMutation", "controller_mutation_rate", samples, window_seconds, time)
        self._buckets: dict[tuple[str, str], TokenBucket] = {}
        self._throttles: dict[tuple[str, str], tuple[float, int]] = {}  # key -> (sum of ms, count) since start
        self._metrics_lock = threading.Lock()

    def _burst(self, limit: float) -> float:
        return self.samples * self.window_ms / 1000.0 * limit

    def new_quota_for(self, user: str, client_id: str, version: int, strict_since_version: int):
        """The quota of one request: strict from ``strict_since_version``, permissive below it, :data:`UNBOUNDED`
        when the client has no ``controller_mutation_rate`` quota (Kafka's ``newQuotaFor``)."""
        if not self.quotas_enabled:
            return UNBOUNDED
        with self._lock:
            found = self._lookup(user, client_id)
        if found is None:
            return UNBOUNDED
        key, limit = found
        if version >= strict_since_version:
            return StrictControllerMutationQuota(self, key, limit)
        return PermissiveControllerMutationQuota(self, key, limit)

    def _check_and_record(self, key: tuple[str, str], limit: float, permits: float, now: int, strict: bool) -> int:
        """Strict: refuse (answer the throttle time, record nothing) when the bucket is below zero, else record.
        Permissive: record, then answer the throttle time when the bucket is below zero. 0 = within quota."""
        burst = self._burst(limit)
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                if len(self._buckets) > _MAX_SENSORS:  # bounded: forget the buckets refilled since (full again)
                    full_after = self.samples * self.window_ms
                    self._buckets = {
                        k: b for k, b in self._buckets.items() if b.tokens < 0 or now - b.last_update_ms < full_after
                    }
                bucket = self._buckets[key] = TokenBucket(burst, now)
            if strict:
                tokens = bucket.refill(limit, burst, now)
                if tokens < 0:
                    return round(-tokens / limit * 1000)
            bucket.record(permits, limit, burst, now)
            self._rate(key, now).record(permits, now)
            if not strict and bucket.tokens < 0:
                return round(-bucket.tokens / limit * 1000)
        return 0

    def record_and_get_throttle_time_ms(self, user: str, client_id: str, value: float) -> int:
        """Kafka's ``ControllerMutationQuotaManager.recordAndGetThrottleTimeMs``: strict recording of ``value``
        partitions; the throttle time when the bucket was already below zero (nothing recorded then)."""
        quota = self.new_quota_for(user, client_id, 1, 0)
        try:
            quota.record(value)
        except ThrottlingQuotaExceeded as e:
            return e.throttle_time_ms
        return 0

    def _record_throttle(self, key: tuple[str, str], throttle_ms: int, now_ms: int) -> None:
        with self._metrics_lock:
            if len(self._throttles) > _MAX_SENSORS:
                self._throttles.clear()
            total, count = self._throttles.get(key, (0.0, 0))
            self._throttles[key] = (total + throttle_ms, count + 1)

    # -- metrics (read at scrape time) ----------------------------------------------------------------
    def register_metrics(self, registry) -> None:
        """Kafka's ``ControllerMutation`` quota metrics (JMX ``kafka.server:type=ControllerMutation,user=<u>,
        client-id=<c>`` attributes ``mutation-rate``, ``tokens``, ``throttle-time``; ``queue-size``), read at
        scrape time: Prometheus ``kafka_server_quota_mutation_rate``, ``..._tokens``, ``..._throttle_time`` (labels
        ``resource="ControllerMutation"``, ``user``, ``clientId``) and ``kafka_server_quota_queue_size``."""
        keys = ("user", "clientId")
        prefix = "kafka.server:type=ControllerMutation,name="
        registry.gauge_family(prefix + "mutation-rate", keys, self.mutation_rates)
        registry.gauge_family(prefix + "tokens", keys, self.tokens)
        registry.gauge_family(prefix + "throttle-time", keys, self.throttle_times)
        registry.gauge(prefix + "queue-size", lambda: self.reaper.size)

    def mutation_rates(self) -> Iterable[tuple[tuple[str, str], float]]:
        """``((user, client-id), mutation-rate)``: partitions mutated per second over the quota window."""
        now = self.time.milliseconds()
        with self._lock:
            return [(key, rate.measure(now)) for key, rate in self._rates.items()]

    def tokens(self) -> Iterable[tuple[tuple[str, str], float]]:
        """``((user, client-id), tokens)``: the tokens left in each bucket (negative: exhausted)."""
        now = self.time.milliseconds()
        with self._lock:
            out = []
            for key, bucket in self._buckets.items():
                found = self._limit_of(key)
                if found is not None:
                    out.append((key, bucket.refill(found, self._burst(found), now)))
            return out

    def _limit_of(self, key: tuple[str, str]) -> float | None:
        for found in self._resolved.values():
            if found is not None and found[0] == key:
                return found[1]
        return None

    def throttle_times(self) -> Iterable[tuple[tuple[str, str], float]]:
        """``((user, client-id), throttle-time)``: mean throttle time (ms) answered since start."""
        with self._metrics_lock:
            return [(key, total / count) for key, (total, count) in self._throttles.items() if count]
