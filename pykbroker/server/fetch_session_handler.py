"""FetchSessionHandler: the fetcher's side of a KIP-227 incremental fetch session with one broker.

Mirrors ``org.apache.kafka.clients.FetchSessionHandler`` as the replica fetcher uses it. The first Fetch is a
full one (session id 0 or the session to replace, epoch 0) listing every partition; when the broker answers with
a session id, later Fetches are incremental: they list only the partitions that are new or whose request data
(fetch offset, leader epochs, log start offset, max bytes) changed since the last request, and name the
partitions that left in ``forgotten_topics_data``. The broker answers only the partitions whose data changed
(records, HW, log start offset, errors), so an idle round trip carries no partitions at all.

Errors (Kafka's ``handleResponse`` / ``handleError``): FETCH_SESSION_ID_NOT_FOUND makes the next Fetch a full
one without a session id; any other top-level error, a response without a session, or a lost request (no answer:
the broker may or may not have advanced the session's epoch) makes the next Fetch a full one that closes the
session and asks for a new one.

Threading: not thread-safe; used only by the one fetcher thread that owns it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from pykbroker.protocol import errors

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
MAX_EPOCH = 2**31 - 1


class PartitionData(NamedTuple):
    """One partition's Fetch request fields (keyed by ``(topic, partition)`` beside its ``topic_id``)."""

    topic_id: object
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int

    def to_request(self, partition: int) -> dict:
        return {
            "partition": partition,
            "current_leader_epoch": self.current_leader_epoch,
            "fetch_offset": self.fetch_offset,
            "last_fetched_epoch": self.last_fetched_epoch,
            "log_start_offset": self.log_start_offset,
            "partition_max_bytes": self.partition_max_bytes,
        }


class FetchRequestData(NamedTuple):
    """What the next Fetch carries: ``session_id``/``session_epoch``, the ``topics`` and ``forgotten_topics_data``
    lists of the request (v13+ shape, topic ids), and whether it is a full fetch."""

    session_id: int
    session_epoch: int
    topics: list[dict]
    forgotten_topics_data: list[dict]
    is_full: bool


def _request(index: int, data: PartitionData) -> dict:
    return data.to_request(index)


def _group(items, value) -> list[dict]:
    by_topic: dict[object, list] = {}
    for (_topic, index), data in items:
        by_topic.setdefault(data.topic_id, []).append(value(index, data))
    return [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()]


class FetchSessionHandler:
    """The session state of one fetcher towards one broker (see the module docstring)."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        #: what the broker's session holds, as last sent: (topic, partition) -> PartitionData
        self.session_partitions: dict[tuple[str, int], PartitionData] = {}

    def build(self, next_partitions: Mapping[tuple[str, int], PartitionData]) -> FetchRequestData:
        """The request for ``next_partitions`` (every partition to fetch now, with its current request data)."""
        if self.epoch == INITIAL_EPOCH:
            self.session_partitions = dict(next_partitions)
            topics = _group(next_partitions.items(), _request)
            return FetchRequestData(self.session_id, INITIAL_EPOCH, topics, [], True)
        session = self.session_partitions
        changed = [(tp, data) for tp, data in next_partitions.items() if session.get(tp) != data]
        removed = [(tp, data) for tp, data in session.items() if tp not in next_partitions]
        for tp, data in changed:
            session[tp] = data
        for tp, _ in removed:
            del session[tp]
        topics = _group(changed, _request)
        forgotten = [
            {"topic_id": t["topic_id"], "partitions": t["partitions"]}
            for t in _group(removed, lambda index, _data: index)
        ]
        return FetchRequestData(self.session_id, self.epoch, topics, forgotten, False)

    def build_changes(self, changed: Mapping[tuple[str, int], PartitionData]) -> FetchRequestData:
        """The incremental request when the caller knows that only the partitions of ``changed`` may have new
        request data and none left (the fetcher's partitions processed in the last answer); the session must be
        open (not at the initial epoch). Same request as :meth:`build` over every partition would make."""
        assert self.epoch != INITIAL_EPOCH
        session = self.session_partitions
        items = [(tp, data) for tp, data in changed.items() if session.get(tp) != data]
        for tp, data in items:
            session[tp] = data
        return FetchRequestData(self.session_id, self.epoch, _group(items, _request), [], False)

    def handle_response(self, response: dict, was_full: bool) -> bool:
        """Move the session on after the broker's answer; False when the answer is a top-level error (the next
        Fetch is then a full one)."""
        code = response.get("error_code", errors.NONE)
        if code != errors.NONE:
            if code == errors.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = INVALID_SESSION_ID
            self.epoch = INITIAL_EPOCH
            return False
        session_id = response.get("session_id", INVALID_SESSION_ID)
        if session_id == INVALID_SESSION_ID or (not was_full and session_id != self.session_id):
            # no session (the broker's cache was full, or it closed ours): full fetches until one is made
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            return True
        self.session_id = session_id
        self.epoch = 1 if was_full else (self.epoch % MAX_EPOCH) + 1
        return True

    def handle_error(self) -> None:
        """The request got no answer: close the session with the next (full) Fetch and ask for a new one."""
        self.epoch = INITIAL_EPOCH
