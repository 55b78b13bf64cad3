"""The classic protocol's embedded consumer protocol, as the group coordinator reads and writes it for online migration
(Kafka's ``ConsumerProtocol`` with ``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment``, KIP-848).

Non-flexible encodings (big endian; strings int16 length, arrays int32 count, nullable bytes int32 length or -1):

- subscription: version int16, topics [string], user_data bytes, v1+ owned_partitions [topic string, partitions
  [int32]], v2+ generation_id int32, v3+ rack_id nullable string. A newer version is read as the latest known one
  (its extra fields ignored), as Kafka does; fields missing at the end of an older version take their defaults.
- assignment: version int16, assigned_partitions [topic string, partitions [int32]], user_data bytes (v0-v3 alike).

Malformed input raises :class:`MalformedConsumerProtocol` (the caller answers Kafka's error). Pure functions.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

_H, _I = struct.Struct(">h"), struct.Struct(">i")

#: the consumer protocol's JoinGroup protocol type
PROTOCOL_TYPE = "consumer"


class MalformedConsumerProtocol(ValueError):
    """The embedded consumer protocol does not decode (Kafka's SchemaException)."""


@dataclass
class Subscription:
    version: int
    topics: list[str]
    owned_partitions: dict[str, set[int]] = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def _unpack(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.data):
            raise MalformedConsumerProtocol("truncated consumer protocol")
        (v,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return v

    def int16(self) -> int:
        return self._unpack(_H)

    def int32(self) -> int:
        return self._unpack(_I)

    def _raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise MalformedConsumerProtocol("truncated consumer protocol")
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return bytes(b)

    def string(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        try:
            return self._raw(n).decode()
        except UnicodeDecodeError as e:
            raise MalformedConsumerProtocol(str(e)) from None

    def bytes_(self) -> None:
        n = self.int32()
        if n >= 0:
            self._raw(n)

    def array(self, item) -> list:
        n = self.int32()
        if n < 0:
            return []
        if n > len(self.data):
            raise MalformedConsumerProtocol("array longer than the data")
        return [item() for _ in range(n)]

    def topic_partitions(self) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        for topic, parts in self.array(lambda: (self.string() or "", self.array(self.int32))):
            out.setdefault(topic, set()).update(parts)
        return out


def decode_subscription(data: bytes) -> Subscription:
    """A JoinGroup protocol's metadata as a :class:`Subscription` (see module doc)."""
    r = _Reader(data)
    version = r.int16()
    if version < 0:
        raise MalformedConsumerProtocol(f"negative consumer protocol version {version}")
    sub = Subscription(version, [t or "" for t in r.array(r.string)])
    if r.at_end():
        return sub
    r.bytes_()
    if version >= 1 and not r.at_end():
        sub.owned_partitions = r.topic_partitions()
    if version >= 2 and not r.at_end():
        sub.generation_id = r.int32()
    if version >= 3 and not r.at_end():
        sub.rack_id = r.string()
    return sub


def decode_version(data: bytes) -> int:
    """The version of an embedded consumer protocol message (0 when unreadable, as the lowest common one)."""
    return _H.unpack_from(data)[0] if len(data) >= 2 and _H.unpack_from(data)[0] >= 0 else 0


def decode_assignment(data: bytes) -> dict[str, set[int]]:
    """A SyncGroup assignment as ``{topic name: partitions}``; empty bytes (no assignment yet) are no partitions."""
    if not data:
        return {}
    r = _Reader(data)
    if r.int16() < 0:
        raise MalformedConsumerProtocol("negative consumer protocol version")
    return r.topic_partitions()


def _string(s: str) -> bytes:
    b = s.encode()
    return _H.pack(len(b)) + b


def encode_assignment(partitions: dict[str, set[int]], version: int = 0) -> bytes:
    """``{topic name: partitions}`` as a ConsumerProtocolAssignment of ``version`` (capped at 3), no user data."""
    out = [_H.pack(min(max(version, 0), 3)), _I.pack(len(partitions))]
    for topic in sorted(partitions):
        parts = sorted(partitions[topic])
        out.append(_string(topic) + _I.pack(len(parts)) + b"".join(_I.pack(p) for p in parts))
    out.append(_I.pack(-1))
    return b"".join(out)


def encode_subscription(
    topics: list[str], owned: dict[str, set[int]] | None = None, version: int = 1, rack_id: str | None = None
) -> bytes:
    """A ConsumerProtocolSubscription (``version`` 0..3; tests and tools)."""
    out = [_H.pack(version), _I.pack(len(topics))]
    out += [_string(t) for t in topics]
    out.append(_I.pack(-1))
    if version >= 1:
        owned = owned or {}
        out.append(_I.pack(len(owned)))
        for topic in sorted(owned):
            parts = sorted(owned[topic])
            out.append(_string(topic) + _I.pack(len(parts)) + b"".join(_I.pack(p) for p in parts))
    if version >= 2:
        out.append(_I.pack(-1))
    if version >= 3:
        out.append(_H.pack(-1) if rack_id is None else _string(rack_id))
    return b"".join(out)
