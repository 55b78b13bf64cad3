"""Keys and values of the records in ``__consumer_offsets`` (Kafka's GroupCoordinatorRecordSerde formats).

* OffsetCommitKey v1: ``version int16, group string, topic string, partition int32``;
  OffsetCommitValue v3: ``version int16, offset int64, leader_epoch int32, metadata string, commit_timestamp int64``.
* GroupMetadataKey v2: ``version int16, group string``; GroupMetadataValue v3: ``version int16,
  protocol_type string, generation int32, protocol string?, leader string?, current_state_timestamp int64,
  members [member_id, group_instance_id?, client_id, client_host, rebalance_timeout int32,
  session_timeout int32, subscription bytes, assignment bytes]``.

A null value is a tombstone (offset deleted / group removed). Decoding raises ValueError on an
unknown key version or a short buffer. Pure functions, no I/O.
"""

from __future__ import annotations

import struct
from typing import Any

_H, _I, _Q = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
OFFSET_KEY_VERSION, GROUP_KEY_VERSION = 1, 2


def _str(s: str | None) -> bytes:
    if s is None:
        return _H.pack(-1)
    b = s.encode()
    return _H.pack(len(b)) + b


def _bytes(b: bytes) -> bytes:
    return _I.pack(len(b)) + b


class _Reader:
    def __init__(self, buf):
        self.buf = memoryview(buf)
        self.pos = 0

    def _take(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.buf):
            raise ValueError("record truncated")
        (v,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return v

    def int16(self) -> int:
        return self._take(_H)

    def int32(self) -> int:
        return self._take(_I)

    def int64(self) -> int:
        return self._take(_Q)

    def string(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        if self.pos + n > len(self.buf):
            raise ValueError("record truncated")
        s = bytes(self.buf[self.pos : self.pos + n]).decode()
        self.pos += n
        return s

    def bytes_(self) -> bytes:
        n = self.int32()
        if n < 0:
            return b""
        b = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return b


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return _H.pack(OFFSET_KEY_VERSION) + _str(group) + _str(topic) + _I.pack(partition)


def offset_value(offset: int, leader_epoch: int, metadata: str, commit_timestamp: int) -> bytes:
    return _H.pack(3) + _Q.pack(offset) + _I.pack(leader_epoch) + _str(metadata or "") + _Q.pack(commit_timestamp)


def group_key(group: str) -> bytes:
    return _H.pack(GROUP_KEY_VERSION) + _str(group)


def group_value(
    protocol_type: str,
    generation: int,
    protocol: str | None,
    leader: str | None,
    state_timestamp: int,
    members: list[tuple],
) -> bytes:
    parts = [
        _H.pack(3),
        _str(protocol_type or ""),
        _I.pack(generation),
        _str(protocol),
        _str(leader),
        _Q.pack(state_timestamp),
        _I.pack(len(members)),
    ]
    for member_id, instance_id, client_id, client_host, rebalance_ms, session_ms, subscription, assignment in members:
        parts += [
            _str(member_id),
            _str(instance_id),
            _str(client_id),
            _str(client_host),
            _I.pack(rebalance_ms),
            _I.pack(session_ms),
            _bytes(subscription),
            _bytes(assignment),
        ]
    return b"".join(parts)


def decode_key(key) -> tuple:
    """``("offset", group, topic, partition)`` or ``("group", group)``."""
    r = _Reader(key)
    version = r.int16()
    if version in (0, 1):
        return "offset", r.string(), r.string(), r.int32()
    if version == 2:
        return "group", r.string()
    raise ValueError(f"unknown __consumer_offsets key version {version}")


def decode_offset_value(value) -> tuple[int, int, str, int]:
    """``(offset, leader_epoch, metadata, commit_timestamp)`` for value versions 0-3."""
    r = _Reader(value)
    version = r.int16()
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string() or ""
    commit_timestamp = r.int64() if version >= 1 else -1
    return offset, leader_epoch, metadata, commit_timestamp


def decode_group_value(value) -> dict:
    r = _Reader(value)
    version = r.int16()
    out: dict[str, Any] = {
        "protocol_type": r.string(),
        "generation": r.int32(),
        "protocol": r.string(),
        "leader": r.string(),
    }
    out["state_timestamp"] = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.int32()):
        m: dict[str, Any] = {"member_id": r.string()}
        m["group_instance_id"] = r.string() if version >= 3 else None
        m["client_id"], m["client_host"] = r.string(), r.string()
        m["rebalance_timeout"] = r.int32() if version >= 1 else -1
        m["session_timeout"] = r.int32()
        m["subscription"], m["assignment"] = r.bytes_(), r.bytes_()
        members.append(m)
    out["members"] = members
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
