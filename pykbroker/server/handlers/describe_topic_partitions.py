"""DescribeTopicPartitions (key 75, KIP-966): topics' partitions, paginated by a partition limit and a cursor.

Mirrors Kafka's ``DescribeTopicPartitionsRequestHandler`` and ``KRaftMetadataCache.
getTopicMetadataForDescribeTopicResponse``:

* no topics named: every topic the principal may DESCRIBE (others are left out, unknown names never arise);
  topics named: each one, TOPIC_AUTHORIZATION_FAILED for those it may not describe (after the authorized
  ones, without a topic id), UNKNOWN_TOPIC_OR_PARTITION or INVALID_TOPIC_EXCEPTION for those that do not
  exist;
* topics in name order, from the cursor's topic (``cursor.topic_name``) and, within it, from
  ``cursor.partition_index``; a named-topics request must name the cursor's topic and a cursor's partition
  must not be negative (INVALID_REQUEST);
* at most ``min(response_partition_limit, max.request.partition.size.limit)`` (and at least one) partitions;
  ``next_cursor`` names the first partition left out (the start of the next topic when the limit fell on a
  topic boundary), null when the answer is complete;
* per partition the leader (-1 when its broker has no endpoint on the request's listener), leader epoch,
  replicas, ISR, ELR and last-known ELR (null: pykbroker does not keep ELR yet) and the offline replicas
  (unregistered, fenced, or without the listener); per topic the authorized-operations bit field.

An unexpected error answers every named topic with its code (Kafka's ``DescribeTopicPartitionsRequest.
getErrorResponse``).

Runs on request handler threads; reads one metadata image per request.
"""

from __future__ import annotations

from pykbroker.metadata.topic_names import INTERNAL_TOPICS, validate
from pykbroker.protocol import errors
from pykbroker.protocol.acl import AclOperation
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.resource import ResourceType
from pykbroker.protocol.types import ZERO_UUID
from pykbroker.server import error_responses
from pykbroker.server.auth_helper import authorized_operations


class DescribeTopicPartitionsHandler:
    def __init__(self, helper, metadata_cache, max_partition_limit: int):
        """``max_partition_limit``: ``max.request.partition.size.limit``, the most partitions one answer
        carries whatever the request asks."""
        self.helper = helper
        self.cache = metadata_cache
        self.max_partition_limit = max_partition_limit

    def handlers(self) -> dict:
        return {ApiKeys.DESCRIBE_TOPIC_PARTITIONS: self.handle_describe_topic_partitions_request}

    def handle_describe_topic_partitions_request(self, request) -> None:
        body = request.body
        cursor = body.get("cursor")
        cursor_topic = cursor["topic_name"] if cursor is not None else ""
        fetch_all = not body["topics"]
        if fetch_all:
            names = {n for n in self.cache.topic_names() if n >= cursor_topic}
        else:
            names = {t["name"] for t in body["topics"] if t["name"] >= cursor_topic}
            if cursor is not None and cursor_topic not in names:
                raise errors.InvalidRequestError(
                    f"DescribeTopicPartitionsRequest topic list should contain the cursor topic: {cursor_topic}"
                )
        if cursor is not None and cursor["partition_index"] < 0:
            raise errors.InvalidRequestError(
                f"DescribeTopicPartitionsRequest cursor partition must be valid: {cursor['partition_index']}"
            )
        authorized, refused = [], []
        for name in sorted(names):
            if self.helper.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                authorized.append(name)
            elif not fetch_all:
                refused.append(_error_topic(name, errors.TOPIC_AUTHORIZATION_FAILED))
        limit = max(min(self.max_partition_limit, body["response_partition_limit"]), 1)
        start = {cursor_topic: cursor["partition_index"]} if cursor is not None else {}
        topics, next_cursor = self._describe(authorized, request.context.listener_name, start, limit, fetch_all)
        for t in topics:
            if t["error_code"] == errors.NONE:
                t["topic_authorized_operations"] = authorized_operations("TOPIC", True, self.helper, request, t["name"])
        self.helper.send_response(
            request, {"throttle_time_ms": 0, "topics": topics + refused, "next_cursor": next_cursor}
        )

    def _describe(
        self, names: list[str], listener: str, start: dict[str, int], limit: int, skip_errors: bool
    ) -> tuple[list[dict], dict | None]:
        """(topics, next cursor) for ``names`` (sorted), at most ``limit`` partitions in all."""
        image = self.cache.image
        topics: list[dict] = []
        remaining = limit
        for name in names:
            if remaining == 0:
                return topics, {"topic_name": name, "partition_index": 0}
            info = image.topics.by_name.get(name)
            if info is None:
                if not skip_errors:
                    topics.append(_error_topic(name, _missing_topic_error(name)))
                continue
            first = start.get(name, 0)
            upper = min(len(info.partitions), first + remaining)
            partitions = [
                self._partition(image.brokers, index, reg, listener)
                for index in range(first, upper)
                if (reg := info.partitions.get(index)) is not None
            ]
            topics.append(
                {
                    "error_code": errors.NONE,
                    "name": name,
                    "topic_id": info.id,
                    "is_internal": name in INTERNAL_TOPICS,
                    "partitions": partitions,
                }
            )
            if upper < len(info.partitions):
                return topics, {"topic_name": name, "partition_index": upper}
            remaining -= len(partitions)
        return topics, None

    @staticmethod
    def _partition(brokers, index: int, reg, listener: str) -> dict:
        leader = brokers.get(reg.leader)
        return {
            "error_code": errors.NONE,
            "partition_index": index,
            "leader_id": reg.leader if leader is not None and listener in leader.listeners else -1,
            "leader_epoch": reg.leader_epoch,
            "replica_nodes": list(reg.replicas),
            "isr_nodes": list(reg.isr),
            "eligible_leader_replicas": list(reg.elr),
            "last_known_elr": list(reg.last_known_elr),
            "offline_replicas": [
                r for r in reg.replicas if (b := brokers.get(r)) is None or b.fenced or listener not in b.listeners
            ],
        }


def _missing_topic_error(name: str) -> int:
    try:
        validate(name)
    except errors.InvalidTopicError:
        return errors.INVALID_TOPIC_EXCEPTION
    return errors.UNKNOWN_TOPIC_OR_PARTITION


def _error_topic(name: str, code: int) -> dict:
    return {"error_code": code, "name": name, "topic_id": ZERO_UUID, "is_internal": False, "partitions": []}


@error_responses.register(ApiKeys.DESCRIBE_TOPIC_PARTITIONS)
def _describe_topic_partitions_error(version, body, code, message):
    """Kafka's ``DescribeTopicPartitionsRequest.getErrorResponse``: each named topic with the error."""
    return {
        "throttle_time_ms": 0,
        "topics": [_error_topic(t.get("name") or "", code) for t in body.get("topics") or []],
        "next_cursor": None,
    }
