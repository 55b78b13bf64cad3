"""DescribeQuorum from the Raft leader: per-replica end offsets, fetch and caught-up times (Kafka's
LeaderState.ReplicaState), the leader's own row, observers, and NOT_LEADER_OR_FOLLOWER elsewhere."""

from __future__ import annotations

from pykbroker.protocol import errors
from pykbroker.raft.describe_quorum import NO_DIRECTORY_ID, describe_quorum
from pykbroker.raft.epoch_state import OBSERVER_SESSION_TIMEOUT_MS, LeaderState, ReplicaState
from tests.unit.raft.test_kafka_raft_client_multi_voter import Cluster


def _rows(rows):
    return {r["replica_id"]: r for r in rows}


def _settle(cluster, rounds=10):
    for _ in range(rounds):
        cluster.time.sleep(50)
        cluster.exchange(cluster.poll())


def test_only_the_leader_describes_the_quorum():
    cluster = Cluster()
    cluster.elect(1)
    for follower in (2, 3):
        partition = describe_quorum(cluster.clients[follower], cluster.time.milliseconds())
        assert partition["error_code"] == errors.NOT_LEADER_OR_FOLLOWER
        assert partition["error_message"]
        assert partition["current_voters"] == [] and partition["observers"] == []


def test_leader_reports_voters_and_observers_with_true_offsets_and_times():
    cluster = Cluster(ids=(1, 2, 3, 4))
    cluster.elect(1)
    _settle(cluster)
    leader = cluster.clients[1]
    leader.prepare_append(1, ["a", "b"])
    _settle(cluster)
    now = cluster.time.milliseconds()
    partition = describe_quorum(leader, now)
    assert partition["error_code"] == errors.NONE and partition["error_message"] is None
    assert partition["leader_id"] == 1 and partition["leader_epoch"] == 1
    end = cluster.logs[1].end_offset()
    assert end == 3 and partition["high_watermark"] == end
    voters = _rows(partition["current_voters"])
    assert sorted(voters) == [1, 2, 3]
    assert voters[1] == {
        "replica_id": 1,
        "replica_directory_id": NO_DIRECTORY_ID,
        "log_end_offset": end,
        "last_fetch_timestamp": now,
        "last_caught_up_timestamp": now,
    }
    for v in (2, 3):
        assert voters[v]["log_end_offset"] == end
        assert 0 < voters[v]["last_fetch_timestamp"] <= now
        assert 0 < voters[v]["last_caught_up_timestamp"] <= voters[v]["last_fetch_timestamp"]
    observers = _rows(partition["observers"])
    assert list(observers) == [4] and observers[4]["log_end_offset"] == end
    assert observers[4]["last_caught_up_timestamp"] > 0


def test_a_lagging_voter_keeps_its_last_caught_up_time():
    cluster = Cluster()
    cluster.elect(1)
    _settle(cluster)
    caught_up_3 = _rows(describe_quorum(cluster.clients[1], cluster.time.milliseconds())["current_voters"])[3][
        "last_caught_up_timestamp"
    ]
    cut_off_3 = lambda m: 3 in (m.source_id, m.destination_id)  # noqa: E731
    cluster.clients[1].prepare_append(1, ["a"])
    cluster.run(500, drop=cut_off_3)
    now = cluster.time.milliseconds()
    voters = _rows(describe_quorum(cluster.clients[1], now)["current_voters"])
    assert voters[3]["last_caught_up_timestamp"] == caught_up_3 < now - 400
    assert voters[3]["log_end_offset"] == 1 < voters[2]["log_end_offset"] == 2
    assert voters[2]["last_caught_up_timestamp"] >= now - 100


def test_caught_up_as_of_the_previous_fetch():
    """Kafka's rule: fetching at least the leader's end offset of the previous fetch means caught up at
    the time of that previous fetch."""
    state = ReplicaState(2)
    state = state.after_fetch(100, 5, leader_end_offset=10)  # behind, nothing to compare with yet
    assert state.last_caught_up_timestamp == -1 and state.last_fetch_timestamp == 100
    state = state.after_fetch(200, 10, leader_end_offset=12)  # reached the end as of t=100
    assert state.last_caught_up_timestamp == 100 and state.last_fetch_leader_end_offset == 12
    state = state.after_fetch(300, 12, leader_end_offset=12)  # at the end now
    assert state.last_caught_up_timestamp == 300 and state.end_offset == 12


def test_negative_replica_ids_are_ignored_and_silent_observers_expire():
    leader = LeaderState(epoch=1, voters=frozenset({1}), local_id=1, epoch_start_offset=0)
    leader.update_local_end_offset(5)
    leader.update_replica_end_offset(-1, 3, now_ms=10)
    leader.update_replica_end_offset(7, 5, now_ms=10)
    assert list(leader.observer_states) == [7] and leader.observer_states[7].last_caught_up_timestamp == 10
    leader.update_replica_end_offset(8, 5, now_ms=10 + OBSERVER_SESSION_TIMEOUT_MS)
    assert list(leader.observer_states) == [8]


class _Client:
    def __init__(self, state):
        self.quorum = type("Q", (), {"state": state, "voters": state.voters})()


def test_silent_observers_are_left_out_of_the_answer():
    leader = LeaderState(epoch=1, voters=frozenset({1}), local_id=1, epoch_start_offset=0)
    leader.update_local_end_offset(5)
    leader.update_replica_end_offset(7, 5, now_ms=10)
    assert [o["replica_id"] for o in describe_quorum(_Client(leader), 20)["observers"]] == [7]
    assert describe_quorum(_Client(leader), 10 + OBSERVER_SESSION_TIMEOUT_MS)["observers"] == []
