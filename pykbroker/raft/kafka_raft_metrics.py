"""KafkaRaftMetrics: the Raft client's metrics (Kafka's ``org.apache.kafka.raft.internals.KafkaRaftMetrics``,
the ``raft-metrics`` group, JMX ``kafka.server:type=raft-metrics``).

Gauges read the client's live state when scraped: ``current-state`` (leader, candidate, voted, follower,
observer, unattached), ``current-leader`` (-1 unknown), ``current-vote`` (-1 none), ``current-epoch``,
``high-watermark`` (-1 unknown), ``log-end-offset``, ``log-end-epoch``. Sensors are recorded by the client on its
Raft thread: ``commit-latency-avg/max`` (ms from a leader's append of a batch to its commit),
``election-latency-avg/max`` (ms from becoming a candidate to knowing a leader), ``append-records-rate`` (records
appended per second as leader), ``fetch-records-rate`` (records fetched per second from the leader) and
``poll-idle-ratio-avg`` (the share of each Raft-thread cycle spent waiting for work, recorded by the
driver around its wait); like
Kafka's Avg, Max and Rate they cover the last two 30 s samples (``metrics.sample.window.ms`` and
``metrics.num.samples`` defaults).

Each attribute is registered as ``kafka.server:type=raft-metrics,name=<attribute>`` (the registry's form for
a Kafka Metrics attribute); ``current-state`` as a one-row gauge family keyed by ``state``.

Thread-safety: the sensors are written by the Raft thread and read by a reporter under one lock; the gauges
read fields that the Raft thread replaces atomically.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from pykbroker.raft.epoch_state import NO_ID, StateKind
from pykbroker.utils.metrics import MetricsRegistry
from pykbroker.utils.time import SYSTEM, Time

if TYPE_CHECKING:
    from pykbroker.raft.kafka_raft_client import KafkaRaftClient

GROUP = "kafka.server:type=raft-metrics"
SAMPLE_WINDOW_MS = 30_000  # metrics.sample.window.ms
NUM_SAMPLES = 2  # metrics.num.samples


class SampledStat:
    """Kafka's SampledStat over ``NUM_SAMPLES`` windows of ``SAMPLE_WINDOW_MS``: the values recorded in the
    windows not yet expired, read as an average, a maximum or a per-second rate. Not thread-safe: the owner
    locks."""

    def __init__(self, time: Time):
        self.time = time
        self._samples: list[list[float]] = []  # [window start ms, count, sum, max], oldest first

    def record(self, value: float) -> None:
        now = self.time.milliseconds()
        self._purge(now)
        if not self._samples or now - self._samples[-1][0] >= SAMPLE_WINDOW_MS:
            self._samples.append([now, 0, 0.0, float("-inf")])
            del self._samples[:-NUM_SAMPLES]
        sample = self._samples[-1]
        sample[1] += 1
        sample[2] += value
        sample[3] = max(sample[3], value)

    def _purge(self, now: int) -> None:
        self._samples = [s for s in self._samples if now - s[0] < SAMPLE_WINDOW_MS * NUM_SAMPLES]

    def avg(self) -> float:
        """The mean of the values in the windows (NaN when none, as Kafka's Avg)."""
        self._purge(self.time.milliseconds())
        count = sum(s[1] for s in self._samples)
        return sum(s[2] for s in self._samples) / count if count else float("nan")

    def max(self) -> float:
        """The largest value in the windows (NaN when none, as Kafka's Max)."""
        self._purge(self.time.milliseconds())
        return max((s[3] for s in self._samples), default=float("nan"))

    def rate(self) -> float:
        """Kafka's Rate: the sum in the windows over the time they span, at least ``NUM_SAMPLES - 1``
        windows, per second."""
        now = self.time.milliseconds()
        self._purge(now)
        if not self._samples:
            return 0.0
        elapsed = max(now - self._samples[0][0], SAMPLE_WINDOW_MS * (NUM_SAMPLES - 1))
        return sum(s[2] for s in self._samples) / (elapsed / 1000.0)


class KafkaRaftMetrics:
    """Registers the ``raft-metrics`` group on ``registry`` for ``client`` and attaches itself to the client
    (``client.metrics``), which records commits, elections and appended or fetched records on it."""

    def __init__(self, registry: MetricsRegistry, client: KafkaRaftClient, time: Time = SYSTEM):
        self.registry = registry
        self.client = client
        self._lock = threading.Lock()
        self._commit = SampledStat(time)
        self._election = SampledStat(time)
        self._append = SampledStat(time)
        self._fetch = SampledStat(time)
        self._poll_idle = SampledStat(time)
        self._poll_start_ms: int | None = None
        self._poll_end_ms: int | None = None
        self._election_start_ms: int | None = None
        self.names: list[str] = []
        self._gauge("current-leader", lambda: client.leader_and_epoch.leader_id)
        self._gauge("current-epoch", lambda: client.quorum.epoch)
        self._gauge("current-vote", self.current_vote)
        self._gauge("high-watermark", lambda: _or(client.high_watermark(), -1))
        self._gauge("log-end-offset", lambda: client.log.end_offset())
        self._gauge("log-end-epoch", lambda: client.log.last_fetched_epoch())
        self._gauge("commit-latency-avg", lambda: self._read(self._commit.avg))
        self._gauge("commit-latency-max", lambda: self._read(self._commit.max))
        self._gauge("election-latency-avg", lambda: self._read(self._election.avg))
        self._gauge("election-latency-max", lambda: self._read(self._election.max))
        self._gauge("append-records-rate", lambda: self._read(self._append.rate))
        self._gauge("fetch-records-rate", lambda: self._read(self._fetch.rate))
        self._gauge("poll-idle-ratio-avg", lambda: self._read(self._poll_idle.avg))
        name = f"{GROUP},name=current-state"
        registry.gauge_family(name, ("state",), lambda: [((self.current_state(),), 1.0)])
        self.names.append(name)
        client.metrics = self

    def _gauge(self, attribute: str, fn) -> None:
        name = f"{GROUP},name={attribute}"
        self.registry.gauge(name, fn)
        self.names.append(name)

    def _read(self, fn) -> float:
        with self._lock:
            return fn()

    # ---- gauges -------------------------------------------------------------------------------
    def current_state(self) -> str:
        """Kafka's names: leader, candidate, prospective (KIP-996), voted (unattached with a vote), follower,
        observer, unattached."""
        quorum = self.client.quorum
        state = quorum.state
        kind = state.kind
        if kind is StateKind.LEADER:
            return "leader"
        if kind is StateKind.CANDIDATE:
            return "candidate"
        if kind is StateKind.PROSPECTIVE:
            return "prospective"
        if kind is StateKind.UNATTACHED and getattr(state, "voted_id", NO_ID) != NO_ID:
            return "voted"
        if kind is StateKind.FOLLOWER:
            return "follower" if quorum.is_voter() else "observer"
        return "unattached"

    def current_vote(self) -> int:
        state = self.client.quorum.state
        if state.kind in (StateKind.LEADER, StateKind.CANDIDATE):
            return self.client.node_id
        if state.kind in (StateKind.UNATTACHED, StateKind.PROSPECTIVE):
            return getattr(state, "voted_id", NO_ID)
        return NO_ID

    # ---- sensors (the Raft thread) ------------------------------------------------------------
    def update_commit_latency(self, latency_ms: float) -> None:
        with self._lock:
            self._commit.record(latency_ms)

    def update_append_records(self, records: int) -> None:
        with self._lock:
            self._append.record(records)

    def update_fetched_records(self, records: int) -> None:
        with self._lock:
            self._fetch.record(records)

    def update_poll_start(self, now_ms: int) -> None:
        """The Raft thread starts waiting for work (Kafka's ``updatePollStart``): the previous cycle's idle
        share (its wait over the time since that wait began) is recorded for ``poll-idle-ratio-avg``."""
        start, end = self._poll_start_ms, self._poll_end_ms
        if start is not None and end is not None:
            idle = max(end - start, 0)
            total = max(now_ms - start, 1)
            with self._lock:
                self._poll_idle.record(idle / total)
        self._poll_start_ms, self._poll_end_ms = now_ms, None

    def update_poll_end(self, now_ms: int) -> None:
        """The Raft thread woke up (Kafka's ``updatePollEnd``)."""
        self._poll_end_ms = now_ms

    def update_election_start_ms(self, now_ms: int) -> None:
        self._election_start_ms = now_ms

    def maybe_update_election_latency(self, now_ms: int) -> None:
        start, self._election_start_ms = self._election_start_ms, None
        if start is not None:
            with self._lock:
                self._election.record(max(0, now_ms - start))

    def close(self) -> None:
        """Kafka's close: the group's metrics leave the registry."""
        for name in self.names:
            self.registry.remove(name)
        if self.client.metrics is self:
            self.client.metrics = None


def _or(value: int | None, default: int) -> int:
    return default if value is None else value
