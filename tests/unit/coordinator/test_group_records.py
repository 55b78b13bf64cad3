"""__consumer_offsets record formats, the group -> partition hash, and the group state machine."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykbroker.coordinator.group import record_codec as codec
from pykbroker.coordinator.group.group_metadata import GroupMetadata, GroupState, IllegalGroupTransition, MemberMetadata


def test_java_string_hash_and_partition():
    assert codec.java_string_hash("") == 0
    assert codec.java_string_hash("hello") == 99162322
    assert codec.java_string_hash("polygenelubricants") == -2147483648  # Integer.MIN_VALUE -> abs() is 0
    assert codec.partition_for("polygenelubricants", 50) == 0
    assert codec.partition_for("my-group", 50) == abs(codec.java_string_hash("my-group")) % 50


@given(
    st.text(max_size=30),
    st.text(min_size=1, max_size=30),
    st.integers(0, 2**31 - 1),
    st.integers(-1, 2**62),
    st.integers(-1, 2**31 - 1),
    st.text(max_size=50),
    st.integers(-1, 2**50),
)
def test_offset_records_round_trip(group, topic, partition, offset, epoch, metadata, ts):
    assert codec.decode_key(codec.offset_key(group, topic, partition)) == ("offset", group, topic, partition)
    assert codec.decode_offset_value(codec.offset_value(offset, epoch, metadata, ts)) == (offset, epoch, metadata, ts)


def test_group_record_round_trip():
    value = codec.group_value(
        "consumer", 7, "range", "m1", 123, [("m1", None, "c1", "/127.0.0.1", 30000, 10000, b"sub", b"asg")]
    )
    assert codec.decode_key(codec.group_key("g")) == ("group", "g")
    decoded = codec.decode_group_value(value)
    assert (decoded["generation"], decoded["protocol"], decoded["leader"]) == (7, "range", "m1")
    assert decoded["members"][0]["assignment"] == b"asg"
    with pytest.raises(ValueError):
        codec.decode_key(b"\x00\x09")


def test_group_state_machine_allows_only_kafka_transitions():
    g = GroupMetadata("g")
    with pytest.raises(IllegalGroupTransition):
        g.transition_to(GroupState.STABLE)
    g.add(MemberMetadata("m1", None, "c", "/h", 1000, 1000, "consumer", [("range", b""), ("roundrobin", b"")]))
    g.add(MemberMetadata("m2", None, "c", "/h", 1000, 1000, "consumer", [("roundrobin", b""), ("range", b"")]))
    g.add(MemberMetadata("m3", None, "c", "/h", 1000, 1000, "consumer", [("roundrobin", b"")]))
    g.transition_to(GroupState.PREPARING_REBALANCE)
    g.init_next_generation(0)
    assert (g.state, g.generation_id, g.protocol_name) == (GroupState.COMPLETING_REBALANCE, 1, "roundrobin")
    g.transition_to(GroupState.STABLE)
    with pytest.raises(IllegalGroupTransition):
        g.transition_to(GroupState.EMPTY)
