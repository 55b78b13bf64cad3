"""The offset index (``.index``): sparse map from offset to byte position in the segment's log.

Mirrors ``org.apache.kafka.storage.internals.log.OffsetIndex``. Entries are 8 bytes, big-endian:
``relativeOffset int32`` (offset - base offset), ``position int32`` (byte position of a batch in the
``.log`` file). Entries are strictly increasing in both fields. An entry maps the LAST offset of an
append to the START position of that append, so ``lookup(o)`` (the largest entry with offset <= o)
gives a position at or before the batch holding ``o``; the caller then scans batch headers forward.
The real entries never have position 0 (the first entry is written only after ``index.interval.bytes``
of data), which is how an untrimmed zero tail is recognised.
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

_ENTRY = struct.Struct(">ii")
_I32 = struct.Struct(">i").unpack_from


class OffsetPosition(NamedTuple):
    """An index entry: absolute ``offset`` and byte ``position`` in the log file."""

    offset: int
    position: int


class OffsetIndex(AbstractIndex):
    """See the module docstring; threading as in :class:`AbstractIndex`."""

    ENTRY_SIZE = 8

    def __init__(self, path: str, base_offset: int, max_index_size: int = -1, fresh: bool = False):
        self._last_offset = base_offset
        super().__init__(path, base_offset, max_index_size, fresh)
        self._after_entries_changed()

    def _after_entries_changed(self) -> None:
        n, mm = self._entries, self._mm
        self._last_offset = self.base_offset + _I32(mm, (n - 1) * 8)[0] if n and mm is not None else self.base_offset

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when empty."""
        return self._last_offset

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if the file cannot be a valid offset index."""
        if self._length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"Index file {self._path} is corrupt, found {self._length} bytes which is "
                f"not a multiple of {self.ENTRY_SIZE}"
            )
        if self._entries:
            first, last = self.entry(0), self.entry(self._entries - 1)
            if last.offset < self.base_offset or last.offset < first.offset or last.position < first.position:
                raise CorruptIndexError(
                    f"Corrupt index found, index file ({self._path}) has non-zero size but the "
                    f"last entry {last} is before the first entry {first} or the base offset "
                    f"{self.base_offset}"
                )

    def entry(self, n: int) -> OffsetPosition:
        with self._lock:
            if n >= self._entries:
                raise IndexError(
                    f"Attempt to fetch the {n}th entry from index {self._path}, which has size {self._entries}"
                )
            rel, pos = _ENTRY.unpack_from(self._mapped(), n * 8)
        return OffsetPosition(self.base_offset + rel, pos)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= ``target_offset``, or (base_offset, 0) if none."""
        with self._lock:
            if self._entries == 0:
                return OffsetPosition(self.base_offset, 0)
            mm = self._mapped()
            slot = self._largest_lower_bound_slot(mm, target_offset - self.base_offset, _I32, 0)
            if slot < 0:
                return OffsetPosition(self.base_offset, 0)
            rel, pos = _ENTRY.unpack_from(mm, slot * 8)
        return OffsetPosition(self.base_offset + rel, pos)

    def append(self, offset: int, position: int) -> None:
        """Add ``offset -> position``. Raises IndexFullError when full and InvalidOffsetError unless
        ``offset`` is larger than the last entry's."""
        with self._lock:
            n = self._entries
            if n >= self._max_entries:
                raise IndexFullError(f"Attempt to append to a full index (size = {n}) {self._path}")
            if n and offset <= self._last_offset:
                raise InvalidOffsetError(
                    f"Attempt to append an offset ({offset}) to position {n} no larger than "
                    f"the last offset appended ({self._last_offset}) to {self._path}"
                )
            rel = self.relative_offset(offset)
            mm = self._mapped()
            self._ensure_allocated((n + 1) * 8)
            _ENTRY.pack_into(mm, n * 8, rel, position)
            self._entries = n + 1  # published after the bytes are in place
            self._last_offset = offset

    def entries_list(self) -> list[OffsetPosition]:
        """Every entry (tests and tools)."""
        return [self.entry(i) for i in range(self._entries)]


__all__ = ["CorruptIndexError", "IndexFullError", "InvalidOffsetError", "OffsetIndex", "OffsetPosition"]
