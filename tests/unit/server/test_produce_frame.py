"""The Produce answer written straight from the append results (issue 31, lone produce): the frame
``encode_produce_response_from_results`` writes is byte for byte the generic codec's for the body the produce handler
builds from the same results (``_response``), and ``RequestHelper.try_send_frame`` sends it only where
``send_response`` would send that body unchanged (no Envelope, no request quota)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykbroker.log.log_validator import RecordError
from pykbroker.network.request_channel import SendResponse
from pykbroker.protocol import codec, errors, response_schema
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.header import encode_response_header, response_header_version
from pykbroker.protocol.produce_response import encode_produce_response_from_results
from pykbroker.server.append_result import ProducePartitionResult
from pykbroker.server.handlers.produce import _NO_RESULT, _response
from tests.unit.server.apis_harness import make_request, only_response, recording_helper, response_bytes

VERSIONS = range(13)


def _generic(version: int, correlation_id: int, body: dict) -> bytes:
    header = encode_response_header(correlation_id, response_header_version(0, version))
    return codec.encode(response_schema(0), version, body, header=header, size_prefix=True)


def _expected(version: int, correlation_id: int, topic_data: list, results: dict, throttle_ms: int) -> bytes:
    body = _response({"topic_data": topic_data}, results)
    body["throttle_time_ms"] = throttle_ms
    return _generic(version, correlation_id, body)


_RESULTS = st.builds(
    ProducePartitionResult,
    st.sampled_from([errors.NONE, errors.NOT_LEADER_OR_FOLLOWER, errors.INVALID_RECORD, errors.CORRUPT_MESSAGE]),
    st.integers(-1, 2**63 - 1),
    st.integers(-1, 2**41),
    st.integers(-1, 2**40),
    st.just(()),
    st.none() | st.text(max_size=40),
)


@st.composite
def _requests(draw):
    """``(topic_data, results)``: a request's partitions (names, indexes, a partition possibly twice) and results
    for some of them (the others answer UNKNOWN_SERVER_ERROR)."""
    topic_data = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "name": st.text(min_size=1, max_size=20),
                    "partition_data": st.lists(st.fixed_dictionaries({"index": st.integers(0, 2**31 - 1)}), max_size=4),
                }
            ),
            max_size=3,
        )
    )
    results = {}
    for t in topic_data:
        for p in t["partition_data"]:
            if draw(st.booleans()):
                results[(t["name"], p["index"])] = draw(_RESULTS)
    return topic_data, results


@settings(max_examples=80, deadline=None, derandomize=True)
@given(
    version=st.sampled_from(VERSIONS),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    request=_requests(),
    throttle_ms=st.integers(0, 2**31 - 1),
)
def test_frame_from_results_equals_the_generic_codec_of_the_body(version, correlation_id, request, throttle_ms):
    topic_data, results = request
    fast = encode_produce_response_from_results(version, correlation_id, topic_data, results, _NO_RESULT, throttle_ms)
    assert fast is not None
    assert bytes(fast) == _expected(version, correlation_id, topic_data, results, throttle_ms)


@pytest.mark.parametrize("version", VERSIONS)
def test_one_partition_success_every_version(version):
    topic_data = [{"name": "lone", "partition_data": [{"index": 0}]}]
    results = {("lone", 0): ProducePartitionResult(errors.NONE, 41, -1, 0, (), None)}
    fast = encode_produce_response_from_results(version, 7, topic_data, results, _NO_RESULT, 0)
    assert bytes(fast) == _expected(version, 7, topic_data, results, 0)


def test_record_errors_and_unknown_versions_are_left_to_the_body():
    topic_data = [{"name": "t", "partition_data": [{"index": 0}]}]
    bad = ProducePartitionResult(errors.INVALID_RECORD, -1, -1, -1, (RecordError(0, "bad"),), "bad")
    assert encode_produce_response_from_results(9, 1, topic_data, {("t", 0): bad}, _NO_RESULT, 0) is None
    ok = {("t", 0): ProducePartitionResult(errors.NONE, 0, -1, 0, (), None)}
    assert encode_produce_response_from_results(13, 1, topic_data, ok, _NO_RESULT, 0) is None
    assert encode_produce_response_from_results(-1, 1, topic_data, ok, _NO_RESULT, 0) is None


def _frame(version: int, correlation_id: int) -> bytearray:
    topic_data = [{"name": "t", "partition_data": [{"index": 0}]}]
    results = {("t", 0): ProducePartitionResult(errors.NONE, 5, -1, 0, (), None)}
    return encode_produce_response_from_results(version, correlation_id, topic_data, results, _NO_RESULT, 0)


def _produce_request(version: int = 9):
    return make_request(
        ApiKeys.PRODUCE,
        version,
        {"transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": []},
        correlation_id=11,
    )


def test_try_send_frame_queues_the_frame_and_counts_the_errors():
    helper, channel = recording_helper()
    request = _produce_request()
    assert helper.try_send_frame(request, _frame, (), {errors.NONE: 1})
    response = only_response(channel)
    assert isinstance(response, SendResponse)
    assert response_bytes(response) == bytes(_frame(9, 11))
    assert response.send.size == len(_frame(9, 11))
    assert channel.errors == [(request.api_name, {errors.NONE: 1})]


def _quotas(request_quota: bool):
    return SimpleNamespace(request=SimpleNamespace(quotas_enabled=request_quota))


def _raise(version, correlation_id):
    raise OverflowError("out of range")


@pytest.mark.parametrize(
    "case",
    ["envelope", "request quota", "pending throttle", "encoder declines", "encoder raises"],
)
def test_try_send_frame_sends_nothing_where_the_body_must_be_sent(case):
    helper, channel = recording_helper()
    request = _produce_request()
    encode = _frame
    if case == "envelope":
        request.envelope = _produce_request()
    elif case == "request quota":
        helper.quotas = _quotas(True)
    elif case == "pending throttle":
        helper.quotas = _quotas(False)
        request.pending_throttle = object()
    elif case == "encoder declines":
        encode = lambda version, correlation_id: None  # noqa: E731
    else:
        encode = _raise
    assert not helper.try_send_frame(request, encode, (), {errors.NONE: 1})
    assert channel.responses == [] and channel.errors == []


def test_try_send_frame_with_quotas_configured_but_no_request_quota():
    helper, channel = recording_helper()
    helper.quotas = _quotas(False)
    request = _produce_request()
    assert helper.try_send_frame(request, _frame, (), {errors.NONE: 1})
    assert response_bytes(only_response(channel)) == bytes(_frame(9, 11))
