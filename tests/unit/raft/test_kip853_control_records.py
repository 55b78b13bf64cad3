"""KIP-853's control records (KRaftVersionRecord, VotersRecord), hand-encoded in the raft layer: the bytes
are those of the schema codec for Kafka's JSON specs (written here in the schema DSL), and decode back."""

from __future__ import annotations

import uuid

import pytest

from pykbroker.protocol.codec import decode, encode
from pykbroker.protocol.schema import parse_schemas
from pykbroker.raft.control_records import KRaftVersionRecord, Voter, VoterEndpoint, VotersRecord

# Kafka's clients/src/main/resources/common/message/{KRaftVersionRecord,VotersRecord}.json
KRAFT_VERSION_SCHEMA, VOTERS_SCHEMA = parse_schemas(
    """
data KRaftVersionRecord 5 0 flex=0+
  version int16 0+
  k_raft_version int16 0+

data VotersRecord 6 0 flex=0+
  version int16 0+
  voters [] 0+
    voter_id int32 0+
    voter_directory_id uuid 0+
    endpoints [] 0+
      name string 0+
      host string 0+
      port uint16 0+
    k_raft_version_feature {} 0+
      min_supported_version int16 0+
      max_supported_version int16 0+
"""
)

VOTERS = VotersRecord(
    (
        Voter(1, uuid.UUID(int=7), (VoterEndpoint("CONTROLLER", "127.0.0.1", 9093),), 0, 1),
        Voter(
            2,
            uuid.UUID("a1b2c3d4-0000-4000-8000-000000000002"),
            (VoterEndpoint("CONTROLLER", "ctl-2", 19093), VoterEndpoint("SSL", "ctl-2", 65535)),
            1,
            1,
        ),
        Voter(3, uuid.UUID(int=0)),
    )
)


def test_kraft_version_record_bytes_are_the_schemas():
    record = KRaftVersionRecord(1)
    assert record.encode() == encode(KRAFT_VERSION_SCHEMA, 0, {"version": 0, "k_raft_version": 1})
    assert KRaftVersionRecord.decode(record.encode()) == record


def test_voters_record_bytes_are_the_schemas():
    body = {
        "version": 0,
        "voters": [
            {
                "voter_id": v.voter_id,
                "voter_directory_id": v.directory_id,
                "endpoints": [{"name": e.name, "host": e.host, "port": e.port} for e in v.endpoints],
                "k_raft_version_feature": {
                    "min_supported_version": v.min_supported_version,
                    "max_supported_version": v.max_supported_version,
                },
            }
            for v in VOTERS.voters
        ],
    }
    raw = VOTERS.encode()
    assert raw == encode(VOTERS_SCHEMA, 0, body)
    assert VotersRecord.decode(raw) == VOTERS
    decoded, end = decode(VOTERS_SCHEMA, 0, raw)
    assert end == len(raw) and decoded["voters"][1]["endpoints"][1]["port"] == 65535


def test_a_truncated_voters_record_is_a_value_error():
    raw = VOTERS.encode()
    for cut in (1, 5, 20, len(raw) // 2):
        with pytest.raises(ValueError):
            VotersRecord.decode(raw[:cut])
