import pytest

from pykbroker.protocol.errors import InvalidRecordError
from pykbroker.record.control_record import ControlRecordType, EndTransactionMarker, parse_type_id


def test_keys():
    assert ControlRecordType.COMMIT.record_key() == b"\x00\x00\x00\x01"
    assert ControlRecordType.parse(b"\x00\x00\x00\x06") is ControlRecordType.KRAFT_VOTERS
    assert ControlRecordType.parse(b"\x00\x01\x00\x63") is ControlRecordType.UNKNOWN  # newer version, unknown type
    assert parse_type_id(b"\x00\x00\x00\x04extra") == 4
    with pytest.raises(ValueError):
        ControlRecordType.UNKNOWN.record_key()


@pytest.mark.parametrize("key", [None, b"", b"\x00\x00\x00", b"\xff\xff\x00\x01"])
def test_bad_keys(key):
    with pytest.raises(InvalidRecordError):
        ControlRecordType.parse(key)


def test_end_txn_marker():
    marker = EndTransactionMarker(ControlRecordType.ABORT, 7)
    assert marker.serialize_value() == b"\x00\x00\x00\x00\x00\x07"
    assert EndTransactionMarker.deserialize(b"\x00\x00\x00\x00", b"\x00\x05\x00\x00\x00\x07") == marker
    for key, value in (
        (b"\x00\x00\x00\x02", b"\x00" * 6),
        (b"\x00\x00\x00\x01", b"\x00" * 5),
        (b"\x00\x00\x00\x01", b"\xff\xff\x00\x00\x00\x00"),
    ):
        with pytest.raises(InvalidRecordError):
            EndTransactionMarker.deserialize(key, value)
    with pytest.raises(ValueError):
        EndTransactionMarker(ControlRecordType.LEADER_CHANGE, 1).serialize_value()
