"""The Raft RPCs as the sans-I/O :class:`~pykbroker.raft.kafka_raft_client.KafkaRaftClient` sees them.

Kafka's Vote (52), BeginQuorumEpoch (53), EndQuorumEpoch (54), Fetch (1) and FetchSnapshot (59) requests
and responses carry a ``topics[].partitions[]`` nest; the Raft client only ever addresses the one
``__cluster_metadata-0`` partition, so each message here is that nest flattened to the partition's fields,
with the field names of the schemas in ``pykbroker/protocol/schemas/raft.py`` and ``fetch.py``
(``candidate_epoch``, ``last_offset_epoch``, ``vote_granted``, ``last_fetched_epoch``,
``diverging_epoch``, ``current_leader`` ...). :mod:`~pykbroker.raft.raft_wire` translates them to and from
the wire structs; records travel as :class:`~pykbroker.raft.replicated_log.LogBatch`. UpdateRaftVoter (82,
KIP-853) has no nest: a voter's endpoints and supported ``kraft.version`` range.

Envelopes: :class:`RaftRequest` / :class:`RaftResponse` add who sends to whom and the correlation id
that pairs a response with its request. Error codes are Kafka's numeric codes
(:mod:`pykbroker.protocol.errors`) and ``api_key`` is :class:`~pykbroker.protocol.api_keys.ApiKeys`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import NamedTuple

from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.raft.control_records import VoterEndpoint
from pykbroker.raft.quorum_state_store import NO_ID
from pykbroker.raft.replicated_log import LogBatch
from pykbroker.raft.snapshots import SnapshotId as SnapshotId  # re-exported: Fetch/FetchSnapshot's id

_NO_DIRECTORY_ID = uuid.UUID(int=0)


class EpochEndOffset(NamedTuple):
    """Fetch response ``diverging_epoch``: the leader's end offset of the largest epoch <= the
    follower's ``last_fetched_epoch``."""

    epoch: int
    end_offset: int


class LeaderIdAndEpoch(NamedTuple):
    """``current_leader`` of Fetch/FetchSnapshot responses."""

    leader_id: int
    leader_epoch: int


# ---- Vote ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VoteRequestData:
    """A Vote, or with ``pre_vote`` (Vote v2, KIP-996) a pre-vote: ``candidate_epoch`` is then the epoch the
    sender would stand in (its epoch + 1) and the answer changes no state. Kafka 4 renames the v2 fields
    ``replica_epoch`` / ``replica_id``; the wire format is the same."""

    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int
    cluster_id: str | None = None
    voter_id: int = NO_ID
    pre_vote: bool = False
    api_key: int = field(default=ApiKeys.VOTE, init=False, repr=False)


@dataclass(frozen=True)
class VoteResponseData:
    error_code: int
    leader_id: int
    leader_epoch: int
    vote_granted: bool
    api_key: int = field(default=ApiKeys.VOTE, init=False, repr=False)


# ---- BeginQuorumEpoch ---------------------------------------------------------------------------
@dataclass(frozen=True)
class BeginQuorumEpochRequestData:
    leader_id: int
    leader_epoch: int
    cluster_id: str | None = None
    voter_id: int = NO_ID
    api_key: int = field(default=ApiKeys.BEGIN_QUORUM_EPOCH, init=False, repr=False)


@dataclass(frozen=True)
class BeginQuorumEpochResponseData:
    error_code: int
    leader_id: int
    leader_epoch: int
    api_key: int = field(default=ApiKeys.BEGIN_QUORUM_EPOCH, init=False, repr=False)


# ---- EndQuorumEpoch -----------------------------------------------------------------------------
@dataclass(frozen=True)
class EndQuorumEpochRequestData:
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...] = ()
    cluster_id: str | None = None
    api_key: int = field(default=ApiKeys.END_QUORUM_EPOCH, init=False, repr=False)


@dataclass(frozen=True)
class EndQuorumEpochResponseData:
    error_code: int
    leader_id: int
    leader_epoch: int
    api_key: int = field(default=ApiKeys.END_QUORUM_EPOCH, init=False, repr=False)


#: Fetch v18's ``high_watermark`` default (Long.MAX_VALUE): the fetching replica does not send one (KIP-1166)
UNKNOWN_HIGH_WATERMARK = (1 << 63) - 1


# ---- Fetch --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FetchRequestData:
    """A follower's or observer's fetch of ``__cluster_metadata-0``: it has everything below
    ``fetch_offset`` and the last batch it has was written in ``last_fetched_epoch``. ``high_watermark``:
    Fetch v18's (KIP-1166) offset the fetching replica knows is committed, -1 when it knows none,
    ``UNKNOWN_HIGH_WATERMARK`` (Long.MAX_VALUE) from a peer that does not send it."""

    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int = 0
    partition_max_bytes: int = 1 << 20
    cluster_id: str | None = None
    #: Fetch v17's ``replica_directory_id`` (KIP-853; zero: none)
    replica_directory_id: uuid.UUID = _NO_DIRECTORY_ID
    high_watermark: int = UNKNOWN_HIGH_WATERMARK
    api_key: int = field(default=ApiKeys.FETCH, init=False, repr=False)


@dataclass(frozen=True)
class FetchResponseData:
    error_code: int
    current_leader: LeaderIdAndEpoch
    high_watermark: int = -1
    records: tuple[LogBatch, ...] = ()
    diverging_epoch: EpochEndOffset | None = None
    snapshot_id: SnapshotId | None = None
    api_key: int = field(default=ApiKeys.FETCH, init=False, repr=False)


# ---- FetchSnapshot ------------------------------------------------------------------------------
@dataclass(frozen=True)
class FetchSnapshotRequestData:
    replica_id: int
    current_leader_epoch: int
    snapshot_id: SnapshotId
    position: int = 0
    max_bytes: int = 0x7FFFFFFF
    cluster_id: str | None = None
    api_key: int = field(default=ApiKeys.FETCH_SNAPSHOT, init=False, repr=False)


@dataclass(frozen=True)
class FetchSnapshotResponseData:
    error_code: int
    current_leader: LeaderIdAndEpoch
    snapshot_id: SnapshotId | None = None
    size: int = 0
    position: int = 0
    unaligned_records: bytes = b""
    api_key: int = field(default=ApiKeys.FETCH_SNAPSHOT, init=False, repr=False)


# ---- UpdateRaftVoter (KIP-853) -------------------------------------------------------------------
@dataclass(frozen=True)
class UpdateRaftVoterRequestData:
    """A voter tells the leader of ``current_leader_epoch`` its controller ``listeners`` and the
    ``kraft.version`` range it supports (Kafka's ``UpdateRaftVoterRequestData``)."""

    current_leader_epoch: int
    voter_id: int
    voter_directory_id: uuid.UUID
    listeners: tuple[VoterEndpoint, ...]
    min_supported_version: int = 0
    max_supported_version: int = 1
    cluster_id: str | None = None
    api_key: int = field(default=ApiKeys.UPDATE_RAFT_VOTER, init=False, repr=False)


@dataclass(frozen=True)
class UpdateRaftVoterResponseData:
    error_code: int
    leader_id: int
    leader_epoch: int
    api_key: int = field(default=ApiKeys.UPDATE_RAFT_VOTER, init=False, repr=False)


RequestData = (
    VoteRequestData
    | BeginQuorumEpochRequestData
    | EndQuorumEpochRequestData
    | FetchRequestData
    | FetchSnapshotRequestData
    | UpdateRaftVoterRequestData
)
ResponseData = (
    VoteResponseData
    | BeginQuorumEpochResponseData
    | EndQuorumEpochResponseData
    | FetchResponseData
    | FetchSnapshotResponseData
    | UpdateRaftVoterResponseData
)


@dataclass(frozen=True)
class RaftRequest:
    """``source_id`` asks ``destination_id``; the answer carries the same ``correlation_id``."""

    correlation_id: int
    source_id: int
    destination_id: int
    data: RequestData
    created_ms: int = 0


@dataclass(frozen=True)
class RaftResponse:
    correlation_id: int
    source_id: int
    destination_id: int
    data: ResponseData


RaftMessage = RaftRequest | RaftResponse


def error_response(data: RequestData, error: int, leader_id: int = NO_ID, leader_epoch: int = -1) -> ResponseData:
    """The response to ``data`` that carries only ``error`` and the leader as the answering node knows it
    (unknown by default: the request never reached a node that could answer)."""
    if isinstance(data, VoteRequestData):
        return VoteResponseData(error, leader_id, leader_epoch, False)
    if isinstance(data, BeginQuorumEpochRequestData):
        return BeginQuorumEpochResponseData(error, leader_id, leader_epoch)
    if isinstance(data, EndQuorumEpochRequestData):
        return EndQuorumEpochResponseData(error, leader_id, leader_epoch)
    if isinstance(data, FetchRequestData):
        return FetchResponseData(error, LeaderIdAndEpoch(leader_id, leader_epoch))
    if isinstance(data, UpdateRaftVoterRequestData):
        return UpdateRaftVoterResponseData(error, leader_id, leader_epoch)
    return FetchSnapshotResponseData(error, LeaderIdAndEpoch(leader_id, leader_epoch))
