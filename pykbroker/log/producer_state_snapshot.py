"""The ``<offset>.snapshot`` file: producer state as of an offset.

Kafka writes these with its own schema; pykbroker uses this simpler binary format (big-endian)::

    magic      4 bytes  b"PKPS"
    version    int16    1
    crc        uint32   CRC-32C of everything after this field
    count      int32    number of producers
    per producer:
      producer_id int64, producer_epoch int16, coordinator_epoch int32, last_timestamp int64,
      txn_first_offset int64 (-1: none), batches int8 (<= 5), then per batch:
        last_seq int32, last_offset int64, offset_delta int32, timestamp int64

All retained batches are stored (Kafka keeps only the last one), so duplicate detection survives a
restart. A file that fails its magic, version, length or CRC check raises CorruptSnapshotError.
"""

from __future__ import annotations

import struct

from pykbroker.log.producer_state_entry import BatchMetadata, ProducerStateEntry
from pykbroker.record.default_record_batch import crc32c
from pykbroker.utils.files import atomic_write

MAGIC = b"PKPS"
VERSION = 1
_HEADER = struct.Struct(">4shI")
_COUNT = struct.Struct(">i")
_PRODUCER = struct.Struct(">qhiqqb")
_BATCH = struct.Struct(">iqiq")


class CorruptSnapshotError(Exception):
    """A producer snapshot file is unreadable; it is deleted and an older one is tried."""


def encode(entries: list[ProducerStateEntry]) -> bytes:
    body = bytearray(_COUNT.pack(len(entries)))
    for e in entries:
        batches = list(e.batch_metadata)
        txn = -1 if e.current_txn_first_offset is None else e.current_txn_first_offset
        body += _PRODUCER.pack(
            e.producer_id, e.producer_epoch, e.coordinator_epoch, e.last_timestamp, txn, len(batches)
        )
        for b in batches:
            body += _BATCH.pack(b.last_seq, b.last_offset, b.offset_delta, b.timestamp)
    return _HEADER.pack(MAGIC, VERSION, crc32c(body)) + bytes(body)


def decode(data: bytes, path: str = "<memory>") -> list[ProducerStateEntry]:
    if len(data) < _HEADER.size + _COUNT.size:
        raise CorruptSnapshotError(f"Snapshot {path} is too short ({len(data)} bytes)")
    magic, version, crc = _HEADER.unpack_from(data, 0)
    if magic != MAGIC or version != VERSION:
        raise CorruptSnapshotError(f"Snapshot {path} has magic {magic!r} version {version}")
    body = memoryview(data)[_HEADER.size :]
    if crc32c(body) != crc:
        raise CorruptSnapshotError(f"Snapshot {path} failed its CRC check")
    try:
        (count,) = _COUNT.unpack_from(body, 0)
        pos = _COUNT.size
        entries = []
        for _ in range(count):
            pid, epoch, coord_epoch, last_ts, txn, nbatches = _PRODUCER.unpack_from(body, pos)
            pos += _PRODUCER.size
            batches = []
            for _ in range(nbatches):
                batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                pos += _BATCH.size
            entries.append(ProducerStateEntry(pid, epoch, coord_epoch, last_ts, None if txn < 0 else txn, batches))
    except struct.error as e:
        raise CorruptSnapshotError(f"Snapshot {path} is truncated: {e}") from e
    if pos != len(body):
        raise CorruptSnapshotError(f"Snapshot {path} has {len(body) - pos} trailing bytes")
    return entries


def write_snapshot(path: str, entries: list[ProducerStateEntry], sync: bool) -> None:
    """Write atomically (temp file + rename); fsync file and directory when ``sync``."""
    atomic_write(path, encode(entries), sync)


def read_snapshot(path: str) -> list[ProducerStateEntry]:
    with open(path, "rb") as f:
        return decode(f.read(), path)
