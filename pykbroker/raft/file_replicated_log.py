"""FileReplicatedLog: the Raft log on disk, ``<metadata.log.dir>/__cluster_metadata-0/`` (Kafka's
``KafkaMetadataLog``).

An adapter from :class:`~pykbroker.raft.replicated_log.ReplicatedLog` to
:class:`~pykbroker.log.unified_log.UnifiedLog`: each :class:`LogBatch` is one record batch v2 (no
compression) with ``partitionLeaderEpoch`` = the Raft epoch and the control attribute for control batches,
so the metadata log is byte-compatible with Kafka's and readable with ``kafka-dump-log``. The metadata log
never expires data by time or size (``retention.ms``/``retention.bytes`` = -1); it is cleaned up to its
newest snapshot instead (``maybe_clean``: the log start offset moves to the snapshot's end offset, whole
segments below it are deleted, older ``.checkpoint`` files too).

Snapshots live next to the segments as ``<end offset>-<epoch>.checkpoint`` files
(:mod:`pykbroker.raft.snapshots`). ``open`` deletes leftover ``.checkpoint.part`` files of interrupted
writes, loads the snapshots, starts the log at the newest snapshot's end offset and, if that snapshot is
ahead of the log (a crash between storing a fetched snapshot and truncating), empties the log to start
there (Kafka's ``KafkaMetadataLog.apply``/``recoverSnapshots``).

Threading: as ReplicatedLog - the Raft IO thread writes; ``end_offset``/``high_watermark`` may be read from
any thread (UnifiedLog publishes them without locks); the snapshot registry as in ReplicatedLog.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pykbroker.config.topic_config import RETENTION_BYTES_CONFIG, RETENTION_MS_CONFIG, SEGMENT_BYTES_CONFIG
from pykbroker.log.fetch_data_info import FetchIsolation
from pykbroker.log.log_config import LogConfig
from pykbroker.log.producer_state_entry import AppendOrigin
from pykbroker.log.unified_log import UnifiedLog
from pykbroker.raft.log_batch_codec import decode_log_batches as decode_log_batches  # re-exported
from pykbroker.raft.log_batch_codec import encode_log_batches as encode_log_batches  # re-exported
from pykbroker.raft.log_batch_codec import fill_builder
from pykbroker.raft.replicated_log import (
    METADATA_PARTITION,
    METADATA_TOPIC,
    LogAppendInfo,
    LogBatch,
    LogRecord,
    OffsetAndEpoch,
    ReplicatedLog,
)
from pykbroker.raft.snapshots import (
    DELETED_SUFFIX,
    PARTIAL_SUFFIX,
    SUFFIX,
    FileRawSnapshotReader,
    FileRawSnapshotWriter,
    RawSnapshotReader,
    RawSnapshotWriter,
    SnapshotId,
    parse_snapshot_filename,
    snapshot_filename,
)
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import SYSTEM, Time

READ_CHUNK_BYTES = 1 << 20


@dataclass
class _Built:
    """What ``UnifiedLog.append_as_leader``'s validate callback returns (ValidationResultLike)."""

    validated_records: bytes
    first_offset: int
    last_offset: int
    records_count: int
    log_append_time_ms: int
    max_timestamp_ms: int
    shallow_offset_of_max_timestamp: int


class FileReplicatedLog(ReplicatedLog):
    def __init__(self, log: UnifiedLog, time: Time = SYSTEM):
        super().__init__()
        self.log = log
        self.time = time
        self._logger = get_logger("KafkaMetadataLog", dir=log.dir)

    @classmethod
    def open(
        cls, metadata_log_dir: str, time: Time = SYSTEM, segment_bytes: int | None = None, scheduler=None
    ) -> FileReplicatedLog:
        """Open or create ``<metadata_log_dir>/__cluster_metadata-0`` (recovering it if needed)."""
        overrides = {RETENTION_MS_CONFIG: -1, RETENTION_BYTES_CONFIG: -1}
        if segment_bytes is not None:
            overrides[SEGMENT_BYTES_CONFIG] = segment_bytes
        directory = os.path.join(metadata_log_dir, f"{METADATA_TOPIC}-{METADATA_PARTITION}")
        os.makedirs(directory, exist_ok=True)
        snapshots = _recover_snapshots(directory)
        latest = max(snapshots, default=None)
        log = UnifiedLog.create(
            directory,
            LogConfig(overrides),
            scheduler,
            time,
            log_start_offset=latest.end_offset if latest is not None else 0,
            topic_partition=(METADATA_TOPIC, METADATA_PARTITION),
        )
        replicated = cls(log, time)
        for snapshot_id in snapshots:
            path = os.path.join(directory, snapshot_filename(snapshot_id))
            replicated._on_snapshot_frozen(FileRawSnapshotReader(snapshot_id, path))
        replicated.truncate_to_latest_snapshot()
        if latest is not None:
            replicated._forget_snapshots_before(latest)
        return replicated

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
            fill_builder(builder, records, control, timestamp)
            last = next_offset + len(records) - 1
            return _Built(builder.build(), next_offset, last, len(records), -1, timestamp, last)

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

    def _last_batch_epoch(self) -> int:
        epoch = self.log.latest_epoch
        return epoch if epoch is not None and epoch >= 0 else 0

    def last_fetched_epoch(self) -> int:
        epoch = self.log.latest_epoch
        if epoch is not None and epoch >= 0:
            return epoch
        latest = self.latest_snapshot_id()
        return latest.epoch if latest is not None else 0

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        found = self.log.end_offset_for_epoch(epoch)
        return self._snapshot_end_for_epoch(None if found is None else OffsetAndEpoch(*found), epoch)

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

    # ---- snapshot storage ----------------------------------------------------------------------
    def _new_snapshot_writer(self, snapshot_id: SnapshotId) -> RawSnapshotWriter:
        return FileRawSnapshotWriter(self.log.dir, snapshot_id, self._on_snapshot_frozen)

    def _delete_snapshot(self, reader: RawSnapshotReader) -> None:
        assert isinstance(reader, FileRawSnapshotReader)
        try:
            os.unlink(reader.path)
        except FileNotFoundError:
            pass
        self._logger.info("Deleted snapshot", snapshot_id=reader.snapshot_id)

    def _delete_before(self, offset: int) -> None:
        self.log.maybe_increment_log_start_offset(offset, "snapshot generated")
        self.log.delete_old_segments()

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)


def _recover_snapshots(directory: str) -> list[SnapshotId]:
    """The ids of the frozen snapshots in ``directory``; leftover ``.part`` and ``.deleted`` files (an
    interrupted write or deletion) are removed (Kafka's ``KafkaMetadataLog.recoverSnapshots``)."""
    found: list[SnapshotId] = []
    for name in sorted(os.listdir(directory)):
        parsed = parse_snapshot_filename(name)
        if parsed is None:
            continue
        snapshot_id, suffix = parsed
        if suffix in (PARTIAL_SUFFIX, DELETED_SUFFIX):
            os.unlink(os.path.join(directory, name))
        elif suffix == SUFFIX:
            found.append(snapshot_id)
    return found
