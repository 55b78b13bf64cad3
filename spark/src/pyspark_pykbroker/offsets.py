"""Offsets as Spark's Kafka source writes them, and the planning of offset ranges (pure functions).

Offsets JSON is ``{"topic": {"0": 23, "1": -2}}`` (partition keys are strings, -2 earliest, -1 latest),
exactly Spark's ``KafkaSourceOffset`` / ``JsonUtils`` shape. ``rate_limit`` splits
``maxOffsetsPerTrigger`` over partitions in proportion to their lag, rounding a share up unless it is
within 1e-4 of an integer, as ``KafkaMicroBatchStream.rateLimit`` does. ``split_ranges`` applies
``minPartitions`` like ``KafkaOffsetRangeCalculator``.
"""

from __future__ import annotations

import json
import math
from typing import NamedTuple

EARLIEST, LATEST = -2, -1


class OffsetRange(NamedTuple):
    topic: str
    partition: int
    start: int  # inclusive; may be EARLIEST for a partition discovered after the start
    end: int  # exclusive


def to_json(offsets: dict[tuple[str, int], int]) -> dict:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_json(value) -> dict[tuple[str, int], int]:
    """Accepts a dict or its JSON text; raises ValueError with Spark's expectation on bad input."""
    try:
        data = json.loads(value) if isinstance(value, str) else value
        return {(t, int(p)): int(o) for t, parts in data.items() for p, o in parts.items()}
    except (ValueError, AttributeError, TypeError):
        raise ValueError(f"""Expected e.g. {{"topicA":{{"0":23,"1":-1}},"topicB":{{"0":-2}}}}, got {value}""") from None


def rate_limit(limit: int, start: dict, latest: dict) -> dict:
    """Cap ``latest`` so that at most about ``limit`` offsets are taken in total, by lag share."""
    sizes = {tp: max(0, end - start.get(tp, end)) for tp, end in latest.items()}
    total = sum(sizes.values())
    if total <= limit:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        begin = start.get(tp, end)
        size = sizes[tp]
        prorate = limit * (size / total)
        take = math.floor(prorate) if prorate - math.floor(prorate) < 0.0001 else math.ceil(prorate)
        out[tp] = min(end, begin + int(take))
    return out


def plan_ranges(start: dict, end: dict) -> list[OffsetRange]:
    """One range per partition with data; partitions missing from ``start`` begin at EARLIEST."""
    ranges = []
    for (topic, partition), stop in sorted(end.items()):
        begin = start.get((topic, partition), EARLIEST)
        if begin == EARLIEST or stop > begin:
            ranges.append(OffsetRange(topic, partition, begin, stop))
    return ranges


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Split ranges so there are at least ``min_partitions`` (large ranges split most)."""
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    sized = [r for r in ranges if r.start >= 0]
    total = sum(r.end - r.start for r in sized)
    if total == 0:
        return ranges
    out = []
    for r in ranges:
        if r.start < 0:
            out.append(r)
            continue
        size = r.end - r.start
        parts = max(1, round(size / total * min_partitions))
        step = math.ceil(size / parts)
        for i in range(r.start, r.end, max(1, step)):
            out.append(OffsetRange(r.topic, r.partition, i, min(r.end, i + step)))
    return out
