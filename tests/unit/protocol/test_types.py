"""Primitive codecs: varints, strings, bytes, arrays, tagged fields; malformed input raises ProtocolDecodeError."""

from __future__ import annotations

import struct
import tracemalloc
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykbroker.protocol import errors
from pykbroker.protocol import types as t
from pykbroker.protocol.types import ProtocolDecodeError, ProtocolEncodeError


def test_decode_error_is_an_invalid_request():
    assert issubclass(ProtocolDecodeError, errors.InvalidRequestError)
    assert ProtocolDecodeError("x").code == 42


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (2**32 - 1, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_uvarint_known_encodings(value, encoded):
    out = bytearray()
    t.write_uvarint(out, value)
    assert bytes(out) == encoded
    assert t.uvarint_size(value) == len(encoded)
    assert t.read_uvarint(encoded + b"\xff", 0) == (value, len(encoded))


@pytest.mark.parametrize("bad", [b"", b"\x80", b"\xff\xff", b"\x80\x80\x80\x80\x80\x01", b"\xff\xff\xff\xff\x1f"])
def test_uvarint_malformed(bad):
    with pytest.raises(ProtocolDecodeError):
        t.read_uvarint(bad, 0)


@pytest.mark.parametrize("value", [-1, 2**32])
def test_uvarint_out_of_range_is_an_encode_error(value):
    with pytest.raises(ProtocolEncodeError):
        t.write_uvarint(bytearray(), value)


@settings(max_examples=200)
@given(st.integers(0, 2**32 - 1))
def test_uvarint_roundtrip(value):
    out = bytearray()
    t.write_uvarint(out, value)
    assert len(out) == t.uvarint_size(value)
    assert t.read_uvarint(bytes(out) + b"\xff", 0) == (value, len(out))
    with pytest.raises(ProtocolDecodeError):
        t.read_uvarint(bytes(out[:-1]), 0)


@pytest.mark.parametrize("compact", [False, True])
def test_strings(compact):
    out = bytearray()
    t.string_writer(compact, True)(out, "héllo")
    t.string_writer(compact, True)(out, None)
    t.string_writer(compact, False)(out, "")
    read_nullable, read = t.string_reader(compact, True), t.string_reader(compact, False)
    value, pos = read_nullable(out, 0)
    assert value == "héllo"
    value, pos = read_nullable(out, pos)
    assert value is None
    with pytest.raises(ProtocolDecodeError, match="null"):
        read(out, pos - (1 if compact else 2))  # the null, read as non-nullable
    assert read(out, pos) == ("", len(out))


def test_string_errors():
    with pytest.raises(ProtocolDecodeError):
        t.read_string(b"\x00\x05abc", 0)  # truncated
    with pytest.raises(ProtocolDecodeError):
        t.read_nullable_string(b"\xff\xfe", 0)  # -2
    with pytest.raises(ProtocolDecodeError, match="UTF-8"):
        t.read_string(b"\x00\x02\xc3\x28", 0)
    with pytest.raises(ProtocolDecodeError):
        t.read_compact_string(b"\xff\xff\x03" + b"a" * 0xFFFF, 0)  # longer than 32767
    with pytest.raises(ProtocolEncodeError):
        t.write_string(bytearray(), "x" * 0x8000)
    with pytest.raises(ProtocolEncodeError):
        t.write_string(bytearray(), None)


def test_bytes_and_records():
    out = bytearray()
    t.write_bytes_value(out, b"abc", False, True)
    t.write_bytes_value(out, None, True, True)
    t.write_bytes_value(out, memoryview(b"xyz"), True, False)
    buf = memoryview(bytes(out))
    value, pos = t.read_records(buf, 0)
    assert isinstance(value, memoryview) and value == b"abc" and value.obj is buf.obj  # zero copy
    value, pos = t.read_compact_records(buf, pos)
    assert value is None
    value, pos = t.read_compact_bytes(buf, pos)
    assert value == b"xyz" and isinstance(value, bytes) and pos == len(buf)
    with pytest.raises(ProtocolDecodeError):
        t.read_bytes(b"\x00\x00\x00\x04abc", 0)
    with pytest.raises(ProtocolDecodeError):
        t.read_bytes(b"\xff\xff\xff\xff", 0)  # null, not nullable


def test_huge_array_length_is_rejected_without_allocating():
    tracemalloc.start()
    try:
        for compact, prefix in [(False, struct.pack(">i", 2**31 - 1)), (True, b"\xff\xff\xff\xff\x07")]:
            with pytest.raises(ProtocolDecodeError):
                t.read_array_length(prefix + b"\x00" * 8, 0, compact, True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    with pytest.raises(ProtocolDecodeError):
        t.read_array_length(struct.pack(">i", -2), 0, False, True)
    assert t.read_array_length(struct.pack(">i", -1), 0, False, True) == (-1, 4)
    with pytest.raises(ProtocolDecodeError):
        t.read_array_length(struct.pack(">i", -1), 0, False, False)


def test_fixed_width_truncation():
    for read, size in [
        (t.read_int8, 1),
        (t.read_int16, 2),
        (t.read_int32, 4),
        (t.read_int64, 8),
        (t.read_uint16, 2),
        (t.read_uint32, 4),
        (t.read_float64, 8),
        (t.read_bool, 1),
        (t.read_uuid, 16),
    ]:
        with pytest.raises(ProtocolDecodeError):
            read(b"\x01" * (size - 1), 0)
        read(b"\x01" * size, 0)


def test_uuid_base64():
    value = uuid.UUID("0d9d6d9c-b5c4-4f3a-9a39-6f6d2d0c6b1e")
    text = t.uuid_to_base64(value)
    assert len(text) == 22 and "=" not in text
    assert t.uuid_from_base64(text) == value
    assert t.uuid_to_base64(t.ZERO_UUID) == "AAAAAAAAAAAAAAAAAAAAAA"


def test_tagged_fields():
    out = bytearray()
    t.write_tagged_fields(out, {5: b"\x01\x02", 1: b""})
    assert bytes(out) == b"\x02\x01\x00\x05\x02\x01\x02"
    fields, pos = t.read_tagged_fields(bytes(out), 0)
    assert {k: bytes(v) for k, v in fields.items()} == {1: b"", 5: b"\x01\x02"} and pos == len(out)
    with pytest.raises(ProtocolDecodeError):
        t.read_tagged_fields(b"\x01\x00\x05\x01", 0)  # size 5 but 1 byte left
    with pytest.raises(ProtocolDecodeError):
        t.read_tagged_fields(b"\x7f", 0)  # 127 fields in 0 bytes
