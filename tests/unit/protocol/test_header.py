"""Request/response headers, header version rules, api keys."""

from __future__ import annotations

import struct

import pytest

from pykbroker.protocol import (
    ApiKeys,
    api_name,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    parse_response_header,
    peek_api_key_version,
    request_header_version,
    response_header_version,
)
from pykbroker.protocol.errors import InvalidRequestError
from pykbroker.protocol.header import RequestHeader
from pykbroker.protocol.types import ProtocolDecodeError


def test_api_keys_and_names():
    assert ApiKeys.PRODUCE == 0 and ApiKeys.FETCH == 1 and ApiKeys.LIST_OFFSETS == 2 and ApiKeys.METADATA == 3
    assert ApiKeys.API_VERSIONS == 18 and ApiKeys.DESCRIBE_CLUSTER == 60 and ApiKeys.DESCRIBE_TOPIC_PARTITIONS == 75
    assert api_name(0) == "Produce" and api_name(18) == "ApiVersions" and api_name(60) == "DescribeCluster"
    assert api_name(ApiKeys.OFFSET_FOR_LEADER_EPOCH) == "OffsetForLeaderEpoch"
    assert ApiKeys.LEADER_AND_ISR.api_name == "LeaderAndIsr"
    assert api_name(999) == "Unknown(999)"


def test_header_versions():
    assert request_header_version(ApiKeys.METADATA, 8) == 1
    assert request_header_version(ApiKeys.METADATA, 9) == 2
    assert request_header_version(ApiKeys.CONTROLLED_SHUTDOWN, 0) == 0
    assert request_header_version(ApiKeys.SASL_HANDSHAKE, 1) == 1  # never flexible
    assert response_header_version(ApiKeys.METADATA, 8) == 0
    assert response_header_version(ApiKeys.METADATA, 12) == 1
    for version in range(10):  # ApiVersions: always response header v0, even above what we support
        assert response_header_version(ApiKeys.API_VERSIONS, version) == 0
    assert request_header_version(ApiKeys.API_VERSIONS, 42) == 2
    with pytest.raises(InvalidRequestError):
        request_header_version(999, 0)


def test_parse_v1_header():
    frame = struct.pack(">hhih", 3, 1, 77, 6) + b"client" + b"BODY"
    header, size = parse_request_header(memoryview(frame))
    assert header == RequestHeader(3, 1, 77, "client", 1)
    assert frame[size:] == b"BODY"


def test_parse_v2_header_with_tagged_fields_and_null_client_id():
    frame = struct.pack(">hhih", 3, 12, -5, -1) + b"\x01\x00\x02zz" + b"BODY"
    header, size = parse_request_header(frame)
    assert header == RequestHeader(3, 12, -5, "", 2)
    assert frame[size:] == b"BODY"


def test_parse_v0_header():
    frame = struct.pack(">hhi", 7, 0, 1) + b"\x00\x01"
    assert parse_request_header(frame) == (RequestHeader(7, 0, 1, "", 0), 8)


def test_too_new_api_versions_still_parses():
    frame = encode_request_header(ApiKeys.API_VERSIONS, 99, 3, "kcat")
    assert peek_api_key_version(frame) == (18, 99, 3)
    header, size = parse_request_header(frame)
    assert (header.api_version, header.header_version, header.client_id, size) == (99, 2, "kcat", len(frame))


def test_unknown_api_key_peeks_but_does_not_parse():
    frame = struct.pack(">hhih", 999, 0, 9, 0)
    assert peek_api_key_version(frame) == (999, 0, 9)
    with pytest.raises(InvalidRequestError):
        parse_request_header(frame)


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\x00\x03\x00\x01\x00\x00\x00",  # shorter than the peek
        struct.pack(">hhi", 3, 1, 1) + b"\x00",  # no room for client_id length
        struct.pack(">hhih", 3, 1, 1, 5) + b"abc",  # client_id truncated
        struct.pack(">hhih", 3, 1, 1, -2),  # bad client_id length
        struct.pack(">hhih", 3, 9, 1, 0),  # flexible: tagged section missing
        struct.pack(">hhih", 3, 9, 1, 0) + b"\x01\x00\x05",  # tagged field truncated
    ],
)
def test_malformed_headers(frame):
    with pytest.raises(ProtocolDecodeError):
        parse_request_header(frame)


def test_header_encodings():
    assert encode_request_header(3, 1, 7, "ab") == struct.pack(">hhih", 3, 1, 7, 2) + b"ab"
    assert encode_request_header(3, 9, 7, None) == struct.pack(">hhih", 3, 9, 7, -1) + b"\x00"
    assert encode_request_header(7, 0, 7, "ignored") == struct.pack(">hhi", 7, 0, 7)
    assert encode_response_header(5, 0) == b"\x00\x00\x00\x05"
    assert encode_response_header(5, 1) == b"\x00\x00\x00\x05\x00"
    assert parse_response_header(b"\x00\x00\x00\x05\x00rest", 1) == (5, 5)
    assert parse_response_header(b"\x00\x00\x00\x05\x00rest", 0) == (5, 4)
    with pytest.raises(ProtocolDecodeError):
        parse_response_header(b"\x00\x00\x00", 0)


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">hhih", 3, 1, 77, 6) + b"client" + b"BODY",
        struct.pack(">hhih", 3, 12, -5, -1) + b"\x00" + b"BODY",  # flexible, no tagged fields (read inline)
        struct.pack(">hhih", 3, 12, -5, 2) + b"id" + b"\x01\x00\x02zz" + b"BODY",  # flexible, one tagged field
        struct.pack(">hhi", 7, 0, 1) + b"\x00\x01",
    ],
)
def test_a_header_parsed_from_its_peeked_prefix_is_the_same(frame):
    """The Processor parses the header with the (api key, version, correlation id) it already peeked."""
    view = memoryview(frame)
    assert parse_request_header(view, peek_api_key_version(view)) == parse_request_header(view)
