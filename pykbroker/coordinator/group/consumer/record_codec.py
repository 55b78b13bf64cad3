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
tagged fields). A null value is a tombstone. Decoding raises ValueError on a short buffer or an unknown version.
Pure functions, no I/O.
"""

from __future__ import annotations

import struct
import uuid

from pykbroker.coordinator.group.consumer.member import ClassicMemberMetadata, MemberState, TopicPartitions

_H, _I = struct.Struct(">h"), struct.Struct(">i")
GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_ASSIGNMENT_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT = 6, 7, 8
KEY_VERSIONS = frozenset(range(3, 9))
_WITH_MEMBER = frozenset((MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT))

#: Kafka's ``MemberState`` byte values
_STATE_TO_BYTE = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1, MemberState.UNRELEASED_PARTITIONS: 2}
_BYTE_TO_STATE = {v: k for k, v in _STATE_TO_BYTE.items()}


# -- writing ----------------------------------------------------------------------------------------------
def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _cstr(s: str | None) -> bytes:
    if s is None:
        return _uvarint(0)
    b = s.encode()
    return _uvarint(len(b) + 1) + b


def _carray(items: list[bytes]) -> bytes:
    return _uvarint(len(items) + 1) + b"".join(items)


_NO_TAGS = _uvarint(0)


def _value(body: bytes) -> bytes:
    return _H.pack(0) + body + _NO_TAGS


def _topic_partitions(tps: TopicPartitions) -> bytes:
    entries = [
        tid.bytes + _carray([_I.pack(p) for p in sorted(tps[tid])]) + _NO_TAGS
        for tid in sorted(tps, key=str)
        if tps[tid]
    ]
    return _carray(entries)


def key(version: int, group_id: str, member_id: str | None = None) -> bytes:
    """The key of a record of type ``version`` (3..8); ``member_id`` for 5, 7 and 8."""
    b = _H.pack(version) + _str(group_id)
    if version in _WITH_MEMBER:
        b += _str(member_id or "")
    return b


def _str(s: str) -> bytes:
    b = s.encode()
    return _H.pack(len(b)) + b


def group_metadata_value(epoch: int) -> bytes:
    return _value(_I.pack(epoch))


def partition_metadata_value(topics: dict[str, tuple[uuid.UUID, int]]) -> bytes:
    entries = [
        tid.bytes + _cstr(name) + _I.pack(n) + _carray([]) + _NO_TAGS for name, (tid, n) in sorted(topics.items())
    ]
    return _value(_carray(entries))


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
    body = (
        _cstr(instance_id)
        + _cstr(rack_id)
        + _cstr(client_id)
        + _cstr(client_host)
        + _carray([_cstr(n) for n in topic_names])
        + _cstr(topic_regex)
        + _I.pack(rebalance_timeout_ms)
        + _cstr(server_assignor)
    )
    if classic is None:
        return _value(body)
    protocols = [_cstr(name) + _uvarint(len(data) + 1) + data + _NO_TAGS for name, data in classic.protocols]
    tagged = _I.pack(classic.session_timeout_ms) + _carray(protocols) + _NO_TAGS
    return _H.pack(0) + body + _uvarint(1) + _uvarint(0) + _uvarint(len(tagged)) + tagged


def target_assignment_metadata_value(assignment_epoch: int) -> bytes:
    return _value(_I.pack(assignment_epoch))


def target_assignment_member_value(tps: TopicPartitions) -> bytes:
    return _value(_topic_partitions(tps))


def current_assignment_value(
    member_epoch: int, previous_epoch: int, state: MemberState, assigned: TopicPartitions, revoking: TopicPartitions
) -> bytes:
    return _value(
        _I.pack(member_epoch)
        + _I.pack(previous_epoch)
        + bytes([_STATE_TO_BYTE[state]])
        + _topic_partitions(assigned)
        + _topic_partitions(revoking)
    )


# -- reading ----------------------------------------------------------------------------------------------
class _Reader:
    def __init__(self, buf):
        self.buf = memoryview(buf)
        self.pos = 0

    def _need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise ValueError("record truncated")

    def int8(self) -> int:
        self._need(1)
        v = self.buf[self.pos]
        self.pos += 1
        return v - 256 if v > 127 else v

    def int16(self) -> int:
        self._need(2)
        (v,) = _H.unpack_from(self.buf, self.pos)
        self.pos += 2
        return v

    def int32(self) -> int:
        self._need(4)
        (v,) = _I.unpack_from(self.buf, self.pos)
        self.pos += 4
        return v

    def uuid(self) -> uuid.UUID:
        self._need(16)
        v = uuid.UUID(bytes=bytes(self.buf[self.pos : self.pos + 16]))
        self.pos += 16
        return v

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            self._need(1)
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ValueError("varint too long")

    def _raw(self, n: int) -> bytes:
        self._need(n)
        b = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return b

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise ValueError("null key string")
        return self._raw(n).decode()

    def cstr(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._raw(n - 1).decode()

    def carray(self, item) -> list:
        n = self.uvarint()
        return [] if n == 0 else [item() for _ in range(n - 1)]

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._raw(self.uvarint())


def decode_key(buf) -> tuple[int, str, str | None]:
    """``(record type 3..8, group id, member id or None)``; ValueError for another version."""
    r = _Reader(buf)
    version = r.int16()
    if version not in KEY_VERSIONS:
        raise ValueError(f"not a consumer group key version: {version}")
    group_id = r.string()
    return version, group_id, r.string() if version in _WITH_MEMBER else None


def _body(buf) -> _Reader:
    r = _Reader(buf)
    version = r.int16()
    if version != 0:
        raise ValueError(f"unknown consumer group value version {version}")
    return r


def _read_topic_partitions(r: _Reader) -> TopicPartitions:
    out: TopicPartitions = {}

    def entry() -> None:
        tid = r.uuid()
        out[tid] = set(r.carray(r.int32))
        r.tags()

    r.carray(entry)
    return out


def decode_epoch_value(buf) -> int:
    """ConsumerGroupMetadataValue / ConsumerGroupTargetAssignmentMetadataValue: the epoch."""
    return _body(buf).int32()


def decode_partition_metadata_value(buf) -> dict[str, tuple[uuid.UUID, int]]:
    r = _body(buf)
    out: dict[str, tuple[uuid.UUID, int]] = {}

    def topic() -> None:
        tid, name, n = r.uuid(), r.cstr() or "", r.int32()

        def partition() -> None:
            r.int32()
            r.carray(r.cstr)
            r.tags()

        r.carray(partition)
        r.tags()
        out[name] = (tid, n)

    r.carray(topic)
    return out


def decode_member_metadata_value(buf) -> dict:
    r = _body(buf)
    out: dict[str, object] = {
        "instance_id": r.cstr(),
        "rack_id": r.cstr(),
        "client_id": r.cstr() or "",
        "client_host": r.cstr() or "",
        "subscribed_topic_names": tuple(n or "" for n in r.carray(r.cstr)),
        "subscribed_topic_regex": r.cstr(),
        "rebalance_timeout_ms": r.int32(),
        "server_assignor": r.cstr(),
        "classic": None,
    }
    if r.pos >= len(r.buf):
        return out
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        end = r.pos + size
        if tag == 0:
            session_timeout = r.int32()

            def protocol() -> tuple[str, bytes]:
                name = r.cstr() or ""
                data = r._raw(r.uvarint() - 1)
                r.tags()
                return name, data

            out["classic"] = ClassicMemberMetadata(session_timeout, tuple(r.carray(protocol)))
        r._need(end - r.pos)
        r.pos = end
    return out


def decode_target_assignment_member_value(buf) -> TopicPartitions:
    return _read_topic_partitions(_body(buf))


def decode_current_assignment_value(buf) -> dict:
    r = _body(buf)
    epoch, previous, state = r.int32(), r.int32(), r.int8()
    if state not in _BYTE_TO_STATE:
        raise ValueError(f"unknown member state {state}")
    return {
        "member_epoch": epoch,
        "previous_member_epoch": previous,
        "state": _BYTE_TO_STATE[state],
        "assigned": _read_topic_partitions(r),
        "pending_revocation": _read_topic_partitions(r),
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
