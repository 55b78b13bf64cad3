"""KIP-848 consumer groups: the server-side assignors, reconciliation and ConsumerGroupHeartbeat on a real
GroupCoordinator (harness with a fake metadata image). Examples after KIP-848 and Kafka's assignor tests."""

from __future__ import annotations

import types
import uuid

import pytest

from pykbroker.coordinator.group.consumer.assignors import range_assign, uniform_assign
from pykbroker.coordinator.group.consumer.current_assignment_builder import reconcile
from pykbroker.coordinator.group.consumer.member import ConsumerGroupMember, MemberState
from pykbroker.protocol import errors
from tests.unit.coordinator.harness import Harness

T1, T2, T3 = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)


def _count(a):
    return {m: sum(len(ps) for ps in tps.values()) for m, tps in a.items()}


def _check_exact(a, topics, members):
    """Every partition of each subscribed topic goes to exactly one subscribed member."""
    owners: dict = {}
    for m, tps in a.items():
        for t, ps in tps.items():
            assert t in members[m], (m, t)
            for p in ps:
                assert (t, p) not in owners, f"{t}-{p} owned by {owners[(t, p)]} and {m}"
                owners[(t, p)] = m
    wanted = {(t, p) for t, n in topics.items() if any(t in s for s in members.values()) for p in range(n)}
    assert set(owners) == wanted


# -- range ---------------------------------------------------------------------------------------------------
def test_range_two_members_two_topics_co_partitioned():
    # RangeAssignorTest.testFirstAssignmentTwoMembersTwoTopicsSameSubscriptions: 3 partitions each, 2 members
    members = {"A": frozenset({T1, T3}), "B": frozenset({T1, T3})}
    a = range_assign(members, {T1: 3, T3: 3})
    assert a == {"A": {T1: {0, 1}, T3: {0, 1}}, "B": {T1: {2}, T3: {2}}}


def test_range_more_members_than_partitions_and_mixed_subscriptions():
    members = {"A": frozenset({T1}), "B": frozenset({T1, T2}), "C": frozenset({T2})}
    a = range_assign(members, {T1: 3, T2: 1})
    assert a == {"A": {T1: {0, 1}}, "B": {T1: {2}, T2: {0}}, "C": {}}
    _check_exact(a, {T1: 3, T2: 1}, members)


# -- uniform -------------------------------------------------------------------------------------------------
def test_uniform_balances_homogeneous_first_assignment():
    members = {m: frozenset({T1, T2}) for m in "ABC"}
    a = uniform_assign(members, {T1: 3, T2: 3})
    _check_exact(a, {T1: 3, T2: 3}, members)
    assert sorted(_count(a).values()) == [2, 2, 2]


def test_uniform_is_sticky_when_a_member_joins():
    # KIP-848's example: A and B share 6 partitions, C joins: each keeps what it can, C gets one from each
    members = {m: frozenset({T1}) for m in "AB"}
    first = uniform_assign(members, {T1: 6})
    members["C"] = frozenset({T1})
    second = uniform_assign(members, {T1: 6}, first)
    _check_exact(second, {T1: 6}, members)
    assert _count(second) == {"A": 2, "B": 2, "C": 2}
    for m in "AB":
        assert second[m][T1] <= first[m][T1]  # nothing moved between A and B


def test_uniform_member_leaves_its_partitions_spread_others_keep_theirs():
    members = {m: frozenset({T1}) for m in "ABC"}
    first = uniform_assign(members, {T1: 7})
    del members["B"]
    second = uniform_assign(members, {T1: 7}, first)
    _check_exact(second, {T1: 7}, members)
    assert sorted(_count(second).values()) == [3, 4]
    for m in "AC":
        assert first[m][T1] <= second[m][T1]


def test_uniform_heterogeneous_subscriptions():
    # UniformHeterogeneousAssignmentBuilderTest-like: A subscribes T1, B T1+T2, C T2+T3
    members = {"A": frozenset({T1}), "B": frozenset({T1, T2}), "C": frozenset({T2, T3})}
    topics = {T1: 3, T2: 3, T3: 2}
    a = uniform_assign(members, topics)
    _check_exact(a, topics, members)
    counts = _count(a)
    assert max(counts.values()) - min(counts.values()) <= 1


def test_uniform_partition_count_change_and_topic_deletion():
    members = {m: frozenset({T1, T2}) for m in "AB"}
    first = uniform_assign(members, {T1: 2, T2: 2})
    grown = uniform_assign(members, {T1: 4, T2: 2}, first)  # T1 grew
    _check_exact(grown, {T1: 4, T2: 2}, members)
    assert _count(grown) == {"A": 3, "B": 3}
    gone = uniform_assign(members, {T1: 4}, grown)  # T2 deleted
    _check_exact(gone, {T1: 4}, members)
    assert _count(gone) == {"A": 2, "B": 2}


# -- reconciliation (CurrentAssignmentBuilder) ---------------------------------------------------------------
def test_reconcile_revokes_before_the_epoch_moves():
    m = ConsumerGroupMember("A", member_epoch=10, assigned={T1: {0, 1, 2}})
    nxt = reconcile(m, 11, {T1: {0, 1}}, lambda t, p: -1, {T1: {0, 1, 2}})
    assert (nxt.state, nxt.member_epoch, nxt.assigned, nxt.pending_revocation) == (
        MemberState.UNREVOKED_PARTITIONS,
        10,
        {T1: {0, 1}},
        {T1: {2}},
    )
    assert reconcile(nxt, 11, {T1: {0, 1}}, lambda t, p: -1, None) is nxt  # no owned partitions: no proof
    assert reconcile(nxt, 11, {T1: {0, 1}}, lambda t, p: -1, {T1: {0, 1, 2}}) is nxt  # still owns 2
    done = reconcile(nxt, 11, {T1: {0, 1}}, lambda t, p: -1, {T1: {0, 1}})
    assert (done.state, done.member_epoch, done.previous_member_epoch, done.assigned) == (
        MemberState.STABLE,
        11,
        10,
        {T1: {0, 1}},
    )


def test_reconcile_waits_for_partitions_owned_by_another_member():
    m = ConsumerGroupMember("B", member_epoch=10, assigned={T1: {3}})
    owned_by_a = {(T1, 2): 10}
    nxt = reconcile(m, 11, {T1: {2, 3}}, lambda t, p: owned_by_a.get((t, p), -1), {T1: {3}})
    assert (nxt.state, nxt.member_epoch, nxt.assigned) == (MemberState.UNRELEASED_PARTITIONS, 11, {T1: {3}})
    released = reconcile(nxt, 11, {T1: {2, 3}}, lambda t, p: -1, {T1: {3}})
    assert (released.state, released.assigned) == (MemberState.STABLE, {T1: {2, 3}})


# -- ConsumerGroupHeartbeat on the coordinator -----------------------------------------------------------------
class _Topic(types.SimpleNamespace):
    pass


def _image(topics: dict[str, tuple[uuid.UUID, int]]):
    by_name = {n: _Topic(name=n, id=i, partitions=dict.fromkeys(range(p))) for n, (i, p) in topics.items()}
    return types.SimpleNamespace(
        topics=types.SimpleNamespace(by_name=by_name, by_id={t.id: t for t in by_name.values()}), configs={}
    )


@pytest.fixture
def h():
    harness = Harness()
    harness.topics = {"t": (T1, 6)}
    harness.coordinator.consumer.image = lambda: _image(harness.topics)
    yield harness
    harness.close()


def hb(h, member_id="", epoch=0, owned=None, topics=("t",), assignor=None, group="g", **kw):
    req = {
        "group_id": group,
        "member_id": member_id,
        "member_epoch": epoch,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout_ms": 30000 if epoch == 0 else -1,
        "subscribed_topic_names": list(topics) if topics is not None else None,
        "subscribed_topic_regex": None,
        "server_assignor": assignor,
        "topic_partitions": [] if epoch == 0 else owned,
    }
    req.update(kw)
    out: list[dict] = []
    h.coordinator.consumer.heartbeat(req, "c", "/127.0.0.1", out.append)
    assert len(out) == 1, "a heartbeat is answered once its records are appended (at once in the harness)"
    return out[0]


def _parts(resp):
    return {p for tp in resp["assignment"]["topic_partitions"] for p in tp["partitions"]}


def _owned(parts):
    return [{"topic_id": T1, "partitions": sorted(parts)}]


def test_heartbeat_join_then_second_member_never_owned_twice(h):
    a = hb(h)
    a_id = a["member_id"]
    assert (a["error_code"], a["member_epoch"], _parts(a)) == (0, 1, set(range(6)))
    b = hb(h)
    b_id = b["member_id"]
    assert b["member_epoch"] == 2 and _parts(b) == set()  # all still owned by A
    # A heartbeats with its partitions: it must revoke half, staying at epoch 1
    a2 = hb(h, a_id, 1, _owned(range(6)))
    kept = _parts(a2)
    assert a2["member_epoch"] == 1 and len(kept) == 3
    b2 = hb(h, b_id, 2, _owned(set()))
    assert b2["assignment"] is None or _parts(b2) == set()  # A has not revoked yet
    a3 = hb(h, a_id, 1, _owned(kept))  # revoked
    assert a3["member_epoch"] == 2
    b3 = hb(h, b_id, 2, _owned(set()))
    assert _parts(b3) == set(range(6)) - kept


def test_heartbeat_errors(h):
    with pytest.raises(errors.GroupIdNotFoundError):
        hb(h, "nobody", 3, _owned(set()))  # the group does not exist yet
    a = hb(h)
    with pytest.raises(errors.UnknownMemberIdError):
        hb(h, "nobody", 3, _owned(set()))
    with pytest.raises(errors.FencedMemberEpochError):
        hb(h, a["member_id"], 7, _owned(set()))
    with pytest.raises(errors.UnsupportedAssignorError):
        hb(h, assignor="sticky")
    with pytest.raises(errors.InvalidRequestError):
        hb(h, rebalance_timeout_ms=-1)
    with pytest.raises(errors.InvalidRequestError):
        hb(h, group="")
    # a classic group with members is not a consumer group
    h.join_new("classic")
    h.join("classic", member_id="")
    assert h.manager.get_group("classic").members or h.manager.get_group("classic").pending_members
    with pytest.raises(errors.GroupIdNotFoundError):
        hb(h, group="classic")


def test_heartbeat_group_max_size_and_leave(h):
    h.coordinator.consumer.max_size = 1
    a = hb(h)
    with pytest.raises(errors.GroupMaxSizeReachedError):
        hb(h)
    left = hb(h, a["member_id"], -1, None, topics=None)
    assert left["member_epoch"] == -1
    assert h.coordinator.consumer.describe("g")["group_state"] == "Empty"


def test_partition_count_change_recomputes_target(h):
    a = hb(h)
    assert _parts(a) == set(range(6))
    h.topics["t"] = (T1, 8)
    a2 = hb(h, a["member_id"], a["member_epoch"], _owned(range(6)))
    assert a2["member_epoch"] == 2 and _parts(a2) == set(range(8))


def test_offset_commit_with_stale_epoch_refused(h):
    from pykbroker.coordinator.group.group_metadata import OffsetAndMetadata

    a = hb(h)
    out: list = []
    offsets = {("t", 0): OffsetAndMetadata(5, -1, "", 0)}
    h.coordinator.handle_commit_offsets("g", a["member_id"], None, 0, offsets, out.append, api_version=9)
    assert out[-1] == {("t", 0): errors.STALE_MEMBER_EPOCH}
    h.coordinator.handle_commit_offsets("g", "x", None, 1, offsets, out.append, api_version=9)
    assert out[-1] == {("t", 0): errors.UNKNOWN_MEMBER_ID}
    h.coordinator.handle_commit_offsets("g", a["member_id"], None, 1, offsets, out.append, api_version=9)
    assert out[-1] == {("t", 0): errors.NONE}
    with pytest.raises(errors.StaleMemberEpochError):
        h.coordinator.handle_fetch_offsets("g", [("t", 0)], a["member_id"], 0)
    assert h.coordinator.handle_fetch_offsets("g", [("t", 0)], a["member_id"], 1)[("t", 0)].offset == 5


def test_static_member_leaves_with_epoch_minus_2_and_rejoins_with_its_partitions(h):
    a = hb(h, instance_id="i1")
    b = hb(h)
    a2 = hb(h, a["member_id"], 1, _owned(range(6)))
    kept = _parts(a2)
    a3 = hb(h, a["member_id"], 1, _owned(kept))
    b3 = hb(h, b["member_id"], 2, _owned(set()))
    assert a3["member_epoch"] == 2 and _parts(b3) == set(range(6)) - kept
    # another process with the same instance id cannot join while the member holds it
    with pytest.raises(errors.UnreleasedInstanceIdError):
        hb(h, "other", instance_id="i1")
    left = hb(h, a["member_id"], -2, None, topics=None, instance_id="i1")
    assert left["member_epoch"] == -2
    described = h.coordinator.consumer.describe("g")
    epoch = described["group_epoch"]
    # it comes back under a new member id: same partitions, no new group epoch (no rebalance)
    back = hb(h, "a-restarted", instance_id="i1")
    assert (back["error_code"], back["member_epoch"], _parts(back)) == (0, epoch, kept)
    assert h.coordinator.consumer.describe("g")["group_epoch"] == epoch
    with pytest.raises(errors.FencedInstanceIdError):
        hb(h, a["member_id"], 2, _owned(kept), instance_id="i1")  # the old member id is fenced
    assert {m["member_id"] for m in h.coordinator.consumer.describe("g")["members"]} == {"a-restarted", b["member_id"]}


def test_member_rejoining_with_epoch_0_and_its_member_id_starts_afresh(h):
    # KIP-1082: a fenced client keeps its member id and rejoins with epoch 0 (having dropped its partitions)
    a = hb(h, "m-1")
    assert (a["member_id"], a["member_epoch"], _parts(a)) == ("m-1", 1, set(range(6)))
    retried = hb(h, "m-1")  # the first response was lost: the same answer, no rebalance
    assert (retried["member_epoch"], _parts(retried)) == (1, set(range(6)))
    h.topics["t"] = (T1, 7)
    assert hb(h, "m-1", 1, _owned(range(6)))["member_epoch"] == 2
    again = hb(h, "m-1")  # epoch 0 now is a rejoin: the old incarnation leaves (epoch 3), the member joins (4)
    assert (again["error_code"], again["member_epoch"], _parts(again)) == (0, 4, set(range(7)))
