"""Share group membership APIs of the group coordinator (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe
(``KafkaApis.handleShareGroupHeartbeat`` / ``handleShareGroupDescribe``).

Translates requests to the :class:`~pykbroker.coordinator.group.group_coordinator.GroupCoordinator`'s share half
(:mod:`pykbroker.coordinator.group.share.heartbeat`) and its answers to responses. Share groups are on by default,
as in Kafka 4.2. Threading: stateless between requests; runs on the request handler threads (a heartbeat's
response may be sent from the thread that completes its ``__consumer_offsets`` append).
"""

from __future__ import annotations

from pykbroker.protocol import errors
from pykbroker.protocol.acl import AclOperation
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.resource import ResourceType
from pykbroker.server.auth_helper import authorized_operations


class ShareGroupHandlers:
    def __init__(self, helper, coordinator):
        self.helper = helper
        self.coordinator = coordinator

    def handlers(self) -> dict:
        return {
            ApiKeys.SHARE_GROUP_HEARTBEAT: self.handle_share_group_heartbeat_request,
            ApiKeys.SHARE_GROUP_DESCRIBE: self.handle_share_group_describe_request,
        }

    def handle_share_group_heartbeat_request(self, request) -> None:
        """ShareGroupHeartbeat: READ on the group (GROUP_AUTHORIZATION_FAILED), then the coordinator's answer;
        errors carry their message (INVALID_REQUEST, GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
        GROUP_MAX_SIZE_REACHED, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE)."""
        body, ctx = request.body, request.context

        def error(code: int, message: str | None = None) -> None:
            self.helper.send_response(
                request,
                {
                    "throttle_time_ms": 0,
                    "error_code": code,
                    "error_message": message,
                    "member_id": None,
                    "member_epoch": 0,
                    "heartbeat_interval_ms": 0,
                    "assignment": None,
                },
            )

        if not self.helper.authorize(request, AclOperation.READ, ResourceType.GROUP, body["group_id"]):
            return error(errors.GROUP_AUTHORIZATION_FAILED)

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
