"""Offset JSON, rate limiting and range planning (pure functions, no JVM)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")
from pyspark_pykbroker import offsets as off
from pyspark_pykbroker.options import SourceOptions

pytestmark = pytest.mark.spark


def test_offsets_json_has_string_partition_keys_like_spark():
    assert off.to_json({("t", 1): 5, ("t", 0): 3, ("u", 0): -2}) == {"t": {"0": 3, "1": 5}, "u": {"0": -2}}
    assert off.from_json('{"t": {"0": 3, "1": -1}}') == {("t", 0): 3, ("t", 1): -1}
    with pytest.raises(ValueError, match="Expected e.g."):
        off.from_json("earliest-ish")


def test_rate_limit_splits_by_lag_and_rounds_up():
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}
    latest = {("t", 0): 100, ("t", 1): 100, ("t", 2): 0}
    assert off.rate_limit(10, start, latest) == {("t", 0): 5, ("t", 1): 5, ("t", 2): 0}
    # A tiny limit over many partitions still makes progress (shares below 1 round up).
    many = {("t", p): 1000 for p in range(6)}
    capped = off.rate_limit(1, {tp: 0 for tp in many}, many)
    assert all(v == 1 for v in capped.values())
    assert off.rate_limit(1000, start, latest) == latest


def test_plan_and_split_ranges():
    ranges = off.plan_ranges({("t", 0): 10, ("t", 1): 5}, {("t", 0): 10, ("t", 1): 25, ("t", 2): 4})
    assert ranges == [off.OffsetRange("t", 1, 5, 25), off.OffsetRange("t", 2, -2, 4)]
    split = off.split_ranges([off.OffsetRange("t", 0, 0, 100)], 4)
    assert [(r.start, r.end) for r in split] == [(0, 25), (25, 50), (50, 75), (75, 100)]


def test_options_validation_uses_sparks_messages():
    base = {"kafka.bootstrap.servers": "h:1"}
    with pytest.raises(ValueError, match="One of the following options must be specified"):
        SourceOptions(base)
    with pytest.raises(ValueError, match="Kafka option 'auto.offset.reset' is not supported"):
        SourceOptions(dict(base, subscribe="t", **{"kafka.auto.offset.reset": "earliest"}))
    with pytest.raises(ValueError, match="keys are always deserialized as byte arrays"):
        SourceOptions(dict(base, subscribe="t", **{"kafka.key.deserializer": "x"}))
    with pytest.raises(ValueError, match="kafka.bootstrap.servers"):
        SourceOptions({"subscribe": "t"})
    o = SourceOptions(dict(base, assign='{"a": [1, 0]}', **{"kafka.client.id": "c"}))
    assert o.assigned_partitions() == [("a", 0), ("a", 1)] and o.client_conf == {"client.id": "c"}
