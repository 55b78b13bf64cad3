"""Replica: what a partition leader knows about one follower replica (Kafka's ``kafka.cluster.Replica``).

The leader learns a follower's log end offset (LEO) and log start offset from each Fetch the follower
sends (the fetch offset is the follower's LEO). ``last_caught_up_time_ms`` is the last time the follower
was known to have everything the leader had, Kafka's rule (``Replica.updateFetchStateOrThrow``):

* a fetch at or past the leader's LEO at the time of the fetch: caught up at that fetch's time;
* else a fetch at or past the leader LEO seen by the previous fetch: caught up at the previous fetch's
  time (the follower has everything the leader had then).

The ISR shrink (``replica.lag.time.max.ms``) and expand decisions read it. ``broker_epoch`` is the
broker epoch the follower's last Fetch carried (KIP-903: ``replica_state.replica_epoch``; -1 from a
Fetch that does not carry one; None before any Fetch to this leader): the leader admits the replica to
the ISR only when it equals the epoch registered in the metadata, and names it in the AlterPartition.
Offsets are ints (-1 unknown); times are ms from the broker's clock.

Idle fetch sessions (issue 31): a follower at the leader's LEO, in the ISR, whose partition has not changed
since it was last read in its KIP-227 session is *parked* on the session's :class:`FollowerFetchClock`: later
session fetches skip the partition, and each one moves the clock to its arrival time. While parked, the replica's
``last_fetch_time_ms`` and ``last_caught_up_time_ms`` read as at least the clock's time (each of those fetches
would have been "at the leader's LEO" in Kafka's rule, since the partition did not change), so the ISR shrink and
the HW see exactly Kafka's values without any per-partition work. The next real read
(``update_fetch_state``) or a new leader epoch (``reset``) writes the clock's time back and unparks it.

Threading: mutated only under the owning Partition's ``_state_lock``; the clock is written by the one handler
thread serving the session's current request and read (a single int) by anyone.
"""

from __future__ import annotations


class FollowerFetchClock:
    """The arrival time (ms, the broker's clock) of a follower's latest fetch in one fetch session: the time at
    which every partition parked on it was last fetched at the leader's log end offset."""

    __slots__ = ("fetch_time_ms",)

    def __init__(self, fetch_time_ms: int = 0):
        self.fetch_time_ms = fetch_time_ms


class Replica:
    __slots__ = (
        "broker_id",
        "log_end_offset",
        "log_start_offset",
        "last_fetch_leader_log_end_offset",
        "_last_fetch_time_ms",
        "_last_caught_up_time_ms",
        "broker_epoch",
        "parked",
    )

    def __init__(self, broker_id: int):
        self.broker_id = broker_id
        self.log_end_offset = -1
        self.log_start_offset = -1
        self.last_fetch_leader_log_end_offset = -1
        self._last_fetch_time_ms = 0
        self._last_caught_up_time_ms = 0
        self.broker_epoch: int | None = None
        #: the fetch session clock this replica is parked on (None: not parked), see the module docstring
        self.parked: FollowerFetchClock | None = None

    @property
    def last_fetch_time_ms(self) -> int:
        clock = self.parked
        t = self._last_fetch_time_ms
        return clock.fetch_time_ms if clock is not None and clock.fetch_time_ms > t else t

    @last_fetch_time_ms.setter
    def last_fetch_time_ms(self, value: int) -> None:
        self.unpark()
        self._last_fetch_time_ms = value

    @property
    def last_caught_up_time_ms(self) -> int:
        clock = self.parked
        t = self._last_caught_up_time_ms
        return clock.fetch_time_ms if clock is not None and clock.fetch_time_ms > t else t

    @last_caught_up_time_ms.setter
    def last_caught_up_time_ms(self, value: int) -> None:
        self.unpark()
        self._last_caught_up_time_ms = value

    def park(self, clock: FollowerFetchClock) -> None:
        """Park on a session clock: the follower is at the leader's LEO and its partition unchanged."""
        self.unpark()
        self.parked = clock

    def unpark(self) -> None:
        """Write the parked clock's time back into the fetch and caught-up times, and stop following it."""
        clock = self.parked
        if clock is not None:
            self.parked = None
            t = clock.fetch_time_ms
            if t > self._last_fetch_time_ms:
                self._last_fetch_time_ms = t
            if t > self._last_caught_up_time_ms:
                self._last_caught_up_time_ms = t

    def update_fetch_state(
        self,
        fetch_offset: int,
        log_start_offset: int,
        fetch_time_ms: int,
        leader_end_offset: int,
        broker_epoch: int = -1,
    ) -> None:
        """Record a follower Fetch at ``fetch_offset`` (its LEO) seen when the leader's LEO was
        ``leader_end_offset``, sent by the follower's incarnation ``broker_epoch``."""
        self.unpark()
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_start_offset = log_start_offset
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = fetch_time_ms
        self.broker_epoch = broker_epoch

    def reset(self, now_ms: int, leader_end_offset: int, in_sync: bool, new_leader: bool = True) -> None:
        """A new leader epoch (Kafka's ``resetReplicaState``): the LEO is unknown until the follower
        fetches; a replica in the ISR counts as caught up now, so it is not shrunk out at once. The
        follower's broker epoch is forgotten only when this broker has just become the leader."""
        self.unpark()
        self.log_end_offset = -1
        self.log_start_offset = -1
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = now_ms if in_sync else 0
        self.last_caught_up_time_ms = now_ms if in_sync else 0
        if new_leader:
            self.broker_epoch = None

    def is_caught_up(self, leader_end_offset: int, now_ms: int, lag_max_ms: int) -> bool:
        """Kafka's ``ReplicaState.isCaughtUp``: at the leader's LEO, or caught up within the lag bound."""
        return self.log_end_offset >= leader_end_offset or now_ms - self.last_caught_up_time_ms <= lag_max_ms

    def __repr__(self) -> str:
        return (
            f"Replica(brokerId={self.broker_id}, logEndOffset={self.log_end_offset}, "
            f"lastCaughtUpTimeMs={self.last_caught_up_time_ms}, brokerEpoch={self.broker_epoch})"
        )
