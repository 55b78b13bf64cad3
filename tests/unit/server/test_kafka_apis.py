"""KafkaApis (``kafka.server.KafkaApis.handle``): dispatch by API key, errors into the API's error
response, after-handle actions, the local-completion timestamp, and ApiVersions' unsupported-version
answer."""

from __future__ import annotations

import pytest

from pykbroker.network.request_channel import CloseConnectionResponse, SendResponse
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server.api_version_manager import BROKER_VERSIONS
from pykbroker.server.kafka_apis import KafkaApis
from pykbroker.utils.time import MockTime
from tests.unit.server.apis_harness import (
    broker_apis,
    decode_sent,
    make_request,
    minimal_body,
    only_response,
    recording_helper,
    response_bytes,
)

HEARTBEAT = {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}


def _apis(handlers: dict | None = None):
    helper, channel = recording_helper()
    apis = KafkaApis(1, helper, MockTime(current_ms=1000))
    apis.register(handlers or {})
    return apis, helper, channel


def test_dispatches_to_the_handler_of_the_api_key():
    seen = []
    apis, helper, channel = _apis()
    apis.register(
        {
            ApiKeys.HEARTBEAT: lambda r: (
                seen.append(("hb", r.body["group_id"])),
                helper.send_response(r, {"error_code": 0, "throttle_time_ms": 0}),
            ),
            ApiKeys.LIST_GROUPS: lambda r: seen.append(("lg", None)),
        }
    )
    request = make_request(ApiKeys.HEARTBEAT, 4, HEARTBEAT, correlation_id=99)
    apis.handle(request)
    assert seen == [("hb", "g")]
    correlation_id, body = decode_sent(only_response(channel), ApiKeys.HEARTBEAT, 4)
    assert (correlation_id, body["error_code"]) == (99, errors.NONE)
    assert apis.implemented_apis == {ApiKeys.HEARTBEAT, ApiKeys.LIST_GROUPS}


def test_register_replaces_a_handler():
    calls = []
    apis, _, _ = _apis()
    apis.register({ApiKeys.HEARTBEAT: lambda r: calls.append(1)})
    apis.register({ApiKeys.HEARTBEAT: lambda r: calls.append(2)})
    apis.handle(make_request(ApiKeys.HEARTBEAT, 4, HEARTBEAT))
    assert calls == [2]


def test_unregistered_api_key_answers_invalid_request():
    apis, _, channel = _apis()
    apis.handle(make_request(ApiKeys.HEARTBEAT, 4, HEARTBEAT))
    _, body = decode_sent(only_response(channel), ApiKeys.HEARTBEAT, 4)
    assert body["error_code"] == errors.INVALID_REQUEST


def test_kafka_error_keeps_its_code_unexpected_error_is_unknown_server_error():
    def not_coordinator(request):
        raise errors.NotCoordinatorError("not here")

    def bug(request):
        raise KeyError("oops")

    for handler, code in ((not_coordinator, errors.NOT_COORDINATOR), (bug, errors.UNKNOWN_SERVER_ERROR)):
        apis, _, channel = _apis({ApiKeys.HEARTBEAT: handler})
        apis.handle(make_request(ApiKeys.HEARTBEAT, 4, HEARTBEAT))
        _, body = decode_sent(only_response(channel), ApiKeys.HEARTBEAT, 4)
        assert body["error_code"] == code


def test_after_handle_actions_run_after_success_and_failure_even_if_one_fails():
    order = []

    def failing_action():
        order.append("failing")
        raise RuntimeError("action failure must not stop the others")

    def raising(request):
        order.append("handler")
        raise RuntimeError("boom")

    apis, _, channel = _apis({ApiKeys.HEARTBEAT: lambda r: order.append("handler")})
    apis.after_handle += [failing_action, lambda: order.append("second")]
    apis.handle(make_request(ApiKeys.HEARTBEAT, 4, HEARTBEAT))
    assert order == ["handler", "failing", "second"]
    order.clear()
    apis.register({ApiKeys.HEARTBEAT: raising})
    apis.handle(make_request(ApiKeys.HEARTBEAT, 4, HEARTBEAT))
    assert order == ["handler", "failing", "second"]
    assert isinstance(only_response(channel), SendResponse)  # the error response went out first


def test_local_complete_time_is_set_once_handled():
    apis, _, _ = _apis({ApiKeys.HEARTBEAT: lambda r: None})  # e.g. parked in a purgatory
    request = make_request(ApiKeys.HEARTBEAT, 4, HEARTBEAT)
    apis.time.sleep(5)
    apis.handle(request)
    assert request.api_local_complete_time_ns == apis.time.nanoseconds()
    already = make_request(ApiKeys.HEARTBEAT, 4, HEARTBEAT)
    already.api_local_complete_time_ns = 123  # set by send_response: kept
    apis.handle(already)
    assert already.api_local_complete_time_ns == 123


def test_error_without_a_body_closes_the_connection():
    def raising(request):
        raise RuntimeError("boom")

    apis, _, channel = _apis({ApiKeys.METADATA: raising})
    apis.handle(make_request(ApiKeys.METADATA, 12, None))
    assert isinstance(only_response(channel), CloseConnectionResponse)


# -- the broker's KafkaApis: ApiVersions -----------------------------------------------------------------


def test_api_versions_advertises_every_handled_api():
    helper, channel = recording_helper()
    apis, _manager = broker_apis(helper)
    apis.handle(make_request(ApiKeys.API_VERSIONS, 3, {"client_software_name": "pyk", "client_software_version": "1"}))
    _, body = decode_sent(only_response(channel), ApiKeys.API_VERSIONS, 3)
    assert body["error_code"] == errors.NONE
    advertised = {a["api_key"]: (a["min_version"], a["max_version"]) for a in body["api_keys"]}
    assert set(advertised) == apis.implemented_apis == set(BROKER_VERSIONS)
    assert all(
        BROKER_VERSIONS[k][0] <= lo <= hi <= BROKER_VERSIONS[k][1]
        for k, (lo, hi) in advertised.items()
        if k != ApiKeys.PRODUCE
    )
    assert advertised[ApiKeys.PRODUCE] == (0, BROKER_VERSIONS[ApiKeys.PRODUCE][1])  # KAFKA-18659: v0-v2 advertised


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_cached_answer_is_the_encoded_response(version):
    """The successful answer is encoded once per version; each request still gets its own correlation id
    and the same bytes the generic encoder produces."""
    from pykbroker.protocol import encode_response_parts

    helper, channel = recording_helper()
    apis, _ = broker_apis(helper)
    body = {"client_software_name": "pyk", "client_software_version": "1"} if version >= 3 else {}
    responses = []
    for correlation_id in (7, 8):
        apis.handle(make_request(ApiKeys.API_VERSIONS, version, body, correlation_id=correlation_id))
        responses.append(only_response(channel))
    frames = [response_bytes(r) for r in responses]
    decoded_id, decoded = decode_sent(responses[1], ApiKeys.API_VERSIONS, version)
    assert decoded_id == 8 and decoded["error_code"] == errors.NONE
    assert channel.errors[-1] == ("api18", {errors.NONE: 1})
    expected = encode_response_parts(ApiKeys.API_VERSIONS, version, 8, decoded)
    assert frames[1] == b"".join(bytes(p) for p in expected)
    assert frames[0][8:] == frames[1][8:] and frames[0][:8] != frames[1][:8]


def test_api_versions_unsupported_version_answers_v0_with_unsupported_version():
    """KIP-511: a too-new ApiVersions arrives without a body; the answer is v0 with the full table."""
    helper, channel = recording_helper()
    apis, manager = broker_apis(helper)
    apis.handle(make_request(ApiKeys.API_VERSIONS, 127, None, correlation_id=5, unsupported_version=True))
    _, body = decode_sent(only_response(channel), ApiKeys.API_VERSIONS, 0)
    assert body["error_code"] == errors.UNSUPPORTED_VERSION
    assert {a["api_key"] for a in body["api_keys"]} == set(manager.versions)


def test_api_versions_invalid_client_software_is_invalid_request():
    helper, channel = recording_helper()
    apis, _ = broker_apis(helper)
    apis.handle(
        make_request(ApiKeys.API_VERSIONS, 3, {"client_software_name": "-bad-", "client_software_version": "1"})
    )
    _, body = decode_sent(only_response(channel), ApiKeys.API_VERSIONS, 3)
    assert body["error_code"] == errors.INVALID_REQUEST


def test_version_outside_the_advertised_range_is_not_allowed():
    helper, _ = recording_helper()
    _, manager = broker_apis(helper)
    lo, hi = manager.versions[ApiKeys.PRODUCE]
    assert manager.is_api_allowed("PLAINTEXT", ApiKeys.PRODUCE, hi)
    assert not manager.is_api_allowed("PLAINTEXT", ApiKeys.PRODUCE, hi + 1)
    assert not manager.is_api_allowed("PLAINTEXT", ApiKeys.PRODUCE, lo - 1)
    assert not manager.is_api_allowed("PLAINTEXT", ApiKeys.SHARE_GROUP_HEARTBEAT, 0)  # 4.0 early access: not served


def test_minimal_body_round_trips_through_the_codec():
    request = make_request(ApiKeys.OFFSET_FETCH, 9, minimal_body(ApiKeys.OFFSET_FETCH, 9))
    assert request.body["groups"][0]["topics"][0]["partition_indexes"] == [1]
