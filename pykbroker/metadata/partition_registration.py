"""PartitionRegistration: one partition's replica state, immutable (Kafka's ``PartitionRegistration``).

Shared by the controller (``ReplicationControlManager``) and the image (``TopicImage``). Built from a
``PartitionRecord`` and advanced by ``PartitionChangeRecord``s with :meth:`merge`: every change bumps
the partition epoch; a leader change also bumps the leader epoch.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from pykbroker.metadata.directory_id import directory_of
from pykbroker.metadata.records import (
    LEADER_RECOVERED,
    NO_LEADER,
    NO_LEADER_CHANGE,
    ApiMessageAndVersion,
    partition_record,
)


@dataclass(frozen=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int = NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = LEADER_RECOVERED
    directories: tuple[uuid.UUID, ...] = field(default=(), compare=False)
    #: eligible leader replicas and the last known ELR (KIP-966), empty without ELR
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    @classmethod
    def from_record(cls, d: dict[str, Any]) -> PartitionRegistration:
        """From ``PartitionRecord`` data."""
        return cls(
            replicas=tuple(d.get("replicas") or ()),
            isr=tuple(d.get("isr") or ()),
            leader=d.get("leader", NO_LEADER),
            leader_epoch=d.get("leader_epoch", 0),
            partition_epoch=d.get("partition_epoch", 0),
            removing_replicas=tuple(d.get("removing_replicas") or ()),
            adding_replicas=tuple(d.get("adding_replicas") or ()),
            leader_recovery_state=d.get("leader_recovery_state", LEADER_RECOVERED),
            directories=tuple(d.get("directories") or ()),
            elr=tuple(d.get("eligible_leader_replicas") or ()),
            last_known_elr=tuple(d.get("last_known_elr") or ()),
        )

    def merge(self, d: dict[str, Any]) -> PartitionRegistration:
        """Apply ``PartitionChangeRecord`` data (absent/None fields and leader -2 mean "unchanged")."""
        changes: dict[str, Any] = {"partition_epoch": self.partition_epoch + 1}
        for key in ("replicas", "isr", "removing_replicas", "adding_replicas", "directories"):
            if d.get(key) is not None:
                changes[key] = tuple(d[key])
        if d.get("eligible_leader_replicas") is not None:
            changes["elr"] = tuple(d["eligible_leader_replicas"])
        if d.get("last_known_elr") is not None:
            changes["last_known_elr"] = tuple(d["last_known_elr"])
        leader = d.get("leader", NO_LEADER_CHANGE)
        if leader != NO_LEADER_CHANGE:
            changes["leader"] = leader
            changes["leader_epoch"] = self.leader_epoch + 1
        recovery = d.get("leader_recovery_state", -1)
        if recovery is not None and recovery != -1:
            changes["leader_recovery_state"] = recovery
        return replace(self, **changes)

    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    def to_record(self, topic_id: uuid.UUID, partition_id: int) -> ApiMessageAndVersion:
        return partition_record(
            topic_id,
            partition_id,
            list(self.replicas),
            list(self.isr),
            self.leader,
            self.leader_epoch,
            self.partition_epoch,
            self.removing_replicas,
            self.adding_replicas,
            self.elr,
            self.last_known_elr,
            self.directories,
        )

    def directory(self, broker_id: int) -> uuid.UUID:
        """The log directory id of ``broker_id``'s replica (KIP-858; MIGRATING when unknown)."""
        return directory_of(self.replicas, self.directories, broker_id)
