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
