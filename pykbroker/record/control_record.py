"""Control records: the key every control record carries, and the end-transaction marker value.

Mirrors ``org.apache.kafka.common.record.ControlRecordType`` and ``EndTransactionMarker``. A control
batch (attribute bit 5) holds records whose key is ``version int16 (0), type int16``. The value
depends on the type: an end-transaction marker (ABORT/COMMIT) is ``version int16 (0),
coordinatorEpoch int32``; KRaft types carry their own message schemas (encoded by raft/metadata).
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from pykbroker.protocol.errors import InvalidRecordError

CURRENT_CONTROL_RECORD_KEY_VERSION = 0
CONTROL_RECORD_KEY_SIZE = 4
CURRENT_END_TXN_MARKER_VERSION = 0
END_TXN_MARKER_VALUE_SIZE = 6

_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")


class ControlRecordType(enum.IntEnum):
    """Type id in a control record key; UNKNOWN (-1) stands for ids this version does not know."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6
    UNKNOWN = -1

    def record_key(self) -> bytes:
        """The 4-byte key of a control record of this type."""
        if self is ControlRecordType.UNKNOWN:
            raise ValueError("Cannot serialize UNKNOWN control record type")
        return _KEY.pack(CURRENT_CONTROL_RECORD_KEY_VERSION, self.value)

    @classmethod
    def from_type_id(cls, type_id: int) -> ControlRecordType:
        try:
            return cls(type_id)
        except ValueError:
            return cls.UNKNOWN

    @classmethod
    def parse(cls, key) -> ControlRecordType:
        """The type of a control record from its key; raises InvalidRecordError (INVALID_RECORD) if
        the key is shorter than 4 bytes or has a negative version."""
        return cls.from_type_id(parse_type_id(key))


def parse_type_id(key) -> int:
    """The raw type id of a control record key (``ControlRecordType.parseTypeId``)."""
    if key is None or len(key) < CONTROL_RECORD_KEY_SIZE:
        size = 0 if key is None else len(key)
        raise InvalidRecordError(
            f"Invalid value size found for end control record key. Must have at least "
            f"{CONTROL_RECORD_KEY_SIZE} bytes, but found only {size}"
        )
    version, type_id = _KEY.unpack_from(key, 0)
    if version < 0:
        raise InvalidRecordError(f"Invalid version found for control record: {version}. May indicate data corruption")
    return type_id


class EndTransactionMarker(NamedTuple):
    """The COMMIT/ABORT marker a transaction coordinator writes into each partition."""

    control_type: ControlRecordType
    coordinator_epoch: int

    def serialize_value(self) -> bytes:
        if self.control_type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
            raise ValueError(f"Invalid control record type for end transaction marker {self.control_type!r}")
        return _END_TXN_VALUE.pack(CURRENT_END_TXN_MARKER_VERSION, self.coordinator_epoch)

    @classmethod
    def deserialize(cls, key, value) -> EndTransactionMarker:
        """Parse a marker from a control record's key and value; raises InvalidRecordError."""
        control_type = ControlRecordType.parse(key)
        if control_type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
            raise InvalidRecordError(f"Invalid control record type for end transaction marker {control_type!r}")
        if value is None or len(value) < END_TXN_MARKER_VALUE_SIZE:
            raise InvalidRecordError(
                f"Invalid value size found for end transaction marker. Must have at least "
                f"{END_TXN_MARKER_VALUE_SIZE} bytes, but found only {0 if value is None else len(value)}"
            )
        version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value, 0)
        if version < 0:
            raise InvalidRecordError(
                f"Invalid version found for end transaction marker: {version}. May indicate data corruption"
            )
        return cls(control_type, coordinator_epoch)
