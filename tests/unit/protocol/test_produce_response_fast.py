"""The direct ProduceResponse encoder (protocol/produce_response.py) writes exactly the generic codec's frame for
every version, and leaves every other shape to the generic codec."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykbroker.protocol import codec, encode_response_parts, response_schema
from pykbroker.protocol.header import encode_response_header, response_header_version
from pykbroker.protocol.produce_response import encode_produce_response_frame

VERSIONS = range(13)


def _generic(version: int, correlation_id: int, body: dict) -> bytes:
    header = encode_response_header(correlation_id, response_header_version(0, version))
    return codec.encode(response_schema(0), version, body, header=header, size_prefix=True)


def _partition(index: int, code: int = 0, base: int = 0, message: str | None = None) -> dict:
    return {
        "index": index,
        "error_code": code,
        "base_offset": base,
        "log_append_time_ms": -1,
        "log_start_offset": 0,
        "record_errors": [],
        "error_message": message,
    }


_PARTITIONS = st.builds(
    _partition,
    st.integers(0, 2**31 - 1),
    st.integers(-1, 120),
    st.integers(-1, 2**63 - 1),
    st.none() | st.text(max_size=40),
)
_TOPICS = st.lists(
    st.fixed_dictionaries({"name": st.text(min_size=1, max_size=30), "partition_responses": st.lists(_PARTITIONS)}),
    max_size=3,
)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    version=st.sampled_from(VERSIONS),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    topics=_TOPICS,
    throttle=st.none() | st.integers(0, 2**31 - 1),
)
def test_fast_frame_equals_generic_codec(version, correlation_id, topics, throttle):
    body: dict = {"responses": topics}
    if throttle is not None:
        body["throttle_time_ms"] = throttle
    fast = encode_produce_response_frame(version, correlation_id, body)
    assert fast is not None
    assert bytes(fast) == _generic(version, correlation_id, body)
    assert b"".join(bytes(p) for p in encode_response_parts(0, version, correlation_id, body)) == bytes(fast)


@pytest.mark.parametrize("version", VERSIONS)
def test_one_partition_success_every_version(version):
    body = {"responses": [{"name": "lone", "partition_responses": [_partition(0, 0, 41)]}], "throttle_time_ms": 0}
    assert bytes(encode_produce_response_frame(version, 7, body)) == _generic(version, 7, body)


@pytest.mark.parametrize(
    "body",
    [
        # a record error (KIP-467), a KIP-951 current leader, node endpoints, absent fields (defaults):
        # the generic codec's job
        {
            "responses": [
                {
                    "name": "t",
                    "partition_responses": [
                        {**_partition(0, 87), "record_errors": [{"batch_index": 0, "batch_index_error_message": "x"}]}
                    ],
                }
            ]
        },
        {
            "responses": [
                {
                    "name": "t",
                    "partition_responses": [
                        {**_partition(0, 6), "current_leader": {"leader_id": 2, "leader_epoch": 3}}
                    ],
                }
            ]
        },
        {
            "responses": [],
            "throttle_time_ms": 0,
            "node_endpoints": [{"node_id": 2, "host": "h", "port": 9092, "rack": None}],
        },
        {"responses": [{"name": "t", "partition_responses": [{"index": 0, "error_code": 0, "base_offset": 5}]}]},
    ],
)
def test_other_shapes_fall_back_to_the_generic_codec(body):
    assert encode_produce_response_frame(12, 1, body) is None
    assert b"".join(bytes(p) for p in encode_response_parts(0, 12, 1, body)) == _generic(12, 1, body)


def test_unsupported_version_and_bad_values_use_the_generic_codec_errors():
    body = {"responses": [{"name": "t", "partition_responses": [_partition(0)]}], "throttle_time_ms": 0}
    assert encode_produce_response_frame(13, 1, body) is None
    bad = {"responses": [{"name": None, "partition_responses": []}]}
    with pytest.raises(Exception) as fast_error:
        encode_response_parts(0, 9, 1, bad)
    with pytest.raises(Exception) as generic_error:
        _generic(9, 1, bad)
    assert type(fast_error.value) is type(generic_error.value)


@pytest.mark.parametrize("version", [8, 9, 12])
@pytest.mark.parametrize("n", [0, 1, 126, 127, 128, 300])
def test_counts_and_lengths_at_the_one_byte_varint_boundary(version, n):
    # flexible versions write counts and lengths + 1 as unsigned varints: one byte up to 127, two from 128
    bodies = [
        {"responses": [{"name": "t" * max(n, 1), "partition_responses": [_partition(0)]}], "throttle_time_ms": 0},
        {"responses": [{"name": "t", "partition_responses": [_partition(i) for i in range(n)]}]},
        {"responses": [{"name": f"t{i}", "partition_responses": []} for i in range(n)]},
    ]
    for body in bodies:
        fast = encode_produce_response_frame(version, 7, body)
        assert fast is not None and bytes(fast) == _generic(version, 7, body)
