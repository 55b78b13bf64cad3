"""SnapshotGenerator: writes a snapshot of the metadata image now and then (Kafka's
``org.apache.kafka.image.publisher.SnapshotGenerator`` with its ``SnapshotEmitter``).

The :class:`~pykbroker.metadata.metadata_loader.MetadataLoader` reports the size of every committed batch
(``record_committed_bytes``) and, after publishing an image, asks ``maybe_generate(image)``. A snapshot is
written when ``max_bytes_since_last_snapshot`` bytes (``metadata.log.max.record.bytes.between.snapshots``)
were committed since the last one, or when ``max_time_since_last_snapshot_ms``
(``metadata.log.max.snapshot.interval.ms``; 0 disables this trigger) has passed and anything was committed
since. The snapshot is the image's records (:meth:`MetadataImage.to_records`) at
``SnapshotId(image.offset + 1, image.provenance.epoch)`` - the image is published only once caught up, so
that is at most the high watermark - written through ``KafkaRaftClient.create_snapshot``; the Raft client
then cleans its log up to it.

Threading: called on the loader thread only (Kafka runs the emitter on its own thread; a metadata image
is small enough to write inline). Writing takes the time to serialise the image plus one fsync.
"""

from __future__ import annotations

from collections.abc import Callable

from pykbroker.metadata.image import MetadataImage
from pykbroker.metadata.records import ApiMessageAndVersion
from pykbroker.raft.records_snapshot import RecordsSnapshotWriter
from pykbroker.raft.snapshots import SnapshotId
from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import SYSTEM, Time

DEFAULT_MAX_BYTES_BETWEEN_SNAPSHOTS = 20 * 1024 * 1024
DEFAULT_MAX_SNAPSHOT_INTERVAL_MS = 60 * 60 * 1000
RECORDS_PER_BATCH = 1000

CreateSnapshot = Callable[[SnapshotId, int], "RecordsSnapshotWriter[ApiMessageAndVersion] | None"]
"""``KafkaRaftClient.create_snapshot``: ``(snapshot_id, last_contained_log_time_ms) -> writer or None``."""


class SnapshotGenerator:
    def __init__(
        self,
        node_id: int,
        create_snapshot: CreateSnapshot,
        time: Time = SYSTEM,
        max_bytes_since_last_snapshot: int = DEFAULT_MAX_BYTES_BETWEEN_SNAPSHOTS,
        max_time_since_last_snapshot_ms: int = DEFAULT_MAX_SNAPSHOT_INTERVAL_MS,
    ):
        self.node_id = node_id
        self._create_snapshot = create_snapshot
        self.time = time
        self.max_bytes_since_last_snapshot = max_bytes_since_last_snapshot
        self.max_time_since_last_snapshot_ms = max_time_since_last_snapshot_ms
        self.bytes_since_last_snapshot = 0
        self.last_snapshot_ms = time.milliseconds()
        self.snapshots_written: list[SnapshotId] = []
        self._log = get_logger("SnapshotGenerator", id=node_id)

    def record_committed_bytes(self, size: int) -> None:
        self.bytes_since_last_snapshot += size

    def reset(self, image: MetadataImage) -> None:
        """A snapshot was loaded: it counts as the last one."""
        self.bytes_since_last_snapshot = 0
        self.last_snapshot_ms = self.time.milliseconds()

    def maybe_generate(self, image: MetadataImage) -> SnapshotId | None:
        """Write a snapshot of ``image`` if a trigger fired; returns its id (None if none was written)."""
        now = self.time.milliseconds()
        if self.bytes_since_last_snapshot >= self.max_bytes_since_last_snapshot:
            reason = f"{self.bytes_since_last_snapshot} bytes committed since the last snapshot"
        elif (
            self.max_time_since_last_snapshot_ms > 0
            and self.bytes_since_last_snapshot > 0
            and now - self.last_snapshot_ms >= self.max_time_since_last_snapshot_ms
        ):
            reason = f"{now - self.last_snapshot_ms} ms since the last snapshot"
        else:
            return None
        return self.generate(image, reason)

    def generate(self, image: MetadataImage, reason: str = "requested") -> SnapshotId | None:
        """Write a snapshot of ``image`` now (Kafka's ``SnapshotEmitter.maybeEmit``)."""
        if image.offset < 0:
            return None
        snapshot_id = SnapshotId(image.offset + 1, image.provenance.epoch)
        self.bytes_since_last_snapshot = 0
        self.last_snapshot_ms = self.time.milliseconds()
        try:
            writer = self._create_snapshot(snapshot_id, image.provenance.last_contained_log_time_ms)
        except ValueError as e:
            self._log.warning("Cannot create snapshot", snapshot_id=tuple(snapshot_id), error=str(e))
            return None
        if writer is None:
            return None  # exists already (or below the log start)
        try:
            records = image.to_records()
            for i in range(0, len(records), RECORDS_PER_BATCH):
                writer.append(records[i : i + RECORDS_PER_BATCH])
            writer.freeze()
        finally:
            writer.close()
        self.snapshots_written.append(snapshot_id)
        self._log.info("Wrote snapshot", snapshot_id=tuple(snapshot_id), records=len(records), reason=reason)
        return snapshot_id
