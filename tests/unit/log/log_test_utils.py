"""Helpers for storage tests: build magic-2 batches with opaque record bytes, and a validator stub.

The log layer never parses records, so a batch here is a valid 61-byte header (correct length,
magic and CRC-32C over bytes [21:]) followed by ``payload`` bytes standing in for the records.
"""

from __future__ import annotations

from dataclasses import dataclass

from pykbroker.record.default_record_batch import HEADER, RecordBatch, crc32c

TRANSACTIONAL = 0x10
CONTROL = 0x20


def make_batch(
    base_offset: int = 0,
    count: int = 1,
    payload: bytes | int = 16,
    *,
    max_timestamp: int = 1000,
    base_timestamp: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    leader_epoch: int = -1,
    attributes: int = 0,
) -> bytes:
    body = (
        payload
        if isinstance(payload, (bytes, bytearray))
        else bytes(range(256)) * (payload // 256) + bytes(range(payload % 256))
    )
    header = bytearray(
        HEADER.pack(
            base_offset,
            49 + len(body),
            leader_epoch,
            2,
            0,
            attributes,
            count - 1,
            max_timestamp if base_timestamp is None else base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
    )
    data = header + body
    crc = crc32c(memoryview(data)[21:])
    data[17:21] = crc.to_bytes(4, "big")
    return bytes(data)


def batches(start: int, n: int, count: int = 1, payload: int = 16, **kw) -> list[bytes]:
    return [make_batch(start + i * count, count, payload, **kw) for i in range(n)]


@dataclass
class Validated:
    """LogValidator's ValidationResult spelling (ValidationResultLike)."""

    validated_records: bytearray
    first_offset: int
    last_offset: int
    records_count: int
    log_append_time_ms: int
    max_timestamp_ms: int
    shallow_offset_of_max_timestamp: int


def assign_offsets(leader_epoch: int = 0):
    """A stand-in for the LogValidator: assign offsets from ``next_offset`` and stamp the epoch in
    place (both outside the CRC), report the metadata."""

    def validate(records: memoryview, next_offset: int) -> Validated:
        buf = bytearray(records)
        pos, offset = 0, next_offset
        max_ts, off_max, count = -1, next_offset, 0
        while pos < len(buf):
            batch = RecordBatch.at(memoryview(buf), pos)
            batch.set_base_offset(offset)
            batch.set_partition_leader_epoch(leader_epoch)
            if batch.max_timestamp > max_ts:
                max_ts, off_max = batch.max_timestamp, batch.last_offset
            count += batch.records_count
            offset = batch.next_offset
            pos += batch.size_in_bytes
        return Validated(buf, next_offset, offset - 1, count, -1, max_ts, off_max)

    return validate


def inject_enospc(monkeypatch, directory) -> None:
    """Make every write and block allocation on files under ``directory`` fail with ENOSPC, as a full
    disk does (``os.pwrite``/``os.write``/``os.posix_fallocate``); other files are unaffected."""
    import errno
    import os

    root = os.path.realpath(str(directory)) + os.sep

    def full(fd: int) -> bool:
        try:
            return os.readlink(f"/proc/self/fd/{fd}").startswith(root)
        except OSError:
            return False

    def failing(real):
        def call(fd, *args):
            if full(fd):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(fd, *args)

        return call

    for name in ("pwrite", "write", "posix_fallocate"):
        monkeypatch.setattr(os, name, failing(getattr(os, name)))
