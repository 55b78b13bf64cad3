"""The share group handlers' authorization (Kafka's ``KafkaApis.handleShareGroupHeartbeat`` /
``handleDescribeShareGroupOffsets``): READ on the group, DESCRIBE on every subscribed topic."""

from __future__ import annotations

from types import SimpleNamespace

from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.resource import ResourceType
from pykbroker.server.handlers.share_groups import ShareGroupHandlers
from pykbroker.server.request_helper import RequestHelper


class _Helper(RequestHelper):
    """RequestHelper (its error responses) with the authorizer and the response queue replaced."""

    def __init__(self, denied: set[tuple[int, str]]):
        self.denied = denied
        self.sent: list[dict] = []

    def authorize(self, request, operation, resource_type, name) -> bool:
        return (resource_type, name) not in self.denied

    def send_response(self, request, body) -> None:
        self.sent.append(body)


class _Share:
    def __init__(self):
        self.calls: list[dict] = []

    def heartbeat(self, body, client_id, client_host, respond):
        self.calls.append(body)
        respond(
            {
                "error_code": 0,
                "error_message": None,
                "member_id": "m",
                "member_epoch": 1,
                "heartbeat_interval_ms": 5000,
                "assignment": None,
            }
        )


def _request(topics):
    body = {"group_id": "g", "member_id": "m", "member_epoch": 0, "rack_id": None, "subscribed_topic_names": topics}
    context = SimpleNamespace(
        client_id="c", client_address="127.0.0.1", api_key=ApiKeys.SHARE_GROUP_HEARTBEAT, api_version=1
    )
    return SimpleNamespace(body=body, context=context)


def test_heartbeat_needs_describe_on_every_subscribed_topic_and_read_on_the_group():
    share = _Share()
    coordinator = SimpleNamespace(share=share)
    helper = _Helper({(ResourceType.TOPIC, "secret")})
    handlers = ShareGroupHandlers(helper, coordinator)
    handlers.handle_share_group_heartbeat_request(_request(["open", "secret"]))
    assert helper.sent[-1]["error_code"] == errors.TOPIC_AUTHORIZATION_FAILED and not share.calls
    handlers.handle_share_group_heartbeat_request(_request(["open"]))
    assert helper.sent[-1]["error_code"] == 0 and len(share.calls) == 1
    handlers.handle_share_group_heartbeat_request(_request(None))  # a plain heartbeat names no topic
    assert helper.sent[-1]["error_code"] == 0 and len(share.calls) == 2
    denied_group = ShareGroupHandlers(_Helper({(ResourceType.GROUP, "g")}), coordinator)
    denied_group.handle_share_group_heartbeat_request(_request(["open"]))
    assert denied_group.helper.sent[-1]["error_code"] == errors.GROUP_AUTHORIZATION_FAILED
