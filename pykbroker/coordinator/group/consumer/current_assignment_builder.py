"""Per-member reconciliation of a consumer group (Kafka's ``CurrentAssignmentBuilder``, KIP-848).

:func:`reconcile` moves a member towards the group's target assignment one step:

- partitions the member holds that are no longer in its target are revoked first: the member stays in its epoch
  in UNREVOKED_PARTITIONS until a heartbeat's owned partitions no longer hold them (a heartbeat without owned
  partitions proves nothing);
- partitions of its target are given only once no other member owns them (``partition_epoch(topic id,
  partition)`` answers -1 for a free partition); the others stay *unreleased* (UNRELEASED_PARTITIONS) and are
  given on a later heartbeat. Hence a partition is never owned by two members at once;
- otherwise the member reaches the target epoch, STABLE.

Pure function on :class:`~.member.ConsumerGroupMember` values; the caller holds the group's lock.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable

from pykbroker.coordinator.group.consumer.member import ConsumerGroupMember, MemberState, TopicPartitions


def _owns_any(owned: TopicPartitions | None, revoking: TopicPartitions) -> bool:
    if owned is None:
        return True
    return any(owned.get(t, set()) & ps for t, ps in revoking.items())


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: TopicPartitions,
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: TopicPartitions | None,
) -> ConsumerGroupMember:
    """The member's next state (a new object, or ``member`` itself when nothing changes). ``owned``: the
    partitions the heartbeat reports owned, None when it did not say."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)


def _with(member: ConsumerGroupMember, state: MemberState, epoch: int, assigned, revoking) -> ConsumerGroupMember:
    previous = member.member_epoch if epoch != member.member_epoch else member.previous_member_epoch
    return dataclasses.replace(
        member,
        state=state,
        member_epoch=epoch,
        previous_member_epoch=previous,
        assigned=assigned,
        pending_revocation=revoking,
    )


def _next(
    member: ConsumerGroupMember,
    member_epoch: int,
    target_epoch: int,
    target: TopicPartitions,
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: TopicPartitions | None,
) -> ConsumerGroupMember:
    assigned: TopicPartitions = {}
    revoking: TopicPartitions = {}
    pending: TopicPartitions = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned):
        want = target.get(topic_id, set())
        have = member.assigned.get(topic_id, set())
        keep = have & want
        if keep:
            assigned[topic_id] = set(keep)
        if have - keep:
            revoking[topic_id] = have - keep
        free = {p for p in want - keep if partition_epoch(topic_id, p) == -1}
        unreleased = unreleased or len(free) < len(want - keep)
        if free:
            pending[topic_id] = free
    if revoking and _owns_any(owned, revoking):
        return _with(member, MemberState.UNREVOKED_PARTITIONS, member_epoch, assigned, revoking)
    for topic_id, ps in pending.items():
        assigned.setdefault(topic_id, set()).update(ps)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _with(member, state, target_epoch, assigned, {})
