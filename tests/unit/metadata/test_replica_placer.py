"""StripedReplicaPlacer properties (Kafka's StripedReplicaPlacerTest, as properties)."""

from __future__ import annotations

import collections
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykbroker.metadata.replica_placer import StripedReplicaPlacer, UsableBroker
from pykbroker.protocol.errors import InvalidReplicationFactorError


def brokers(n, racks=None, fenced=()):
    return [UsableBroker(i, racks[i % len(racks)] if racks else None, i in fenced) for i in range(n)]


@settings(max_examples=150, deadline=None)
@given(
    num_brokers=st.integers(1, 12),
    num_racks=st.integers(0, 4),
    partitions=st.integers(1, 40),
    rf_seed=st.integers(0, 10_000),
    seed=st.integers(0, 2**32),
    fenced_count=st.integers(0, 11),
)
def test_no_duplicates_leader_unfenced_and_rf_respected(
    num_brokers, num_racks, partitions, rf_seed, seed, fenced_count
):
    racks = [f"r{i}" for i in range(num_racks)] or None
    fenced = set(range(min(fenced_count, num_brokers - 1)))
    rf = 1 + rf_seed % num_brokers
    placer = StripedReplicaPlacer(random.Random(seed))
    result = placer.place(partitions, rf, brokers(num_brokers, racks, fenced))
    assert len(result) == partitions
    for replicas in result:
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert replicas[0] not in fenced
        assert set(replicas) <= set(range(num_brokers))


def test_leaders_balanced_across_many_partitions():
    placer = StripedReplicaPlacer(random.Random(7))
    result = placer.place(600, 3, brokers(6, ["a", "b", "c"]))
    leaders = collections.Counter(r[0] for r in result)
    replicas = collections.Counter(b for r in result for b in r)
    assert set(leaders) == set(range(6))
    assert max(leaders.values()) - min(leaders.values()) <= 600 * 0.05
    assert max(replicas.values()) - min(replicas.values()) <= 1800 * 0.05


def test_replicas_spread_over_racks_when_possible():
    placer = StripedReplicaPlacer(random.Random(1))
    rack_of = {i: ["a", "b", "c"][i % 3] for i in range(6)}
    for replicas in placer.place(50, 3, brokers(6, ["a", "b", "c"])):
        assert len({rack_of[b] for b in replicas}) == 3


def test_fenced_brokers_used_only_when_needed():
    placer = StripedReplicaPlacer(random.Random(3))
    result = placer.place(20, 2, brokers(3, fenced={2}))
    for replicas in result:
        assert 2 not in replicas
    result = placer.place(20, 3, brokers(3, fenced={2}))
    for replicas in result:
        assert replicas[-1] == 2 and replicas[0] != 2


def test_deterministic_with_seeded_random():
    a = StripedReplicaPlacer(random.Random(99)).place(30, 2, brokers(5, ["x", "y"]))
    b = StripedReplicaPlacer(random.Random(99)).place(30, 2, brokers(5, ["x", "y"]))
    assert a == b


@pytest.mark.parametrize(
    "rf,bs,msg",
    [
        (0, brokers(3), "must be positive"),
        (-1, brokers(3), "must be positive"),
        (4, brokers(3), "only 3 broker(s) are registered"),
        (1, brokers(2, fenced={0, 1}), "All brokers are currently fenced"),
        (1, [], "All brokers are currently fenced"),
    ],
)
def test_invalid_replication_factor(rf, bs, msg):
    with pytest.raises(InvalidReplicationFactorError) as e:
        StripedReplicaPlacer(random.Random(0)).place(1, rf, bs)
    assert msg in str(e.value)


def test_single_broker_many_partitions():
    result = StripedReplicaPlacer(random.Random(0)).place(100, 1, brokers(1))
    assert result == [[0]] * 100
