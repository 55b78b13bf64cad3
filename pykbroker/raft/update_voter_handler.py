"""The leader's side of UpdateRaftVoter (82, KIP-853), Kafka's ``KafkaRaftClient.handleUpdateVoterRequest`` +
``UpdateVoterHandler``: a voter tells the leader its controller endpoints and supported ``kraft.version`` range
(after a restart with other listeners); the leader writes a VotersRecord with that voter replaced and answers at
once, without waiting for the commit.

:func:`update_voter` checks, in Kafka's order: the request's leader epoch (FENCED_LEADER_EPOCH below ours,
UNKNOWN_LEADER_EPOCH above, NOT_LEADER_OR_FOLLOWER when not the leader), a directory id (INVALID_REQUEST), an
endpoint on the default (first controller) listener (INVALID_REQUEST), a valid range (INVALID_REQUEST); then
REQUEST_TIMED_OUT while another voter change is pending or the leader has no high watermark,
UNSUPPORTED_VERSION when ``kraft.version`` is 0 (a static quorum: Kafka 3.9 does not update those voters),
REQUEST_TIMED_OUT while the latest VotersRecord is not committed, INVALID_REQUEST when the range excludes
the finalized ``kraft.version``, VOTER_NOT_FOUND when ``(voter_id, directory_id)`` is not a voter.

Pure: the Raft IO thread calls it with what it owns and appends the returned set itself.
"""

from __future__ import annotations

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
from pykbroker.raft.control_records import Voter
from pykbroker.raft.raft_messages import UpdateRaftVoterRequestData
from pykbroker.raft.voter_set import NO_DIRECTORY_ID, VoterSet, VoterSetHistory


def update_voter(
    data: UpdateRaftVoterRequestData,
    is_leader: bool,
    epoch: int,
    high_watermark: int | None,
    change_pending: bool,
    history: VoterSetHistory,
    default_listener: str | None,
) -> tuple[int, VoterSet | None]:
    """``(NONE, the new voter set)`` to append, or ``(error code, None)``; see the module docstring.
    ``default_listener``: the listener whose endpoint the voter must have (None: any)."""
    if data.current_leader_epoch < epoch:
        return FENCED_LEADER_EPOCH, None
    if data.current_leader_epoch > epoch:
        return UNKNOWN_LEADER_EPOCH, None
    if not is_leader:
        return NOT_LEADER_OR_FOLLOWER, None
    if data.voter_directory_id == NO_DIRECTORY_ID:
        return INVALID_REQUEST, None
    if not data.listeners or (default_listener is not None and all(e.name != default_listener for e in data.listeners)):
        return INVALID_REQUEST, None
    low, high = data.min_supported_version, data.max_supported_version
    if low < 0 or high < 0 or high < low:
        return INVALID_REQUEST, None
    if change_pending or high_watermark is None:
        return REQUEST_TIMED_OUT, None
    kraft_version = history.kraft_version
    if kraft_version < 1:
        return UNSUPPORTED_VERSION, None
    latest_offset = history.latest_offset()
    voters = history.latest()
    if voters is None or latest_offset is None or latest_offset >= high_watermark:
        return REQUEST_TIMED_OUT, None
    if not low <= kraft_version <= high:
        return INVALID_REQUEST, None
    old = voters.voters.get(data.voter_id)
    if old is None or old.directory_id != data.voter_directory_id:
        return VOTER_NOT_FOUND, None
    new = Voter(data.voter_id, data.voter_directory_id, tuple(data.listeners), low, high)
    return NONE, VoterSet({**voters.voters, data.voter_id: new})


def needs_update(voters: VoterSet | None, local: Voter) -> bool:
    """Kafka's ``VoterSet.voterNodeNeedsUpdate``: ``local`` (this replica's id, directory id, listeners, range) is a
    voter of ``voters`` whose stored node differs."""
    if voters is None:
        return False
    stored = voters.voters.get(local.voter_id)
    return stored is not None and stored.directory_id == local.directory_id and stored != local
