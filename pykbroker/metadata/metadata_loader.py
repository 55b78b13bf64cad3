"""MetadataLoader: turns committed Raft batches into images for publishers (Kafka's ``MetadataLoader``).

Registered as a Raft listener, it replays each committed batch into a :class:`MetadataDelta` on its own
event thread (``kafka-<nodeId>-metadata-loader-event-handler``), so slow publishers never hold up the Raft
thread. While catching up (the batch ends below the Raft high watermark, e.g. replaying the log at
start-up) it keeps accumulating into one delta; once caught up it applies the delta and hands
``(delta, new_image)`` to every publisher.

A snapshot (``handle_load_snapshot``: at start-up when the metadata log begins with one, or when this node
was so far behind that it fetched the leader's) replaces the image: its records are replayed into a delta
of the current image, whatever they do not restate is removed (``MetadataDelta.finish_snapshot``), and the
result is published at once, so publishers see topics deleted meanwhile as deletions. A
:class:`~pykbroker.metadata.snapshot_generator.SnapshotGenerator`, if given, counts the committed bytes and
may write a snapshot of each published image (on the loader thread).

Threading: ``handle_commit``/``handle_leader_change`` (Raft thread), ``install_publishers``
and ``close`` are thread-safe; ``image`` may be read from any thread
(reference swap of an immutable value). Publishers run on the loader thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future

from pykbroker.metadata.delta import MetadataDelta
from pykbroker.metadata.event_queue import EventQueue
from pykbroker.metadata.image import EMPTY_IMAGE, MetadataImage, MetadataProvenance
from pykbroker.metadata.publisher import MetadataPublisher
from pykbroker.metadata.records import ApiMessageAndVersion
from pykbroker.metadata.snapshot_generator import SnapshotGenerator
from pykbroker.raft.raft_client import UNKNOWN_LEADER, Batch, LeaderAndEpoch, RaftClientListener
from pykbroker.raft.records_snapshot import RecordsSnapshotReader
from pykbroker.utils.logging import get_logger


class MetadataLoader(RaftClientListener[ApiMessageAndVersion]):
    def __init__(
        self,
        node_id: int,
        cluster_id: str | None = None,
        high_watermark: Callable[[], int | None] = lambda: None,
        thread_name: str | None = None,
        snapshot_generator: SnapshotGenerator | None = None,
    ):
        self.node_id = node_id
        self.snapshot_generator = snapshot_generator
        self._high_watermark = high_watermark
        self._image = EMPTY_IMAGE if cluster_id is None else MetadataImage(cluster_id=cluster_id)
        self._delta: MetadataDelta | None = None
        self._last: MetadataProvenance | None = None
        self._publishers: list[MetadataPublisher] = []
        self._leader: LeaderAndEpoch = UNKNOWN_LEADER
        self._log = get_logger("MetadataLoader", id=node_id)
        self._queue = EventQueue(thread_name or f"kafka-{node_id}-metadata-loader-event-handler")

    @property
    def image(self) -> MetadataImage:
        """The last published image."""
        return self._image

    # ---- Raft listener (Raft thread -> loader thread) -------------------------------------------
    def handle_commit(self, batch: Batch[ApiMessageAndVersion]) -> None:
        self._queue.append(lambda: self._load(batch), on_error=self._fault)

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        self._queue.append(lambda: self._leader_changed(leader), on_error=self._fault)

    def handle_load_snapshot(self, reader: RecordsSnapshotReader[ApiMessageAndVersion]) -> None:
        self._queue.append(lambda: self._load_snapshot(reader), on_error=self._fault)

    # ---- publishers ----------------------------------------------------------------------------
    def install_publishers(self, publishers: Iterable[MetadataPublisher]) -> Future:
        """Add publishers; each first gets the current image (if not empty) as one delta from the empty
        image. The future completes on the loader thread once they are installed."""
        future: Future = Future()
        new = list(publishers)

        def install() -> None:
            image = self._image
            for p in new:
                if not image.is_empty() or image.provenance.offset >= 0:
                    delta = MetadataDelta(MetadataImage(cluster_id=image.cluster_id)).replay_all(image.to_records())
                    self._publish(p, delta, image)
                self._publishers.append(p)
            future.set_result(None)

        self._queue.append(install, on_error=future.set_exception)
        return future

    def remove_and_close_publisher(self, publisher: MetadataPublisher) -> Future:
        """Remove ``publisher`` and close it on the loader thread (Kafka's ``removeAndClosePublisher``); the
        future completes once it is removed (no later image reaches it) or fails with the loader's error."""
        future: Future = Future()

        def remove() -> None:
            if publisher in self._publishers:
                self._publishers.remove(publisher)
                publisher.close()
            future.set_result(None)

        self._queue.append(remove, on_error=future.set_exception)
        return future

    def close(self, timeout_s: float = 10.0) -> None:
        def shutdown() -> None:
            for p in self._publishers:
                try:
                    p.close()
                except Exception:  # noqa: BLE001 - close the other publishers
                    self._log.exception("Publisher close failed", publisher=p.name())
            self._publishers.clear()

        self._queue.append(shutdown)
        self._queue.close(timeout_s)

    # ---- loader thread -------------------------------------------------------------------------
    def _load(self, batch: Batch[ApiMessageAndVersion]) -> None:
        if self._delta is None:
            self._delta = MetadataDelta(self._image)
        for record in batch.records:
            self._delta.replay(record)
        self._last = MetadataProvenance(batch.last_offset, batch.epoch, batch.append_time_ms)
        if self.snapshot_generator is not None:
            self.snapshot_generator.record_committed_bytes(batch.size_in_bytes)
        hw = self._high_watermark()
        if hw is not None and batch.last_offset + 1 < hw:
            return  # more committed batches are on their way: publish once caught up
        delta, self._delta = self._delta, None
        self._publish_all(delta, delta.apply(self._last))
        if self.snapshot_generator is not None:
            self.snapshot_generator.maybe_generate(self._image)

    def _load_snapshot(self, reader: RecordsSnapshotReader[ApiMessageAndVersion]) -> None:
        """Replace the image with the snapshot's (Kafka's ``MetadataLoader.handleLoadSnapshot``); batches
        accumulated but not yet published are superseded by it."""
        delta = MetadataDelta(self._image)
        count = 0
        for batch in reader:
            delta.replay_all(batch.records)
            count += len(batch.records)
        delta.finish_snapshot()
        self._delta = None
        self._last = MetadataProvenance(
            reader.last_contained_log_offset, reader.last_contained_log_epoch, reader.last_contained_log_timestamp
        )
        self._log.info("Loading snapshot", snapshot_id=tuple(reader.snapshot_id), records=count)
        self._publish_all(delta, delta.apply(self._last))
        if self.snapshot_generator is not None:
            self.snapshot_generator.reset(self._image)

    def _publish_all(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self._image = image
        for p in list(self._publishers):
            self._publish(p, delta, image)

    def _publish(self, publisher: MetadataPublisher, delta: MetadataDelta, image: MetadataImage) -> None:
        try:
            publisher.on_metadata_update(delta, image)
        except Exception:  # noqa: BLE001 - one publisher must not starve the others
            self._log.exception("Publisher failed", publisher=publisher.name(), offset=image.offset)

    def _leader_changed(self, leader: LeaderAndEpoch) -> None:
        self._leader = leader
        for p in list(self._publishers):
            try:
                p.on_controller_change(leader)
            except Exception:  # noqa: BLE001 - one publisher must not starve the others
                self._log.exception("Publisher failed on controller change", publisher=p.name())

    def _fault(self, error: BaseException) -> None:
        self._log.error("Error loading metadata", error=repr(error))
