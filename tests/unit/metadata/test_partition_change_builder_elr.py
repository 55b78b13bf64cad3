"""PartitionChangeBuilder's eligible leader replicas (KIP-966), the cases of Kafka's PartitionChangeBuilderTest
(testEligibleLeaderReplicas_*) with the last known leader kept in the last known ELR (Kafka's default), plus the
records' round trip through the metadata record codec."""

from __future__ import annotations

import uuid

from pykbroker.metadata import partition_change_builder as pcb
from pykbroker.metadata.partition_registration import PartitionRegistration
from pykbroker.metadata.records import NO_LEADER, PARTITION_CHANGE_RECORD, PARTITION_RECORD, ApiMessageAndVersion
from pykbroker.protocol.metadata_records import decode_metadata_record, encode_metadata_record

TOPIC = uuid.UUID("15bae675-c7e2-4a42-82b6-0d89f6d32b0e")


def reg(isr, elr=(), lke=(), leader=1, replicas=(1, 2, 3, 4)) -> PartitionRegistration:
    return PartitionRegistration(
        tuple(replicas), tuple(isr), leader, leader_epoch=100, partition_epoch=200, elr=tuple(elr), last_known_elr=lke
    )


def build(part, target_isr, acceptable, min_isr=3, **kw):
    return pcb.build(TOPIC, 0, part, target_isr, acceptable, elr_enabled=True, min_isr=min_isr, **kw)


def fields(record: ApiMessageAndVersion | None) -> dict | None:
    if record is None:
        return None
    assert (record.name, record.version) == (PARTITION_CHANGE_RECORD, 2)
    return {k: v for k, v in record.data.items() if k not in ("topic_id", "partition_id")}


def test_isr_shrink_below_min_isr_puts_the_removed_members_in_the_elr():
    part = reg([1, 2, 3, 4])
    record = build(part, [1, 2], lambda r: r != 3)
    assert fields(record) == {"isr": [1, 2], "eligible_leader_replicas": [3, 4]}
    merged = part.merge(record.data)
    assert (merged.elr, merged.last_known_elr, merged.leader_epoch) == ((3, 4), (), 100)


def test_isr_expand_to_min_isr_clears_elr_and_last_known_elr():
    part = reg([1, 2], elr=[3], lke=[4])
    record = build(part, [1, 2, 3], lambda r: r != 3)
    assert fields(record) == {"isr": [1, 2, 3], "eligible_leader_replicas": [], "last_known_elr": []}
    merged = part.merge(record.data)
    assert (merged.elr, merged.last_known_elr) == ((), ())


def test_isr_add_member_not_in_elr_keeps_the_elr():
    part = reg([1], elr=[3])
    assert fields(build(part, [1, 4], lambda r: r != 3)) == {"isr": [1, 4]}


def test_unclean_shutdown_replicas_leave_the_elr():
    part = reg([1], elr=[2, 3])
    record = build(part, [1], lambda r: r != 3, unclean_shutdown_replicas=[3])
    assert fields(record) == {"eligible_leader_replicas": [2]}


def test_elr_member_is_elected_when_the_isr_is_empty():
    part = reg([1], elr=[3])
    record = build(part, [], lambda r: r != 1)
    assert fields(record) == {"leader": 3, "isr": [3], "eligible_leader_replicas": [1]}
    merged = part.merge(record.data)
    assert (merged.leader, merged.isr, merged.elr, merged.leader_epoch) == (3, (3,), (1,), 101)


def test_isr_can_shrink_to_empty_and_the_last_leader_is_kept():
    part = reg([1, 2, 3, 4])
    record = build(part, [], lambda r: False)
    assert fields(record) == {
        "leader": NO_LEADER,
        "isr": [],
        "eligible_leader_replicas": [1, 2, 3, 4],
        "last_known_elr": [1],
    }
    part = part.merge(record.data)
    assert (part.isr, part.elr, part.last_known_elr) == ((), (1, 2, 3, 4), (1,))
    # a later change while leaderless keeps the last known leader
    record = build(part, [], lambda r: False, unclean_shutdown_replicas=[2])
    assert fields(record) == {"eligible_leader_replicas": [1, 3, 4]}


def test_last_known_leader_is_elected_when_isr_and_elr_are_empty():
    part = reg([], lke=[1], leader=NO_LEADER)
    record = build(part, [], lambda r: True)
    assert fields(record) == {"leader": 1, "isr": [1], "last_known_elr": []}


def test_no_last_known_leader_election_while_the_elr_has_members():
    part = reg([], elr=[3], lke=[1], leader=NO_LEADER)
    assert build(part, [], lambda r: r != 3) is None


def test_fenced_last_isr_member_comes_back_from_the_elr():
    """The last ISR member is fenced: ISR empty, it is in the ELR; unfenced, it leads again cleanly."""
    part = reg([1], elr=[2, 3], replicas=(1, 2, 3))
    fenced = part.merge(build(part, [], lambda r: r not in (1, 2, 3), min_isr=2).data)
    assert (fenced.leader, fenced.isr, fenced.elr, fenced.last_known_elr) == (NO_LEADER, (), (1, 2, 3), (1,))
    back = fenced.merge(build(fenced, [], lambda r: r == 2, min_isr=2).data)
    assert (back.leader, back.isr, back.elr, back.last_known_elr) == (2, (2,), (1, 3), ())


def test_without_elr_an_empty_target_keeps_the_isr_and_writes_version_0():
    part = reg([1])
    record = pcb.build(TOPIC, 0, part, [], lambda r: False)
    assert record is not None and record.version == 0
    assert {k: v for k, v in record.data.items() if k not in ("topic_id", "partition_id")} == {"leader": NO_LEADER}


def test_elr_disabled_clears_a_leftover_elr():
    part = reg([1, 2], elr=[3])
    record = pcb.build(TOPIC, 0, part, [1, 2, 3], lambda r: True)
    assert record is not None and record.version == 2
    assert record.data["eligible_leader_replicas"] == []


def test_records_round_trip_through_the_codec():
    part = reg([1], elr=[2, 3], lke=[4])
    snapshot = part.to_record(TOPIC, 0)
    assert (snapshot.name, snapshot.version) == (PARTITION_RECORD, 2)
    _, _, data = decode_metadata_record(encode_metadata_record(snapshot.name, snapshot.version, snapshot.data))
    back = PartitionRegistration.from_record(data)
    assert (back.elr, back.last_known_elr, back.isr) == ((2, 3), (4,), (1,))
    change = build(part, [], lambda r: r == 2)
    assert change is not None
    _, _, data = decode_metadata_record(encode_metadata_record(change.name, change.version, change.data))
    assert part.merge(data) == part.merge(change.data)
