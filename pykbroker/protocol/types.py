"""Primitive wire types of the Kafka protocol: fixed-width ints, varints, strings, bytes, tagged fields.

Mirrors ``org.apache.kafka.common.protocol.types.Type`` / ``ByteUtils`` / ``Readable``/``Writable``. Everything is
big-endian. Shapes:

    int8/16/32/64, uint16, uint32, float64, bool   fixed width
    uuid                                            16 bytes, decoded to ``uuid.UUID``
    string / nullable string                        int16 length (-1 = null) + UTF-8
    bytes / nullable bytes / records                int32 length (-1 = null) + bytes
    compact string / bytes / records                uvarint (length + 1; 0 = null) + data
    array / compact array                           int32 count (-1 = null) / uvarint (count + 1; 0 = null)
    unsigned varint                                 LEB128, at most 5 bytes, value < 2**32
    tagged field section                            uvarint count, then per field uvarint tag, uvarint size, data

The signed ZigZag varints of record batches are :mod:`pykbroker.record.varint`'s, not the protocol's.

Readers take ``(buf, pos)`` (``buf`` a byte ``memoryview`` or ``bytes``) and return ``(value, new_pos)``; they never
read past ``len(buf)``: truncated input, negative or oversized lengths and over-long varints raise
:class:`ProtocolDecodeError`. Writers append to a ``bytearray`` and raise :class:`ProtocolEncodeError` on values the
wire cannot carry. ``records`` readers return a zero-copy ``memoryview`` slice of ``buf``.

Sans-I/O: no sockets here, and nothing of pykbroker is imported except the error table.
"""

from __future__ import annotations

import base64
import struct
import uuid as _uuid
from collections.abc import Callable
from typing import Any

from pykbroker.protocol.errors import InvalidRequestError

Reader = Callable[[Any, int], tuple[Any, int]]


class ProtocolDecodeError(InvalidRequestError):
    """The peer sent bytes that do not parse: truncated input, a bad length or varint, invalid UTF-8.

    An ``InvalidRequestError`` (Kafka error 42, INVALID_REQUEST): the broker closes the connection, as Kafka does for
    an unparsable request.
    """


class ProtocolEncodeError(ValueError):
    """We tried to encode a value the wire cannot carry (out of range int, null where not nullable, too long)."""


INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")
BOOL = struct.Struct(">?")

# struct format character of every fixed-width type, used to pack runs of consecutive fixed fields at once.
FIXED_FORMATS: dict[str, str] = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint16": "H",
    "uint32": "I",
    "float64": "d",
    "bool": "?",
}
FIXED_SIZES: dict[str, int] = {name: struct.calcsize(">" + ch) for name, ch in FIXED_FORMATS.items()}

MAX_STRING_LENGTH = 0x7FFF
ZERO_UUID = _uuid.UUID(int=0)


def truncated(what: str, pos: int, need: int, have: int) -> ProtocolDecodeError:
    """The error for ``need`` bytes of ``what`` wanted at ``pos`` when the buffer ends at ``have``."""
    return ProtocolDecodeError(f"truncated input: {what} needs {need} bytes at offset {pos}, buffer ends at {have}")


# ---------------------------------------------------------------------------------------------------- fixed width


def _fixed_reader(name: str, s: struct.Struct) -> Reader:
    unpack_from, size = s.unpack_from, s.size

    def read(buf: Any, pos: int) -> tuple[Any, int]:
        try:
            return unpack_from(buf, pos)[0], pos + size
        except struct.error:
            raise truncated(name, pos, size, len(buf)) from None

    read.__name__ = f"read_{name}"
    return read


read_int8 = _fixed_reader("int8", INT8)
read_int16 = _fixed_reader("int16", INT16)
read_int32 = _fixed_reader("int32", INT32)
read_int64 = _fixed_reader("int64", INT64)
read_uint16 = _fixed_reader("uint16", UINT16)
read_uint32 = _fixed_reader("uint32", UINT32)
read_float64 = _fixed_reader("float64", FLOAT64)
read_bool = _fixed_reader("bool", BOOL)


def read_uuid(buf: Any, pos: int) -> tuple[_uuid.UUID, int]:
    """16 bytes -> ``uuid.UUID`` (Kafka's ``Uuid``; the zero UUID is ``ZERO_UUID``)."""
    end = pos + 16
    if end > len(buf):
        raise truncated("uuid", pos, 16, len(buf))
    return _uuid.UUID(bytes=bytes(buf[pos:end])), end


def write_uuid(out: bytearray, value: Any) -> None:
    """Append a ``uuid.UUID`` (or 16 raw bytes)."""
    if isinstance(value, _uuid.UUID):
        out += value.bytes
    elif isinstance(value, (bytes, bytearray)) and len(value) == 16:
        out += value
    else:
        raise ProtocolEncodeError(f"not a UUID: {value!r}")


def uuid_to_base64(value: _uuid.UUID) -> str:
    """Kafka's textual form of a Uuid (URL-safe base64 without padding, 22 chars), e.g. for cluster ids."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def uuid_from_base64(text: str) -> _uuid.UUID:
    """Inverse of :func:`uuid_to_base64`; raises ``ValueError`` on malformed text."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"not a base64 Kafka Uuid: {text!r}")
    return _uuid.UUID(bytes=raw)


# ---------------------------------------------------------------------------------------------------- varints


def read_uvarint(buf: Any, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 varint of at most 5 bytes (Kafka's ``readUnsignedVarint``), value in [0, 2**32)."""
    try:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
        value = b & 0x7F
        shift = 7
        while True:
            pos += 1
            b = buf[pos]
            value |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift > 28:
                raise ProtocolDecodeError(f"unsigned varint longer than 5 bytes at offset {pos}")
    except IndexError:
        raise truncated("unsigned varint", pos, 1, len(buf)) from None
    if value > 0xFFFFFFFF:
        raise ProtocolDecodeError(f"unsigned varint {value} does not fit 32 bits")
    return value, pos + 1


def write_uvarint(out: bytearray, value: int) -> None:
    """Append ``value`` (0 <= value < 2**32) as an unsigned varint."""
    if 0 <= value < 0x80:
        out.append(value)
        return
    if value < 0 or value > 0xFFFFFFFF:
        raise ProtocolEncodeError(f"unsigned varint out of range: {value}")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def uvarint_size(value: int) -> int:
    """Bytes taken by ``value`` as an unsigned varint."""
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


# ---------------------------------------------------------------------------------------------------- lengths


def _read_length(buf: Any, pos: int, compact: bool, wide: bool, nullable: bool, what: str) -> tuple[int, int]:
    """A length prefix: -1 means null (only if ``nullable``), else a length that fits in the rest of ``buf``."""
    if compact:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    elif wide:
        n, pos = read_int32(buf, pos)
    else:
        n, pos = read_int16(buf, pos)
    if n < 0:
        if n == -1 and nullable:
            return -1, pos
        raise ProtocolDecodeError(
            f"{what} at offset {pos} has invalid length {n}" + (" (null in a non-nullable field)" if n == -1 else "")
        )
    if n > len(buf) - pos:
        raise truncated(what, pos, n, len(buf))
    return n, pos


def _write_length(out: bytearray, n: int, compact: bool, wide: bool) -> None:
    """A length prefix; ``n`` = -1 for null."""
    if compact:
        write_uvarint(out, n + 1)
    elif wide:
        out += INT32.pack(n)
    else:
        out += INT16.pack(n)


def read_array_length(buf: Any, pos: int, compact: bool, nullable: bool) -> tuple[int, int]:
    """An array count (-1 = null). Like Kafka, a count larger than the bytes left is rejected before allocating."""
    return _read_length(buf, pos, compact, True, nullable, "array")


# ---------------------------------------------------------------------------------------------------- strings / bytes


def string_reader(compact: bool, nullable: bool) -> Reader:
    """A reader for (compact) (nullable) strings -> ``str`` or ``None``. Invalid UTF-8 raises."""

    def read(buf: Any, pos: int) -> tuple[str | None, int]:
        n, pos = _read_length(buf, pos, compact, False, nullable, "string")
        if n < 0:
            return None, pos
        if n > MAX_STRING_LENGTH:
            raise ProtocolDecodeError(f"string of length {n} is longer than {MAX_STRING_LENGTH}")
        end = pos + n
        try:
            return str(buf[pos:end], "utf-8"), end
        except UnicodeDecodeError as e:
            raise ProtocolDecodeError(f"invalid UTF-8 in string at offset {pos}: {e}") from None

    return read


def string_writer(compact: bool, nullable: bool) -> Callable[[bytearray, Any], None]:
    """A writer for (compact) (nullable) strings; ``None`` only when ``nullable``."""

    def write(out: bytearray, value: Any) -> None:
        if value is None:
            if not nullable:
                raise ProtocolEncodeError("null in a non-nullable string field")
            _write_length(out, -1, compact, False)
            return
        try:
            data = value.encode("utf-8")
        except AttributeError:
            raise ProtocolEncodeError(f"not a string: {value!r}") from None
        if len(data) > MAX_STRING_LENGTH:
            raise ProtocolEncodeError(f"string of {len(data)} bytes is longer than {MAX_STRING_LENGTH}")
        _write_length(out, len(data), compact, False)
        out += data

    return write


def bytes_reader(compact: bool, nullable: bool, zero_copy: bool = False) -> Reader:
    """A reader for (compact) (nullable) bytes -> ``bytes`` (or a ``memoryview`` slice when ``zero_copy``)."""

    def read(buf: Any, pos: int) -> tuple[Any, int]:
        n, pos = _read_length(buf, pos, compact, True, nullable, "bytes")
        if n < 0:
            return None, pos
        end = pos + n
        if zero_copy:
            return (buf[pos:end] if isinstance(buf, memoryview) else memoryview(buf)[pos:end]), end
        return bytes(buf[pos:end]), end

    return read


def write_bytes_value(out: bytearray, value: Any, compact: bool, nullable: bool) -> None:
    """Append a (compact) (nullable) bytes value from any contiguous bytes-like object or ``None``."""
    if value is None:
        if not nullable:
            raise ProtocolEncodeError("null in a non-nullable bytes field")
        _write_length(out, -1, compact, True)
        return
    if isinstance(value, memoryview):
        n = value.nbytes
    elif isinstance(value, (bytes, bytearray)):
        n = len(value)
    else:
        raise ProtocolEncodeError(f"not bytes: {type(value).__name__}")
    _write_length(out, n, compact, True)
    out += value


def read_string(buf: Any, pos: int) -> tuple[str, int]:
    """int16-length UTF-8 string (non-nullable)."""
    return _READ_STRING(buf, pos)


def read_nullable_string(buf: Any, pos: int) -> tuple[str | None, int]:
    """int16-length UTF-8 string, -1 = ``None``."""
    return _READ_NULLABLE_STRING(buf, pos)


def read_compact_string(buf: Any, pos: int) -> tuple[str, int]:
    """uvarint(length + 1) UTF-8 string (non-nullable)."""
    return _READ_COMPACT_STRING(buf, pos)


_READ_STRING = string_reader(False, False)
_READ_NULLABLE_STRING = string_reader(False, True)
_READ_COMPACT_STRING = string_reader(True, False)
_READ_COMPACT_NULLABLE_STRING = string_reader(True, True)

write_string = string_writer(False, False)
write_nullable_string = string_writer(False, True)
write_compact_string = string_writer(True, False)
write_compact_nullable_string = string_writer(True, True)

read_bytes = bytes_reader(False, False)
read_nullable_bytes = bytes_reader(False, True)
read_compact_bytes = bytes_reader(True, False)
read_compact_nullable_bytes = bytes_reader(True, True)
read_records = bytes_reader(False, True, zero_copy=True)
read_compact_records = bytes_reader(True, True, zero_copy=True)


# ---------------------------------------------------------------------------------------------------- tagged fields


def read_tagged_fields(buf: Any, pos: int) -> tuple[dict[int, memoryview], int]:
    """A tagged field section -> ``({tag: raw value slice}, new_pos)``. Sizes are checked against the buffer."""
    count, pos = read_uvarint(buf, pos)
    if count == 0:
        return {}, pos
    if count > len(buf) - pos:
        raise truncated("tagged fields", pos, count, len(buf))
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    fields: dict[int, memoryview] = {}
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise truncated(f"tagged field {tag}", pos, size, len(buf))
        fields[tag] = mv[pos:end]
        pos = end
    return fields, pos


def skip_tagged_fields(buf: Any, pos: int) -> int:
    """Skip a tagged field section (e.g. in a request header); returns the new position."""
    return read_tagged_fields(buf, pos)[1]


def write_tagged_fields(out: bytearray, fields: dict[int, Any] | list[tuple[int, Any]]) -> None:
    """Append a tagged field section from ``{tag: raw bytes}`` or ``[(tag, raw bytes)]``, tags ascending."""
    items = sorted(fields.items() if isinstance(fields, dict) else fields, key=lambda kv: kv[0])
    write_uvarint(out, len(items))
    for tag, raw in items:
        write_uvarint(out, tag)
        write_uvarint(out, len(raw) if not isinstance(raw, memoryview) else raw.nbytes)
        out += raw
