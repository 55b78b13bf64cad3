"""Golden bytes built by hand from the protocol spec, framing, deferred regions, tagged-field rules, errors."""

from __future__ import annotations

import struct
import uuid

import pytest

from pykbroker.protocol import (
    ApiKeys,
    ProtocolDecodeError,
    ProtocolEncodeError,
    codec,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    encode_response_parts,
    parse_request_header,
    request_schema,
    response_schema,
)
from pykbroker.protocol.errors import InvalidRequestError, UnsupportedVersionError


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def frame(*parts: bytes) -> bytes:
    body = b"".join(parts)
    return i32(len(body)) + body


TOPIC_ID = uuid.UUID("6a2d6a4b-53a4-4a86-9d3c-2b0e9f0b1c2d")


def test_api_versions_v3_request_as_librdkafka_sends_it():
    expected = frame(
        i16(18),
        i16(3),
        i32(1),
        i16(7),
        b"rdkafka",
        b"\x00",  # header v2
        b"\x0blibrdkafka",
        b"\x062.3.0",
        b"\x00",
    )  # compact strings, no tagged fields
    body = {"client_software_name": "librdkafka", "client_software_version": "2.3.0"}
    assert encode_request(ApiKeys.API_VERSIONS, 3, 1, "rdkafka", body) == expected
    header, size = parse_request_header(memoryview(expected)[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (18, 3, 1, "rdkafka")
    assert decode_request(18, 3, memoryview(expected)[4 + size :]) == body


def test_api_versions_v0_error_response():
    body = {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}]}
    assert encode_response(18, 0, 9, body) == frame(i32(9), i16(35), i32(1), i16(18), i16(0), i16(4))


def test_api_versions_v3_response_omits_tagged_fields_at_default():
    body = {
        "error_code": 0,
        "api_keys": [{"api_key": 3, "min_version": 0, "max_version": 12}],
        "throttle_time_ms": 0,
        "finalized_features_epoch": -1,
        "zk_migration_ready": False,
    }
    expected = frame(
        i32(2),  # response header v0 even though v3 is flexible
        i16(0),
        b"\x02",
        i16(3),
        i16(0),
        i16(12),
        b"\x00",
        i32(0),
        b"\x00",
    )
    assert encode_response(18, 3, 2, body) == expected
    with_features = dict(body, finalized_features_epoch=7)
    encoded = encode_response(18, 3, 2, with_features)
    assert encoded[-11:] == b"\x01\x01\x08" + i64(7)  # one tagged field: tag 1, size 8, int64
    assert decode_response(18, 3, encoded[8:])["finalized_features_epoch"] == 7


def metadata_v12_response_bytes(correlation_id: int) -> bytes:
    return frame(
        i32(correlation_id),
        b"\x00",  # response header v1
        i32(0),  # throttle_time_ms
        b"\x02",
        i32(1),
        b"\x0alocalhost",
        i32(9092),
        b"\x00",
        b"\x00",  # brokers: rack null, no tags
        b"\x04abc",  # cluster_id
        i32(1),  # controller_id
        b"\x02",
        i16(0),
        b"\x02t",
        TOPIC_ID.bytes,
        b"\x00",  # topics: error, name, id, is_internal
        b"\x02",
        i16(0),
        i32(0),
        i32(1),
        i32(5),  # partition: error, index, leader, leader epoch
        b"\x02" + i32(1),
        b"\x02" + i32(1),
        b"\x01",
        b"\x00",  # replicas, isr, offline (empty), no tags
        i32(-2147483648),
        b"\x00",  # topic_authorized_operations, no tags
        b"\x00",  # no tags (cluster_authorized_operations is v8-10 only)
    )


def test_metadata_v12_response():
    body = {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 1, "host": "localhost", "port": 9092, "rack": None}],
        "cluster_id": "abc",
        "controller_id": 1,
        "topics": [
            {
                "error_code": 0,
                "name": "t",
                "topic_id": TOPIC_ID,
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": 0,
                        "leader_id": 1,
                        "leader_epoch": 5,
                        "replica_nodes": [1],
                        "isr_nodes": [1],
                        "offline_replicas": [],
                    }
                ],
                "topic_authorized_operations": -2147483648,
            }
        ],
    }
    expected = metadata_v12_response_bytes(11)
    assert encode_response(ApiKeys.METADATA, 12, 11, body) == expected
    decoded = decode_response(ApiKeys.METADATA, 12, memoryview(expected)[9:])
    assert decoded == dict(body, cluster_authorized_operations=-2147483648, error_code=0)  # absent: defaults


def test_metadata_request_null_topics():
    assert encode_request(3, 1, 1, "c", {"topics": None}) == frame(i16(3), i16(1), i32(1), i16(1), b"c", i32(-1))
    assert decode_request(3, 1, i32(-1))["topics"] is None
    assert decode_request(3, 12, b"\x00\x01\x00\x00")["topics"] is None
    with pytest.raises(ProtocolDecodeError):
        decode_request(3, 0, i32(-1))  # v0: topics not nullable
    with pytest.raises(ProtocolEncodeError):
        encode_request(3, 0, 1, "c", {"topics": None})
    assert decode_request(3, 4, i32(0) + b"\x00") == {  # absent fields take their defaults
        "topics": [],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    assert decode_request(3, 3, i32(0))["allow_auto_topic_creation"] is True  # absent in v3: default true


def test_huge_array_count_in_a_message_is_rejected():
    with pytest.raises(ProtocolDecodeError):
        decode_request(3, 1, i32(2**31 - 1) + b"\x00" * 16)
    with pytest.raises(ProtocolDecodeError):
        decode_request(3, 12, b"\xff\xff\xff\xff\x07" + b"\x00" * 16)
    with pytest.raises(ProtocolDecodeError):  # nested: a Fetch partition list
        decode_request(1, 4, i32(-1) + i32(0) + i32(1) + i32(0) + b"\x00" + i32(1) + i16(1) + b"t" + i32(2**31 - 1))


def test_produce_v3_request_records_are_a_zero_copy_slice():
    records = b"\x00" * 61
    raw = frame(
        i16(0),
        i16(3),
        i32(4),
        i16(-1),  # header v1, null client id
        i16(-1),
        i16(-1),
        i32(30000),  # transactional_id null, acks -1, timeout
        i32(1),
        i16(5),
        b"topic",
        i32(1),
        i32(0),
        i32(len(records)),
        records,
    )
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": "topic", "partition_data": [{"index": 0, "records": records}]}],
    }
    assert encode_request(0, 3, 4, None, body) == raw
    buf = memoryview(raw)
    _, size = parse_request_header(buf[4:])
    decoded = decode_request(0, 3, buf[4 + size :])
    got = decoded["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(got, memoryview) and got.obj is raw and got == records
    assert decoded == body


class FakeRegion:
    """A deferred records region, as file records are: a size now, bytes later."""

    def __init__(self, data: bytes):
        self.data = data
        self.size_in_bytes = len(data)

    def write_to(self, sock, offset, max_bytes):  # pragma: no cover - the network layer's business
        raise NotImplementedError


def fetch_body(records):
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "t",
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": 0,
                        "high_watermark": 10,
                        "last_stable_offset": 10,
                        "log_start_offset": 0,
                        "diverging_epoch": {"epoch": 3, "end_offset": 9},
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": records,
                    }
                ],
            }
        ],
    }


@pytest.mark.parametrize("version", [4, 11, 12, 13, 16])
def test_fetch_response_with_a_deferred_region(version):
    data = bytes(range(100))
    region = FakeRegion(data)
    parts = encode_response_parts(ApiKeys.FETCH, version, 5, fetch_body(region))
    # records end the partition; flexible versions add the partition's and message's tagged sections after them
    assert [type(p) for p in parts] == [bytearray, FakeRegion] + ([bytearray] if version >= 12 else [])
    assert parts[1] is region
    whole = b"".join(p.data if p is region else bytes(p) for p in parts)
    assert struct.unpack_from(">i", whole)[0] == len(whole) - 4
    assert whole == encode_response(ApiKeys.FETCH, version, 5, fetch_body(data))
    offset = 4 + 4 + (1 if version >= 12 else 0)
    decoded = decode_response(ApiKeys.FETCH, version, memoryview(whole)[offset:])
    partition = decoded["responses"][0]["partitions"][0]
    assert partition["records"] == data
    assert partition["diverging_epoch"] == (
        {"epoch": 3, "end_offset": 9} if version >= 12 else {"epoch": -1, "end_offset": -1}
    )
    with pytest.raises(ProtocolEncodeError, match="deferred"):
        encode_response(ApiKeys.FETCH, version, 5, fetch_body(FakeRegion(data)))


def test_fetch_v12_tagged_diverging_epoch_bytes():
    schema = response_schema(ApiKeys.FETCH)
    partition = fetch_body(None)["responses"][0]["partitions"][0]
    part_schema = schema.fields[3].fields[2]  # responses -> partitions
    out = codec.Output()
    codec._struct_writer(part_schema.fields, 12, True)(out, partition)
    # ..., aborted_transactions null, preferred_read_replica, records null, one tag: 0, size 13, epoch, offset, 0
    assert bytes(out).endswith(b"\x00" + i32(-1) + b"\x00" + b"\x01\x00\x0d" + i32(3) + i64(9) + b"\x00")


def test_produce_response_tagged_current_leader():
    partition = {
        "index": 0,
        "error_code": 6,
        "base_offset": -1,
        "log_append_time_ms": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": None,
    }
    body = {"responses": [{"name": "t", "partition_responses": [partition]}], "throttle_time_ms": 0}
    plain = encode_response(0, 10, 1, body)
    assert plain.endswith(b"\x01\x00" + b"\x00" + b"\x00" + i32(0) + b"\x00")  # no tags anywhere
    partition["current_leader"] = {"leader_id": 2, "leader_epoch": 7}
    tagged = encode_response(0, 10, 1, body)
    assert b"\x01\x00\x09" + i32(2) + i32(7) + b"\x00" in tagged
    assert decode_response(0, 10, tagged[9:])["responses"][0]["partition_responses"][0]["current_leader"] == {
        "leader_id": 2,
        "leader_epoch": 7,
    }
    without = {
        "responses": [
            {"name": "t", "partition_responses": [{k: v for k, v in partition.items() if k != "current_leader"}]}
        ],
        "throttle_time_ms": 0,
    }
    assert encode_response(0, 9, 1, body) == encode_response(0, 9, 1, without)  # v9: no such field, not written
    assert decode_response(0, 9, encode_response(0, 9, 1, body)[9:])["responses"][0]["partition_responses"][0][
        "current_leader"
    ] == {"leader_id": -1, "leader_epoch": -1}


def test_unknown_tagged_fields_are_kept_and_written_back():
    raw = b"\x01" + b"\x01\x00" + b"\x02\x07\x02hi\x09\x00"  # no topics, 2 bools, tags 7 ("hi") and 9 ("")
    decoded = decode_request(3, 12, raw)
    assert decoded["_unknown_tagged_fields"] == {7: b"hi", 9: b""}
    assert codec.encode(request_schema(3), 12, decoded) == raw


def test_nullable_struct():
    schema = request_schema(ApiKeys.DESCRIBE_TOPIC_PARTITIONS)
    body = {"topics": [{"name": "a"}], "response_partition_limit": 10, "cursor": None}
    assert codec.encode(schema, 0, body) == b"\x02\x02a\x00" + i32(10) + b"\xff" + b"\x00"
    body["cursor"] = {"topic_name": "a", "partition_index": 3}
    encoded = codec.encode(schema, 0, body)
    assert encoded.endswith(b"\x01\x02a" + i32(3) + b"\x00\x00")
    assert codec.decode(schema, 0, encoded)[0] == body


def test_errors():
    with pytest.raises(UnsupportedVersionError):
        decode_request(ApiKeys.METADATA, 14, b"")
    with pytest.raises(UnsupportedVersionError):
        encode_response(ApiKeys.METADATA, -1, 1, {})
    with pytest.raises(InvalidRequestError):
        decode_request(999, 0, b"")
    with pytest.raises(ProtocolEncodeError, match="port"):
        encode_response(3, 1, 1, {"brokers": [{"node_id": 1, "host": "h", "port": 2**31}]})
    with pytest.raises(ProtocolEncodeError, match="host"):
        encode_response(3, 1, 1, {"brokers": [{"node_id": 1, "host": None, "port": 1}]})
    with pytest.raises(ProtocolEncodeError, match="replica_nodes"):
        encode_response(3, 1, 1, {"topics": [{"partitions": [{"replica_nodes": [None]}]}]})
    with pytest.raises(ProtocolDecodeError, match="UTF-8"):
        decode_request(3, 1, i32(1) + i16(2) + b"\xc3\x28")


def test_encode_takes_defaults_for_missing_keys():
    assert decode_response(3, 1, encode_response(3, 1, 1, {})[8:]) == {
        "throttle_time_ms": 0,
        "brokers": [],
        "cluster_id": None,
        "controller_id": -1,
        "topics": [],
        "cluster_authorized_operations": -2147483648,
        "error_code": 0,
    }


def test_decoded_defaults_are_not_shared():
    first = decode_request(3, 0, i32(0))
    second = decode_request(3, 0, i32(0))
    first["topics"].append("x")
    assert second["topics"] == []
