"""Raft control records: the record key and the LeaderChange message written at each epoch start.

Snapshots begin with a SnapshotHeader and end with a SnapshotFooter control record (types 3 and 4).
Control records live in batches with the control attribute set. Their key is ``int16 version (0),
int16 type`` (``ControlRecordType``); the LeaderChange value is Kafka's ``LeaderChangeMessage`` (flexible
version 0): ``int16 version, int32 leader_id, voters[], granting_voters[]`` where each voter is
``{int32 voter_id}``, arrays compact (uvarint length + 1), each struct and the message ending with an
empty tagged-field section. Written here by hand because the raft layer must not depend on the schema
codec; the layout is a protocol fact (Kafka's ``LeaderChangeMessage`` schema).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from pykbroker.protocol.types import read_uvarint, write_uvarint

ABORT = 0
COMMIT = 1
LEADER_CHANGE = 2
SNAPSHOT_HEADER = 3
SNAPSHOT_FOOTER = 4
KRAFT_VERSION = 5
KRAFT_VOTERS = 6

_KEY = struct.Struct(">hh")
_HEAD = struct.Struct(">hi")
_I32 = struct.Struct(">i")


def control_key(record_type: int) -> bytes:
    return _KEY.pack(0, record_type)


def parse_control_type(key: bytes | None) -> int:
    """The ``ControlRecordType`` of a control record key; -1 if unreadable."""
    if key is None or len(key) < 4:
        return -1
    return _KEY.unpack_from(key)[1]


@dataclass(frozen=True)
class LeaderChangeMessage:
    leader_id: int
    voters: tuple[int, ...] = field(default_factory=tuple)
    granting_voters: tuple[int, ...] = field(default_factory=tuple)
    version: int = 0

    def encode(self) -> bytes:
        out = bytearray(_HEAD.pack(self.version, self.leader_id))
        for ids in (self.voters, self.granting_voters):
            write_uvarint(out, len(ids) + 1)
            for voter_id in ids:
                out += _I32.pack(voter_id)
                out.append(0)  # no tagged fields in Voter
        out.append(0)  # no tagged fields in the message
        return bytes(out)

    @classmethod
    def decode(cls, buf: bytes) -> LeaderChangeMessage:
        version, leader_id = _HEAD.unpack_from(buf, 0)
        pos = _HEAD.size
        arrays = []
        for _ in range(2):
            n, pos = read_uvarint(buf, pos)
            ids = []
            for _ in range(max(0, n - 1)):
                ids.append(_I32.unpack_from(buf, pos)[0])
                pos = _skip_tags(buf, pos + 4)
            arrays.append(tuple(ids))
        return cls(leader_id, arrays[0], arrays[1], version)


_HEADER = struct.Struct(">hq")
_VERSION = struct.Struct(">h")


@dataclass(frozen=True)
class SnapshotHeaderRecord:
    """The first record of a snapshot (Kafka's ``SnapshotHeaderRecord``, flexible version 0):
    ``int16 version, int64 last_contained_log_timestamp`` (ms), empty tagged fields."""

    last_contained_log_timestamp: int
    version: int = 0

    def encode(self) -> bytes:
        return _HEADER.pack(self.version, self.last_contained_log_timestamp) + b"\x00"

    @classmethod
    def decode(cls, buf: bytes) -> SnapshotHeaderRecord:
        version, timestamp = _HEADER.unpack_from(buf, 0)
        return cls(timestamp, version)


@dataclass(frozen=True)
class SnapshotFooterRecord:
    """The last record of a snapshot (Kafka's ``SnapshotFooterRecord``, flexible version 0): ``int16
    version``, empty tagged fields."""

    version: int = 0

    def encode(self) -> bytes:
        return _VERSION.pack(self.version) + b"\x00"

    @classmethod
    def decode(cls, buf: bytes) -> SnapshotFooterRecord:
        return cls(_VERSION.unpack_from(buf, 0)[0])


def _skip_tags(buf: bytes, pos: int) -> int:
    n, pos = read_uvarint(buf, pos)
    for _ in range(n):
        _, pos = read_uvarint(buf, pos)  # tag
        size, pos = read_uvarint(buf, pos)
        pos += size
    return pos
