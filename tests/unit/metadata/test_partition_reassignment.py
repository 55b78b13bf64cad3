"""Partition reassignment on the controller (KIP-455): AlterPartitionReassignments / ListPartitionReassignments
with Kafka's errors, completion through AlterPartition (PartitionChangeBuilder's completeReassignmentIfNeeded),
leadership moving off a removed leader, cancellation, and the reassignment surviving a snapshot."""

from __future__ import annotations

import pytest

from pykbroker.metadata import partition_change_builder as pcb
from pykbroker.metadata.alter_partition import alter_partition
from pykbroker.metadata.partition_reassignment import alter_partition_reassignments, list_partition_reassignments
from pykbroker.metadata.partition_registration import PartitionRegistration
from pykbroker.metadata.records import PARTITION_CHANGE_RECORD
from pykbroker.protocol import errors
from tests.unit.metadata.test_alter_partition import request as alter_partition_request
from tests.unit.metadata.test_replication_control_manager import Ctx, t


@pytest.fixture
def ctx():
    c = Ctx(num_brokers=5)
    c.create(t("a", p=2, rf=3))
    return c


def part(ctx, topic="a", index=0) -> PartitionRegistration:
    return ctx.repl.topics[ctx.repl.topics_by_name[topic]].parts[index]


def reassign(ctx, targets: dict, topic="a", apply=True):
    req = {
        "timeout_ms": 1000,
        "topics": [{"name": topic, "partitions": [{"partition_index": i, "replicas": r} for i, r in targets.items()]}],
    }
    result = alter_partition_reassignments(ctx.repl, req)
    if apply:
        ctx.replay(result.records)
    return result


def codes(result):
    return {
        (t["name"], p["partition_index"]): p["error_code"]
        for t in result.response["responses"]
        for p in t["partitions"]
    }


def listed(ctx, topics=None):
    response = list_partition_reassignments(ctx.repl, {"topics": topics}).response
    return {
        (t["name"], p["partition_index"]): (p["replicas"], p["adding_replicas"], p["removing_replicas"])
        for t in response["topics"]
        for p in t["partitions"]
    }


def isr_change(ctx, new_isr, index=0):
    result = alter_partition(ctx.repl, alter_partition_request(ctx, new_isr, index=index))
    ctx.replay(result.records)
    return result.response["topics"][0]["partitions"][0]


def test_pure_reassignment_helpers():
    assert pcb.reassignment_replicas([1, 2, 3], [4, 2, 1]) == ([4, 2, 1, 3], [3], [4])
    assert pcb.maybe_complete_reassignment([4, 2, 1, 3], [3], [4], [1, 2, 3]) is None  # 4 not in the ISR yet
    assert pcb.maybe_complete_reassignment([4, 2, 1, 3], [3], [4], [1, 2, 3, 4]) == ([4, 2, 1], [1, 2, 4])
    assert pcb.maybe_complete_reassignment([1, 2], [], [], [1, 2]) is None  # nothing in progress
    assert pcb.maybe_complete_reassignment([2, 1], [1], [], [1]) is None  # the ISR would be empty


def test_reassignment_adds_then_completes_when_new_replica_joins_isr(ctx):
    old = part(ctx)
    leader, follower, dropped = old.replicas
    new = next(b for b in range(5) if b not in old.replicas)
    target = [new, leader, follower]
    result = reassign(ctx, {0: target})
    assert codes(result) == {("a", 0): errors.NONE}
    (record,) = result.records
    assert record.name == PARTITION_CHANGE_RECORD
    p = part(ctx)
    assert p.replicas == (new, leader, follower, dropped)
    assert p.adding_replicas == (new,) and p.removing_replicas == (dropped,)
    assert p.leader == leader and p.leader_epoch == old.leader_epoch  # adding alone keeps the epoch
    assert listed(ctx) == {("a", 0): ([new, leader, follower, dropped], [new], [dropped])}
    assert listed(ctx, [{"name": "a", "partition_indexes": [1]}]) == {}
    # the leader adds the new replica to the ISR: the reassignment completes in the same record
    answer = isr_change(ctx, [*p.isr, new])
    p = part(ctx)
    assert answer["error_code"] == errors.NONE and answer["leader_id"] == leader
    assert p.replicas == tuple(target) and dropped not in p.isr and set(p.isr) == set(target)
    assert p.adding_replicas == () and p.removing_replicas == ()
    assert p.leader == leader and p.leader_epoch == old.leader_epoch + 1  # a replica left: epoch bump
    assert listed(ctx) == {}


def test_completion_moves_leadership_off_a_removed_leader(ctx):
    old = part(ctx)
    leader = old.leader
    new = next(b for b in range(5) if b not in old.replicas)
    target = [new, *(b for b in old.replicas if b != leader)]
    reassign(ctx, {0: target})
    p = part(ctx)
    assert p.removing_replicas == (leader,) and p.leader == leader
    result = alter_partition(ctx.repl, alter_partition_request(ctx, [*p.isr, new]))
    answer = result.response["topics"][0]["partitions"][0]
    assert answer["error_code"] == errors.NEW_LEADER_ELECTED  # and the record is still written
    assert len(result.records) == 1
    ctx.replay(result.records)
    p = part(ctx)
    assert p.replicas == tuple(target) and leader not in p.isr
    assert p.leader == new and p.leader_epoch == old.leader_epoch + 1  # first of the target in the ISR


def test_reorder_completes_at_once(ctx):
    old = part(ctx)
    target = list(reversed(old.replicas))
    reassign(ctx, {0: target})
    p = part(ctx)
    assert p.replicas == tuple(target) and p.adding_replicas == () and p.removing_replicas == ()
    assert p.leader == old.leader  # ElectLeaders moves it to the new preferred replica, not the reassignment
    assert listed(ctx) == {}


def test_increase_and_decrease_replication_factor(ctx):
    old = part(ctx)
    extra = [b for b in range(5) if b not in old.replicas]
    reassign(ctx, {0: [*old.replicas, *extra]})
    assert part(ctx).adding_replicas == tuple(extra)
    isr_change(ctx, [*part(ctx).isr, *extra])
    assert part(ctx).replicas == (*old.replicas, *extra) and listed(ctx) == {}
    reassign(ctx, {0: [old.replicas[0]]})  # RF 5 -> 1, the ISR already holds the target: done at once
    p = part(ctx)
    assert p.replicas == (old.replicas[0],) and p.isr == (old.replicas[0],) and p.leader == old.replicas[0]


def test_validation_errors(ctx):
    old = part(ctx)
    result = reassign(
        ctx,
        {0: [old.replicas[0], old.replicas[0]], 1: [0, 1, 9], 7: [0, 1, 2]},
        apply=False,
    )
    assert codes(result) == {
        ("a", 0): errors.INVALID_REPLICA_ASSIGNMENT,
        ("a", 1): errors.INVALID_REPLICA_ASSIGNMENT,
        ("a", 7): errors.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert result.records == []
    assert codes(reassign(ctx, {0: []}, apply=False)) == {("a", 0): errors.INVALID_REPLICA_ASSIGNMENT}
    assert codes(reassign(ctx, {0: [0, 1, 2]}, topic="nope", apply=False)) == {
        ("nope", 0): errors.UNKNOWN_TOPIC_OR_PARTITION
    }
    assert codes(reassign(ctx, {0: None}, apply=False)) == {("a", 0): errors.NO_REASSIGNMENT_IN_PROGRESS}


def test_cancel_reverts_to_the_original_replicas(ctx):
    old = part(ctx)
    new = [b for b in range(5) if b not in old.replicas]
    reassign(ctx, {0: new[:1] + list(old.replicas[1:])})
    assert part(ctx).adding_replicas == (new[0],)
    result = reassign(ctx, {0: None})
    assert codes(result) == {("a", 0): errors.NONE}
    p = part(ctx)
    # Kafka's originalReplicas: the replicas without the adding ones (the removed one stays last)
    assert p.replicas == (*old.replicas[1:], old.replicas[0])
    assert p.isr == old.isr and p.leader == old.leader
    assert p.adding_replicas == () and p.removing_replicas == ()
    assert listed(ctx) == {}


def test_cancel_needing_unclean_election_is_refused(ctx):
    old = part(ctx)
    new = [b for b in range(5) if b not in old.replicas]
    reassign(ctx, {0: [*old.replicas, *new]})
    isr_change(ctx, [*old.isr, *new])
    assert part(ctx).adding_replicas == ()  # completed: nothing to cancel
    # a reassignment whose adding replicas hold the whole ISR (the originals were fenced)
    reassign(ctx, {0: list(old.replicas)})  # shrink back: completes at once
    reassign(ctx, {0: [*old.replicas, new[0]]})
    isr_change(ctx, [old.leader, new[0]])  # not complete: the two others are not in the ISR
    p = part(ctx)
    assert p.adding_replicas == (new[0],)
    ctx.replay([pcb.build(ctx.repl.topics_by_name["a"], 0, p, [new[0]], lambda r: r == new[0])])
    assert part(ctx).isr == (new[0],) and part(ctx).leader == new[0]
    assert codes(reassign(ctx, {0: None}, apply=False)) == {("a", 0): errors.INVALID_REPLICA_ASSIGNMENT}


def test_reassignment_survives_a_snapshot(ctx):
    old = part(ctx)
    new = next(b for b in range(5) if b not in old.replicas)
    reassign(ctx, {0: [new, *old.replicas[1:]]})
    p = part(ctx)
    restored = PartitionRegistration.from_record(p.to_record(ctx.repl.topics_by_name["a"], 0).data)
    assert restored == p and restored.adding_replicas == (new,) and restored.removing_replicas == (old.replicas[0],)
