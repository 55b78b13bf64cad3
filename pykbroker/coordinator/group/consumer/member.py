"""A member of a consumer group (Kafka's ``ConsumerGroupMember`` and ``MemberState``).

Epochs: ``member_epoch`` is the epoch of the assignment the member holds (0 before its first assignment),
``previous_member_epoch`` the one before (a heartbeat with it is accepted once, when the response that bumped the
epoch was lost). ``assigned`` is what the member owns and may use; ``pending_revocation`` what it must give up
before its epoch moves on. Assignments are ``{topic id: set of partitions}``.

Threading: guarded by the group's lock (``GroupMetadata.lock``).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field

TopicPartitions = dict[uuid.UUID, set[int]]

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2


class MemberState(enum.Enum):
    """Kafka's ``MemberState``: STABLE when reconciled to its epoch; UNREVOKED_PARTITIONS while it must revoke
    partitions; UNRELEASED_PARTITIONS while partitions of its target are still owned by others."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """What a member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside a consumer group told its
    JoinGroup (Kafka's ``ConsumerGroupMemberMetadataValue.ClassicMemberMetadata``, KIP-848 online migration): its
    session timeout (ms) and its protocols ``((name, ConsumerProtocolSubscription bytes), ...)``."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass
class ConsumerGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned: TopicPartitions = field(default_factory=dict)
    pending_revocation: TopicPartitions = field(default_factory=dict)
    #: bumped on every heartbeat; the session-timeout operation of an older heartbeat finds it moved on
    heartbeat_generation: int = 0
    #: set while the member uses the classic protocol (online migration), None for a consumer-protocol member
    classic: ClassicMemberMetadata | None = None

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def subscription(self) -> tuple:
        """What a change of bumps the group epoch (Kafka's ``hasMemberSubscriptionChanged``)."""
        return (tuple(sorted(self.subscribed_topic_names)), self.subscribed_topic_regex, self.server_assignor)


def from_request(topic_partitions: list[dict] | None) -> TopicPartitions | None:
    """The request's ``topic_partitions`` (``[{"topic_id", "partitions"}]``, or None) as an assignment."""
    if topic_partitions is None:
        return None
    out: TopicPartitions = {}
    for tp in topic_partitions:
        out.setdefault(tp["topic_id"], set()).update(tp["partitions"])
    return out
