"""ConsumerProtocol bytes and the range assignor."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pykbroker.clients.consumer.consumer_coordinator import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    range_assign,
)

topic_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz._-0123456789", min_size=1, max_size=20)


@given(st.lists(topic_names, max_size=10))
def test_subscription_round_trip(topics):
    assert decode_subscription(encode_subscription(topics)) == topics


@given(st.dictionaries(topic_names, st.lists(st.integers(0, 1000), max_size=20), max_size=5))
def test_assignment_round_trip(partitions):
    expected = sorted((t, p) for t, ps in partitions.items() for p in ps)
    assert sorted(decode_assignment(encode_assignment(partitions))) == expected


def test_range_assignor_matches_kafka():
    # Kafka's RangeAssignor: 2 members, 3 partitions -> [0, 1] and [2] per topic, sorted member ids.
    plan = range_assign({"b": ["t1", "t2"], "a": ["t1", "t2"]}, {"t1": 3, "t2": 3})
    assert plan == {"a": {"t1": [0, 1], "t2": [0, 1]}, "b": {"t1": [2], "t2": [2]}}
    plan = range_assign({"a": ["t"], "b": ["t"], "c": ["t"]}, {"t": 6})
    assert plan == {"a": {"t": [0, 1]}, "b": {"t": [2, 3]}, "c": {"t": [4, 5]}}
    assert range_assign({"a": ["t"], "b": ["u"]}, {"t": 1, "u": 2}) == {"a": {"t": [0]}, "b": {"u": [0, 1]}}
