"""QuorumState transition table, epoch rules, durable state and the leader's high watermark rule."""

from __future__ import annotations

import pytest

from pykbroker.raft.control_records import LeaderChangeMessage, control_key, parse_control_type
from pykbroker.raft.epoch_state import LeaderState, StateKind
from pykbroker.raft.quorum_state import IllegalRaftStateTransition, QuorumState
from pykbroker.raft.quorum_state_store import ElectionState, FileQuorumStateStore, MemoryQuorumStateStore
from pykbroker.raft.replicated_log import LogRecord, MemoryReplicatedLog, OffsetAndEpoch
from pykbroker.utils.time import MockTime


def quorum(local_id=1, voters=(1, 2, 3), store=None):
    q = QuorumState(local_id, frozenset(voters), store or MemoryQuorumStateStore(), MockTime())
    q.initialize(0)
    return q


def stand(q):
    """Win a pre-vote (KIP-996) and stand: Prospective, granted by voter 2, then Candidate."""
    q.transition_to_prospective()
    q.state.record_granted_vote(2)
    q.transition_to_candidate()


def test_fresh_start_is_unattached_epoch_zero():
    q = quorum()
    assert q.kind is StateKind.UNATTACHED and q.epoch == 0


def test_candidate_to_leader_needs_majority():
    q = quorum()
    stand(q)
    assert q.kind is StateKind.CANDIDATE and q.epoch == 1
    with pytest.raises(IllegalRaftStateTransition):
        q.transition_to_leader(0)
    q.state.record_granted_vote(2)
    leader = q.transition_to_leader(0)
    assert q.is_leader() and leader.epoch == 1
    assert q.store.read_election_state() == ElectionState(1, 1, 1, frozenset({1, 2, 3}))


def test_illegal_transitions_raise():
    q = quorum()
    with pytest.raises(IllegalRaftStateTransition):
        q.transition_to_resigned()  # Unattached -> Resigned is not in the table
    stand(q)
    q.state.record_granted_vote(2)
    q.transition_to_leader(0)
    with pytest.raises(IllegalRaftStateTransition):
        q.transition_to_candidate()  # Leader -> Candidate
    with pytest.raises(IllegalRaftStateTransition):
        q.transition_to_follower(1, 2)  # Leader -> Follower
    with pytest.raises(IllegalRaftStateTransition):
        q.transition_to_unattached(0)  # smaller epoch


def test_a_higher_epoch_keeps_an_unattached_or_candidate_voters_election_deadline():
    """Kafka's transitionToUnattached: a voter that learns of a higher epoch without a leader (a Vote it
    rejects) keeps the time it had left, so a candidate that cannot win cannot postpone the others'
    elections epoch after epoch (found with a restarted controller whose log was behind)."""
    q = quorum()
    q.transition_to_unattached(1)
    deadline = q.state.election_deadline_ms
    q.time.sleep(100)
    q.transition_to_unattached(2)
    q.transition_to_unattached(3)
    assert q.state.election_deadline_ms == deadline
    stand(q)
    candidate_deadline = q.state.election_deadline_ms
    q.transition_to_unattached(9)
    assert q.state.election_deadline_ms == candidate_deadline
    q.transition_to_follower(9, 2)
    q.time.sleep(5000)
    q.transition_to_unattached(10)  # from a follower: a fresh timeout, counted from now
    assert q.state.election_deadline_ms > q.time.hi_res_milliseconds() > candidate_deadline


def test_vote_once_per_epoch():
    q = quorum()
    q.transition_to_unattached_voted(5, 2)
    assert q.store.read_election_state().voted_id == 2
    q.transition_to_unattached_voted(5, 2)  # repeat for the same candidate is fine
    with pytest.raises(IllegalRaftStateTransition):
        q.transition_to_unattached_voted(5, 3)


def test_follower_rules():
    q = quorum()
    q.transition_to_follower(2, 2)
    with pytest.raises(IllegalRaftStateTransition):
        q.transition_to_follower(2, 3)  # two leaders in one epoch
    q.transition_to_follower(3, 3)
    assert q.leader_id == 3
    with pytest.raises(IllegalRaftStateTransition):
        q.transition_to_follower(4, 1)  # never follow ourselves


def test_initialize_from_store():
    store = MemoryQuorumStateStore()
    store.write_election_state(ElectionState(7, leader_id=1, voters=frozenset({1})))
    q = QuorumState(1, frozenset({1}), store, MockTime())
    q.initialize(0)
    assert q.kind is StateKind.RESIGNED and q.epoch == 7
    store.write_election_state(ElectionState(7, leader_id=2))
    q = QuorumState(1, frozenset({1, 2}), store, MockTime())
    q.initialize(0)
    assert q.kind is StateKind.FOLLOWER and q.leader_id == 2
    q = QuorumState(1, frozenset({1, 2}), store, MockTime())
    q.initialize(9)  # the log knows a newer epoch than the store
    assert q.kind is StateKind.UNATTACHED and q.epoch == 9


def test_file_store_round_trip_and_corruption(tmp_path):
    store = FileQuorumStateStore(str(tmp_path))
    assert store.read_election_state() is None
    state = ElectionState(3, 1, 1, frozenset({1}))
    store.write_election_state(state)
    assert FileQuorumStateStore(str(tmp_path)).read_election_state() == state
    (tmp_path / "quorum-state").write_text("{not json")
    with pytest.raises(ValueError):
        store.read_election_state()


def test_leader_high_watermark_is_majority_offset_above_epoch_start():
    leader = LeaderState(epoch=2, voters=frozenset({1, 2, 3}), local_id=1, epoch_start_offset=10)
    assert not leader.update_local_end_offset(10)
    assert not leader.update_local_end_offset(12)  # only the leader has it
    assert leader.update_replica_end_offset(2, 11)  # majority at 11 > epoch start
    assert leader.high_watermark == 11
    assert not leader.update_replica_end_offset(3, 5)
    assert leader.update_replica_end_offset(3, 12) and leader.high_watermark == 12
    assert not leader.update_replica_end_offset(2, 3)  # never decreases


def test_leader_change_message_round_trip():
    msg = LeaderChangeMessage(1, (1, 2, 3), (1, 2))
    assert LeaderChangeMessage.decode(msg.encode()) == msg
    assert parse_control_type(control_key(2)) == 2


def test_memory_log_read_truncate_and_epochs():
    log = MemoryReplicatedLog()
    log.append_as_leader([LogRecord(None, b"a"), LogRecord(None, b"b")], 1)
    log.append_as_leader([LogRecord(None, b"c")], 2)
    log.append_as_leader([LogRecord(None, b"d")], 2)
    assert log.end_offset() == 4 and log.last_fetched_epoch() == 2
    assert [b.base_offset for b in log.read(1)] == [0, 2, 3]
    assert [b.base_offset for b in log.read(2, 3)] == [2]
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(2, 1)
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(4, 2)
    with pytest.raises(ValueError):
        log.append_as_leader([LogRecord(None, b"x")], 1)
    log.update_high_watermark(4)
    log.truncate_to(3)
    assert log.end_offset() == 3 and log.high_watermark() == 3


def test_prospective_keeps_the_epoch_and_needs_a_majority_of_pre_votes():
    """KIP-996: a timed-out follower becomes Prospective in the same epoch, keeping its leader (durably);
    it becomes Candidate only with a majority of pre-votes; losing takes it back to that leader."""
    q = quorum()
    with pytest.raises(IllegalRaftStateTransition):
        q.transition_to_candidate()  # Unattached -> Candidate needs the pre-vote first
    q.transition_to_follower(4, 2)
    q.transition_to_prospective()
    assert q.kind is StateKind.PROSPECTIVE and q.epoch == 4 and q.leader_id == 2
    assert q.store.read_election_state() == ElectionState(4, 2, -1, frozenset({1, 2, 3}))
    with pytest.raises(IllegalRaftStateTransition):
        q.transition_to_candidate()  # only its own pre-vote
    with pytest.raises(IllegalRaftStateTransition):
        q.transition_to_unattached(4)  # it knows the epoch's leader: back to following it
    with pytest.raises(IllegalRaftStateTransition):
        q.transition_to_follower(4, 3)  # two leaders in one epoch
    q.transition_to_follower(4, 2)  # lost the pre-vote election
    assert q.kind is StateKind.FOLLOWER and q.epoch == 4 and q.leader_id == 2
    q.transition_to_prospective()
    q.state.record_granted_vote(3)
    q.transition_to_candidate()
    assert q.kind is StateKind.CANDIDATE and q.epoch == 5


def test_prospective_from_unattached_keeps_its_vote_and_goes_back_with_a_fresh_timeout():
    q = quorum()
    q.transition_to_unattached_voted(3, 2)
    q.transition_to_prospective()
    assert q.state.voted_id == 2 and q.epoch == 3 and q.leader_id == -1
    q.time.sleep(10_000)
    q.transition_to_unattached(3)  # lost: same epoch, same vote, a new election timeout from now
    assert q.kind is StateKind.UNATTACHED and q.state.voted_id == 2 and q.epoch == 3
    assert q.state.election_deadline_ms > q.time.hi_res_milliseconds()


def test_the_only_voter_stands_without_a_pre_vote():
    q = quorum(voters=(1,))
    q.transition_to_candidate()
    assert q.kind is StateKind.CANDIDATE and q.epoch == 1


def test_a_resigned_leader_asking_for_pre_votes_never_leads_or_votes_in_its_epoch_again():
    """Resigned -> Prospective keeps its own vote: it grants no other candidate of the epoch it won (two
    leaders), and restarted it comes back Prospective, so it can only stand in a new epoch."""
    store = MemoryQuorumStateStore()
    q = quorum(store=store)
    stand(q)
    q.state.record_granted_vote(2)
    q.transition_to_leader(0)
    q.transition_to_resigned()
    q.transition_to_prospective()
    assert q.state.voted_id == 1 and not q.state.can_grant_vote(2)
    q.transition_to_unattached(1)  # lost the pre-vote election
    assert q.state.voted_id == 1 and not q.state.can_grant_vote(2)
    restarted = QuorumState(1, frozenset({1, 2, 3}), store, MockTime())
    restarted.initialize(1)
    assert restarted.kind is StateKind.PROSPECTIVE and restarted.epoch == 1 and restarted.state.voted_id == 1
    restarted.state.record_granted_vote(3)
    restarted.transition_to_candidate()
    assert restarted.epoch == 2
