"""ShareFetch (key 78) and ShareAcknowledge (key 79): share consumers' reads and acknowledgements (KIP-932).

Mirrors ``KafkaApis.handleShareFetchRequest`` / ``handleShareAcknowledgeRequest``: READ on the group (else
GROUP_AUTHORIZATION_FAILED, top level) and on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions);
unknown topic ids get UNKNOWN_TOPIC_ID; the share session (:class:`~pykbroker.server.share.ShareSessionCache`) is
checked and moved first (its errors are top-level: SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH,
SHARE_SESSION_LIMIT_REACHED); the acknowledgements piggy-backed on a ShareFetch are applied before it reads (their
outcome per partition in ``acknowledge_error_code``), then the :class:`~pykbroker.server.share.SharePartitionManager`
reads and acquires (long poll up to ``max_wait_ms``). Records go out as the log's zero-copy batches, with the
``acquired_records`` ranges the consumer may deliver. A partition this broker does not lead gets
NOT_LEADER_OR_FOLLOWER with ``current_leader`` and the leader's ``node_endpoints``. A closing request (epoch -1)
only acknowledges, then releases what the member still holds; a ShareFetch with ``max_records`` 0 only
acknowledges (librdkafka's acknowledgement-only fetch).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future

from pykbroker.protocol import errors
from pykbroker.protocol.acl import AclOperation
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.resource import ResourceType
from pykbroker.record.file_records import EMPTY_RECORDS
from pykbroker.server import error_responses
from pykbroker.server.share.share_partition import AckBatch
from pykbroker.server.share.share_partition_manager import (
    ShareFetchParams,
    ShareFetchResult,
    ShareFetchTarget,
    SharePartitionManager,
)
from pykbroker.server.share.share_session_cache import FINAL_EPOCH, INITIAL_EPOCH, ShareSessionKey

_LEADER_MOVED = frozenset({errors.NOT_LEADER_OR_FOLLOWER, errors.FENCED_LEADER_EPOCH})


class ShareHandlers:
    def __init__(self, helper, metadata_cache, manager: SharePartitionManager):
        self.helper = helper
        self.cache = metadata_cache
        self.manager = manager

    def handlers(self) -> dict:
        return {ApiKeys.SHARE_FETCH: self.handle_share_fetch, ApiKeys.SHARE_ACKNOWLEDGE: self.handle_share_acknowledge}

    # -- shared steps --------------------------------------------------------------------------------
    def _top_error(self, request, code: int, fetch: bool) -> None:
        body: dict = {"throttle_time_ms": 0, "error_code": code, "responses": [], "node_endpoints": []}
        if fetch:
            body["acquisition_lock_timeout_ms"] = 0
        self.helper.send_response(request, body)

    def _resolve(self, request, topic_ids) -> tuple[dict[uuid.UUID, str], dict[uuid.UUID, int]]:
        """Topic names of ``topic_ids`` and the error of those that are unknown or not readable."""
        names: dict[uuid.UUID, str] = {}
        failed: dict[uuid.UUID, int] = {}
        for tid in dict.fromkeys(topic_ids):
            name = self.cache.topic_name(tid)
            if name is None:
                failed[tid] = errors.UNKNOWN_TOPIC_ID
            elif self.helper.authorizer is not None and not self.helper.authorize(
                request, AclOperation.READ, ResourceType.TOPIC, name
            ):
                failed[tid] = errors.TOPIC_AUTHORIZATION_FAILED
            else:
                names[tid] = name
        return names, failed

    def _acknowledge(self, group_id: str, member_id: str, topics, names, failed) -> dict[tuple, Future[int]]:
        """Apply the acknowledgements of ``topics`` (request topics); ``{(topic id, partition): future of code}``."""
        out: dict[tuple, Future[int]] = {}
        for t in topics:
            tid = t["topic_id"]
            for p in t["partitions"]:
                batches = p["acknowledgement_batches"]
                if not batches:
                    continue
                key = (tid, p["partition_index"])
                if tid in failed:
                    out[key] = _done(failed[tid])
                    continue
                acks = [AckBatch(b["first_offset"], b["last_offset"], b["acknowledge_types"]) for b in batches]
                target = ShareFetchTarget(tid, names[tid], p["partition_index"])
                out[key] = self.manager.acknowledge(group_id, member_id, target, acks)
        # BrokerTopicMetrics of the acknowledged topics (known and readable ones, as Kafka's handleAcknowledgements)
        counted = {key: f for key, f in out.items() if key[0] in names}
        if counted:
            _when_all(
                list(counted.values()),
                lambda: self.manager.record_acknowledge_request(
                    {names[tid] for tid, _p in counted},
                    {names[tid] for (tid, _p), f in counted.items() if f.result() != errors.NONE},
                ),
            )
        return out

    def _leader(self, tid: uuid.UUID, partition: int, code: int, leaders: list[int]) -> dict:
        if code in _LEADER_MOVED:
            name = self.cache.topic_name(tid)
            current = self.cache.current_leader(name, partition) if name is not None else None
            if current is not None:
                leaders.append(current["leader_id"])
                return current
        return {"leader_id": -1, "leader_epoch": -1}

    def _release(self, group_id: str, member_id: str, session) -> None:
        if session is not None:
            self.manager.release_session(group_id, member_id, list(session.partitions))

    # -- ShareFetch ----------------------------------------------------------------------------------
    def handle_share_fetch(self, request) -> None:
        body = request.body
        group_id, member_id, epoch = body["group_id"], body["member_id"], body["share_session_epoch"]
        if self.helper.authorizer is not None and not self.helper.authorize(
            request, AclOperation.READ, ResourceType.GROUP, group_id or ""
        ):
            self._top_error(request, errors.GROUP_AUTHORIZATION_FAILED, True)
            return
        topics = body["topics"]
        has_acks = any(p["acknowledgement_batches"] for t in topics for p in t["partitions"])
        if not group_id or not member_id or (epoch == INITIAL_EPOCH and has_acks):
            self._top_error(request, errors.INVALID_REQUEST, True)
            return
        requested = [(t["topic_id"], p["partition_index"]) for t in topics for p in t["partitions"]]
        forgotten = [(t["topic_id"], p) for t in body["forgotten_topics_data"] for p in t["partitions"]]
        key = ShareSessionKey(group_id, member_id)
        session = self.manager.session_cache.fetch_context(
            key, epoch, requested, forgotten, request.context.connection_id
        )
        if session.error_code != errors.NONE:
            self._top_error(request, session.error_code, True)
            return
        if epoch == INITIAL_EPOCH:
            self._release(group_id, member_id, session.removed)
        # librdkafka sends max_records 0 to acknowledge without fetching: nothing is acquired then
        to_fetch = list(session.partitions) if epoch != FINAL_EPOCH and body["max_records"] > 0 else []
        names, failed = self._resolve(request, [tid for tid, _ in requested + to_fetch])
        acks = self._acknowledge(group_id, member_id, topics, names, failed)
        if epoch == FINAL_EPOCH:
            self._release(group_id, member_id, session.removed)
        targets = [ShareFetchTarget(tid, names[tid], p) for tid, p in to_fetch if tid in names]
        errs = {(tid, p): failed[tid] for tid, p in to_fetch if tid in failed}
        params = ShareFetchParams(
            body["max_wait_ms"], body["min_bytes"], body["max_bytes"], body["max_records"], body["batch_size"]
        )
        lock_ms = self.manager.record_lock_duration_ms(group_id)

        def fetched(results: dict[ShareFetchTarget, ShareFetchResult]) -> None:
            _when_all(list(acks.values()), lambda: self._send_fetch(request, results, errs, acks, lock_ms))

        # the piggy-backed acknowledgements complete (their state write) before the fetch acquires: a record the
        # member released is AVAILABLE again for this fetch, a failed write leaves it ACQUIRED (rolled back)
        if targets:
            _when_all(list(acks.values()), lambda: self.manager.fetch(group_id, member_id, params, targets, fetched))
        else:
            fetched({})

    def _send_fetch(self, request, results, errs: dict, acks: dict, lock_ms: int) -> None:
        parts: dict[tuple, dict] = {}
        leaders: list[int] = []
        for t, r in results.items():
            if r.error_code == errors.NONE and not r.acquired and (t.topic_id, t.partition) not in acks:
                continue
            parts[(t.topic_id, t.partition)] = {
                "partition_index": t.partition,
                "error_code": r.error_code,
                "acknowledge_error_code": 0,
                "current_leader": self._leader(t.topic_id, t.partition, r.error_code, leaders),
                "records": r.records,
                "acquired_records": [
                    {"first_offset": a.first_offset, "last_offset": a.last_offset, "delivery_count": a.delivery_count}
                    for a in r.acquired
                ],
            }
        for (tid, p), code in errs.items():
            parts[(tid, p)] = _empty_partition(p, code, self._leader(tid, p, code, leaders))
        for (tid, p), f in acks.items():
            entry = parts.get((tid, p))
            if entry is None:
                entry = parts[(tid, p)] = _empty_partition(p, errors.NONE, {"leader_id": -1, "leader_epoch": -1})
            code = f.result()
            entry["acknowledge_error_code"] = code
            if code in _LEADER_MOVED:
                entry["current_leader"] = self._leader(tid, p, code, leaders)
        self.helper.send_response(
            request,
            {
                "throttle_time_ms": 0,
                "error_code": errors.NONE,
                "acquisition_lock_timeout_ms": lock_ms,
                "responses": _by_topic(parts),
                "node_endpoints": self.cache.node_endpoints(leaders, request.context.listener_name),
            },
        )

    # -- ShareAcknowledge ----------------------------------------------------------------------------
    def handle_share_acknowledge(self, request) -> None:
        body = request.body
        group_id, member_id, epoch = body["group_id"], body["member_id"], body["share_session_epoch"]
        if self.helper.authorizer is not None and not self.helper.authorize(
            request, AclOperation.READ, ResourceType.GROUP, group_id or ""
        ):
            self._top_error(request, errors.GROUP_AUTHORIZATION_FAILED, False)
            return
        if not group_id or not member_id:
            self._top_error(request, errors.INVALID_REQUEST, False)
            return
        key = ShareSessionKey(group_id, member_id)
        session = self.manager.session_cache.acknowledge_context(key, epoch)
        if session.error_code != errors.NONE:
            self._top_error(request, session.error_code, False)
            return
        topics = body["topics"]
        names, failed = self._resolve(request, [t["topic_id"] for t in topics])
        acks = self._acknowledge(group_id, member_id, topics, names, failed)
        if epoch == FINAL_EPOCH:
            self._release(group_id, member_id, session.removed)

        def send() -> None:
            leaders: list[int] = []
            parts = {
                (tid, p): {
                    "partition_index": p,
                    "error_code": f.result(),
                    "current_leader": self._leader(tid, p, f.result(), leaders),
                }
                for (tid, p), f in acks.items()
            }
            self.helper.send_response(
                request,
                {
                    "throttle_time_ms": 0,
                    "error_code": errors.NONE,
                    "responses": _by_topic(parts),
                    "node_endpoints": self.cache.node_endpoints(leaders, request.context.listener_name),
                },
            )

        _when_all(list(acks.values()), send)


@error_responses.register(ApiKeys.SHARE_FETCH)
def _share_fetch_error(version, body, code, message):
    """``ShareFetchRequest.getErrorResponse``: the top-level error only."""
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "error_message": message,
        "acquisition_lock_timeout_ms": 0,
        "responses": [],
        "node_endpoints": [],
    }


@error_responses.register(ApiKeys.SHARE_ACKNOWLEDGE)
def _share_acknowledge_error(version, body, code, message):
    """``ShareAcknowledgeRequest.getErrorResponse``: the top-level error only."""
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "responses": [], "node_endpoints": []}


def _empty_partition(partition: int, code: int, leader: dict) -> dict:
    return {
        "partition_index": partition,
        "error_code": code,
        "acknowledge_error_code": 0,
        "current_leader": leader,
        "records": EMPTY_RECORDS,
        "acquired_records": [],
    }


def _by_topic(parts: dict[tuple, dict]) -> list[dict]:
    topics: dict[uuid.UUID, list[dict]] = {}
    for (tid, _p), entry in parts.items():
        topics.setdefault(tid, []).append(entry)
    return [{"topic_id": tid, "partitions": ps} for tid, ps in topics.items()]


def _when_all(futures: list[Future], fn: Callable[[], None]) -> None:
    """Call ``fn`` once every future is done (on the thread completing the last one)."""
    if not futures:
        fn()
        return
    remaining = [len(futures)]
    lock = threading.Lock()

    def one(_f: Future) -> None:
        with lock:
            remaining[0] -= 1
            if remaining[0]:
                return
        fn()

    for f in futures:
        f.add_done_callback(one)


def _done(code: int) -> Future[int]:
    f: Future[int] = Future()
    f.set_result(code)
    return f
