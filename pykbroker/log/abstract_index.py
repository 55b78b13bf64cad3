"""The memory-mapped, pre-allocated, sorted index file shared by the offset and time indexes.

Mirrors ``org.apache.kafka.storage.internals.log.AbstractIndex``. An index file is a sequence of
fixed-size big-endian entries sorted by offset (and, for the time index, by timestamp). A new file is
sized to ``max_index_size`` rounded down to a multiple of the entry size and mapped; the number of used
entries is kept in memory; the file is trimmed to ``entries * entry_size`` when its segment is rolled
or closed. A trimmed file re-opened later has exactly its entries.

Disk space: the file is sized like Kafka's (``setLength``, sparse), but its blocks are allocated
(``posix_fallocate``) ahead of the writes, ``ALLOCATION_CHUNK`` bytes at a time, and always before an
entry is written through the mapping. On a full disk creating a segment or appending an entry raises
``OSError(ENOSPC)`` (the log turns it into KAFKA_STORAGE_ERROR and takes the directory offline); a
write into an unallocated block, a SIGBUS that kills the broker, cannot happen. The mapping holds no
file descriptor (see :mod:`pykbroker.log.mapped_buffer`).

An index file left untrimmed by a crash holds zeros after its last entry. Kafka counts those zeros
as entries and relies on log recovery to rebuild the index; we additionally cut the zero tail on load
(real entries are never all-zero past slot 0, see the subclasses), so a lookup never lands there.

Threading model: the owning log's lock serialises every mutation (append, truncate, resize, close).
``_lock`` is held by mutations *and* by lookups, for the few microseconds of a binary search: a
lookup therefore never sees a half-written entry, and a remap/trim/close can never unmap or shrink
memory a lookup is reading (in CPython that would be a SIGBUS, not an exception). Appends write the
entry bytes before publishing the new entry count.
"""

from __future__ import annotations

import os
import struct
import threading

from pykbroker.log.log_file_utils import open_fd
from pykbroker.log.mapped_buffer import MappedBuffer, allocate

_I32 = struct.Struct(">i").unpack_from
ALLOCATION_CHUNK = 64 * 1024  # bytes of index file allocated at a time ahead of the writes


class CorruptIndexError(Exception):
    """An index file failed its sanity check; the segment's indexes must be rebuilt
    (Kafka's ``CorruptIndexException``)."""


class InvalidOffsetError(Exception):
    """An index append was out of order (Kafka's ``InvalidOffsetException``)."""


class IndexFullError(Exception):
    """Append to a full index; the segment should have been rolled."""


class IndexClosedError(ValueError):
    """The index was closed (its segment was deleted or the log closed)."""


def round_down_to_multiple(value: int, factor: int) -> int:
    return factor * (value // factor)


class AbstractIndex:
    """Base of :class:`~pykbroker.log.offset_index.OffsetIndex` and
    :class:`~pykbroker.log.time_index.TimeIndex`. See the module docstring for the threading model."""

    ENTRY_SIZE = 0
    OFFSET_FIELD = 0  # byte position of the 4-byte relative offset inside an entry
    # Slot 0 may legitimately be all zero bytes (time index: timestamp 0 at the base offset).
    ZERO_FIRST_ENTRY_ALLOWED = False

    def __init__(self, path: str, base_offset: int, max_index_size: int = -1, fresh: bool = False):
        """Open (or create) the index at ``path``. A new file -- or a ``fresh`` one made by
        :meth:`create_file` and never used -- is empty, ``max_index_size`` long (rounded down to the entry
        size; only its first blocks allocated). Raises OSError (ENOSPC: the disk is full)."""
        self._lock = threading.Lock()
        self._path = path
        self.base_offset = base_offset
        self._max_index_size = max_index_size
        newly_created = fresh or not os.path.exists(path)
        fd = open_fd(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)
        try:
            length = os.fstat(fd).st_size
            if newly_created and max_index_size > 0:
                length = self._preallocate(fd, max_index_size)
            region = MappedBuffer(fd, length) if length > 0 else None
        finally:
            os.close(fd)  # the mapping keeps no descriptor (see mapped_buffer)
        self._region: MappedBuffer | None = region
        self._mm = region.buf if region is not None else None
        self._length = length
        self._max_entries = length // self.ENTRY_SIZE
        self._entries = 0 if newly_created else self._max_entries
        self._closed = False
        if self._entries:
            self._cut_zero_tail()
        # Bytes known to be backed by allocated blocks: writes through the mapping stay below this.
        self._allocated = min(length, ALLOCATION_CHUNK) if newly_created else self._entries * self.ENTRY_SIZE

    @classmethod
    def _preallocate(cls, fd: int, max_index_size: int) -> int:
        length = round_down_to_multiple(max_index_size, cls.ENTRY_SIZE)
        if os.fstat(fd).st_size != length:
            os.ftruncate(fd, length)
        allocate(fd, 0, min(length, ALLOCATION_CHUNK))
        return length

    @classmethod
    def create_file(cls, path: str, max_index_size: int) -> None:
        """Create an empty index file for a new segment without mapping it (the index is mapped on first
        use, opened with ``fresh=True``): ``max_index_size`` long, its first blocks allocated. Raises
        OSError (ENOSPC: the disk is full, the segment cannot be created)."""
        fd = open_fd(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)
        try:
            if max_index_size > 0:
                cls._preallocate(fd, max_index_size)
        finally:
            os.close(fd)

    def _ensure_allocated(self, end: int) -> None:
        """Allocate the file's blocks up to byte ``end`` (at least ALLOCATION_CHUNK more) before an entry
        is written there through the mapping: on a full disk this raises OSError (ENOSPC) instead of
        the write faulting with SIGBUS. Caller holds ``_lock``."""
        if end <= self._allocated:
            return
        new_end = min(self._length, max(end, self._allocated + ALLOCATION_CHUNK))
        fd = open_fd(self._path, os.O_RDWR | os.O_CLOEXEC)
        try:
            allocate(fd, self._allocated, new_end - self._allocated)
        finally:
            os.close(fd)
        self._allocated = new_end

    # -- properties ---------------------------------------------------------------------------
    @property
    def path(self) -> str:
        return self._path

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def max_index_size(self) -> int:
        return self._max_index_size

    @property
    def length(self) -> int:
        """The file's current (mapped) length in bytes."""
        return self._length

    def size_in_bytes(self) -> int:
        return self._entries * self.ENTRY_SIZE

    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    def relative_offset(self, offset: int) -> int:
        """``offset - base_offset``; raises IndexError if it does not fit an int32 >= 0."""
        rel = offset - self.base_offset
        if rel < 0 or rel > 0x7FFFFFFF:
            raise IndexError(f"Offset {offset} is not representable relative to base offset {self.base_offset}")
        return rel

    # -- subclass hooks -----------------------------------------------------------------------
    def _slot_is_zero(self, mm, slot: int) -> bool:
        start = slot * self.ENTRY_SIZE
        return mm[start : start + self.ENTRY_SIZE].count(0) == self.ENTRY_SIZE

    def _after_entries_changed(self) -> None:
        """Refresh cached last-entry state (called under ``_lock``)."""

    def sanity_check(self) -> None:
        raise NotImplementedError

    # -- structure ----------------------------------------------------------------------------
    def _cut_zero_tail(self) -> None:
        mm, n = self._mm, self._entries
        if mm is None or not self._slot_is_zero(mm, n - 1):
            return
        lo = 1 if self.ZERO_FIRST_ENTRY_ALLOWED else 0
        if n - 1 < lo:
            return
        hi = n - 1  # first zero slot is in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            if self._slot_is_zero(mm, mid):
                hi = mid
            else:
                lo = mid + 1
        self._entries = lo

    def _mapped(self):
        mm = self._mm
        if mm is None:
            if self._closed:
                raise IndexClosedError(f"Index {self._path} is closed")
            raise IndexFullError(f"Index {self._path} has no space (length {self._length})")
        return mm

    def resize(self, new_size: int) -> bool:
        """Re-map the file at ``new_size`` rounded down to the entry size (never below the used
        entries). Returns False if the size was already right."""
        with self._lock:
            if self._closed:
                raise IndexClosedError(f"Index {self._path} is closed")
            rounded = max(round_down_to_multiple(new_size, self.ENTRY_SIZE), self._entries * self.ENTRY_SIZE)
            if rounded == self._length:
                return False
            old = self._region
            self._region = self._mm = None
            if old is not None:
                old.close()
            os.truncate(self._path, rounded)
            if rounded > 0:
                fd = open_fd(self._path, os.O_RDWR | os.O_CLOEXEC)
                try:
                    self._region = MappedBuffer(fd, rounded)
                    self._mm = self._region.buf
                finally:
                    os.close(fd)
            self._allocated = min(self._allocated, rounded)
            self._length = rounded
            self._max_entries = rounded // self.ENTRY_SIZE
            return True

    def trim_to_valid_size(self) -> None:
        """Shrink the file to exactly the used entries (on roll and close)."""
        self.resize(self._entries * self.ENTRY_SIZE)

    def _truncate_to_entries(self, entries: int) -> None:
        """Forget entries from ``entries`` on (caller holds ``_lock``). The bytes stay until
        overwritten; the file length is unchanged."""
        self._entries = max(0, min(entries, self._entries))
        self._after_entries_changed()

    def truncate(self) -> None:
        """Remove every entry."""
        with self._lock:
            self._truncate_to_entries(0)

    def reset(self) -> None:
        """Remove every entry and re-allocate the full ``max_index_size`` (before a rebuild)."""
        self.truncate()
        self.resize(self._max_index_size)

    def flush(self) -> None:
        with self._lock:
            if self._region is not None:
                self._region.flush()

    def close_handler(self) -> None:
        """Unmap without trimming."""
        with self._lock:
            region, self._region, self._mm = self._region, None, None
            self._closed = True
            if region is not None:
                region.close()

    def close(self) -> None:
        """Trim to the used entries and unmap."""
        if not self._closed:
            self.trim_to_valid_size()
        self.close_handler()

    def delete_if_exists(self) -> bool:
        self.close_handler()
        try:
            os.unlink(self._path)
            return True
        except FileNotFoundError:
            return False

    def rename_to(self, path: str) -> None:
        try:
            os.replace(self._path, path)
        finally:
            self._path = path

    def update_parent_dir(self, parent: str) -> None:
        self._path = os.path.join(parent, os.path.basename(self._path))

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset`` (entries are sorted by offset in both indexes)."""
        with self._lock:
            if self._entries == 0:
                return
            mm = self._mapped()
            rel = offset - self.base_offset
            slot = self._largest_lower_bound_slot(mm, rel, _I32, self.OFFSET_FIELD)
            if slot < 0:
                new_entries = 0
            elif _I32(mm, slot * self.ENTRY_SIZE + self.OFFSET_FIELD)[0] == rel:
                new_entries = slot
            else:
                new_entries = slot + 1
            self._truncate_to_entries(new_entries)

    def _largest_lower_bound_slot(self, mm, target: int, unpack, field_offset: int) -> int:
        """Largest slot whose key (``unpack(mm, slot*ENTRY_SIZE + field_offset)``) is <= target, or
        -1 (caller holds ``_lock``)."""
        n = self._entries
        if n == 0:
            return -1
        size = self.ENTRY_SIZE
        if unpack(mm, field_offset)[0] > target:
            return -1
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(mm, mid * size + field_offset)[0] <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self._path}, base_offset={self.base_offset}, entries={self._entries}, "
            f"max_entries={self._max_entries})"
        )
