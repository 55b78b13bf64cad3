"""Raft batches as record batches v2: the one encoding of the metadata log, snapshots and Fetch records.

Each :class:`~pykbroker.raft.replicated_log.LogBatch` is one uncompressed record batch v2 with
``partitionLeaderEpoch`` = the Raft epoch and the control attribute for control batches (Kafka's
``MemoryRecords`` as written by ``KafkaMetadataLog`` and ``RecordsSnapshotWriter``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from pykbroker.raft.replicated_log import LogBatch, LogRecord
from pykbroker.record.control_record import ControlRecordType
from pykbroker.record.memory_records import MemoryRecords
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder


def encode_log_batches(batches: Sequence[LogBatch], default_time_ms: int) -> bytes:
    """``batches`` as record batches v2 (uncompressed; ``partitionLeaderEpoch`` = the Raft epoch, the
    control attribute for control batches; ``default_time_ms`` for batches without an append time)."""
    buf = bytearray()
    for b in batches:
        builder = MemoryRecordsBuilder(
            base_offset=b.base_offset, is_control_batch=b.control, partition_leader_epoch=b.epoch
        )
        fill_builder(builder, b.records, b.control, b.append_time_ms if b.append_time_ms >= 0 else default_time_ms)
        buf += builder.build()
    return bytes(buf)


def decode_log_batches(raw: bytes) -> Iterator[LogBatch]:
    """The whole record batches in ``raw`` (CRC-checked as they are reached) as :class:`LogBatch` values."""
    for batch in MemoryRecords(raw).batches():
        records = tuple(LogRecord(r.key, r.value) for r in batch.records(verify_crc=True))
        yield LogBatch(
            batch.base_offset, batch.partition_leader_epoch, records, batch.is_control_batch, batch.max_timestamp
        )


def fill_builder(builder: MemoryRecordsBuilder, records: Sequence[LogRecord], control: bool, timestamp: int) -> None:
    """Append ``records`` at consecutive offsets (control records keep their type from the key)."""
    for r in records:
        if control:
            builder.append_control_record(timestamp, ControlRecordType.parse(r.key), r.value)
        else:
            builder.append(timestamp, r.key, r.value)
