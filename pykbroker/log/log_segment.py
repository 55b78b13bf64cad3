"""One segment of a partition log: the ``.log`` file plus its offset and time indexes.

Mirrors ``org.apache.kafka.storage.internals.log.LogSegment``. A segment holds the batches with
offsets in ``[base_offset, next segment's base offset)``; its files are named by the base offset
zero-padded to 20 digits. Appends add an offset-index entry (last offset of the append -> start
position of the append) and a time-index entry (max timestamp so far -> its offset) once more than
``index.interval.bytes`` were written since the previous entry.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from pykbroker.log.fetch_data_info import FetchDataInfo, LogOffsetMetadata
from pykbroker.log.lazy_index import LazyIndex
from pykbroker.log.log_file_utils import (
    LOG_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    log_file,
    offset_index_file,
    time_index_file,
    too_many_open_files,
)
from pykbroker.log.offset_index import OffsetIndex
from pykbroker.log.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from pykbroker.log.transaction_index import AbortedTxn, TransactionIndex
from pykbroker.protocol.errors import CorruptRecordError
from pykbroker.record.file_records import (
    EMPTY_RECORDS,
    BatchHeader,
    FileRecords,
    LogOffsetPosition,
    TimestampAndOffset,
    verify_crc,
)
from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import Time

_log = get_logger("LogSegment")

#: ``tuple.__new__``: a NamedTuple from a tuple of all its fields, without its Python-level ``__new__`` (hot path)
_new_tuple = tuple.__new__


class LogSegmentOffsetOverflowError(Exception):
    """An offset cannot be stored as an int32 delta from the segment's base offset."""


class LogSegment:
    """A segment (see module docstring).

    Threading: mutations (append, truncate_to, recover, roll hooks, close, rename, delete) run under the
    owning log's lock. ``read``, ``translate_offset``, ``find_offset_by_timestamp`` and ``flush`` may
    run on any thread concurrently with an append: the file size and index entry counts are published
    only after their bytes are written (see FileRecords and AbstractIndex).
    """

    def __init__(
        self,
        log: FileRecords,
        offset_index: LazyIndex[OffsetIndex],
        time_index: LazyIndex[TimeIndex],
        base_offset: int,
        index_interval_bytes: int,
        roll_jitter_ms: int,
        time: Time,
    ):
        self.log = log
        self._lazy_offset_index = offset_index
        self._lazy_time_index = time_index
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self._time = time
        self._created = time.milliseconds()
        self._rolling_based_timestamp: int | None = None  # max timestamp of the first batch
        self._max_timestamp_and_offset_so_far: TimestampOffset | None = None  # None = not read yet
        self._bytes_since_last_index_entry = 0
        self._max_index_size = -1
        name = os.path.basename(log.path)
        at = name.index(LOG_FILE_SUFFIX)
        #: the aborted transactions of this segment (``.txnindex``, created on the first entry)
        self.txn_index = TransactionIndex(
            base_offset,
            os.path.join(
                os.path.dirname(log.path), name[:at] + TXN_INDEX_FILE_SUFFIX + name[at + len(LOG_FILE_SUFFIX) :]
            ),
        )

    @classmethod
    def open(
        cls,
        directory: str,
        base_offset: int,
        config,
        time: Time,
        file_already_exists: bool = False,
        init_file_size: int = 0,
        preallocate: bool = False,
        file_suffix: str = "",
        defer_index_files: bool = False,
    ) -> LogSegment:
        """Open or create the segment files for ``base_offset`` in ``directory``. ``config`` is a
        LogConfig (uses ``segment_index_bytes``, ``index_interval_bytes``, ``random_segment_jitter()``).
        ``defer_index_files`` (a new log's first segment): the index files are created on first use, not now
        (two file creations fewer per partition created; an idle partition never has them). An existing empty
        segment whose index files are missing (such a segment, never used) opens the same way."""
        max_index_size = config.segment_index_bytes
        path = log_file(directory, base_offset, file_suffix)
        try:
            log = FileRecords.open(path, file_already_exists, init_file_size, preallocate)
        except OSError as e:
            raise too_many_open_files(e, path) from None
        try:
            offset_path = offset_index_file(directory, base_offset, file_suffix)
            time_path = time_index_file(directory, base_offset, file_suffix)
            # A new segment's index files are created now (a full disk fails the roll here) and mapped
            # on first use; an existing segment's are opened on first use.
            unused = not file_already_exists or log.size_in_bytes == 0
            fresh_offset = unused and not os.path.exists(offset_path)
            fresh_time = unused and not os.path.exists(time_path)
            if not file_already_exists and not defer_index_files:
                if fresh_offset:
                    OffsetIndex.create_file(offset_path, max_index_size)
                if fresh_time:
                    TimeIndex.create_file(time_path, max_index_size)
        except BaseException:
            log.close_handlers()
            raise
        offset_index = LazyIndex(
            offset_path, lambda p, fresh=False: OffsetIndex(p, base_offset, max_index_size, fresh), fresh_offset
        )
        time_index = LazyIndex(
            time_path, lambda p, fresh=False: TimeIndex(p, base_offset, max_index_size, fresh), fresh_time
        )
        segment = cls(
            log,
            offset_index,
            time_index,
            base_offset,
            config.index_interval_bytes,
            config.random_segment_jitter(),
            time,
        )
        segment._max_index_size = max_index_size
        if fresh_time:
            segment._max_timestamp_and_offset_so_far = TimestampOffset(NO_TIMESTAMP, base_offset)
        if not file_already_exists and not (fresh_offset and fresh_time):
            offset_index.get()  # files left by an earlier segment at this offset: opened as before
            time_index.get()
        return segment

    # -- accessors ----------------------------------------------------------------------------
    @property
    def offset_index(self) -> OffsetIndex:
        return self._lazy_offset_index.get()

    @property
    def time_index(self) -> TimeIndex:
        return self._lazy_time_index.get()

    @property
    def offset_index_path(self) -> str:
        return self._lazy_offset_index.path

    @property
    def time_index_path(self) -> str:
        return self._lazy_time_index.path

    @property
    def size(self) -> int:
        """Bytes in the ``.log`` file."""
        return self.log.size_in_bytes

    def _read_max_timestamp_and_offset_so_far(self) -> TimestampOffset:
        ts = self._max_timestamp_and_offset_so_far
        if ts is None:
            ts = self._max_timestamp_and_offset_so_far = self.time_index.last_entry()
        return ts

    @property
    def max_timestamp_so_far(self) -> int:
        """Largest batch max timestamp seen in this segment (-1 if none)."""
        return self._read_max_timestamp_and_offset_so_far().timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        return self._read_max_timestamp_and_offset_so_far().offset

    def largest_timestamp(self) -> int:
        """The max timestamp if any batch had one, else the file's last-modified time (retention)."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified_ms()

    def last_modified_ms(self) -> int:
        return self.log.last_modified_ms()

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= 0x7FFFFFFF

    def _ensure_offset_in_range(self, offset: int) -> None:
        if not self.can_convert_to_relative_offset(offset):
            raise LogSegmentOffsetOverflowError(
                f"Detected offset overflow at offset {offset} in segment with base offset {self.base_offset}"
            )

    # -- append -------------------------------------------------------------------------------
    def append(self, largest_offset: int, largest_timestamp: int, offset_of_max_timestamp: int, records) -> None:
        """Append ``records`` (bytes-like, whole batches whose offsets are already assigned) whose last
        offset is ``largest_offset`` and max timestamp ``largest_timestamp`` (reached at
        ``offset_of_max_timestamp``). Raises LogSegmentOffsetOverflowError if ``largest_offset`` does not
        fit the indexes. Caller holds the log lock."""
        size = len(records)
        if size == 0:
            return
        physical_position = self.log.size_in_bytes
        if physical_position == 0:
            self._rolling_based_timestamp = largest_timestamp
        self._ensure_offset_in_range(largest_offset)
        self.log.append(records)
        if largest_timestamp > self.max_timestamp_so_far:
            self._max_timestamp_and_offset_so_far = TimestampOffset(largest_timestamp, offset_of_max_timestamp)
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(largest_offset, physical_position)
            so_far = self._read_max_timestamp_and_offset_so_far()
            self.time_index.maybe_append(so_far.timestamp, so_far.offset)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size

    def append_unless_roll(
        self,
        largest_offset: int,
        largest_timestamp: int,
        offset_of_max_timestamp: int,
        records,
        max_segment_ms: int,
        max_segment_bytes: int,
        time,
    ) -> int:
        """:meth:`should_roll` and :meth:`append` in one step, for the leader's append: -1 (nothing written)
        when the segment must roll first (``should_roll(max_segment_ms, max_segment_bytes, largest_timestamp,
        largest_offset, len(records), time.milliseconds())``), else append ``records`` (non-empty) as
        :meth:`append` does and return the segment's new size in bytes. ``time`` (a ``Time``) is read only when
        the segment's age is measured from its creation (no batch timestamp). Caller holds the log lock."""
        size = len(records)
        physical_position = self.log.size_in_bytes
        if physical_position > max_segment_bytes - size or not 0 <= largest_offset - self.base_offset <= 0x7FFFFFFF:
            return -1
        if physical_position > 0:
            ts = self._rolling_based_timestamp
            if ts is None:
                self._load_first_batch_timestamp()
                ts = self._rolling_based_timestamp
            waited = largest_timestamp - ts if ts is not None and ts >= 0 else time.milliseconds() - self._created
            if waited > max_segment_ms - self.roll_jitter_ms:
                return -1
        if self._lazy_offset_index.is_full() or self._lazy_time_index.is_full():
            return -1
        if physical_position == 0:
            self._rolling_based_timestamp = largest_timestamp
        self.log.append(records)
        so_far = self._max_timestamp_and_offset_so_far
        if so_far is None:
            so_far = self._read_max_timestamp_and_offset_so_far()
        if largest_timestamp > so_far.timestamp:
            so_far = self._max_timestamp_and_offset_so_far = _new_tuple(
                TimestampOffset, (largest_timestamp, offset_of_max_timestamp)
            )
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(largest_offset, physical_position)
            self.time_index.maybe_append(so_far.timestamp, so_far.offset)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size
        return physical_position + size

    # -- read ---------------------------------------------------------------------------------
    def translate_offset(self, offset: int, starting_file_position: int = 0) -> LogOffsetPosition | None:
        """Position and size of the first batch whose last offset is >= ``offset`` (index lookup, then
        a header scan), or None if there is none."""
        mapping = self.offset_index.lookup(offset)
        return self.log.search_for_offset_with_size(offset, max(mapping.position, starting_file_position))

    def read(
        self, start_offset: int, max_size: int, max_position: int | None = None, min_one_message: bool = False
    ) -> FetchDataInfo | None:
        """Read from the batch holding ``start_offset``: at most ``max_size`` bytes (at least the first
        batch when ``min_one_message``), never beyond byte ``max_position`` (None: the segment size; a
        negative value exposes nothing). Returns None if ``start_offset`` is beyond this segment. The
        result is a zero-copy slice, whole batches from the start, possibly ending in a partial batch."""
        if max_size < 0:
            raise ValueError(f"Invalid max size {max_size} for log read from segment {self.log.path}")
        if max_position is None:
            max_position = self.size
        start = self.translate_offset(start_offset)
        if start is None:
            return None
        metadata = LogOffsetMetadata(start_offset, self.base_offset, start.position)
        adjusted_max_size = max(max_size, start.size) if min_one_message else max_size
        if adjusted_max_size == 0 or max_position < 0:
            return FetchDataInfo(metadata, EMPTY_RECORDS)
        fetch_size = max(0, min(max_position - start.position, adjusted_max_size))
        return FetchDataInfo(metadata, self.log.slice(start.position, fetch_size), adjusted_max_size < start.size)

    def read_next_offset(self) -> int:
        """The offset after the last batch (a header scan from the last index entry). An empty segment's is its
        base offset, without mapping its index (a new or idle partition's index stays unmapped)."""
        if self.log.size_in_bytes == 0:
            return self.base_offset
        position = self.offset_index.lookup(self.offset_index.last_offset).position
        next_offset = self.base_offset
        for batch in self.log.batches_from(position):
            next_offset = batch.next_offset
        return next_offset

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> TimestampAndOffset | None:
        """The first batch (at or after ``starting_offset``) with max timestamp >= ``timestamp``, via the
        time index, the offset index and a header scan. Batch granularity (see FileRecords)."""
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        return self.log.search_for_timestamp(timestamp, position, starting_offset)

    # -- recovery -----------------------------------------------------------------------------
    def recover(
        self, max_message_size: int | None = None, on_batch: Callable[[BatchHeader], None] | None = None
    ) -> int:
        """Rebuild both indexes from the log, validating every batch (size, magic, CRC-32C, offsets
        increasing and representable), and truncate the file at the first invalid or torn batch.
        ``on_batch`` sees each valid batch header (leader-epoch cache). ``max_message_size``, when
        given, treats larger batches as corrupt. Returns the number of bytes truncated."""
        offset_index, time_index = self.offset_index, self.time_index
        offset_index.reset()
        time_index.reset()
        valid_bytes = 0
        last_index_entry = 0
        max_ts = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        next_expected = self.base_offset
        try:
            for header, data in self.log.batches_with_data_from(0, max_message_size):
                verify_crc(header, data)
                if header.base_offset < next_expected or header.last_offset_delta < 0:
                    raise CorruptRecordError(
                        f"Batch at position {valid_bytes} has offsets [{header.base_offset}, {header.last_offset}] "
                        f"but offsets below {next_expected} were already seen"
                    )
                if not self.can_convert_to_relative_offset(header.last_offset):
                    raise CorruptRecordError(
                        f"Batch at position {valid_bytes} has last offset {header.last_offset}, "
                        f"not representable from base offset {self.base_offset}"
                    )
                next_expected = header.last_offset + 1
                if header.max_timestamp > max_ts.timestamp:
                    max_ts = TimestampOffset(header.max_timestamp, header.last_offset)
                if valid_bytes - last_index_entry > self.index_interval_bytes:
                    offset_index.append(header.last_offset, valid_bytes)
                    time_index.maybe_append(max_ts.timestamp, max_ts.offset)
                    last_index_entry = valid_bytes
                valid_bytes += header.size_in_bytes
                if on_batch is not None:
                    on_batch(header)
        except CorruptRecordError as e:
            _log.warning(
                "Found invalid messages in log segment", segment=self.log.path, position=valid_bytes, error=str(e)
            )
        self._max_timestamp_and_offset_so_far = max_ts
        truncated = self.log.size_in_bytes - valid_bytes
        if truncated > 0:
            self.log.truncate_to(valid_bytes)
        self._bytes_since_last_index_entry = valid_bytes - last_index_entry
        if valid_bytes == 0:
            self._rolling_based_timestamp = None
        offset_index.trim_to_valid_size()
        time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)
        time_index.trim_to_valid_size()
        return truncated

    def update_txn_index(self, producer_id: int, first_offset: int, last_offset: int, last_stable_offset: int) -> None:
        """Record an aborted transaction whose ABORT marker (``last_offset``) is in this segment."""
        self.txn_index.append(AbortedTxn(producer_id, first_offset, last_offset, last_stable_offset))

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    def sanity_check(self, unload: bool = False) -> None:
        """Raise CorruptIndexError (or FileNotFoundError) if an index is missing or inconsistent.
        With ``unload``, unmap the indexes afterwards (they are mapped again on first use)."""
        lazies = [lazy for lazy in (self._lazy_offset_index, self._lazy_time_index) if not lazy.is_fresh]
        for lazy in lazies:  # a fresh index (an unused segment's, maybe not created yet) is empty: nothing to check
            if not os.path.exists(lazy.path):
                raise FileNotFoundError(f"Index file {lazy.path} does not exist")
        try:
            for lazy in lazies:
                lazy.get().sanity_check()
        finally:
            if unload:
                self._lazy_offset_index.unload()
                self._lazy_time_index.unload()

    def truncate_to(self, offset: int) -> int:
        """Remove every batch and index entry with offsets >= ``offset`` (whole batches: the batch
        holding ``offset`` goes too). Returns the bytes removed from the log."""
        mapping = self.translate_offset(offset)
        offset_index, time_index = self.offset_index, self.time_index
        offset_index.truncate_to(offset)
        time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        offset_index.resize(offset_index.max_index_size)
        time_index.resize(time_index.max_index_size)
        truncated = 0 if mapping is None else self.log.truncate_to(mapping.position)
        if self.log.size_in_bytes == 0:
            self._created = self._time.milliseconds()
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        if self.max_timestamp_so_far >= 0:
            self._max_timestamp_and_offset_so_far = self._read_largest_timestamp()
        return truncated

    def _read_largest_timestamp(self) -> TimestampOffset:
        last_entry = self.time_index.last_entry()
        position = self.offset_index.lookup(last_entry.offset).position
        after = self.log.largest_timestamp_after(position)
        if after.timestamp > last_entry.timestamp:
            return TimestampOffset(after.timestamp, after.offset)
        return last_entry

    # -- rolling ------------------------------------------------------------------------------
    def should_roll(
        self,
        max_segment_ms: int,
        max_segment_bytes: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        messages_size: int,
        now: int,
    ) -> bool:
        """Kafka's roll conditions (``LogSegment.shouldRoll``; the arguments are its ``RollParams`` fields, passed
        one by one so the per-append path builds no tuple; times in ms, sizes in bytes): the append of
        ``messages_size`` bytes would pass ``max_segment_bytes``; the segment is non-empty and older than
        ``max_segment_ms`` minus this segment's jitter; an index is full; or ``max_offset_in_messages`` does not fit
        a 4-byte delta from the base offset."""
        size = self.size
        return (
            size > max_segment_bytes - messages_size
            or (
                size > 0
                and self.time_waited_for_roll(now, max_timestamp_in_messages) > max_segment_ms - self.roll_jitter_ms
            )
            or self._lazy_offset_index.is_full()
            or self._lazy_time_index.is_full()
            or not self.can_convert_to_relative_offset(max_offset_in_messages)
        )

    def _load_first_batch_timestamp(self) -> None:
        if self._rolling_based_timestamp is None:
            for batch in self.log.batches_from(0):
                self._rolling_based_timestamp = batch.max_timestamp
                break

    def time_waited_for_roll(self, now: int, message_timestamp: int) -> int:
        """ms this segment has waited: from its first batch's timestamp to ``message_timestamp`` if the
        first batch has one, else from the segment's creation to ``now``."""
        self._load_first_batch_timestamp()
        ts = self._rolling_based_timestamp
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now - self._created

    def resize_indexes(self, size: int) -> None:
        for lazy in (self._lazy_offset_index, self._lazy_time_index):
            if not (lazy.is_fresh and size == self._max_index_size):  # a fresh file has that size already
                lazy.get().resize(size)

    def on_become_inactive_segment(self) -> None:
        """On roll: record the final max timestamp, trim the indexes and any preallocated log space."""
        so_far = self._read_max_timestamp_and_offset_so_far()
        if so_far.timestamp != NO_TIMESTAMP or self._lazy_time_index.is_loaded:
            self.time_index.maybe_append(so_far.timestamp, so_far.offset, skip_full_check=True)
        self._create_deferred_index_files()
        self._lazy_offset_index.trim_to_valid_size()
        self._lazy_time_index.trim_to_valid_size()
        self.log.trim()

    # -- lifecycle ----------------------------------------------------------------------------
    def flush(self) -> None:
        """fsync the log and msync the loaded indexes."""
        self.log.flush()
        if self._lazy_offset_index.is_loaded:
            self.offset_index.flush()
        if self._lazy_time_index.is_loaded:
            self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Record the final max timestamp, trim and close the indexes, flush and close the log."""
        so_far = self._max_timestamp_and_offset_so_far
        if so_far is not None and (self._lazy_time_index.is_loaded or so_far.timestamp != NO_TIMESTAMP):
            try:
                self.time_index.maybe_append(so_far.timestamp, so_far.offset, skip_full_check=True)
            except Exception as e:  # noqa: BLE001 - closing must go on
                _log.warning("Failed to append the final time index entry", segment=self.log.path, error=str(e))
        self._create_deferred_index_files()
        self._lazy_offset_index.close()
        self._lazy_time_index.close()
        self.txn_index.close()
        self.log.close()

    def _create_deferred_index_files(self) -> None:
        """A segment holding batches keeps index files once it rolls or closes (empty ones if never used: the
        index is sparse), so a later load finds them; an empty segment's may stay missing."""
        if self.log.size_in_bytes == 0:
            return
        for lazy in (self._lazy_offset_index, self._lazy_time_index):
            if lazy.is_fresh and not os.path.exists(lazy.path):
                os.close(os.open(lazy.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))

    def close_handlers(self) -> None:
        """Release mappings and descriptors without flushing or trimming."""
        self._lazy_offset_index.close_handler()
        self._lazy_time_index.close_handler()
        self.log.close_handlers()

    def delete_if_exists(self) -> None:
        """Close and delete the segment's files."""
        self.close_handlers()
        self.log.delete_if_exists()
        self._lazy_offset_index.delete_if_exists()
        self._lazy_time_index.delete_if_exists()
        self.txn_index.delete_if_exists()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the three files from ``...old_suffix`` to ``...new_suffix`` (e.g. "" -> ".deleted")."""

        def replace(path: str) -> str:
            if not path.endswith(old_suffix):
                raise ValueError(f"Expected {path} to end with {old_suffix!r}")
            return path[: len(path) - len(old_suffix)] + new_suffix

        self.log.rename_to(replace(self.log.path))
        self._lazy_offset_index.rename_to(replace(self._lazy_offset_index.path))
        self._lazy_time_index.rename_to(replace(self._lazy_time_index.path))
        self.txn_index.rename_to(replace(self.txn_index.path))

    def update_parent_dir(self, parent: str) -> None:
        self.log.update_parent_dir(parent)
        self._lazy_offset_index.update_parent_dir(parent)
        self._lazy_time_index.update_parent_dir(parent)
        self.txn_index.update_parent_dir(parent)

    def __repr__(self) -> str:
        ts = self._max_timestamp_and_offset_so_far
        return (
            f"LogSegment(base_offset={self.base_offset}, size={self.size}, "
            f"largest_record_timestamp={ts.timestamp if ts else 'unknown'})"
        )
