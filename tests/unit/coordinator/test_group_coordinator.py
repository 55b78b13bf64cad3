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
    mid = h.join_new("g", protocols=[("range", subscription("t"))])["member_id"]
    resp = h.join("g", member_id=mid, protocols=[("range", subscription("t"))])[0]
    assert h.sync("g", resp["generation_id"], mid, {mid: b"a"})[0]["error_code"] == errors.NONE
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
        assert [r["error_code"] for r in out] == [errors.INVALID_SESSION_TIMEOUT]
    assert h.manager.get_group("g") is None


def test_join_with_negative_rebalance_timeout_completes_without_waiting(h):
    from tests.helpers.wait import wait_until
    mid = h.join_new("g", rebalance_ms=-1)["member_id"]
    out = h.join("g", member_id=mid, rebalance_ms=-1)
    wait_until(lambda: out, timeout=5, message="JoinGroup with a negative rebalance timeout got no answer")
    assert (out[0]["error_code"], out[0]["generation_id"], out[0]["leader"]) == (errors.NONE, 1, mid)
    # A second member with a negative rebalance timeout: the group's timeout is the members' maximum
    # (here negative), so the rebalance completes at once and drops the member that did not rejoin (Kafka).
    mid2 = h.join_new("g", rebalance_ms=-1)["member_id"]
    out2 = h.join("g", member_id=mid2, rebalance_ms=-1)
    wait_until(lambda: out2, timeout=5, message="second JoinGroup got no answer")
    assert (out2[0]["error_code"], out2[0]["generation_id"], out2[0]["leader"]) == (errors.NONE, 2, mid2)
    assert list(h.manager.get_group("g").members) == [mid2]
