"""The state of a consumer group (Kafka's ``ConsumerGroup``, KIP-848).

- ``group_epoch``: bumped whenever the target assignment must be recomputed (a member joins, leaves or changes its
  subscription; the subscribed topics' partitions change);
- ``assignment_epoch`` and ``target``: the target assignment (``{member id: {topic id: set of partitions}}``) and
  the group epoch it was computed at;
- ``partition_epochs``: ``{(topic id, partition): member epoch}`` of every partition a member holds or is revoking:
  a partition is given to a member only while absent here (never owned twice);
- ``subscription_metadata``: ``{topic name: (topic id, number of partitions)}`` of the subscribed topics that exist,
  as of the last computation (a difference found on a heartbeat bumps the group epoch).

States (Kafka's ``ConsumerGroupState``, derived): Empty (no member), Assigning (group epoch ahead of the
assignment epoch), Reconciling (a member not yet at the assignment epoch, or not STABLE), Stable.

Threading: guarded by the lock of the :class:`~pykbroker.coordinator.group.group_metadata.GroupMetadata` that holds
it (committed offsets live there, shared with classic groups).
"""

from __future__ import annotations

import uuid

from pykbroker.coordinator.group.consumer.member import ConsumerGroupMember, TopicPartitions

EMPTY, ASSIGNING, RECONCILING, STABLE, DEAD = "Empty", "Assigning", "Reconciling", "Stable", "Dead"


class ConsumerGroup:
    def __init__(self, group_id: str):
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target: dict[str, TopicPartitions] = {}
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        self.subscription_metadata: dict[str, tuple[uuid.UUID, int]] = {}
        #: group.instance.id -> member id of the static members (KIP-345 in KIP-848)
        self.static_members: dict[str, str] = {}
        self.dead = False
        #: ``{key: value}`` of the records last written for this group to ``__consumer_offsets`` (None: unknown,
        #: everything is written again); see :func:`~pykbroker.coordinator.group.consumer.record_codec.records_of`
        self.persisted: dict[bytes, bytes] | None = {}

    # -- state -------------------------------------------------------------------------------------------
    @property
    def state(self) -> str:
        if self.dead:
            return DEAD
        if not self.members:
            return EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return RECONCILING
        return STABLE

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the member owning the partition, -1 when free (Kafka's ``currentPartitionEpoch``)."""
        return self.partition_epochs.get((topic_id, partition), -1)

    # -- members -----------------------------------------------------------------------------------------
    def update_member(self, new: ConsumerGroupMember) -> None:
        """Put ``new`` in place of the member of its id, moving its partitions' epochs (assigned and revoking)."""
        old = self.members.get(new.member_id)
        if old is not None:
            self._release(old)
        self.members[new.member_id] = new
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id
        for tps in (new.assigned, new.pending_revocation):
            for topic_id, parts in tps.items():
                for p in parts:
                    holder = self.partition_epochs.get((topic_id, p))
                    if holder is not None:
                        raise RuntimeError(f"partition {topic_id}-{p} is owned by another member (epoch {holder})")
                    self.partition_epochs[(topic_id, p)] = new.member_epoch

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        """Drop the member, its target assignment and its partitions (they become free)."""
        member = self.members.pop(member_id, None)
        if member is not None:
            self._release(member)
            if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
                del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        return member

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def replace_static_member(self, old: ConsumerGroupMember, new: ConsumerGroupMember) -> None:
        """A static member rejoined under ``new``'s member id: ``old`` goes, ``new`` takes its target assignment
        and its partitions (Kafka's ``replaceMember``)."""
        target = self.target.get(old.member_id)
        self.remove_member(old.member_id)
        if target is not None:
            self.target[new.member_id] = target
        self.update_member(new)

    def rebuild_indexes(self) -> None:
        """Recompute ``partition_epochs`` and ``static_members`` from the members (after a replay of
        ``__consumer_offsets``, where the members' records arrive one by one)."""
        self.partition_epochs.clear()
        self.static_members.clear()
        for m in self.members.values():
            if m.instance_id is not None:
                self.static_members[m.instance_id] = m.member_id
            for tps in (m.assigned, m.pending_revocation):
                for topic_id, parts in tps.items():
                    for p in parts:
                        self.partition_epochs[(topic_id, p)] = m.member_epoch

    def _release(self, member: ConsumerGroupMember) -> None:
        for tps in (member.assigned, member.pending_revocation):
            for topic_id, parts in tps.items():
                for p in parts:
                    self.partition_epochs.pop((topic_id, p), None)

    def subscribed_topic_names(self, extra: ConsumerGroupMember | None = None, without: str | None = None) -> set[str]:
        """Topic names subscribed by name by the members (``extra`` in place of its id, ``without`` left out)."""
        names: set[str] = set()
        for m in self.members.values():
            if m.member_id in (without, extra.member_id if extra else None):
                continue
            names.update(m.subscribed_topic_names)
        if extra is not None:
            names.update(extra.subscribed_topic_names)
        return names

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members ask for (ties: name), else ``default`` (Kafka's
        ``computePreferredServerAssignor``)."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return default
        return min(votes, key=lambda a: (-votes[a], a))
