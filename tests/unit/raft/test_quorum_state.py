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


def test_fresh_start_is_unattached_epoch_zero():
    q = quorum()
    assert q.kind is StateKind.UNATTACHED and q.epoch == 0


def test_candidate_to_leader_needs_majority():
    q = quorum()
    q.transition_to_candidate()
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
    q.transition_to_candidate()
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
    q.transition_to_candidate()
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
