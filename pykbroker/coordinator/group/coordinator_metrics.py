"""The group coordinator's Kafka Metrics (Kafka 4's ``GroupCoordinatorMetrics``, group ``group-coordinator-metrics``).

Registered as ``kafka.server:type=group-coordinator-metrics,name=<metric>[,<tag>=<value>]`` gauges, which the
Prometheus reporter names ``kafka_server_group_coordinator_metrics_<metric>`` (docs/METRICS.md):

- ``group-count`` (tag ``protocol`` = ``classic`` | ``consumer`` | ``share``): groups loaded here per type;
- ``consumer-group-count`` (tag ``state`` = ``Empty`` | ``Assigning`` | ``Reconciling`` | ``Stable`` | ``Dead``, as
  Kafka's ``ConsumerGroupState.toString``): consumer groups per state;
- ``share-group-count`` (tag ``state`` = ``Empty`` | ``Stable`` | ``Dead``, Kafka's ``ShareGroupState``): share
  groups per state;
- sensors, each a ``-rate`` (per second over two 30 s windows, Kafka's default ``Meter``) and a ``-count`` (since
  start): ``offset-commit`` (offsets committed), ``offset-expiration`` (offsets expired by retention),
  ``offset-deletion`` (offsets deleted by OffsetDelete), ``group-completed-rebalance`` (classic rebalances that
  reached Stable), ``consumer-group-rebalance`` (consumer group epoch bumps), ``share-group-rebalance`` (share group
  epoch bumps by a joining member or a subscription or metadata change).

Classic groups per state stay the GroupMetadataManager gauges (``NumGroupsStable`` ...), as in Kafka.

Threading: sensors are recorded from any thread (their own lock); gauges read the groups at scrape time, each under
its group's lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from pykbroker.coordinator.group.consumer import group as cgroup
from pykbroker.coordinator.group.share import group as sgroup
from pykbroker.utils.windowed_stats import SampledRate

GROUP = "kafka.server:type=group-coordinator-metrics"
OFFSET_COMMITS, OFFSET_EXPIRED, OFFSET_DELETIONS = "offset-commit", "offset-expiration", "offset-deletion"
CLASSIC_REBALANCES, CONSUMER_REBALANCES = "group-completed-rebalance", "consumer-group-rebalance"
SHARE_REBALANCES = "share-group-rebalance"
CONSUMER_STATES = (cgroup.EMPTY, cgroup.ASSIGNING, cgroup.RECONCILING, cgroup.STABLE, cgroup.DEAD)
SHARE_STATES = (sgroup.EMPTY, sgroup.STABLE, sgroup.DEAD)


class _Sensor:
    """Kafka's ``Meter``: a rate over two 30 s windows and a cumulative count."""

    def __init__(self, now_ms: int):
        self.rate = SampledRate(2, 30_000, now_ms)
        self.count = 0
        self.lock = threading.Lock()

    def record(self, n: int, now_ms: int) -> None:
        with self.lock:
            self.rate.record(n, now_ms)
            self.count += n

    def measure(self, now_ms: int) -> float:
        with self.lock:
            return self.rate.measure(now_ms)


class GroupCoordinatorMetrics:
    """See module doc. ``time``: the broker's Time (ms)."""

    def __init__(self, time):
        self.time = time
        now = time.milliseconds()
        self.sensors = {
            name: _Sensor(now)
            for name in (
                OFFSET_COMMITS,
                OFFSET_EXPIRED,
                OFFSET_DELETIONS,
                CLASSIC_REBALANCES,
                CONSUMER_REBALANCES,
                SHARE_REBALANCES,
            )
        }

    def record(self, sensor: str, n: int = 1) -> None:
        """Record ``n`` events of ``sensor`` (one of the module's sensor names)."""
        if n > 0:
            self.sensors[sensor].record(n, self.time.milliseconds())

    def register(self, metrics, groups: Callable[[], list]) -> None:
        """Register the gauges in the MetricsRegistry ``metrics``; ``groups()`` returns the loaded GroupMetadata."""

        def group_types() -> list[str]:
            out = []
            for g in groups():
                with g.lock:
                    out.append(g.group_type)
            return out

        def consumer_states() -> list[str]:
            out = []
            for g in groups():
                with g.lock:
                    if g.consumer_group is not None:
                        out.append(g.consumer_group.state)
            return out

        def share_states() -> list[str]:
            out = []
            for g in groups():
                with g.lock:
                    if g.share_group is not None:
                        out.append(g.share_group.state)
            return out

        for protocol in ("classic", "consumer", "share"):
            metrics.gauge(
                f"{GROUP},name=group-count,protocol={protocol}",
                lambda p=protocol: sum(1 for t in group_types() if t == p),
            )
        for state in CONSUMER_STATES:
            metrics.gauge(
                f"{GROUP},name=consumer-group-count,state={state}",
                lambda s=state: sum(1 for x in consumer_states() if x == s),
            )
        for state in SHARE_STATES:
            metrics.gauge(
                f"{GROUP},name=share-group-count,state={state}",
                lambda s=state: sum(1 for x in share_states() if x == s),
            )
        for name, sensor in self.sensors.items():
            metrics.gauge(f"{GROUP},name={name}-rate", lambda s=sensor: s.measure(self.time.milliseconds()))
            metrics.gauge(f"{GROUP},name={name}-count", lambda s=sensor: s.count)
