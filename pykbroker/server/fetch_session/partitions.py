"""Partitions as fetch sessions see them: request data in, cached state, response-data tests.

* :class:`TopicIdPartition` / :class:`FetchPartition`: what a Fetch request asks for, one per partition, built
  from the decoded request by :func:`fetch_data_from_request` / :func:`forgotten_topics_from_request` (Kafka's
  ``FetchRequest.fetchData(topicNames)`` / ``forgottenTopics(topicNames)``).
* :func:`partition_key`: how partitions are told apart. ``(topic_id, partition)`` when the topic id is set
  (v13+), else ``(topic_name, partition)``: with topic ids, a partition whose name is not (yet) known is the same
  partition as one whose name is known. ``partition_results`` given to a context are keyed this way.
* :class:`CachedPartition`: the per-partition state a session keeps between requests, and the rule deciding
  whether an incremental response must carry a partition (:meth:`CachedPartition.maybe_update_response_data`).
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Iterable, Mapping
from typing import Any, NamedTuple

from pykbroker.protocol.types import ZERO_UUID

TOPIC_ID_VERSION = 13
"""Fetch v13+ names topics by id only."""

PartitionKey = tuple[Hashable, int]
"""``(topic_id, partition)`` for id-based partitions, ``(topic_name, partition)`` for name-based ones."""

INVALID_HIGH_WATERMARK = -1
INVALID_LOG_START_OFFSET = -1
INVALID_PREFERRED_REPLICA_ID = -1


def partition_key(topic_id: uuid.UUID, topic: str | None, partition: int) -> PartitionKey:
    """The identity of a partition inside a session (Kafka's ``CachedPartition`` equality)."""
    return (topic_id, partition) if topic_id != ZERO_UUID else (topic, partition)


class TopicIdPartition(NamedTuple):
    """A partition named by id and/or name; ``topic`` is None for an id the broker cannot resolve."""

    topic_id: uuid.UUID
    topic: str | None
    partition: int

    @property
    def key(self) -> PartitionKey:
        return partition_key(self.topic_id, self.topic, self.partition)


class FetchPartition(NamedTuple):
    """One partition to read, with the request parameters that apply to it (Kafka's ``TopicIdPartition`` plus
    ``FetchRequest.PartitionData``). Epochs are -1 when absent; ``log_start_offset`` is the fetcher's (followers
    send theirs, consumers -1)."""

    topic_id: uuid.UUID
    topic: str | None
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1

    @property
    def key(self) -> PartitionKey:
        return partition_key(self.topic_id, self.topic, self.partition)


# ------------------------------------------------------------------------------------------- request decoding


def _topic_of(
    version: int, topic: Mapping[str, Any], topic_names: Mapping[uuid.UUID, str]
) -> tuple[uuid.UUID, str | None]:
    if version < TOPIC_ID_VERSION:
        return ZERO_UUID, topic["topic"]
    topic_id = topic.get("topic_id") or ZERO_UUID
    return topic_id, topic_names.get(topic_id)


def fetch_data_from_request(
    version: int, topics: Iterable[Mapping[str, Any]], topic_names: Mapping[uuid.UUID, str]
) -> dict[PartitionKey, FetchPartition]:
    """The decoded ``topics`` of a Fetch request -> its partitions in request order, by key.

    Below v13 topics are named; from v13 the name comes from ``topic_names`` (None when the id is unknown, which
    the handler answers with UNKNOWN_TOPIC_ID). A partition listed twice keeps its first position and its last
    parameters, as a ``LinkedHashMap.put`` would.
    """
    out: dict[PartitionKey, FetchPartition] = {}
    for topic in topics:
        topic_id, name = _topic_of(version, topic, topic_names)
        for p in topic["partitions"]:
            fp = FetchPartition(
                topic_id,
                name,
                p["partition"],
                p["fetch_offset"],
                p["partition_max_bytes"],
                p.get("current_leader_epoch", -1),
                p.get("last_fetched_epoch", -1),
                p.get("log_start_offset", -1),
            )
            out[fp.key] = fp
    return out


def forgotten_topics_from_request(
    version: int, forgotten: Iterable[Mapping[str, Any]] | None, topic_names: Mapping[uuid.UUID, str]
) -> list[TopicIdPartition]:
    """The decoded ``forgotten_topics_data`` of a Fetch request (v7+) -> the partitions to drop from the session."""
    out: list[TopicIdPartition] = []
    for topic in forgotten or ():
        topic_id, name = _topic_of(version, topic, topic_names)
        out.extend(TopicIdPartition(topic_id, name, p) for p in topic["partitions"])
    return out


def replica_id_of(request: Mapping[str, Any]) -> int:
    """The fetching replica's id: ``replica_id`` before v15, ``replica_state.replica_id`` from v15; -1 for
    consumers."""
    replica_id = request.get("replica_id", -1)
    if replica_id == -1:
        state = request.get("replica_state") or {}
        replica_id = state.get("replica_id", -1)
    return replica_id


def is_from_follower(request: Mapping[str, Any]) -> bool:
    return replica_id_of(request) >= 0


# --------------------------------------------------------------------------------------- response data tests


def records_size(records: Any) -> int:
    """Bytes of a partition response's ``records`` (None, bytes-like, or a records object with
    ``size_in_bytes``)."""
    if records is None:
        return 0
    if isinstance(records, (bytes, bytearray)):
        return len(records)
    if isinstance(records, memoryview):
        return records.nbytes
    size = getattr(records, "size_in_bytes", None)
    if size is None:
        return len(records)
    return size() if callable(size) else size


def is_preferred_replica(resp: Mapping[str, Any]) -> bool:
    return resp.get("preferred_read_replica", INVALID_PREFERRED_REPLICA_ID) != INVALID_PREFERRED_REPLICA_ID


def is_diverging_epoch(resp: Mapping[str, Any]) -> bool:
    diverging = resp.get("diverging_epoch")
    return diverging is not None and diverging.get("epoch", -1) >= 0


def partition_response(partition: int, error_code: int) -> dict[str, Any]:
    """A partition response carrying only an error (Kafka's ``FetchResponse.partitionResponse``)."""
    return {
        "partition_index": partition,
        "error_code": error_code,
        "high_watermark": INVALID_HIGH_WATERMARK,
        "last_stable_offset": -1,
        "log_start_offset": INVALID_LOG_START_OFFSET,
        "aborted_transactions": None,
        "preferred_read_replica": INVALID_PREFERRED_REPLICA_ID,
        "records": None,
    }


# ----------------------------------------------------------------------------------------- cached partitions


class CachedPartition:
    """What a session remembers of one partition: the fetcher's last request parameters and the high watermark
    and log start offset last sent to it.

    ``fetcher_log_start_offset`` is the fetcher's log start offset (from its requests);
    ``local_log_start_offset`` is this broker's, as last returned. Not thread-safe: guarded by the owning
    :class:`~pykbroker.server.fetch_session.session.FetchSession`'s lock.
    """

    __slots__ = (
        "fetch_offset",
        "fetcher_log_start_offset",
        "high_watermark",
        "last_fetched_epoch",
        "leader_epoch",
        "local_log_start_offset",
        "max_bytes",
        "partition",
        "topic",
        "topic_id",
    )

    def __init__(self, req: FetchPartition, resp: Mapping[str, Any] | None = None):
        self.topic = req.topic
        self.topic_id = req.topic_id
        self.partition = req.partition
        self.max_bytes = req.partition_max_bytes
        self.fetch_offset = req.fetch_offset
        self.leader_epoch = req.current_leader_epoch
        self.fetcher_log_start_offset = req.log_start_offset
        self.last_fetched_epoch = req.last_fetched_epoch
        if resp is None:
            self.high_watermark = INVALID_HIGH_WATERMARK
            self.local_log_start_offset = INVALID_LOG_START_OFFSET
        else:
            self.high_watermark = resp.get("high_watermark", INVALID_HIGH_WATERMARK)
            self.local_log_start_offset = resp.get("log_start_offset", INVALID_LOG_START_OFFSET)

    @property
    def key(self) -> PartitionKey:
        return partition_key(self.topic_id, self.topic, self.partition)

    def req_data(self) -> FetchPartition:
        """The request parameters to read this partition with, as the fetcher last sent them."""
        return FetchPartition(
            self.topic_id,
            self.topic,
            self.partition,
            self.fetch_offset,
            self.max_bytes,
            self.leader_epoch,
            self.last_fetched_epoch,
            self.fetcher_log_start_offset,
        )

    def update_request_params(self, req: FetchPartition) -> None:
        self.max_bytes = req.partition_max_bytes
        self.fetch_offset = req.fetch_offset
        self.fetcher_log_start_offset = req.log_start_offset
        self.leader_epoch = req.current_leader_epoch
        self.last_fetched_epoch = req.last_fetched_epoch

    def maybe_resolve_unknown_name(self, topic_names: Mapping[uuid.UUID, str]) -> None:
        """Learn the name of a topic id that was unknown when the partition joined the session."""
        if self.topic is None:
            self.topic = topic_names.get(self.topic_id)

    def maybe_update_response_data(self, resp: Mapping[str, Any], update: bool) -> bool:
        """Whether an incremental response must carry this partition, given its response data; with ``update``,
        remember what is being sent.

        It must when records were read, the high watermark or log start offset moved, a preferred read replica
        was computed, there is an error (the cached high watermark then becomes -1 so the partition is sent again
        once the error clears), or the epoch diverged (the follower must truncate).
        """
        must_respond = records_size(resp.get("records")) > 0
        high_watermark = resp.get("high_watermark", INVALID_HIGH_WATERMARK)
        if self.high_watermark != high_watermark:
            must_respond = True
            if update:
                self.high_watermark = high_watermark
        log_start_offset = resp.get("log_start_offset", INVALID_LOG_START_OFFSET)
        if self.local_log_start_offset != log_start_offset:
            must_respond = True
            if update:
                self.local_log_start_offset = log_start_offset
        if is_preferred_replica(resp):
            must_respond = True
        if resp.get("error_code", 0) != 0:
            if update:
                self.high_watermark = INVALID_HIGH_WATERMARK
            must_respond = True
        if is_diverging_epoch(resp):
            must_respond = True
        return must_respond

    def __repr__(self) -> str:
        return (
            f"CachedPartition(topic={self.topic}, topicId={self.topic_id}, partition={self.partition}, "
            f"maxBytes={self.max_bytes}, fetchOffset={self.fetch_offset}, highWatermark={self.high_watermark}, "
            f"fetcherLogStartOffset={self.fetcher_log_start_offset}, "
            f"localLogStartOffset={self.local_log_start_offset})"
        )
