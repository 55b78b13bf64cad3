"""RequestHelper.send_response: a request is answered, or its connection closed, even when the handler's
response body cannot be encoded (regression: Metadata v10 with a null topic name got no response and
the client waited until its timeout)."""

from __future__ import annotations

import struct

from pykbroker.network.request_channel import CloseConnectionResponse, Request, RequestContext, SendResponse
from pykbroker.protocol import decode_response, errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.header import RequestHeader
from pykbroker.server import error_responses
from pykbroker.server.handlers import metadata as _metadata_handlers  # noqa: F401 (registers its builder)
from pykbroker.server.request_helper import RequestHelper, error_counts


class RecordingChannel:
    def __init__(self):
        self.responses = []
        self.errors = []

    def update_error_metrics(self, api, error_counts):
        self.errors.append((api, error_counts))

    def send_response(self, response):
        self.responses.append(response)

    def close_connection(self, request):
        self.responses.append(CloseConnectionResponse(request))


def make_request(api_key: int, version: int, body: dict) -> Request:
    header = RequestHeader(api_key=api_key, api_version=version, correlation_id=42, client_id="t", header_version=1)
    context = RequestContext(header, "c-1", "127.0.0.1", 1, "PLAINTEXT", "PLAINTEXT")
    return Request(0, context, body, b"", 0, "test", 0)


def response_body(response: SendResponse, api_key: int, version: int) -> dict:
    frame = b"".join(bytes(p) for p in response.send.parts)
    (correlation_id,) = struct.unpack_from(">i", frame, 4)
    assert correlation_id == 42
    header_size = 4 + 4 + (1 if version >= 9 else 0)  # size, correlation id, tagged fields (flexible)
    return decode_response(api_key, version, memoryview(frame)[header_size:])


def test_unencodable_body_is_answered_with_the_apis_error_response():
    channel = RecordingChannel()
    helper = RequestHelper(lambda request: channel)
    request = make_request(ApiKeys.METADATA, 10, {"topics": [{"name": "t", "topic_id": None}]})
    bad = {
        "throttle_time_ms": 0,
        "brokers": [],
        "cluster_id": None,
        "controller_id": 1,
        "topics": [{"error_code": 0, "name": None, "topic_id": None, "is_internal": False, "partitions": []}],
    }
    helper.send_response(request, bad)
    (response,) = channel.responses
    assert isinstance(response, SendResponse)
    body = response_body(response, ApiKeys.METADATA, 10)
    assert [t["error_code"] for t in body["topics"]] == [errors.UNKNOWN_SERVER_ERROR]
    assert channel.errors == [("test", {errors.UNKNOWN_SERVER_ERROR: 1})]


def test_unencodable_body_and_error_response_closes_the_connection(monkeypatch):
    channel = RecordingChannel()
    helper = RequestHelper(lambda request: channel)
    request = make_request(ApiKeys.METADATA, 10, {"topics": [{"name": None, "topic_id": None}]})
    monkeypatch.setitem(
        error_responses._BUILDERS, ApiKeys.METADATA, lambda v, body, code, message: {"topics": [{"name": None}]}
    )
    helper.send_response(request, {"topics": [{"name": None}]})
    (response,) = channel.responses
    assert isinstance(response, CloseConnectionResponse)


def test_error_counts_walks_top_level_entries_and_partitions():
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "responses": [
            {"topic": "a", "partitions": [{"partition_index": 0, "error_code": 0, "records": b"x"}] * 3},
            {"topic": "b", "partitions": [{"partition_index": 0, "error_code": 3}]},
        ],
    }
    assert error_counts(body) == {0: 4, 3: 1}
    metadata = {"brokers": [{"node_id": 1}], "topics": [{"name": "x", "error_code": 17, "partitions": []}]}
    assert error_counts(metadata) == {17: 1}
    assert error_counts({"throttle_time_ms": 0}) == {}
