"""A direct decoder for ProduceRequest (api key 0) bodies: the hot path of every produce request.

The generic codec runs one compiled step per field and a dict template per struct; this reads the few fields
of a ProduceRequest with ``struct`` unpacks, and gives the same dict (``transactional_id``, ``acks``,
``timeout_ms``, ``topic_data`` of ``{"name", "partition_data": [{"index", "records"}]}``, ``records`` a zero-copy
``memoryview`` slice or None). It answers None, and the caller uses the generic codec, for anything it does not
take on itself: tagged fields, a length that does not fit, invalid UTF-8, a version outside 0-12, so every
error (ProtocolDecodeError) and every unusual input is the generic codec's (tests/unit/protocol compare both).
"""

from __future__ import annotations

import struct
from typing import Any

from pykbroker.protocol.types import ProtocolDecodeError, read_uvarint

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_MAX_VERSION = 12
_MAX_STRING_LENGTH = 0x7FFF


def decode_produce_request(version: int, buf: memoryview) -> dict | None:
    """The ProduceRequest body at the start of ``buf`` (a memoryview of the bytes after the request header) at
    ``version`` as the generic codec decodes it, or None to let the generic codec decode it (see the module
    docstring). Trailing bytes are ignored, as by the generic codec."""
    if not 0 <= version <= _MAX_VERSION:
        return None
    try:
        return _decode(version, buf)
    except (struct.error, IndexError, UnicodeDecodeError, ProtocolDecodeError):
        return None  # the generic codec decodes it again and raises its own error


def _decode(version: int, buf: memoryview) -> dict | None:
    flexible = version >= 9
    size = len(buf)
    pos = 0
    transactional_id: str | None = None
    if version >= 3:
        if flexible:
            n = buf[pos]
            if n < 0x80:  # a one-byte varint, read inline (each count and name length of a usual request)
                pos += 1
            else:
                n, pos = read_uvarint(buf, pos)
            n -= 1
        else:
            n = _INT16.unpack_from(buf, pos)[0]
            pos += 2
        if n >= 0:
            if n > _MAX_STRING_LENGTH or pos + n > size:
                return None
            transactional_id = str(buf[pos : pos + n], "utf-8")
            pos += n
        elif n != -1:
            return None
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, pos)
    pos += 6
    if flexible:
        topic_count = buf[pos]
        if topic_count < 0x80:
            pos += 1
        else:
            topic_count, pos = read_uvarint(buf, pos)
        topic_count -= 1
    else:
        topic_count = _INT32.unpack_from(buf, pos)[0]
        pos += 4
    if topic_count < 0 or topic_count > size - pos:
        return None  # null (not nullable) or impossible: the generic codec's error
    topics: list[dict[str, Any]] = []
    for _ in range(topic_count):
        if flexible:
            n = buf[pos]
            if n < 0x80:
                pos += 1
            else:
                n, pos = read_uvarint(buf, pos)
            n -= 1
        else:
            n = _INT16.unpack_from(buf, pos)[0]
            pos += 2
        if n < 0 or n > _MAX_STRING_LENGTH or pos + n > size:
            return None
        name = str(buf[pos : pos + n], "utf-8")
        pos += n
        if flexible:
            partition_count = buf[pos]
            if partition_count < 0x80:
                pos += 1
            else:
                partition_count, pos = read_uvarint(buf, pos)
            partition_count -= 1
        else:
            partition_count = _INT32.unpack_from(buf, pos)[0]
            pos += 4
        if partition_count < 0 or partition_count > size - pos:
            return None
        partitions: list[dict[str, Any]] = []
        for _ in range(partition_count):
            index = _INT32.unpack_from(buf, pos)[0]
            pos += 4
            if flexible:
                n, pos = read_uvarint(buf, pos)
                n -= 1
            else:
                n = _INT32.unpack_from(buf, pos)[0]
                pos += 4
            if n >= 0:
                if pos + n > size:
                    return None
                records: memoryview | None = buf[pos : pos + n]
                pos += n
            elif n == -1:
                records = None
            else:
                return None
            if flexible:
                if buf[pos] != 0:
                    return None  # tagged fields
                pos += 1
            partitions.append({"index": index, "records": records})
        if flexible:
            if buf[pos] != 0:
                return None
            pos += 1
        topics.append({"name": name, "partition_data": partitions})
    if flexible and buf[pos] != 0:
        return None
    return {"transactional_id": transactional_id, "acks": acks, "timeout_ms": timeout_ms, "topic_data": topics}
