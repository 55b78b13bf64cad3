"""Record batch micro benchmark: builder records/s, decode records/s, validator MB/s.

    .venv/bin/python bench/record_builder.py
    .venv/bin/python bench/record_builder.py --value-size 100 --batch-records 1000 --seconds 2

Prints, for ``--value-size``-byte values:

* builder: ``MemoryRecordsBuilder.append`` + ``build`` records/s (our producer's hot path), uncompressed
  and per codec, null keys and no headers, then with a 16-byte key and one header;
* decode: ``RecordBatch.records()`` records/s (the consumer's per-record path);
* validator: ``LogValidator.validate_messages_and_assign_offsets`` MB/s (batch bytes on the wire and
  uncompressed) for an
  uncompressed batch (in place, header only), an lz4 batch with ``compression.type=producer``
  (decompress + walk every record, in place), and lz4 -> zstd (re-build).

Single thread; no broker needed. Not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pykbroker.log.log_validator import LogValidator
from pykbroker.record.default_record_batch import RecordBatch
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from pykbroker.utils.time import MockTime

NOW = 1_700_000_000_000


def _rate(fn, seconds: float) -> float:
    """Calls of ``fn`` per second over about ``seconds`` (best of three slices)."""
    best = 0.0
    for _ in range(3):
        calls = 0
        start = time.perf_counter()
        deadline = start + seconds / 3
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= seconds / 3 or time.perf_counter() > deadline:
                break
        best = max(best, calls / elapsed)
    return best


def _build(codec: int, values: list, key: bytes | None, headers) -> bytes:
    builder = MemoryRecordsBuilder(0, codec)
    append = builder.append
    for value in values:
        append(NOW, key, value, headers)
    return builder.build()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--batch-records", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=1.5)
    args = parser.parse_args()
    n, seconds = args.batch_records, args.seconds
    # Distinct values, half random and half repeated bytes: compressible about 2x, like typical payloads.
    half = args.value_size // 2
    values = [(os.urandom(half) + b"x" * args.value_size)[: args.value_size] for _ in range(n)]
    key, headers = b"k" * 16, [("trace-id", b"0123456789abcdef")]

    print(f"value {args.value_size} B, {n} records per batch")
    for label, codec, k, h in (
        ("none", 0, None, None),
        ("none +key+header", 0, key, headers),
        ("gzip", 1, None, None),
        ("snappy", 2, None, None),
        ("lz4", 3, None, None),
        ("zstd", 4, None, None),
    ):
        rate = _rate(lambda codec=codec, k=k, h=h: _build(codec, values, k, h), seconds) * n
        print(f"builder  {label:18s} {rate:12,.0f} records/s")

    for label, codec in (("none", 0), ("lz4", 3)):
        view = memoryview(_build(codec, values, key, headers))
        batch = RecordBatch.at(view)
        rate = _rate(batch.records, seconds) * n
        print(f"decode   {label:18s} {rate:12,.0f} records/s")

    clock = MockTime(current_ms=NOW)
    for label, codec, target in (("none in place", 0, None), ("lz4 same codec", 3, None), ("lz4 -> zstd", 3, 4)):
        data = _build(codec, values, None, None)
        raw_size = len(_build(0, values, None, None))
        buf = bytearray(data)

        def run(buf=buf, data=data, target=target):
            buf[:] = data  # a fresh request buffer, as the network layer hands over
            LogValidator(
                buf, "bench-0", clock, target_compression=target, partition_leader_epoch=1
            ).validate_messages_and_assign_offsets(1000)

        rate = _rate(run, seconds)
        print(
            f"validate {label:18s} {rate * len(data) / 1e6:12,.1f} MB/s on the wire, "
            f"{rate * raw_size / 1e6:,.1f} MB/s uncompressed ({rate * n:,.0f} records/s, batch {len(data):,} B)"
        )


if __name__ == "__main__":
    main()
