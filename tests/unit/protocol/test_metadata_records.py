"""KRaft metadata record framing and golden bytes."""

from __future__ import annotations

import struct
import uuid

import pytest

from pykbroker.protocol.errors import UnsupportedVersionError
from pykbroker.protocol.metadata_records import (
    decode_metadata_record,
    encode_metadata_record,
    metadata_record_schema,
)
from pykbroker.protocol.types import ProtocolDecodeError

TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def test_topic_record_golden():
    encoded = encode_metadata_record("TopicRecord", 0, {"name": "foo", "topic_id": TOPIC_ID})
    assert encoded == b"\x01\x02\x00" + b"\x04foo" + TOPIC_ID.bytes + b"\x00"
    assert decode_metadata_record(encoded) == ("TopicRecord", 0, {"name": "foo", "topic_id": TOPIC_ID})
    assert encode_metadata_record(2, 0, {"name": "foo", "topic_id": TOPIC_ID}) == encoded


def test_partition_change_record_writes_only_changed_tagged_fields():
    encoded = encode_metadata_record("PartitionChangeRecord", 0, {"partition_id": 1, "topic_id": TOPIC_ID, "leader": 3})
    assert encoded == b"\x01\x05\x00" + struct.pack(">i", 1) + TOPIC_ID.bytes + b"\x01\x01\x04" + struct.pack(">i", 3)
    name, version, record = decode_metadata_record(encoded)
    assert (name, version, record["leader"], record["isr"], record["leader_recovery_state"]) == (
        "PartitionChangeRecord",
        0,
        3,
        None,
        -1,
    )
    with_isr = encode_metadata_record(
        "PartitionChangeRecord", 0, {"partition_id": 1, "topic_id": TOPIC_ID, "isr": [1, 2]}
    )
    assert with_isr.endswith(b"\x01\x00\x09\x03" + struct.pack(">ii", 1, 2))


def test_register_broker_record():
    record = {
        "broker_id": 1,
        "incarnation_id": TOPIC_ID,
        "broker_epoch": 5,
        "end_points": [{"name": "PLAINTEXT", "host": "localhost", "port": 9092, "security_protocol": 0}],
        "features": [{"name": "metadata.version", "min_supported_version": 1, "max_supported_version": 21}],
        "rack": None,
        "fenced": True,
        "in_controlled_shutdown": False,
        "log_dirs": [TOPIC_ID],
    }
    name, version, decoded = decode_metadata_record(encode_metadata_record("RegisterBrokerRecord", 3, record))
    assert (name, version) == ("RegisterBrokerRecord", 3)
    assert decoded == dict(record, is_migrating_zk_broker=False)


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        b"\x00\x02\x00",
        b"\x02\x02\x00",  # empty, frame versions 0 and 2
        b"\x01\x7f\x00\x00",  # unknown record type
        b"\x01\x02\x05\x00",  # TopicRecord v5
        b"\x01\x02\x00\x04fo",  # truncated
    ],
)
def test_malformed_records(bad):
    with pytest.raises(ProtocolDecodeError):
        decode_metadata_record(bad)


def test_encode_errors():
    with pytest.raises(KeyError):
        metadata_record_schema("NoSuchRecord")
    with pytest.raises(UnsupportedVersionError):
        encode_metadata_record("TopicRecord", 1, {})
