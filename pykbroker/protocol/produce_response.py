"""A direct encoder for the common ProduceResponse (api key 0) shape: the hot path of every produce request.

The generic codec walks the schema's field steps for each of the ~10 fields of a one-partition response;
this writes the same bytes with a few ``struct`` packs. It covers the shape the produce handler builds for a
successful or plainly failed append at versions 0-12 (the versions of our schema): each topic entry exactly
``{"name", "partition_responses"}``, each partition entry exactly the seven fields ``index``, ``error_code``,
``base_offset``, ``log_append_time_ms``, ``log_start_offset``, ``record_errors`` (empty), ``error_message``
(str or None), and a body of ``responses`` (+ ``throttle_time_ms``). Anything else (record errors, the KIP-951
``current_leader``/``node_endpoints`` tagged fields, pre-encoded entries, other keys) answers None and the
caller uses the generic codec, so the encoding is always the generic codec's (tests/unit/protocol compare both).
"""

from __future__ import annotations

import struct

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_SIZE_CORR = struct.Struct(">ii")
#: per partition by version: index, error_code, base_offset[, log_append_time_ms[, log_start_offset]]
_V0 = struct.Struct(">ihq")
_V2 = struct.Struct(">ihqq")
_V5 = struct.Struct(">ihqqq")
_PARTITION_KEYS = frozenset(
    ("index", "error_code", "base_offset", "log_append_time_ms", "log_start_offset", "record_errors", "error_message")
)
_TOPIC_KEYS = frozenset(("name", "partition_responses"))
_MAX_VERSION = 12


#: the one-byte unsigned varints (counts and lengths below 128: every response but a huge one), without a call
_UVARINT_1 = [bytes((n,)) for n in range(0x80)]


def _uvarint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _partition_struct(version: int) -> struct.Struct:
    """The fixed part of a partition entry at ``version``: index, error_code, base_offset[, log_append_time_ms[,
    log_start_offset]]."""
    if version >= 5:
        return _V5
    if version >= 2:
        return _V2
    return _V0


def _begin(flexible: bool) -> bytearray:
    """A frame with room for its size and correlation id (and a flexible response header's empty tags)."""
    return bytearray(b"\0\0\0\0\0\0\0\0\0" if flexible else b"\0\0\0\0\0\0\0\0")


def _put_length(out: bytearray, n: int, flexible: bool, fixed: struct.Struct) -> None:
    """An array count or string length ``n``: an unsigned varint of ``n + 1`` when ``flexible``, else ``fixed``
    (int32 counts, int16 lengths)."""
    if flexible:
        out += _UVARINT_1[n + 1] if n < 0x7F else _uvarint(n + 1)
    else:
        out += fixed.pack(n)


def _put_partition(
    out: bytearray,
    version: int,
    flexible: bool,
    fixed: struct.Struct,
    index: int,
    error_code: int,
    base_offset: int,
    log_append_time_ms: int,
    log_start_offset: int,
    error_message: str | None,
) -> None:
    """One partition entry without record errors (``fixed`` = :func:`_partition_struct`)."""
    if version >= 5:
        out += fixed.pack(index, error_code, base_offset, log_append_time_ms, log_start_offset)
    elif version >= 2:
        out += fixed.pack(index, error_code, base_offset, log_append_time_ms)
    else:
        out += fixed.pack(index, error_code, base_offset)
    if version >= 8:
        if flexible:
            out += b"\x01"  # record_errors: empty compact array
            if error_message is None:
                out += b"\x00"
            else:
                encoded = error_message.encode()
                out += _uvarint(len(encoded) + 1)
                out += encoded
            out += b"\x00"  # partition tagged fields
        else:
            out += b"\0\0\0\0"
            if error_message is None:
                out += b"\xff\xff"
            else:
                encoded = error_message.encode()
                out += _INT16.pack(len(encoded))
                out += encoded


def _finish(out: bytearray, version: int, flexible: bool, throttle_time_ms: int, correlation_id: int) -> bytearray:
    """The body's end (throttle time from v1, top-level tags when flexible) and the frame's size and correlation id."""
    if version >= 1:
        out += _INT32.pack(throttle_time_ms)
    if flexible:
        out += b"\x00"  # top-level tagged fields
    _SIZE_CORR.pack_into(out, 0, len(out) - 4, correlation_id)
    return out


def encode_produce_response_frame(version: int, correlation_id: int, body: dict) -> bytearray | None:
    """The complete response frame (int32 size, response header, body) of ProduceResponse ``body`` at
    ``version``, byte for byte what ``codec.encode_parts`` writes; None when ``body`` is not of the common
    shape (see the module docstring) or ``version`` is outside 0-12. Out-of-range integers raise
    ``struct.error`` (the generic codec raises ProtocolEncodeError for them)."""
    if not 0 <= version <= _MAX_VERSION:
        return None
    responses = body.get("responses")
    if type(responses) is not list:
        return None
    has_throttle = "throttle_time_ms" in body
    if len(body) != 1 + has_throttle:
        return None
    flexible = version >= 9
    fixed = _partition_struct(version)
    out = _begin(flexible)
    _put_length(out, len(responses), flexible, _INT32)
    for topic in responses:
        if type(topic) is not dict or topic.keys() != _TOPIC_KEYS:
            return None
        name = topic["name"].encode()
        _put_length(out, len(name), flexible, _INT16)
        out += name
        partitions = topic["partition_responses"]
        if type(partitions) is not list:
            return None
        _put_length(out, len(partitions), flexible, _INT32)
        for p in partitions:
            if type(p) is not dict or p.keys() != _PARTITION_KEYS or p["record_errors"]:
                return None
            _put_partition(
                out,
                version,
                flexible,
                fixed,
                p["index"],
                p["error_code"],
                p["base_offset"],
                p["log_append_time_ms"],
                p["log_start_offset"],
                p["error_message"],
            )
        if flexible:
            out += b"\x00"  # topic tagged fields
    return _finish(out, version, flexible, body["throttle_time_ms"] if has_throttle else 0, correlation_id)


def encode_produce_response_from_results(
    version: int, correlation_id: int, topic_data: list, results: dict, missing: tuple, throttle_time_ms: int
) -> bytearray | None:
    """The response frame of a Produce request straight from its append results, without the response dicts:
    byte for byte the frame :func:`encode_produce_response_frame` (and the generic codec) writes for the body
    the produce handler builds from them (``server/handlers/produce.py`` ``_response``).

    ``topic_data``: the request's ``topic_data`` (the response follows its topic and partition order);
    ``results``: ``(topic, partition)`` -> a result tuple ``(error_code, base_offset, log_append_time_ms,
    log_start_offset, record_errors, error_message)`` (a ``ProducePartitionResult``); ``missing``: the result of a
    partition without one (UNKNOWN_SERVER_ERROR); ``throttle_time_ms``: the body's throttle time. None (the caller
    builds the body) when ``version`` is outside 0-12 or a result has record errors. Out-of-range integers raise
    ``struct.error``."""
    if not 0 <= version <= _MAX_VERSION:
        return None
    flexible = version >= 9
    fixed = _partition_struct(version)
    out = _begin(flexible)
    _put_length(out, len(topic_data), flexible, _INT32)
    get = results.get
    for topic in topic_data:
        name = topic["name"]
        encoded_name = name.encode()
        _put_length(out, len(encoded_name), flexible, _INT16)
        out += encoded_name
        partitions = topic["partition_data"]
        _put_length(out, len(partitions), flexible, _INT32)
        for p in partitions:
            index = p["index"]
            code, base_offset, log_append_time, log_start_offset, record_errors, message = get((name, index)) or missing
            if record_errors:
                return None
            _put_partition(
                out, version, flexible, fixed, index, code, base_offset, log_append_time, log_start_offset, message
            )
        if flexible:
            out += b"\x00"  # topic tagged fields
    return _finish(out, version, flexible, throttle_time_ms, correlation_id)
