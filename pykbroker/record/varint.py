"""ZigZag varints and varlongs (protobuf style), as record batch v2 writes them.

Mirrors the varint half of ``org.apache.kafka.common.utils.ByteUtils`` (``writeVarint``,
``writeVarlong``, ``readVarint``, ``readVarlong``, ``sizeOfVarint``): the one implementation of signed
varints. The unsigned varints of flexible protocol versions are :mod:`pykbroker.protocol.types`'
(``read_uvarint``/``write_uvarint``).

Wire format: the value is ZigZag-mapped (``0, -1, 1, -2, ... -> 0, 1, 2, 3, ...``) and written 7 bits
at a time, least significant group first, with the high bit of each byte set while more bytes
follow. A varint (int32) takes 1..5 bytes, a varlong (int64) 1..10.

Speed: this runs once per field of every record the client builder writes and the validator reads,
so both directions have a table-driven fast path that avoids per-byte Python:

* encoding: every ZigZag value below ``2**14`` (that is, ints in ``[-8192, 8191]``: record
  lengths, offset deltas, timestamp deltas and key/value lengths of typical records) is a
  precomputed ``bytes`` object, found by one list index;
* decoding: a one-byte varint is one table lookup; longer ones take the general loop.

The hot loops in :mod:`pykbroker.record.default_record` inline the one- and two-byte cases and call
:func:`decode_varint_slow` otherwise. Decoding errors raise ``CorruptRecordError``.
"""

from __future__ import annotations

from pykbroker.protocol.errors import CorruptRecordError

MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10

_TABLE_BITS = 14
ENCODE_TABLE_LIMIT = 1 << _TABLE_BITS  # ZigZag values below this are precomputed


def _encode_unsigned_loop(z: int) -> bytes:
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


# ZIGZAG_ENCODED[z] = the bytes of the unsigned varint z, for z < 2**14 (1 or 2 bytes each): one byte below
# 0x80, else the low 7 bits with the continuation bit and then the high 7 (so _TABLE_BITS <= 14), as
# _encode_unsigned_loop writes them, built without its per-byte loop (this table is made at every start, issue 31).
ZIGZAG_ENCODED: list[bytes] = [bytes((z,)) for z in range(0x80)]
ZIGZAG_ENCODED += [bytes((z & 0x7F | 0x80, z >> 7)) for z in range(0x80, ENCODE_TABLE_LIMIT)]
# ONE_BYTE_DECODED[b] = the signed value of the single-byte varint b (b < 0x80).
ONE_BYTE_DECODED: tuple[int, ...] = tuple((b >> 1) ^ -(b & 1) for b in range(0x80))


def zigzag(value: int) -> int:
    """ZigZag-map an int64 to its unsigned form (``-1 -> 1``, ``1 -> 2``)."""
    return (value << 1) ^ (value >> 63)


def unzigzag(z: int) -> int:
    """Inverse of :func:`zigzag`."""
    return (z >> 1) ^ -(z & 1)


def encode_varint(value: int) -> bytes:
    """The ZigZag varint bytes of ``value`` (an int32 or int64; the encoding is the same for both
    as long as the value fits). Mirrors ``ByteUtils.writeVarint``/``writeVarlong``."""
    z = (value << 1) ^ (value >> 63)
    if z < ENCODE_TABLE_LIMIT:
        return ZIGZAG_ENCODED[z]
    return _encode_unsigned_loop(z)


encode_varlong = encode_varint


def size_of_varint(value: int) -> int:
    """Bytes :func:`encode_varint` writes for ``value`` (``ByteUtils.sizeOfVarint``/``sizeOfVarlong``)."""
    z = (value << 1) ^ (value >> 63)
    if z < ENCODE_TABLE_LIMIT:
        return 1 if z < 0x80 else 2
    return (z.bit_length() + 6) // 7


size_of_varlong = size_of_varint


def decode_varint_slow(buf, pos: int, max_bytes: int = MAX_VARINT_BYTES) -> tuple[int, int]:
    """General ZigZag decode at ``buf[pos]`` reading at most ``max_bytes`` bytes.

    Returns ``(value, position after it)``. The result is truncated to 32 bits for varints (64 for
    varlongs) as Java's int/long arithmetic does. Raises CorruptRecordError when the varint runs
    past ``buf`` or is longer than ``max_bytes``.
    """
    z = 0
    shift = 0
    end = len(buf)
    for _ in range(max_bytes):
        if pos >= end:
            raise CorruptRecordError("Varint runs past the end of the buffer")
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            if max_bytes == MAX_VARINT_BYTES:
                z &= 0xFFFFFFFF
            else:
                z &= 0xFFFFFFFFFFFFFFFF
            return (z >> 1) ^ -(z & 1), pos
        shift += 7
    raise CorruptRecordError(f"Varint is longer than {max_bytes} bytes")


def decode_varint(buf, pos: int = 0) -> tuple[int, int]:
    """Decode the ZigZag varint (int32, at most 5 bytes) at ``buf[pos]``: ``(value, next_pos)``.
    ``buf`` is bytes-like; raises CorruptRecordError on a truncated or over-long varint."""
    if pos < len(buf):
        b = buf[pos]
        if b < 0x80:
            return ONE_BYTE_DECODED[b], pos + 1
    return decode_varint_slow(buf, pos, MAX_VARINT_BYTES)


def decode_varlong(buf, pos: int = 0) -> tuple[int, int]:
    """Decode the ZigZag varlong (int64, at most 10 bytes) at ``buf[pos]``: ``(value, next_pos)``."""
    if pos < len(buf):
        b = buf[pos]
        if b < 0x80:
            return ONE_BYTE_DECODED[b], pos + 1
    return decode_varint_slow(buf, pos, MAX_VARLONG_BYTES)
