"""Values passed between the log and its readers: offset metadata, fetch results, isolation.

Mirrors Kafka's ``LogOffsetMetadata``, ``FetchDataInfo`` and ``FetchIsolation``.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from pykbroker.record.file_records import EMPTY_RECORDS, FileRecordsSlice, MemoryRecordsSlice

UNKNOWN_OFFSET = -1


class LogOffsetMetadata(NamedTuple):
    """An offset and, when known, where it lives: the base offset of its segment and its byte
    position in that segment (-1/-1 when only the offset is known)."""

    message_offset: int
    segment_base_offset: int = UNKNOWN_OFFSET
    relative_position_in_segment: int = UNKNOWN_OFFSET

    @property
    def message_offset_only(self) -> bool:
        return self.segment_base_offset == UNKNOWN_OFFSET and self.relative_position_in_segment == UNKNOWN_OFFSET

    def on_older_segment(self, that: LogOffsetMetadata) -> bool:
        if self.message_offset_only or that.message_offset_only:
            raise ValueError(
                f"{self} cannot compare its segment info with {that} since it only has message offset info"
            )
        return self.segment_base_offset < that.segment_base_offset

    def on_same_segment(self, that: LogOffsetMetadata) -> bool:
        return self.segment_base_offset == that.segment_base_offset

    def position_diff(self, that: LogOffsetMetadata) -> int:
        """Bytes between two positions of the same segment (DelayedFetch's accumulated bytes)."""
        if not self.on_same_segment(that):
            raise ValueError(
                f"{self} cannot compare its segment position with {that} since they are not on the same segment"
            )
        return self.relative_position_in_segment - that.relative_position_in_segment


class FetchIsolation(enum.Enum):
    """How far a read may go: the log end (followers), the high watermark (read_uncommitted
    consumers), or the last stable offset (read_committed consumers)."""

    LOG_END = "LOG_END"
    HIGH_WATERMARK = "HIGH_WATERMARK"
    TXN_COMMITTED = "TXN_COMMITTED"


class FetchDataInfo(NamedTuple):
    """The answer of a log read.

    ``fetch_offset_metadata``: the requested offset with the segment/position where the returned data
    starts. ``records``: a :class:`~pykbroker.record.file_records.FileRecordsSlice` (zero-copy; whole
    batches from the batch holding the requested offset, possibly ending with a partial batch) or
    ``EMPTY_RECORDS``. ``first_entry_incomplete``: the first batch is larger than the size allowed
    (only when ``min_one_message`` is false). ``aborted_transactions``: None (no transaction index yet).
    """

    fetch_offset_metadata: LogOffsetMetadata
    records: FileRecordsSlice | MemoryRecordsSlice = EMPTY_RECORDS
    first_entry_incomplete: bool = False
    aborted_transactions: list | None = None

    @classmethod
    def empty(cls, metadata: LogOffsetMetadata) -> FetchDataInfo:
        return cls(metadata, EMPTY_RECORDS)
