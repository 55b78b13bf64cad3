"""ShareSessionCache: the share sessions of a broker (KIP-932), keyed by (group id, member id).

Mirrors Kafka's ``ShareSessionCache`` / ``ShareSession`` / ``ShareSessionContext``. A share consumer opens a session
with epoch 0 (a full ShareFetch naming its partitions), then sends epoch 1, 2, ... (incremental: partitions added by
``topics``, removed by ``forgotten_topics_data``), and closes it with epoch -1. Errors (Kafka's codes):
SHARE_SESSION_NOT_FOUND (no session for the member, epoch > 0 or -1), INVALID_SHARE_SESSION_EPOCH (the epoch is not
the session's next one; ShareAcknowledge with epoch 0), SHARE_SESSION_LIMIT_REACHED (``group.share.max.share.sessions``
sessions exist already).

Threading: every method takes the cache's lock; a session's fields are only read or changed through the cache.
"""

from __future__ import annotations

import threading
import uuid
from typing import NamedTuple

from pykbroker.protocol import errors

INITIAL_EPOCH = 0
FINAL_EPOCH = -1

TopicIdPartition = tuple[uuid.UUID, int]


class ShareSessionKey(NamedTuple):
    group_id: str
    member_id: str


class ShareSession:
    """One member's session: ``epoch`` is the epoch its next request must carry; ``partitions`` in insertion
    order (the fetch order)."""

    __slots__ = ("key", "epoch", "partitions", "connection_id")

    def __init__(self, key: ShareSessionKey, partitions: dict[TopicIdPartition, None], connection_id: str = ""):
        self.key = key
        self.epoch = 1
        self.partitions = partitions
        self.connection_id = connection_id


class SessionResult(NamedTuple):
    """What a request's session handling yields: ``error_code`` (top-level), the partitions to fetch, and the
    session replaced or closed (its member's records are to be released) if any."""

    error_code: int
    partitions: tuple[TopicIdPartition, ...] = ()
    removed: ShareSession | None = None


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class ShareSessionCache:
    """At most ``max_sessions`` sessions (``group.share.max.share.sessions``)."""

    def __init__(self, max_sessions: int):
        self.max_sessions = max_sessions
        self._lock = threading.Lock()
        self._sessions: dict[ShareSessionKey, ShareSession] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def partition_count(self) -> int:
        """The partitions of every cached session (Kafka's ShareSessionCache ``SharePartitionsCount`` gauge)."""
        with self._lock:
            return sum(len(s.partitions) for s in self._sessions.values())

    def get(self, key: ShareSessionKey) -> ShareSession | None:
        with self._lock:
            return self._sessions.get(key)

    def fetch_context(
        self,
        key: ShareSessionKey,
        epoch: int,
        added: list[TopicIdPartition],
        forgotten: list[TopicIdPartition],
        connection_id: str = "",
    ) -> SessionResult:
        """The session handling of a ShareFetch with ``epoch``, adding ``added`` and removing ``forgotten``."""
        with self._lock:
            session = self._sessions.get(key)
            if epoch == INITIAL_EPOCH:
                removed = self._sessions.pop(key, None)
                if len(self._sessions) >= self.max_sessions:
                    return SessionResult(errors.SHARE_SESSION_LIMIT_REACHED, (), removed)
                parts = dict.fromkeys(added)
                self._sessions[key] = ShareSession(key, parts, connection_id)
                return SessionResult(errors.NONE, tuple(parts), removed)
            if session is None:
                return SessionResult(errors.SHARE_SESSION_NOT_FOUND)
            if epoch == FINAL_EPOCH:
                del self._sessions[key]
                return SessionResult(errors.NONE, (), session)
            if epoch != session.epoch:
                return SessionResult(errors.INVALID_SHARE_SESSION_EPOCH)
            for tp in forgotten:
                session.partitions.pop(tp, None)
            for tp in added:
                session.partitions.setdefault(tp, None)
            session.epoch = next_epoch(session.epoch)
            session.connection_id = connection_id or session.connection_id
            return SessionResult(errors.NONE, tuple(session.partitions))

    def acknowledge_context(self, key: ShareSessionKey, epoch: int) -> SessionResult:
        """The session handling of a ShareAcknowledge: epoch 0 is invalid, -1 closes the session."""
        with self._lock:
            if epoch == INITIAL_EPOCH:
                return SessionResult(errors.INVALID_SHARE_SESSION_EPOCH)
            session = self._sessions.get(key)
            if session is None:
                return SessionResult(errors.SHARE_SESSION_NOT_FOUND)
            if epoch == FINAL_EPOCH:
                del self._sessions[key]
                return SessionResult(errors.NONE, (), session)
            if epoch != session.epoch:
                return SessionResult(errors.INVALID_SHARE_SESSION_EPOCH)
            session.epoch = next_epoch(session.epoch)
            return SessionResult(errors.NONE, tuple(session.partitions))

    def remove_connection(self, connection_id: str) -> list[ShareSession]:
        """Drop the sessions opened over ``connection_id`` (the client disconnected); returns them."""
        with self._lock:
            gone = [s for s in self._sessions.values() if connection_id and s.connection_id == connection_id]
            for s in gone:
                del self._sessions[s.key]
            return gone
