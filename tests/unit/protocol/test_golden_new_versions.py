"""Golden bytes for the versions Kafka 4.0-4.2 added that pykbroker serves: each new field at its place on the
wire, built by hand from Kafka's message JSON (Metadata v13, DescribeCluster v2, DescribeGroups v6, ListOffsets
v10, ListTransactions v2, Fetch v18, OffsetCommit v10, OffsetFetch v10)."""

from __future__ import annotations

import struct
import uuid

from pykbroker.protocol import ApiKeys, codec, request_schema, response_schema

TOPIC_ID = uuid.UUID("6a2d6a4b-53a4-4a86-9d3c-2b0e9f0b1c2d")


def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def cstr(s: str | None) -> bytes:
    """A compact (nullable) string: unsigned varint length + 1, then the bytes (lengths < 127 here)."""
    return b"\x00" if s is None else bytes([len(s) + 1]) + s.encode()


def request(api_key: int, version: int, body: dict) -> bytes:
    return codec.encode(request_schema(api_key), version, body)


def response(api_key: int, version: int, body: dict) -> bytes:
    return codec.encode(response_schema(api_key), version, body)


def decode_req(api_key: int, version: int, data: bytes) -> dict:
    return codec.decode(request_schema(api_key), version, data)[0]


def decode_resp(api_key: int, version: int, data: bytes) -> dict:
    return codec.decode(response_schema(api_key), version, data)[0]


def test_metadata_v13_response_ends_with_the_top_level_error_code():
    body = {
        "throttle_time_ms": 0,
        "brokers": [],
        "cluster_id": None,
        "controller_id": -1,
        "topics": [],
        "error_code": 129,
    }
    # throttle, brokers [], cluster_id null, controller_id, topics [], error_code, no tags
    expected = i32(0) + b"\x01" + b"\x00" + i32(-1) + b"\x01" + i16(129) + b"\x00"
    assert response(ApiKeys.METADATA, 13, body) == expected
    assert decode_resp(ApiKeys.METADATA, 13, expected)["error_code"] == 129
    assert response(ApiKeys.METADATA, 12, body) == expected[:-3] + b"\x00"  # v12: no error_code


def test_describe_cluster_v2_include_fenced_brokers_and_is_fenced():
    req = {"include_cluster_authorized_operations": False, "endpoint_type": 1, "include_fenced_brokers": True}
    assert request(ApiKeys.DESCRIBE_CLUSTER, 2, req) == b"\x00" + i8(1) + b"\x01" + b"\x00"
    assert request(ApiKeys.DESCRIBE_CLUSTER, 1, req) == b"\x00" + i8(1) + b"\x00"
    broker = {"broker_id": 2, "host": "h", "port": 9092, "rack": None, "is_fenced": True}
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": 1,
        "cluster_id": "c",
        "controller_id": 2,
        "brokers": [broker],
        "cluster_authorized_operations": -2147483648,
    }
    expected = (
        i32(0) + i16(0) + b"\x00" + i8(1) + cstr("c") + i32(2)
        + b"\x02" + i32(2) + cstr("h") + i32(9092) + b"\x00" + b"\x01" + b"\x00"  # broker: ..., rack, is_fenced, tags
        + i32(-2147483648) + b"\x00"
    )  # fmt: skip
    assert response(ApiKeys.DESCRIBE_CLUSTER, 2, body) == expected
    assert decode_resp(ApiKeys.DESCRIBE_CLUSTER, 2, expected)["brokers"] == [broker]


def test_describe_groups_v6_error_message_follows_the_error_code():
    group = {
        "error_code": 69,
        "error_message": "Group g not found.",
        "group_id": "g",
        "group_state": "",
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
        "authorized_operations": -2147483648,
    }
    expected = (
        i32(0) + b"\x02" + i16(69) + cstr("Group g not found.") + cstr("g") + cstr("") + cstr("") + cstr("")
        + b"\x01" + i32(-2147483648) + b"\x00" + b"\x00"
    )  # fmt: skip
    assert response(ApiKeys.DESCRIBE_GROUPS, 6, {"throttle_time_ms": 0, "groups": [group]}) == expected
    assert decode_resp(ApiKeys.DESCRIBE_GROUPS, 6, expected)["groups"] == [group]


def test_list_offsets_v10_request_ends_with_timeout_ms():
    body = {"replica_id": -1, "isolation_level": 0, "topics": [], "timeout_ms": 30000}
    assert request(ApiKeys.LIST_OFFSETS, 10, body) == i32(-1) + i8(0) + b"\x01" + i32(30000) + b"\x00"
    assert request(ApiKeys.LIST_OFFSETS, 9, body) == i32(-1) + i8(0) + b"\x01" + b"\x00"


def test_list_transactions_v2_request_ends_with_the_pattern():
    body = {"state_filters": [], "producer_id_filters": [], "duration_filter": -1, "transactional_id_pattern": "tx.*"}
    assert request(ApiKeys.LIST_TRANSACTIONS, 2, body) == b"\x01" + b"\x01" + i64(-1) + cstr("tx.*") + b"\x00"
    null = dict(body, transactional_id_pattern=None)
    assert request(ApiKeys.LIST_TRANSACTIONS, 2, null) == b"\x01" + b"\x01" + i64(-1) + b"\x00" + b"\x00"
    assert (
        decode_req(ApiKeys.LIST_TRANSACTIONS, 2, request(ApiKeys.LIST_TRANSACTIONS, 2, null))[
            "transactional_id_pattern"
        ]
        is None
    )


def _fetch_request(high_watermark: int) -> dict:
    partition = {
        "partition": 0,
        "current_leader_epoch": -1,
        "fetch_offset": 5,
        "last_fetched_epoch": -1,
        "log_start_offset": -1,
        "partition_max_bytes": 1024,
        "high_watermark": high_watermark,
    }
    return {
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1024,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic_id": TOPIC_ID, "partitions": [partition]}],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def test_fetch_v18_partition_high_watermark_is_tag_1():
    partition_fixed = i32(0) + i32(-1) + i64(5) + i32(-1) + i64(-1) + i32(1024)
    head = i32(0) + i32(0) + i32(1024) + i8(0) + i32(0) + i32(-1) + b"\x02" + TOPIC_ID.bytes + b"\x02"
    tail = b"\x00" + b"\x01" + cstr("") + b"\x00"  # topic tags, forgotten [], rack_id, request tags
    at_default = request(ApiKeys.FETCH, 18, _fetch_request(0x7FFFFFFFFFFFFFFF))
    assert at_default == head + partition_fixed + b"\x00" + tail  # the default (not supported) is not written
    assert at_default == request(ApiKeys.FETCH, 17, _fetch_request(7))  # v17 has no high_watermark
    tagged = request(ApiKeys.FETCH, 18, _fetch_request(7))
    assert tagged == head + partition_fixed + b"\x01" + b"\x01\x08" + i64(7) + tail  # one tag: 1, size 8, int64
    assert decode_req(ApiKeys.FETCH, 18, tagged)["topics"][0]["partitions"][0]["high_watermark"] == 7
    assert decode_req(ApiKeys.FETCH, 17, at_default)["topics"][0]["partitions"][0]["high_watermark"] == (1 << 63) - 1


def test_offset_commit_v10_names_topics_by_id():
    body = {
        "group_id": "g",
        "generation_id_or_member_epoch": 3,
        "member_id": "m",
        "group_instance_id": None,
        "topics": [
            {
                "topic_id": TOPIC_ID,
                "partitions": [
                    {
                        "partition_index": 1,
                        "committed_offset": 42,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }
    partition = i32(1) + i64(42) + i32(-1) + cstr("") + b"\x00"
    expected = cstr("g") + i32(3) + cstr("m") + b"\x00" + b"\x02" + TOPIC_ID.bytes + b"\x02" + partition + b"\x00\x00"
    assert request(ApiKeys.OFFSET_COMMIT, 10, body) == expected
    assert decode_req(ApiKeys.OFFSET_COMMIT, 10, expected)["topics"][0]["topic_id"] == TOPIC_ID
    resp = {
        "throttle_time_ms": 0,
        "topics": [{"topic_id": TOPIC_ID, "partitions": [{"partition_index": 1, "error_code": 100}]}],
    }
    resp_bytes = i32(0) + b"\x02" + TOPIC_ID.bytes + b"\x02" + i32(1) + i16(100) + b"\x00" + b"\x00" + b"\x00"
    assert response(ApiKeys.OFFSET_COMMIT, 10, resp) == resp_bytes
    assert response(ApiKeys.OFFSET_COMMIT, 9, dict(resp, topics=[dict(resp["topics"][0], name="t")]))[5:7] == cstr("t")


def test_offset_fetch_v10_names_topics_by_id():
    body = {
        "groups": [
            {
                "group_id": "g",
                "member_id": None,
                "member_epoch": -1,
                "topics": [{"topic_id": TOPIC_ID, "partition_indexes": [0]}],
            }
        ],
        "require_stable": True,
    }
    expected = cstr("g") + b"\x00" + i32(-1) + b"\x02" + TOPIC_ID.bytes + b"\x02" + i32(0) + b"\x00" + b"\x00"
    assert request(ApiKeys.OFFSET_FETCH, 10, body) == b"\x02" + expected + b"\x01" + b"\x00"
    partition = {
        "partition_index": 0,
        "committed_offset": 9,
        "committed_leader_epoch": 2,
        "metadata": "",
        "error_code": 0,
    }
    resp = {
        "throttle_time_ms": 0,
        "groups": [{"group_id": "g", "topics": [{"topic_id": TOPIC_ID, "partitions": [partition]}], "error_code": 0}],
    }
    resp_bytes = (
        i32(0) + b"\x02" + cstr("g") + b"\x02" + TOPIC_ID.bytes + b"\x02"
        + i32(0) + i64(9) + i32(2) + cstr("") + i16(0) + b"\x00"  # partition, tags
        + b"\x00" + i16(0) + b"\x00" + b"\x00"  # topic tags, group error, group tags, response tags
    )  # fmt: skip
    assert response(ApiKeys.OFFSET_FETCH, 10, resp) == resp_bytes
    assert decode_resp(ApiKeys.OFFSET_FETCH, 10, resp_bytes)["groups"][0]["topics"][0]["topic_id"] == TOPIC_ID
