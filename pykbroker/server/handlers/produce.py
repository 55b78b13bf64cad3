"""Produce (key 0): validate and append record batches, answer per acks.

Mirrors ``KafkaApis.handleProduceRequest``: unknown topics get UNKNOWN_TOPIC_OR_PARTITION, null or
empty records INVALID_RECORD... then ``ReplicaManager.append_records``. acks=0: no response
(NoOpResponse) on success, the connection is closed on any error (the client cannot be told);
otherwise a ProduceResponse (possibly after the DelayedProduce for acks=-1).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from pykbroker.protocol import errors
from pykbroker.protocol.acl import AclOperation
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.produce_response import encode_produce_response_from_results
from pykbroker.protocol.resource import ResourceType
from pykbroker.server import error_responses
from pykbroker.server.append_result import AppendResults, ProducePartitionResult
from pykbroker.server.quotas.client_quota_manager import user_of

if TYPE_CHECKING:  # start-up time (issue 31): the generated message types are for the type checker only
    from pykbroker.protocol.messages.produce import (
        ProduceResponse,
        ProduceResponseResponses,
        ProduceResponseResponsesPartitionResponses,
    )

ADMIN_CLIENT_ID = "__admin_client"


class ProduceHandler:
    def __init__(self, helper, replica_manager, metadata_cache):
        self.helper = helper
        self.replica_manager = replica_manager
        self.cache = metadata_cache

    def handlers(self) -> dict:
        return {ApiKeys.PRODUCE: self.handle_produce_request}

    def handle_produce_request(self, request) -> None:
        body = request.body
        acks = body["acks"]
        if body.get("transactional_id") is None and _any_transactional_batch(body["topic_data"]):
            # Kafka: transactional records need a transactional id (WRITE on it with an authorizer).
            code = errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            response = _produce_error_response(request.context.api_version, body, code, None)
            if response is None:
                self.helper.close_connection(request)
            else:
                self.helper.send_response(request, response)
            return
        entries: dict[tuple[str, int], memoryview] = {}
        early: AppendResults = {}
        authorizer = self.helper.authorizer
        for topic in body["topic_data"]:
            name = topic["name"]
            known = self.cache.contains_topic(name)
            allowed = authorizer is None or self.helper.authorize(request, AclOperation.WRITE, ResourceType.TOPIC, name)
            for p in topic["partition_data"]:
                tp = (name, p["index"])
                records = p["records"]
                if not allowed:
                    early[tp] = ProducePartitionResult.error(errors.TOPIC_AUTHORIZATION_FAILED)
                elif not known:
                    early[tp] = ProducePartitionResult.error(errors.UNKNOWN_TOPIC_OR_PARTITION)
                elif records is None or len(records) == 0:
                    early[tp] = ProducePartitionResult.error(errors.INVALID_RECORD, "Produce request has no records")
                else:
                    entries[tp] = records

        def respond(results: AppendResults) -> None:
            if early:
                results = {**early, **results}
            throttle_ms = 0
            quotas = self.helper.quotas
            if quotas is not None and quotas.produce.quotas_enabled:  # KIP-219: answer now, mute the channel
                ctx = request.context
                throttle_ms = quotas.produce.record_and_get_throttle_time_ms(
                    user_of(ctx.principal), ctx.client_id or "", request.size
                )
                if throttle_ms > 0:
                    self.helper.throttle(quotas.produce, request, throttle_ms)
            if acks == 0:
                if any(r.error_code != errors.NONE for r in results.values()):
                    self.helper.close_connection(request)
                else:
                    self.helper.send_no_op_response(request)
                return
            # Kafka's ProduceResponse.errorCounts: one per partition (every partition of the request has a result
            # here or answers UNKNOWN_SERVER_ERROR in _response), counted here instead of walking the response
            counted: dict[int, int] = {}
            for r in results.values():
                counted[r.error_code] = counted.get(r.error_code, 0) + 1
            # a partition named twice or without a result: the walk counts what is answered
            topics = body["topic_data"]
            partitions = len(topics[0]["partition_data"]) if len(topics) == 1 else _partition_count(body)
            counts = counted if len(results) == partitions else None
            # (the header's fields read directly: RequestContext's properties are a Python call each)
            leaders = request.context.header.api_version >= 10 and (
                counts is None or errors.NOT_LEADER_OR_FOLLOWER in counts
            )
            # the common answer: the frame written straight from the results (the same bytes as the body below)
            if (
                not leaders
                and counts is not None
                and self.helper.try_send_frame(
                    request,
                    encode_produce_response_from_results,
                    (topics, results, _NO_RESULT, throttle_ms),
                    counts,
                )
            ):
                return
            response = _response(body, results)
            response["throttle_time_ms"] = throttle_ms
            if leaders:
                self._add_current_leaders(response, request.context.listener_name)
            self.helper.send_response(request, response, counts=counts)

        if entries:
            internal = request.context.header.client_id == ADMIN_CLIENT_ID
            if body.get("transactional_id") is not None:
                # Produce v12 (KIP-890 part 2): the leader adds the partitions to the transaction itself
                self.replica_manager.handle_produce_append(
                    body["timeout_ms"],
                    acks,
                    internal,
                    body["transactional_id"],
                    entries,
                    respond,
                    add_partitions=request.context.api_version >= 12,
                )
            else:
                self.replica_manager.append_records(body["timeout_ms"], acks, internal, entries, respond)
        else:
            respond({})

    def _add_current_leaders(self, response: ProduceResponse, listener: str) -> None:
        """KIP-951: a NOT_LEADER_OR_FOLLOWER partition names the leader this broker knows (with its
        epoch), and ``node_endpoints`` gives that leader's address on the request's listener, so the
        client can retry without a Metadata round trip."""
        leaders: list[int] = []
        for topic in response["responses"]:
            for p in topic["partition_responses"]:
                if p["error_code"] != errors.NOT_LEADER_OR_FOLLOWER:
                    continue
                current = self.cache.current_leader(topic["name"], p["index"])
                if current is not None:
                    p["current_leader"] = current
                    leaders.append(current["leader_id"])
        if leaders:
            response["node_endpoints"] = self.cache.node_endpoints(leaders, listener)


_LENGTH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")
_TRANSACTIONAL = 0x10


def _partition_count(body: dict) -> int:
    """The number of partition entries of a ProduceRequest body."""
    topics = body["topic_data"]
    if len(topics) == 1:
        return len(topics[0]["partition_data"])
    return sum(len(t["partition_data"]) for t in topics)


def _any_transactional_batch(topic_data: list) -> bool:
    """Whether any batch of any partition's records of a ProduceRequest has the transactional attribute (a walk
    over the batch headers, no parsing; null or empty records have none)."""
    attributes, length = _ATTRIBUTES.unpack_from, _LENGTH.unpack_from
    for topic in topic_data:
        for p in topic["partition_data"]:
            records = p["records"]
            if not records:
                continue
            position, size = 0, len(records)
            while position + 23 <= size:
                if attributes(records, position + 21)[0] & _TRANSACTIONAL:
                    return True
                position += 12 + length(records, position + 8)[0]
    return False


_NO_RESULT = ProducePartitionResult.error(errors.UNKNOWN_SERVER_ERROR)


def _response(body: dict, results: AppendResults) -> ProduceResponse:
    """The ProduceResponse for ``results``, in the request's topic and partition order (a partition without a
    result: UNKNOWN_SERVER_ERROR)."""
    responses: list[ProduceResponseResponses] = []
    for topic in body["topic_data"]:
        name = topic["name"]
        responses.append(
            {
                "name": name,
                "partition_responses": [
                    _partition_response(p["index"], results.get((name, p["index"])) or _NO_RESULT)
                    for p in topic["partition_data"]
                ],
            }
        )
    return {"responses": responses, "throttle_time_ms": 0}


def _partition_response(index: int, r: ProducePartitionResult) -> ProduceResponseResponsesPartitionResponses:
    """One partition's entry of the response (the fields a version lacks are not written)."""
    return {
        "index": index,
        "error_code": r.error_code,
        "base_offset": r.base_offset,
        "log_append_time_ms": r.log_append_time_ms,
        "log_start_offset": r.log_start_offset,
        "record_errors": [
            {"batch_index": e.batch_index, "batch_index_error_message": e.message} for e in r.record_errors
        ]
        if r.record_errors
        else [],
        "error_message": r.error_message,
    }


@error_responses.register(ApiKeys.PRODUCE)
def _produce_error_response(version, body, code, message):
    if body.get("acks") == 0:
        return None  # the client expects no answer: close the connection
    error = ProducePartitionResult.error(code, message)
    results = {(t["name"], p["index"]): error for t in body["topic_data"] for p in t["partition_data"]}
    return _response(body, results)
