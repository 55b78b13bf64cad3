"""What the GroupCoordinator answers the group handlers: small named types instead of wire dicts.

Kafka's ``GroupCoordinator`` hands its callbacks ``JoinGroupResult`` / ``SyncGroupResult`` case classes and
``Map[TopicPartition, Errors]``; these mirror them. The handlers (``server/handlers/groups.py``) turn them into
the response bodies of the request's version (``protocol/messages/groups.py``) in one place each.

Immutable values (NamedTuples: cheap to build, compared field by field), safe to pass between threads: a
callback may run on a handler thread, a purgatory reaper or the transaction verifier's thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from pykbroker.coordinator.group.group_metadata import OffsetAndMetadata

#: ``(topic, partition)``
TopicPartition = tuple[str, int]
#: OffsetCommit / TxnOffsetCommit / OffsetDelete per-partition results: ``{(topic, partition): error code}``
PartitionErrors = dict[TopicPartition, int]
#: OffsetFetch: the committed offset of each ``(topic, partition)``, None for a partition with none
FetchedOffsets = dict[TopicPartition, OffsetAndMetadata | None]


class JoinGroupMember(NamedTuple):
    """One member in the leader's JoinGroup result (``JoinGroupResponseMember``): its subscription
    ``metadata`` for the group's selected protocol."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


class JoinGroupResult(NamedTuple):
    """Kafka's ``JoinGroupResult``. ``generation_id`` -1, ``leader`` "" and no ``members`` with an error;
    ``members`` only for the leader; ``protocol_type``/``protocol_name`` None when the group has none
    (the handler answers "" before JoinGroup v7). ``skip_assignment`` (v9+): the leader must not assign
    (a static leader's rejoin, KIP-814)."""

    error_code: int
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str
    member_id: str
    skip_assignment: bool
    members: tuple[JoinGroupMember, ...]

    @classmethod
    def error(cls, code: int, member_id: str = "") -> JoinGroupResult:
        """An error result (``JoinGroupRequest.getErrorResponse``'s fields): no generation, leader or members;
        ``member_id`` is the id the member should use (MEMBER_ID_REQUIRED) or the one it sent."""
        return cls(code, -1, None, None, "", member_id, False, ())


class SyncGroupResult(NamedTuple):
    """Kafka's ``SyncGroupResult``: the member's ``assignment`` (b"" with an error) and the group's protocol."""

    error_code: int
    protocol_type: str | None
    protocol_name: str | None
    assignment: bytes

    @classmethod
    def error(cls, code: int) -> SyncGroupResult:
        return cls(code, None, None, b"")


class LeaveGroupResult(NamedTuple):
    """LeaveGroup's outcome: the top-level ``error_code`` and ``member_errors``, one per member asked to leave,
    in the request's order (Kafka's ``LeaveGroupResponse`` before it is versioned)."""

    error_code: int
    member_errors: list[int]


#: the callback of JoinGroup, called exactly once
JoinCallback = Callable[[JoinGroupResult], None]
#: the callback of SyncGroup, called exactly once
SyncCallback = Callable[[SyncGroupResult], None]
#: the callback of OffsetCommit / TxnOffsetCommit, called exactly once
CommitCallback = Callable[[PartitionErrors], None]
