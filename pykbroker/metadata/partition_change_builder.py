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


def elect_leader(
    partition: PartitionRegistration,
    target_isr: Sequence[int],
    is_acceptable_leader: Callable[[int], bool],
    unclean: bool = False,
) -> tuple[int, bool]:
    """Kafka's ``electAnyLeader``: ``(new leader or NO_LEADER, whether the election was unclean)``."""
    if partition.leader in target_isr and is_acceptable_leader(partition.leader):
        return partition.leader, False
    for replica in partition.replicas:
        if replica in target_isr and is_acceptable_leader(replica):
            return replica, False
    if unclean:
        for replica in partition.replicas:
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
) -> ApiMessageAndVersion | None:
    """The PartitionChangeRecord taking ``partition`` to ``target_isr`` with a fresh election, or None
    if it would change nothing."""
    data: dict = {"topic_id": topic_id, "partition_id": partition_id}
    leader, was_unclean = elect_leader(partition, target_isr, is_acceptable_leader, unclean)
    if was_unclean:
        target_isr = [leader]
    if leader != partition.leader:
        data["leader"] = leader
    if target_isr and tuple(target_isr) != partition.isr:
        data["isr"] = list(target_isr)
    if len(data) == 2:
        return None
    return ApiMessageAndVersion(PARTITION_CHANGE_RECORD, PARTITION_CHANGE_RECORD_VERSION, data)
