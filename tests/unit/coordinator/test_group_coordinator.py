"""GroupCoordinator behaviour (classic protocol) against Kafka's GroupCoordinator semantics."""

from __future__ import annotations

import pytest

from pykbroker.coordinator.group.group_metadata import GroupState, OffsetAndMetadata
from pykbroker.protocol import errors
from tests.unit.coordinator.harness import Harness, subscription


@pytest.fixture
def h():
    harness = Harness()
    yield harness
    harness.close()


def offsets(*tps):
    return {tp: OffsetAndMetadata(5, -1, "", 0) for tp in tps}


def test_offset_delete_on_existing_group_answers_per_partition(h):
    assert set(h.commit("g", offsets(("t", 0), ("t", 1), ("u", 0))).values()) == {errors.NONE}
    out = []
    h.coordinator.handle_delete_offsets("g", [("t", 0), ("u", 0)], lambda code, codes: out.append((code, codes)))
    assert out == [(errors.NONE, {("t", 0): errors.NONE, ("u", 0): errors.NONE})]
    assert set(h.manager.get_group("g").offsets) == {("t", 1)}


def test_offset_delete_refuses_topics_a_stable_consumer_group_subscribes_to(h):
    h.commit("g", offsets(("t", 0), ("u", 0)))
    mid = h.join_new("g", protocols=[("range", subscription("t"))]).member_id
    resp = h.join("g", member_id=mid, protocols=[("range", subscription("t"))])[0]
    assert h.sync("g", resp.generation_id, mid, {mid: b"a"})[0].error_code == errors.NONE
    out = []
    h.coordinator.handle_delete_offsets("g", [("t", 0), ("u", 0)], lambda code, codes: out.append((code, codes)))
    assert out == [(errors.NONE, {("t", 0): errors.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): errors.NONE})]
    assert h.manager.get_group("g").state is GroupState.STABLE


def test_offset_delete_of_unknown_group(h):
    out = []
    h.coordinator.handle_delete_offsets("nope", [("t", 0)], lambda code, codes: out.append((code, codes)))
    assert out == [(errors.GROUP_ID_NOT_FOUND, {})]


@pytest.mark.parametrize("session_ms", [-5, 0, 5999, 1800001])
def test_join_with_session_timeout_out_of_bounds_gets_invalid_session_timeout(h, session_ms):
    for version, member_id in ((0, ""), (9, ""), (9, "c-unknown")):
        out = h.join("g", member_id=member_id, session_ms=session_ms, rebalance_ms=-1, version=version)
        assert [r.error_code for r in out] == [errors.INVALID_SESSION_TIMEOUT]
    assert h.manager.get_group("g") is None


def test_join_with_negative_rebalance_timeout_completes_without_waiting(h):
    from tests.helpers.wait import wait_until

    mid = h.join_new("g", rebalance_ms=-1).member_id
    out = h.join("g", member_id=mid, rebalance_ms=-1)
    wait_until(lambda: out, timeout=5, message="JoinGroup with a negative rebalance timeout got no answer")
    assert (out[0].error_code, out[0].generation_id, out[0].leader) == (errors.NONE, 1, mid)
    # Its SyncGroup is due within the same (negative) timeout: without one it is removed at once and the
    # group, left empty, completes another generation (Kafka's DelayedSync expiring).
    group = h.manager.get_group("g")
    wait_until(lambda: group.state is GroupState.EMPTY, timeout=5, message="member without SyncGroup removed")
    assert group.members == {} and group.generation_id == 2
    # A second member with a negative rebalance timeout: the group's timeout is the members' maximum
    # (here negative), so the rebalance completes at once.
    mid2 = h.join_new("g", rebalance_ms=-1).member_id
    out2 = h.join("g", member_id=mid2, rebalance_ms=-1)
    wait_until(lambda: out2, timeout=5, message="second JoinGroup got no answer")
    assert (out2[0].error_code, out2[0].generation_id, out2[0].leader) == (errors.NONE, 3, mid2)


def stable_static_group(h, *instances):
    """A Stable group of static members (JoinGroup v5+); returns {instance id: member id} and the generation."""
    outs = {i: h.join("g", instance_id=i, version=5) for i in instances}
    assert all(len(o) == 1 and o[0].error_code == errors.NONE for o in outs.values()), outs
    ids = {i: o[0].member_id for i, o in outs.items()}
    gen = outs[instances[0]][0].generation_id
    leader = outs[instances[0]][0].leader
    syncs = {
        i: h.sync(
            "g",
            gen,
            ids[i],
            {m: f"asg-{k}".encode() for k, m in ids.items()} if ids[i] == leader else {},
            instance_id=i,
        )
        for i in instances
    }
    assert all(s[0].error_code == errors.NONE for s in syncs.values()), syncs
    assert h.manager.get_group("g").state is GroupState.STABLE
    return ids, gen, leader


def test_static_member_rejoin_in_stable_group_replaces_member_without_rebalance(h):
    # one join completes the first rebalance; the second static member joins and both rejoin
    first = h.join("g", instance_id="a", version=5)
    assert first[0].error_code == errors.NONE
    a_id = first[0].member_id
    h.sync("g", 1, a_id, {a_id: b"x"}, instance_id="a")
    b_out = h.join("g", instance_id="b", version=5)
    a_out = h.join("g", member_id=a_id, instance_id="a", version=5)
    assert a_out[0].error_code == b_out[0].error_code == errors.NONE
    b_id, gen = b_out[0].member_id, a_out[0].generation_id
    assert a_out[0].leader == a_id
    assert h.sync("g", gen, b_id, instance_id="b") == []  # waits for the leader
    assert h.sync("g", gen, a_id, {a_id: b"asg-a", b_id: b"asg-b"}, instance_id="a")[0].assignment == b"asg-a"
    group = h.manager.get_group("g")
    assert group.state is GroupState.STABLE

    # "b" restarts: empty member id, same group.instance.id, same protocols.
    for version, leader_expected in ((5, a_id), (9, a_id)):
        rejoin = h.join("g", instance_id="b", version=version)
        assert len(rejoin) == 1 and rejoin[0].error_code == errors.NONE, rejoin
        new_b = rejoin[0].member_id
        assert new_b != b_id and new_b.startswith("b-")
        assert (rejoin[0].generation_id, rejoin[0].leader, rejoin[0].members) == (gen, leader_expected, ())
        assert rejoin[0].skip_assignment is False
        assert group.state is GroupState.STABLE and group.generation_id == gen
        assert set(group.members) == {a_id, new_b} and group.static_members["b"] == new_b
        sync = h.sync("g", gen, new_b, instance_id="b")
        assert (sync[0].error_code, sync[0].assignment) == (errors.NONE, b"asg-b")
        # the old instance is fenced everywhere, before any unknown-member check
        assert h.join("g", member_id=b_id, instance_id="b")[0].error_code == errors.FENCED_INSTANCE_ID
        assert h.sync("g", gen, b_id, instance_id="b")[0].error_code == errors.FENCED_INSTANCE_ID
        assert h.coordinator.handle_heartbeat("g", b_id, "b", gen) == errors.FENCED_INSTANCE_ID
        assert set(h.commit("g", offsets(("t", 0)), b_id, gen, "b").values()) == {errors.FENCED_INSTANCE_ID}
        assert h.coordinator.handle_leave_group("g", [(b_id, "b")]) == (errors.NONE, [errors.FENCED_INSTANCE_ID])
        assert group.state is GroupState.STABLE and group.generation_id == gen
        assert h.coordinator.handle_heartbeat("g", a_id, "a", gen) == errors.NONE  # "a" is not disturbed
        b_id = new_b
    # a static member id used without its instance id is still just a member
    assert h.coordinator.handle_heartbeat("g", b_id, None, gen) == errors.NONE
    assert h.coordinator.handle_heartbeat("g", b_id, "unknown-instance", gen) == errors.UNKNOWN_MEMBER_ID


def test_static_leader_rejoin_keeps_leadership_and_skips_assignment(h):
    a_id = h.join("g", instance_id="a", version=5)[0].member_id
    h.sync("g", 1, a_id, {a_id: b"asg-a"}, instance_id="a")
    group = h.manager.get_group("g")
    # before v9 the old leader id is returned, so the new member does not assign
    r5 = h.join("g", instance_id="a", version=5)[0]
    assert (r5.error_code, r5.generation_id, r5.leader, r5.members) == (errors.NONE, 1, a_id, ())
    assert group.leader_id == r5.member_id != a_id
    # from v9 the leader learns it leads, with the members, and skip_assignment
    r9 = h.join("g", instance_id="a", version=9)[0]
    assert (r9.error_code, r9.generation_id, r9.leader, r9.skip_assignment) == (
        errors.NONE,
        1,
        r9.member_id,
        True,
    )
    assert [m.member_id for m in r9.members] == [r9.member_id]
    assert h.sync("g", 1, r9.member_id, instance_id="a")[0].assignment == b"asg-a"
    assert group.state is GroupState.STABLE and group.generation_id == 1


def test_static_rejoin_during_rebalance_fences_the_old_members_pending_join(h):
    ids, gen, leader = stable_static_group(h, "a")
    b_out = h.join("g", instance_id="b", version=5)
    c_out = h.join("g", instance_id="c", version=5)
    h.join("g", member_id=ids["a"], instance_id="a", version=5)
    assert b_out[0].error_code == c_out[0].error_code == errors.NONE
    gen = b_out[0].generation_id
    a_id, b_id, c_id = ids["a"], b_out[0].member_id, c_out[0].member_id
    for mid, inst in ((a_id, "a"), (b_id, "b"), (c_id, "c")):
        h.sync("g", gen, mid, {a_id: b"1", b_id: b"2", c_id: b"3"} if mid == leader else {}, instance_id=inst)
    group = h.manager.get_group("g")
    assert group.state is GroupState.STABLE
    # "b" changes its subscription: a rebalance; "a" rejoins, "c" has not yet
    b_join = h.join("g", member_id=b_id, instance_id="b", version=5, protocols=[("range", subscription("t", "u"))])
    stale = h.join("g", member_id=a_id, instance_id="a", version=5)
    assert b_join == stale == [] and group.state is GroupState.PREPARING_REBALANCE
    restarted = h.join("g", instance_id="a", version=5)  # a restarted "a" replaces the member
    assert [r.error_code for r in stale] == [errors.FENCED_INSTANCE_ID]
    assert restarted == []  # it takes part in the running rebalance
    h.join("g", member_id=c_id, instance_id="c", version=5)
    assert restarted[0].error_code == errors.NONE and restarted[0].generation_id == gen + 1
    assert set(group.members) == {restarted[0].member_id, b_id, c_id}


def test_leave_group_by_instance_id_and_pending_member(h):
    a_id = h.join("g", instance_id="a", version=5)[0].member_id
    pending = h.join_new("g").member_id
    assert h.coordinator.handle_leave_group("g", [("", "a"), (pending, None), ("", "zz"), ("nobody", None)]) == (
        errors.NONE,
        [errors.NONE, errors.NONE, errors.UNKNOWN_MEMBER_ID, errors.UNKNOWN_MEMBER_ID],
    )
    group = h.manager.get_group("g")
    assert a_id not in group.members and not group.pending_members


def test_initial_rebalance_delay_extends_while_members_keep_joining():
    from tests.helpers.wait import wait_until

    h = Harness(**{"group.initial.rebalance.delay.ms": 200})
    try:
        a = h.join("g", instance_id="a", version=5)
        group = h.manager.get_group("g")
        h.time.sleep(150)
        b = h.join("g", instance_id="b", version=5)
        assert group.new_member_added
        h.time.sleep(60)  # the first delay expires: a member joined meanwhile, so wait again
        wait_until(lambda: not group.new_member_added, timeout=5, message="initial delay extended")
        assert a == b == [] and group.state is GroupState.PREPARING_REBALANCE
        c = h.join("g", instance_id="c", version=5)
        h.time.sleep(210)
        wait_until(lambda: not group.new_member_added, timeout=5, message="initial delay extended again")
        assert c == []
        h.time.sleep(210)  # nobody new: the join completes with all three in the first generation
        wait_until(lambda: a and b and c, timeout=5, message="join completed")
        assert {r[0].generation_id for r in (a, b, c)} == {1} and len(group.members) == 3
    finally:
        h.close()


def test_static_member_that_does_not_rejoin_keeps_its_place(h):
    from tests.helpers.wait import wait_until

    a = h.join("g", instance_id="a", version=5, rebalance_ms=5000)[0]
    b_out = h.join("g", instance_id="b", version=5, rebalance_ms=5000)
    h.join("g", member_id=a.member_id, instance_id="a", version=5, rebalance_ms=5000)
    a_id, b_id, gen = a.member_id, b_out[0].member_id, b_out[0].generation_id
    h.sync("g", gen, a_id, {a_id: b"1", b_id: b"2"}, instance_id="a")
    h.sync("g", gen, b_id, instance_id="b")
    group = h.manager.get_group("g")
    # the leader rejoins with a new subscription; "b" does not rejoin within the rebalance timeout
    again = h.join(
        "g",
        member_id=a_id,
        instance_id="a",
        version=5,
        rebalance_ms=5000,
        protocols=[("range", subscription("t", "u"))],
    )
    h.time.sleep(5001)
    wait_until(lambda: again, timeout=5, message="rebalance completed after its timeout")
    assert again[0].generation_id == gen + 1 and set(group.members) == {a_id, b_id}
    # "b" learns the new generation and rejoins with its member id without another rebalance
    assert h.coordinator.handle_heartbeat("g", b_id, "b", gen) == errors.ILLEGAL_GENERATION
    b_again = h.join("g", member_id=b_id, instance_id="b", version=5, rebalance_ms=5000)
    assert (b_again[0].error_code, b_again[0].generation_id) == (errors.NONE, gen + 1)


def test_member_that_never_sends_sync_group_is_removed_after_the_rebalance_timeout(h):
    """KIP-814's completion (Kafka's DelayedSync): after the join phase, a member that sends no SyncGroup
    within the rebalance timeout is removed and the group rebalances; the others stay."""
    from tests.helpers.wait import wait_until

    a = h.join_new("g", rebalance_ms=5000).member_id
    b = h.join_new("g", rebalance_ms=5000).member_id
    a_out = h.join("g", member_id=a, rebalance_ms=5000)
    b_out = h.join("g", member_id=b, rebalance_ms=5000)
    assert a_out and b_out and a_out[0].leader == a and a_out[0].generation_id == 1
    assert h.sync("g", 1, a, {a: b"1", b: b"2"})[0].error_code == errors.NONE  # b never syncs
    group = h.manager.get_group("g")
    assert group.state is GroupState.STABLE and group.pending_sync_members == {b}
    h.time.sleep(5001)
    wait_until(lambda: b not in group.members, timeout=5, message="the member without SyncGroup removed")
    assert group.state is GroupState.PREPARING_REBALANCE and set(group.members) == {a}
    assert h.coordinator.handle_heartbeat("g", b, None, 1) == errors.UNKNOWN_MEMBER_ID
    assert h.coordinator.handle_heartbeat("g", a, None, 1) == errors.REBALANCE_IN_PROGRESS
    again = h.join("g", member_id=a, rebalance_ms=5000)
    assert (again[0].error_code, again[0].generation_id, again[0].leader) == (errors.NONE, 2, a)
    assert [m.member_id for m in again[0].members] == [a]


def test_membership_results_are_named_types(h):
    """JoinGroup/SyncGroup/LeaveGroup hand the handlers typed results (Kafka's JoinGroupResult /
    SyncGroupResult), errors included, never wire dicts."""
    from pykbroker.coordinator.group.group_results import (
        JoinGroupMember,
        JoinGroupResult,
        LeaveGroupResult,
        SyncGroupResult,
    )

    required = h.join_new("g")
    assert required == JoinGroupResult(errors.MEMBER_ID_REQUIRED, -1, None, None, "", required.member_id, False, ())
    mid = required.member_id
    joined = h.join("g", member_id=mid)[0]
    metadata = subscription("t")
    assert joined == JoinGroupResult(
        errors.NONE, 1, "consumer", "range", mid, mid, False, (JoinGroupMember(mid, None, metadata),)
    )
    assert h.sync("g", 1, mid, {mid: b"asg"}) == [SyncGroupResult(errors.NONE, "consumer", "range", b"asg")]
    assert h.sync("g", 7, mid) == [SyncGroupResult.error(errors.ILLEGAL_GENERATION)]
    assert h.join("g", member_id="unknown") == [JoinGroupResult.error(errors.UNKNOWN_MEMBER_ID, "unknown")]
    left = h.coordinator.handle_leave_group("g", [(mid, None), ("unknown", None)])
    assert isinstance(left, LeaveGroupResult)
    assert (left.error_code, left.member_errors) == (errors.NONE, [errors.NONE, errors.UNKNOWN_MEMBER_ID])
