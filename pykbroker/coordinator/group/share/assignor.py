"""The share groups' server-side assignor ``simple`` (Kafka's ``SimpleAssignor``, KIP-932, as balanced in Kafka 4.1).

Partitions of a share group are shared: several members may fetch from one share partition (each record is handed
to one of them). Per subscribed topic, among the members subscribing to it (sorted by member id):

- at most as many members as partitions: each partition goes to exactly one member, the members getting
  ``floor(n / m)`` or ``ceil(n / m)`` partitions each;
- more members than partitions: each member gets exactly one partition, the partitions being shared by
  ``floor(m / n)`` or ``ceil(m / n)`` members each.

The assignment is sticky: a member keeps what it had in the previous target assignment as far as the balance
allows, and only the rest moves. Pure functions, no I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from pykbroker.coordinator.group.share.member import TopicPartitions


def assign(
    subscriptions: Mapping[str, Iterable[str]],
    topics: dict[str, tuple[uuid.UUID, int]],
    previous: dict[str, TopicPartitions] | None = None,
) -> dict[str, TopicPartitions]:
    """The target assignment ``{member id: {topic id: partitions}}`` of members subscribing to topic names
    (``subscriptions``: ``{member id: names}``), given the topics that exist (``topics``: ``{name: (topic id,
    partition count)}``; names that do not exist are skipped) and the ``previous`` target. Every member is in the
    result (maybe with nothing)."""
    previous = previous or {}
    out: dict[str, TopicPartitions] = {m: {} for m in subscriptions}
    subscribers: dict[str, list[str]] = {}
    for member_id in sorted(subscriptions):
        for name in subscriptions[member_id]:
            subscribers.setdefault(name, []).append(member_id)
    for name in sorted(subscribers):
        if name not in topics:
            continue
        topic_id, count = topics[name]
        if count <= 0:
            continue
        members = subscribers[name]
        had = {m: sorted(p for p in previous.get(m, {}).get(topic_id, ()) if p < count) for m in members}
        if len(members) <= count:
            per_member = _spread_partitions(members, count, had)
        else:
            per_member = _share_partitions(members, count, had)
        for member_id, parts in per_member.items():
            if parts:
                out[member_id][topic_id] = parts
    return out


def _spread_partitions(members: list[str], count: int, had: dict[str, list[int]]) -> dict[str, set[int]]:
    """Each partition to one member; members get ``base`` or ``base + 1`` partitions."""
    base, extra = divmod(count, len(members))
    out: dict[str, set[int]] = {m: set() for m in members}
    taken: set[int] = set()
    for m in members:  # keep what they had, up to the quota (one more while extra slots remain)
        for p in had[m]:
            if p in taken:
                continue
            if len(out[m]) < base or (len(out[m]) == base and extra > 0):
                if len(out[m]) == base:
                    extra -= 1
                out[m].add(p)
                taken.add(p)
    free = [p for p in range(count) if p not in taken]
    for m in members:  # fill everyone to the base quota
        while len(out[m]) < base and free:
            out[m].add(free.pop(0))
    for m in members:  # the remaining extra slots, one each
        if not free:
            break
        if len(out[m]) == base and extra > 0:
            out[m].add(free.pop(0))
            extra -= 1
    return out


def _share_partitions(members: list[str], count: int, had: dict[str, list[int]]) -> dict[str, set[int]]:
    """Each member gets one partition; partitions get ``base`` or ``base + 1`` members."""
    base, extra = divmod(len(members), count)
    load = [0] * count
    out: dict[str, set[int]] = {}
    for m in members:  # keep its partition when that one is not full yet
        for p in had[m]:
            if load[p] < base or (load[p] == base and extra > 0):
                if load[p] == base:
                    extra -= 1
                load[p] += 1
                out[m] = {p}
                break
    for m in members:
        if m in out:
            continue
        p = min(range(count), key=lambda i: (load[i], i))
        load[p] += 1
        out[m] = {p}
    return out
