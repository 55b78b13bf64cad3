"""murmur2 and the built-in sticky partitioner."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from pykbroker.clients.producer.partitioner import BuiltInPartitioner, murmur2, partition_for_key, to_positive


def test_murmur2_known_values():
    # Values from Kafka's UtilsTest.testMurmur2 (the Java implementation's outputs).
    cases = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        bytes([ord("a"), ord("b"), ord("c")]): 479470107,
    }
    for data, expected in cases.items():
        assert murmur2(data) == expected, data


@given(st.binary(max_size=64), st.integers(1, 1000))
def test_partition_is_in_range_and_stable(key, n):
    p = partition_for_key(key, n)
    assert 0 <= p < n
    assert p == to_positive(murmur2(key)) % n


def test_sticky_partition_switches_after_batch_size_bytes():
    part = BuiltInPartitioner(batch_size=1000, rng=random.Random(7))
    first = part.partition("t", [0, 1, 2, 3], 4)
    for _ in range(9):
        part.update_partition_info("t", 100, [0, 1, 2, 3], 4)
        assert part.partition("t", [0, 1, 2, 3], 4) == first
    part.update_partition_info("t", 100, [0, 1, 2, 3], 4)
    assert part.partition("t", [0, 1, 2, 3], 4) != first


def test_sticky_partition_prefers_partitions_with_a_leader():
    part = BuiltInPartitioner(batch_size=10, rng=random.Random(1))
    seen = set()
    for _ in range(50):
        seen.add(part.partition("t", [2, 5], 6))
        part.update_partition_info("t", 10, [2, 5], 6)
    assert seen == {2, 5}
