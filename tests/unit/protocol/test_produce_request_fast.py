"""The direct ProduceRequest decoder (protocol/produce_request.py) gives exactly the generic codec's dict for every
version, and leaves tagged fields and every malformed input (the generic codec's ProtocolDecodeError) to it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykbroker.protocol import codec, decode_request, request_schema
from pykbroker.protocol.produce_request import decode_produce_request
from pykbroker.protocol.types import ProtocolDecodeError

from .strategies import message_strategy

SCHEMA = request_schema(0)
VERSIONS = list(SCHEMA.versions)


def _plain(body: dict) -> dict:
    """``records`` memoryviews as bytes, to compare decoded bodies."""
    return {
        **body,
        "topic_data": [
            {
                **t,
                "partition_data": [
                    {**p, "records": None if p["records"] is None else bytes(p["records"])} for p in t["partition_data"]
                ],
            }
            for t in body["topic_data"]
        ],
    }


@st.composite
def _encoded(draw) -> tuple[int, bytes]:
    version = draw(st.sampled_from(VERSIONS))
    body = draw(message_strategy(SCHEMA, version))
    return version, codec.encode(SCHEMA, version, body)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(case=_encoded(), trailing=st.binary(max_size=3))
def test_fast_decoder_equals_generic_codec(case, trailing):
    version, encoded = case
    buf = memoryview(encoded + trailing)
    generic = codec.decode(SCHEMA, version, buf)[0]
    fast = decode_produce_request(version, buf)
    assert fast is not None
    assert type(fast["topic_data"]) is list
    for t in fast["topic_data"]:
        for p in t["partition_data"]:
            assert p["records"] is None or type(p["records"]) is memoryview  # zero copy, as the generic codec
    assert _plain(fast) == _plain(generic)
    assert list(fast) == list(generic)  # same keys, same order


@settings(max_examples=150, deadline=None, derandomize=True)
@given(case=_encoded(), data=st.data())
def test_truncated_or_corrupted_input_is_the_generic_codecs_to_judge(case, data):
    version, encoded = case
    cut = data.draw(st.integers(0, max(0, len(encoded) - 1)))
    mutated = bytearray(encoded[:cut])
    if mutated and data.draw(st.booleans()):
        mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
    buf = memoryview(bytes(mutated))
    try:
        generic = codec.decode(SCHEMA, version, buf)[0]
    except ProtocolDecodeError:
        assert decode_produce_request(version, buf) is None
        with pytest.raises(ProtocolDecodeError):
            decode_request(0, version, buf)
        return
    fast = decode_produce_request(version, buf)
    if fast is not None:
        assert _plain(fast) == _plain(generic)


@pytest.mark.parametrize("version", [9, 12])
def test_tagged_fields_are_left_to_the_generic_codec(version):
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": []}
    encoded = bytearray(codec.encode(SCHEMA, version, body))
    assert encoded[-1] == 0
    encoded[-1:] = b"\x01\x05\x01\x07"  # one unknown tagged field (tag 5, 1 byte)
    buf = memoryview(bytes(encoded))
    assert decode_produce_request(version, buf) is None
    assert decode_request(0, version, buf) == codec.decode(SCHEMA, version, buf)[0]


def test_a_version_outside_the_schema_is_left_to_the_generic_codec():
    assert decode_produce_request(13, memoryview(b"\x00" * 16)) is None
