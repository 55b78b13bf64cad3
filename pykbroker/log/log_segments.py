"""The ordered set of a log's segments, keyed by base offset (Kafka's ``LogSegments``)."""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from pykbroker.log.log_segment import LogSegment


class LogSegments:
    """Segments sorted by base offset.

    Threading: copy-on-write. Mutations (``add``, ``remove``, ``clear``) run under the owning log's
    lock and publish a new immutable ``(base offsets, segments)`` pair with one reference assignment;
    readers on any thread take ``snapshot()`` (or call a query, which takes one) and never see a
    half-updated list. Segment counts are small, so copying on mutation is cheap.
    """

    def __init__(self, topic_partition: tuple[str, int]):
        self.topic_partition = topic_partition
        self._state: tuple[tuple[int, ...], tuple[LogSegment, ...]] = ((), ())

    def snapshot(self) -> tuple[tuple[int, ...], tuple[LogSegment, ...]]:
        return self._state

    # -- mutation (under the log lock) --------------------------------------------------------
    def add(self, segment: LogSegment) -> LogSegment:
        """Insert ``segment``, replacing any segment with the same base offset. Returns it."""
        bases, segs = list(self._state[0]), list(self._state[1])
        i = bisect.bisect_left(bases, segment.base_offset)
        if i < len(bases) and bases[i] == segment.base_offset:
            segs[i] = segment
        else:
            bases.insert(i, segment.base_offset)
            segs.insert(i, segment)
        self._state = (tuple(bases), tuple(segs))
        return segment

    def remove(self, base_offset: int) -> LogSegment | None:
        bases, segs = self._state
        i = bisect.bisect_left(bases, base_offset)
        if i < len(bases) and bases[i] == base_offset:
            removed = segs[i]
            self._state = (bases[:i] + bases[i + 1 :], segs[:i] + segs[i + 1 :])
            return removed
        return None

    def clear(self) -> list[LogSegment]:
        segs = list(self._state[1])
        self._state = ((), ())
        return segs

    # -- queries (any thread) -----------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._state[0])

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self._state[1])

    @property
    def is_empty(self) -> bool:
        return not self._state[0]

    def values(self) -> tuple[LogSegment, ...]:
        return self._state[1]

    def base_offsets(self) -> tuple[int, ...]:
        return self._state[0]

    def get(self, base_offset: int) -> LogSegment | None:
        bases, segs = self._state
        i = bisect.bisect_left(bases, base_offset)
        return segs[i] if i < len(bases) and bases[i] == base_offset else None

    def contains(self, base_offset: int) -> bool:
        return self.get(base_offset) is not None

    def values_between(self, from_offset: int, to_offset: int) -> tuple[LogSegment, ...]:
        """Segments that may hold offsets in ``[from_offset, to_offset)``: from the floor segment of
        ``from_offset`` up to (excluding) segments based at or after ``to_offset``."""
        if from_offset == to_offset:
            return ()
        if to_offset < from_offset:
            raise ValueError(f"Invalid log segment range: requested segments from {from_offset} to {to_offset}")
        bases, segs = self._state
        start = max(0, bisect.bisect_right(bases, from_offset) - 1)
        end = bisect.bisect_left(bases, to_offset)
        return segs[start:end]

    def first_segment(self) -> LogSegment | None:
        segs = self._state[1]
        return segs[0] if segs else None

    def last_segment(self) -> LogSegment | None:
        segs = self._state[1]
        return segs[-1] if segs else None

    @property
    def active_segment(self) -> LogSegment:
        segs = self._state[1]
        if not segs:
            raise LookupError(f"No segments in {self.topic_partition}")
        return segs[-1]

    def floor_segment(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset <= ``offset``."""
        bases, segs = self._state
        i = bisect.bisect_right(bases, offset) - 1
        return segs[i] if i >= 0 else None

    def higher_segment(self, offset: int) -> LogSegment | None:
        """The segment with the smallest base offset > ``offset``."""
        bases, segs = self._state
        i = bisect.bisect_right(bases, offset)
        return segs[i] if i < len(segs) else None

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._state[1])
