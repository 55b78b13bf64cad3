"""The target assignment of a consumer group (Kafka's ``TargetAssignmentBuilder``).

:func:`subscription_metadata` resolves the members' subscriptions (topic names, and a regular expression matched
in full against the topic names, KIP-848's ``subscribed_topic_regex``) against the metadata image's topics;
:func:`build_target` runs the group's assignor over them. Topics that do not exist are left out (their members get
nothing of them until they are created); a topic whose partition count changed or that was deleted changes the
subscription metadata, which bumps the group epoch and so recomputes the target.

Pure functions; the caller holds the group's lock.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Mapping

from pykbroker.coordinator.group.consumer.assignors import ASSIGNORS
from pykbroker.coordinator.group.consumer.member import ConsumerGroupMember, TopicPartitions

#: topic name -> (topic id, number of partitions)
TopicsView = Mapping[str, tuple[uuid.UUID, int]]


def member_topics(member: ConsumerGroupMember, topic_names: Iterable[str]) -> set[str]:
    """The existing topics ``member`` subscribes to: its names, plus those its regex matches in full."""
    names = set(topic_names)
    out = {n for n in member.subscribed_topic_names if n in names}
    if member.subscribed_topic_regex:
        try:
            pattern = re.compile(member.subscribed_topic_regex)
        except re.error:
            return out
        out.update(n for n in names if pattern.fullmatch(n) and not n.startswith("__"))
    return out


def subscription_metadata(members: Iterable[ConsumerGroupMember], topics: TopicsView) -> dict[str, tuple]:
    """``{topic name: (topic id, partitions)}`` of every existing topic some member subscribes to."""
    wanted: set[str] = set()
    for m in members:
        wanted |= member_topics(m, topics)
    return {n: topics[n] for n in sorted(wanted)}


def build_target(
    members: Mapping[str, ConsumerGroupMember],
    metadata: Mapping[str, tuple[uuid.UUID, int]],
    assignor: str,
    current: Mapping[str, TopicPartitions],
    assign: Callable | None = None,
) -> dict[str, TopicPartitions]:
    """The new target assignment of every member (``{member id: {topic id: partitions}}``)."""
    subscriptions = {mid: frozenset(metadata[n][0] for n in member_topics(m, metadata)) for mid, m in members.items()}
    partitions = {tid: n for tid, n in metadata.values()}
    fn = assign or ASSIGNORS[assignor]
    return fn(subscriptions, partitions, current)
