"""Helpers for record tests: hand-made batches (for headers a builder would never write) and CRC fixing."""

from __future__ import annotations

import struct

import crc32c

from pykbroker.record import compression
from pykbroker.record.default_record import encode_record
from pykbroker.record.default_record_batch import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER, RECORDS_OFFSET

NOW = 1_700_000_000_000


def fix_crc(buf: bytearray) -> bytearray:
    """Recompute the CRC of the single batch in ``buf`` (after tampering with covered bytes)."""
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c.crc32c(bytes(buf[ATTRIBUTES_OFFSET:])))
    return buf


def raw_batch(
    records: bytes,
    count: int,
    *,
    last_offset_delta: int | None = None,
    codec: int = 0,
    extra_attributes: int = 0,
    base_offset: int = 0,
    base_timestamp: int = NOW,
    max_timestamp: int = NOW,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    leader_epoch: int = -1,
    magic: int = 2,
) -> bytearray:
    """A batch around an arbitrary records section (compressed here when ``codec`` != 0)."""
    payload = compression.for_id(codec).compress(records) if codec else records
    header = HEADER.pack(
        base_offset,
        RECORDS_OFFSET - 12 + len(payload),
        leader_epoch,
        magic,
        0,
        codec | extra_attributes,
        count - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    return fix_crc(bytearray(header + payload))


def records_section(*specs) -> bytes:
    """Records from ``(offset_delta, timestamp_delta, key, value[, headers])`` tuples."""
    return b"".join(encode_record(*spec) for spec in specs)
