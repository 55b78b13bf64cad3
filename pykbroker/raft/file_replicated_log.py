"""FileReplicatedLog: the Raft log on disk, ``<metadata.log.dir>/__cluster_metadata-0/`` (Kafka's
``KafkaMetadataLog``).

An adapter from :class:`~pykbroker.raft.replicated_log.ReplicatedLog` to
:class:`~pykbroker.log.unified_log.UnifiedLog`: each :class:`LogBatch` is one record batch v2 (no
compression) with ``partitionLeaderEpoch`` = the Raft epoch and the control attribute for control batches,
so the metadata log is byte-compatible with Kafka's and readable with ``kafka-dump-log``. The metadata log
never expires data by time or size (``retention.ms``/``retention.bytes`` = -1); snapshots, which would allow
cleaning it, are not implemented yet.

Threading: as ReplicatedLog - the Raft IO thread writes; ``end_offset``/``high_watermark`` may be read from
any thread (UnifiedLog publishes them without locks).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pykbroker.log.fetch_data_info import FetchIsolation
from pykbroker.log.log_config import LogConfig
from pykbroker.log.producer_state_entry import AppendOrigin
from pykbroker.log.unified_log import UnifiedLog
from pykbroker.raft.replicated_log import (
    METADATA_PARTITION,
    METADATA_TOPIC,
    LogAppendInfo,
    LogBatch,
    LogRecord,
    OffsetAndEpoch,
    ReplicatedLog,
)
from pykbroker.record.control_record import ControlRecordType
from pykbroker.record.memory_records import MemoryRecords
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from pykbroker.utils.time import SYSTEM, Time

READ_CHUNK_BYTES = 1 << 20


@dataclass
class _Built:
    """What ``UnifiedLog.append_as_leader``'s validate callback returns (ValidationResultLike)."""

    buffer: object
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    records_count: int
    log_append_time: int = -1


class FileReplicatedLog(ReplicatedLog):
    def __init__(self, log: UnifiedLog, time: Time = SYSTEM):
        self.log = log
        self.time = time

    @classmethod
    def open(
        cls, metadata_log_dir: str, time: Time = SYSTEM, segment_bytes: int | None = None, scheduler=None
    ) -> FileReplicatedLog:
        """Open or create ``<metadata_log_dir>/__cluster_metadata-0`` (recovering it if needed)."""
        overrides = {"retention.ms": -1, "retention.bytes": -1}
        if segment_bytes is not None:
            overrides["segment.bytes"] = segment_bytes
        directory = os.path.join(metadata_log_dir, f"{METADATA_TOPIC}-{METADATA_PARTITION}")
        log = UnifiedLog.create(
            directory, LogConfig(overrides), scheduler, time, topic_partition=(METADATA_TOPIC, METADATA_PARTITION)
        )
        return cls(log, time)

    # ---- writes ------------------------------------------------------------------------------
    def append_as_leader(
        self, records: Sequence[LogRecord], epoch: int, control: bool = False, append_time_ms: int = -1
    ) -> LogAppendInfo:
        if not records:
            raise ValueError("cannot append an empty batch")
        timestamp = append_time_ms if append_time_ms >= 0 else self.time.milliseconds()

        def build(_view, next_offset: int) -> _Built:
            builder = MemoryRecordsBuilder(
                base_offset=next_offset, is_control_batch=control, partition_leader_epoch=epoch
            )
            _fill(builder, records, control, timestamp)
            last = next_offset + len(records) - 1
            return _Built(builder.build(), next_offset, last, timestamp, last, len(records))

        info = self.log.append_as_leader(b"", epoch, build, AppendOrigin.REPLICATION)
        return LogAppendInfo(info.first_offset, info.last_offset)

    def append_as_follower(self, batches: Sequence[LogBatch]) -> LogAppendInfo:
        if not batches:
            raise ValueError("cannot append no batches")
        buf = encode_log_batches(batches, self.time.milliseconds())
        info = self.log.append_as_follower(buf)
        return LogAppendInfo(info.first_offset, info.last_offset)

    # ---- reads -------------------------------------------------------------------------------
    def read(self, start_offset: int, max_offset: int | None = None) -> list[LogBatch]:
        out: list[LogBatch] = []
        offset = max(start_offset, self.log.log_start_offset)
        while offset < self.log.log_end_offset:
            data = self.log.read(offset, READ_CHUNK_BYTES, FetchIsolation.LOG_END, min_one_message=True)
            records: Any = data.records  # a FileRecordsSlice or EMPTY_RECORDS
            raw = records.read_bytes() if len(records) else b""
            progressed = False
            for batch in decode_log_batches(raw):  # whole batches only; a trailing partial one is skipped
                if batch.last_offset < offset:
                    continue
                if max_offset is not None and batch.last_offset >= max_offset:
                    return out
                out.append(batch)
                offset = batch.next_offset
                progressed = True
            if not progressed:
                break
        return out

    def end_offset(self) -> int:
        return self.log.log_end_offset

    def start_offset(self) -> int:
        return self.log.log_start_offset

    def last_fetched_epoch(self) -> int:
        epoch = self.log.latest_epoch
        return epoch if epoch is not None and epoch >= 0 else 0

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        found = self.log.end_offset_for_epoch(epoch)
        if found is None:
            return OffsetAndEpoch(self.log.log_start_offset, 0)
        offset, found_epoch = found
        return OffsetAndEpoch(offset, found_epoch)

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)

    def update_high_watermark(self, offset: int) -> None:
        self.log.update_high_watermark(offset)

    def high_watermark(self) -> int:
        return self.log.high_watermark

    def flush(self) -> None:
        self.log.flush()

    def close(self) -> None:
        self.log.close()


def encode_log_batches(batches: Sequence[LogBatch], default_time_ms: int) -> bytes:
    """``batches`` as record batches v2 (uncompressed; ``partitionLeaderEpoch`` = the Raft epoch, the
    control attribute for control batches; ``default_time_ms`` for batches without an append time)."""
    buf = bytearray()
    for b in batches:
        builder = MemoryRecordsBuilder(
            base_offset=b.base_offset, is_control_batch=b.control, partition_leader_epoch=b.epoch
        )
        _fill(builder, b.records, b.control, b.append_time_ms if b.append_time_ms >= 0 else default_time_ms)
        buf += builder.build()
    return bytes(buf)


def decode_log_batches(raw: bytes) -> Iterator[LogBatch]:
    """The whole record batches in ``raw`` (CRC-checked as they are reached) as :class:`LogBatch` values."""
    for batch in MemoryRecords(raw).batches():
        records = tuple(LogRecord(r.key, r.value) for r in batch.records(verify_crc=True))
        yield LogBatch(
            batch.base_offset, batch.partition_leader_epoch, records, batch.is_control_batch, batch.max_timestamp
        )


def _fill(builder: MemoryRecordsBuilder, records: Sequence[LogRecord], control: bool, timestamp: int) -> None:
    """Append ``records`` at consecutive offsets (control records keep their type from the key)."""
    for r in records:
        if control:
            builder.append_control_record(timestamp, ControlRecordType.parse(r.key), r.value)
        else:
            builder.append(timestamp, r.key, r.value)
