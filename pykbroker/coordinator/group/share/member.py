"""A member of a share group (Kafka's ``ShareGroupMember``, KIP-932).

Unlike a consumer group member, a share group member never revokes anything: partitions are shared by the members
(a share partition hands out each record to one of them), so a member takes its target assignment as soon as it is
computed and is always in state STABLE. ``member_epoch`` is the epoch of the assignment it holds (0 before its
first one), ``previous_member_epoch`` the one before (a heartbeat with it is accepted: the response that bumped
the epoch was lost). Assignments are ``{topic id: set of partitions}``.

Threading: guarded by the group's lock (``GroupMetadata.lock``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

TopicPartitions = dict[uuid.UUID, set[int]]

JOIN_EPOCH = 0
LEAVE_EPOCH = -1


@dataclass
class ShareGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assigned: TopicPartitions = field(default_factory=dict)
    #: bumped on every heartbeat; the session-timeout operation of an older heartbeat finds it moved on
    heartbeat_generation: int = 0
