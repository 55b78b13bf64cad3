"""Retention predicates: which old segments may be deleted (Kafka's ``UnifiedLog.deleteOldSegments``).

A predicate sees a segment and the next one (None for the active segment). Segments are considered
oldest first and deletion stops at the first segment that does not qualify, so only a prefix of the
log ever goes. A segment is never deleted unless the high watermark is at or past its end, and an
empty active segment is never deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pykbroker.log.log_segment import LogSegment

Predicate = Callable[[LogSegment, "LogSegment | None"], bool]


def start_offset_breached(log) -> Predicate:
    """Segments wholly below the log start offset (DeleteRecords, or after a start offset bump)."""

    def predicate(segment: LogSegment, next_segment: LogSegment | None) -> bool:
        return next_segment is not None and next_segment.base_offset <= log.log_start_offset

    return predicate


def retention_size_breached(log, retention_bytes: int) -> Predicate | None:
    """The oldest segments whose removal keeps the log at or above ``retention.bytes``; None when
    there is no limit or the log is within it."""
    if retention_bytes < 0:
        return None
    size = log.size
    if size < retention_bytes:
        return None
    excess = [size - retention_bytes]

    def predicate(segment: LogSegment, next_segment: LogSegment | None) -> bool:
        if excess[0] - segment.size >= 0:
            excess[0] -= segment.size
            return True
        return False

    return predicate


def retention_ms_breached(now_ms: int, retention_ms: int) -> Predicate | None:
    """Segments whose largest timestamp (or mtime without timestamps) is older than
    ``retention.ms``; None when retention is unlimited (-1)."""
    if retention_ms < 0:
        return None

    def predicate(segment: LogSegment, next_segment: LogSegment | None) -> bool:
        return now_ms - segment.largest_timestamp() > retention_ms

    return predicate


def deletable_segments(
    segments: Sequence[LogSegment], predicate: Predicate, high_watermark: int, log_end_offset: int
) -> list[LogSegment]:
    """The longest prefix of ``segments`` that is below the HW and satisfies ``predicate``."""
    deletable = []
    for i, segment in enumerate(segments):
        next_segment = segments[i + 1] if i + 1 < len(segments) else None
        upper_bound = next_segment.base_offset if next_segment is not None else log_end_offset
        if not high_watermark >= upper_bound:
            break
        if not predicate(segment, next_segment):
            break
        if next_segment is None and segment.size == 0:
            break
        deletable.append(segment)
    return deletable
