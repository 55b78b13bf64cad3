"""ReplicationQuotaManager: the replication throttles of KIP-73 (Kafka's ``ReplicationQuotaManager``).

A broker has two: the leader's (``leader.replication.throttled.rate``, bytes/s it serves to throttled followers)
and the follower's (``follower.replication.throttled.rate``, bytes/s its fetchers take for throttled replicas).
Each is a rate over Kafka's default replication quota windows (``replication.quota.window.num`` = 11 samples of
``replication.quota.window.size.seconds`` = 1 s) and a set of throttled partitions per topic, from the topic's
``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas`` (``partition:broker``
entries for this broker, or ``*`` for every partition: :func:`parse_throttled_partitions`, Kafka's
``TopicConfigHandler.parseThrottledPartitions``).

Use, as Kafka's: the leader leaves out of a follower's fetch response the throttled partitions that follower is not
in the ISR of while :meth:`is_quota_exceeded`, and records the bytes it sends of throttled partitions; a follower's
fetcher leaves out of its requests its throttled partitions not in the ISR while exceeded, and records the bytes it
receives of throttled partitions. Replicas in the ISR are never held back, so a throttle cannot shrink the ISR.

Thread-safe: one lock; request handler threads, replica fetcher threads and the metadata publisher call it.
"""

from __future__ import annotations

import threading

from pykbroker.utils.time import SystemTime, Time
from pykbroker.utils.windowed_stats import SampledRate

#: Kafka's ReplicationQuotaManagerConfig defaults
DEFAULT_NUM_SAMPLES = 11
DEFAULT_WINDOW_SIZE_MS = 1000
UNLIMITED = (1 << 63) - 1
ALL_REPLICAS = -1


def parse_throttled_partitions(value: str | None, broker_id: int) -> list[int] | None:
    """A throttled replicas config -> the partitions throttled on ``broker_id`` (``[ALL_REPLICAS]`` for ``*``), or
    None when the config is unset or empty (no throttle). Entries that do not parse are ignored."""
    text = (value or "").strip()
    if not text:
        return None
    if text == "*":
        return [ALL_REPLICAS]
    partitions = []
    for entry in text.split(","):
        parts = [p.strip() for p in entry.split(":")]
        if len(parts) == 2 and parts[0].isdigit() and parts[1].lstrip("-").isdigit() and int(parts[1]) == broker_id:
            partitions.append(int(parts[0]))
    return partitions


class ReplicationQuotaManager:
    def __init__(
        self,
        name: str,
        time: Time | None = None,
        samples: int = DEFAULT_NUM_SAMPLES,
        window_ms: int = DEFAULT_WINDOW_SIZE_MS,
    ):
        """``name``: ``LeaderReplication`` or ``FollowerReplication`` (Kafka's QuotaType)."""
        self.name = name
        self.time = time or SystemTime()
        self.samples, self.window_ms = samples, window_ms
        self._lock = threading.Lock()
        self._rate = SampledRate(samples, window_ms, self.time.milliseconds())
        self._quota = UNLIMITED
        self._throttled: dict[str, frozenset[int]] = {}

    # -- configuration ------------------------------------------------------------------------------------
    def update_quota(self, bytes_per_second: int) -> None:
        """The rate bound in bytes/s (``UNLIMITED`` = no bound)."""
        with self._lock:
            self._quota = int(bytes_per_second)

    @property
    def quota(self) -> int:
        return self._quota

    def mark_throttled(self, topic: str, partitions: list[int] | None) -> None:
        """Throttle ``partitions`` of ``topic`` (``[ALL_REPLICAS]``: all); None or empty removes the topic's."""
        with self._lock:
            if partitions:
                self._throttled[topic] = frozenset(partitions)
            else:
                self._throttled.pop(topic, None)

    def throttles_any(self) -> bool:
        """Whether any replica is throttled (a cheap test before looking at each partition of a fetch)."""
        return bool(self._throttled)

    def is_throttled(self, topic: str, partition: int) -> bool:
        parts = self._throttled.get(topic)
        return parts is not None and (partition in parts or ALL_REPLICAS in parts)

    # -- rate -------------------------------------------------------------------------------------------------
    def is_quota_exceeded(self) -> bool:
        """Whether the bytes recorded over the windows exceed the quota (never with an unlimited quota)."""
        if self._quota >= UNLIMITED:
            return False
        with self._lock:
            return self._rate.measure(self.time.milliseconds()) > self._quota

    def record(self, value: int) -> None:
        if value <= 0:
            return
        with self._lock:
            self._rate.record(float(value), self.time.milliseconds())

    def byte_rate(self) -> float:
        """The measured rate in bytes/s (Kafka's ``<QuotaType>:byte-rate`` metric)."""
        with self._lock:
            return self._rate.measure(self.time.milliseconds())
