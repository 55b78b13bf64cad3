"""The leader's side of Fetch and FetchSnapshot: validating a voter's or observer's fetch, detecting a
diverging log or a position only a snapshot covers, advancing the high watermark from the fetch offsets,
holding a fetch that has nothing to return until data arrives, the high watermark moves or its wait ends
(one whose Fetch v18 ``high_watermark`` is below the leader's is answered at once, KIP-1166, Kafka 4.1),
and serving snapshot chunks.

Mirrors ``KafkaRaftClient.handleFetchRequest`` / ``tryCompleteFetchRequest`` / ``handleFetchSnapshotRequest``
and the client's fetch purgatory. Offsets are Kafka offsets; times are ms of the injected ``time``.

Threading: used by the Raft IO thread only (KafkaRaftClient's poll), like the rest of the client's state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pykbroker.protocol.errors import (
    FENCED_LEADER_EPOCH,
    INVALID_REQUEST,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    POSITION_OUT_OF_RANGE,
    SNAPSHOT_NOT_FOUND,
    UNKNOWN_LEADER_EPOCH,
)
from pykbroker.raft.epoch_state import LeaderState
from pykbroker.raft.quorum_state import QuorumState
from pykbroker.raft.raft_messages import (
    EpochEndOffset,
    FetchRequestData,
    FetchResponseData,
    FetchSnapshotRequestData,
    FetchSnapshotResponseData,
    LeaderIdAndEpoch,
    RaftRequest,
    ResponseData,
    SnapshotId,
)
from pykbroker.raft.replicated_log import LogBatch, ReplicatedLog, ValidKind
from pykbroker.utils.time import Time


@dataclass
class _ParkedFetch:
    """A Fetch the leader holds until there is data, the high watermark moves, or ``deadline_ms``."""

    request: RaftRequest
    high_watermark: int | None
    deadline_ms: int


def _hw(high_watermark: int | None) -> int:
    return -1 if high_watermark is None else high_watermark


class LeaderFetchHandler:
    """Fetch and FetchSnapshot on the leader of ``quorum`` over ``log``. ``set_high_watermark(offset)``
    moves the client's high watermark (only forward); ``send_response(request, data)`` queues an answer;
    ``max_wait_ms``: what :meth:`complete_parked` returns when no held fetch is due earlier."""

    def __init__(
        self,
        node_id: int,
        log: ReplicatedLog,
        quorum: QuorumState,
        time: Time,
        set_high_watermark: Callable[[int], None],
        send_response: Callable[[RaftRequest, ResponseData], None],
        max_wait_ms: int,
    ):
        self.node_id = node_id
        self.log = log
        self.quorum = quorum
        self.time = time
        self._set_high_watermark = set_high_watermark
        self._send_response = send_response
        self._max_wait_ms = max_wait_ms
        #: fetches held until there is something to answer (the leader's purgatory)
        self.parked: list[_ParkedFetch] = []

    def _now(self) -> int:
        return self.time.hi_res_milliseconds()

    def validate_leader_only(self, current_leader_epoch: int) -> int:
        """NONE when this node leads ``current_leader_epoch``, else FENCED_LEADER_EPOCH (older),
        UNKNOWN_LEADER_EPOCH (newer) or NOT_LEADER_OR_FOLLOWER."""
        q = self.quorum
        if current_leader_epoch < q.epoch:
            return FENCED_LEADER_EPOCH
        if current_leader_epoch > q.epoch:
            return UNKNOWN_LEADER_EPOCH
        if not q.is_leader():
            return NOT_LEADER_OR_FOLLOWER
        return NONE

    def current_leader(self) -> LeaderIdAndEpoch:
        return LeaderIdAndEpoch(self.quorum.leader_id, self.quorum.epoch)

    def handle_fetch_request(self, request: RaftRequest, data: FetchRequestData) -> FetchResponseData | None:
        """The answer to a Fetch, or None when it is held (answered later by :meth:`complete_parked`)."""
        q = self.quorum
        error = self.validate_leader_only(data.current_leader_epoch)
        if error != NONE:
            return FetchResponseData(error, LeaderIdAndEpoch(q.leader_id, q.epoch))
        leader = q.state
        assert isinstance(leader, LeaderState)
        current = LeaderIdAndEpoch(self.node_id, leader.epoch)
        if data.fetch_offset < 0 or data.last_fetched_epoch < 0 or data.last_fetched_epoch > leader.epoch:
            return FetchResponseData(INVALID_REQUEST, current)
        leader.record_voter_fetch(data.replica_id, self._now())  # check-quorum: this voter is reachable
        valid = self.log.validate_offset_and_epoch(data.fetch_offset, data.last_fetched_epoch)
        hw = _hw(leader.high_watermark)
        if valid.kind is ValidKind.DIVERGING:
            diverging = EpochEndOffset(valid.offset_and_epoch.epoch, valid.offset_and_epoch.offset)
            return FetchResponseData(NONE, current, hw, (), diverging)
        if valid.kind is ValidKind.SNAPSHOT:
            return FetchResponseData(NONE, current, hw, snapshot_id=SnapshotId(*valid.offset_and_epoch))
        leader.add_acknowledgement(data.replica_id)
        hw_before = leader.high_watermark
        now = self.time.milliseconds()
        if leader.update_replica_end_offset(data.replica_id, data.fetch_offset, now, data.replica_directory_id):
            assert leader.high_watermark is not None
            self._set_high_watermark(leader.high_watermark)
        if (
            data.fetch_offset < self.log.end_offset()
            or data.max_wait_ms <= 0
            or hw_before != leader.high_watermark
            or _hw(leader.high_watermark) > data.high_watermark  # KIP-1166: the fetcher's is stale
        ):
            return self.fetch_response(data)  # data, or news of the high watermark, at once
        self.parked.append(_ParkedFetch(request, leader.high_watermark, self._now() + data.max_wait_ms))
        return None

    def fetch_response(self, data: FetchRequestData) -> FetchResponseData:
        """The batches from ``data.fetch_offset`` (at least one, then up to ``partition_max_bytes``)."""
        leader = self.quorum.state
        assert isinstance(leader, LeaderState)
        batches: list[LogBatch] = []
        size = 0
        for batch in self.log.read(data.fetch_offset):
            batch_size = sum(len(r.value or b"") + len(r.key or b"") for r in batch.records)
            if batches and size + batch_size > data.partition_max_bytes:
                break
            batches.append(batch)
            size += batch_size
        return FetchResponseData(
            NONE, LeaderIdAndEpoch(self.node_id, leader.epoch), _hw(leader.high_watermark), tuple(batches)
        )

    def complete_parked(self, now: int) -> int:
        """Answer the held fetches that are due; returns ms until the next one's deadline."""
        leader = self.quorum.state
        if not self.parked or not isinstance(leader, LeaderState):
            return self._max_wait_ms
        end = self.log.end_offset()
        waiting: list[_ParkedFetch] = []
        for parked in self.parked:
            data = parked.request.data
            assert isinstance(data, FetchRequestData)
            if data.fetch_offset < end or parked.high_watermark != leader.high_watermark or now >= parked.deadline_ms:
                self._send_response(parked.request, self.fetch_response(data))
            else:
                waiting.append(parked)
        self.parked = waiting
        return min((p.deadline_ms - now for p in waiting), default=self._max_wait_ms)

    def fail_parked(self) -> None:
        """Leadership lost: every held fetch gets NOT_LEADER_OR_FOLLOWER."""
        parked, self.parked = self.parked, []
        for p in parked:
            self._send_response(p.request, FetchResponseData(NOT_LEADER_OR_FOLLOWER, self.current_leader()))

    def handle_fetch_snapshot_request(self, data: FetchSnapshotRequestData) -> FetchSnapshotResponseData:
        """The bytes of snapshot ``data.snapshot_id`` from ``data.position``, at most ``data.max_bytes``
        (Kafka's ``handleFetchSnapshotRequest``)."""
        error = self.validate_leader_only(data.current_leader_epoch)
        current = self.current_leader()
        if error != NONE:
            return FetchSnapshotResponseData(error, current)
        snapshot = self.log.read_snapshot(data.snapshot_id)
        if snapshot is None:
            return FetchSnapshotResponseData(SNAPSHOT_NOT_FOUND, current)
        size = snapshot.size_in_bytes()
        if not 0 <= data.position < size:
            return FetchSnapshotResponseData(POSITION_OUT_OF_RANGE, current)
        leader = self.quorum.state
        assert isinstance(leader, LeaderState)
        leader.record_voter_fetch(data.replica_id, self._now())
        chunk = snapshot.read(data.position, max(1, min(data.max_bytes, size)))
        return FetchSnapshotResponseData(NONE, current, data.snapshot_id, size, data.position, chunk)
