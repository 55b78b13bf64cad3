"""Keys and values of the records in ``__consumer_offsets`` (Kafka's GroupCoordinatorRecordSerde formats).

Thin wrappers over the schema DSL (:mod:`pykbroker.protocol.coordinator_records`, Kafka's ``OffsetCommitKey/Value``
and ``GroupMetadataKey/Value`` specs). We write OffsetCommitKey v1 (``group, topic, partition``), OffsetCommitValue v3
(``offset int64, leader_epoch int32, metadata string, commit_timestamp int64``), GroupMetadataKey v2 (``group``)
and GroupMetadataValue v3 (``protocol_type, generation, protocol?, leader?, current_state_timestamp, members
[member_id, group_instance_id?, client_id, client_host, rebalance_timeout, session_timeout, subscription,
assignment]``), as Kafka does until its values become flexible; every valid version (OffsetCommitValue 0-4,
GroupMetadataValue 0-4) is read.

A null value is a tombstone (offset deleted / group removed). Decoding raises ValueError on an
unknown key version or a short buffer. Pure functions, no I/O.
"""

from __future__ import annotations

from typing import Any

from pykbroker.protocol.coordinator_records import RecordDecodeError, decode_record, encode_record, read_version

OFFSET_KEY_VERSION, GROUP_KEY_VERSION = 1, 2
OFFSET_VALUE_VERSION, GROUP_VALUE_VERSION = 3, 3
_MEMBER_FIELDS = (
    "member_id",
    "group_instance_id",
    "client_id",
    "client_host",
    "rebalance_timeout",
    "session_timeout",
    "subscription",
    "assignment",
)


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return encode_record(
        "OffsetCommitKey", OFFSET_KEY_VERSION, {"group": group, "topic": topic, "partition": partition}
    )


def offset_value(offset: int, leader_epoch: int, metadata: str, commit_timestamp: int) -> bytes:
    value = {
        "offset": offset,
        "leader_epoch": leader_epoch,
        "metadata": metadata or "",
        "commit_timestamp": commit_timestamp,
    }
    return encode_record("OffsetCommitValue", OFFSET_VALUE_VERSION, value)


def group_key(group: str) -> bytes:
    return encode_record("GroupMetadataKey", GROUP_KEY_VERSION, {"group": group})


def group_value(
    protocol_type: str,
    generation: int,
    protocol: str | None,
    leader: str | None,
    state_timestamp: int,
    members: list[tuple],
) -> bytes:
    """GroupMetadataValue v3; ``members`` are tuples in :data:`_MEMBER_FIELDS` order (subscription and assignment
    bytes, timeouts in ms)."""
    value = {
        "protocol_type": protocol_type or "",
        "generation": generation,
        "protocol": protocol,
        "leader": leader,
        "current_state_timestamp": state_timestamp,
        "members": [dict(zip(_MEMBER_FIELDS, m, strict=True)) for m in members],
    }
    return encode_record("GroupMetadataValue", GROUP_VALUE_VERSION, value)


def decode_key(key) -> tuple:
    """``("offset", group, topic, partition)`` or ``("group", group)``."""
    version = read_version(key)
    if version in (0, 1):
        _, k = decode_record("OffsetCommitKey", key)
        return "offset", k["group"], k["topic"], k["partition"]
    if version == 2:
        return "group", decode_record("GroupMetadataKey", key)[1]["group"]
    raise RecordDecodeError(f"unknown __consumer_offsets key version {version}")


def decode_offset_value(value) -> tuple[int, int, str, int]:
    """``(offset, leader_epoch, metadata, commit_timestamp)`` for value versions 0-4 (-1: absent from the
    version)."""
    _, v = decode_record("OffsetCommitValue", value)
    return v["offset"], v["leader_epoch"], v["metadata"], v["commit_timestamp"]


def decode_group_value(value) -> dict:
    """``{protocol_type, generation, protocol, leader, state_timestamp, members: [{member_id, group_instance_id,
    client_id, client_host, rebalance_timeout, session_timeout, subscription, assignment}]}`` for value versions
    0-4 (fields absent from the version hold Kafka's defaults: -1, None)."""
    _, v = decode_record("GroupMetadataValue", value)
    out: dict[str, Any] = {
        "protocol_type": v["protocol_type"],
        "generation": v["generation"],
        "protocol": v["protocol"],
        "leader": v["leader"],
        "state_timestamp": v["current_state_timestamp"],
        "members": [{name: m[name] for name in _MEMBER_FIELDS} for m in v["members"]],
    }
    return out


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units), as a signed int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group: str, num_partitions: int) -> int:
    """``Utils.abs(groupId.hashCode()) % numPartitions``."""
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
