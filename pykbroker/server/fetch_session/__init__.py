"""Incremental fetch sessions (KIP-227), as Kafka's ``kafka.server.FetchSession`` implements them. Sans-IO.

Theory of operation
-------------------
A fetcher (consumer or follower) that polls many partitions would resend all of them, and get all of them back,
on every Fetch. With a session the broker remembers the partitions and what it last told the fetcher, so that:

* the fetcher's request lists only partitions whose parameters changed (new fetch offset, max bytes, ...) plus
  ``forgotten_topics_data`` for those it drops; the others are read with their cached parameters;
* the response lists only partitions with something new: records, a moved high watermark or log start offset,
  an error, a preferred read replica or a diverging epoch.

A request names its session by ``(session_id, session_epoch)``:

====================  ==============================================================================
id 0, epoch -1        sessionless full fetch (also every request < v7) -> :class:`SessionlessFetchContext`
id x, epoch -1        close session x, sessionless full fetch
id x, epoch 0         close session x (if any), full fetch, create a new session if the cache has room
                      -> :class:`FullFetchContext` (response session id: the new id, or 0 if none)
id x, epoch n > 0     incremental fetch in session x, which must expect epoch n -> :class:`IncrementalFetchContext`,
                      or :class:`SessionErrorContext` (FETCH_SESSION_ID_NOT_FOUND 70, INVALID_FETCH_SESSION_EPOCH
                      71, FETCH_SESSION_TOPIC_ID_ERROR 106)
====================  ==============================================================================

Epochs go 1, 2, ..., int32 max, 1, ... (:func:`next_epoch`). Sessions from v13+ requests key partitions by topic
id, older ones by name; a session never mixes the two.

Use from the Fetch handler::

    ctx = fetch_manager.new_context(version, req["session_id"], req["session_epoch"], req["topics"],
                                    req["forgotten_topics_data"], metadata_cache_topic_names, is_follower)
    results = {}                                   # PartitionKey -> partition response dict, in read order
    for p in ctx.partitions():                     # FetchPartition(topic_id, topic, partition, fetch_offset, ...)
        results[p.key] = read(p) if p.topic is not None else partition_response(p.partition, UNKNOWN_TOPIC_ID)
    error_code, session_id, responses = ctx.update_and_generate_response_data(results)

Threading: :class:`FetchManager`, :class:`FetchSessionCache` and contexts are safe to use from many handler
threads; locks are taken shard first, then session. Time comes from the injected ``Time`` (its monotonic clock).
"""

from pykbroker.server.fetch_session.cache import (
    DEFAULT_EVICTION_MS,
    DEFAULT_MAX_ENTRIES,
    INCREMENTAL_FETCH_SESSIONS_EVICTIONS_PER_SEC,
    NUM_INCREMENTAL_FETCH_PARTITIONS_CACHED,
    NUM_INCREMENTAL_FETCH_SESSIONS,
    FetchSessionCache,
    FetchSessionCacheShard,
)
from pykbroker.server.fetch_session.contexts import (
    FetchContext,
    FetchSessionResponse,
    FullFetchContext,
    IncrementalFetchContext,
    SessionErrorContext,
    SessionlessFetchContext,
    build_responses,
    response_size,
)
from pykbroker.server.fetch_session.fetch_manager import FetchManager
from pykbroker.server.fetch_session.fetch_metadata import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FetchMetadata,
    next_epoch,
)
from pykbroker.server.fetch_session.partitions import (
    CachedPartition,
    FetchPartition,
    PartitionKey,
    TopicIdPartition,
    fetch_data_from_request,
    forgotten_topics_from_request,
    is_diverging_epoch,
    is_from_follower,
    is_preferred_replica,
    partition_key,
    partition_response,
    records_size,
    replica_id_of,
)
from pykbroker.server.fetch_session.session import FetchSession

__all__ = [
    "DEFAULT_EVICTION_MS",
    "DEFAULT_MAX_ENTRIES",
    "FINAL_EPOCH",
    "INCREMENTAL_FETCH_SESSIONS_EVICTIONS_PER_SEC",
    "INITIAL_EPOCH",
    "INVALID_SESSION_ID",
    "NUM_INCREMENTAL_FETCH_PARTITIONS_CACHED",
    "NUM_INCREMENTAL_FETCH_SESSIONS",
    "CachedPartition",
    "FetchContext",
    "FetchManager",
    "FetchMetadata",
    "FetchPartition",
    "FetchSession",
    "FetchSessionCache",
    "FetchSessionCacheShard",
    "FetchSessionResponse",
    "FullFetchContext",
    "IncrementalFetchContext",
    "PartitionKey",
    "SessionErrorContext",
    "SessionlessFetchContext",
    "TopicIdPartition",
    "build_responses",
    "fetch_data_from_request",
    "forgotten_topics_from_request",
    "is_diverging_epoch",
    "is_from_follower",
    "is_preferred_replica",
    "next_epoch",
    "partition_key",
    "partition_response",
    "records_size",
    "replica_id_of",
    "response_size",
]
