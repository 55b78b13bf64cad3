"""The group coordinator follows the leadership of ``__consumer_offsets`` partitions: resignation unloads
groups and answers their waiting members NOT_COORDINATOR; stale notifications are ignored; commits
acknowledged later by the ISR change the in-memory offsets only when they succeed; append errors are
mapped as Kafka's GroupMetadataManager does."""

from __future__ import annotations

import pytest

from pykbroker.coordinator.group.group_metadata import GroupState, OffsetAndMetadata
from pykbroker.protocol import errors
from pykbroker.server.append_result import ProducePartitionResult
from tests.unit.coordinator.harness import Harness


class DeferredReplicaManager:
    """Appends wait until the test answers them (an acks=all append waiting for the ISR)."""

    def __init__(self):
        self.pending: list = []
        self.leader = True
        self.acks = []

    def get_partition(self, topic, partition):
        return self

    @property
    def is_leader(self):
        return self.leader

    def append_records(self, timeout, acks, internal, entries, callback):
        self.acks.append((acks, timeout))
        self.pending.append((entries, callback))

    def answer(self, code=errors.NONE):
        entries, callback = self.pending.pop(0)
        callback({tp: ProducePartitionResult(code) for tp in entries})


@pytest.fixture
def h():
    harness = Harness()
    yield harness
    harness.close()


def partition_of(h, group):
    return h.manager.partition_for(group)


def stable_group(h, group="g"):
    first = h.join_new(group)
    joined = h.join(group, member_id=first.member_id)[0]
    h.sync(group, joined.generation_id, joined.member_id, {joined.member_id: b"a"})
    return joined


def test_resignation_unloads_groups_and_answers_not_coordinator(h):
    a = stable_group(h)
    offsets = {("t", 0): OffsetAndMetadata(5, -1, "", 0)}
    assert h.commit("g", offsets, member_id=a.member_id, generation=a.generation_id)["t", 0] == errors.NONE
    # A second member joins: the rebalance waits for the first to rejoin.
    second = h.join_new("g")
    waiting = h.join("g", member_id=second.member_id)
    assert waiting == []
    p = partition_of(h, "g")
    group = h.manager.groups["g"]
    h.coordinator.on_resignation(p, 3)
    assert group.state is GroupState.DEAD and "g" not in h.manager.groups
    assert p not in h.manager.loaded
    assert waiting[0].error_code == errors.NOT_COORDINATOR
    # A stale election (older epoch) changes nothing; a newer one is recorded.
    h.coordinator.on_election(p, 2)
    assert h.manager.epochs[p] == 3
    h.coordinator.on_election(p, 4)
    assert h.manager.epochs[p] == 4
    # Loaded again from the log in the background (the fake log is empty here).
    with pytest.raises(errors.CoordinatorLoadInProgressError):
        h.coordinator.handle_fetch_offsets("g", [("t", 0)])
    assert h.load() == 1
    assert h.coordinator.handle_fetch_offsets("g", [("t", 0)]) == {("t", 0): None}


def test_resignation_answers_pending_sync_not_coordinator(h):
    first = h.join_new("s")
    a = h.join("s", member_id=first.member_id)[0]
    second = h.join_new("s")
    b_join = h.join("s", member_id=second.member_id)  # rebalance: waits for a to rejoin
    a_join = h.join("s", member_id=a.member_id)
    assert b_join and a_join
    follower = b_join[0] if b_join[0].member_id != b_join[0].leader else a_join[0]
    pending_sync = h.sync("s", follower.generation_id, follower.member_id)
    assert pending_sync == []  # a follower's sync waits for the leader's assignment
    h.coordinator.on_resignation(partition_of(h, "s"), 1)
    assert pending_sync[0].error_code == errors.NOT_COORDINATOR


def test_stale_resignation_is_ignored(h):
    stable_group(h)
    p = partition_of(h, "g")
    h.coordinator.on_election(p, 5)
    h.coordinator.on_resignation(p, 4)
    assert "g" in h.manager.groups


def test_commit_waits_for_the_isr_and_a_failed_one_is_not_visible(h):
    rm = DeferredReplicaManager()
    h.manager.replica_manager = rm
    h.manager.required_acks, h.manager.commit_timeout_ms = -1, 5000
    out: list = []
    h.coordinator.handle_commit_offsets("c", "", None, -1, {("t", 0): OffsetAndMetadata(7, -1, "", 0)}, out.append)
    assert out == [] and rm.acks == [(-1, 5000)]
    assert h.coordinator.handle_fetch_offsets("c", [("t", 0)]) == {("t", 0): None}
    rm.answer(errors.NOT_ENOUGH_REPLICAS)
    assert out == [{("t", 0): errors.COORDINATOR_NOT_AVAILABLE}]
    assert h.coordinator.handle_fetch_offsets("c", [("t", 0)]) == {("t", 0): None}
    h.coordinator.handle_commit_offsets("c", "", None, -1, {("t", 0): OffsetAndMetadata(8, -1, "", 0)}, out.append)
    rm.answer()
    assert out[-1] == {("t", 0): errors.NONE}
    assert h.coordinator.handle_fetch_offsets("c", [("t", 0)])[("t", 0)].offset == 8


@pytest.mark.parametrize(
    "append_error, answered",
    [
        (errors.REQUEST_TIMED_OUT, errors.COORDINATOR_NOT_AVAILABLE),
        (errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, errors.COORDINATOR_NOT_AVAILABLE),
        (errors.UNKNOWN_TOPIC_OR_PARTITION, errors.COORDINATOR_NOT_AVAILABLE),
        (errors.NOT_LEADER_OR_FOLLOWER, errors.NOT_COORDINATOR),
        (errors.KAFKA_STORAGE_ERROR, errors.NOT_COORDINATOR),
        (errors.RECORD_LIST_TOO_LARGE, errors.INVALID_COMMIT_OFFSET_SIZE),
    ],
)
def test_append_errors_are_mapped(h, append_error, answered):
    rm = DeferredReplicaManager()
    h.manager.replica_manager = rm
    out: list = []
    h.coordinator.handle_commit_offsets("m", "", None, -1, {("t", 0): OffsetAndMetadata(1, -1, "", 0)}, out.append)
    rm.answer(append_error)
    assert out == [{("t", 0): answered}]


def test_a_partition_not_led_here_is_not_coordinated(h):
    h.coordinator.on_resignation(partition_of(h, "x"), 1)  # e.g. it became a follower
    with pytest.raises(errors.NotCoordinatorError):
        h.manager.get_group("x")
    with pytest.raises(errors.NotCoordinatorError):
        h.coordinator.handle_heartbeat("x", "m", None, 1)
