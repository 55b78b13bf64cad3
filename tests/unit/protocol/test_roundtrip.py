"""Property tests over EVERY schema and EVERY version: encode -> decode is the identity (up to defaults of absent
fields), encoding is canonical, and every sampled truncation of a valid encoding raises ProtocolDecodeError."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pykbroker.protocol import codec, coordinator_records
from pykbroker.protocol.metadata_records import METADATA_RECORDS, decode_metadata_record, encode_metadata_record
from pykbroker.protocol.schemas import REQUESTS, RESPONSES
from pykbroker.protocol.types import ProtocolDecodeError

from .strategies import all_versions, message_strategy, normalise

CASES = all_versions(REQUESTS) + all_versions(RESPONSES)
PROPERTY = settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _check_truncations(schema, version, encoded: bytes, data: st.DataObject) -> None:
    if not encoded:  # e.g. ListGroups v0 request: an empty body
        return
    cuts = {len(encoded) - 1, 0} | set(data.draw(st.lists(st.integers(0, len(encoded) - 1), max_size=6)))
    for cut in cuts:
        with pytest.raises(ProtocolDecodeError):
            codec.decode(schema, version, memoryview(encoded)[:cut])


@pytest.mark.parametrize(("schema", "version"), CASES, ids=[f"{s.full_name}-v{v}" for s, v in CASES])
@PROPERTY
@given(data=st.data())
def test_roundtrip(schema, version, data):
    body = data.draw(message_strategy(schema, version))
    encoded = codec.encode(schema, version, body)
    decoded, end = codec.decode(schema, version, encoded + b"trailing")
    assert end == len(encoded)
    assert decoded == normalise(schema.fields, version, body)
    assert codec.encode(schema, version, decoded) == encoded
    _check_truncations(schema, version, encoded, data)


RECORD_CASES = all_versions(METADATA_RECORDS)


@pytest.mark.parametrize(("schema", "version"), RECORD_CASES, ids=[f"{s.name}-v{v}" for s, v in RECORD_CASES])
@PROPERTY
@given(data=st.data())
def test_metadata_record_roundtrip(schema, version, data):
    record = data.draw(message_strategy(schema, version))
    encoded = encode_metadata_record(schema.name, version, record)
    assert decode_metadata_record(encoded) == (schema.name, version, normalise(schema.fields, version, record))
    with pytest.raises(ProtocolDecodeError):
        decode_metadata_record(encoded + b"\x00")
    for cut in {0, 1, 2, len(encoded) - 1}:
        with pytest.raises(ProtocolDecodeError):
            decode_metadata_record(encoded[:cut])


COORDINATOR_CASES = all_versions(coordinator_records.RECORDS)


@pytest.mark.parametrize(("schema", "version"), COORDINATOR_CASES, ids=[f"{s.name}-v{v}" for s, v in COORDINATOR_CASES])
@PROPERTY
@given(data=st.data())
def test_coordinator_record_roundtrip(schema, version, data):
    """A __consumer_offsets / __transaction_state key or value: int16 version + the message, decoded back; a cut one
    raises RecordDecodeError (a ValueError, what the coordinators' loaders skip)."""
    record = data.draw(message_strategy(schema, version))
    encoded = coordinator_records.encode_record(schema.name, version, record)
    assert encoded[:2] == version.to_bytes(2, "big")
    decoded = coordinator_records.decode_record(schema.name, encoded)
    assert decoded == (version, normalise(schema.fields, version, record))
    for cut in {0, 1, len(encoded) - 1}:
        with pytest.raises(coordinator_records.RecordDecodeError):
            coordinator_records.decode_record(schema.name, encoded[:cut])


def test_every_version_of_every_message_is_covered():
    assert len(CASES) == sum(len(s.versions) for s in list(REQUESTS.values()) + list(RESPONSES.values()))
