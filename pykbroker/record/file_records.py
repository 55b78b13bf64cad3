"""Record batches in a segment file: appends, header scans and zero-copy slices.

Mirrors ``org.apache.kafka.common.record.FileRecords`` (plus ``FileLogInputStream``'s header-only
batches and ``FileRecords.FileChannelRecordBatch``'s lazily read data).

Theory of operation
-------------------
A :class:`FileRecords` owns the ``.log`` file of one segment. Bytes are written with positional
``os.pwrite`` at the tracked end, so they are handed to the OS before ``append`` returns; nothing is
fsynced until :meth:`FileRecords.flush`. The logical size lives in memory (``size_in_bytes``) and is
published only after the bytes are written, so a concurrent reader never sees a position it cannot
read.

The file descriptor lives in a :class:`_FileHandle` shared by the ``FileRecords`` and every
:class:`FileRecordsSlice` cut from it; the descriptor is closed when the last of them is dropped.
So a fetch response that is being sent with ``os.sendfile`` keeps working after the segment is
closed, renamed or deleted by retention (unlinked data stays readable through an open descriptor).

Scanning reads batch headers with ``os.pread`` into small chunks and never loads a whole file;
:meth:`FileRecords.batches_with_data_from` (recovery) reads whole batches in ~1 MiB chunks so the
CRC-32C can be checked.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import NamedTuple

from pykbroker.protocol.errors import CorruptRecordError
from pykbroker.record.default_record_batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CURRENT_MAGIC,
    HEADER,
    LOG_OVERHEAD,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL_FLAG_MASK,
    crc32c,
)

_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD  # smallest valid batchLength field (49)
_SCAN_CHUNK = 8192  # header scans: one pread covers many small batches
_DATA_CHUNK = 1 << 20  # recovery: whole batches, CRC-checked

NO_TIMESTAMP = -1


class FileRecordsTruncatedError(OSError):
    """The file shrank under a slice that was being sent (Kafka: "Size of FileRecords ... has been
    truncated during write"). The network layer should close the connection."""


class LogOffsetPosition(NamedTuple):
    """Where a batch lives: ``offset`` is the batch's LAST offset, ``position`` its byte position in
    the file, ``size`` its size in bytes (Kafka's ``FileRecords.LogOffsetPosition``)."""

    offset: int
    position: int
    size: int


class TimestampAndOffset(NamedTuple):
    """A (timestamp ms, offset, leader epoch or None) answer for ListOffsets."""

    timestamp: int
    offset: int
    leader_epoch: int | None = None


class BatchHeader:
    """The parsed 61-byte header of one magic-2 batch at ``position`` in a file or buffer.

    A plain value object (per batch, never per record); CRC is *not* checked here.
    """

    __slots__ = (
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "batch_length",
        "crc",
        "last_offset_delta",
        "magic",
        "max_timestamp",
        "partition_leader_epoch",
        "position",
        "producer_epoch",
        "producer_id",
        "records_count",
    )

    def __init__(self, position: int, fields: tuple):
        self.position = position
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.records_count,
        ) = fields

    @classmethod
    def parse(cls, buf, offset: int, position: int) -> BatchHeader:
        """Parse the header at ``buf[offset:offset+61]``; raise CorruptRecordError on a bad magic."""
        fields = HEADER.unpack_from(buf, offset)
        if fields[3] != CURRENT_MAGIC:
            raise CorruptRecordError(
                f"Record batch at position {position} has magic {fields[3]}, only magic 2 is supported"
            )
        return cls(position, fields)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control_batch(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def compression_type(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    def __repr__(self) -> str:
        return (
            f"BatchHeader(position={self.position}, base_offset={self.base_offset}, "
            f"last_offset={self.last_offset}, size={self.size_in_bytes}, max_timestamp={self.max_timestamp})"
        )


def _check_length(length: int, position: int) -> None:
    if length < _MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"Record batch at position {position} has size {length + LOG_OVERHEAD}, "
            f"smaller than the minimum {RECORD_BATCH_OVERHEAD}"
        )


def iter_batch_headers(buf, position: int = 0, end: int | None = None) -> Iterator[BatchHeader]:
    """Yield the header of every complete batch in ``buf[position:end]`` (an in-memory buffer, e.g.
    validated produce data). Stops at a trailing partial batch; raises CorruptRecordError on a bad
    length or magic. ``BatchHeader.position`` is relative to ``buf``."""
    end = len(buf) if end is None else end
    while end - position >= RECORD_BATCH_OVERHEAD:
        _, length = _PREFIX.unpack_from(buf, position)
        _check_length(length, position)
        size = length + LOG_OVERHEAD
        if position + size > end:
            return
        yield BatchHeader.parse(buf, position, position)
        position += size


def verify_crc(header: BatchHeader, data) -> None:
    """Raise CorruptRecordError unless the CRC-32C of ``data[21:]`` (one whole batch) matches."""
    computed = crc32c(memoryview(data)[ATTRIBUTES_OFFSET:])
    if computed != header.crc:
        raise CorruptRecordError(
            f"Record batch at position {header.position} is corrupt (stored crc = "
            f"{header.crc}, computed crc = {computed})"
        )


class _FileHandle:
    """One open descriptor, shared by a FileRecords and its slices; closed when the last one drops
    it (CPython reference counting makes that immediate)."""

    __slots__ = ("fd",)

    def __init__(self, fd: int):
        self.fd = fd

    def __del__(self):
        fd, self.fd = self.fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass


def _pread_fully(fd: int, size: int, position: int) -> bytes:
    data = os.pread(fd, size, position)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, position + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


class FileRecordsSlice:
    """A zero-copy region ``[position, position + size_in_bytes)`` of a segment file: the records of
    a fetch response (Kafka's ``FileRecords.slice``).

    ``write_to`` sends with ``os.sendfile``; ``read_bytes`` copies into memory for callers that need
    the bytes (tests, internal readers). Holds the file descriptor, so it stays valid after the
    segment is closed or deleted. Immutable; safe to share between threads.
    """

    __slots__ = ("_handle", "path", "position", "size_in_bytes")

    def __init__(self, handle: _FileHandle, position: int, size: int, path: str):
        self._handle = handle
        self.position = position
        self.size_in_bytes = size
        self.path = path

    def __len__(self) -> int:
        return self.size_in_bytes

    def write_to(self, sock, offset: int, max_bytes: int) -> int:
        """Send up to ``max_bytes`` bytes starting ``offset`` bytes into the slice to ``sock`` (a
        non-blocking socket). Returns bytes sent; 0 when the socket would block (call again when it is
        writable) or nothing is left. Raises FileRecordsTruncatedError if the file shrank."""
        count = min(self.size_in_bytes - offset, max_bytes)
        if count <= 0:
            return 0
        try:
            sent = os.sendfile(sock.fileno(), self._handle.fd, self.position + offset, count)
        except BlockingIOError:
            return 0
        if sent == 0:
            raise FileRecordsTruncatedError(
                f"{self.path} was truncated below position {self.position + offset} during a send"
            )
        return sent

    def read_bytes(self) -> bytes:
        """The slice's bytes, read with ``os.pread`` (possibly fewer if the file was truncated)."""
        if self.size_in_bytes == 0:
            return b""
        return _pread_fully(self._handle.fd, self.size_in_bytes, self.position)

    def batch_headers(self) -> Iterator[BatchHeader]:
        """The header of every complete batch in the slice (one 61-byte ``pread`` per batch, never the records;
        ``BatchHeader.position`` relative to the slice). Stops at a trailing partial batch."""
        position, end = 0, self.size_in_bytes
        while end - position >= RECORD_BATCH_OVERHEAD:
            head = os.pread(self._handle.fd, RECORD_BATCH_OVERHEAD, self.position + position)
            if len(head) < RECORD_BATCH_OVERHEAD:
                return
            _, length = _PREFIX.unpack_from(head, 0)
            _check_length(length, position)
            if position + length + LOG_OVERHEAD > end:
                return
            yield BatchHeader.parse(head, 0, position)
            position += length + LOG_OVERHEAD

    def prefix(self, size: int) -> FileRecordsSlice:
        """The first ``size`` bytes of the slice (zero-copy)."""
        return FileRecordsSlice(self._handle, self.position, min(size, self.size_in_bytes), self.path)

    def __repr__(self) -> str:
        return f"FileRecordsSlice({self.path}, position={self.position}, size={self.size_in_bytes})"


class MemoryRecordsSlice:
    """The in-memory counterpart of :class:`FileRecordsSlice` (same ``size_in_bytes`` /
    ``write_to`` / ``read_bytes`` interface), e.g. the empty records of an empty fetch."""

    __slots__ = ("_data", "size_in_bytes")

    def __init__(self, data: bytes | bytearray | memoryview = b""):
        self._data = memoryview(data)
        self.size_in_bytes = len(self._data)

    def __len__(self) -> int:
        return self.size_in_bytes

    def write_to(self, sock, offset: int, max_bytes: int) -> int:
        count = min(self.size_in_bytes - offset, max_bytes)
        if count <= 0:
            return 0
        try:
            return sock.send(self._data[offset : offset + count])
        except BlockingIOError:
            return 0

    def read_bytes(self) -> bytes:
        return bytes(self._data)

    def batch_headers(self) -> Iterator[BatchHeader]:
        """The header of every complete batch (see :meth:`FileRecordsSlice.batch_headers`)."""
        return iter_batch_headers(self._data)

    def prefix(self, size: int) -> MemoryRecordsSlice:
        """The first ``size`` bytes (zero-copy)."""
        return MemoryRecordsSlice(self._data[:size])

    def __repr__(self) -> str:
        return f"MemoryRecordsSlice(size={self.size_in_bytes})"


EMPTY_RECORDS = MemoryRecordsSlice(b"")


class FileRecords:
    """The ``.log`` file of one segment (Kafka's ``FileRecords``).

    Threading: ``append``, ``truncate_to``, ``trim``, ``rename_to`` and ``close`` are called under the
    owning log's lock (one writer). Reads (``slice``, ``read``, the scans) may run concurrently on any
    thread: they use positional reads and the size published after each write. ``flush`` may run
    concurrently with appends (fsync is thread-safe).
    """

    def __init__(self, path: str, handle: _FileHandle, size: int):
        self._path = path
        self._handle: _FileHandle | None = handle
        self._size = size
        # True until a flush follows the last write (an existing file opened counts as written): ``close`` skips
        # its fsync when nothing changed since the last one (a shutdown's ``log.flush`` then ``close`` synced
        # every segment twice, and each new empty log's segment once: 5,000 fsyncs for 5,000 new partitions)
        self._unflushed = True

    # -- lifecycle ---------------------------------------------------------------------------
    @classmethod
    def open(
        cls, path: str, file_already_exists: bool = False, init_file_size: int = 0, preallocate: bool = False
    ) -> FileRecords:
        """Open (creating unless ``file_already_exists``) the file at ``path``. With ``preallocate``
        a new file is allocated to ``init_file_size`` bytes and the logical size starts at 0."""
        flags = os.O_RDWR | os.O_CLOEXEC | (0 if file_already_exists else os.O_CREAT)
        fd = os.open(path, flags, 0o644)
        try:
            if preallocate and not file_already_exists and init_file_size > 0:
                try:
                    os.posix_fallocate(fd, 0, init_file_size)
                except OSError:
                    os.ftruncate(fd, init_file_size)
                size = 0
            else:
                size = os.fstat(fd).st_size
        except BaseException:
            os.close(fd)
            raise
        records = cls(path, _FileHandle(fd), size)
        # a file created empty holds no data to sync (its directory entry is the creator's to fsync: a log's
        # directory is synced after its creation); preallocated space is trimmed away at close anyway
        records._unflushed = file_already_exists or size > 0
        return records

    @property
    def path(self) -> str:
        return self._path

    @property
    def size_in_bytes(self) -> int:
        return self._size

    def _open_handle(self) -> _FileHandle:
        """The shared handle; callers keep this reference (not just ``.fd``) for as long as they use
        the descriptor, so a concurrent close cannot close it under them (or let its number be reused)."""
        handle = self._handle
        if handle is None:
            raise ValueError(f"FileRecords {self._path} is closed")
        return handle

    @property
    def closed(self) -> bool:
        return self._handle is None

    def flush(self) -> None:
        """fsync the file (data and metadata)."""
        handle = self._open_handle()
        self._unflushed = False  # cleared first: a write racing this fsync sets it again
        try:
            os.fsync(handle.fd)
        except BaseException:
            self._unflushed = True
            raise

    def close(self) -> None:
        """Flush (unless nothing was written since the last flush), trim preallocated space and release the
        descriptor (slices keep it open)."""
        if self._handle is None:
            return
        if self._unflushed:
            self.flush()
        self.trim()
        self._handle = None

    def close_handlers(self) -> None:
        """Release the descriptor without flushing (before a delete)."""
        self._handle = None

    def delete_if_exists(self) -> bool:
        self.close_handlers()
        try:
            os.unlink(self._path)
            return True
        except FileNotFoundError:
            return False

    def rename_to(self, path: str) -> None:
        """Rename the file; the open descriptor stays valid."""
        try:
            os.replace(self._path, path)
        finally:
            self._path = path

    def update_parent_dir(self, parent: str) -> None:
        self._path = os.path.join(parent, os.path.basename(self._path))

    def last_modified_ms(self) -> int:
        return os.stat(self._path).st_mtime_ns // 1_000_000

    # -- writes ------------------------------------------------------------------------------
    def append(self, data) -> int:
        """Write ``data`` (bytes-like, whole batches) at the end of the file. Returns the bytes
        written. The OS has the bytes on return; no fsync."""
        handle = self._open_handle()
        fd = handle.fd
        mv = data if isinstance(data, memoryview) else memoryview(data)
        total = len(mv)
        position = self._size
        written = os.pwrite(fd, mv, position)
        while written < total:  # regular files write fully unless interrupted or out of space
            n = os.pwrite(fd, mv[written:], position + written)
            if n == 0:
                raise OSError(f"pwrite made no progress on {self._path}")
            written += n
        self._unflushed = True
        self._size = position + total
        return total

    def truncate_to(self, target_size: int) -> int:
        """Drop everything from ``target_size`` on. Returns the number of bytes removed."""
        original = self._size
        if target_size > original or target_size < 0:
            raise ValueError(f"Attempt to truncate {self._path} to {target_size} bytes failed: size is {original}")
        handle = self._open_handle()
        if target_size < os.fstat(handle.fd).st_size:
            os.ftruncate(handle.fd, target_size)
        self._unflushed = True
        self._size = target_size
        return original - target_size

    def trim(self) -> None:
        """Cut preallocated space beyond the logical size (no-op when there is none)."""
        handle = self._handle
        if handle is not None and os.fstat(handle.fd).st_size > self._size:
            os.ftruncate(handle.fd, self._size)

    # -- reads -------------------------------------------------------------------------------
    def read(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``position`` (an in-memory copy)."""
        size = max(0, min(size, self._size - position))
        handle = self._open_handle()
        return _pread_fully(handle.fd, size, position) if size else b""

    def slice(self, position: int, size: int) -> FileRecordsSlice:
        """A zero-copy view of ``[position, position + size)``, clipped to the current size."""
        current = self._size
        if position < 0 or position > current:
            raise ValueError(f"Slice position {position} is outside [0, {current}] in {self._path}")
        if size < 0:
            raise ValueError(f"Invalid slice size {size}")
        handle = self._handle
        if handle is None:
            raise ValueError(f"FileRecords {self._path} is closed")
        return FileRecordsSlice(handle, position, min(size, current - position), self._path)

    def batches_from(self, start: int = 0, end: int | None = None) -> Iterator[BatchHeader]:
        """Headers of the complete batches in ``[start, end)`` (default: to the current size), read
        in small chunks with pread. Stops at a torn tail; raises CorruptRecordError on an impossible
        length or a bad magic."""
        handle = self._open_handle()  # held by this generator while it runs
        fd = handle.fd
        end = self._size if end is None else min(end, self._size)
        position = start
        chunk = b""
        chunk_start = 0
        while end - position >= RECORD_BATCH_OVERHEAD:
            off = position - chunk_start
            if off < 0 or off + RECORD_BATCH_OVERHEAD > len(chunk):
                chunk = os.pread(fd, min(_SCAN_CHUNK, end - position), position)
                chunk_start, off = position, 0
                if len(chunk) < RECORD_BATCH_OVERHEAD:
                    return  # the file was truncated under us
            _, length = _PREFIX.unpack_from(chunk, off)
            _check_length(length, position)
            size = length + LOG_OVERHEAD
            if position + size > end:
                return
            yield BatchHeader.parse(chunk, off, position)
            position += size

    def batches_with_data_from(
        self, start: int = 0, max_batch_size: int | None = None
    ) -> Iterator[tuple[BatchHeader, memoryview]]:
        """``(header, whole batch bytes)`` for each complete batch from ``start``, reading ~1 MiB at a
        time (recovery, CRC checks). Stops at a torn tail; raises CorruptRecordError on a bad length or
        magic, or a batch larger than ``max_batch_size`` when that is given."""
        handle = self._open_handle()  # held by this generator while it runs
        fd = handle.fd
        end = self._size
        position = start
        want = _DATA_CHUNK
        while end - position >= RECORD_BATCH_OVERHEAD:
            requested = min(want, end - position)
            data = memoryview(_pread_fully(fd, requested, position))
            n = len(data)
            if n < requested:  # the file shrank under us: what we read is all there is
                end = position + n
            want = _DATA_CHUNK
            off = 0
            while n - off >= RECORD_BATCH_OVERHEAD:
                _, length = _PREFIX.unpack_from(data, off)
                _check_length(length, position + off)
                size = length + LOG_OVERHEAD
                if max_batch_size is not None and size > max_batch_size:
                    raise CorruptRecordError(
                        f"Record batch at position {position + off} has size {size}, "
                        f"larger than the maximum {max_batch_size}"
                    )
                if position + off + size > end:
                    return
                if off + size > n:
                    want = max(_DATA_CHUNK, size)
                    break
                yield BatchHeader.parse(data, off, position + off), data[off : off + size]
                off += size
            if n < RECORD_BATCH_OVERHEAD:
                return
            position += off

    def search_for_offset_with_size(self, target_offset: int, starting_position: int) -> LogOffsetPosition | None:
        """The first batch at or after ``starting_position`` whose last offset is >= ``target_offset``
        (so the batch containing it), or None if there is none."""
        for batch in self.batches_from(starting_position):
            if batch.last_offset >= target_offset:
                return LogOffsetPosition(batch.last_offset, batch.position, batch.size_in_bytes)
        return None

    def search_for_timestamp(
        self, target_timestamp: int, starting_position: int, starting_offset: int
    ) -> TimestampAndOffset | None:
        """Batch-granular timestamp search: the first batch from ``starting_position`` with
        ``max_timestamp >= target_timestamp`` and last offset >= ``starting_offset``, answered as
        (its max timestamp, max(base offset, starting_offset), its leader epoch). Callers that can
        decode records may refine the offset inside that batch."""
        for batch in self.batches_from(starting_position):
            if batch.max_timestamp >= target_timestamp and batch.last_offset >= starting_offset:
                epoch = batch.partition_leader_epoch
                return TimestampAndOffset(
                    batch.max_timestamp, max(batch.base_offset, starting_offset), epoch if epoch >= 0 else None
                )
        return None

    def largest_timestamp_after(self, starting_position: int) -> TimestampAndOffset:
        """The largest batch max timestamp after ``starting_position`` and the last offset of the
        (first) batch holding it; (-1, -1) if none."""
        max_ts, offset = NO_TIMESTAMP, -1
        for batch in self.batches_from(starting_position):
            if batch.max_timestamp > max_ts:
                max_ts, offset = batch.max_timestamp, batch.last_offset
        return TimestampAndOffset(max_ts, offset)

    def __repr__(self) -> str:
        return f"FileRecords({self._path}, size={self._size})"
