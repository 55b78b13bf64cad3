"""Loading a partition directory at start-up, with crash recovery.

Mirrors ``org.apache.kafka.storage.internals.log.LogLoader``:

1. remove temporary files (``.deleted``, ``.cleaned``, ``.tmp``; ``.swap`` files are deleted too, as
   pykbroker never swaps segments);
2. open every ``.log`` file as a segment; a segment whose index files are missing or fail their sanity
   check has its indexes rebuilt (``LogSegment.recover``);
3. without a clean-shutdown marker, recover every segment from the one holding the recovery point to
   the end: validate each batch (CRC-32C, offsets), rebuild the indexes, truncate at the first invalid
   or torn batch and delete all later segments;
4. compute the log end offset, log start offset and recovery point, resize the active segment's
   indexes for appends, and bring the leader-epoch cache in line.

Producer state is rebuilt afterwards by ``UnifiedLog`` from its snapshots, once the stray ones are deleted
(``ProducerStateManager.remove_stray_snapshots``, as Kafka's LogLoader calls ``removeStraySnapshots``).
"""

from __future__ import annotations

import os
from typing import NamedTuple

from pykbroker.log.abstract_index import CorruptIndexError
from pykbroker.log.fetch_data_info import LogOffsetMetadata
from pykbroker.log.leader_epoch_cache import LeaderEpochFileCache
from pykbroker.log.log_file_utils import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TMP_FILE_SUFFIX,
    offset_from_file_name,
)
from pykbroker.log.log_segment import LogSegment
from pykbroker.log.log_segments import LogSegments
from pykbroker.record.file_records import BatchHeader
from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import Time


class LoadedLogOffsets(NamedTuple):
    log_start_offset: int
    recovery_point: int
    next_offset_metadata: LogOffsetMetadata


class RecoveryReport(NamedTuple):
    """What recovery did to one partition (for the start-up log line and tests)."""

    recovered_segments: int
    truncated_bytes: int
    truncated_segment: int | None  # base offset of the segment cut short, if any
    deleted_segments: tuple[int, ...]  # base offsets of the later segments deleted


class LogLoader:
    """Runs once, on the loading thread, before the log is shared; not thread-safe."""

    def __init__(
        self,
        directory: str,
        topic_partition: tuple[str, int],
        config,
        time: Time,
        had_clean_shutdown: bool,
        segments: LogSegments,
        log_start_offset_checkpoint: int,
        recovery_point_checkpoint: int,
        leader_epoch_cache: LeaderEpochFileCache | None,
    ):
        self.dir = directory
        self.tp = topic_partition
        self.config = config
        self.time = time
        self.had_clean_shutdown = had_clean_shutdown
        self.segments = segments
        self.log_start_offset_checkpoint = log_start_offset_checkpoint
        self.recovery_point_checkpoint = recovery_point_checkpoint
        self.leader_epoch_cache = leader_epoch_cache
        self.report = RecoveryReport(0, 0, None, ())
        self._log = get_logger("LogLoader", partition=self._tp(), dir=os.path.dirname(directory))

    def _tp(self) -> str:
        return f"{self.tp[0]}-{self.tp[1]}"

    def load(self) -> LoadedLogOffsets:
        self._remove_temp_files()
        self._load_segment_files()
        recovery_point, next_offset = self._recover_log()
        active = self.segments.active_segment
        active.resize_indexes(self.config.segment_index_bytes)
        if self.leader_epoch_cache is not None:
            self.leader_epoch_cache.truncate_from_end(next_offset)
        first = self.segments.values()[0]  # never empty after recovery
        log_start_offset = max(self.log_start_offset_checkpoint, first.base_offset)
        if self.leader_epoch_cache is not None:
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset_checkpoint)
        return LoadedLogOffsets(
            log_start_offset, recovery_point, LogOffsetMetadata(next_offset, active.base_offset, active.size)
        )

    # -- passes -------------------------------------------------------------------------------
    def _remove_temp_files(self) -> None:
        for name in os.listdir(self.dir):
            path = os.path.join(self.dir, name)
            if not os.path.isfile(path):
                continue
            if name.endswith((DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, TMP_FILE_SUFFIX, SWAP_FILE_SUFFIX)):
                self._log.info("Deleting stray temporary file", file=name)
                os.unlink(path)

    def _load_segment_files(self) -> None:
        names = sorted(os.listdir(self.dir))
        log_bases = set()
        for name in names:
            if name.endswith(LOG_FILE_SUFFIX):
                try:
                    log_bases.add(offset_from_file_name(name))
                except ValueError:
                    continue
        for name in names:  # orphaned index files
            if name.endswith((INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX)):
                try:
                    base = offset_from_file_name(name)
                except ValueError:
                    continue
                if base not in log_bases:
                    self._log.warning("Found an orphaned index file, deleting it", file=name)
                    os.unlink(os.path.join(self.dir, name))
        last = max(log_bases) if log_bases else None
        for base in sorted(log_bases):
            segment = LogSegment.open(
                self.dir, base, self.config, self.time, file_already_exists=True, preallocate=self.config.preallocate
            )
            try:
                # every index is checked; only the last segment's stay mapped (the others map lazily)
                segment.sanity_check(unload=base != last)
            except (FileNotFoundError, CorruptIndexError) as e:
                self._log.warning("Found a corrupt or missing index; rebuilding it", segment=base, error=str(e))
                segment.close_handlers()
                for path in (segment.offset_index_path, segment.time_index_path):
                    if os.path.exists(path):
                        os.unlink(path)
                segment = LogSegment.open(self.dir, base, self.config, self.time, file_already_exists=True)
                self._recover_segment(segment)
            self.segments.add(segment)

    def _recover_segment(self, segment: LogSegment) -> int:
        return segment.recover(on_batch=self._on_recovered_batch)

    def _on_recovered_batch(self, batch: BatchHeader) -> None:
        cache = self.leader_epoch_cache
        if cache is not None:
            epoch = batch.partition_leader_epoch
            latest = cache.latest_epoch
            if epoch >= 0 and (latest is None or epoch > latest):
                cache.assign(epoch, batch.base_offset)

    def _recover_log(self) -> tuple[int, int]:
        """Returns (recovery point, next offset)."""
        if not self.had_clean_shutdown:
            unflushed = self.segments.values_between(self.recovery_point_checkpoint, 1 << 63)
            recovered = 0
            truncated_total = 0
            truncated_segment = None
            deleted: list[int] = []
            for i, segment in enumerate(unflushed):
                self._log.info(
                    "Recovering unflushed segment", segment=segment.base_offset, progress=f"{i}/{len(unflushed)}"
                )
                truncated = self._recover_segment(segment)
                recovered += 1
                if truncated > 0:
                    truncated_total = truncated
                    truncated_segment = segment.base_offset
                    for later in unflushed[i + 1 :]:
                        self.segments.remove(later.base_offset)
                        later.delete_if_exists()
                        deleted.append(later.base_offset)
                    break
            self.report = RecoveryReport(recovered, truncated_total, truncated_segment, tuple(deleted))
            if truncated_segment is not None:
                self._log.warning(
                    "Log recovery truncated a corrupt or torn tail",
                    segment=truncated_segment,
                    truncated_bytes=truncated_total,
                    deleted_later_segments=deleted,
                    recovered_segments=recovered,
                )
            elif recovered:
                self._log.info("Log recovery found every batch intact", recovered_segments=recovered)

        new_log = self.segments.is_empty
        log_end_offset = self._delete_segments_if_log_start_greater_than_log_end()
        if self.segments.is_empty:
            self.segments.add(
                LogSegment.open(
                    self.dir,
                    self.log_start_offset_checkpoint,
                    self.config,
                    self.time,
                    init_file_size=self.config.segment_bytes,
                    preallocate=self.config.preallocate,
                    defer_index_files=new_log,  # a new log's index files are created on first use
                )
            )
        if self.had_clean_shutdown and log_end_offset is not None:
            return log_end_offset, log_end_offset
        if log_end_offset is None:
            log_end_offset = self.segments.active_segment.read_next_offset()
        return min(self.recovery_point_checkpoint, log_end_offset), log_end_offset

    def _delete_segments_if_log_start_greater_than_log_end(self) -> int | None:
        last = self.segments.last_segment()
        if last is None:
            return None
        log_end_offset = last.read_next_offset()
        if self.log_start_offset_checkpoint > log_end_offset:
            self._log.warning(
                "Deleting all segments: the log start offset is beyond the log end offset",
                log_start_offset=self.log_start_offset_checkpoint,
                log_end_offset=log_end_offset,
            )
            for segment in self.segments.clear():
                segment.delete_if_exists()
            if self.leader_epoch_cache is not None:
                self.leader_epoch_cache.clear_and_flush()
            return None
        return log_end_offset
