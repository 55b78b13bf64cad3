"""ListOffsets lookups over a log's segments (Kafka's ``UnifiedLog.fetchOffsetByTimestamp``).

Special timestamps: -1 latest, -2 earliest, -3 max timestamp, -4 earliest local, -5 latest tiered.
For a real timestamp the first segment whose largest timestamp reaches it is searched: the time index
gives a lower-bound offset, the offset index its position, then batch headers are scanned. The log
does not decode records, so without ``refine`` the answer is the base offset of the first qualifying
batch (never below the log start offset) with that batch's max timestamp; a ``refine`` callable (a
record decoder) may return the exact record instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pykbroker.log.leader_epoch_cache import LeaderEpochFileCache
from pykbroker.log.log_segment import LogSegment
from pykbroker.record.file_records import TimestampAndOffset

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5

# refine(batch_bytes, target_timestamp, min_offset) -> the first record with timestamp >= target and
# offset >= min_offset as TimestampAndOffset, or None.
RecordSearch = Callable[[bytes, int, int], "TimestampAndOffset | None"]


def fetch_offset_by_timestamp(
    segments: Sequence[LogSegment],
    target_timestamp: int,
    log_start_offset: int,
    log_end_offset: int,
    cache: LeaderEpochFileCache,
    refine: RecordSearch | None = None,
) -> TimestampAndOffset | None:
    """See the module docstring. Thread-safe given an immutable ``segments`` snapshot."""
    if target_timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return TimestampAndOffset(-1, log_start_offset, cache.epoch_for_offset(log_start_offset))
    if target_timestamp == LATEST_TIMESTAMP:
        return TimestampAndOffset(-1, log_end_offset, cache.latest_epoch)
    if target_timestamp == LATEST_TIERED_TIMESTAMP:
        return TimestampAndOffset(-1, -1, None)
    if target_timestamp == MAX_TIMESTAMP:
        return _max_timestamp_offset(segments, refine)
    # Any other value, negative ones included, is a timestamp to search for (Kafka's UnifiedLog does
    # the same): the first record with a timestamp >= a negative target is the first record.
    for segment in segments:
        if segment.largest_timestamp() >= target_timestamp:
            return _search_segment(segment, target_timestamp, log_start_offset, refine)
    return None


def _search_segment(
    segment: LogSegment, target: int, start: int, refine: RecordSearch | None
) -> TimestampAndOffset | None:
    if refine is None:
        return segment.find_offset_by_timestamp(target, start)
    entry = segment.time_index.lookup(target)
    position = segment.offset_index.lookup(max(entry.offset, start)).position
    for batch in segment.log.batches_from(position):
        if batch.max_timestamp >= target and batch.last_offset >= start:
            found = refine(segment.log.read(batch.position, batch.size_in_bytes), target, start)
            if found is not None:
                return found
    return None


def _max_timestamp_offset(segments: Sequence[LogSegment], refine: RecordSearch | None) -> TimestampAndOffset | None:
    best = None
    for segment in segments:
        if best is None or segment.max_timestamp_so_far > best.max_timestamp_so_far:
            best = segment
    if best is None or best.max_timestamp_so_far < 0:
        return None
    ts, offset = best.max_timestamp_so_far, best.offset_of_max_timestamp_so_far
    position = best.offset_index.lookup(offset).position
    for batch in best.log.batches_from(position):
        if batch.max_timestamp == ts:
            if refine is not None:
                found = refine(best.log.read(batch.position, batch.size_in_bytes), ts, batch.base_offset)
                if found is not None:
                    return found
            epoch = batch.partition_leader_epoch
            return TimestampAndOffset(ts, batch.base_offset, epoch if epoch >= 0 else None)
    return None
