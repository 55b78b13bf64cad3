"""The records of ``__share_group_state``: ShareSnapshot and ShareUpdate keys and values, and the partition of a
share partition's key.

Mirrors Kafka's ``ShareCoordinatorRecordHelpers`` / ``ShareCoordinatorRecordSerde`` and
``ShareCoordinatorService.partitionFor``. A key is framed ``int16 record type`` (0: ShareSnapshotKey, 1:
ShareUpdateKey) + the key message; a value ``int16 version`` (0) + the value message; a tombstone (value None)
deletes the share partition's state. The key of a share partition is ``(group id, topic id, partition)``; its
coordinator key (FindCoordinator key type SHARE) is ``"group:topicId:partition"`` with the topic id in Kafka's
base64 form, and its ``__share_group_state`` partition ``Utils.abs(key.hashCode()) % partitions``. Pure functions.
"""

from __future__ import annotations

import uuid
from typing import NamedTuple

from pykbroker.coordinator.group.record_codec import partition_for as _java_partition_for
from pykbroker.coordinator.share.persister import PersisterStateBatch
from pykbroker.protocol.coordinator_records import decode_record, encode_record, read_version
from pykbroker.protocol.types import uuid_to_base64

SNAPSHOT_KEY_VERSION = 0
UPDATE_KEY_VERSION = 1

ShareKey = tuple[str, uuid.UUID, int]


class ShareGroupOffset(NamedTuple):
    """The state of one share partition as the coordinator holds it (Kafka's ShareGroupOffset)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[PersisterStateBatch, ...]
    delivery_complete_count: int = -1  # KIP-1226 (tagged field 0 of both values; -1 unknown)


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """``group:topicId:partition`` (Kafka's ``SharePartitionKey.asCoordinatorKey``)."""
    return f"{group_id}:{uuid_to_base64(topic_id)}:{partition}"


def partition_for(key: str, num_partitions: int) -> int:
    """``Utils.abs(key.hashCode()) % numPartitions`` of a coordinator key."""
    return _java_partition_for(key, num_partitions)


def _batches(batches: tuple[PersisterStateBatch, ...]) -> list[dict]:
    return [
        {
            "first_offset": b.first_offset,
            "last_offset": b.last_offset,
            "delivery_state": b.delivery_state,
            "delivery_count": b.delivery_count,
        }
        for b in batches
    ]


def _key(version: int, key: ShareKey) -> bytes:
    name = "ShareSnapshotKey" if version == SNAPSHOT_KEY_VERSION else "ShareUpdateKey"
    return encode_record(name, version, {"group_id": key[0], "topic_id": key[1], "partition": key[2]})


def snapshot_record(key: ShareKey, state: ShareGroupOffset) -> tuple[bytes, bytes]:
    """``(key, value)`` of a ShareSnapshot: the whole state."""
    value = {
        "snapshot_epoch": state.snapshot_epoch,
        "state_epoch": state.state_epoch,
        "leader_epoch": state.leader_epoch,
        "start_offset": state.start_offset,
        "delivery_complete_count": state.delivery_complete_count,
        "state_batches": _batches(state.state_batches),
    }
    return _key(SNAPSHOT_KEY_VERSION, key), encode_record("ShareSnapshotValue", 0, value)


def update_record(
    key: ShareKey,
    snapshot_epoch: int,
    leader_epoch: int,
    start_offset: int,
    batches: tuple[PersisterStateBatch, ...],
    delivery_complete_count: int = -1,
) -> tuple[bytes, bytes]:
    """``(key, value)`` of a ShareUpdate: what changed since the snapshot (start offset -1: unchanged)."""
    value = {
        "snapshot_epoch": snapshot_epoch,
        "leader_epoch": leader_epoch,
        "start_offset": start_offset,
        "delivery_complete_count": delivery_complete_count,
        "state_batches": _batches(batches),
    }
    return _key(UPDATE_KEY_VERSION, key), encode_record("ShareUpdateValue", 0, value)


def tombstones(key: ShareKey) -> list[tuple[bytes, None]]:
    """The tombstones that delete a share partition's state (both record types' keys)."""
    return [(_key(SNAPSHOT_KEY_VERSION, key), None), (_key(UPDATE_KEY_VERSION, key), None)]


def key_version(key: bytes | memoryview) -> int:
    """The record type of a key (0 snapshot, 1 update, anything else unknown). RecordDecodeError when short."""
    return read_version(key)


def decode_key(key: bytes | memoryview) -> ShareKey:
    """The share partition a key names. RecordDecodeError on a malformed key or an unknown record type."""
    version = read_version(key)
    name = "ShareSnapshotKey" if version == SNAPSHOT_KEY_VERSION else "ShareUpdateKey"
    _, k = decode_record(name, key)
    return k["group_id"], k["topic_id"], k["partition"]


def decode_batches(batches: list[dict]) -> tuple[PersisterStateBatch, ...]:
    return tuple(
        PersisterStateBatch(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
        for b in batches
    )


def decode_snapshot_value(value: bytes | memoryview) -> ShareGroupOffset:
    _, v = decode_record("ShareSnapshotValue", value)
    return ShareGroupOffset(
        v["snapshot_epoch"],
        v["state_epoch"],
        v["leader_epoch"],
        v["start_offset"],
        decode_batches(v["state_batches"]),
        v.get("delivery_complete_count", -1),
    )


def decode_update_value(value: bytes | memoryview) -> dict:
    """``{snapshot_epoch, leader_epoch, start_offset, delivery_complete_count, state_batches:
    tuple[PersisterStateBatch, ...]}``."""
    _, v = decode_record("ShareUpdateValue", value)
    return dict(v, state_batches=decode_batches(v["state_batches"]))
