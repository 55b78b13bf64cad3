"""Keys and values of the share-group records in ``__consumer_offsets`` (KIP-932; Kafka's ``ShareGroup*Key.json`` /
``ShareGroup*Value.json`` of the group-coordinator module, written by ``GroupCoordinatorRecordHelpers``).

Keys (not flexible): ``version int16`` then ``group string`` (and ``member string`` for versions 10, 13, 14):

* 10 ShareGroupMemberMetadata: value ``RackId string?, ClientId, ClientHost, SubscribedTopicNames [string]``;
* 11 ShareGroupMetadata: value ``Epoch int32`` (the group epoch);
* 12 ShareGroupTargetAssignmentMetadata: value ``AssignmentEpoch int32``;
* 13 ShareGroupTargetAssignmentMember: value ``TopicPartitions [TopicId uuid, Partitions [int32]]``;
* 14 ShareGroupCurrentMemberAssignment: value ``MemberEpoch int32, PreviousMemberEpoch int32, State int8 (0,
  stable), AssignedPartitions [TopicPartitions]``;
* 15 ShareGroupStatePartitionMetadata: value ``InitializedTopics [TopicId, TopicName, Partitions [int32]],
  DeletingTopics [TopicId, TopicName]`` (the topics whose share-partition state may exist; none deleting here).

Values are ``version int16`` (0) then a flexible body. The formats are the schema DSL's
(:mod:`pykbroker.protocol.coordinator_records`). A null value is a tombstone. Decoding raises ValueError
(RecordDecodeError) on a short buffer or an unknown version. Pure functions, no I/O.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

from pykbroker.coordinator.group.share.member import ShareGroupMember, TopicPartitions
from pykbroker.protocol.coordinator_records import RecordDecodeError, decode_record, encode_record, read_version

_H = struct.Struct(">h")
MEMBER_METADATA, GROUP_METADATA, TARGET_ASSIGNMENT_METADATA = 10, 11, 12
TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT, STATE_PARTITION_METADATA = 13, 14, 15
KEY_VERSIONS = frozenset(range(10, 16))
_WITH_MEMBER = frozenset((MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT))
_NAMES = {
    MEMBER_METADATA: "ShareGroupMemberMetadata",
    GROUP_METADATA: "ShareGroupMetadata",
    TARGET_ASSIGNMENT_METADATA: "ShareGroupTargetAssignmentMetadata",
    TARGET_ASSIGNMENT_MEMBER: "ShareGroupTargetAssignmentMember",
    CURRENT_MEMBER_ASSIGNMENT: "ShareGroupCurrentMemberAssignment",
    STATE_PARTITION_METADATA: "ShareGroupStatePartitionMetadata",
}
VALUE_VERSION = 0
_STABLE = 0  # Kafka's MemberState.STABLE: a share group member is never anything else


def _topic_partitions(tps: TopicPartitions) -> list[dict[str, Any]]:
    return [{"topic_id": tid, "partitions": sorted(tps[tid])} for tid in sorted(tps, key=str) if tps[tid]]


def _read_topic_partitions(entries: list[dict[str, Any]]) -> TopicPartitions:
    return {e["topic_id"]: set(e["partitions"]) for e in entries}


def key(version: int, group_id: str, member_id: str | None = None) -> bytes:
    """The key of a record of type ``version`` (10..15); ``member_id`` for 10, 13 and 14."""
    body = {"group_id": group_id, "member_id": member_id or ""} if version in _WITH_MEMBER else {"group_id": group_id}
    return encode_record(_NAMES[version] + "Key", version, body)


def _value(version: int, body: dict[str, Any]) -> bytes:
    return encode_record(_NAMES[version] + "Value", VALUE_VERSION, body)


def decode_key(buf) -> tuple[int, str, str | None]:
    """``(record type 10..15, group id, member id or None)``; RecordDecodeError for another version."""
    version = read_version(buf)
    if version not in KEY_VERSIONS:
        raise RecordDecodeError(f"not a share group key version: {version}")
    _, k = decode_record(_NAMES[version] + "Key", buf)
    return version, k["group_id"], k["member_id"] if version in _WITH_MEMBER else None


def records_of(group) -> dict[bytes, bytes]:
    """Every live record of the ShareGroup ``group`` (``{key: value}``): the group epoch, each member's metadata,
    target assignment and current assignment, and the target assignment epoch. A key of an earlier call missing
    here is to be tombstoned."""
    gid = group.group_id
    out = {
        key(GROUP_METADATA, gid): _value(GROUP_METADATA, {"epoch": group.group_epoch}),
        key(TARGET_ASSIGNMENT_METADATA, gid): _value(
            TARGET_ASSIGNMENT_METADATA, {"assignment_epoch": group.assignment_epoch}
        ),
    }
    for m in group.members.values():
        out[key(MEMBER_METADATA, gid, m.member_id)] = _value(
            MEMBER_METADATA,
            {
                "rack_id": m.rack_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
            },
        )
        out[key(CURRENT_MEMBER_ASSIGNMENT, gid, m.member_id)] = _value(
            CURRENT_MEMBER_ASSIGNMENT,
            {
                "member_epoch": m.member_epoch,
                "previous_member_epoch": m.previous_member_epoch,
                "state": _STABLE,
                "assigned_partitions": _topic_partitions(m.assigned),
            },
        )
    for member_id, tps in group.target.items():
        out[key(TARGET_ASSIGNMENT_MEMBER, gid, member_id)] = _value(
            TARGET_ASSIGNMENT_MEMBER, {"topic_partitions": _topic_partitions(tps)}
        )
    if group.state_topics:
        topics = [
            {"topic_id": tid, "topic_name": name, "partitions": sorted(parts)}
            for tid, (name, parts) in sorted(group.state_topics.items(), key=lambda e: str(e[0]))
        ]
        out[key(STATE_PARTITION_METADATA, gid)] = _value(
            STATE_PARTITION_METADATA, {"initialized_topics": topics, "deleting_topics": []}
        )
    return out


def order(records: dict[bytes, bytes | None]) -> list[tuple[bytes, bytes | None]]:
    """Records in the order Kafka writes them: live ones member metadata, group epoch, target members, target epoch,
    current assignments; tombstones current assignments, target members, target epoch, member metadata, group epoch
    last (a reader never sees a member without its group)."""
    live = [10, 11, 13, 12, 14, 15]
    dead = [15, 14, 13, 12, 10, 11]

    def rank(item: tuple[bytes, bytes | None]) -> int:
        version = _H.unpack_from(item[0])[0]
        return live.index(version) if item[1] is not None else len(live) + dead.index(version)

    return sorted(records.items(), key=rank)


def tombstones(group) -> list[tuple[bytes, None]]:
    """The tombstones of every record of the ShareGroup ``group`` (Kafka's ``createGroupTombstoneRecords``, group
    epoch last): it is deleted. ``group.persisted`` becomes empty. Group lock held."""
    keys = set(records_of(group)) | set(group.persisted or {})
    group.persisted = {}
    return [(k, None) for k, _ in order(dict.fromkeys(keys))]


def replay(group, version: int, member_id: str | None, value) -> None:
    """Apply one record (``value`` None: a tombstone) to the ShareGroup ``group`` being loaded (Kafka's
    ``GroupMetadataManager.replay`` for share groups). Raises ValueError when the value does not decode."""
    name = _NAMES[version] + "Value"
    v = None if value is None else decode_record(name, value)[1]
    if version == GROUP_METADATA:
        if v is not None:
            group.group_epoch = v["epoch"]
    elif version == STATE_PARTITION_METADATA:
        group.state_topics = (
            {}
            if v is None
            else {t["topic_id"]: (t["topic_name"], set(t["partitions"])) for t in v["initialized_topics"]}
        )
    elif version == TARGET_ASSIGNMENT_METADATA:
        group.assignment_epoch = 0 if v is None else v["assignment_epoch"]
    elif version == TARGET_ASSIGNMENT_MEMBER:
        if v is None:
            group.target.pop(member_id, None)
        else:
            group.target[member_id] = _read_topic_partitions(v["topic_partitions"])
    elif version == MEMBER_METADATA:
        if v is None:
            group.members.pop(member_id, None)
            return
        member = group.members.get(member_id) or ShareGroupMember(member_id or "")
        group.members[member_id] = dataclasses.replace(
            member,
            rack_id=v["rack_id"],
            client_id=v["client_id"],
            client_host=v["client_host"],
            subscribed_topic_names=tuple(v["subscribed_topic_names"]),
        )
    elif version == CURRENT_MEMBER_ASSIGNMENT:
        member = group.members.get(member_id)
        if v is None:
            if member is not None:
                group.members[member_id] = dataclasses.replace(
                    member, member_epoch=0, previous_member_epoch=-1, assigned={}
                )
            return
        member = member or ShareGroupMember(member_id or "")
        group.members[member_id] = dataclasses.replace(
            member,
            member_epoch=v["member_epoch"],
            previous_member_epoch=v["previous_member_epoch"],
            assigned=_read_topic_partitions(v["assigned_partitions"]),
        )
