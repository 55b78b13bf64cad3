"""Raft RPCs <-> protocol bodies: every message survives encode/decode with the schema codec at each
version the Raft client may use, and the nest holds exactly ``__cluster_metadata-0``."""

from __future__ import annotations

import uuid

import pytest

from pykbroker.protocol.codec import decode, encode
from pykbroker.protocol.errors import FENCED_LEADER_EPOCH, INCONSISTENT_CLUSTER_ID, NONE, SNAPSHOT_NOT_FOUND
from pykbroker.protocol.schemas import REQUESTS, RESPONSES
from pykbroker.raft.control_records import LEADER_CHANGE, LeaderChangeMessage, VoterEndpoint, control_key
from pykbroker.raft.raft_messages import (
    BeginQuorumEpochRequestData,
    BeginQuorumEpochResponseData,
    EndQuorumEpochRequestData,
    EndQuorumEpochResponseData,
    EpochEndOffset,
    FetchRequestData,
    FetchResponseData,
    FetchSnapshotRequestData,
    FetchSnapshotResponseData,
    LeaderIdAndEpoch,
    SnapshotId,
    UpdateRaftVoterRequestData,
    UpdateRaftVoterResponseData,
    VoteRequestData,
    VoteResponseData,
)
from pykbroker.raft.raft_wire import (
    METADATA_TOPIC_ID,
    RaftWireError,
    request_from_wire,
    request_to_wire,
    response_from_wire,
    response_to_wire,
)
from pykbroker.raft.replicated_log import LogBatch, LogRecord

BATCHES = (
    LogBatch(
        5, 3, (LogRecord(control_key(LEADER_CHANGE), LeaderChangeMessage(1, (1, 2, 3), (1, 2)).encode()),), True, 1000
    ),
    LogBatch(6, 3, (LogRecord(None, b"a"), LogRecord(None, b"bb")), False, 1001),
)

# (request, response, versions)
CASES = [
    (
        VoteRequestData(4, 1, 3, 17, "cluster-1", voter_id=2),
        VoteResponseData(NONE, -1, 4, True),
        (0, 1, 2),
    ),
    (
        VoteRequestData(4, 1, 3, 17, "cluster-1", voter_id=2, pre_vote=True),
        VoteResponseData(NONE, 1, 3, False),
        (2,),
    ),
    (
        BeginQuorumEpochRequestData(1, 4, "cluster-1", voter_id=3),
        BeginQuorumEpochResponseData(FENCED_LEADER_EPOCH, 2, 5),
        (0, 1),
    ),
    (
        EndQuorumEpochRequestData(1, 4, (3, 2), "cluster-1"),
        EndQuorumEpochResponseData(NONE, 1, 4),
        (0, 1),
    ),
    (
        FetchRequestData(2, 4, 6, 3, 500, 1 << 20, "cluster-1"),
        FetchResponseData(NONE, LeaderIdAndEpoch(1, 4), 6, BATCHES),
        (13, 14, 15, 16, 17),
    ),
    (
        FetchRequestData(4, 4, 9, 3, 0, 4096, None),
        FetchResponseData(NONE, LeaderIdAndEpoch(1, 4), 7, (), EpochEndOffset(3, 7)),
        (13, 17),
    ),
    (
        FetchRequestData(2, 4, 6, 3, 500, 1 << 20, "cluster-1", uuid.UUID(int=12345)),
        FetchResponseData(NONE, LeaderIdAndEpoch(1, 4), 6, BATCHES),
        (17,),
    ),
    (  # KIP-1166: v18 carries the fetching replica's high watermark (-1: it knows none)
        FetchRequestData(2, 4, 6, 3, 500, 1 << 20, "cluster-1", uuid.UUID(int=12345), high_watermark=-1),
        FetchResponseData(NONE, LeaderIdAndEpoch(1, 4), 6, BATCHES),
        (18,),
    ),
    (
        FetchRequestData(2, 4, 6, 3, 500, 1 << 20, "cluster-1", uuid.UUID(int=12345), high_watermark=5),
        FetchResponseData(NONE, LeaderIdAndEpoch(1, 4), 6, BATCHES),
        (18,),
    ),
    (
        FetchSnapshotRequestData(2, 4, SnapshotId(100, 3), 0, 1 << 20, "cluster-1"),
        FetchSnapshotResponseData(SNAPSHOT_NOT_FOUND, LeaderIdAndEpoch(1, 4)),
        (0, 1),
    ),
    (
        UpdateRaftVoterRequestData(
            4, 2, uuid.UUID(int=7), (VoterEndpoint("CONTROLLER", "host-2", 19093),), 0, 1, "cluster-1"
        ),
        UpdateRaftVoterResponseData(NONE, 1, 4),
        (0,),
    ),
]


def _wire(schema, version, body):
    decoded, _end = decode(schema, version, encode(schema, version, body))
    return decoded


@pytest.mark.parametrize("request_data,response_data,versions", CASES)
def test_round_trip_through_the_codec(request_data, response_data, versions):
    for version in versions:
        api_key, body = request_to_wire(request_data)
        assert api_key == request_data.api_key
        got = request_from_wire(api_key, _wire(REQUESTS[api_key], version, body))
        expected = request_data
        if api_key == 52 and version == 0:  # Vote v0 has no voter_id
            expected = VoteRequestData(4, 1, 3, 17, "cluster-1")
        if api_key == 53 and version == 0:
            expected = BeginQuorumEpochRequestData(1, 4, "cluster-1")
        assert got == expected, version
        wire_response = _wire(RESPONSES[api_key], version, response_to_wire(response_data))
        assert response_from_wire(api_key, wire_response) == response_data, version


def test_fetch_names_the_metadata_topic_by_id_from_v13():
    _, body = request_to_wire(FetchRequestData(2, 4, 6, 3))
    decoded = _wire(REQUESTS[1], 13, body)
    assert decoded["topics"][0]["topic_id"] == METADATA_TOPIC_ID
    assert decoded["topics"][0]["partitions"][0]["last_fetched_epoch"] == 3


def test_fetch_before_v18_has_no_high_watermark():
    """A peer below Fetch v18 sends none: the leader reads Long.MAX_VALUE (not stale, so the fetch may be held)."""
    _, body = request_to_wire(FetchRequestData(2, 4, 6, 3, high_watermark=5))
    assert request_from_wire(1, _wire(REQUESTS[1], 17, body)).high_watermark == (1 << 63) - 1


def test_top_level_error_wins():
    body = response_to_wire(VoteResponseData(NONE, 1, 4, False))
    body["error_code"] = INCONSISTENT_CLUSTER_ID
    assert response_from_wire(52, body).error_code == INCONSISTENT_CLUSTER_ID


@pytest.mark.parametrize("api_key", [52, 53, 54, 1, 59])
def test_a_top_level_error_without_partitions_is_that_error(api_key):
    """The generic error response (e.g. CLUSTER_AUTHORIZATION_FAILED from a controller's authorizer) carries
    no partition: the message is the error, not a malformed response."""
    container = {1: "responses"}.get(api_key, "topics")
    data = response_from_wire(api_key, {"error_code": 31, container: []})
    assert data.error_code == 31


def test_other_partitions_refused():
    _, body = request_to_wire(VoteRequestData(4, 1, 3, 17))
    body["topics"][0]["partitions"][0]["partition_index"] = 1
    with pytest.raises(RaftWireError):
        request_from_wire(52, body)
    body["topics"] = []
    with pytest.raises(RaftWireError):
        request_from_wire(52, body)
    with pytest.raises(RaftWireError):
        request_from_wire(0, body)
