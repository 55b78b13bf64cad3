"""One incremental fetch session: its id, epoch and cached partitions (Kafka's ``FetchSession``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping

from pykbroker.server.fetch_session.partitions import (
    CachedPartition,
    FetchPartition,
    PartitionKey,
    TopicIdPartition,
)
from pykbroker.server.replica import FollowerFetchClock


class FetchSession:
    """A fetch session.

    Threading: ``lock`` (re-entrant) guards every mutable field, including ``partition_map``; take it before
    reading or changing them. ``last_used_ms`` and ``cached_size`` are changed only by the cache shard holding
    the session (under both locks, shard lock first). Never take a shard lock while holding a session lock.

    ``partition_map`` keeps the session's partitions in fetch order (a dict used as Kafka's
    ``ImplicitLinkedHashCollection``): partitions that just returned records are moved to the end so the next
    read starts with the others. ``privileged`` sessions belong to followers. ``epoch`` is the epoch the next
    incremental request must carry. ``cached_size`` is the size the cache last accounted for (-1: not cached).

    Idle follower sessions (issue 31): ``parked`` holds the keys of partitions the leader parked (a caught-up ISR
    follower, nothing changed since: ``Partition.park_follower``); incremental fetches skip them (no read, no
    fetch-state update: the replicas follow ``clock`` instead) until the partition reports a change
    (:meth:`mark_changed`, from any thread, under ``changes_lock`` only) or the fetcher's request names it.
    ``waiter``, when set, is called once on the next change: a fetch with nothing to read waits on it.
    """

    __slots__ = (
        "cached_size",
        "changed",
        "changes_lock",
        "clock",
        "creation_ms",
        "epoch",
        "id",
        "last_used_ms",
        "lock",
        "parked",
        "partition_map",
        "privileged",
        "released",
        "uses_topic_ids",
        "waiter",
    )

    def __init__(
        self,
        session_id: int,
        privileged: bool,
        partition_map: dict[PartitionKey, CachedPartition],
        uses_topic_ids: bool,
        creation_ms: int,
        last_used_ms: int,
        epoch: int,
    ):
        self.id = session_id
        self.privileged = privileged
        self.partition_map = partition_map
        self.uses_topic_ids = uses_topic_ids
        self.creation_ms = creation_ms
        self.last_used_ms = last_used_ms
        self.epoch = epoch
        self.cached_size = -1
        self.lock = threading.RLock()
        self.parked: set[PartitionKey] = set()
        self.released: list[tuple[str, int]] = []
        self.changed: set[PartitionKey] = set()
        self.changes_lock = threading.Lock()
        self.waiter: Callable[[], None] | None = None
        self.clock = FollowerFetchClock()  # set by the Fetch handler (the broker clock, not last_used_ms)

    def mark_changed(self, key: PartitionKey) -> None:
        """Partition ``key`` may have changed: the next fetch reads it again; wakes the waiting fetch, if any."""
        with self.changes_lock:
            self.changed.add(key)
            waiter, self.waiter = self.waiter, None
        if waiter is not None:
            waiter()

    def changed_notifier(self, key: PartitionKey) -> Callable[[], None]:
        """The callable a partition calls when it changes (see ``Partition.park_follower``)."""
        return lambda: self.mark_changed(key)

    def take_changed(self) -> None:
        """Unpark the partitions changed since the last call (see :meth:`take_released`). Caller holds ``lock``."""
        with self.changes_lock:
            if not self.changed:
                return
            changed, self.changed = self.changed, set()
        self._release(changed)

    def _release(self, keys: Iterable[PartitionKey]) -> None:
        """Unpark ``keys``; those that were parked are remembered for :meth:`take_released`. Caller holds
        ``lock``."""
        parked = self.parked
        if not parked:
            return
        for key in keys:
            if key in parked:
                parked.discard(key)
                cached = self.partition_map.get(key)
                if cached is not None and cached.topic is not None:
                    self.released.append((cached.topic, cached.partition))

    def take_released(self) -> list[tuple[str, int]]:
        """``(topic, partition)`` of the partitions unparked since the last call: the leader must stop their
        replicas following this session's clock before the clock moves again. Caller holds ``lock``."""
        released = self.released
        if released:
            self.released = []
        return released

    def set_waiter(self, waiter: Callable[[], None] | None) -> bool:
        """Call ``waiter`` on the next change; False (and not set) if a change is already pending."""
        with self.changes_lock:
            if waiter is not None and self.changed:
                return False
            self.waiter = waiter
            return True

    @property
    def size(self) -> int:
        with self.lock:
            return len(self.partition_map)

    def is_empty(self) -> bool:
        with self.lock:
            return not self.partition_map

    def evictable_key(self) -> tuple[bool, int, int]:
        """The eviction order: unprivileged before privileged, then fewer partitions first, then by id."""
        with self.lock:
            return (self.privileged, self.cached_size, self.id)

    def get_fetch_offset(self, key: PartitionKey) -> int | None:
        with self.lock:
            cached = self.partition_map.get(key)
            return cached.fetch_offset if cached is not None else None

    def update(
        self, fetch_data: Mapping[PartitionKey, FetchPartition], to_forget: Iterable[TopicIdPartition]
    ) -> tuple[list[PartitionKey], list[PartitionKey], list[PartitionKey]]:
        """Apply an incremental request: add new partitions, update the parameters of known ones, drop
        forgotten ones. Returns the keys ``(added, updated, removed)``."""
        added: list[PartitionKey] = []
        updated: list[PartitionKey] = []
        removed: list[PartitionKey] = []
        with self.lock:
            for key, req in fetch_data.items():
                cached = self.partition_map.get(key)
                if cached is None:
                    self.partition_map[key] = CachedPartition(req)
                    added.append(key)
                else:
                    cached.update_request_params(req)
                    updated.append(key)
            if self.parked:
                self._release(updated)
                self._release(tp.key for tp in to_forget)
            for tp in to_forget:
                key = tp.key
                if self.partition_map.pop(key, None) is not None:
                    removed.append(key)
        return added, updated, removed

    def __repr__(self) -> str:
        return (
            f"FetchSession(id={self.id}, privileged={self.privileged}, "
            f"partitionMap.size={len(self.partition_map)}, usesTopicIds={self.uses_topic_ids}, "
            f"creationMs={self.creation_ms}, lastUsedMs={self.last_used_ms}, epoch={self.epoch})"
        )
