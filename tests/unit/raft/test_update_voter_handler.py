"""UpdateRaftVoter on the leader (Kafka's ``KafkaRaftClient.handleUpdateVoterRequest`` + ``UpdateVoterHandler``):
each refusal with Kafka's error code, in Kafka's order, and the voter set a valid update produces."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from pykbroker.protocol.errors import (
    FENCED_LEADER_EPOCH,
    INVALID_REQUEST,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    REQUEST_TIMED_OUT,
    UNKNOWN_LEADER_EPOCH,
    UNSUPPORTED_VERSION,
    VOTER_NOT_FOUND,
)
from pykbroker.raft.control_records import Voter, VoterEndpoint
from pykbroker.raft.raft_messages import UpdateRaftVoterRequestData
from pykbroker.raft.update_voter_handler import needs_update, update_voter
from pykbroker.raft.voter_set import NO_DIRECTORY_ID, VoterSet, VoterSetHistory

D1, D2 = uuid.UUID(int=1), uuid.UUID(int=2)
OLD = (VoterEndpoint("CONTROLLER", "localhost", 9002),)
NEW = (VoterEndpoint("CONTROLLER", "localhost", 19002),)
VOTERS = VoterSet.of([Voter(1, D1, (VoterEndpoint("CONTROLLER", "localhost", 9001),)), Voter(2, D2, OLD)])
REQUEST = UpdateRaftVoterRequestData(5, 2, D2, NEW, 0, 1)


def history(kraft_version: int = 1, voters_offset: int = 3) -> VoterSetHistory:
    h = VoterSetHistory(None)
    h.add(0, kraft_version)
    h.add(voters_offset, VOTERS)
    return h


def call(request=REQUEST, leader=True, epoch=5, hw=10, pending=False, hist=None, listener="CONTROLLER"):
    return update_voter(request, leader, epoch, hw, pending, hist or history(), listener)


@pytest.mark.parametrize(
    "kwargs,expected",
    [
        ({"epoch": 6}, FENCED_LEADER_EPOCH),
        ({"epoch": 4}, UNKNOWN_LEADER_EPOCH),
        ({"leader": False}, NOT_LEADER_OR_FOLLOWER),
        ({"request": dataclasses.replace(REQUEST, voter_directory_id=NO_DIRECTORY_ID)}, INVALID_REQUEST),
        ({"request": dataclasses.replace(REQUEST, listeners=())}, INVALID_REQUEST),
        ({"listener": "OTHER"}, INVALID_REQUEST),
        ({"request": dataclasses.replace(REQUEST, min_supported_version=2, max_supported_version=1)}, INVALID_REQUEST),
        ({"request": dataclasses.replace(REQUEST, min_supported_version=-1)}, INVALID_REQUEST),
        ({"pending": True}, REQUEST_TIMED_OUT),
        ({"hw": None}, REQUEST_TIMED_OUT),
        ({"hist": history(kraft_version=0)}, UNSUPPORTED_VERSION),
        ({"hist": history(voters_offset=10)}, REQUEST_TIMED_OUT),  # the latest VotersRecord is not committed
        ({"request": dataclasses.replace(REQUEST, min_supported_version=0, max_supported_version=0)}, INVALID_REQUEST),
        ({"request": dataclasses.replace(REQUEST, voter_directory_id=D1)}, VOTER_NOT_FOUND),
        ({"request": dataclasses.replace(REQUEST, voter_id=3)}, VOTER_NOT_FOUND),
    ],
)
def test_refusals_use_kafkas_error_codes(kwargs, expected):
    assert call(**kwargs) == (expected, None)


def test_a_valid_update_replaces_only_that_voter():
    error, new_set = call()
    assert error == NONE and new_set is not None
    assert new_set.ids() == {1, 2}
    assert new_set.voters[2] == Voter(2, D2, NEW, 0, 1)
    assert new_set.voters[1] == VOTERS.voters[1]


def test_needs_update_only_for_a_voter_whose_stored_entry_differs():
    assert needs_update(VOTERS, Voter(2, D2, NEW))
    assert needs_update(VOTERS, Voter(2, D2, OLD, 0, 0))  # another supported range
    assert not needs_update(VOTERS, Voter(2, D2, OLD))
    assert not needs_update(VOTERS, Voter(2, D1, NEW))  # another replica of id 2
    assert not needs_update(VOTERS, Voter(3, D2, NEW))  # not a voter
    assert not needs_update(None, Voter(2, D2, NEW))
