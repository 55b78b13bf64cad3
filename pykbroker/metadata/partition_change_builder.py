"""PartitionChangeBuilder: the PartitionChangeRecord that moves one partition to a target ISR (Kafka's
``PartitionChangeBuilder`` with an online election, with or without eligible leader replicas).

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
- ELR (KIP-966, ``eligible.leader.replicas.version`` >= 1): while the target ISR is below the topic's
  ``min.insync.replicas`` the replicas that leave the ISR (and the ELR that stay out of it) form the eligible
  leader replicas, minus those that shut down uncleanly; at ``min.insync.replicas`` or more the ELR is
  cleared. The ISR may become empty; a replica of the ELR may then be elected cleanly (it becomes the ISR and
  leaves the ELR). The last known ELR keeps the last leader when the ISR first becomes empty (Kafka's
  balanced recovery: with ISR and ELR empty that leader is elected, uncleanly) and is cleared once the
  partition has a leader. An unclean election clears the ELR. Such records are PartitionChangeRecord v2.
- Every record bumps the partition epoch when replayed.

Pure functions; no state.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence

from pykbroker.metadata import directory_id
from pykbroker.metadata.partition_registration import PartitionRegistration
from pykbroker.metadata.records import NO_LEADER, NO_LEADER_CHANGE, PARTITION_CHANGE_RECORD, ApiMessageAndVersion

#: PartitionChangeRecord version written without ELR (no directories, as PartitionRecord v0)
PARTITION_CHANGE_RECORD_VERSION = 0
#: ... with directories (KIP-858, Kafka's version from 3.7-IV2)
PARTITION_CHANGE_RECORD_DIRECTORIES_VERSION = 1
#: ... and with ELR enabled (``eligible_leader_replicas`` / ``last_known_elr``, Kafka's version from 4.0-IV1)
PARTITION_CHANGE_RECORD_ELR_VERSION = 2


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
    target_elr: Sequence[int] = (),
    elr_enabled: bool = False,
) -> tuple[int, bool]:
    """Kafka's ``electAnyLeader``: ``(new leader or NO_LEADER, whether the election was unclean)``; the
    candidates are ``target_replicas`` (default: the partition's replicas) in order. A valid leader is in
    the target ISR, or in ``target_elr`` when the target ISR is empty (KIP-966), and acceptable; with ELR
    enabled and both empty, the last known leader (``last_known_elr`` of one member) is elected uncleanly if
    acceptable (Kafka's ``canElectLastKnownLeader``, the balanced recovery)."""
    replicas = partition.replicas if target_replicas is None else target_replicas

    def valid(replica: int) -> bool:
        return (replica in target_isr or (not target_isr and replica in target_elr)) and is_acceptable_leader(replica)

    if valid(partition.leader):
        return partition.leader, False
    for replica in replicas:
        if valid(replica):
            return replica, False
    if (
        elr_enabled
        and not target_isr
        and not target_elr
        and len(partition.last_known_elr) == 1
        and is_acceptable_leader(partition.last_known_elr[0])
    ):
        return partition.last_known_elr[0], True
    if unclean:
        for replica in replicas:
            if is_acceptable_leader(replica):
                return replica, True
    return NO_LEADER, False


def target_elr(
    partition: PartitionRegistration, target_isr: Sequence[int], min_isr: int, unclean_shutdown: Sequence[int] = ()
) -> list[int]:
    """Kafka's ``maybePopulateTargetElr`` (ELR enabled): empty when the target ISR reaches ``min_isr``; else the
    current ISR and ELR members that leave (or are not in) the target ISR, minus replicas that shut down
    uncleanly, sorted."""
    if len(target_isr) >= min_isr:
        return []
    candidates = set(partition.elr) | set(partition.isr)
    return sorted(r for r in candidates if r not in target_isr and r not in unclean_shutdown)


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
    elr_enabled: bool = False,
    min_isr: int = 1,
    unclean_shutdown_replicas: Sequence[int] = (),
    target_directories: Mapping[int, uuid.UUID] | None = None,
    default_dir: Callable[[int], uuid.UUID] | None = None,
) -> ApiMessageAndVersion | None:
    """The PartitionChangeRecord taking ``partition`` to ``target_isr`` (and the target replicas, removing
    and adding replicas; None = the partition's) with a fresh election and, when it can, the completion of
    a reassignment (module docstring), or None if it would change nothing. ``elr_enabled``
    (``eligible.leader.replicas.version`` >= 1) and ``min_isr`` (the topic's ``min.insync.replicas``) drive the
    KIP-966 rules; the record is then version 2 (ELR fields), else version 0. ``target_directories`` (broker id ->
    log directory id, Kafka's ``setDirectory``, KIP-858) sets replicas' directories; the others keep theirs (a
    replica added by a reassignment gets ``default_dir(broker)``, Kafka's DefaultDirProvider, else UNASSIGNED); a
    record with ``directories`` is at least version 1."""
    data: dict = {"topic_id": topic_id, "partition_id": partition_id}
    replicas = list(partition.replicas if target_replicas is None else target_replicas)
    removing = list(partition.removing_replicas if target_removing is None else target_removing)
    adding = list(partition.adding_replicas if target_adding is None else target_adding)
    target_isr = list(target_isr)
    completed = maybe_complete_reassignment(replicas, removing, adding, target_isr)
    if completed is not None:
        replicas, target_isr = completed
        removing, adding = [], []
    elr = target_elr(partition, target_isr, min_isr, unclean_shutdown_replicas) if elr_enabled else []
    leader, was_unclean = elect_leader(
        partition, target_isr, is_acceptable_leader, unclean, replicas, elr if elr_enabled else (), elr_enabled
    )
    if was_unclean:  # the new leader becomes the whole ISR; the ELR is cleared (Kafka's maybeUpdateRecordElr)
        target_isr, elr = [leader], []
    elif leader in elr:  # elected from the ELR (the ISR was empty): it becomes the ISR and leaves the ELR
        target_isr, elr = [leader], [r for r in elr if r != leader]
    if leader != partition.leader:
        data["leader"] = leader
    elif not set(partition.replicas) <= set(replicas):
        data["leader"] = partition.leader  # a replica leaves: bump the leader epoch
    if list(elr) != list(partition.elr):
        data["eligible_leader_replicas"] = elr
    # Without ELR an empty target keeps the ISR; with ELR the ISR may become empty.
    if (target_isr or elr_enabled) and tuple(target_isr) != partition.isr:
        data["isr"] = list(target_isr)
    if elr_enabled:
        _update_last_known_leader(partition, data)
    if replicas and tuple(replicas) != partition.replicas:
        data["replicas"] = replicas
    if tuple(removing) != partition.removing_replicas:
        data["removing_replicas"] = removing
    if tuple(adding) != partition.adding_replicas:
        data["adding_replicas"] = adding
    directories = _target_directories(partition, replicas, target_directories or {}, default_dir)
    if directories is not None and tuple(directories) != partition.directories:
        data["directories"] = directories
    if len(data) == 2:
        return None
    has_elr_fields = "eligible_leader_replicas" in data or "last_known_elr" in data
    version = PARTITION_CHANGE_RECORD_ELR_VERSION if elr_enabled or has_elr_fields else PARTITION_CHANGE_RECORD_VERSION
    if "directories" in data:
        version = max(version, PARTITION_CHANGE_RECORD_DIRECTORIES_VERSION)
    return ApiMessageAndVersion(PARTITION_CHANGE_RECORD, version, data)


def _target_directories(
    partition: PartitionRegistration,
    replicas: Sequence[int],
    changes: Mapping[int, uuid.UUID],
    default_dir: Callable[[int], uuid.UUID] | None,
) -> list[uuid.UUID] | None:
    """The directories parallel to ``replicas`` (Kafka's ``PartitionChangeBuilder`` directories), or None when the
    partition has none (v0, every replica MIGRATING) and nothing assigns one."""
    if not changes and len(partition.directories) != len(partition.replicas):
        return None
    current = dict(zip(partition.replicas, partition.directories, strict=False))
    current.update(changes)
    if not partition.directories:
        return [current.get(r, directory_id.MIGRATING) for r in replicas]
    fallback = default_dir or (lambda _broker: directory_id.UNASSIGNED)
    return [current[r] if r in current else fallback(r) for r in replicas]


def _update_last_known_leader(partition: PartitionRegistration, data: dict) -> None:
    """Kafka's ``maybeUpdateLastKnownLeader`` (the last known ELR stores the last leader): set to the leader when
    the ISR first becomes empty, cleared once the partition has (or keeps) a leader."""
    leader = data.get("leader", NO_LEADER_CHANGE)
    if data.get("isr") == [] and partition.last_known_elr != (partition.leader,):
        data["last_known_elr"] = [partition.leader]
    elif (leader >= 0 or (partition.leader != NO_LEADER and leader != NO_LEADER)) and partition.last_known_elr:
        data["last_known_elr"] = []
