"""Records inside a v2 batch: the decoded :class:`Record`, and encoding/decoding of the records section.

Mirrors ``org.apache.kafka.common.record.DefaultRecord``. One record on the wire::

    length          varint   bytes after this field
    attributes      int8     unused (0)
    timestampDelta  varlong  timestamp - batch baseTimestamp
    offsetDelta     varint   offset - batch baseOffset
    keyLength       varint   -1 = null key
    key             bytes
    valueLength     varint   -1 = null value
    value           bytes
    headersCount    varint
    headers         per header: keyLength varint (>= 0), key UTF-8, valueLength varint (-1 = null), value

All varints are ZigZag (:mod:`pykbroker.record.varint`). There is no per-record CRC: the batch CRC
covers the records.

The readers work on ``bytes`` (the uncompressed records section) and are the per-record hot loops
of the consumer and of the validator's compressed path, so they inline the one- and two-byte
varint cases (record lengths, deltas and key/value lengths below 8 KiB).
They never return garbage: any structural inconsistency (a length past the end, a record whose
fields do not add up to its length, fewer or more records than declared, a bad header count)
raises ``CorruptRecordError``.
"""

from __future__ import annotations

from collections import namedtuple
from typing import NamedTuple

from pykbroker.protocol.errors import CorruptRecordError
from pykbroker.record.varint import ONE_BYTE_DECODED, decode_varint_slow, encode_varint, size_of_varint

# Kafka's bound excluding key, value and headers: length 5 + attributes 1 + timestampDelta 10 + offsetDelta 5.
MAX_RECORD_OVERHEAD = 21
MIN_RECORD_SIZE = 7  # 1-byte length + attributes + 5 one-byte varints (all-empty record)
_MIN_BODY_SIZE = MIN_RECORD_SIZE - 1

_RecordFields = namedtuple("_RecordFields", "offset timestamp key value headers attributes")


class Record(_RecordFields):
    """One decoded record: ``Record(offset, timestamp, key, value, headers=None, attributes=0)``.

    ``timestamp`` is ms since the epoch (-1 = none; in a LogAppendTime batch every record reports
    the batch's max timestamp, as Kafka does); ``key``/``value`` are ``bytes`` or None;
    ``headers`` is a list of ``(str, bytes | None)`` (None becomes a new empty list);
    ``attributes`` is the unused record attributes byte. Immutable; compares as a tuple.
    """

    __slots__ = ()

    def __new__(cls, offset: int, timestamp: int, key, value, headers=None, attributes: int = 0):
        return tuple.__new__(cls, (offset, timestamp, key, value, [] if headers is None else headers, attributes))

    @property
    def has_key(self) -> bool:
        return self.key is not None

    @property
    def has_value(self) -> bool:
        return self.value is not None


_new_record = tuple.__new__


def encode_headers(headers) -> bytes:
    """The headersCount varint and the headers of one record. ``headers`` is a sequence of
    ``(key: str | bytes, value: bytes-like | None)``; a None key raises ValueError (as Kafka)."""
    if not headers:
        return b"\x00"
    parts = [encode_varint(len(headers))]
    for key, value in headers:
        if key is None:
            raise ValueError("Invalid null header key found in headers")
        raw_key = key.encode("utf-8") if isinstance(key, str) else bytes(key)
        parts.append(encode_varint(len(raw_key)))
        parts.append(raw_key)
        if value is None:
            parts.append(b"\x01")
        else:
            parts.append(encode_varint(len(value)))
            parts.append(value)
    return b"".join(parts)


def encode_record(offset_delta: int, timestamp_delta: int, key, value, headers=None) -> bytes:
    """One record's wire bytes, length prefix included (``DefaultRecord.writeTo``)."""
    body = b"".join(
        (
            b"\x00",
            encode_varint(timestamp_delta),
            encode_varint(offset_delta),
            b"\x01" if key is None else encode_varint(len(key)),
            b"" if key is None else key,
            b"\x01" if value is None else encode_varint(len(value)),
            b"" if value is None else value,
            encode_headers(headers),
        )
    )
    return encode_varint(len(body)) + body


def size_in_bytes(offset_delta: int, timestamp_delta: int, key, value, headers=None) -> int:
    """Size of :func:`encode_record`'s output without building it (``DefaultRecord.sizeInBytes``)."""
    body = 1 + size_of_varint(timestamp_delta) + size_of_varint(offset_delta)
    body += 1 if key is None else size_of_varint(len(key)) + len(key)
    body += 1 if value is None else size_of_varint(len(value)) + len(value)
    if not headers:
        body += 1
    else:
        body += size_of_varint(len(headers))
        for hkey, hvalue in headers:
            klen = len(hkey.encode("utf-8")) if isinstance(hkey, str) else len(hkey)
            body += size_of_varint(klen) + klen
            body += 1 if hvalue is None else size_of_varint(len(hvalue)) + len(hvalue)
    return size_of_varint(body) + body


def _corrupt(message: str) -> CorruptRecordError:
    return CorruptRecordError(f"Found invalid record structure: {message}")


def read_records(
    data: bytes, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None = None
) -> list[Record]:
    """Decode exactly ``count`` records filling all of ``data`` (an uncompressed records section).

    Offsets are ``base_offset + offsetDelta``; timestamps ``base_timestamp + timestampDelta``, or
    ``log_append_time`` for every record when given (LogAppendTime batches). Raises
    CorruptRecordError if ``data`` does not hold exactly ``count`` well-formed records.
    """
    zz = ONE_BYTE_DECODED
    slow = decode_varint_slow
    new = _new_record
    cls = Record
    out: list[Record] = []
    append = out.append
    pos = 0
    end = len(data)
    if count < 0 or count * MIN_RECORD_SIZE > end:
        raise _corrupt(f"{count} records cannot fit in {end} bytes")
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                size = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                size = (z >> 1) ^ -(z & 1)
                pos += 2
            else:
                size, pos = slow(data, pos)
            record_end = pos + size
            if size < _MIN_BODY_SIZE or record_end > end:
                raise _corrupt(f"record length {size} at position {pos} exceeds the {end} bytes of the batch")
            attributes = data[pos]
            b = data[pos + 1]
            if b < 0x80:
                timestamp_delta = zz[b]
                pos += 2
            elif data[pos + 2] < 0x80:
                z = (b & 0x7F) | (data[pos + 2] << 7)
                timestamp_delta = (z >> 1) ^ -(z & 1)
                pos += 3
            else:
                timestamp_delta, pos = slow(data, pos + 1, 10)
            b = data[pos]
            if b < 0x80:
                offset_delta = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                offset_delta = (z >> 1) ^ -(z & 1)
                pos += 2
            else:
                offset_delta, pos = slow(data, pos)
            b = data[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                length = (z >> 1) ^ -(z & 1)
                pos += 2
            else:
                length, pos = slow(data, pos)
            if length >= 0:
                key = data[pos : pos + length]
                pos += length
            elif length == -1:
                key = None
            else:
                raise _corrupt(f"invalid key length {length}")
            b = data[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                length = (z >> 1) ^ -(z & 1)
                pos += 2
            else:
                length, pos = slow(data, pos)
            if length >= 0:
                value = data[pos : pos + length]
                pos += length
            elif length == -1:
                value = None
            else:
                raise _corrupt(f"invalid value length {length}")
            b = data[pos]
            if b == 0:
                headers: list = []
                pos += 1
            else:
                headers, pos = _read_headers(data, pos, record_end)
            if pos != record_end:
                raise _corrupt(f"record fields end at {pos}, its length says {record_end}")
            append(
                new(
                    cls,
                    (
                        base_offset + offset_delta,
                        base_timestamp + timestamp_delta if log_append_time is None else log_append_time,
                        key,
                        value,
                        headers,
                        attributes,
                    ),
                )
            )
    except IndexError:
        raise _corrupt("premature end of the records") from None
    if pos != end:
        raise _corrupt(f"{end - pos} bytes remain after the declared {count} records")
    return out


def _read_headers(data: bytes, pos: int, record_end: int) -> tuple[list, int]:
    count, pos = slow_varint(data, pos)
    if count < 0 or count > record_end - pos:
        raise _corrupt(f"invalid number of record headers {count}")
    headers = []
    for _ in range(count):
        key_length, pos = slow_varint(data, pos)
        if key_length < 0 or pos + key_length > record_end:
            raise _corrupt(f"invalid header key length {key_length}")
        key = data[pos : pos + key_length].decode("utf-8", "replace")
        pos += key_length
        value_length, pos = slow_varint(data, pos)
        if value_length == -1:
            value = None
        elif 0 <= value_length <= record_end - pos:
            value = data[pos : pos + value_length]
            pos += value_length
        else:
            raise _corrupt(f"invalid header value length {value_length}")
        headers.append((key, value))
    return headers, pos


def slow_varint(data, pos: int) -> tuple[int, int]:
    b = data[pos]
    if b < 0x80:
        return ONE_BYTE_DECODED[b], pos + 1
    return decode_varint_slow(data, pos)


class RecordsScan(NamedTuple):
    """What the validator needs from a records section, without materialising keys and values
    (Kafka's ``skipKeyValueIterator``): per record in order, the timestamp and offset deltas, and
    the indexes of records with a null key."""

    timestamp_deltas: list
    offset_deltas: list
    null_key_indexes: list


def scan_records(data: bytes, count: int) -> RecordsScan:
    """Walk exactly ``count`` records filling ``data``, checking their structure as
    :func:`read_records` does but skipping keys, values and headers. Raises CorruptRecordError."""
    zz = ONE_BYTE_DECODED
    slow = decode_varint_slow
    timestamp_deltas: list[int] = []
    offset_deltas: list[int] = []
    null_keys: list[int] = []
    add_ts = timestamp_deltas.append
    add_od = offset_deltas.append
    pos = 0
    end = len(data)
    if count < 0 or count * MIN_RECORD_SIZE > end:
        raise _corrupt(f"{count} records cannot fit in {end} bytes")
    try:
        for index in range(count):
            b = data[pos]
            if b < 0x80:
                size = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                size = (z >> 1) ^ -(z & 1)
                pos += 2
            else:
                size, pos = slow(data, pos)
            record_end = pos + size
            if size < _MIN_BODY_SIZE or record_end > end:
                raise _corrupt(f"record length {size} at position {pos} exceeds the {end} bytes of the batch")
            b = data[pos + 1]
            if b < 0x80:
                add_ts(zz[b])
                pos += 2
            elif data[pos + 2] < 0x80:
                z = (b & 0x7F) | (data[pos + 2] << 7)
                add_ts((z >> 1) ^ -(z & 1))
                pos += 3
            else:
                timestamp_delta, pos = slow(data, pos + 1, 10)
                add_ts(timestamp_delta)
            b = data[pos]
            if b < 0x80:
                add_od(zz[b])
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                add_od((z >> 1) ^ -(z & 1))
                pos += 2
            else:
                offset_delta, pos = slow(data, pos)
                add_od(offset_delta)
            b = data[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                length = (z >> 1) ^ -(z & 1)
                pos += 2
            else:
                length, pos = slow(data, pos)
            if length >= 0:
                pos += length
            elif length == -1:
                null_keys.append(index)
            else:
                raise _corrupt(f"invalid key length {length}")
            b = data[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                length = (z >> 1) ^ -(z & 1)
                pos += 2
            else:
                length, pos = slow(data, pos)
            if length >= 0:
                pos += length
            elif length != -1:
                raise _corrupt(f"invalid value length {length}")
            if data[pos] == 0:
                pos += 1
            else:
                pos = _read_headers(data, pos, record_end)[1]
            if pos != record_end:
                raise _corrupt(f"record fields end at {pos}, its length says {record_end}")
    except IndexError:
        raise _corrupt("premature end of the records") from None
    if pos != end:
        raise _corrupt(f"{end - pos} bytes remain after the declared {count} records")
    return RecordsScan(timestamp_deltas, offset_deltas, null_keys)
