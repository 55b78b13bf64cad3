"""Keys and values of the consumer-group records in ``__consumer_offsets`` (KIP-848; Kafka's
``ConsumerGroup*Key.json`` / ``ConsumerGroup*Value.json`` of the group-coordinator module).

Keys (not flexible): ``version int16`` then ``group string`` (and ``member string`` for versions 5, 7, 8):

* 3 ConsumerGroupMetadata: value ``Epoch int32`` (the group epoch);
* 4 ConsumerGroupPartitionMetadata: value ``Topics [TopicId uuid, TopicName string, NumPartitions int32,
  PartitionMetadata [Partition int32, Racks [string]]]`` (the subscribed topics' metadata);
* 5 ConsumerGroupMemberMetadata: value ``InstanceId string?, RackId string?, ClientId, ClientHost,
  SubscribedTopicNames [string], SubscribedTopicRegex string?, RebalanceTimeoutMs int32, ServerAssignor string?``
  and tagged field 0 ClassicMemberMetadata ``SessionTimeoutMs int32, SupportedProtocols [Name string, Metadata
  bytes]`` for a member using the classic protocol (online migration);
* 6 ConsumerGroupTargetAssignmentMetadata: value ``AssignmentEpoch int32``;
* 7 ConsumerGroupTargetAssignmentMember: value ``TopicPartitions [TopicId uuid, Partitions [int32]]``;
* 8 ConsumerGroupCurrentMemberAssignment: value ``MemberEpoch int32, PreviousMemberEpoch int32, State int8,
  AssignedPartitions [TopicPartitions], PartitionsPendingRevocation [TopicPartitions]``.

Values are ``version int16`` (0) then a flexible body (compact strings and arrays, unsigned-varint lengths + 1,
tagged fields). The formats are the schema DSL's (:mod:`pykbroker.protocol.coordinator_records`); the functions here
are thin wrappers. A null value is a tombstone. Decoding raises ValueError on a short buffer or an unknown version.
Pure functions, no I/O.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from pykbroker.coordinator.group.consumer.member import ClassicMemberMetadata, MemberState, TopicPartitions
from pykbroker.protocol.coordinator_records import RecordDecodeError, decode_record, encode_record, read_version

_H = struct.Struct(">h")
GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_ASSIGNMENT_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT = 6, 7, 8
KEY_VERSIONS = frozenset(range(3, 9))
_WITH_MEMBER = frozenset((MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT))
#: the key schema of each record type (the key's version)
_KEYS = {
    GROUP_METADATA: "ConsumerGroupMetadataKey",
    PARTITION_METADATA: "ConsumerGroupPartitionMetadataKey",
    MEMBER_METADATA: "ConsumerGroupMemberMetadataKey",
    TARGET_ASSIGNMENT_METADATA: "ConsumerGroupTargetAssignmentMetadataKey",
    TARGET_ASSIGNMENT_MEMBER: "ConsumerGroupTargetAssignmentMemberKey",
    CURRENT_MEMBER_ASSIGNMENT: "ConsumerGroupCurrentMemberAssignmentKey",
}
VALUE_VERSION = 0

#: Kafka's ``MemberState`` byte values
_STATE_TO_BYTE = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1, MemberState.UNRELEASED_PARTITIONS: 2}
_BYTE_TO_STATE = {v: k for k, v in _STATE_TO_BYTE.items()}


# -- writing ----------------------------------------------------------------------------------------------
def _topic_partitions(tps: TopicPartitions) -> list[dict[str, Any]]:
    """``[{topic_id, partitions}]`` sorted by topic id (as text) and partition; topics without partitions left out."""
    return [{"topic_id": tid, "partitions": sorted(tps[tid])} for tid in sorted(tps, key=str) if tps[tid]]


def key(version: int, group_id: str, member_id: str | None = None) -> bytes:
    """The key of a record of type ``version`` (3..8); ``member_id`` for 5, 7 and 8."""
    body = {"group_id": group_id, "member_id": member_id or ""} if version in _WITH_MEMBER else {"group_id": group_id}
    return encode_record(_KEYS[version], version, body)


def group_metadata_value(epoch: int) -> bytes:
    return encode_record("ConsumerGroupMetadataValue", VALUE_VERSION, {"epoch": epoch})


def partition_metadata_value(topics: dict[str, tuple[uuid.UUID, int]]) -> bytes:
    """The subscribed topics' ``{name: (topic id, partition count)}``, sorted by name (no per-partition racks)."""
    entries = [{"topic_id": tid, "topic_name": name, "num_partitions": n} for name, (tid, n) in sorted(topics.items())]
    return encode_record("ConsumerGroupPartitionMetadataValue", VALUE_VERSION, {"topics": entries})


def member_metadata_value(
    instance_id: str | None,
    rack_id: str | None,
    client_id: str,
    client_host: str,
    topic_names: tuple[str, ...],
    topic_regex: str | None,
    rebalance_timeout_ms: int,
    server_assignor: str | None,
    classic: ClassicMemberMetadata | None = None,
) -> bytes:
    """ConsumerGroupMemberMetadataValue; ``classic`` (a member using the classic protocol) is its tagged field 0
    ClassicMemberMetadata (session timeout, supported protocols)."""
    value = {
        "instance_id": instance_id,
        "rack_id": rack_id,
        "client_id": client_id,
        "client_host": client_host,
        "subscribed_topic_names": list(topic_names),
        "subscribed_topic_regex": topic_regex,
        "rebalance_timeout_ms": rebalance_timeout_ms,
        "server_assignor": server_assignor,
        "classic_member_metadata": None
        if classic is None
        else {
            "session_timeout_ms": classic.session_timeout_ms,
            "supported_protocols": [{"name": name, "metadata": data} for name, data in classic.protocols],
        },
    }
    return encode_record("ConsumerGroupMemberMetadataValue", VALUE_VERSION, value)


def target_assignment_metadata_value(assignment_epoch: int) -> bytes:
    value = {"assignment_epoch": assignment_epoch}
    return encode_record("ConsumerGroupTargetAssignmentMetadataValue", VALUE_VERSION, value)


def target_assignment_member_value(tps: TopicPartitions) -> bytes:
    value = {"topic_partitions": _topic_partitions(tps)}
    return encode_record("ConsumerGroupTargetAssignmentMemberValue", VALUE_VERSION, value)


def current_assignment_value(
    member_epoch: int, previous_epoch: int, state: MemberState, assigned: TopicPartitions, revoking: TopicPartitions
) -> bytes:
    value = {
        "member_epoch": member_epoch,
        "previous_member_epoch": previous_epoch,
        "state": _STATE_TO_BYTE[state],
        "assigned_partitions": _topic_partitions(assigned),
        "partitions_pending_revocation": _topic_partitions(revoking),
    }
    return encode_record("ConsumerGroupCurrentMemberAssignmentValue", VALUE_VERSION, value)


# -- reading ----------------------------------------------------------------------------------------------
def decode_key(buf) -> tuple[int, str, str | None]:
    """``(record type 3..8, group id, member id or None)``; ValueError for another version."""
    version = read_version(buf)
    if version not in KEY_VERSIONS:
        raise RecordDecodeError(f"not a consumer group key version: {version}")
    _, k = decode_record(_KEYS[version], buf)
    return version, k["group_id"], k["member_id"] if version in _WITH_MEMBER else None


def _read_topic_partitions(entries: list[dict[str, Any]]) -> TopicPartitions:
    return {e["topic_id"]: set(e["partitions"]) for e in entries}


def decode_epoch_value(buf) -> int:
    """ConsumerGroupMetadataValue / ConsumerGroupTargetAssignmentMetadataValue: the epoch (same layout)."""
    return decode_record("ConsumerGroupMetadataValue", buf)[1]["epoch"]


def decode_partition_metadata_value(buf) -> dict[str, tuple[uuid.UUID, int]]:
    _, v = decode_record("ConsumerGroupPartitionMetadataValue", buf)
    return {t["topic_name"]: (t["topic_id"], t["num_partitions"]) for t in v["topics"]}


def decode_member_metadata_value(buf) -> dict:
    """The member's metadata; ``classic``: its tagged field 0 ClassicMemberMetadata (a member using the classic
    protocol) or None."""
    _, v = decode_record("ConsumerGroupMemberMetadataValue", buf)
    classic = v.get("classic_member_metadata")
    return {
        "classic": None
        if classic is None
        else ClassicMemberMetadata(
            classic["session_timeout_ms"],
            tuple((p["name"], bytes(p["metadata"])) for p in classic["supported_protocols"]),
        ),
        "instance_id": v["instance_id"],
        "rack_id": v["rack_id"],
        "client_id": v["client_id"],
        "client_host": v["client_host"],
        "subscribed_topic_names": tuple(v["subscribed_topic_names"]),
        "subscribed_topic_regex": v["subscribed_topic_regex"],
        "rebalance_timeout_ms": v["rebalance_timeout_ms"],
        "server_assignor": v["server_assignor"],
    }


def decode_target_assignment_member_value(buf) -> TopicPartitions:
    return _read_topic_partitions(decode_record("ConsumerGroupTargetAssignmentMemberValue", buf)[1]["topic_partitions"])


def decode_current_assignment_value(buf) -> dict:
    _, v = decode_record("ConsumerGroupCurrentMemberAssignmentValue", buf)
    state = v["state"]
    if state not in _BYTE_TO_STATE:
        raise RecordDecodeError(f"unknown member state {state}")
    return {
        "member_epoch": v["member_epoch"],
        "previous_member_epoch": v["previous_member_epoch"],
        "state": _BYTE_TO_STATE[state],
        "assigned": _read_topic_partitions(v["assigned_partitions"]),
        "pending_revocation": _read_topic_partitions(v["partitions_pending_revocation"]),
    }


# -- a group as records, and back ----------------------------------------------------------------------------
def records_of(group) -> dict[bytes, bytes]:
    """Every live record of the ConsumerGroup ``group`` (``{key: value}``), as Kafka's coordinator has written
    them by now: the group epoch, the subscription metadata, each member's metadata, target assignment and current
    assignment, and the target assignment epoch. A key of an earlier call missing here is to be tombstoned."""
    gid = group.group_id
    out = {
        key(GROUP_METADATA, gid): group_metadata_value(group.group_epoch),
        key(PARTITION_METADATA, gid): partition_metadata_value(group.subscription_metadata),
        key(TARGET_ASSIGNMENT_METADATA, gid): target_assignment_metadata_value(group.assignment_epoch),
    }
    for m in group.members.values():
        out[key(MEMBER_METADATA, gid, m.member_id)] = member_metadata_value(
            m.instance_id,
            m.rack_id,
            m.client_id,
            m.client_host,
            m.subscribed_topic_names,
            m.subscribed_topic_regex,
            m.rebalance_timeout_ms,
            m.server_assignor,
            m.classic,
        )
        out[key(CURRENT_MEMBER_ASSIGNMENT, gid, m.member_id)] = current_assignment_value(
            m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.pending_revocation
        )
    for member_id, tps in group.target.items():
        out[key(TARGET_ASSIGNMENT_MEMBER, gid, member_id)] = target_assignment_member_value(tps)
    return out


def order(records: dict[bytes, bytes | None]) -> list[tuple[bytes, bytes | None]]:
    """Records in the order Kafka writes them: live ones member metadata, group epoch, subscription metadata, target
    members, target epoch, current assignments; tombstones current assignments, target members, target epoch,
    subscription metadata, member metadata, group epoch last (a reader never sees a member without its group)."""
    live = [5, 3, 4, 7, 6, 8]
    dead = [8, 7, 6, 4, 5, 3]

    def rank(item: tuple[bytes, bytes | None]) -> int:
        version = _H.unpack_from(item[0])[0]
        return live.index(version) if item[1] is not None else len(live) + dead.index(version)

    return sorted(records.items(), key=rank)


def tombstones(group) -> list[tuple[bytes, None]]:
    """The tombstones of every record of the ConsumerGroup ``group`` (Kafka's ``createGroupTombstoneRecords``, group
    epoch last): it is deleted, or converted to a classic group. ``group.persisted`` becomes empty. Group lock
    held."""
    keys = set(records_of(group)) | set(group.persisted or {})
    group.persisted = {}
    return [(k, None) for k, _ in order(dict.fromkeys(keys))]


def replay(group, version: int, member_id: str | None, value) -> None:
    """Apply one record (``value`` None: a tombstone) to the ConsumerGroup ``group`` being loaded (Kafka's
    ``GroupMetadataManager.replay`` for consumer groups). The group's indexes are rebuilt by the caller once the
    load is done (:meth:`ConsumerGroup.rebuild_indexes`). Raises ValueError when the value does not decode."""
    import dataclasses

    from pykbroker.coordinator.group.consumer.member import ConsumerGroupMember

    if version == GROUP_METADATA:
        if value is not None:
            group.group_epoch = decode_epoch_value(value)
    elif version == PARTITION_METADATA:
        group.subscription_metadata = {} if value is None else decode_partition_metadata_value(value)
    elif version == TARGET_ASSIGNMENT_METADATA:
        group.assignment_epoch = 0 if value is None else decode_epoch_value(value)
    elif version == TARGET_ASSIGNMENT_MEMBER:
        if value is None:
            group.target.pop(member_id, None)
        else:
            group.target[member_id] = decode_target_assignment_member_value(value)
    elif version == MEMBER_METADATA:
        if value is None:
            group.members.pop(member_id, None)
            return
        member = group.members.get(member_id) or ConsumerGroupMember(member_id or "")
        group.members[member_id] = dataclasses.replace(member, **decode_member_metadata_value(value))
    elif version == CURRENT_MEMBER_ASSIGNMENT:
        member = group.members.get(member_id)
        if value is None:
            if member is not None:
                group.members[member_id] = dataclasses.replace(
                    member, member_epoch=0, previous_member_epoch=-1, assigned={}, pending_revocation={}
                )
            return
        member = member or ConsumerGroupMember(member_id or "")
        group.members[member_id] = dataclasses.replace(member, **decode_current_assignment_value(value))
