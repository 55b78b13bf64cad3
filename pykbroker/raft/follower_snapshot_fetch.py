"""A follower's download of the leader's snapshot (KIP-630): started when a Fetch answer names a
``snapshot_id`` (the follower is below the leader's log start), continued with one FetchSnapshot request
at a time (chunks of at most ``max_bytes`` from ``position``), frozen with the last chunk, after which the
log is emptied to start at the snapshot's end offset and that offset becomes the high watermark. A chunk
that does not continue the download, SNAPSHOT_NOT_FOUND or POSITION_OUT_OF_RANGE discards it (the next
Fetch starts over); so does losing the leader.

Mirrors the follower side of ``KafkaRaftClient.handleFetchSnapshotResponse`` and ``buildFetchSnapshotRequest``.

Threading: used by the Raft IO thread only (KafkaRaftClient's poll).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pykbroker.protocol.errors import NONE, POSITION_OUT_OF_RANGE, SNAPSHOT_NOT_FOUND
from pykbroker.raft.epoch_state import FollowerState
from pykbroker.raft.raft_client import RaftInvariantError
from pykbroker.raft.raft_messages import (
    FetchSnapshotRequestData,
    FetchSnapshotResponseData,
    SnapshotId,
)
from pykbroker.raft.replicated_log import ReplicatedLog
from pykbroker.raft.snapshots import RawSnapshotWriter


class FollowerSnapshotFetch:
    """The snapshot download of node ``node_id`` into ``log``. ``set_high_watermark(offset)`` moves the
    client's high watermark (only forward); ``log_info(message, **context)`` logs."""

    def __init__(
        self,
        node_id: int,
        log: ReplicatedLog,
        set_high_watermark: Callable[[int], None],
        log_info: Callable[..., Any],
    ):
        self.node_id = node_id
        self.log = log
        self._set_high_watermark = set_high_watermark
        self._log_info = log_info
        #: the snapshot being downloaded (None: no download in progress)
        self.writer: RawSnapshotWriter | None = None

    @property
    def in_progress(self) -> bool:
        return self.writer is not None

    def request(
        self, replica_id: int, epoch: int, max_bytes: int, cluster_id: str | None
    ) -> FetchSnapshotRequestData | None:
        """The FetchSnapshot for the next chunk (at most ``max_bytes``), or None when no download is in
        progress."""
        writer = self.writer
        if writer is None:
            return None
        return FetchSnapshotRequestData(
            replica_id, epoch, writer.snapshot_id, writer.size_in_bytes(), max_bytes, cluster_id
        )

    def start(self, state: FollowerState, snapshot_id: SnapshotId) -> None:
        """The leader answered a Fetch with ``snapshot_id``: start downloading it (or install it at once
        when it is on disk already)."""
        if snapshot_id.end_offset < 0 or snapshot_id.epoch < 0:
            return
        writer = self.log.create_new_snapshot_unchecked(snapshot_id)
        if writer is None:  # we have it already (a crash between freezing and truncating)
            self._install(state, snapshot_id)
            return
        self._log_info("Fetching a snapshot from the leader", snapshot_id=snapshot_id, leader=state.leader)
        self.writer = writer

    def handle_response(self, state: FollowerState, data: FetchSnapshotResponseData, backing_off: bool) -> bool:
        """A FetchSnapshot answer from ``state``'s leader in its epoch (``backing_off``: the client backs off
        from that leader): append the chunk; the last one freezes the snapshot and moves the log to it.
        Returns whether a chunk was taken (the leader is alive: the fetch timer restarts)."""
        writer = self.writer
        if writer is None:
            return False
        if data.error_code in (SNAPSHOT_NOT_FOUND, POSITION_OUT_OF_RANGE) or (
            data.error_code == NONE
            and (data.snapshot_id != writer.snapshot_id or data.position != writer.size_in_bytes())
        ):
            self._log_info("Restarting the snapshot fetch", snapshot_id=writer.snapshot_id, error=data.error_code)
            self.abandon()
            return False
        if backing_off or data.error_code != NONE:
            return False  # backing off; the same chunk is asked for again
        writer.append(data.unaligned_records)
        if writer.size_in_bytes() < data.size:
            return True
        writer.freeze()
        self.writer = None
        self._install(state, writer.snapshot_id)
        return True

    def _install(self, state: FollowerState, snapshot_id: SnapshotId) -> None:
        if not self.log.truncate_to_latest_snapshot():
            raise RaftInvariantError(
                f"Node {self.node_id}: snapshot {snapshot_id} is not ahead of the log "
                f"(end {self.log.end_offset()}, last epoch {self.log.last_fetched_epoch()})"
            )
        self._log_info("Truncated the log fully to the leader's snapshot", snapshot_id=snapshot_id)
        state.update_high_watermark(snapshot_id.end_offset)
        self._set_high_watermark(snapshot_id.end_offset)

    def abandon(self) -> None:
        """Discard a download in progress (nothing when none is)."""
        writer, self.writer = self.writer, None
        if writer is not None:
            writer.close()
