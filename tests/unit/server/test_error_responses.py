"""Every API KafkaApis handles answers an unexpected handler exception with that API's error response
(``AbstractRequest.getErrorResponse``), for every version it advertises -- never a closed connection
(acks=0 Produce excepted, as in Kafka)."""

from __future__ import annotations

import pytest

from pykbroker.network.request_channel import CloseConnectionResponse, SendResponse
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server import error_responses
from pykbroker.server.error_responses import build_error_response, schema_error_response
from tests.unit.server.apis_harness import (
    broker_apis,
    decode_sent,
    error_codes,
    make_request,
    minimal_body,
    only_response,
    recording_helper,
)

USE = errors.UNKNOWN_SERVER_ERROR


def _advertised() -> list[tuple[int, int]]:
    helper, _ = recording_helper()
    apis, manager = broker_apis(helper)
    assert set(manager.versions) == apis.implemented_apis  # every handled API is advertised
    return [(key, v) for key, (lo, hi) in sorted(manager.versions.items()) for v in range(lo, hi + 1)]


ADVERTISED = _advertised()


def _raise(request):
    raise RuntimeError("boom")


def _answer_to_raising_handler(api_key: int, version: int, body: dict):
    helper, channel = recording_helper()
    apis, _ = broker_apis(helper)
    apis.handlers[api_key] = _raise
    request = make_request(api_key, version, body, correlation_id=4242)
    apis.handle(request)
    return only_response(channel)


def test_all_broker_apis_are_covered():
    keys = {k for k, _ in ADVERTISED}
    assert len(keys) == 70  # 27 + DescribeQuorum + ElectLeaders + 8 transactions + 2 SASL + 2 SCRAM + 3 ACLs + DTP
    # + UpdateFeatures + 2 client quotas + 2 KIP-848 consumer group APIs + 2 partition reassignment APIs
    # + 4 delegation token APIs + 5 share coordinator APIs (83-87) + 7 share group APIs (76-79, 90-92)
    # + AddRaftVoter / RemoveRaftVoter (KIP-853, forwarded)
    assert {
        ApiKeys.FIND_COORDINATOR,
        ApiKeys.JOIN_GROUP,
        ApiKeys.SYNC_GROUP,
        ApiKeys.HEARTBEAT,
        ApiKeys.LEAVE_GROUP,
        ApiKeys.OFFSET_COMMIT,
        ApiKeys.OFFSET_FETCH,
        ApiKeys.OFFSET_DELETE,
        ApiKeys.DESCRIBE_GROUPS,
        ApiKeys.LIST_GROUPS,
        ApiKeys.DELETE_GROUPS,
        ApiKeys.DELETE_RECORDS,
    } <= keys
    # each has a builder of its own (the schema-built fallback is for APIs added later)
    assert keys <= set(error_responses._BUILDERS)


@pytest.mark.parametrize("api_key,version", ADVERTISED, ids=[f"{ApiKeys(k).name}-v{v}" for k, v in ADVERTISED])
def test_unexpected_exception_answers_unknown_server_error(api_key, version):
    response = _answer_to_raising_handler(api_key, version, minimal_body(api_key, version))
    assert isinstance(response, SendResponse), f"{ApiKeys(api_key).name} v{version}: {type(response).__name__}"
    correlation_id, body = decode_sent(response, api_key, version)
    assert correlation_id == 4242
    codes = error_codes(api_key, version, body)
    if api_key == ApiKeys.METADATA and version >= 13:
        # KIP-1102's top-level error code is not the request's error: MetadataRequest.getErrorResponse puts the
        # error on each requested topic only and leaves it NONE (REBOOTSTRAP_REQUIRED is the one code it carries)
        assert body["error_code"] == errors.NONE, body
        codes = codes[:-1]
    if api_key == ApiKeys.DESCRIBE_LOG_DIRS and version < 3:
        # Kafka's DescribeLogDirs error response has only a top-level error code, which v3 added
        assert codes == [] and body["results"] == [], body
        return
    assert codes, f"no error code in {body}"
    assert set(codes) == {USE}, body


def test_acks_0_produce_error_closes_the_connection():
    body = dict(minimal_body(ApiKeys.PRODUCE, 9), acks=0)
    assert isinstance(_answer_to_raising_handler(ApiKeys.PRODUCE, 9, body), CloseConnectionResponse)


def test_known_kafka_error_keeps_its_code():
    def raise_not_coordinator(request):
        raise errors.NotCoordinatorError("moved")

    helper, channel = recording_helper()
    apis, _ = broker_apis(helper)
    apis.handlers[ApiKeys.HEARTBEAT] = raise_not_coordinator
    apis.handle(make_request(ApiKeys.HEARTBEAT, 4, minimal_body(ApiKeys.HEARTBEAT, 4)))
    _, body = decode_sent(only_response(channel), ApiKeys.HEARTBEAT, 4)
    assert body["error_code"] == errors.NOT_COORDINATOR


# -- Kafka's shapes, per API -----------------------------------------------------------------------------


def _error(api_key, version, body):
    return build_error_response(api_key, version, body, USE, "boom")


def test_offset_fetch_shapes():
    v8 = _error(
        ApiKeys.OFFSET_FETCH,
        8,
        {
            "groups": [
                {"group_id": "a", "topics": None},
                {"group_id": "b", "topics": [{"name": "t", "partition_indexes": [0]}]},
            ]
        },
    )
    assert v8["groups"] == [
        {"group_id": "a", "topics": [], "error_code": USE},
        {"group_id": "b", "topics": [], "error_code": USE},
    ]
    request = {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}]}
    v1 = _error(ApiKeys.OFFSET_FETCH, 1, request)  # no top-level error code before v2: per partition
    assert [(p["partition_index"], p["committed_offset"], p["error_code"]) for p in v1["topics"][0]["partitions"]] == [
        (0, -1, USE),
        (1, -1, USE),
    ]
    v2 = _error(ApiKeys.OFFSET_FETCH, 2, request)
    assert v2["error_code"] == USE and v2["topics"] == []
    assert _error(ApiKeys.OFFSET_FETCH, 7, dict(request, topics=None))["topics"] == []


def test_group_api_shapes():
    fc = _error(ApiKeys.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["a", "b"]})
    assert [(c["key"], c["node_id"], c["port"], c["error_code"]) for c in fc["coordinators"]] == [
        ("a", -1, -1, USE),
        ("b", -1, -1, USE),
    ]
    assert _error(ApiKeys.FIND_COORDINATOR, 3, {"key": "a", "key_type": 0})["node_id"] == -1
    assert _error(ApiKeys.JOIN_GROUP, 7, {})["protocol_name"] is None
    assert _error(ApiKeys.JOIN_GROUP, 6, {})["protocol_name"] == ""
    leave = _error(ApiKeys.LEAVE_GROUP, 3, {"group_id": "g", "members": [{"member_id": "m"}]})
    assert leave["error_code"] == USE and leave["members"] == []
    delete = _error(ApiKeys.DELETE_GROUPS, 2, {"groups_names": ["a", "b"]})
    assert delete["results"] == [{"group_id": "a", "error_code": USE}, {"group_id": "b", "error_code": USE}]
    describe = _error(ApiKeys.DESCRIBE_GROUPS, 5, {"groups": ["a"]})
    assert [(g["group_id"], g["error_code"], g["members"]) for g in describe["groups"]] == [("a", USE, [])]
    offset_delete = _error(
        ApiKeys.OFFSET_DELETE, 0, {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]}
    )
    assert offset_delete["error_code"] == USE and offset_delete["topics"] == []
    commit = _error(
        ApiKeys.OFFSET_COMMIT,
        9,
        {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 3, "committed_offset": 5}]}]},
    )
    assert commit["topics"] == [{"name": "t", "partitions": [{"partition_index": 3, "error_code": USE}]}]


def test_share_group_api_shapes():
    hb = _error(
        ApiKeys.SHARE_GROUP_HEARTBEAT,
        1,
        {"group_id": "g", "member_id": "m", "member_epoch": 0, "rack_id": None, "subscribed_topic_names": ["t"]},
    )
    assert (hb["error_code"], hb["member_id"], hb["member_epoch"], hb["assignment"]) == (USE, None, 0, None)
    described = _error(
        ApiKeys.SHARE_GROUP_DESCRIBE, 1, {"group_ids": ["a", "b"], "include_authorized_operations": False}
    )
    assert [(g["group_id"], g["error_code"]) for g in described["groups"]] == [("a", USE), ("b", USE)]
    offsets = _error(ApiKeys.DESCRIBE_SHARE_GROUP_OFFSETS, 0, {"groups": [{"group_id": "g", "topics": None}]})
    assert offsets["groups"] == [{"group_id": "g", "topics": [], "error_code": USE, "error_message": None}]
    for key in (ApiKeys.ALTER_SHARE_GROUP_OFFSETS, ApiKeys.DELETE_SHARE_GROUP_OFFSETS):
        assert _error(key, 0, {"group_id": "g", "topics": []})["error_code"] == USE


def test_delete_records_mirrors_partitions_with_invalid_low_watermark():
    body = _error(
        ApiKeys.DELETE_RECORDS,
        2,
        {
            "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "offset": 5}, {"partition_index": 2, "offset": -1}]}
            ],
            "timeout_ms": 100,
        },
    )
    assert body["topics"] == [
        {
            "name": "t",
            "partitions": [
                {"partition_index": 0, "low_watermark": -1, "error_code": USE},
                {"partition_index": 2, "low_watermark": -1, "error_code": USE},
            ],
        }
    ]


def test_fetch_error_per_partition_before_v13_top_level_only_after():
    def request(version):
        return make_request(ApiKeys.FETCH, version, minimal_body(ApiKeys.FETCH, version)).body

    v6 = _error(ApiKeys.FETCH, 6, request(6))  # no top-level error code in v4-6
    assert [p["error_code"] for t in v6["responses"] for p in t["partitions"]] == [USE]
    v12 = _error(ApiKeys.FETCH, 12, request(12))
    assert v12["error_code"] == USE and v12["session_id"] == 1 and len(v12["responses"]) == 1
    v13 = _error(ApiKeys.FETCH, 13, request(13))
    assert v13["error_code"] == USE and v13["responses"] == []


def test_delete_topics_by_id_keeps_the_id():
    import uuid

    tid = uuid.uuid4()
    body = _error(ApiKeys.DELETE_TOPICS, 6, {"topics": [{"name": None, "topic_id": tid}], "timeout_ms": 1})
    assert body["responses"][0]["topic_id"] == tid and body["responses"][0]["name"] is None


def test_schema_built_fallback_for_an_api_without_a_builder():
    """An API with no registered builder still gets Kafka's generic shape from its response schema."""
    assert ApiKeys.UNREGISTER_BROKER not in error_responses._BUILDERS
    body = build_error_response(ApiKeys.UNREGISTER_BROKER, 0, {"broker_id": 3}, USE, "boom")
    assert (body["throttle_time_ms"], body["error_code"]) == (0, USE)
    body = schema_error_response(
        ApiKeys.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": "t"}], "cursor": None}, USE, "boom"
    )
    assert body["throttle_time_ms"] == 0
    assert [(t["name"], t["error_code"]) for t in body["topics"]] == [("t", USE)]  # mirrored by name
    assert schema_error_response(ApiKeys.HEARTBEAT, 4, {"group_id": "g"}, USE) == {
        "throttle_time_ms": 0,
        "error_code": USE,
    }


def test_no_body_closes_the_connection():
    assert build_error_response(ApiKeys.METADATA, 12, None, USE) is None


def test_unencodable_error_response_closes_the_connection(monkeypatch):
    """If the error response itself cannot be built, the client is not left waiting: close."""
    helper, channel = recording_helper()
    apis, _ = broker_apis(helper)
    apis.handlers[ApiKeys.HEARTBEAT] = _raise
    monkeypatch.setitem(error_responses._BUILDERS, ApiKeys.HEARTBEAT, lambda v, b, c, m: {"error_code": "not an int"})
    apis.handle(make_request(ApiKeys.HEARTBEAT, 4, minimal_body(ApiKeys.HEARTBEAT, 4)))
    assert isinstance(only_response(channel), CloseConnectionResponse)
