"""Envelope (KIP-590) unwrap on the controller and wrap/unwrap on the broker (Kafka's EnvelopeUtils,
ForwardingManager.buildEnvelopeRequest/parseResponse, RequestChannel.Request.buildResponseSend)."""

from __future__ import annotations

import pytest

from pykbroker.network.request_channel import SendResponse
from pykbroker.protocol import encode_request_header, errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server import envelope as env
from tests.unit.server.apis_harness import decode_sent, make_request, only_response, recording_helper

CREATE = {
    "topics": [{"name": "a1", "num_partitions": 3, "replication_factor": 1, "assignments": [], "configs": []}],
    "timeout_ms": 5000,
    "validate_only": False,
}


def _envelope_request(**overrides):
    body = env.build_envelope(ApiKeys.CREATE_TOPICS, 7, 99, "alice-app", CREATE, "User:alice", "10.1.2.3")
    body.update(overrides)
    return make_request(ApiKeys.ENVELOPE, 0, body, correlation_id=5, client_id="broker-101", listener="CONTROLLER")


def test_the_forwarded_request_carries_the_clients_context():
    outer = _envelope_request()
    inner = env.parse_forwarded_request(outer)
    ctx = inner.context
    assert (ctx.principal, ctx.client_address, ctx.client_id) == ("User:alice", "10.1.2.3", "alice-app")
    assert (ctx.api_key, ctx.api_version, ctx.correlation_id) == (ApiKeys.CREATE_TOPICS, 7, 99)
    assert (ctx.listener_name, ctx.connection_id) == ("CONTROLLER", outer.context.connection_id)
    assert inner.envelope is outer and inner.processor == outer.processor
    assert inner.body["topics"][0]["name"] == "a1" and inner.body["topics"][0]["num_partitions"] == 3


def test_an_ipv6_client_address():
    inner = env.parse_forwarded_request(_envelope_request(client_host_address=env.address_bytes("::1")))
    assert inner.context.client_address == "::1"


_METADATA = encode_request_header(ApiKeys.METADATA, 12, 1, "x") + b"\x01\x00\x00\x00"
_GOOD_DATA = env.build_envelope(ApiKeys.CREATE_TOPICS, 7, 1, "x", CREATE, "User:a", "1.2.3.4")["request_data"]


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"request_principal": None}, errors.PrincipalDeserializationError),
        ({"request_principal": b"\x00\x07junk"}, errors.PrincipalDeserializationError),
        ({"client_host_address": b""}, errors.InvalidRequestError),
        ({"client_host_address": b"\x01\x02\x03"}, errors.InvalidRequestError),
        ({"request_data": _METADATA}, errors.InvalidRequestError),  # not forwardable
        ({"request_data": b"\x00\x13"}, errors.UnsupportedVersionError),  # header truncated
        ({"request_data": _GOOD_DATA[:12]}, errors.UnsupportedVersionError),  # body missing
        ({"request_data": b"\x00\x13\x00\x63" + _GOOD_DATA[4:]}, errors.UnsupportedVersionError),  # CreateTopics v99
        ({"request_data": b"\x00\xc8\x00\x00\x00\x00\x00\x01\x00\x00"}, errors.UnsupportedVersionError),  # key 200
    ],
)
def test_a_malformed_envelope_gets_kafkas_error(overrides, error):
    with pytest.raises(error) as e:
        env.parse_forwarded_request(_envelope_request(**overrides))
    assert errors.for_exception(e.value) == errors.for_exception(error(""))  # the code the envelope answers


def test_the_response_goes_back_inside_an_envelope_response():
    helper, channel = recording_helper()
    outer = _envelope_request()
    inner = env.parse_forwarded_request(outer)
    body = {"throttle_time_ms": 250, "topics": [{"name": "a1", "error_code": errors.THROTTLING_QUOTA_EXCEEDED}]}
    helper.throttle(object(), inner, 250)  # forwarded: the broker mutes its client, not this controller
    helper.send_response(inner, body)
    sent = only_response(channel)
    assert isinstance(sent, SendResponse) and sent.request is outer
    correlation_id, envelope = decode_sent(sent, ApiKeys.ENVELOPE, 0)
    assert correlation_id == 5 and envelope["error_code"] == errors.NONE
    data = envelope["response_data"]
    assert int.from_bytes(data[:4], "big") == 99  # the inner response header carries the client's correlation id
    inner_body = env.unwrap_response(ApiKeys.CREATE_TOPICS, 7, envelope)
    assert inner_body["throttle_time_ms"] == 250
    assert inner_body["topics"][0]["error_code"] == errors.THROTTLING_QUOTA_EXCEEDED


def test_not_controller_is_an_envelope_error():
    helper, channel = recording_helper()
    inner = env.parse_forwarded_request(_envelope_request())
    helper.send_response(
        inner, {"throttle_time_ms": 0, "topics": [{"name": "a1", "error_code": errors.NOT_CONTROLLER}]}
    )
    _, envelope = decode_sent(only_response(channel), ApiKeys.ENVELOPE, 0)
    assert envelope == {"response_data": None, "error_code": errors.NOT_CONTROLLER}
    assert env.unwrap_response(ApiKeys.CREATE_TOPICS, 7, envelope) == {"error_code": errors.NOT_CONTROLLER}


@pytest.mark.parametrize(
    ("envelope", "error"),
    [
        ({"response_data": None, "error_code": errors.CLUSTER_AUTHORIZATION_FAILED}, errors.ClusterAuthorizationError),
        ({"response_data": None, "error_code": errors.UNSUPPORTED_VERSION}, errors.UnsupportedVersionError),
        ({"response_data": None, "error_code": errors.NONE}, errors.UnknownServerError),
        ({"response_data": b"\x00\x00\x00\x01\x00\xff", "error_code": errors.NONE}, errors.UnknownServerError),
    ],
)
def test_the_broker_turns_an_envelope_error_into_the_requests_error(envelope, error):
    with pytest.raises(error):
        env.unwrap_response(ApiKeys.CREATE_TOPICS, 7, envelope)
