"""The share state handlers (83-87) and FindCoordinator's SHARE key type in process: a sender without CLUSTER_ACTION
on the cluster gets CLUSTER_AUTHORIZATION_FAILED on every partition (and on every SHARE key), a broker without a
share coordinator COORDINATOR_NOT_AVAILABLE, in the shape of each API's response (Kafka's KafkaApis)."""

from __future__ import annotations

import uuid

import pytest

from pykbroker.protocol import errors
from pykbroker.protocol.acl import AclOperation
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.resource import CLUSTER_NAME, ResourceType
from pykbroker.server.handlers.groups import GroupHandlers
from pykbroker.server.handlers.share_state import ShareStateHandlers
from pykbroker.server.request_helper import RequestHelper
from tests.unit.server.apis_harness import RecordingChannel, decode_sent, make_request, only_response

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


class _Deny:
    def __init__(self):
        self.asked: list = []

    def authorize(self, principal, address, operation, resource_type, name):
        self.asked.append((operation, resource_type, name))
        return False


def _body(api_key: int) -> dict:
    partition: dict = {"partition": 0}
    if api_key in (ApiKeys.READ_SHARE_GROUP_STATE, ApiKeys.READ_SHARE_GROUP_STATE_SUMMARY):
        partition["leader_epoch"] = 1
    if api_key == ApiKeys.INITIALIZE_SHARE_GROUP_STATE:
        partition.update(state_epoch=0, start_offset=0)
    if api_key == ApiKeys.WRITE_SHARE_GROUP_STATE:
        partition.update(state_epoch=0, leader_epoch=1, start_offset=0, state_batches=[])
    return {
        "group_id": "g",
        "topics": [
            {"topic_id": T1, "partitions": [partition, dict(partition, partition=1)]},
            {"topic_id": T2, "partitions": [partition]},
        ],
    }


API_KEYS = [
    ApiKeys.INITIALIZE_SHARE_GROUP_STATE,
    ApiKeys.READ_SHARE_GROUP_STATE,
    ApiKeys.WRITE_SHARE_GROUP_STATE,
    ApiKeys.DELETE_SHARE_GROUP_STATE,
    ApiKeys.READ_SHARE_GROUP_STATE_SUMMARY,
]


@pytest.mark.parametrize("api_key", API_KEYS)
@pytest.mark.parametrize(
    ("deny", "expected"), [(True, "CLUSTER_AUTHORIZATION_FAILED"), (False, "COORDINATOR_NOT_AVAILABLE")]
)
def test_every_partition_gets_the_request_level_error(api_key, deny, expected):
    channel = RecordingChannel()
    helper = RequestHelper(lambda request: channel, authorizer=_Deny() if deny else None)
    handlers = ShareStateHandlers(helper, None)
    handlers.handlers()[api_key](make_request(api_key, 0, _body(api_key)))
    _, body = decode_sent(only_response(channel), api_key, 0)
    got = [(r["topic_id"], p["partition"], p["error_code"]) for r in body["results"] for p in r["partitions"]]
    code = getattr(errors, expected)
    assert got == [(T1, 0, code), (T1, 1, code), (T2, 0, code)]
    if api_key in (ApiKeys.READ_SHARE_GROUP_STATE, ApiKeys.READ_SHARE_GROUP_STATE_SUMMARY):
        assert all(p["state_epoch"] == -1 and p["start_offset"] == -1 for r in body["results"] for p in r["partitions"])


def test_find_coordinator_share_keys_need_cluster_action():
    channel = RecordingChannel()
    deny = _Deny()
    helper = RequestHelper(lambda request: channel, authorizer=deny)
    groups = GroupHandlers(helper, None, None, None, None, None)
    key = "g:AAAAAAAAAAAAAAAAAAAAAQ:0"
    groups.handle_find_coordinator_request(
        make_request(ApiKeys.FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": [key, "x"]})
    )
    _, body = decode_sent(only_response(channel), ApiKeys.FIND_COORDINATOR, 6)
    assert [(c["key"], c["error_code"]) for c in body["coordinators"]] == [
        (key, errors.CLUSTER_AUTHORIZATION_FAILED),
        ("x", errors.CLUSTER_AUTHORIZATION_FAILED),
    ]
    assert deny.asked == [(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)]
