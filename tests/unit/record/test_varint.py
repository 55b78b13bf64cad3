import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykbroker.protocol.errors import CorruptRecordError
from pykbroker.record.varint import (
    ENCODE_TABLE_LIMIT,
    ZIGZAG_ENCODED,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    size_of_varint,
    unzigzag,
    zigzag,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


def reference_encode(value: int) -> bytes:
    z = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        if z < 0x80:
            out.append(z)
            return bytes(out)
        out.append((z & 0x7F) | 0x80)
        z >>= 7


@pytest.mark.parametrize(
    "value, encoded",
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (300, b"\xd8\x04"),
        (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
        (-(2**63), b"\xff" * 9 + b"\x01"),
    ],
)
def test_known_encodings(value, encoded):
    assert encode_varint(value) == encoded
    assert size_of_varint(value) == len(encoded)
    decode = decode_varint if len(encoded) <= 5 else decode_varlong
    assert decode(encoded) == (value, len(encoded))


def test_table_matches_reference_loop():
    for z in range(ENCODE_TABLE_LIMIT):
        assert ZIGZAG_ENCODED[z] == reference_encode(unzigzag(z))


@given(INT32)
def test_varint_round_trip(value):
    data = b"\xaa" + encode_varint(value) + b"\xbb"
    assert decode_varint(data, 1) == (value, len(data) - 1)
    assert size_of_varint(value) == len(encode_varint(value)) <= 5


@given(INT64)
def test_varlong_round_trip(value):
    data = encode_varlong(value)
    assert data == reference_encode(value)
    assert decode_varlong(data) == (value, len(data))
    assert len(data) <= 10
    assert unzigzag(zigzag(value)) == value


def test_varint_keeps_low_32_bits_like_java():
    # 5 bytes with payload bits above bit 31: Java's int arithmetic drops them.
    data = b"\xfe\xff\xff\xff\x7f"
    assert decode_varint(data) == (2**31 - 1, 5)


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff"])
def test_truncated_varint_is_corrupt(data):
    with pytest.raises(CorruptRecordError):
        decode_varint(data)


def test_overlong_varint_is_corrupt():
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\xff" * 5 + b"\x01")
    with pytest.raises(CorruptRecordError):
        decode_varlong(b"\xff" * 10 + b"\x01")
