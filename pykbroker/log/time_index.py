"""The time index (``.timeindex``): sparse map from timestamp to the offset where it was reached.

Mirrors ``org.apache.kafka.storage.internals.log.TimeIndex``. Entries are 12 bytes, big-endian:
``timestamp int64`` (ms), ``relativeOffset int32``. An entry ``(t, o)`` means "every record with a
timestamp larger than t comes after offset o"; entries are appended only when the timestamp grows,
so both fields increase. The last slot is kept free so that the segment's max timestamp can always be
appended once more when it is rolled or closed (``maybe_append(..., skip_full_check=True)``).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from pykbroker.log.abstract_index import (
    AbstractIndex,
    CorruptIndexError,
    IndexFullError,
    InvalidOffsetError,
)

_ENTRY = struct.Struct(">qi")
_I64 = struct.Struct(">q").unpack_from
_I32 = struct.Struct(">i").unpack_from

NO_TIMESTAMP = -1


class TimestampOffset(NamedTuple):
    """A time index entry: ``timestamp`` (ms) and absolute ``offset``."""

    timestamp: int
    offset: int


class TimeIndex(AbstractIndex):
    """See the module docstring; threading as in :class:`AbstractIndex`."""

    ENTRY_SIZE = 12
    OFFSET_FIELD = 8  # the relative offset follows the 8-byte timestamp
    ZERO_FIRST_ENTRY_ALLOWED = True

    def __init__(self, path: str, base_offset: int, max_index_size: int = -1, fresh: bool = False):
        self._last_entry = TimestampOffset(NO_TIMESTAMP, base_offset)
        super().__init__(path, base_offset, max_index_size, fresh)
        self._after_entries_changed()

    def _after_entries_changed(self) -> None:
        n, mm = self._entries, self._mm
        if n and mm is not None:
            ts, rel = _ENTRY.unpack_from(mm, (n - 1) * 12)
            self._last_entry = TimestampOffset(ts, self.base_offset + rel)
        else:
            self._last_entry = TimestampOffset(NO_TIMESTAMP, self.base_offset)

    def resize(self, new_size: int) -> bool:
        changed = super().resize(new_size)
        if changed:
            with self._lock:
                self._after_entries_changed()
        return changed

    def is_full(self) -> bool:
        """Full one slot early: the last slot is reserved for the entry appended on roll/close."""
        return self._entries >= self._max_entries - 1

    def last_entry(self) -> TimestampOffset:
        """The last entry, or (-1, base_offset) when empty."""
        return self._last_entry

    def sanity_check(self) -> None:
        if self._length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"Time index file {self._path} is corrupt, found {self._length} bytes which "
                f"is not a multiple of {self.ENTRY_SIZE}"
            )
        if self._entries:
            first, last = self.entry(0), self._last_entry
            if last.timestamp < first.timestamp:
                raise CorruptIndexError(
                    f"Corrupt time index found, time index file ({self._path}) has non-zero "
                    f"size but the last timestamp is {last.timestamp} which is less than the "
                    f"first timestamp {first.timestamp}"
                )
            if last.offset < self.base_offset:
                raise CorruptIndexError(
                    f"Corrupt time index found, time index file ({self._path}) has non-zero "
                    f"size but the last offset is {last.offset} which is less than the first "
                    f"offset {self.base_offset}"
                )

    def entry(self, n: int) -> TimestampOffset:
        with self._lock:
            if n >= self._entries:
                raise IndexError(
                    f"Attempt to fetch the {n}th entry from time index {self._path} which has size {self._entries}"
                )
            ts, rel = _ENTRY.unpack_from(self._mapped(), n * 12)
        return TimestampOffset(ts, self.base_offset + rel)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= ``target_timestamp``; (-1, base_offset) if none."""
        with self._lock:
            if self._entries == 0:
                return TimestampOffset(NO_TIMESTAMP, self.base_offset)
            mm = self._mapped()
            slot = self._largest_lower_bound_slot(mm, target_timestamp, _I64, 0)
            if slot < 0:
                return TimestampOffset(NO_TIMESTAMP, self.base_offset)
            ts, rel = _ENTRY.unpack_from(mm, slot * 12)
        return TimestampOffset(ts, self.base_offset + rel)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append ``(timestamp, offset)`` if ``timestamp`` is larger than the last entry's. Raises
        IndexFullError when full (unless ``skip_full_check``, used on roll/close), InvalidOffsetError
        if ``offset`` is below the last entry's and ValueError if ``timestamp`` is."""
        with self._lock:
            n = self._entries
            if not skip_full_check and n >= self._max_entries - 1:
                raise IndexFullError(f"Attempt to append to a full time index (size = {n}) {self._path}")
            last = self._last_entry
            if n and offset < last.offset:
                raise InvalidOffsetError(
                    f"Attempt to append an offset ({offset}) to slot {n} no larger than the "
                    f"last offset appended ({last.offset}) to {self._path}"
                )
            if n and timestamp < last.timestamp:
                raise ValueError(
                    f"Attempt to append a timestamp ({timestamp}) to slot {n} no larger than the last "
                    f"timestamp appended ({last.timestamp}) to {self._path}"
                )
            if timestamp > last.timestamp:
                if n >= self._max_entries:
                    raise IndexFullError(f"Time index {self._path} has no slot left (size = {n})")
                rel = self.relative_offset(offset)
                mm = self._mapped()
                self._ensure_allocated((n + 1) * 12)
                _ENTRY.pack_into(mm, n * 12, timestamp, rel)
                self._entries = n + 1
                self._last_entry = TimestampOffset(timestamp, offset)

    def entries_list(self) -> list[TimestampOffset]:
        return [self.entry(i) for i in range(self._entries)]


__all__ = ["CorruptIndexError", "IndexFullError", "InvalidOffsetError", "TimeIndex", "TimestampOffset"]
