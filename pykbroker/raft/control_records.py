"""Raft control records: the record key and the LeaderChange message written at each epoch start.

Snapshots begin with a SnapshotHeader and end with a SnapshotFooter control record (types 3 and 4).
Control records live in batches with the control attribute set. Their key is ``int16 version (0),
int16 type`` (``ControlRecordType``); the LeaderChange value is Kafka's ``LeaderChangeMessage`` (flexible
version 0): ``int16 version, int32 leader_id, voters[], granting_voters[]`` where each voter is
``{int32 voter_id}``, arrays compact (uvarint length + 1), each struct and the message ending with an
empty tagged-field section. Written here by hand because the raft layer must not depend on the schema
codec; the layout is a protocol fact (Kafka's ``LeaderChangeMessage`` schema).

KIP-853 (dynamic quorums) adds two control records, also flexible version 0: ``KRaftVersionRecord`` (type 5,
``int16 version, int16 kraft_version``) and ``VotersRecord`` (type 6, ``int16 version`` and the voters, each
``int32 voter_id, uuid voter_directory_id, endpoints[] {string name, string host, uint16 port},
kraft_version_feature {int16 min_supported_version, int16 max_supported_version}``). They encode and decode
here; nothing writes them yet (static quorums, ``kraft.version`` 0).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from pykbroker.protocol.types import ProtocolDecodeError, read_uvarint, write_uvarint

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


_U16 = struct.Struct(">H")
_I16 = struct.Struct(">h")
_RANGE = struct.Struct(">hh")


def _write_string(out: bytearray, text: str) -> None:
    raw = text.encode()
    write_uvarint(out, len(raw) + 1)
    out += raw


def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise ValueError("null string in a control record")
    end = pos + n - 1
    if end > len(buf):
        raise ValueError("truncated control record")
    return bytes(buf[pos:end]).decode(), end


@dataclass(frozen=True)
class KRaftVersionRecord:
    """Kafka's ``KRaftVersionRecord`` (control type 5): the ``kraft.version`` in effect from this offset."""

    kraft_version: int
    version: int = 0

    def encode(self) -> bytes:
        return _RANGE.pack(self.version, self.kraft_version) + b"\x00"

    @classmethod
    def decode(cls, buf: bytes) -> KRaftVersionRecord:
        version, kraft_version = _RANGE.unpack_from(buf, 0)
        _skip_tags(buf, _RANGE.size)
        return cls(kraft_version, version)


@dataclass(frozen=True)
class VoterEndpoint:
    """A listener of a voter (``VotersRecord.Endpoint``); ``port`` is a uint16."""

    name: str
    host: str
    port: int


@dataclass(frozen=True)
class Voter:
    """One voter of a ``VotersRecord``: id, directory id (a UUID; KIP-853's replica key is the pair), its
    controller endpoints and the ``kraft.version`` range it supports."""

    voter_id: int
    directory_id: uuid.UUID
    endpoints: tuple[VoterEndpoint, ...] = ()
    min_supported_version: int = 0
    max_supported_version: int = 1


@dataclass(frozen=True)
class VotersRecord:
    """Kafka's ``VotersRecord`` (control type 6): the whole voter set in effect from this offset (KIP-853)."""

    voters: tuple[Voter, ...]
    version: int = 0

    def encode(self) -> bytes:
        out = bytearray(_I16.pack(self.version))
        write_uvarint(out, len(self.voters) + 1)
        for v in self.voters:
            out += _I32.pack(v.voter_id) + v.directory_id.bytes
            write_uvarint(out, len(v.endpoints) + 1)
            for e in v.endpoints:
                _write_string(out, e.name)
                _write_string(out, e.host)
                out += _U16.pack(e.port)
                out.append(0)  # no tagged fields in Endpoint
            out += _RANGE.pack(v.min_supported_version, v.max_supported_version)
            out.append(0)  # no tagged fields in KRaftVersionFeature
            out.append(0)  # no tagged fields in Voter
        out.append(0)  # no tagged fields in the record
        return bytes(out)

    @classmethod
    def decode(cls, buf: bytes) -> VotersRecord:
        """ValueError on a truncated or malformed record."""
        try:
            (version,) = _I16.unpack_from(buf, 0)
            n, pos = read_uvarint(buf, _I16.size)
            voters = []
            for _ in range(max(0, n - 1)):
                (voter_id,) = _I32.unpack_from(buf, pos)
                if pos + 20 > len(buf):
                    raise ValueError("truncated VotersRecord")
                directory_id = uuid.UUID(bytes=bytes(buf[pos + 4 : pos + 20]))
                count, pos = read_uvarint(buf, pos + 20)
                endpoints = []
                for _ in range(max(0, count - 1)):
                    name, pos = _read_string(buf, pos)
                    host, pos = _read_string(buf, pos)
                    (port,) = _U16.unpack_from(buf, pos)
                    pos = _skip_tags(buf, pos + 2)
                    endpoints.append(VoterEndpoint(name, host, port))
                low, high = _RANGE.unpack_from(buf, pos)
                pos = _skip_tags(buf, pos + _RANGE.size)
                pos = _skip_tags(buf, pos)
                voters.append(Voter(voter_id, directory_id, tuple(endpoints), low, high))
            _skip_tags(buf, pos)
        except (struct.error, IndexError, ProtocolDecodeError) as e:
            raise ValueError(f"malformed VotersRecord: {e}") from None
        return cls(tuple(voters), version)
