"""The broker's cache of fetch sessions (Kafka's ``FetchSessionCacheShard`` and ``FetchSessionCache``).

The cache holds at most ``max.incremental.fetch.session.cache.slots`` sessions, split over shards that each own a
range of session ids (Kafka's broker uses 8 shards; one shard behaves like the unsharded cache of Kafka < 3.8).
A new session gets a slot if its shard has room, or if it may evict a session (:meth:`FetchSessionCacheShard.
_try_evict`). Otherwise the broker answers session id 0 and the fetcher keeps sending full requests.
"""

from __future__ import annotations

import itertools
import random
import threading
from collections.abc import Callable

from pykbroker.server.fetch_session.fetch_metadata import (
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    next_epoch,
)
from pykbroker.server.fetch_session.partitions import CachedPartition, PartitionKey
from pykbroker.server.fetch_session.session import FetchSession
from pykbroker.utils.logging import get_logger
from pykbroker.utils.metrics import Meter, MetricsRegistry

INT32_MAX = 0x7FFFFFFF
DEFAULT_MAX_ENTRIES = 1000
"""``max.incremental.fetch.session.cache.slots``."""
DEFAULT_EVICTION_MS = 120_000
"""Kafka's ``MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS``: a session idle longer than this may always be evicted,
and only sessions older than this may be evicted for a larger one."""

_METRIC_GROUP = "kafka.server:type=FetchSessionCache"
NUM_INCREMENTAL_FETCH_SESSIONS = f"{_METRIC_GROUP},name=NumIncrementalFetchSessions"
NUM_INCREMENTAL_FETCH_PARTITIONS_CACHED = f"{_METRIC_GROUP},name=NumIncrementalFetchPartitionsCached"
INCREMENTAL_FETCH_SESSIONS_EVICTIONS_PER_SEC = f"{_METRIC_GROUP},name=IncrementalFetchSessionEvictionsPerSec"


class FetchSessionCacheShard:
    """The sessions whose ids fall in ``[max(1, shard_num * session_id_range), (shard_num + 1) *
    session_id_range)``.

    Threading: thread-safe; ``lock`` (re-entrant) guards all fields, and callers may hold it across several calls
    (``FetchManager`` does, to look a session up and update it atomically). Lock order: shard lock, then session
    lock; never the other way round.

    Bookkeeping, all keyed by session id: ``_sessions``; ``_last_used``, in least-recently-touched-first order
    (Kafka orders by (last used ms, id); touch order equals that on a monotonic clock, ties aside);
    ``_evictable_by_all`` and ``_evictable_by_privileged``, each mapping to the session's eviction key
    ``(privileged, size, id)`` as of its last touch. Finding the least valuable evictable session is a linear
    scan, done only when the shard is full.
    """

    def __init__(
        self,
        max_entries: int,
        evict_ms: int,
        session_id_range: int = INT32_MAX,
        shard_num: int = 0,
        evictions_meter: Meter | None = None,
        rng: random.Random | None = None,
    ):
        self.max_entries = max_entries
        self.evict_ms = evict_ms
        self.session_id_range = session_id_range
        self.shard_num = shard_num
        self.evictions_meter = evictions_meter if evictions_meter is not None else Meter()
        self.lock = threading.RLock()
        self._rng = rng if rng is not None else random.Random()
        self._sessions: dict[int, FetchSession] = {}
        self._last_used: dict[int, FetchSession] = {}
        self._evictable_by_all: dict[int, tuple[bool, int, int]] = {}
        self._evictable_by_privileged: dict[int, tuple[bool, int, int]] = {}
        self._num_partitions = 0
        self.log = get_logger("FetchSessionCache", shard=shard_num)

    def get(self, session_id: int) -> FetchSession | None:
        with self.lock:
            return self._sessions.get(session_id)

    @property
    def size(self) -> int:
        """Number of sessions in this shard."""
        with self.lock:
            return len(self._sessions)

    @property
    def total_partitions(self) -> int:
        """Number of partitions cached by this shard's sessions (as of their last touch)."""
        with self.lock:
            return self._num_partitions

    def new_session_id(self) -> int:
        """A random id in this shard's range, never 0 and not in use."""
        low = max(1, self.shard_num * self.session_id_range)
        high = (self.shard_num + 1) * self.session_id_range
        with self.lock:
            while True:
                session_id = self._rng.randrange(low, high)
                if session_id != INVALID_SESSION_ID and session_id not in self._sessions:
                    return session_id

    def maybe_create_session(
        self,
        now: int,
        privileged: bool,
        size: int,
        uses_topic_ids: bool,
        create_partitions: Callable[[], dict[PartitionKey, CachedPartition]],
    ) -> int:
        """Create a session if there is room or something may be evicted for it; its id, or 0 if none was made.

        ``size`` is the number of partitions the session will hold; ``create_partitions`` builds them (called
        under the shard lock, only when the session is created). The session's next expected epoch is 1.
        """
        with self.lock:
            if len(self._sessions) < self.max_entries or self._try_evict(privileged, (privileged, size, 0), now):
                session = FetchSession(
                    self.new_session_id(),
                    privileged,
                    create_partitions(),
                    uses_topic_ids,
                    now,
                    now,
                    next_epoch(INITIAL_EPOCH),
                )
                self._sessions[session.id] = session
                self.touch(session, now)
                self.log.debug("Created fetch session", session=session)
                return session.id
            self.log.debug("No fetch session created", privileged=privileged, size=size)
            return INVALID_SESSION_ID

    def _try_evict(self, privileged: bool, key: tuple[bool, int, int], now: int) -> bool:
        """Evict one session to make room for a new one with eviction ``key``; whether one was evicted.

        A new session A may evict an existing session B if B is stale (unused for more than ``evict_ms``: the
        least recently used is tried first), or else if A is privileged (a follower's) and B is not, or A has
        more partitions than B and B was not created recently. Recently created privileged sessions are never
        evicted but for staleness.
        """
        if not self._last_used:
            return False
        oldest = next(iter(self._last_used.values()))
        if now - oldest.last_used_ms > self.evict_ms:
            self.log.debug("Evicting stale fetch session", session_id=oldest.id)
            self.remove(oldest)
            self.evictions_meter.mark()
            return True
        candidates = self._evictable_by_privileged if privileged else self._evictable_by_all
        if not candidates:
            return False
        least = min(candidates.values())
        if key < least:
            return False
        self.log.debug("Evicting fetch session", evicted=least, by=key)
        self.remove(self._sessions[least[2]])
        self.evictions_meter.mark()
        return True

    def remove(self, session: FetchSession | int) -> FetchSession | None:
        """Remove a session (or the session with this id); the removed session, or None if it was not here."""
        with self.lock:
            if isinstance(session, int):
                found = self._sessions.get(session)
                if found is None:
                    return None
                session = found
            if self._sessions.get(session.id) is not session:
                return None
            with session.lock:
                cached_size = session.cached_size
            del self._sessions[session.id]
            self._last_used.pop(session.id, None)
            self._evictable_by_all.pop(session.id, None)
            self._evictable_by_privileged.pop(session.id, None)
            self._num_partitions -= cached_size
            return session

    def touch(self, session: FetchSession, now: int) -> None:
        """Mark a session used at ``now``: refresh its LRU position, eviction keys and partition count."""
        with self.lock, session.lock:
            self._last_used.pop(session.id, None)
            session.last_used_ms = now
            self._last_used[session.id] = session
            if session.cached_size != -1:
                self._num_partitions -= session.cached_size
            self._evictable_by_all.pop(session.id, None)
            self._evictable_by_privileged.pop(session.id, None)
            session.cached_size = len(session.partition_map)
            key = session.evictable_key()
            old_enough = now - session.creation_ms > self.evict_ms
            if not session.privileged or old_enough:
                self._evictable_by_privileged[session.id] = key
            if old_enough:
                self._evictable_by_all[session.id] = key
            self._num_partitions += session.cached_size


class FetchSessionCache:
    """All fetch sessions of the broker, over ``num_shards`` shards of ``max_entries // num_shards`` slots.

    Threading: thread-safe; each shard has its own lock. New sessions go to the shards in turn; a session id
    names its shard (``session_id // session_id_range``). Metrics (Kafka's names, group
    ``kafka.server:type=FetchSessionCache``): NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached,
    IncrementalFetchSessionEvictionsPerSec.
    """

    def __init__(
        self,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        evict_ms: int = DEFAULT_EVICTION_MS,
        num_shards: int = 1,
        metrics: MetricsRegistry | None = None,
        rng: random.Random | None = None,
    ):
        if num_shards < 1:
            raise ValueError(f"num_shards must be at least 1, not {num_shards}")
        self.metrics = metrics if metrics is not None else MetricsRegistry()
        self.evictions_meter = self.metrics.meter(INCREMENTAL_FETCH_SESSIONS_EVICTIONS_PER_SEC)
        self.session_id_range = INT32_MAX // num_shards
        self.shards = [
            FetchSessionCacheShard(
                max_entries // num_shards, evict_ms, self.session_id_range, n, self.evictions_meter, rng
            )
            for n in range(num_shards)
        ]
        self._counter = itertools.count()
        self.metrics.gauge(NUM_INCREMENTAL_FETCH_SESSIONS, lambda: self.num_sessions)
        self.metrics.gauge(NUM_INCREMENTAL_FETCH_PARTITIONS_CACHED, lambda: self.num_partitions)

    def get_cache_shard(self, session_id: int) -> FetchSessionCacheShard | None:
        """The shard owning ``session_id``, or None for an id no shard can have issued."""
        index = session_id // self.session_id_range if session_id > 0 else -1
        return self.shards[index] if 0 <= index < len(self.shards) else None

    def get_next_cache_shard(self) -> FetchSessionCacheShard:
        """The shard for the next new session, round robin."""
        return self.shards[next(self._counter) % len(self.shards)]

    def get(self, session_id: int) -> FetchSession | None:
        shard = self.get_cache_shard(session_id)
        return shard.get(session_id) if shard is not None else None

    def remove(self, session_id: int) -> FetchSession | None:
        shard = self.get_cache_shard(session_id)
        return shard.remove(session_id) if shard is not None else None

    @property
    def num_sessions(self) -> int:
        return sum(shard.size for shard in self.shards)

    @property
    def num_partitions(self) -> int:
        return sum(shard.total_partitions for shard in self.shards)

    @property
    def evictions(self) -> int:
        return int(self.evictions_meter.count)
