"""Storage micro benchmark: UnifiedLog append MB/s (and read/recovery MB/s) for fixed-size batches.

    .venv/bin/python bench/log_append.py
    .venv/bin/python bench/log_append.py --batch-kib 16 --megabytes 512 --segment-mib 64 --dir /tmp

Appends ``--megabytes`` of ``--batch-kib`` KiB uncompressed batches (opaque record bytes, as the log
never decodes records) through ``UnifiedLog.append_as_leader`` with:

* ``stub``: a minimal validator (offsets and epoch stamped in place, no record walk): the cost of the
  log itself (lock, header scan, producer/epoch bookkeeping, roll check, ``os.pwrite``, index entry);
* ``validator``: the real ``LogValidator`` on builder-made batches (``--validator``), i.e. the produce
  path without the network;
* ``idempotent``: the stub with a producer id and sequences (producer-state checks on every append).

Then a sequential ``read`` of everything (FileRecordsSlice + ``read_bytes`` copy) and a crash
recovery (CRC-32C over every batch, indexes rebuilt). No fsync per append (Kafka's default). Single
thread. Not a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pykbroker.log.fetch_data_info import FetchIsolation
from pykbroker.log.log_config import LogConfig
from pykbroker.log.unified_log import UnifiedLog
from pykbroker.record.default_record_batch import HEADER, RecordBatch, crc32c
from pykbroker.utils.time import SystemTime


class _Validated:
    """LogValidator's ValidationResult spelling (ValidationResultLike)."""

    __slots__ = (
        "validated_records",
        "first_offset",
        "last_offset",
        "records_count",
        "log_append_time_ms",
        "max_timestamp_ms",
        "shallow_offset_of_max_timestamp",
    )

    def __init__(self, buffer, first_offset, last_offset, max_timestamp, records_count):
        self.validated_records = buffer
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.records_count = records_count
        self.log_append_time_ms = -1
        self.max_timestamp_ms = max_timestamp
        self.shallow_offset_of_max_timestamp = last_offset


def make_batch(size: int, records: int, producer_id: int = -1, sequence: int = -1) -> bytearray:
    body = os.urandom(size - 61)
    data = bytearray(
        HEADER.pack(
            0,
            size - 12,
            -1,
            2,
            0,
            0,
            records - 1,
            1_700_000_000_000,
            1_700_000_000_000,
            producer_id,
            0 if producer_id >= 0 else -1,
            sequence,
            records,
        )
        + body
    )
    data[17:21] = crc32c(memoryview(data)[21:]).to_bytes(4, "big")
    return data


def stub_validate(records: memoryview, next_offset: int) -> _Validated:
    batch = RecordBatch(records)  # one batch per produce request (v3+)
    batch.set_base_offset(next_offset)
    batch.set_partition_leader_epoch(0)
    last = next_offset + batch.last_offset_delta
    return _Validated(records, next_offset, last, batch.max_timestamp, batch.records_count)


POOL = 256  # distinct source buffers, cycled: like request buffers fresh from the socket (in CPU cache)


def run_appends(log: UnifiedLog, batches: list, validate, n: int) -> float:
    total = 0
    start = time.perf_counter()
    for i in range(n):
        b = batches[i % len(batches)]
        log.append_as_leader(memoryview(b), 0, validate)
        total += len(b)
    return total / (time.perf_counter() - start) / 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-kib", type=int, default=16)
    p.add_argument("--records-per-batch", type=int, default=16)
    p.add_argument("--megabytes", type=int, default=512)
    p.add_argument("--segment-mib", type=int, default=128)
    p.add_argument("--dir", default=None, help="parent directory for the logs (default: system temp)")
    p.add_argument("--validator", action="store_true", help="also run the real LogValidator path")
    args = p.parse_args()

    size = args.batch_kib * 1024
    n = args.megabytes * 1024 * 1024 // size
    root = tempfile.mkdtemp(prefix="pykbroker-bench-", dir=args.dir)
    cfg = LogConfig({"segment.bytes": args.segment_mib << 20})
    clock = SystemTime()
    print(f"{n} batches of {size} bytes ({n * size / 1e6:.0f} MB), segment.bytes={args.segment_mib} MiB, dir={root}")
    try:
        template = make_batch(size, args.records_per_batch)
        batches = [bytearray(template) for _ in range(POOL)]
        log = UnifiedLog.create(os.path.join(root, "bench-0"), cfg, None, clock)
        mbs = run_appends(log, batches, stub_validate, n)
        print(
            f"append stub validator : {mbs:8.1f} MB/s  {mbs * 1e6 / size:9.0f} batches/s  ({log.num_segments} segments)"
        )

        idem = [make_batch(size, args.records_per_batch, 7, 0) for _ in range(POOL)]
        sequence = [0]

        def idempotent_validate(records, next_offset):
            # the next in-order sequence (the CRC is left stale: this log is never recovered)
            struct.pack_into(">i", records, 53, sequence[0])
            sequence[0] += args.records_per_batch
            return stub_validate(records, next_offset)

        log2 = UnifiedLog.create(os.path.join(root, "bench-1"), cfg, None, clock)
        mbs = run_appends(log2, idem, idempotent_validate, n)
        print(f"append idempotent     : {mbs:8.1f} MB/s  {mbs * 1e6 / size:9.0f} batches/s")
        log2.close()

        if args.validator:
            from pykbroker.log.log_validator import LogValidator
            from pykbroker.record.memory_records_builder import MemoryRecordsBuilder

            value = os.urandom(size // args.records_per_batch - 30)
            builder = MemoryRecordsBuilder(0)
            for _ in range(args.records_per_batch):
                builder.append(1_700_000_000_000, None, value)
            built = bytes(builder.build())
            vbatches = [bytearray(built) for _ in range(POOL)]

            def real_validate(records, next_offset):
                records[0:8] = bytes(8)  # a fresh produce request: baseOffset 0 (outside the CRC)
                return LogValidator(
                    records, "bench-2", clock, partition_leader_epoch=0
                ).validate_messages_and_assign_offsets(next_offset)

            log3 = UnifiedLog.create(os.path.join(root, "bench-2"), cfg, None, clock)
            mbs = run_appends(log3, vbatches, real_validate, n)
            print(
                f"append LogValidator   : {mbs:8.1f} MB/s  {mbs * 1e6 / len(built):9.0f} batches/s "
                f"({len(built)} B batches)"
            )
            log3.close()

        log.update_high_watermark(log.log_end_offset)
        start = time.perf_counter()
        offset, total = 0, 0
        while offset < log.log_end_offset:
            info = log.read(offset, 1 << 20, FetchIsolation.HIGH_WATERMARK)
            data = info.records.read_bytes()
            total += len(data)
            offset += (len(data) // size) * args.records_per_batch
        print(f"read (slice+copy)     : {total / (time.perf_counter() - start) / 1e6:8.1f} MB/s")

        start = time.perf_counter()
        flushed = log.log_end_offset
        log.flush()
        print(f"flush (fsync)         : {n * size / (time.perf_counter() - start) / 1e6:8.1f} MB/s")

        del log  # simulate a crash: recover everything from offset 0
        start = time.perf_counter()
        again = UnifiedLog.create(os.path.join(root, "bench-0"), cfg, None, clock, had_clean_shutdown=False)
        elapsed = time.perf_counter() - start
        assert again.log_end_offset == flushed
        print(f"recovery (CRC+index)  : {n * size / elapsed / 1e6:8.1f} MB/s")
        again.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
