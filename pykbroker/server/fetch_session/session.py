"""One incremental fetch session: its id, epoch and cached partitions (Kafka's ``FetchSession``)."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

from pykbroker.server.fetch_session.partitions import (
    CachedPartition,
    FetchPartition,
    PartitionKey,
    TopicIdPartition,
)


class FetchSession:
    """A fetch session.

    Threading: ``lock`` (re-entrant) guards every mutable field, including ``partition_map``; take it before
    reading or changing them. ``last_used_ms`` and ``cached_size`` are changed only by the cache shard holding
    the session (under both locks, shard lock first). Never take a shard lock while holding a session lock.

    ``partition_map`` keeps the session's partitions in fetch order (a dict used as Kafka's
    ``ImplicitLinkedHashCollection``): partitions that just returned records are moved to the end so the next
    read starts with the others. ``privileged`` sessions belong to followers. ``epoch`` is the epoch the next
    incremental request must carry. ``cached_size`` is the size the cache last accounted for (-1: not cached).
    """

    __slots__ = (
        "cached_size",
        "creation_ms",
        "epoch",
        "id",
        "last_used_ms",
        "lock",
        "partition_map",
        "privileged",
        "uses_topic_ids",
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
