"""Fetch contexts: how one Fetch request is read and answered, given its session (Kafka's ``FetchContext``s).

The handler gets a context from ``FetchManager.new_context``, reads the partitions it lists
(:meth:`FetchContext.partitions`), then turns the per-partition results into the response with
:meth:`FetchContext.update_and_generate_response_data`, or :meth:`FetchContext.get_throttled_response` when a
quota throttles the fetcher. ``partition_results`` maps each partition's key (:func:`~pykbroker.server.
fetch_session.partitions.partition_key`) to its response dict (the Fetch response's partition fields:
``error_code``, ``high_watermark``, ``last_stable_offset``, ``log_start_offset``, ``aborted_transactions``,
``preferred_read_replica``, ``records``, optionally ``diverging_epoch``/``current_leader``/``snapshot_id``);
``partition_index`` is set from the key.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import NamedTuple

from pykbroker.protocol import errors
from pykbroker.protocol.codec import Output, encode_into
from pykbroker.protocol.schemas import RESPONSES
from pykbroker.protocol.types import ZERO_UUID
from pykbroker.server.fetch_session.fetch_metadata import (
    INVALID_SESSION_ID,
    FetchMetadata,
    next_epoch,
)
from pykbroker.server.fetch_session.partitions import (
    CachedPartition,
    FetchPartition,
    PartitionKey,
    records_size,
)

PartitionResults = Mapping[PartitionKey, dict]
_FETCH_API_KEY = 1


class FetchSessionResponse(NamedTuple):
    """The session part of a Fetch response: top-level error, session id (0: none) and the ``responses`` topic
    list (``[{"topic", "topic_id", "partitions": [partition dicts]}]``)."""

    error_code: int
    session_id: int
    responses: list[dict]

    def to_body(self, throttle_time_ms: int = 0, node_endpoints: list[dict] | None = None) -> dict:
        """The complete Fetch response body, ready for the codec."""
        return {
            "throttle_time_ms": throttle_time_ms,
            "error_code": self.error_code,
            "session_id": self.session_id,
            "responses": self.responses,
            "node_endpoints": node_endpoints or [],
        }


def build_responses(
    results: Iterable[tuple[PartitionKey, dict]], known: Mapping[PartitionKey, FetchPartition | CachedPartition]
) -> list[dict]:
    """Group ``(key, partition response)`` pairs into the response's topic list, keeping their order: consecutive
    partitions of one topic share an entry, so a topic may appear twice if its partitions are not adjacent (as
    Kafka does). Topic id and name come from ``known``, else from the key."""
    topics: list[dict] = []
    last: dict | None = None
    for key, resp in results:
        entry = known.get(key)
        ident = key[0]
        topic_id: uuid.UUID
        name: str | None
        if entry is not None:
            topic_id, name = entry.topic_id, entry.topic
        elif isinstance(ident, uuid.UUID):
            topic_id, name = ident, None
        else:
            topic_id, name = ZERO_UUID, ident if isinstance(ident, str) else None
        resp["partition_index"] = key[1]
        if last is not None and (
            last["topic_id"] == topic_id if last["topic_id"] != ZERO_UUID else last["topic"] == name
        ):
            last["partitions"].append(resp)
        else:
            last = {"topic": name, "topic_id": topic_id, "partitions": [resp]}
            topics.append(last)
    return topics


def response_size(version: int, responses: list[dict]) -> int:
    """Encoded size of a Fetch response with these topics, records included (Kafka's ``FetchResponse.sizeOf``)."""
    out = Output()
    encode_into(
        out,
        RESPONSES[_FETCH_API_KEY],
        version,
        {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses},
    )
    return 4 + out.total_size()


class FetchContext:
    """What one Fetch request reads and how its response is made. Used by the one handler thread serving the
    request; contexts touching a session take that session's lock (see :class:`IncrementalFetchContext`)."""

    def partitions(self) -> list[FetchPartition]:
        """The partitions to read, in order (Kafka's ``foreachPartition``)."""
        return []

    @property
    def fetch_data(self) -> list[FetchPartition]:
        return self.partitions()

    def __iter__(self) -> Iterator[FetchPartition]:
        return iter(self.partitions())

    def get_fetch_offset(self, key: PartitionKey) -> int | None:
        return None

    def get_response_size(self, partition_results: PartitionResults, version: int) -> int:
        """Size of the response ``update_and_generate_response_data`` would make, without changing the session
        (for quotas: a throttled fetcher gets an empty response and its session must not move)."""
        return response_size(version, [])

    def update_and_generate_response_data(self, partition_results: PartitionResults) -> FetchSessionResponse:
        raise NotImplementedError

    def get_throttled_response(self, throttle_time_ms: int) -> dict:
        """The complete, partition-less response body for a throttled fetcher."""
        return FetchSessionResponse(errors.NONE, INVALID_SESSION_ID, []).to_body(throttle_time_ms)


class SessionErrorContext(FetchContext):
    """A request whose session could not be used (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
    FETCH_SESSION_TOPIC_ID_ERROR): nothing is read, the response carries only the error."""

    def __init__(self, error_code: int, metadata: FetchMetadata | None = None):
        self.error_code = error_code
        self.metadata = metadata if metadata is not None else FetchMetadata(INVALID_SESSION_ID, 0)

    def update_and_generate_response_data(self, partition_results: PartitionResults) -> FetchSessionResponse:
        return FetchSessionResponse(self.error_code, INVALID_SESSION_ID, [])


class SessionlessFetchContext(FetchContext):
    """A full fetch that wants no session (epoch FINAL, or every request before v7): read and return every
    requested partition; the response's session id is 0."""

    def __init__(self, fetch_data: Mapping[PartitionKey, FetchPartition]):
        self._fetch_data = fetch_data

    def partitions(self) -> list[FetchPartition]:
        return list(self._fetch_data.values())

    def get_fetch_offset(self, key: PartitionKey) -> int | None:
        req = self._fetch_data.get(key)
        return req.fetch_offset if req is not None else None

    def get_response_size(self, partition_results: PartitionResults, version: int) -> int:
        return response_size(version, build_responses(partition_results.items(), self._fetch_data))

    def update_and_generate_response_data(self, partition_results: PartitionResults) -> FetchSessionResponse:
        return FetchSessionResponse(
            errors.NONE, INVALID_SESSION_ID, build_responses(partition_results.items(), self._fetch_data)
        )


class FullFetchContext(SessionlessFetchContext):
    """A full fetch with epoch INITIAL: read and return every requested partition, and create a session for them
    if the cache finds room. The response's session id is the new session's, or 0 if none was created."""

    def __init__(
        self,
        time,
        cache,
        metadata: FetchMetadata,
        fetch_data: Mapping[PartitionKey, FetchPartition],
        uses_topic_ids: bool,
        is_from_follower: bool,
    ):
        super().__init__(fetch_data)
        self._time = time
        self._cache = cache
        self.metadata = metadata
        self.uses_topic_ids = uses_topic_ids
        self.is_from_follower = is_from_follower

    def _create_partitions(self, partition_results: PartitionResults) -> dict[PartitionKey, CachedPartition]:
        # Kafka caches exactly the partitions answered; a requested partition left out of the results is cached
        # too (as never answered) so that the session and the fetcher agree on what the session holds.
        cached: dict[PartitionKey, CachedPartition] = {}
        for key, resp in partition_results.items():
            req = self._fetch_data.get(key)
            if req is not None:
                cached[key] = CachedPartition(req, resp)
        for key, req in self._fetch_data.items():
            if key not in cached:
                cached[key] = CachedPartition(req)
        return cached

    def update_and_generate_response_data(self, partition_results: PartitionResults) -> FetchSessionResponse:
        shard = self._cache.get_next_cache_shard()
        session_id = shard.maybe_create_session(
            self._time.hi_res_milliseconds(),
            self.is_from_follower,
            len(self._fetch_data),
            self.uses_topic_ids,
            lambda: self._create_partitions(partition_results),
        )
        return FetchSessionResponse(
            errors.NONE, session_id, build_responses(partition_results.items(), self._fetch_data)
        )


class IncrementalFetchContext(FetchContext):
    """An incremental fetch in an existing session, whose epoch ``new_context`` has already advanced.

    Reads every partition of the session but the parked ones (issue 31); answers only those whose data changed
    (:meth:`CachedPartition.maybe_update_response_data`), remembering what it sent. If another request of the
    same session advanced the epoch meanwhile (a duplicate request), answers INVALID_FETCH_SESSION_EPOCH.
    Threading: every method takes the session lock.
    """

    def __init__(self, time, metadata: FetchMetadata, session, topic_names: Mapping[uuid.UUID, str]):
        self._time = time
        self.metadata = metadata
        self.session = session
        self._topic_names = topic_names

    def partitions(self) -> list[FetchPartition]:
        """The session's partitions to read, in its order, but for the parked ones (issue 31: a follower's
        caught-up, unchanged partitions, see :class:`~pykbroker.server.fetch_session.session.FetchSession`):
        partitions changed since the last call are unparked first. Empty when every partition is parked."""
        session = self.session
        with session.lock:
            partition_map = session.partition_map
            parked = session.parked
            session.take_changed()
            if parked:
                if len(parked) >= len(partition_map):
                    return []
                to_read = [cached for key, cached in partition_map.items() if key not in parked]
            else:
                to_read = list(partition_map.values())
            if session.uses_topic_ids:
                for cached in to_read:
                    cached.maybe_resolve_unknown_name(self._topic_names)
            return [cached.req_data() for cached in to_read]

    def take_released(self) -> list[tuple[str, int]]:
        """``(topic, partition)`` of the partitions this session unparked since the last call (see
        :meth:`FetchSession.take_released`)."""
        with self.session.lock:
            return self.session.take_released()

    def get_fetch_offset(self, key: PartitionKey) -> int | None:
        return self.session.get_fetch_offset(key)

    def _epoch_is_current(self) -> bool:
        return self.session.epoch == next_epoch(self.metadata.epoch)

    def _select(self, partition_results: PartitionResults, update: bool) -> list[tuple[PartitionKey, dict]]:
        """The results the response must carry; with ``update``, remember them in the session and move
        partitions that returned records to the end of the session's order."""
        partition_map = self.session.partition_map
        selected: list[tuple[PartitionKey, dict]] = []
        for key, resp in partition_results.items():
            cached = partition_map.get(key)
            if cached is None:  # not a session partition (handler error): send it, do not cache it
                selected.append((key, resp))
            elif cached.maybe_update_response_data(resp, update):
                selected.append((key, resp))
                if update and records_size(resp.get("records")) > 0:
                    partition_map[key] = partition_map.pop(key)
        return selected

    def get_response_size(self, partition_results: PartitionResults, version: int) -> int:
        with self.session.lock:
            if not self._epoch_is_current():
                return response_size(version, [])
            return response_size(
                version, build_responses(self._select(partition_results, False), self.session.partition_map)
            )

    def update_and_generate_response_data(self, partition_results: PartitionResults) -> FetchSessionResponse:
        session = self.session
        with session.lock:
            if not self._epoch_is_current():
                return FetchSessionResponse(errors.INVALID_FETCH_SESSION_EPOCH, session.id, [])
            responses = build_responses(self._select(partition_results, True), session.partition_map)
            return FetchSessionResponse(errors.NONE, session.id, responses)

    def get_throttled_response(self, throttle_time_ms: int) -> dict:
        session = self.session
        with session.lock:
            error = errors.NONE if self._epoch_is_current() else errors.INVALID_FETCH_SESSION_EPOCH
            return FetchSessionResponse(error, session.id, []).to_body(throttle_time_ms)
