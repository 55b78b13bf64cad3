"""BrokersToIsrs: which partitions each broker is an ISR member of, and which have no leader (Kafka's
``BrokersToIsrs``), so fencing, unfencing and controlled shutdown visit only the partitions concerned.

Kept current by ``ReplicationControlManager.replay`` through :meth:`update` (old and new registration
of one partition). Not thread-safe: used on the controller's event thread.
"""

from __future__ import annotations

import uuid

from pykbroker.metadata.partition_registration import PartitionRegistration

TopicIdPartition = tuple[uuid.UUID, int]


class BrokersToIsrs:
    def __init__(self) -> None:
        self._isr_members: dict[int, set[TopicIdPartition]] = {}
        self._no_leader: set[TopicIdPartition] = set()

    def update(
        self, tp: TopicIdPartition, old: PartitionRegistration | None, new: PartitionRegistration | None
    ) -> None:
        if old is not None:
            for b in old.isr:
                members = self._isr_members.get(b)
                if members is not None:
                    members.discard(tp)
                    if not members:
                        del self._isr_members[b]
            self._no_leader.discard(tp)
        if new is not None:
            for b in new.isr:
                self._isr_members.setdefault(b, set()).add(tp)
            if not new.has_leader():
                self._no_leader.add(tp)

    def partitions_with_broker_in_isr(self, broker_id: int) -> list[TopicIdPartition]:
        return sorted(self._isr_members.get(broker_id, ()), key=_key)

    def partitions_with_no_leader(self) -> list[TopicIdPartition]:
        return sorted(self._no_leader, key=_key)


def _key(tp: TopicIdPartition) -> tuple[str, int]:
    return str(tp[0]), tp[1]
