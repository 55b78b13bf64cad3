"""The state of a share group (Kafka's ``ShareGroup``, KIP-932).

- ``group_epoch``: bumped whenever the target assignment must be recomputed (a member joins, leaves or changes its
  subscription; the subscribed topics' partitions change);
- ``assignment_epoch`` and ``target``: the target assignment (``{member id: {topic id: set of partitions}}``) and
  the group epoch it was computed at; a partition may be in the target of several members;
- ``subscription_metadata``: ``{topic name: (topic id, number of partitions)}`` of the subscribed topics that exist,
  as of the last computation (a difference found on a heartbeat bumps the group epoch). Not persisted (Kafka 4.1+
  keeps a hash of it): after a load the first heartbeat recomputes it, and a difference bumps the epoch.
- ``state_topics``: the partitions whose share-partition state is initialized (Kafka's ShareGroupStatePartitionMetadata
  ``InitializedTopics``): only these are assigned (Kafka 4.1+ ``topicPartitionAllowedMap``); ``initializing``: the
  partitions whose initialization is under way (:mod:`.state_initializer`; in memory only: a new coordinator starts
  them again).

States (Kafka's ``ShareGroup.ShareGroupState``, derived): Empty (no member), Stable, Dead (deleted or unloaded).

Threading: guarded by the lock of the :class:`~pykbroker.coordinator.group.group_metadata.GroupMetadata` that holds
it.
"""

from __future__ import annotations

import uuid

from pykbroker.coordinator.group.share.member import ShareGroupMember, TopicPartitions

EMPTY, STABLE, DEAD = "Empty", "Stable", "Dead"
#: the only share group assignor (Kafka's ``SimpleAssignor``, ``group.share.assignors``)
ASSIGNOR_NAME = "simple"


class ShareGroup:
    def __init__(self, group_id: str):
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareGroupMember] = {}
        self.target: dict[str, TopicPartitions] = {}
        self.subscription_metadata: dict[str, tuple[uuid.UUID, int]] = {}
        #: ``{topic id: (topic name, partitions)}`` whose share-partition state may exist (assigned to a member
        #: once, or set by AlterShareGroupOffsets): what DescribeShareGroupOffsets without topics describes and
        #: DeleteGroups deletes (Kafka's ShareGroupStatePartitionMetadata ``InitializedTopics``)
        self.state_topics: dict[uuid.UUID, tuple[str, set[int]]] = {}
        #: ``{(topic id, partition)}`` whose state the coordinator is initializing (not assignable yet)
        self.initializing: set[tuple[uuid.UUID, int]] = set()
        self.dead = False
        #: ``{key: value}`` of the records last written for this group to ``__consumer_offsets`` (None: unknown,
        #: everything is written again); see :func:`~pykbroker.coordinator.group.share.record_codec.records_of`
        self.persisted: dict[bytes, bytes] | None = {}

    @property
    def state(self) -> str:
        if self.dead:
            return DEAD
        return STABLE if self.members else EMPTY

    def subscribed_topic_names(self) -> set[str]:
        """Every topic name some member subscribes to."""
        names: set[str] = set()
        for m in self.members.values():
            names.update(m.subscribed_topic_names)
        return names

    def add_state_partitions(self, topic_id: uuid.UUID, name: str, partitions) -> None:
        """Note that share-partition state of these partitions may exist."""
        _, known = self.state_topics.get(topic_id, (name, set()))
        self.state_topics[topic_id] = (name, known | set(partitions))

    def initialized_partitions(self, topic_id: uuid.UUID) -> set[int]:
        """The partitions of ``topic_id`` whose share-partition state is initialized (assignable)."""
        return self.state_topics.get(topic_id, ("", set()))[1]

    def remove_member(self, member_id: str) -> ShareGroupMember | None:
        """Drop the member and its target assignment."""
        self.target.pop(member_id, None)
        return self.members.pop(member_id, None)
