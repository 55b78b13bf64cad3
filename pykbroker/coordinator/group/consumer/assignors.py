"""Server-side partition assignors of consumer groups (KIP-848): ``uniform`` (the default) and ``range``.

Mirrors ``org.apache.kafka.coordinator.group.assignor.{UniformAssignor,RangeAssignor}`` in behaviour (our own
algorithms). An assignor maps the group's members to partitions of the topics they subscribe to:

- input: ``members`` ``{member id: frozenset of subscribed topic ids}``, ``topics`` ``{topic id: number of
  partitions}`` (topics that do not exist are absent and ignored), ``current`` ``{member id: {topic id:
  set of partitions}}`` (the previous target assignment, used for stickiness);
- output: ``{member id: {topic id: set of partitions}}`` with an entry (maybe empty) for every member; every
  partition of a subscribed topic goes to exactly one member subscribed to its topic.

``uniform`` balances the number of partitions per member (at most one apart when all members subscribe to the
same topics; as even as the subscriptions allow otherwise) and keeps as many partitions as possible where they
were. ``range`` gives, per topic, each subscribed member (sorted by member id) a contiguous range, the first
``partitions % members`` members one partition more (co-partitioned topics land on the same member).

Pure functions; thread-safe.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

Assignment = dict[str, dict[uuid.UUID, set[int]]]

UNIFORM, RANGE = "uniform", "range"
#: Kafka's class names are accepted in ``group.consumer.assignors`` as the short names
CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": UNIFORM,
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RANGE,
}


class PartitionAssignorError(Exception):
    """An assignor could not compute an assignment (Kafka's PartitionAssignorException)."""


def _empty(members: Mapping[str, frozenset]) -> Assignment:
    return {m: {} for m in members}


def range_assign(
    members: Mapping[str, frozenset], topics: Mapping[uuid.UUID, int], current: Mapping | None = None
) -> Assignment:
    """The ``range`` assignor (see module doc); ``current`` is ignored."""
    out = _empty(members)
    for topic_id in sorted(topics, key=str):
        subscribers = sorted(m for m, subs in members.items() if topic_id in subs)
        if not subscribers:
            continue
        n = topics[topic_id]
        quota, extra = divmod(n, len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            count = quota + (1 if i < extra else 0)
            if count:
                out[m][topic_id] = set(range(start, start + count))
            start += count
    return out


def uniform_assign(
    members: Mapping[str, frozenset], topics: Mapping[uuid.UUID, int], current: Mapping | None = None
) -> Assignment:
    """The ``uniform`` assignor (see module doc): sticky, then balanced.

    1. each member keeps the partitions of ``current`` that still exist and that it still subscribes to, up to
       its fair share when every member subscribes to the same topics;
    2. the other partitions go, one at a time in (topic, partition) order, to the least loaded subscribed member
       (ties: member id);
    3. while a member holds two partitions more than another member that could take one of them, one moves.
    """
    current = current or {}
    out = _empty(members)
    load = {m: 0 for m in members}
    owner: dict[tuple[uuid.UUID, int], str] = {}
    homogeneous = len({subs for subs in members.values()}) <= 1
    if homogeneous and members:
        total = sum(n for t, n in topics.items() if t in next(iter(members.values())))
        min_quota, extra = divmod(total, len(members))
    for m in sorted(members, key=lambda m: -sum(len(p) for p in current.get(m, {}).values())):
        kept = sorted(
            (t, p)
            for t, parts in current.get(m, {}).items()
            if t in members[m] and t in topics
            for p in parts
            if p < topics[t]
        )
        if homogeneous:
            cap = min_quota + (1 if extra > 0 and len(kept) > min_quota else 0)
            if cap > min_quota:
                extra -= 1
            kept = kept[:cap]
        for tp in kept:
            if tp in owner:
                continue  # two members claimed it (an inconsistent input): the first keeps it
            owner[tp] = m
            out[m].setdefault(tp[0], set()).add(tp[1])
            load[m] += 1
    for topic_id in sorted(topics, key=str):
        subscribers = sorted(m for m, subs in members.items() if topic_id in subs)
        if not subscribers:
            continue
        for p in range(topics[topic_id]):
            if (topic_id, p) in owner:
                continue
            m = min(subscribers, key=lambda x: (load[x], x))
            owner[(topic_id, p)] = m
            out[m].setdefault(topic_id, set()).add(p)
            load[m] += 1
    _balance(members, out, load)
    return {m: {t: ps for t, ps in a.items() if ps} for m, a in out.items()}


def _balance(members: Mapping[str, frozenset], out: Assignment, load: dict[str, int]) -> None:
    """Move partitions from more loaded members to less loaded subscribed ones (two or more apart) until a pass over
    the members moves none."""
    subscribers: dict[uuid.UUID, list[str]] = {}
    for m in sorted(members):
        for topic_id in members[m]:
            subscribers.setdefault(topic_id, []).append(m)
    moved = True
    while moved:
        moved = False
        for src in sorted(members, key=lambda x: (-load[x], x)):
            for topic_id in sorted(out[src], key=str):
                parts = out[src][topic_id]
                while parts:
                    dst = min(subscribers[topic_id], key=lambda x: (load[x], x))
                    if load[dst] + 1 >= load[src]:
                        break
                    p = max(parts)
                    parts.discard(p)
                    out[dst].setdefault(topic_id, set()).add(p)
                    load[src] -= 1
                    load[dst] += 1
                    moved = True


ASSIGNORS = {UNIFORM: uniform_assign, RANGE: range_assign}


def assignor_names(configured: list[str]) -> list[str]:
    """``group.consumer.assignors`` as short names (Kafka's class names mapped); unknown names raise ValueError."""
    names = []
    for name in configured:
        short = CLASS_NAMES.get(name.strip(), name.strip())
        if short not in ASSIGNORS:
            raise ValueError(f"Unknown consumer group assignor {name}")
        names.append(short)
    return names
