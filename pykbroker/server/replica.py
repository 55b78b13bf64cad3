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

Threading: mutated only under the owning Partition's ``_state_lock``.
"""

from __future__ import annotations


class Replica:
    __slots__ = (
        "broker_id",
        "log_end_offset",
        "log_start_offset",
        "last_fetch_leader_log_end_offset",
        "last_fetch_time_ms",
        "last_caught_up_time_ms",
        "broker_epoch",
    )

    def __init__(self, broker_id: int):
        self.broker_id = broker_id
        self.log_end_offset = -1
        self.log_start_offset = -1
        self.last_fetch_leader_log_end_offset = -1
        self.last_fetch_time_ms = 0
        self.last_caught_up_time_ms = 0
        self.broker_epoch: int | None = None

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
