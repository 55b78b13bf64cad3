"""Share group APIs of the group coordinator (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe
(``KafkaApis.handleShareGroupHeartbeat`` / ``handleShareGroupDescribe``), and the admin offsets APIs
DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets (``handleDescribeShareGroupOffsets`` ...).

Translates requests to the :class:`~pykbroker.coordinator.group.group_coordinator.GroupCoordinator`'s share half
(:mod:`pykbroker.coordinator.group.share.heartbeat`) and its answers to responses. Share groups are on by default,
as in Kafka 4.2. Threading: stateless between requests; runs on the request handler threads (a heartbeat's
response may be sent from the thread that completes its ``__consumer_offsets`` append).
"""

from __future__ import annotations

import threading

from pykbroker.protocol import errors
from pykbroker.protocol.acl import AclOperation
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.resource import ResourceType
from pykbroker.protocol.types import ZERO_UUID
from pykbroker.server.auth_helper import authorized_operations


class ShareGroupHandlers:
    def __init__(self, helper, coordinator):
        self.helper = helper
        self.coordinator = coordinator

    def handlers(self) -> dict:
        return {
            ApiKeys.SHARE_GROUP_HEARTBEAT: self.handle_share_group_heartbeat_request,
            ApiKeys.SHARE_GROUP_DESCRIBE: self.handle_share_group_describe_request,
            ApiKeys.DESCRIBE_SHARE_GROUP_OFFSETS: self.handle_describe_share_group_offsets_request,
            ApiKeys.ALTER_SHARE_GROUP_OFFSETS: self.handle_alter_share_group_offsets_request,
            ApiKeys.DELETE_SHARE_GROUP_OFFSETS: self.handle_delete_share_group_offsets_request,
        }

    def handle_share_group_heartbeat_request(self, request) -> None:
        """ShareGroupHeartbeat: READ on the group (GROUP_AUTHORIZATION_FAILED), DESCRIBE on every subscribed topic
        named (TOPIC_AUTHORIZATION_FAILED, Kafka's ``handleShareGroupHeartbeat``), then the coordinator's answer;
        errors carry their message (INVALID_REQUEST, GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
        GROUP_MAX_SIZE_REACHED, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE)."""
        body, ctx = request.body, request.context

        def error(code: int, message: str | None = None) -> None:
            self.helper.send_error_response(request, code, message)

        if not self.helper.authorize(request, AclOperation.READ, ResourceType.GROUP, body["group_id"]):
            return error(errors.GROUP_AUTHORIZATION_FAILED)
        denied = [
            t
            for t in body.get("subscribed_topic_names") or []
            if not self.helper.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, t)
        ]
        if denied:  # Kafka: the subscription must be DESCRIBE-authorized as a whole
            return error(errors.TOPIC_AUTHORIZATION_FAILED)

        def respond(resp: dict) -> None:
            self.helper.send_response(request, dict(resp, throttle_time_ms=0))

        try:
            self.coordinator.share.heartbeat(body, ctx.client_id or "", f"/{ctx.client_address}", respond)
        except errors.KafkaError as e:
            return error(e.code, str(e) or None)
        return None

    def handle_share_group_describe_request(self, request) -> None:
        """ShareGroupDescribe: per group, DESCRIBE on it (GROUP_AUTHORIZATION_FAILED), then the coordinator's
        description (GROUP_ID_NOT_FOUND when missing or not a share group; NOT_COORDINATOR /
        COORDINATOR_LOAD_IN_PROGRESS from the partition's status)."""
        include = request.body.get("include_authorized_operations", False)
        groups = []
        for group_id in request.body["group_ids"]:
            blank = {"group_id": group_id, "group_state": "", "members": [], "error_message": None}
            if not self.helper.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
                groups.append(dict(blank, error_code=errors.GROUP_AUTHORIZATION_FAILED))
                continue
            try:
                described = self.coordinator.share.describe(group_id)
            except errors.KafkaError as e:
                groups.append(dict(blank, error_code=e.code, error_message=str(e) or None))
                continue
            if described["error_code"] == errors.NONE:
                described["authorized_operations"] = authorized_operations(
                    "GROUP", include, self.helper, request, group_id
                )
            groups.append(described)
        self.helper.send_response(request, {"throttle_time_ms": 0, "groups": groups})

    # -- the admin offsets APIs ----------------------------------------------------------------------------------
    def handle_describe_share_group_offsets_request(self, request) -> None:
        """DescribeShareGroupOffsets: per group, DESCRIBE on it (GROUP_AUTHORIZATION_FAILED), then per named topic
        DESCRIBE on it (TOPIC_AUTHORIZATION_FAILED on its partitions); the coordinator's answer (see
        :mod:`pykbroker.coordinator.group.share.offsets`; version 1 with each partition's ``lag``, KIP-1226).
        Answered once every group's Persister reads (and, v1, the partition leaders' latest offsets) completed."""
        groups = request.body["groups"]
        results: list[dict | None] = [None] * len(groups)
        remaining = [len(groups)]
        lock = threading.Lock()

        def one(i: int, entry: dict) -> None:
            results[i] = entry
            with lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                self.helper.send_response(request, {"throttle_time_ms": 0, "groups": results})

        if not groups:
            self.helper.send_response(request, {"throttle_time_ms": 0, "groups": []})
        for i, g in enumerate(groups):
            group_id = g["group_id"]
            if not self.helper.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
                one(i, _group_offsets_error(group_id, errors.GROUP_AUTHORIZATION_FAILED))
                continue
            topics = g.get("topics")
            denied: list[dict] = []
            if topics is not None:
                allowed = []
                for t in topics:
                    if self.helper.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, t["topic_name"]):
                        allowed.append(t)
                    else:
                        denied.append(_denied_topic(t))
                topics = allowed

            def respond(entry: dict, i=i, denied=denied) -> None:
                if denied:
                    entry = dict(entry, topics=list(entry["topics"]) + denied)
                one(i, entry)

            try:
                self.coordinator.share_offsets.describe(group_id, topics, respond, request.context.api_version >= 1)
            except errors.KafkaError as e:
                one(i, _group_offsets_error(group_id, e.code, str(e) or None))

    def handle_alter_share_group_offsets_request(self, request) -> None:
        """AlterShareGroupOffsets: READ on the group (GROUP_AUTHORIZATION_FAILED), READ on each topic
        (TOPIC_AUTHORIZATION_FAILED on its partitions); GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, NOT_COORDINATOR...
        at the top level."""
        self._change_offsets(request, AclOperation.READ, _denied_alter_topic, self.coordinator.share_offsets.alter)

    def handle_delete_share_group_offsets_request(self, request) -> None:
        """DeleteShareGroupOffsets: DELETE on the group (GROUP_AUTHORIZATION_FAILED), READ on each topic
        (TOPIC_AUTHORIZATION_FAILED); GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, NOT_COORDINATOR... at the top level."""
        self._change_offsets(request, AclOperation.DELETE, _denied_delete_topic, self.coordinator.share_offsets.delete)

    def _change_offsets(self, request, group_operation, denied_entry, change) -> None:
        """Alter/DeleteShareGroupOffsets: ``group_operation`` on the group, READ on each topic (a denied topic is
        answered by ``denied_entry(topic)``), then ``change(group_id, allowed_topics, respond)``; a KafkaError it
        raises is the top-level error."""
        body = request.body
        if not self.helper.authorize(request, group_operation, ResourceType.GROUP, body["group_id"]):
            return self._top_level_error(request, errors.GROUP_AUTHORIZATION_FAILED, "responses")
        allowed, denied = [], []
        for t in body["topics"]:
            if self.helper.authorize(request, AclOperation.READ, ResourceType.TOPIC, t["topic_name"]):
                allowed.append(t)
            else:
                denied.append(denied_entry(t))

        def respond(resp: dict) -> None:
            resp = dict(resp, responses=list(resp["responses"]) + denied, throttle_time_ms=0)
            self.helper.send_response(request, resp)

        try:
            change(body["group_id"], allowed, respond)
        except errors.KafkaError as e:
            return self._top_level_error(request, e.code, "responses", str(e) or None)
        return None

    def _top_level_error(self, request, code: int, field: str, message: str | None = None) -> None:
        self.helper.send_response(
            request, {"throttle_time_ms": 0, "error_code": code, "error_message": message, field: []}
        )


def _group_offsets_error(group_id: str, code: int, message: str | None = None) -> dict:
    return {"group_id": group_id, "topics": [], "error_code": code, "error_message": message}


def _denied_alter_topic(t: dict) -> dict:
    return {
        "topic_name": t["topic_name"],
        "topic_id": ZERO_UUID,
        "partitions": [
            {
                "partition_index": p["partition_index"],
                "error_code": errors.TOPIC_AUTHORIZATION_FAILED,
                "error_message": None,
            }
            for p in t["partitions"]
        ],
    }


def _denied_delete_topic(t: dict) -> dict:
    return {
        "topic_name": t["topic_name"],
        "topic_id": ZERO_UUID,
        "error_code": errors.TOPIC_AUTHORIZATION_FAILED,
        "error_message": None,
    }


def _denied_topic(t: dict) -> dict:
    return {
        "topic_name": t["topic_name"],
        "topic_id": ZERO_UUID,
        "partitions": [
            {
                "partition_index": p,
                "start_offset": -1,
                "leader_epoch": -1,
                "error_code": errors.TOPIC_AUTHORIZATION_FAILED,
                "error_message": None,
            }
            for p in t["partitions"]
        ],
    }
