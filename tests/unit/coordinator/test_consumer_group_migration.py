"""KIP-848 online migration on a real GroupCoordinator (harness, fake metadata image): a consumer-protocol member
upgrades a classic group, the classic members are served through JoinGroup/SyncGroup/Heartbeat/LeaveGroup inside the
consumer group and revoke before the new member gets their partitions; the last consumer-protocol member leaving
downgrades the group back to classic (Kafka's GroupMetadataManagerTest ...Upgrade / ...Downgrade cases)."""

from __future__ import annotations

import pytest

from pykbroker.coordinator.group.consumer import consumer_protocol as cp
from pykbroker.coordinator.group.consumer import record_codec as rc
from pykbroker.coordinator.group.group_metadata import GroupState
from pykbroker.coordinator.group.group_results import JoinGroupResult
from pykbroker.protocol import errors
from tests.helpers.wait import wait_until
from tests.unit.coordinator.harness import Harness
from tests.unit.coordinator.test_consumer_group import T1, _image, _owned, _parts, hb


def _harness(**config) -> Harness:
    h = Harness(**config)
    h.topics = {"t": (T1, 6)}
    h.coordinator.consumer.image = lambda: _image(h.topics)
    return h


@pytest.fixture
def h():
    harness = _harness()
    yield harness
    harness.close()


def _protocols(owned=None):
    return [("range", cp.encode_subscription(["t"], {"t": set(owned)} if owned is not None else None, version=1))]


def _classic_group(h, n=2, rebalance_ms=30000) -> tuple[list[str], int]:
    """A Stable classic group ``g`` of ``n`` members sharing topic t's 6 partitions (range); returns (ids, gen)."""
    ids = [h.join_new("g").member_id for _ in range(n)]
    waiting = [h.join("g", member_id=m, protocols=_protocols(), rebalance_ms=rebalance_ms) for m in ids]
    responses = [w[0] for w in waiting]
    gen = responses[0].generation_id
    leader = responses[0].leader
    per = 6 // n
    assignments = {m: cp.encode_assignment({"t": set(range(i * per, (i + 1) * per))}) for i, m in enumerate(ids)}
    for m in ids:
        out = h.sync("g", gen, m, assignments if m == leader else None)
        if m == leader:
            assert out and out[0].error_code == 0
    assert h.manager.get_group("g").state is GroupState.STABLE
    return ids, gen


def _classic_assignment(h, member_id, gen) -> set[int]:
    out = h.sync("g", gen, member_id)
    assert out and out[0].error_code == 0, out
    return cp.decode_assignment(out[0].assignment).get("t", set())


def _owners(h) -> dict:
    return dict(h.manager.get_group("g").consumer_group.partition_epochs)


def _rejoin(h, member_id, owned, rebalance_ms=30000) -> JoinGroupResult:
    out = h.join("g", member_id=member_id, protocols=_protocols(owned), rebalance_ms=rebalance_ms)
    assert out, "a classic JoinGroup to a consumer group answers at once"
    return out[0]


def test_consumer_member_upgrades_classic_group_and_classic_members_revoke_first(h):
    (a, b), gen = _classic_group(h)
    c = hb(h)  # a consumer-protocol member joins: the group is converted
    holder = h.manager.get_group("g")
    group = holder.consumer_group
    assert group is not None and holder.group_type == "consumer"
    assert holder.members == {} and holder.state is GroupState.EMPTY
    assert {m: group.members[m].member_epoch for m in (a, b)} == {a: gen, b: gen}
    assert group.members[a].classic is not None and group.members[a].classic.session_timeout_ms == 10000
    assert group.members[a].assigned == {T1: {0, 1, 2}} and group.members[b].assigned == {T1: {3, 4, 5}}
    assert c["member_epoch"] == gen + 1 and _parts(c) == set()  # everything still owned by the classic members
    # the classic members are told to rejoin; their rejoin revokes first (owned partitions from their subscription)
    assert h.coordinator.handle_heartbeat("g", a, None, gen) == errors.REBALANCE_IN_PROGRESS
    ja = _rejoin(h, a, {0, 1, 2})
    assert (ja.error_code, ja.generation_id, ja.protocol_type, ja.leader) == (0, gen, "consumer", "")
    kept_a = _classic_assignment(h, a, gen)
    assert len(kept_a) == 2 and kept_a < {0, 1, 2}
    assert h.coordinator.handle_heartbeat("g", a, None, gen) == errors.REBALANCE_IN_PROGRESS  # still revoking
    ja2 = _rejoin(h, a, kept_a)  # revoked: on to the new epoch
    assert ja2.generation_id == gen + 1 and _classic_assignment(h, a, gen + 1) == kept_a
    assert h.coordinator.handle_heartbeat("g", a, None, gen + 1) == errors.NONE
    jb = _rejoin(h, b, {3, 4, 5})
    kept_b = _classic_assignment(h, b, jb.generation_id)
    jb2 = _rejoin(h, b, kept_b)
    assert jb2.generation_id == gen + 1
    # no partition was ever given twice; the consumer member now gets the two released ones
    c2 = hb(h, c["member_id"], c["member_epoch"], _owned(set()))
    assert _parts(c2) == set(range(6)) - kept_a - kept_b and len(_parts(c2)) == 2
    owners = _owners(h)
    assert len(owners) == 6
    assert group.state == "Stable"
    # the records carry the classic members' metadata (failover keeps them classic)
    value = rc.records_of(group)[rc.key(rc.MEMBER_METADATA, "g", a)]
    assert rc.decode_member_metadata_value(value)["classic"].protocols[0][0] == "range"


def test_classic_members_of_a_consumer_group_errors_and_leave(h):
    (a, _b), gen = _classic_group(h)
    c = hb(h)
    c_id = c["member_id"]
    assert h.coordinator.handle_heartbeat("g", a, None, gen + 5) == errors.ILLEGAL_GENERATION
    assert h.coordinator.handle_heartbeat("g", c_id, None, c["member_epoch"]) == errors.UNKNOWN_MEMBER_ID
    assert h.coordinator.handle_heartbeat("g", "nobody", None, gen) == errors.UNKNOWN_MEMBER_ID
    bad = h.join("g", member_id=a, protocols=[("roundrobin", cp.encode_subscription(["t"]))])
    assert bad[0].error_code == errors.INCONSISTENT_GROUP_PROTOCOL
    fresh = h.join("g", protocols=_protocols())  # JoinGroup v9 without member id: KIP-394 first
    assert fresh[0].error_code == errors.MEMBER_ID_REQUIRED
    sync = h.sync("g", gen, c_id)
    assert sync[0].error_code == errors.UNKNOWN_MEMBER_ID
    # OffsetCommit from a classic member: its generation is the member epoch (ILLEGAL_GENERATION otherwise)
    assert set(h.commit("g", {("t", 0): _offset()}, a, gen + 3).values()) == {errors.ILLEGAL_GENERATION}
    assert set(h.commit("g", {("t", 0): _offset()}, a, gen).values()) == {errors.NONE}
    epoch = h.manager.get_group("g").consumer_group.group_epoch
    code, codes = h.coordinator.handle_leave_group("g", [(a, None), (c_id, None)])
    assert (code, codes) == (errors.NONE, [errors.NONE, errors.UNKNOWN_MEMBER_ID])
    group = h.manager.get_group("g").consumer_group
    assert a not in group.members and group.group_epoch == epoch + 1


def test_classic_member_that_does_not_rejoin_or_sync_within_its_rebalance_timeout_is_fenced(h):
    (a, b), gen = _classic_group(h, rebalance_ms=5000)  # session timeouts 10 s
    hb(h)
    group = h.manager.get_group("g").consumer_group
    assert h.coordinator.handle_heartbeat("g", a, None, gen) == errors.REBALANCE_IN_PROGRESS  # join deadline: 5 s
    assert h.coordinator.handle_heartbeat("g", b, None, gen) == errors.REBALANCE_IN_PROGRESS
    h.time.sleep(2000)
    _rejoin(h, b, {3, 4, 5}, rebalance_ms=5000)  # b rejoins (its join deadline goes), then owes a SyncGroup
    h.time.sleep(3001)
    wait_until(lambda: a not in group.members, 10, message="a fenced: no JoinGroup within its rebalance timeout")
    assert b in group.members
    h.time.sleep(2000)
    wait_until(lambda: b not in group.members, 10, message="b fenced: no SyncGroup within its rebalance timeout")


def _offset():
    from pykbroker.coordinator.group.group_metadata import OffsetAndMetadata

    return OffsetAndMetadata(5, -1, "", 0)


def test_last_consumer_member_leaving_downgrades_to_classic(h):
    (a, b), _gen = _classic_group(h)
    c = hb(h)
    epoch = h.manager.get_group("g").consumer_group.group_epoch
    before = len(h.replica_manager.appended)
    left = hb(h, c["member_id"], -1)
    assert left["member_epoch"] == -1
    holder = h.manager.get_group("g")
    assert holder.consumer_group is None and holder.group_type == "classic"
    assert holder.state is GroupState.PREPARING_REBALANCE and holder.generation_id == epoch
    assert set(holder.members) == {a, b} and holder.protocol_type == "consumer" and holder.protocol_name == "range"
    # their assignments are their target assignments (the classic rebalance that follows redistributes)
    assert 0 < len(cp.decode_assignment(holder.members[a].assignment)["t"]) <= 3
    assert len(h.replica_manager.appended) > before  # tombstones + the classic record
    # the classic members rejoin the classic rebalance and get a new generation
    ra = h.join("g", member_id=a, protocols=_protocols())
    rb = h.join("g", member_id=b, protocols=_protocols())
    assert ra and rb and ra[0].error_code == 0 and ra[0].generation_id == epoch + 1


@pytest.mark.parametrize(
    ("policy", "upgrade", "downgrade"),
    [("disabled", False, False), ("downgrade", False, True), ("upgrade", True, False)],
)
def test_migration_policy(policy, upgrade, downgrade):
    h = _harness(**{"group.consumer.migration.policy": policy})
    try:
        _classic_group(h)
        if not upgrade:
            with pytest.raises(errors.GroupIdNotFoundError):
                hb(h)
            assert h.manager.get_group("g").group_type == "classic"
            return
        c = hb(h)
        hb(h, c["member_id"], -1)
        assert h.manager.get_group("g").group_type == ("classic" if downgrade else "consumer")
    finally:
        h.close()


def test_upgrade_refused_for_a_group_not_using_the_consumer_protocol(h):
    out = h.join("g", version=3, protocols=[("p", b"x")])  # version 3: no member id round trip
    h.manager.get_group("g").protocol_type = "connect"
    assert out is not None
    with pytest.raises(errors.GroupIdNotFoundError):
        hb(h)
