"""Fetch (key 1): consumer (and follower) reads, zero-copy from the segment files.

Mirrors ``KafkaApis.handleFetchRequest``: resolve topic ids (v13+; unknown id -> UNKNOWN_TOPIC_ID),
build the fetch-session context (KIP-227), read through ``ReplicaManager.fetch_messages`` (which may
park a DelayedFetch for ``max_wait_ms``), and answer with each partition's records as a file region:
the response send is header bytes followed by ``os.sendfile`` regions, as Kafka's FileRecords transfer.
A consumer's v11+ request carries its ``rack_id`` (KIP-392): the leader may answer a partition with a
``preferred_read_replica`` and no records, and a follower serves it up to its high watermark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pykbroker.log.fetch_data_info import FetchIsolation
from pykbroker.protocol import errors
from pykbroker.protocol.acl import AclOperation
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.resource import CLUSTER_NAME, ResourceType
from pykbroker.server import error_responses
from pykbroker.server.broker_topic_stats import TopicFetchCounts
from pykbroker.server.fetch_session import IncrementalFetchContext, SessionErrorContext
from pykbroker.server.quotas.client_quota_manager import user_of
from pykbroker.server.replica_manager import FetchParams, FetchPartitionResult, PartitionFetch
from pykbroker.server.replica_selector import ClientMetadata

if TYPE_CHECKING:  # start-up time (issue 31): the generated message types are for the type checker only
    from pykbroker.protocol.messages.fetch import (
        FetchResponseResponsesPartitions,
        FetchResponseResponsesPartitionsAbortedTransactions,
    )


class FetchHandler:
    def __init__(self, helper, replica_manager, metadata_cache, fetch_manager):
        self.helper = helper
        self.replica_manager = replica_manager
        self.cache = metadata_cache
        self.fetch_manager = fetch_manager

    def handlers(self) -> dict:
        return {ApiKeys.FETCH: self.handle_fetch_request}

    def handle_fetch_request(self, request) -> None:
        body = request.body
        version = request.context.api_version
        replica_id = body["replica_id"] if version < 15 else body["replica_state"]["replica_id"]
        replica_epoch = -1 if version < 15 else body["replica_state"]["replica_epoch"]
        if replica_id >= 0:
            isolation = FetchIsolation.LOG_END
        elif body["isolation_level"] == 1:
            isolation = FetchIsolation.TXN_COMMITTED
        else:
            isolation = FetchIsolation.HIGH_WATERMARK
        context = self.fetch_manager.new_context_from_request(version, body, _TopicNames(self.cache))
        if isinstance(context, SessionErrorContext):
            self.helper.send_response(request, context.update_and_generate_response_data({}).to_body())
            return
        # Issue 31: a follower's incremental session skips its parked partitions (caught up, unchanged) and waits
        # on the session when nothing else is left to read.
        idle = context if replica_id >= 0 and isinstance(context, IncrementalFetchContext) else None
        now_ms = self.replica_manager.time.milliseconds() if idle is not None else 0
        self._serve(request, context, version, replica_id, replica_epoch, isolation, body, idle, True)
        if idle is not None:  # every partition still parked was fetched at the leader's LEO at now_ms
            clock = idle.session.clock
            if now_ms > clock.fetch_time_ms:  # never backwards (the next request may already be served)
                clock.fetch_time_ms = now_ms

    def _serve(self, request, context, version, replica_id, replica_epoch, isolation, body, idle, first) -> None:
        """Read the context's partitions and answer (or park a DelayedFetch). ``idle``: the context of a follower's
        incremental session (issue 31), else None; ``first``: False for the re-read of a DelayedSessionFetch,
        which answers at once."""
        # Partitions in the session's read order; unknown topic ids are answered without a read.
        wanted = context.partitions()
        if idle is not None:
            released = idle.take_released()
            if released:  # they are read (or dropped) now: their fetch times stop following the session clock
                self.replica_manager.unpark_followers(replica_id, released)
            if not wanted and first and body["max_wait_ms"] > 0:
                self.replica_manager.await_fetch_session_change(
                    body["max_wait_ms"],
                    idle.session,
                    lambda: self._serve(
                        request, context, version, replica_id, replica_epoch, isolation, body, idle, False
                    ),
                )
                return
        fetches = [
            PartitionFetch(
                p.topic,
                p.partition,
                p.fetch_offset,
                p.partition_max_bytes,
                p.current_leader_epoch,
                p.last_fetched_epoch,
                p.log_start_offset,
            )
            for p in wanted
            if p.topic is not None
        ]
        denied: set[str] = set()
        if self.helper.authorizer is not None:
            if replica_id >= 0:
                if not self.helper.authorize(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
                    denied = {f.topic for f in fetches}
            else:
                denied = {
                    t
                    for t in {f.topic for f in fetches}
                    if not self.helper.authorize(request, AclOperation.READ, ResourceType.TOPIC, t)
                }
            fetches = [f for f in fetches if f.topic not in denied]
        stats = self.replica_manager.broker_topic_stats
        from_consumer = replica_id < 0
        quotas = self.helper.quotas
        if not (from_consumer and quotas is not None and quotas.fetch.quotas_enabled):
            quotas = None
        max_bytes = body["max_bytes"]
        user, client_id = user_of(request.context.principal), request.context.client_id or ""
        if quotas is not None:  # no more than one quota window's worth (Kafka's getMaxValueInQuotaWindow)
            max_bytes = int(min(max_bytes, max(1.0, quotas.fetch.max_value_in_quota_window(user, client_id))))
        client_metadata = None
        if version >= 11:  # KIP-392: the client's rack, for the preferred read replica and follower reads
            ctx = request.context
            client_metadata = ClientMetadata(
                body.get("rack_id") or "", client_id, ctx.client_address, ctx.principal, ctx.listener_name
            )
        params = FetchParams(
            replica_id,
            body["max_wait_ms"] if first else 0,
            body["min_bytes"],
            max_bytes,
            isolation,
            replica_epoch,
            client_metadata,
        )

        def respond(results: list[tuple[PartitionFetch, FetchPartitionResult]]) -> None:
            by_tp = {(f.topic, f.partition): r for f, r in results}
            if from_consumer:  # BrokerTopicMetrics: bytes sent to consumers, partitions fetched, failures
                per_topic: dict[str, TopicFetchCounts] = {}
                for f, r in results:
                    if r.error_code == errors.UNKNOWN_TOPIC_OR_PARTITION:
                        continue  # no series for topics that do not exist
                    t = per_topic.get(f.topic)
                    if t is None:
                        t = per_topic[f.topic] = TopicFetchCounts()
                    t.bytes += r.records.size_in_bytes
                    t.partitions += 1
                    if r.error_code not in _EXPECTED_FETCH_ERRORS:
                        t.failed_partitions += 1
                stats.record_fetch(per_topic)
            elif self.replica_manager.leader_quota.throttles_any():
                # Kafka's sizeOfThrottledPartitions: a follower's bytes of throttled partitions count
                quota = self.replica_manager.leader_quota
                throttled = sum(r.records.size_in_bytes for f, r in results if quota.is_throttled(f.topic, f.partition))
                quota.record(throttled)
            partition_results: dict = {}
            for p in wanted:
                read = by_tp.get((p.topic, p.partition)) if p.topic is not None else None
                if p.topic in denied:
                    partition_results[p.key] = _partition_error(p.partition, errors.TOPIC_AUTHORIZATION_FAILED)
                elif read is None:
                    partition_results[p.key] = _partition_error(p.partition, errors.UNKNOWN_TOPIC_ID)
                else:
                    partition_results[p.key] = _partition_data(p.partition, read)
            # request_percentage (a consumer's fetch only; a follower's is exempt): over it, answered empty too
            request_ms = self.helper.record_request_quota(request) if from_consumer else 0
            if quotas is not None or request_ms > 0:
                # KIP-219: the bytes this response would carry count against the consumer's quota; over it (or over
                # its request quota), the fetcher gets an empty response (its session does not move) and its channel
                # is muted for the larger throttle.
                throttle_ms = 0
                if quotas is not None:
                    size = context.get_response_size(partition_results, version)
                    throttle_ms = quotas.fetch.record_and_get_throttle_time_ms(user, client_id, size)
                    if max(throttle_ms, request_ms) > 0:
                        quotas.fetch.unrecord(user, client_id, size)
                        self.helper.throttle(quotas.fetch, request, throttle_ms)
                if max(throttle_ms, request_ms) > 0:
                    self.helper.send_response(request, context.get_throttled_response(max(throttle_ms, request_ms)))
                    return
            leaders = _add_current_leaders(self.cache, partition_results, wanted) if version >= 12 else []
            response = context.update_and_generate_response_data(partition_results)
            if idle is not None and response.error_code == errors.NONE:
                self._park_caught_up(idle, replica_id, wanted, results)
            endpoints = self.cache.node_endpoints(leaders, request.context.listener_name) if version >= 16 else None
            self.helper.send_response(request, response.to_body(node_endpoints=endpoints))

        session = idle.session if idle is not None and idle.session.parked else None
        self.replica_manager.fetch_messages(params, fetches, respond, session)

    def _park_caught_up(self, idle, replica_id: int, wanted, results) -> None:
        """Issue 31: park the follower's session on the partitions it just read at the leader's LEO without
        records or error (the session has now sent their high watermark and log start offset): later fetches
        of the session skip them until they change (``ReplicaManager.park_followers``)."""
        keys = {(p.topic, p.partition): p.key for p in wanted}
        parkable = [
            (keys[(f.topic, f.partition)], f.topic, f.partition, f.fetch_offset, r.high_watermark, r.log_start_offset)
            for f, r in results
            if r.error_code == errors.NONE and r.diverging_epoch is None and r.records.size_in_bytes == 0
        ]
        if parkable:
            self.replica_manager.park_followers(replica_id, idle.session, parkable)


# Fetch errors that are the client's or the partition's state: not in FailedFetchRequestsPerSec (Kafka's
# ReplicaManager.readFromLocalLog counts only unexpected failures).
_EXPECTED_FETCH_ERRORS = frozenset(
    {
        errors.NONE,
        errors.UNKNOWN_TOPIC_OR_PARTITION,
        errors.NOT_LEADER_OR_FOLLOWER,
        errors.FENCED_LEADER_EPOCH,
        errors.UNKNOWN_LEADER_EPOCH,
        errors.OFFSET_OUT_OF_RANGE,
        errors.KAFKA_STORAGE_ERROR,
        errors.REPLICA_NOT_AVAILABLE,
    }
)


_LEADER_MOVED = frozenset({errors.NOT_LEADER_OR_FOLLOWER, errors.FENCED_LEADER_EPOCH})


def _add_current_leaders(cache, partition_results: dict, wanted) -> list[int]:
    """KIP-951 (Fetch v12+ ``current_leader``, v16+ ``node_endpoints``): partitions whose leader moved
    name the leader this broker knows. Returns the leaders' ids."""
    leaders = []
    for p in wanted:
        result = partition_results.get(p.key)
        if result is None or result["error_code"] not in _LEADER_MOVED or p.topic is None:
            continue
        current = cache.current_leader(p.topic, p.partition)
        if current is not None:
            result["current_leader"] = current
            leaders.append(current["leader_id"])
    return leaders


class _TopicNames:
    """The metadata cache's topic id -> name view, as the fetch session manager reads it."""

    __slots__ = ("cache",)

    def __init__(self, cache):
        self.cache = cache

    def get(self, topic_id, default=None):
        name = self.cache.topic_name(topic_id)
        return default if name is None else name

    def __getitem__(self, topic_id):
        name = self.cache.topic_name(topic_id)
        if name is None:
            raise KeyError(topic_id)
        return name

    def __contains__(self, topic_id) -> bool:
        return self.cache.topic_name(topic_id) is not None


def _partition_data(partition: int, r: FetchPartitionResult) -> FetchResponseResponsesPartitions:
    """The response's entry for what the ReplicaManager read of ``partition`` (the fields a version lacks are
    not written; ``diverging_epoch`` only when the fetcher's log diverged)."""
    data: FetchResponseResponsesPartitions = {
        "partition_index": partition,
        "error_code": r.error_code,
        "high_watermark": r.high_watermark,
        "last_stable_offset": r.last_stable_offset,
        "log_start_offset": r.log_start_offset,
        "aborted_transactions": _aborted(r),
        "preferred_read_replica": r.preferred_read_replica,
        "records": r.records,
    }
    if r.diverging_epoch is not None:
        epoch, end_offset = r.diverging_epoch
        data["diverging_epoch"] = {"epoch": epoch, "end_offset": end_offset}
    return data


def _partition_error(partition: int, code: int) -> FetchResponseResponsesPartitions:
    """The entry of a partition answered with ``code`` only (no offsets, no records)."""
    return _partition_data(partition, FetchPartitionResult(code))


@error_responses.register(ApiKeys.FETCH)
def _fetch_error(version, body, code, message):
    """``FetchRequest.getErrorResponse``: the top-level error (v7+); before v13 also on every requested
    partition (v4-6 have no top-level error code)."""
    responses = (
        []
        if version >= 13
        else [
            {
                "topic": t["topic"],
                "topic_id": t["topic_id"],
                "partitions": [_partition_error(p["partition"], code) for p in t["partitions"]],
            }
            for t in body["topics"]
        ]
    )
    return {"throttle_time_ms": 0, "error_code": code, "session_id": body.get("session_id", 0), "responses": responses}


def _aborted(r: FetchPartitionResult) -> list[FetchResponseResponsesPartitionsAbortedTransactions] | None:
    """Kafka's ``aborted_transactions``: the read_committed fetch's aborted transactions, null otherwise."""
    if r.error_code or r.aborted_transactions is None:
        return None
    return [{"producer_id": t.producer_id, "first_offset": t.first_offset} for t in r.aborted_transactions]
