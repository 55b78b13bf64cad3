"""DescribeQuorum from a Raft client: the leader's view of every replica (Kafka's
``KafkaRaftClient.handleDescribeQuorumRequest`` + ``RaftUtil.singletonDescribeQuorumResponse``).

:func:`describe_quorum` builds the *partition* entry of a DescribeQuorum v0-2 response for
``__cluster_metadata-0`` (schema ``DescribeQuorum`` in :mod:`pykbroker.protocol.schemas.raft`)::

    {"partition_index": 0, "error_code": 0, "error_message": None, "leader_id": 1, "leader_epoch": 5,
     "high_watermark": 123,
     "current_voters": [{"replica_id", "replica_directory_id", "log_end_offset", "last_fetch_timestamp",
                         "last_caught_up_timestamp"}, ...],
     "observers": [...same shape...]}

The leader's own row has ``last_fetch_timestamp = last_caught_up_timestamp = now_ms``, as in Kafka;
replicas that never fetched have -1 offsets and times; observers silent for
``OBSERVER_SESSION_TIMEOUT_MS`` are left out. A voter's directory id is that of the voter set (KIP-853; the
zero UUID for static voters and for observers). A node that does not lead answers NOT_LEADER_OR_FOLLOWER (6) with
Kafka's empty fields (``DescribeQuorumResponse.singletonErrorResponse``).

Threading: safe from any thread. It reads the client's current epoch state once (one attribute read)
and copies its replica-state dicts, whose values are immutable and which only the Raft IO thread
writes (see :class:`~pykbroker.raft.epoch_state.LeaderState`); the answer is one consistent view
of that epoch, at most one poll old.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from pykbroker.protocol import errors
from pykbroker.protocol.errors import NONE, NOT_LEADER_OR_FOLLOWER
from pykbroker.raft.epoch_state import OBSERVER_SESSION_TIMEOUT_MS, LeaderState, ReplicaState

if TYPE_CHECKING:  # start-up time (issue 31): the generated message types are for the type checker only
    from pykbroker.protocol.messages.raft import (
        DescribeQuorumResponseTopicsPartitions as PartitionData,
    )
    from pykbroker.protocol.messages.raft import (
        DescribeQuorumResponseTopicsPartitionsCurrentVoters as ReplicaStateData,
    )

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
NO_DIRECTORY_ID = uuid.UUID(int=0)  # Kafka's ReplicaKey.NO_DIRECTORY_ID (Uuid.ZERO_UUID)


def partition_error(partition_index: int, error_code: int) -> PartitionData:
    """A partition entry carrying only ``error_code`` and its message (leader id, epoch and high
    watermark 0, no replicas: Kafka's defaults in ``singletonErrorResponse``)."""
    return {
        "partition_index": partition_index,
        "error_code": error_code,
        "error_message": errors.for_code(error_code).default_message,
        "leader_id": 0,
        "leader_epoch": 0,
        "high_watermark": 0,
        "current_voters": [],
        "observers": [],
    }


def describe_quorum(client: Any, now_ms: int) -> PartitionData:
    """The DescribeQuorum partition entry of ``client`` (a
    :class:`~pykbroker.raft.kafka_raft_client.KafkaRaftClient`) at ``now_ms`` (wall-clock ms,
    ``client.time.milliseconds()``: the fetch times are recorded on that clock). Not the leader: the
    NOT_LEADER_OR_FOLLOWER entry."""
    state = client.quorum.state
    if not isinstance(state, LeaderState):
        return partition_error(METADATA_PARTITION, NOT_LEADER_OR_FOLLOWER)
    voters = dict(state.replica_states)
    observers = dict(state.observer_states)
    hw = state.high_watermark
    leader_id = state.local_id
    voter_set = client.voter_set() if hasattr(client, "voter_set") else None
    directory = voter_set.directory_id if voter_set is not None else (lambda _: NO_DIRECTORY_ID)
    return {
        "partition_index": METADATA_PARTITION,
        "error_code": NONE,
        "error_message": None,
        "leader_id": leader_id,
        "leader_epoch": state.epoch,
        "high_watermark": hw if hw is not None else -1,
        "current_voters": [_replica(voters[v], leader_id, now_ms, directory(v)) for v in sorted(voters)],
        "observers": [
            _replica(observers[o], leader_id, now_ms)
            for o in sorted(observers)
            if now_ms - observers[o].last_fetch_timestamp < OBSERVER_SESSION_TIMEOUT_MS
        ],
    }


def _replica(
    state: ReplicaState, leader_id: int, now_ms: int, directory_id: uuid.UUID = NO_DIRECTORY_ID
) -> ReplicaStateData:
    leader = state.replica_id == leader_id
    return {
        "replica_id": state.replica_id,
        "replica_directory_id": directory_id,
        "log_end_offset": state.end_offset,
        "last_fetch_timestamp": now_ms if leader else state.last_fetch_timestamp,
        "last_caught_up_timestamp": now_ms if leader else state.last_caught_up_timestamp,
    }
