"""Classic group state: members, the group state machine and committed offsets.

Mirrors ``org.apache.kafka.coordinator.group.classic.{ClassicGroup,ClassicGroupMember,ClassicGroupState}``
(the pre-KIP-848 ``GroupMetadata``/``MemberMetadata``). States and legal moves (an illegal move raises
at once)::

    Empty --join--> PreparingRebalance --all joined--> CompletingRebalance --leader sync--> Stable
    Stable/CompletingRebalance --join/leave/expiry--> PreparingRebalance --last member gone--> Empty
    Empty --offsets expired / group deleted--> Dead

Threading: every field is guarded by ``GroupMetadata.lock`` (held by the coordinator around each
operation on the group).
"""

from __future__ import annotations

import enum
import threading
from typing import TYPE_CHECKING, NamedTuple

from pykbroker.coordinator.group.consumer.group import ConsumerGroup
from pykbroker.coordinator.group.share.group import ShareGroup

if TYPE_CHECKING:
    from pykbroker.coordinator.group.group_results import JoinCallback, SyncCallback


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
VALID_PREVIOUS: dict[GroupState, set[GroupState]] = {
    _S.EMPTY: {_S.PREPARING_REBALANCE},
    _S.PREPARING_REBALANCE: {_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY},
    _S.COMPLETING_REBALANCE: {_S.PREPARING_REBALANCE},
    _S.STABLE: {_S.COMPLETING_REBALANCE},
    _S.DEAD: {_S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD},
}


class IllegalGroupTransition(RuntimeError):
    pass


class OffsetAndMetadata(NamedTuple):
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


class MemberMetadata:
    """One member: its protocols (``[(name, metadata bytes)]``), timeouts (ms), the assignment it was
    given, and the pending JoinGroup / SyncGroup response callbacks while it waits."""

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ):
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = b""
        self.awaiting_join: JoinCallback | None = None
        self.awaiting_sync: SyncCallback | None = None
        self.heartbeat_generation = 0  # bumped on every heartbeat; a DelayedHeartbeat checks it

    def metadata_for(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(protocol)

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]


class GroupMetadata:
    def __init__(self, group_id: str, state: GroupState = GroupState.EMPTY):
        self.group_id = group_id
        self.state = state
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: set[str] = set()  # KIP-394: ids handed out, first join pending
        #: members of the current generation that have not sent their SyncGroup yet (KIP-814's completion:
        #: removed when the rebalance timeout passes without it, Kafka's pendingSyncMembers)
        self.pending_sync_members: set[str] = set()
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        #: TxnOffsetCommit offsets appended but not yet committed or aborted, per producer id (KIP-98):
        #: they become ``offsets`` when the COMMIT marker reaches the group's partition.
        self.pending_transactional_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = {}
        self.lock = threading.RLock()
        #: the KIP-848 state when this is a ``consumer`` group (its classic state then stays Empty and it has no
        #: classic members); None for a classic group
        self.consumer_group: ConsumerGroup | None = None
        #: the KIP-932 state when this is a ``share`` group (no classic members, no committed offsets: a share
        #: group's progress is the share coordinator's); None otherwise
        self.share_group: ShareGroup | None = None
        self.new_member_added = False
        self.state_timestamp = -1

    @property
    def group_type(self) -> str:
        """``consumer`` (KIP-848), ``share`` (KIP-932) or ``classic`` (ListGroups' group type, KIP-1043)."""
        if self.share_group is not None:
            return "share"
        return "classic" if self.consumer_group is None else "consumer"

    def is_in_use(self) -> bool:
        """Whether members (of either protocol) are in the group: its offsets then neither expire nor go. A share
        group is always in use: it does not expire (Kafka's ``ShareGroup.shouldExpire``), it is deleted."""
        if self.share_group is not None:
            return True
        if self.consumer_group is not None and self.consumer_group.members:
            return True
        return self.state is not GroupState.EMPTY

    def has_pending_offset_commits(self, tp: tuple[str, int]) -> bool:
        """Whether an open transaction holds an offset for ``tp`` (OffsetFetch require_stable)."""
        return any(tp in offsets for offsets in self.pending_transactional_offsets.values())

    def complete_pending_txn_offset_commit(self, producer_id: int, commit: bool) -> None:
        """The transaction of ``producer_id`` ended: apply (COMMIT) or drop (ABORT) its offsets."""
        pending = self.pending_transactional_offsets.pop(producer_id, None)
        if pending and commit:
            self.offsets.update(pending)

    def transition_to(self, target: GroupState, now_ms: int = -1) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalGroupTransition(
                f"Group {self.group_id} should be in one of "
                f"{sorted(s.value for s in VALID_PREVIOUS[target])} before moving to "
                f"{target.value}, not {self.state.value}"
            )
        self.state = target
        self.state_timestamp = now_ms

    # -- members --------------------------------------------------------------------------------------
    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_sync_members.discard(member_id)
        return member

    def supports_protocols(self, protocol_type: str, protocols: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        return protocol_type == self.protocol_type and any(
            all(p in m.protocol_names for m in self.members.values()) for p in protocols
        )

    def select_protocol(self) -> str:
        """The protocol every member supports with the most first-preference votes (Kafka's vote)."""
        candidates = [
            p
            for p in next(iter(self.members.values())).protocol_names
            if all(p in m.protocol_names for m in self.members.values())
        ]
        votes = {p: 0 for p in candidates}
        for m in self.members.values():
            for p in m.protocol_names:
                if p in votes:
                    votes[p] += 1
                    break
        return max(candidates, key=lambda p: (votes[p], -candidates.index(p)))

    def all_members_joined(self) -> bool:
        return all(m.awaiting_join is not None for m in self.members.values()) and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        self.pending_sync_members.clear()
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
