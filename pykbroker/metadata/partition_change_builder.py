"""PartitionChangeBuilder: the PartitionChangeRecord that moves one partition to a target ISR (Kafka's
``PartitionChangeBuilder``, its non-ELR path with an online election).

Given the current :class:`PartitionRegistration`, a target ISR and which brokers may lead, :func:`build`
returns a ``PartitionChangeRecord`` (or None when nothing changes):

- election (Kafka's ``electAnyLeader``): the current leader stays if it is in the target ISR and
  acceptable; else the first replica (in replica order) in the target ISR and acceptable leads; else,
  with ``unclean`` (``unclean.leader.election.enable`` for the topic), the first acceptable replica
  outside the ISR leads and becomes the whole ISR (data the old ISR had may be lost); else the leader
  becomes -1 (NO_LEADER). A leader change makes replay bump the leader epoch. Kafka marks an
  uncleanly elected leader RECOVERING until it has aborted open transactions (KIP-704); pykbroker has
  no transactions and writes RECOVERED.
- ISR: set to the target when it differs and is not empty. Without ELR an empty target keeps the ISR
  as it is, so a partition whose last ISR member is fenced or shuts down keeps that member in its ISR
  with leader -1, and gets it back as leader (leader epoch + 1) when it is unfenced. From
  metadata.version 3.6-IV0 on, an ISR shrink alone does not bump the leader epoch (KAFKA-15021), so
  pykbroker (which writes later versions) never does.
- Reassignment (KIP-455, Kafka's ``completeReassignmentIfNeeded`` / ``PartitionReassignmentReplicas``): the
  target replicas, removing and adding replicas default to the partition's. While a reassignment is in
  progress (removing or adding not empty) every build first tries to complete it: the removing replicas
  leave the target ISR and replicas (unless that empties either), and when the target ISR then holds every
  remaining replica the record sets replicas to them and clears removing/adding. The election looks at the
  target replicas, so a removed leader hands leadership to the first remaining ISR member. A record whose
  replicas drop a current replica bumps the leader epoch (``leader`` set to the current leader when the
  election keeps it, Kafka's ``triggerLeaderEpochBumpForReplicaReassignmentIfNeeded``), so the removed
  replicas' fetches are fenced.
- Every record bumps the partition epoch when replayed.

Pure functions; no state.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from pykbroker.metadata.partition_registration import PartitionRegistration
from pykbroker.metadata.records import NO_LEADER, PARTITION_CHANGE_RECORD, ApiMessageAndVersion

#: PartitionChangeRecord version written (no directories, no ELR, as PartitionRecord v0)
PARTITION_CHANGE_RECORD_VERSION = 0


def is_reassignment_in_progress(partition: PartitionRegistration) -> bool:
    """Kafka's ``PartitionReassignmentReplicas.isReassignmentInProgress``: removing or adding replicas."""
    return bool(partition.removing_replicas or partition.adding_replicas)


def reassignment_replicas(current: Sequence[int], target: Sequence[int]) -> tuple[list[int], list[int], list[int]]:
    """Kafka's ``PartitionReassignmentReplicas(current, target)``: ``(replicas, removing, adding)`` where
    ``replicas`` is the target followed by the removed replicas (sorted), ``removing`` the current replicas
    not in the target and ``adding`` the target replicas not current (both sorted)."""
    removing = sorted(set(current) - set(target))
    adding = sorted(set(target) - set(current))
    return [*target, *removing], removing, adding


def maybe_complete_reassignment(
    replicas: Sequence[int], removing: Sequence[int], adding: Sequence[int], target_isr: Sequence[int]
) -> tuple[list[int], list[int]] | None:
    """Kafka's ``maybeCompleteReassignment``: ``(replicas, isr)`` once the reassignment can complete (the
    ISR without the removing replicas holds every remaining replica), else None."""
    if not removing and not adding:
        return None
    isr, new_replicas = list(target_isr), list(replicas)
    if removing:
        isr = [r for r in target_isr if r not in removing]
        if not isr:
            return None
        new_replicas = [r for r in replicas if r not in removing]
        if not new_replicas:
            return None
    if not set(new_replicas) <= set(isr):
        return None
    return new_replicas, isr


def original_replicas(partition: PartitionRegistration) -> list[int]:
    """The replicas before an ongoing reassignment (Kafka's ``originalReplicas``): without the adding ones."""
    return [r for r in partition.replicas if r not in partition.adding_replicas]


def elect_leader(
    partition: PartitionRegistration,
    target_isr: Sequence[int],
    is_acceptable_leader: Callable[[int], bool],
    unclean: bool = False,
    target_replicas: Sequence[int] | None = None,
) -> tuple[int, bool]:
    """Kafka's ``electAnyLeader``: ``(new leader or NO_LEADER, whether the election was unclean)``; the
    candidates are ``target_replicas`` (default: the partition's replicas) in order."""
    replicas = partition.replicas if target_replicas is None else target_replicas
    if partition.leader in target_isr and is_acceptable_leader(partition.leader):
        return partition.leader, False
    for replica in replicas:
        if replica in target_isr and is_acceptable_leader(replica):
            return replica, False
    if unclean:
        for replica in replicas:
            if is_acceptable_leader(replica):
                return replica, True
    return NO_LEADER, False


def build_leader_change(
    topic_id: uuid.UUID, partition_id: int, partition: PartitionRegistration, leader: int
) -> ApiMessageAndVersion | None:
    """A PartitionChangeRecord making ``leader`` (a replica in the ISR) the leader (preferred-leader
    election), or None if it already leads."""
    if leader == partition.leader:
        return None
    return ApiMessageAndVersion(
        PARTITION_CHANGE_RECORD,
        PARTITION_CHANGE_RECORD_VERSION,
        {"topic_id": topic_id, "partition_id": partition_id, "leader": leader},
    )


def build(
    topic_id: uuid.UUID,
    partition_id: int,
    partition: PartitionRegistration,
    target_isr: Sequence[int],
    is_acceptable_leader: Callable[[int], bool],
    unclean: bool = False,
    target_replicas: Sequence[int] | None = None,
    target_removing: Sequence[int] | None = None,
    target_adding: Sequence[int] | None = None,
) -> ApiMessageAndVersion | None:
    """The PartitionChangeRecord taking ``partition`` to ``target_isr`` (and the target replicas, removing
    and adding replicas; None = the partition's) with a fresh election and, when it can, the completion of
    a reassignment (module docstring), or None if it would change nothing."""
    data: dict = {"topic_id": topic_id, "partition_id": partition_id}
    replicas = list(partition.replicas if target_replicas is None else target_replicas)
    removing = list(partition.removing_replicas if target_removing is None else target_removing)
    adding = list(partition.adding_replicas if target_adding is None else target_adding)
    completed = maybe_complete_reassignment(replicas, removing, adding, target_isr)
    if completed is not None:
        replicas, target_isr = completed
        removing, adding = [], []
    leader, was_unclean = elect_leader(partition, target_isr, is_acceptable_leader, unclean, replicas)
    if was_unclean:
        target_isr = [leader]
    if leader != partition.leader:
        data["leader"] = leader
    elif not set(partition.replicas) <= set(replicas):
        data["leader"] = partition.leader  # a replica leaves: bump the leader epoch
    if target_isr and tuple(target_isr) != partition.isr:
        data["isr"] = list(target_isr)
    if replicas and tuple(replicas) != partition.replicas:
        data["replicas"] = replicas
    if tuple(removing) != partition.removing_replicas:
        data["removing_replicas"] = removing
    if tuple(adding) != partition.adding_replicas:
        data["adding_replicas"] = adding
    if len(data) == 2:
        return None
    return ApiMessageAndVersion(PARTITION_CHANGE_RECORD, PARTITION_CHANGE_RECORD_VERSION, data)
