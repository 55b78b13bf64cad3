"""FetchManager: picks the fetch context of each Fetch request (Kafka's ``FetchManager.newContext``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from pykbroker.protocol import errors
from pykbroker.server.fetch_session.cache import FetchSessionCache
from pykbroker.server.fetch_session.contexts import (
    FetchContext,
    FullFetchContext,
    IncrementalFetchContext,
    SessionErrorContext,
    SessionlessFetchContext,
)
from pykbroker.server.fetch_session.fetch_metadata import (
    FINAL_EPOCH,
    INVALID_SESSION_ID,
    FetchMetadata,
    next_epoch,
)
from pykbroker.server.fetch_session.partitions import (
    TOPIC_ID_VERSION,
    FetchPartition,
    PartitionKey,
    TopicIdPartition,
    fetch_data_from_request,
    forgotten_topics_from_request,
    is_from_follower,
)
from pykbroker.utils.logging import get_logger

SESSION_VERSION = 7
"""Fetch v7+ carries session id and epoch."""


class FetchManager:
    """Creates the :class:`FetchContext` of each Fetch request against the :class:`FetchSessionCache`.

    Threading: thread-safe, called by every request handler thread; it keeps no state of its own. A lookup and
    the update of the session found happen under the session's shard lock and then its session lock, so two
    requests racing on one session see consistent epochs: the second gets INVALID_FETCH_SESSION_EPOCH.
    """

    def __init__(self, cache: FetchSessionCache, time):
        self.cache = cache
        self.time = time
        self.log = get_logger("FetchManager")

    def new_context(
        self,
        version: int,
        session_id: int,
        session_epoch: int,
        fetch_data: Iterable[Mapping[str, Any]] | Mapping[PartitionKey, FetchPartition],
        forgotten: Iterable[Mapping[str, Any]] | Iterable[TopicIdPartition] | None,
        topic_names_by_id: Mapping[uuid.UUID, str],
        is_follower: bool,
    ) -> FetchContext:
        """The context of a Fetch request.

        ``fetch_data`` / ``forgotten`` are the decoded request's ``topics`` / ``forgotten_topics_data`` lists
        (or already converted by :func:`fetch_data_from_request` / :func:`forgotten_topics_from_request`);
        ``topic_names_by_id`` resolves v13+ topic ids (the metadata cache's id -> name map; unused below v13).

        * epoch FINAL (-1) or INITIAL (0): a full fetch. Any session named is closed. FINAL gives a
          :class:`SessionlessFetchContext`; INITIAL a :class:`FullFetchContext`, which tries to create a session.
        * any other epoch: an incremental fetch of session ``session_id``. Unknown id -> FETCH_SESSION_ID_NOT_FOUND;
          epoch not the expected one -> INVALID_FETCH_SESSION_EPOCH; topic ids used by one of session and request
          but not the other -> FETCH_SESSION_TOPIC_ID_ERROR (:class:`SessionErrorContext`). Otherwise the request's
          partitions are added or updated and the forgotten ones removed; if none remain the session is closed and
          the request answered sessionless, else its epoch advances (:class:`IncrementalFetchContext`).
        """
        if version < SESSION_VERSION:
            session_id, session_epoch = INVALID_SESSION_ID, FINAL_EPOCH
        metadata = FetchMetadata(session_id, session_epoch)
        req_data = (
            fetch_data
            if isinstance(fetch_data, Mapping)
            else fetch_data_from_request(version, fetch_data, topic_names_by_id)
        )
        forgotten_list: list[Any] = list(forgotten or ())
        to_forget: list[TopicIdPartition] = (
            forgotten_list
            if all(isinstance(tp, TopicIdPartition) for tp in forgotten_list)
            else forgotten_topics_from_request(version, forgotten_list, topic_names_by_id)
        )
        uses_topic_ids = version >= TOPIC_ID_VERSION

        if metadata.is_full:
            if session_id != INVALID_SESSION_ID:
                # Any session named in a full fetch is closed.
                self.cache.remove(session_id)
            if session_epoch == FINAL_EPOCH:
                return SessionlessFetchContext(req_data)
            return FullFetchContext(self.time, self.cache, metadata, req_data, uses_topic_ids, is_follower)

        shard = self.cache.get_cache_shard(session_id)
        if shard is None:
            return self._session_error(errors.FETCH_SESSION_ID_NOT_FOUND, metadata, "no such session ID found")
        with shard.lock:
            session = shard.get(session_id)
            if session is None:
                return self._session_error(errors.FETCH_SESSION_ID_NOT_FOUND, metadata, "no such session ID found")
            with session.lock:
                if session.epoch != session_epoch:
                    return self._session_error(
                        errors.INVALID_FETCH_SESSION_EPOCH, metadata, f"expected epoch {session.epoch}"
                    )
                if session.uses_topic_ids != uses_topic_ids:
                    return self._session_error(
                        errors.FETCH_SESSION_TOPIC_ID_ERROR,
                        metadata,
                        f"session usesTopicIds={session.uses_topic_ids}, request version {version}",
                    )
                session.update(req_data, to_forget)
                if session.is_empty():
                    # No partitions left: close the session, answer this request without one.
                    shard.remove(session)
                    return SessionlessFetchContext(req_data)
                shard.touch(session, self.time.hi_res_milliseconds())
                session.epoch = next_epoch(session.epoch)
                return IncrementalFetchContext(self.time, metadata, session, topic_names_by_id)

    def new_context_from_request(
        self, version: int, request: Mapping[str, Any], topic_names_by_id: Mapping[uuid.UUID, str]
    ) -> FetchContext:
        """:meth:`new_context` for a decoded Fetch request body."""
        return self.new_context(
            version,
            request.get("session_id", INVALID_SESSION_ID),
            request.get("session_epoch", FINAL_EPOCH),
            request["topics"],
            request.get("forgotten_topics_data"),
            topic_names_by_id,
            is_from_follower(request),
        )

    def _session_error(self, error_code: int, metadata: FetchMetadata, why: str) -> SessionErrorContext:
        self.log.debug("Fetch session error", session=str(metadata), error=errors.name_of(error_code), reason=why)
        return SessionErrorContext(error_code, metadata)
