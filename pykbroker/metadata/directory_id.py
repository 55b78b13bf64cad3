"""Log directory ids (KIP-858, Kafka's ``org.apache.kafka.common.DirectoryId``).

A broker's log directory is identified by the ``directory.id`` of its ``meta.properties`` (a random UUID). The
controller keeps, per partition, the directory each replica lives in (``PartitionRegistration.directories``,
parallel to ``replicas``) and, per broker, its online directories (``BrokerRegistration.log_dirs``). Three
reserved ids stand for "no directory":

- ``MIGRATING`` (all zeros): written before directory assignment existed (PartitionRecord v0); online.
- ``UNASSIGNED``: the broker has not told the controller yet (several log dirs); online.
- ``LOST``: the directory is gone; offline.

Pure functions; any thread.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence

MIGRATING = uuid.UUID(int=0)
UNASSIGNED = uuid.UUID(int=1)
LOST = uuid.UUID(int=2)


def reserved(directory: uuid.UUID) -> bool:
    """Kafka's ``DirectoryId.reserved``: the first 100 ids (most significant bits 0) are not real directories."""
    return directory.int >> 64 == 0 and directory.int & ((1 << 64) - 1) < 100


def is_online(directory: uuid.UUID, online_dirs: Collection[uuid.UUID]) -> bool:
    """Kafka's ``DirectoryId.isOnline``: ``directory`` is among a broker's ``online_dirs``; UNASSIGNED and
    MIGRATING count as online, LOST as offline, and a broker that registered no directories (before metadata.version
    3.7-IV2) has every directory online."""
    if directory in (UNASSIGNED, MIGRATING):
        return True
    if directory == LOST:
        return False
    return not online_dirs or directory in online_dirs


def directory_of(replicas: Sequence[int], directories: Sequence[uuid.UUID], broker_id: int) -> uuid.UUID:
    """The directory of ``broker_id``'s replica (Kafka's ``PartitionRegistration.directory``): MIGRATING when the
    partition has no directories (a v0 record) or the broker holds no replica of it."""
    if len(directories) != len(replicas) or broker_id not in replicas:
        return MIGRATING
    return directories[list(replicas).index(broker_id)]
