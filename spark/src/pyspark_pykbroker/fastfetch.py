"""The batch source's fast path: Fetch v4 straight from the partition leader, record batches
decoded into Arrow columns in bulk.

librdkafka hands Python one ``Message`` object per record and the source then calls five methods on
each; at 100 B records that per-record Python is where a read task spends its time. Here one task
keeps one plaintext connection to the leader and sends Fetch v4 (Kafka's ``FetchRequest``, the
oldest version Kafka 4 still serves, no fetch session) for its single partition; the next Fetch is
in flight while the previous response is decoded. A response's v2 record batches (Kafka's
``DefaultRecordBatch``; uncompressed or gzip) are decoded together: one small Python loop finds
where each record starts (it reads only the length varint), numpy decodes every other field of all
records at once, and keys and values become Arrow ``binary_view`` columns over the response bytes,
cast to ``binary`` by Arrow (no per-record Python objects).

:func:`read_fast` yields ``pyarrow.RecordBatch`` objects in :func:`~pyspark_pykbroker.schema.arrow_schema`
(without headers) and returns the next offset to read. It stops early, returning that offset, at
anything it does not handle (an error code from the leader, a compressed batch other than gzip, an
old message format, a corrupt batch, a connection failure): the caller reads the rest of the range
through librdkafka, which handles leadership changes, data loss and every codec. Control batches
(transaction markers) are skipped; aborted records are returned (``read_uncommitted``, the only
isolation level this path serves). Single-threaded: one instance per read task.
"""

from __future__ import annotations

import gzip
import socket
import struct
from collections import deque
from collections.abc import Callable

import numpy as np

API_FETCH, FETCH_VERSION = 1, 4
CLIENT_ID = b"pykbroker-spark"
_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")  # DefaultRecordBatch header, 61 bytes
_HEADER_SIZE = _BATCH_HEADER.size
_CONTROL, _LOG_APPEND_TIME, _CODEC = 0x20, 0x08, 0x07
_PAD = 16  # zero bytes after the records so fixed-width gathers never read past the end
# Offsets a record's length varint advances by: 1- and 2-byte varints, zigzag-decoded.
_ADV1 = [1 + ((v >> 1) ^ -(v & 1)) for v in range(128)]
_ADV2 = [2 + ((v >> 1) ^ -(v & 1)) for v in range(1 << 14)]

# Client options (after "kafka.") that do not change what this path reads or how it connects.
_HARMLESS = {
    "client.id",
    "group.id",
    "fetch.max.bytes",
    "max.partition.fetch.bytes",
    "queued.max.messages.kbytes",
    "fetch.min.bytes",
    "fetch.wait.max.ms",
    "socket.timeout.ms",
    "request.timeout.ms",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "metadata.max.age.ms",
    "check.crcs",
}


class Unsupported(Exception):
    """Something this path does not decode: the caller reads on through librdkafka."""


def usable(conf: dict, include_headers: bool) -> bool:
    """Whether a read with these client options can use this path: plaintext, read_uncommitted,
    no headers column and no option that changes how librdkafka connects or what it returns."""
    if include_headers:
        return False
    for key, value in conf.items():
        key = key.lower()
        if key == "isolation.level":
            if str(value).lower() != "read_uncommitted":
                return False
        elif key == "security.protocol":
            if str(value).lower() != "plaintext":
                return False
        elif key not in _HARMLESS:
            return False
    return True


class _Connection:
    """One blocking socket to a broker, Fetch v4 requests for one partition (pipelined, answered in order)."""

    def __init__(self, host: str, port: int, topic: str, partition: int, max_bytes: int, timeout: float):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t = topic.encode()
        self.head = struct.pack(">hh", API_FETCH, FETCH_VERSION)
        self.body = (
            struct.pack(">h", len(CLIENT_ID))
            + CLIENT_ID
            + struct.pack(">iiiibih", -1, 500, 1, max_bytes, 0, 1, len(t))
            + t
            + struct.pack(">ii", 1, partition)
        )
        self.max_bytes = max_bytes
        self.pending: deque[int] = deque()
        self.correlation = 0

    def send(self, offset: int) -> None:
        self.correlation += 1
        self.pending.append(self.correlation)
        payload = (
            self.head + struct.pack(">i", self.correlation) + self.body + struct.pack(">qi", offset, self.max_bytes)
        )
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def _read_exact(self, n: int) -> memoryview:
        view = memoryview(bytearray(n))
        got = 0
        while got < n:
            r = self.sock.recv_into(view[got:], n - got)
            if r == 0:
                raise ConnectionError("connection closed by the broker")
            got += r
        return view

    def receive(self) -> tuple[int, int, memoryview]:
        """(error code, high watermark, records bytes) of the oldest outstanding Fetch."""
        (size,) = struct.unpack(">i", self._read_exact(4))
        resp = self._read_exact(size)
        corr, _throttle, topics = struct.unpack_from(">iii", resp, 0)
        if corr != self.pending.popleft() or topics != 1:
            raise Unsupported(f"unexpected Fetch response (correlation id {corr}, {topics} topics)")
        (tlen,) = struct.unpack_from(">h", resp, 12)
        pos = 14 + tlen
        parts, _p, error, high, _lso, aborted = struct.unpack_from(">iihqqi", resp, pos)
        if parts != 1:
            raise Unsupported(f"{parts} partitions in a single-partition Fetch response")
        pos += 30 + max(aborted, 0) * 16
        (rlen,) = struct.unpack_from(">i", resp, pos)
        pos += 4
        return error, high, resp[pos : pos + max(rlen, 0)]

    def close(self) -> None:
        self.sock.close()


def _varints(buf: np.ndarray, pos: np.ndarray, max_width: int) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints starting at every ``pos``: (values int64, widths int64). Raises Unsupported
    for a varint longer than ``max_width`` bytes."""
    value = np.zeros(len(pos), np.int64)
    width = np.zeros(len(pos), np.int64)
    active = np.ones(len(pos), bool)
    for k in range(max_width):
        b = buf[pos + k].astype(np.int64)
        value |= np.where(active, (b & 0x7F) << (7 * k), 0)
        width += active
        active &= b >= 0x80
        if not active.any():
            return (value >> 1) ^ -(value & 1), width
    raise Unsupported("varint too long")


def _binary(pa, buf_arrow, buf: np.ndarray, start: np.ndarray, length: np.ndarray):
    """A ``binary`` Arrow array of ``buf[start:start+length]`` per row (length -1: null), built as a
    ``binary_view`` over ``buf`` and cast by Arrow."""
    n = len(start)
    valid = length >= 0
    ln = np.where(valid, length, 0).astype(np.int32)
    views = np.zeros((n, 4), np.int32)
    raw = views.view(np.uint8)
    views[:, 0] = ln
    small = ln <= 12
    gathered = buf[start[:, None] + np.arange(12)]
    gathered[np.arange(12) >= ln[:, None]] = 0
    raw[small, 4:16] = gathered[small]
    large = ~small
    raw[large, 4:8] = gathered[large, :4]
    views[large, 3] = start[large]
    nulls = n - int(valid.sum())
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    view_array = pa.Array.from_buffers(pa.binary_view(), n, [validity, pa.py_buffer(views), buf_arrow], nulls)
    return view_array.cast(pa.binary())


def _record_starts(data: bytes, begin: int, end: int, count: int, starts: list[int]) -> None:
    pos = begin
    for _ in range(count):
        starts.append(pos)
        b = data[pos]
        if b < 0x80:
            pos += _ADV1[b]
            continue
        c = data[pos + 1]
        if c < 0x80:
            pos += _ADV2[(b & 0x7F) | (c << 7)]
            continue
        value, shift, pos = (b & 0x7F) | ((c & 0x7F) << 7), 14, pos + 2  # records of 8 KiB and more
        while True:
            b = data[pos]
            value |= (b & 0x7F) << shift
            pos += 1
            if b < 0x80:
                break
            shift += 7
            if shift > 28:
                raise Unsupported("record length varint longer than 5 bytes")
        pos += (value >> 1) ^ -(value & 1)
    if pos != end:
        raise Unsupported("records do not fill their batch")


def decode(records: memoryview, start: int, end: int, topic: str, partition: int, prefetch: Callable[[int], None]):
    """Decode the complete v2 batches of one Fetch response's records.

    Returns (Arrow record batch or None, next offset after the last complete batch or None when
    there is none). Only records with ``start <= offset < end`` are kept. ``prefetch(next offset)``
    is called once the batch headers are read, before the records are decoded. Raises Unsupported.
    """
    import pyarrow as pa

    from pyspark_pykbroker.schema import arrow_schema

    parts: list = []
    starts: list[int] = []
    batch_counts, base_offsets, base_times, log_append = [], [], [], []
    pos, size, joined, next_offset = 0, len(records), 0, None
    while pos + _HEADER_SIZE <= size:
        base, length, _epoch, magic, _crc, attrs, last_delta, base_ts, max_ts, _pid, _pe, _seq, count = (
            _BATCH_HEADER.unpack_from(records, pos)
        )
        batch_end = pos + 12 + length
        if batch_end > size:
            break  # a partial batch at the end of the response: fetched again next time
        codec = attrs & _CODEC
        if magic != 2 or codec > 1:
            if next_offset is not None:  # decode the batches before this one; the caller goes on from here
                break
            raise Unsupported(f"message format v{magic}" if magic != 2 else f"compression codec {codec}")
        next_offset = base + last_delta + 1
        if attrs & _CONTROL or count == 0 or next_offset <= start:
            pos = batch_end
            continue
        body = records[pos + _HEADER_SIZE : batch_end]
        if codec == 1:
            body = memoryview(gzip.decompress(body))
        parts.append(body)
        batch_counts.append(count)
        base_offsets.append(base)
        base_times.append(max_ts if attrs & _LOG_APPEND_TIME else base_ts)
        log_append.append(1 if attrs & _LOG_APPEND_TIME else 0)
        joined += len(body)
        pos = batch_end
        if next_offset >= end:
            break
    if next_offset is not None:
        prefetch(next_offset)
    if not parts:
        return None, next_offset
    data = b"".join(parts) + bytes(_PAD)
    at = 0
    for body, count in zip(parts, batch_counts, strict=True):
        _record_starts(data, at, at + len(body), count, starts)
        at += len(body)
    buf = np.frombuffer(data, np.uint8)
    rec = np.array(starts, np.int64)
    counts = np.array(batch_counts)
    length, w = _varints(buf, rec, 5)
    rec_end = rec + w + length
    p = rec + w + 1  # past the length and the attributes byte
    ts_delta, w = _varints(buf, p, 10)
    p += w
    off_delta, w = _varints(buf, p, 5)
    p += w
    key_len, w = _varints(buf, p, 5)
    key_start = p + w
    p = key_start + np.maximum(key_len, 0)
    value_len, w = _varints(buf, p, 5)
    value_start = p + w
    if (value_start + np.maximum(value_len, 0) > rec_end).any() or (key_len < -1).any() or (value_len < -1).any():
        raise Unsupported("a key or value runs past its record")
    offsets = np.repeat(np.array(base_offsets, np.int64), counts) + off_delta
    is_log_append = np.repeat(np.array(log_append, np.int32), counts)
    times = np.repeat(np.array(base_times, np.int64), counts) + np.where(is_log_append == 1, 0, ts_delta)
    keep = (offsets >= start) & (offsets < end)
    if not keep.all():
        offsets, times, is_log_append = offsets[keep], times[keep], is_log_append[keep]
        key_start, key_len, value_start, value_len = key_start[keep], key_len[keep], value_start[keep], value_len[keep]
    n = len(offsets)
    if n == 0:
        return None, next_offset
    buf_arrow = pa.py_buffer(data)
    topic_bytes = topic.encode()
    columns = [
        _binary(pa, buf_arrow, buf, key_start, key_len),
        _binary(pa, buf_arrow, buf, value_start, value_len),
        pa.Array.from_buffers(
            pa.string(),
            n,
            [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * len(topic_bytes)), pa.py_buffer(topic_bytes * n)],
        ),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(np.full(n, partition, np.int32))]),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(offsets)]),
        pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n, [None, pa.py_buffer(times * 1000)]),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(is_log_append)]),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(False)), next_offset


def read_fast(host: str, port: int, topic: str, partition: int, start: int, end: int, max_bytes: int, timeout: float):
    """Yield Arrow batches of ``start <= offset < end`` read from the leader at ``host:port``;
    return the offset the caller goes on from (``>= end`` when done)."""
    offset = start
    try:
        conn = _Connection(host, port, topic, partition, max_bytes, timeout)
    except OSError:
        return offset
    try:
        conn.send(offset)
        requested = offset

        def prefetch(next_offset: int) -> None:
            nonlocal requested
            if next_offset < end and next_offset > requested:
                conn.send(next_offset)
                requested = next_offset

        while offset < end:
            error, _high, records = conn.receive()
            if error:
                return offset
            batch, next_offset = decode(records, offset, end, topic, partition, prefetch)
            if next_offset is None or next_offset <= offset:
                return offset  # nothing complete (a gap, or nothing more yet): librdkafka goes on
            if batch is not None:
                yield batch
            offset = next_offset
        return offset
    except (OSError, Unsupported, struct.error, IndexError):
        return offset
    finally:
        conn.close()
