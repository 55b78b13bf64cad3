"""KIP-932 share group membership in the group coordinator: the ``simple`` assignor, ShareGroupHeartbeat (join,
epochs, leave, session expiry, errors), ShareGroupDescribe, a group id of one type only, ListGroups/DeleteGroups of
share groups, and the share group records in ``__consumer_offsets`` replayed by a new coordinator."""

from __future__ import annotations

import struct
import uuid

import pytest

from pykbroker.coordinator.group.share import assignor
from pykbroker.coordinator.group.share import record_codec as rc
from pykbroker.protocol import errors
from tests.helpers.wait import wait_until
from tests.unit.coordinator.share.share_harness import T1, T2, hb, share_harness
from tests.unit.coordinator.test_consumer_group_records import failover, written


# -- the simple assignor ---------------------------------------------------------------------------------------
def _flat(a: dict) -> dict[str, list[tuple[uuid.UUID, int]]]:
    return {m: sorted((t, p) for t, ps in tps.items() for p in ps) for m, tps in a.items()}


def test_simple_assignor_spreads_partitions_when_members_are_fewer():
    a = assignor.assign({"a": ("t",), "b": ("t",), "c": ("t",)}, {"t": (T1, 7)})
    sizes = sorted(len(v) for v in _flat(a).values())
    assert sizes == [2, 2, 3]
    assert sorted(p for v in _flat(a).values() for _, p in v) == list(range(7))  # each partition exactly once


def test_simple_assignor_shares_partitions_when_members_are_more():
    members = {m: ("t",) for m in "abcde"}
    a = _flat(assignor.assign(members, {"t": (T1, 2)}))
    assert all(len(v) == 1 for v in a.values())
    per_partition = sorted(sum(1 for v in a.values() if v == [(T1, p)]) for p in range(2))
    assert per_partition == [2, 3]


def test_simple_assignor_is_sticky_and_skips_missing_topics():
    first = assignor.assign({"a": ("t", "gone"), "b": ("t",)}, {"t": (T1, 4)})
    assert set(_flat(first)) == {"a", "b"} and all(len(v) == 2 for v in _flat(first).values())
    # a third member joins: a and b keep what they can
    second = assignor.assign({"a": ("t",), "b": ("t",), "c": ("t",)}, {"t": (T1, 4)}, first)
    for m in ("a", "b"):
        assert second[m][T1] <= first[m][T1]
    assert sorted(p for v in _flat(second).values() for _, p in v) == [0, 1, 2, 3]
    # heterogeneous: each topic balanced among its own subscribers
    mixed = _flat(assignor.assign({"a": ("t",), "b": ("t", "u")}, {"t": (T1, 2), "u": (T2, 2)}))
    assert mixed["b"] == [(T1, 1), (T2, 0), (T2, 1)] or mixed["b"] == [(T1, 0), (T2, 0), (T2, 1)]
    assert assignor.assign({}, {"t": (T1, 4)}) == {}


# -- the coordinator ----------------------------------------------------------------------------------------------
@pytest.fixture
def h():
    harness = share_harness()
    yield harness
    harness.close()


def _parts(resp) -> set[tuple[uuid.UUID, int]]:
    return {(tp["topic_id"], p) for tp in resp["assignment"]["topic_partitions"] for p in tp["partitions"]}


def test_join_assigns_everything_then_a_second_member_takes_half(h):
    a = hb(h, "A")
    assert (a["error_code"], a["member_id"], a["member_epoch"]) == (0, "A", 1)
    assert _parts(a) == set() and a["heartbeat_interval_ms"] == 5000  # the state is being initialized first
    a = hb(h, "A", 1, topics=None)
    assert a["member_epoch"] == 2 and _parts(a) == {(T1, p) for p in range(4)}
    b = hb(h, "B")
    assert b["member_epoch"] == 3 and len(_parts(b)) == 2  # nothing to revoke first: shared partitions
    a2 = hb(h, "A", 2, topics=None)
    assert a2["member_epoch"] == 3 and len(_parts(a2)) == 2 and not _parts(a2) & _parts(b)
    assert hb(h, "A", 3, topics=None)["assignment"] is None  # nothing changed: no assignment sent
    described = h.coordinator.share.describe("sg")
    assert (described["group_state"], described["group_epoch"], described["assignor_name"]) == ("Stable", 3, "simple")
    assert {m["member_id"] for m in described["members"]} == {"A", "B"}
    # the data path's query
    member = h.coordinator.share_group_member("sg", "B")
    assert member is not None and member.member_epoch == 3 and sum(len(ps) for ps in member.assigned.values()) == 2
    assert h.coordinator.share_group_member("sg", "nobody") is None
    assert h.coordinator.share_group_member("other", "B") is None


def test_partitions_are_assigned_once_their_state_is_initialized(h):
    """Kafka 4.1+: the coordinator initializes the share-partition state of subscribed partitions (start offset -1:
    share.auto.offset.reset decides) before assigning them, so that the first member of a new group does not take
    every partition before a second member that joins at the same time (librdkafka 0172 mixed-ack-mode)."""
    a = hb(h, "A")
    assert a["member_epoch"] == 1 and _parts(a) == set()
    for p in range(4):
        summary = h.coordinator.persister.read_summary("sg", T1, p, -1).result()
        assert (summary.error_code, summary.state_epoch, summary.start_offset) == (0, 0, -1)
    missing = h.coordinator.persister.read_summary("sg", T2, 0, -1).result()
    assert missing.error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
    b = hb(h, "B")
    a = hb(h, "A", 1, topics=None)
    assert a["member_epoch"] == b["member_epoch"] == 3
    assert len(_parts(a)) == len(_parts(b)) == 2 and not _parts(a) & _parts(b)
    # a topic subscribed later: assigned after its own initialization; state set meanwhile is kept
    h.coordinator.persister.initialize_state("sg", T2, 1, 5, 42).result()
    b = hb(h, "B", 3, topics=("t", "u"))
    assert not {t for t, _ in _parts(b)} & {T2}
    b = hb(h, "B", b["member_epoch"], topics=None)
    assert {(t, p) for t, p in _parts(b) if t == T2} == {(T2, 0), (T2, 1)}
    summary = h.coordinator.persister.read_summary("sg", T2, 1, -1).result()
    assert (summary.state_epoch, summary.start_offset) == (5, 42)


def test_heartbeat_errors(h):
    with pytest.raises(errors.InvalidRequestError, match="SubscribedTopicNames must be set"):
        hb(h, "A", topics=None)
    with pytest.raises(errors.InvalidRequestError, match="MemberId can't be empty"):
        hb(h, "")
    with pytest.raises(errors.InvalidRequestError, match="GroupId can't be empty"):
        hb(h, "A", group="")
    with pytest.raises(errors.InvalidRequestError, match="MemberEpoch is -2"):
        hb(h, "A", -2)
    with pytest.raises(errors.GroupIdNotFoundError):
        hb(h, "A", 1)  # no such group yet
    hb(h, "A")
    with pytest.raises(errors.UnknownMemberIdError):
        hb(h, "B", 1)
    with pytest.raises(errors.FencedMemberEpochError):
        hb(h, "A", 7)
    hb(h, "B")
    hb(h, "C")
    with pytest.raises(errors.GroupMaxSizeReachedError):
        hb(h, "D")  # group.share.max.size = 3
    # a retried join (its response lost) is answered with the member's assignment
    again = hb(h, "A")
    assert again["error_code"] == 0 and again["assignment"] is not None


def test_leave_and_session_expiry_free_the_partitions(h):
    hb(h, "A")
    hb(h, "B")
    assert len(_parts(hb(h, "A", 1, topics=None))) == 2
    left = hb(h, "B", -1, topics=None)
    assert (left["member_id"], left["member_epoch"]) == ("B", -1)
    back = hb(h, "A", 3, topics=None)
    assert back["member_epoch"] == 4 and _parts(back) == {(T1, p) for p in range(4)}
    with pytest.raises(errors.UnknownMemberIdError):
        hb(h, "B", -1, topics=None)
    h.time.sleep(45001)  # A's session expires
    wait_until(lambda: h.coordinator.share.describe("sg")["group_state"] == "Empty", 5, message="A fenced")


def test_a_group_id_is_of_one_type_only(h):
    hb(h, "A")
    joined = h.join("sg")
    assert joined[0].error_code == errors.INCONSISTENT_GROUP_PROTOCOL
    from tests.unit.coordinator.test_consumer_group import hb as consumer_hb

    h.coordinator.consumer.image = h.coordinator.share.image
    with pytest.raises(errors.GroupIdNotFoundError, match="not a consumer group"):
        consumer_hb(h, group="sg")
    assert h.coordinator.consumer.describe("sg")["error_code"] == errors.GROUP_ID_NOT_FOUND
    assert h.coordinator.describe_group("sg")["group_state"] == "Dead"  # DescribeGroups: classic groups only
    consumer_hb(h, group="cg")
    with pytest.raises(errors.GroupIdNotFoundError, match="not a share group"):
        hb(h, "A", group="cg")
    assert h.coordinator.share.describe("cg")["error_code"] == errors.GROUP_ID_NOT_FOUND
    assert h.coordinator.share.describe("missing")["error_code"] == errors.GROUP_ID_NOT_FOUND


def test_list_and_delete_share_groups(h):
    hb(h, "A")
    code, groups = h.coordinator.list_groups([])
    assert code == 0
    assert [(g["group_id"], g["protocol_type"], g["group_state"], g["group_type"]) for g in groups] == [
        ("sg", "share", "Stable", "share")
    ]
    deleted: list[int] = []
    h.coordinator.delete_group("sg", deleted.append)
    assert deleted == [errors.NON_EMPTY_GROUP]
    hb(h, "A", -1, topics=None)
    h.coordinator.delete_group("sg", deleted.append)
    assert deleted[-1] == errors.NONE
    assert h.coordinator.share.describe("sg")["error_code"] == errors.GROUP_ID_NOT_FOUND
    assert h.coordinator.list_groups([])[1] == []


def _share_types(records) -> list[tuple[int, bool]]:
    return [
        (struct.unpack_from(">h", k)[0], v is None)
        for k, v in records
        if struct.unpack_from(">h", k)[0] in rc.KEY_VERSIONS
    ]


def test_records_are_written_and_a_new_coordinator_keeps_the_group(h):
    hb(h, "A")
    first = _share_types(written(h))
    assert first == [(10, False), (11, False), (13, False), (12, False), (14, False), (15, False)]
    hb(h, "A", 1, topics=None)  # its partitions, now initialized
    n = len(written(h))
    hb(h, "A", 2, topics=None)
    assert len(written(h)) == n  # a plain heartbeat writes nothing
    hb(h, "B", topics=("t", "u"))  # epoch 3, then 4 once u's partitions are initialized
    failover(h, "sg")
    described = h.coordinator.share.describe("sg")
    assert (described["group_epoch"], described["assignment_epoch"]) == (4, 3)
    members = {m["member_id"]: m for m in described["members"]}
    assert members["B"]["subscribed_topic_names"] == ["t", "u"]
    # the members carry on with their epochs (A has not heartbeated since epoch 2: it may still use it)
    a = hb(h, "A", 2, topics=None)
    assert a["error_code"] == 0 and a["member_epoch"] == 4
    # the initialized partitions were written (ShareGroupStatePartitionMetadata) and replayed: none started again
    assert not h.coordinator.share.initializer.pending(h.manager.get_group("sg").share_group)
    # a deleted group's tombstones are replayed too
    hb(h, "A", -1, topics=None)
    hb(h, "B", -1, topics=None)
    h.coordinator.delete_group("sg", lambda code: None)
    assert _share_types(written(h))[-1] == (11, True)
    failover(h, "sg")
    assert h.coordinator.share.describe("sg")["error_code"] == errors.GROUP_ID_NOT_FOUND


def test_codec_round_trip():
    assert rc.decode_key(rc.key(rc.CURRENT_MEMBER_ASSIGNMENT, "g", "m")) == (14, "g", "m")
    assert rc.decode_key(rc.key(rc.GROUP_METADATA, "g")) == (11, "g", None)
    with pytest.raises(ValueError):
        rc.decode_key(struct.pack(">h", 3) + b"\x00\x01g")


def test_share_group_metrics(h):
    from pykbroker.coordinator.group import coordinator_metrics as cm
    from pykbroker.utils.metrics import MetricsRegistry

    registry = MetricsRegistry()
    h.manager.register_metrics(registry)

    def gauge(name: str) -> float:
        metric = registry.get(f"{cm.GROUP},name={name}")
        assert metric is not None, name
        return metric.value

    hb(h, "A")
    hb(h, "B")
    assert gauge("group-count,protocol=share") == 1 and gauge("share-group-count,state=Stable") == 1
    assert gauge("share-group-rebalance-count") == 2 and gauge("share-group-rebalance-rate") > 0
    hb(h, "A", -1, topics=None)
    hb(h, "B", -1, topics=None)
    assert gauge("share-group-count,state=Empty") == 1 and gauge("share-group-count,state=Stable") == 0
