"""The Raft RPCs between :mod:`~pykbroker.raft.raft_messages` values and the wire bodies of the protocol
schemas (``pykbroker/protocol/schemas/raft.py`` and ``fetch.py``): dicts with Kafka's field names and the
``topics[].partitions[]`` nest holding the one ``__cluster_metadata-0`` partition (Kafka's
``RaftUtil.singletonVoteRequest``, ``singletonFetchRequest``, ...). Records travel as record batches v2.

The network layer encodes a body with the codec at the version it negotiated; fields a version does not
have are simply not written, so one body serves every version (e.g. Fetch carries both the v0-14
``replica_id`` and the v15+ ``replica_state``). Listener endpoints (``leader_endpoints``,
``node_endpoints``) are left empty: static voters (``controller.quorum.voters``) know each other's address.

Pure functions, no I/O: :mod:`~pykbroker.raft.kafka_network_channel` uses them for what it sends and the answers
it gets, the server's Raft handlers (``server/handlers/raft.py``) for what the controller listener receives.
"""

from __future__ import annotations

import uuid
from typing import Any

from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.errors import NONE
from pykbroker.raft.control_records import VoterEndpoint
from pykbroker.raft.log_batch_codec import decode_log_batches, encode_log_batches
from pykbroker.raft.raft_messages import (
    UNKNOWN_HIGH_WATERMARK,
    BeginQuorumEpochRequestData,
    BeginQuorumEpochResponseData,
    EndQuorumEpochRequestData,
    EndQuorumEpochResponseData,
    EpochEndOffset,
    FetchRequestData,
    FetchResponseData,
    FetchSnapshotRequestData,
    FetchSnapshotResponseData,
    LeaderIdAndEpoch,
    RequestData,
    ResponseData,
    SnapshotId,
    UpdateRaftVoterRequestData,
    UpdateRaftVoterResponseData,
    VoteRequestData,
    VoteResponseData,
)
from pykbroker.raft.replicated_log import METADATA_PARTITION, METADATA_TOPIC

METADATA_TOPIC_ID = uuid.UUID(int=1)
"""Kafka's ``Uuid.METADATA_TOPIC_ID`` (``new Uuid(0L, 1L)``)."""

Body = dict[str, Any]


class RaftWireError(ValueError):
    """A body that does not hold exactly the ``__cluster_metadata-0`` partition."""


def _single(body: Body, topics: str, topic_name: str, partition_key: str) -> Body:
    try:
        (topic,) = body[topics]
        (partition,) = topic["partitions"]
    except (KeyError, ValueError, TypeError) as e:
        raise RaftWireError(f"expected one topic with one partition: {e}") from None
    name = topic.get(topic_name)
    if name not in (None, "", METADATA_TOPIC) or partition.get(partition_key, 0) != METADATA_PARTITION:
        raise RaftWireError(f"not {METADATA_TOPIC}-{METADATA_PARTITION}: {name}-{partition.get(partition_key)}")
    return partition


def _nest(partition: Body, topic_name: str = "topic_name", partition_key: str = "partition_index") -> list[Body]:
    return [{topic_name: METADATA_TOPIC, "partitions": [{partition_key: METADATA_PARTITION, **partition}]}]


# ---- requests -------------------------------------------------------------------------------------
def request_to_wire(data: RequestData) -> tuple[int, Body]:
    """``(api_key, body)`` of a request."""
    partition: Body
    if isinstance(data, VoteRequestData):
        partition = {
            "candidate_epoch": data.candidate_epoch,
            "candidate_id": data.candidate_id,
            "last_offset_epoch": data.last_offset_epoch,
            "last_offset": data.last_offset,
            "pre_vote": data.pre_vote,
        }
        return ApiKeys.VOTE, {"cluster_id": data.cluster_id, "voter_id": data.voter_id, "topics": _nest(partition)}
    if isinstance(data, BeginQuorumEpochRequestData):
        partition = {"leader_id": data.leader_id, "leader_epoch": data.leader_epoch}
        body = {"cluster_id": data.cluster_id, "voter_id": data.voter_id, "topics": _nest(partition)}
        return ApiKeys.BEGIN_QUORUM_EPOCH, {**body, "leader_endpoints": []}
    if isinstance(data, EndQuorumEpochRequestData):
        partition = {
            "leader_id": data.leader_id,
            "leader_epoch": data.leader_epoch,
            "preferred_successors": list(data.preferred_successors),
            "preferred_candidates": [{"candidate_id": c} for c in data.preferred_successors],
        }
        return ApiKeys.END_QUORUM_EPOCH, {
            "cluster_id": data.cluster_id,
            "topics": _nest(partition),
            "leader_endpoints": [],
        }
    if isinstance(data, FetchRequestData):
        partition = {
            "partition": METADATA_PARTITION,
            "current_leader_epoch": data.current_leader_epoch,
            "fetch_offset": data.fetch_offset,
            "last_fetched_epoch": data.last_fetched_epoch,
            "partition_max_bytes": data.partition_max_bytes,
            "replica_directory_id": data.replica_directory_id,
            "high_watermark": data.high_watermark,
        }
        topic = {"topic": METADATA_TOPIC, "topic_id": METADATA_TOPIC_ID, "partitions": [partition]}
        return ApiKeys.FETCH, {
            "cluster_id": data.cluster_id,
            "replica_id": data.replica_id,
            "replica_state": {"replica_id": data.replica_id, "replica_epoch": -1},
            "max_wait_ms": data.max_wait_ms,
            "min_bytes": 0,
            "max_bytes": data.partition_max_bytes,
            "topics": [topic],
        }
    if isinstance(data, UpdateRaftVoterRequestData):
        return ApiKeys.UPDATE_RAFT_VOTER, {
            "cluster_id": data.cluster_id,
            "current_leader_epoch": data.current_leader_epoch,
            "voter_id": data.voter_id,
            "voter_directory_id": data.voter_directory_id,
            "listeners": [{"name": e.name, "host": e.host, "port": e.port} for e in data.listeners],
            "k_raft_version_feature": {
                "min_supported_version": data.min_supported_version,
                "max_supported_version": data.max_supported_version,
            },
        }
    partition = {
        "partition": METADATA_PARTITION,
        "current_leader_epoch": data.current_leader_epoch,
        "snapshot_id": {"end_offset": data.snapshot_id.end_offset, "epoch": data.snapshot_id.epoch},
        "position": data.position,
    }
    return ApiKeys.FETCH_SNAPSHOT, {
        "cluster_id": data.cluster_id,
        "replica_id": data.replica_id,
        "max_bytes": data.max_bytes,
        "topics": [{"name": METADATA_TOPIC, "partitions": [partition]}],
    }


def request_from_wire(api_key: int, body: Body) -> RequestData:
    """A decoded request body -> the message (raises RaftWireError for another partition)."""
    cluster_id = body.get("cluster_id")
    if api_key == ApiKeys.VOTE:
        p = _single(body, "topics", "topic_name", "partition_index")
        return VoteRequestData(
            p["candidate_epoch"],
            p["candidate_id"],
            p["last_offset_epoch"],
            p["last_offset"],
            cluster_id,
            body.get("voter_id", -1),
            bool(p.get("pre_vote", False)),
        )
    if api_key == ApiKeys.BEGIN_QUORUM_EPOCH:
        p = _single(body, "topics", "topic_name", "partition_index")
        return BeginQuorumEpochRequestData(p["leader_id"], p["leader_epoch"], cluster_id, body.get("voter_id", -1))
    if api_key == ApiKeys.END_QUORUM_EPOCH:
        p = _single(body, "topics", "topic_name", "partition_index")
        candidates = [c["candidate_id"] for c in p.get("preferred_candidates") or []]
        successors = tuple(candidates or p.get("preferred_successors") or [])
        return EndQuorumEpochRequestData(p["leader_id"], p["leader_epoch"], successors, cluster_id)
    if api_key == ApiKeys.FETCH:
        p = _single(body, "topics", "topic", "partition")
        state = body.get("replica_state") or {}
        replica_id = state.get("replica_id", -1)
        if replica_id == -1:
            replica_id = body.get("replica_id", -1)
        return FetchRequestData(
            replica_id,
            p.get("current_leader_epoch", -1),
            p["fetch_offset"],
            p.get("last_fetched_epoch", -1),
            body.get("max_wait_ms", 0),
            p.get("partition_max_bytes", 1 << 20),
            cluster_id,
            p.get("replica_directory_id") or uuid.UUID(int=0),
            p.get("high_watermark", UNKNOWN_HIGH_WATERMARK),
        )
    if api_key == ApiKeys.FETCH_SNAPSHOT:
        p = _single(body, "topics", "name", "partition")
        sid = p["snapshot_id"]
        return FetchSnapshotRequestData(
            body.get("replica_id", -1),
            p["current_leader_epoch"],
            SnapshotId(sid["end_offset"], sid["epoch"]),
            p.get("position", 0),
            body.get("max_bytes", 0x7FFFFFFF),
            cluster_id,
        )
    if api_key == ApiKeys.UPDATE_RAFT_VOTER:
        feature = body.get("k_raft_version_feature") or {}
        return UpdateRaftVoterRequestData(
            body["current_leader_epoch"],
            body["voter_id"],
            body["voter_directory_id"],
            tuple(VoterEndpoint(e["name"], e["host"], e["port"]) for e in body.get("listeners") or []),
            feature.get("min_supported_version", 0),
            feature.get("max_supported_version", 0),
            cluster_id,
        )
    raise RaftWireError(f"api key {api_key} is not a Raft RPC")


# ---- responses ------------------------------------------------------------------------------------
def response_to_wire(data: ResponseData, time_ms: int = 0) -> Body:
    """The body of a response (``time_ms``: the timestamp for record batches without an append time)."""
    partition: Body
    if isinstance(data, VoteResponseData):
        partition = {
            "error_code": data.error_code,
            "leader_id": data.leader_id,
            "leader_epoch": data.leader_epoch,
            "vote_granted": data.vote_granted,
        }
        return {"error_code": NONE, "topics": _nest(partition)}
    if isinstance(data, (BeginQuorumEpochResponseData, EndQuorumEpochResponseData)):
        partition = {"error_code": data.error_code, "leader_id": data.leader_id, "leader_epoch": data.leader_epoch}
        return {"error_code": NONE, "topics": _nest(partition)}
    if isinstance(data, FetchResponseData):
        diverging = data.diverging_epoch or EpochEndOffset(-1, -1)
        snapshot = data.snapshot_id or SnapshotId(-1, -1)
        partition = {
            "partition_index": METADATA_PARTITION,
            "error_code": data.error_code,
            "high_watermark": data.high_watermark,
            "diverging_epoch": {"epoch": diverging.epoch, "end_offset": diverging.end_offset},
            "current_leader": {
                "leader_id": data.current_leader.leader_id,
                "leader_epoch": data.current_leader.leader_epoch,
            },
            "snapshot_id": {"end_offset": snapshot.end_offset, "epoch": snapshot.epoch},
            "records": encode_log_batches(data.records, time_ms) if data.records else None,
        }
        topic = {"topic": METADATA_TOPIC, "topic_id": METADATA_TOPIC_ID, "partitions": [partition]}
        return {"throttle_time_ms": 0, "error_code": NONE, "session_id": 0, "responses": [topic]}
    if isinstance(data, UpdateRaftVoterResponseData):
        leader = {"leader_id": data.leader_id, "leader_epoch": data.leader_epoch, "host": "", "port": 0}
        return {"throttle_time_ms": 0, "error_code": data.error_code, "current_leader": leader}
    snapshot = data.snapshot_id or SnapshotId(-1, -1)
    partition = {
        "index": METADATA_PARTITION,
        "error_code": data.error_code,
        "snapshot_id": {"end_offset": snapshot.end_offset, "epoch": snapshot.epoch},
        "current_leader": {
            "leader_id": data.current_leader.leader_id,
            "leader_epoch": data.current_leader.leader_epoch,
        },
        "size": data.size,
        "position": data.position,
        "unaligned_records": data.unaligned_records,
    }
    return {"throttle_time_ms": 0, "error_code": NONE, "topics": [{"name": METADATA_TOPIC, "partitions": [partition]}]}


def response_from_wire(api_key: int, body: Body) -> ResponseData:
    """A decoded response body -> the message; a top-level error (e.g. INCONSISTENT_CLUSTER_ID, or
    CLUSTER_AUTHORIZATION_FAILED, whose responses carry no partition) wins."""
    top_error = body.get("error_code", NONE)

    def single(container: str, topic_key: str, partition_key: str) -> Body:
        if top_error != NONE and not body.get(container):
            return {"error_code": top_error}
        return _single(body, container, topic_key, partition_key)

    if api_key == ApiKeys.VOTE:
        p = single("topics", "topic_name", "partition_index")
        return VoteResponseData(
            top_error or p["error_code"],
            p.get("leader_id", -1),
            p.get("leader_epoch", -1),
            p.get("vote_granted", False),
        )
    if api_key == ApiKeys.BEGIN_QUORUM_EPOCH:
        p = single("topics", "topic_name", "partition_index")
        return BeginQuorumEpochResponseData(
            top_error or p["error_code"], p.get("leader_id", -1), p.get("leader_epoch", -1)
        )
    if api_key == ApiKeys.END_QUORUM_EPOCH:
        p = single("topics", "topic_name", "partition_index")
        return EndQuorumEpochResponseData(
            top_error or p["error_code"], p.get("leader_id", -1), p.get("leader_epoch", -1)
        )
    if api_key == ApiKeys.FETCH:
        p = single("responses", "topic", "partition_index")
        diverging = p.get("diverging_epoch") or {}
        leader = p.get("current_leader") or {}
        snapshot = p.get("snapshot_id") or {}
        raw = p.get("records")
        records = tuple(decode_log_batches(bytes(raw))) if raw else ()
        return FetchResponseData(
            top_error or p["error_code"],
            LeaderIdAndEpoch(leader.get("leader_id", -1), leader.get("leader_epoch", -1)),
            p.get("high_watermark", -1),
            records,
            EpochEndOffset(diverging["epoch"], diverging["end_offset"]) if diverging.get("epoch", -1) >= 0 else None,
            SnapshotId(snapshot["end_offset"], snapshot["epoch"]) if snapshot.get("end_offset", -1) >= 0 else None,
        )
    if api_key == ApiKeys.FETCH_SNAPSHOT:
        p = single("topics", "name", "index")
        leader = p.get("current_leader") or {}
        snapshot = p.get("snapshot_id") or {}
        return FetchSnapshotResponseData(
            top_error or p["error_code"],
            LeaderIdAndEpoch(leader.get("leader_id", -1), leader.get("leader_epoch", -1)),
            SnapshotId(snapshot["end_offset"], snapshot["epoch"]) if snapshot.get("end_offset", -1) >= 0 else None,
            p.get("size", 0),
            p.get("position", 0),
            bytes(p.get("unaligned_records") or b""),
        )
    if api_key == ApiKeys.UPDATE_RAFT_VOTER:
        leader = body.get("current_leader") or {}
        return UpdateRaftVoterResponseData(top_error, leader.get("leader_id", -1), leader.get("leader_epoch", -1))
    raise RaftWireError(f"api key {api_key} is not a Raft RPC")
