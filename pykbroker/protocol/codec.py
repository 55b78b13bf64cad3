"""The one generic codec: reads a :class:`~pykbroker.protocol.schema.MessageSchema`, serves every version.

Mirrors what Kafka's generated ``*Data.read``/``write`` methods do, from data instead of generated code.

Theory of operation
-------------------
For each (schema, version) the schema is compiled, lazily and once, into a tree of closures (a *reader* and a
*writer*); later calls only run closures, so the cost is per field, never per record (``records`` fields are one
slice). Consecutive fixed-width fields (ints, bools, float64) are compiled into one ``struct.Struct`` call.

Representation: a message is a plain ``dict`` keyed by snake_case field names; nested structs are dicts, arrays are
lists (``None`` when null), uuids are ``uuid.UUID``, strings ``str``, bytes ``bytes``, records a zero-copy
``memoryview`` of the input. Decoding fills every field of the schema, so fields absent from the decoded version hold
their defaults. Encoding takes such a dict; missing keys take the field default; fields absent from the version are
ignored. Unknown tagged fields received are kept raw under ``_unknown_tagged_fields`` (``{tag: bytes}``, only when
there are some) and written back when encoding. Tagged fields equal to their default are not written.

Deferred regions: a ``records`` value that is not ``bytes``/``bytearray``/``memoryview``/``None`` is an object with
``size_in_bytes`` (int) and ``write_to(sock, offset, max_bytes)``: the encoder writes its length prefix and returns the
object as a separate part (see :func:`encode_parts`) so the network layer can ``os.sendfile`` it.

Strict mode: with ``PYKBROKER_STRICT_CODEC=1`` in the environment at import (the test suite sets it), every
compiled writer also checks that each dict it encodes (the message and every nested struct) has only keys that are
fields of that struct in *some* version of the message (plus ``_unknown_tagged_fields``), and raises
ProtocolEncodeError naming the unknown keys: a misspelled field would otherwise silently go on the wire as its
default. Fields of other versions are accepted, as callers build one dict for every version. Off by default: the
check is one set difference per struct, which production does not pay (the writers compiled without it are the same
closures as before).

Errors: decoding raises :class:`ProtocolDecodeError` (never reads past the buffer), encoding raises
:class:`ProtocolEncodeError`; a version outside the schema's valid versions raises ``UnsupportedVersionError``.
Compiled codecs are immutable after construction, so every thread may use them.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from typing import Any

from pykbroker.protocol import types as t
from pykbroker.protocol.errors import UnsupportedVersionError
from pykbroker.protocol.schema import Field, MessageSchema
from pykbroker.protocol.types import ProtocolDecodeError, ProtocolEncodeError

UNKNOWN_TAGGED_FIELDS = "_unknown_tagged_fields"

STRICT = os.environ.get("PYKBROKER_STRICT_CODEC", "") not in ("", "0")
"""Strict mode (see the module doc); read at import, applies to writers compiled afterwards."""

Reader = Callable[[memoryview, int], tuple[Any, int]]
Writer = Callable[["Output", Any], None]
_BYTES_LIKE = (bytes, bytearray, memoryview)


class EncodedStruct(bytes):
    """A struct element of an array already encoded (by :func:`encode_struct_element` for the same message,
    version and array): the array writer copies it as is. Lets a handler cache the encoding of parts of a
    response that rarely change (Metadata's per-topic entries). ``error_counts``: the element's ``error_code``
    fields counted by code (its own and its entries'), for the request metrics."""

    error_counts: dict[int, int]


class Output(bytearray):
    """The encoder's buffer: a ``bytearray`` plus the deferred regions met so far as ``(offset, region)``."""

    __slots__ = ("deferred",)

    def __init__(self, initial: bytes = b"") -> None:
        super().__init__(initial)
        self.deferred: list[tuple[int, Any]] = []

    def parts(self) -> list[Any]:
        """The bytes split around deferred regions: ``[bytes-like, region, bytes-like, ...]``."""
        if not self.deferred:
            return [self]
        parts: list[Any] = []
        prev = 0
        for offset, region in self.deferred:
            if offset > prev:
                parts.append(self[prev:offset])
            parts.append(region)
            prev = offset
        if prev < len(self):
            parts.append(self[prev:])
        return parts

    def total_size(self) -> int:
        """Bytes written plus the sizes of the deferred regions."""
        return len(self) + sum(region.size_in_bytes for _, region in self.deferred)


# ------------------------------------------------------------------------------------------------------ readers

_FIXED_READERS: dict[str, Reader] = {
    "int8": t.read_int8,
    "int16": t.read_int16,
    "int32": t.read_int32,
    "int64": t.read_int64,
    "uint16": t.read_uint16,
    "uint32": t.read_uint32,
    "float64": t.read_float64,
    "bool": t.read_bool,
}


def _primitive_reader(ftype: str, flexible: bool, nullable: bool) -> Reader:
    if ftype in _FIXED_READERS:
        return _FIXED_READERS[ftype]
    if ftype == "uuid":
        return t.read_uuid
    if ftype == "string":
        return t.string_reader(flexible, nullable)
    if ftype == "bytes":
        return t.bytes_reader(flexible, nullable)
    if ftype == "records":
        return t.bytes_reader(flexible, nullable, zero_copy=True)
    raise AssertionError(ftype)


def _array_reader(f: Field, version: int, flexible: bool, nullable: bool) -> Reader:
    read_length = t.read_array_length
    if f.element in t.FIXED_FORMATS:
        ch, size = t.FIXED_FORMATS[f.element], t.FIXED_SIZES[f.element]

        def read_fixed_array(buf: memoryview, pos: int) -> tuple[Any, int]:
            n, pos = read_length(buf, pos, flexible, nullable)
            if n < 0:
                return None, pos
            end = pos + n * size
            if end > len(buf):
                raise t.truncated(f"{f.name} array", pos, n * size, len(buf))
            return list(struct.unpack_from(f">{n}{ch}", buf, pos)), end

        return read_fixed_array
    if f.element == "struct":
        element = _struct_reader(f.fields, version, flexible)
    else:
        element = _primitive_reader(f.element, flexible, False)  # type: ignore[arg-type]

    def read_array(buf: memoryview, pos: int) -> tuple[Any, int]:
        n, pos = read_length(buf, pos, flexible, nullable)
        if n < 0:
            return None, pos
        items: list[Any] = []
        append = items.append
        for _ in range(n):
            item, pos = element(buf, pos)
            append(item)
        return items, pos

    return read_array


def _field_reader(f: Field, version: int, flexible: bool) -> Reader:
    nullable = version in f.nullable_versions
    if f.type == "array":
        return _array_reader(f, version, flexible, nullable)
    if f.type == "struct":
        read_struct = _struct_reader(f.fields, version, flexible)
        if not nullable:
            return read_struct

        def read_nullable_struct(buf: memoryview, pos: int) -> tuple[Any, int]:
            marker, pos = t.read_int8(buf, pos)
            if marker < 0:
                return None, pos
            return read_struct(buf, pos)

        return read_nullable_struct
    return _primitive_reader(f.type, flexible, nullable)


def _run_reader_step(names: tuple[str, ...], fmt: str) -> Callable[[memoryview, int, dict], int]:
    s = struct.Struct(">" + fmt)
    unpack_from, size = s.unpack_from, s.size

    def step(buf: memoryview, pos: int, d: dict) -> int:
        try:
            d.update(zip(names, unpack_from(buf, pos), strict=False))  # same length by construction
        except struct.error:
            raise t.truncated("/".join(names), pos, size, len(buf)) from None
        return pos + size

    return step


def _field_reader_step(name: str, read: Reader) -> Callable[[memoryview, int, dict], int]:
    def step(buf: memoryview, pos: int, d: dict) -> int:
        d[name], pos = read(buf, pos)
        return pos

    return step


def _struct_reader(fields: tuple[Field, ...], version: int, flexible: bool) -> Reader:
    template: dict[str, Any] = {}
    fresh: list[tuple[str, Callable[[], Any]]] = []  # absent or tagged fields whose default is a new list/dict
    steps: list[Callable[[memoryview, int, dict], int]] = []
    tagged: dict[int, tuple[str, Reader]] = {}
    run_names: list[str] = []
    run_fmt = ""
    for f in fields:
        present = version in f.versions
        template[f.name] = f.default
        if not present or f.is_tagged(version):
            if f.mutable_default:
                fresh.append((f.name, f.default_value))
            if present:
                tagged[f.tag] = (f.name, _field_reader(f, version, flexible))  # type: ignore[index]
            continue
        if f.type in t.FIXED_FORMATS:
            run_names.append(f.name)
            run_fmt += t.FIXED_FORMATS[f.type]
            continue
        if run_names:
            steps.append(_run_reader_step(tuple(run_names), run_fmt))
            run_names, run_fmt = [], ""
        steps.append(_field_reader_step(f.name, _field_reader(f, version, flexible)))
    if run_names:
        steps.append(_run_reader_step(tuple(run_names), run_fmt))
    read_uvarint = t.read_uvarint

    def read_tags(buf: memoryview, pos: int, d: dict) -> int:
        count, pos = read_uvarint(buf, pos)
        if count > len(buf) - pos:
            raise t.truncated("tagged fields", pos, count, len(buf))
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
            end = pos + size
            if end > len(buf):
                raise t.truncated(f"tagged field {tag}", pos, size, len(buf))
            known = tagged.get(tag)
            if known is None:
                d.setdefault(UNKNOWN_TAGGED_FIELDS, {})[tag] = bytes(buf[pos:end])
            else:
                d[known[0]], _ = known[1](buf[:end], pos)
            pos = end
        return pos

    def read_struct(buf: memoryview, pos: int) -> tuple[dict, int]:
        d = template.copy()
        for name, factory in fresh:
            d[name] = factory()
        for step in steps:
            pos = step(buf, pos, d)
        if flexible:
            if pos < len(buf) and buf[pos] == 0:  # the common case: no tagged fields
                return d, pos + 1
            pos = read_tags(buf, pos, d)
        return d, pos

    return read_struct


# ------------------------------------------------------------------------------------------------------ writers


def _fixed_writer(ftype: str) -> Writer:
    pack = struct.Struct(">" + t.FIXED_FORMATS[ftype]).pack

    def write(out: Output, value: Any) -> None:
        out += pack(value)

    return write


def _records_writer(flexible: bool, nullable: bool) -> Writer:
    def write_records(out: Output, value: Any) -> None:
        if value is None or isinstance(value, _BYTES_LIKE):
            t.write_bytes_value(out, value, flexible, nullable)
            return
        size = value.size_in_bytes  # a deferred region: length now, bytes later (sendfile)
        if flexible:
            t.write_uvarint(out, size + 1)
        else:
            out += t.INT32.pack(size)
        out.deferred.append((len(out), value))

    return write_records


def _primitive_writer(ftype: str, flexible: bool, nullable: bool) -> Writer:
    if ftype in t.FIXED_FORMATS:
        return _fixed_writer(ftype)
    if ftype == "uuid":
        return t.write_uuid
    if ftype == "string":
        return t.string_writer(flexible, nullable)
    if ftype == "bytes":
        return lambda out, value: t.write_bytes_value(out, value, flexible, nullable)
    if ftype == "records":
        return _records_writer(flexible, nullable)
    raise AssertionError(ftype)


def _array_writer(f: Field, version: int, flexible: bool, nullable: bool) -> Writer:
    write_uvarint, pack_int32 = t.write_uvarint, t.INT32.pack

    def write_length(out: Output, n: int, compact: bool) -> None:
        if compact:
            write_uvarint(out, n + 1)
        else:
            out += pack_int32(n)

    if f.element in t.FIXED_FORMATS:
        ch = t.FIXED_FORMATS[f.element]

        def write_fixed_array(out: Output, value: Any) -> None:
            if value is None:
                if not nullable:
                    raise ProtocolEncodeError("null in a non-nullable array")
                write_length(out, -1, flexible)
                return
            write_length(out, len(value), flexible)
            out += struct.pack(f">{len(value)}{ch}", *value)

        return write_fixed_array
    if f.element == "struct":
        element = _struct_writer(f.fields, version, flexible)
    else:
        element = _primitive_writer(f.element, flexible, False)  # type: ignore[arg-type]

    def write_array(out: Output, value: Any) -> None:
        if value is None:
            if not nullable:
                raise ProtocolEncodeError("null in a non-nullable array")
            write_length(out, -1, flexible)
            return
        if flexible:
            write_uvarint(out, len(value) + 1)
        else:
            out += pack_int32(len(value))
        for item in value:
            element(out, item)

    if f.element != "struct":
        return write_array

    def write_struct_array(out: Output, value: Any) -> None:
        if value is None:
            if not nullable:
                raise ProtocolEncodeError("null in a non-nullable array")
            write_length(out, -1, flexible)
            return
        if flexible:
            write_uvarint(out, len(value) + 1)
        else:
            out += pack_int32(len(value))
        for item in value:
            if type(item) is EncodedStruct:
                out += item
            else:
                element(out, item)

    return write_struct_array


def _field_writer(f: Field, version: int, flexible: bool) -> Writer:
    nullable = version in f.nullable_versions
    if f.type == "array":
        return _array_writer(f, version, flexible, nullable)
    if f.type == "struct":
        write_struct = _struct_writer(f.fields, version, flexible)

        def write_struct_field(out: Output, value: Any) -> None:
            if value is None:
                if not nullable:
                    raise ProtocolEncodeError("null in a non-nullable struct")
                out.append(0xFF)  # int8 -1
                return
            if nullable:
                out.append(1)
            write_struct(out, value)

        return write_struct_field
    return _primitive_writer(f.type, flexible, nullable)


def _named(name: str, write: Writer, default: Any) -> Callable[[Output, dict], None]:
    def step(out: Output, d: dict) -> None:
        try:
            write(out, d.get(name, default))
        except ProtocolEncodeError as e:
            raise ProtocolEncodeError(f"{name}: {e}") from None
        except (struct.error, TypeError, AttributeError, ValueError) as e:
            raise ProtocolEncodeError(f"{name}: {type(e).__name__}: {e}") from None

    return step


def _run_writer_step(names: tuple[str, ...], defaults: tuple[Any, ...], fmt: str) -> Callable[[Output, dict], None]:
    pack = struct.Struct(">" + fmt).pack

    def step(out: Output, d: dict) -> None:
        get = d.get
        try:
            out += pack(*map(get, names, defaults))
        except (struct.error, TypeError) as e:
            raise ProtocolEncodeError(f"{'/'.join(names)}: {e}") from None

    return step


def _struct_writer(fields: tuple[Field, ...], version: int, flexible: bool) -> Writer:
    steps: list[Callable[[Output, dict], None]] = []
    tagged: list[tuple[int, str, Any, Writer]] = []
    run: list[Field] = []

    def flush_run() -> None:
        if run:
            steps.append(
                _run_writer_step(
                    tuple(f.name for f in run),
                    tuple(f.default for f in run),
                    "".join(t.FIXED_FORMATS[f.type] for f in run),
                )
            )
            run.clear()

    for f in fields:
        if version not in f.versions:
            continue
        if f.is_tagged(version):
            tagged.append((f.tag, f.name, f.default_value(), _field_writer(f, version, flexible)))  # type: ignore
        elif f.type in t.FIXED_FORMATS:
            run.append(f)
        else:
            flush_run()
            steps.append(_named(f.name, _field_writer(f, version, flexible), f.default_value()))
    flush_run()
    tagged.sort(key=lambda entry: entry[0])
    known_tags = {entry[0] for entry in tagged}

    def write_tags(out: Output, d: dict) -> None:
        entries: list[tuple[int, Any]] = []
        for tag, name, default, write in tagged:
            value = d.get(name, default)
            if value == default:
                continue
            tmp = Output()
            try:
                write(tmp, value)
            except ProtocolEncodeError as e:
                raise ProtocolEncodeError(f"{name}: {e}") from None
            if tmp.deferred:
                raise ProtocolEncodeError(f"{name}: deferred records cannot be a tagged field")
            entries.append((tag, tmp))
        unknown = d.get(UNKNOWN_TAGGED_FIELDS)
        if unknown:
            entries.extend((tag, raw) for tag, raw in unknown.items() if tag not in known_tags)
            entries.sort(key=lambda entry: entry[0])
        t.write_uvarint(out, len(entries))
        for tag, raw in entries:
            t.write_uvarint(out, tag)
            t.write_uvarint(out, len(raw))
            out += raw

    def write_struct(out: Output, d: dict) -> None:
        for step in steps:
            step(out, d)
        if flexible:
            if tagged or UNKNOWN_TAGGED_FIELDS in d:
                write_tags(out, d)
            else:
                out.append(0)

    if STRICT:
        return _strict(write_struct, fields)
    return write_struct


def _strict(write_struct: Writer, fields: tuple[Field, ...]) -> Writer:
    """``write_struct`` preceded by the strict-mode check: every key of the dict must name a field of this struct in
    some version (tagged or not), or be ``_unknown_tagged_fields``."""
    known = frozenset(f.name for f in fields) | {UNKNOWN_TAGGED_FIELDS}

    def write_struct_strict(out: Output, d: dict) -> None:
        unknown = d.keys() - known
        if unknown:
            raise ProtocolEncodeError(
                f"unknown field(s) {', '.join(sorted(map(str, unknown)))}; "
                f"the fields are {', '.join(sorted(known - {UNKNOWN_TAGGED_FIELDS}))}"
            )
        write_struct(out, d)

    return write_struct_strict


# ------------------------------------------------------------------------------------------------------ API


def _check_version(schema: MessageSchema, version: int) -> None:
    if version not in schema.valid_versions:
        raise UnsupportedVersionError(
            f"{schema.full_name} version {version} is outside its valid versions {schema.valid_versions}"
        )


def reader_for(schema: MessageSchema, version: int) -> Reader:
    """The compiled reader of ``schema`` at ``version`` (compiled on first use, then cached)."""
    reader = schema.readers.get(version)
    if reader is None:
        _check_version(schema, version)
        reader = schema.readers[version] = _struct_reader(schema.fields, version, schema.is_flexible(version))
    return reader


def writer_for(schema: MessageSchema, version: int) -> Writer:
    """The compiled writer of ``schema`` at ``version`` (compiled on first use, then cached)."""
    writer = schema.writers.get(version)
    if writer is None:
        _check_version(schema, version)
        writer = schema.writers[version] = _struct_writer(schema.fields, version, schema.is_flexible(version))
    return writer


def as_byte_view(buf: Any) -> memoryview:
    """``buf`` as a 1-D unsigned-byte ``memoryview`` (no copy)."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


def decode(schema: MessageSchema, version: int, buf: Any, offset: int = 0) -> tuple[dict, int]:
    """Decode one ``schema`` message at ``version`` from ``buf[offset:]`` -> ``(message dict, end offset)``.

    Trailing bytes are left alone. Raises ProtocolDecodeError on malformed input, UnsupportedVersionError on a
    version outside the schema's valid versions.
    """
    reader = reader_for(schema, version)
    mv = as_byte_view(buf)
    try:
        return reader(mv, offset)
    except ProtocolDecodeError:
        raise
    except (struct.error, IndexError, ValueError) as e:  # safety net; readers raise ProtocolDecodeError themselves
        raise ProtocolDecodeError(f"{schema.full_name} v{version}: {type(e).__name__}: {e}") from None


def encode_into(out: Output, schema: MessageSchema, version: int, body: dict) -> None:
    """Append the encoding of ``body`` to ``out`` (an :class:`Output`); deferred regions are recorded in it."""
    writer = writer_for(schema, version)
    try:
        writer(out, body)
    except ProtocolEncodeError as e:
        raise ProtocolEncodeError(f"{schema.full_name} v{version}: {e}") from None
    except (struct.error, TypeError, AttributeError, ValueError) as e:
        raise ProtocolEncodeError(f"{schema.full_name} v{version}: {type(e).__name__}: {e}") from None


def encode_parts(
    schema: MessageSchema, version: int, body: dict, header: bytes = b"", size_prefix: bool = False
) -> list[Any]:
    """Encode ``body`` -> parts: bytes-like runs and deferred region objects, in send order.

    ``header`` bytes are put first; with ``size_prefix`` the first part starts with the int32 total size of
    header + body (deferred regions included), i.e. a complete frame.
    """
    out = Output(b"\0\0\0\0" if size_prefix else b"")
    out += header
    encode_into(out, schema, version, body)
    if size_prefix:
        size = out.total_size() - 4
        if size > 0x7FFFFFFF:
            raise ProtocolEncodeError(f"{schema.full_name} v{version}: frame of {size} bytes is too large")
        t.INT32.pack_into(out, 0, size)
    return out.parts()


_ELEMENT_WRITERS: dict[tuple[str, int, tuple[str, ...]], Writer] = {}


def encode_struct_element(schema: MessageSchema, version: int, path: tuple[str, ...], item: dict) -> EncodedStruct:
    """Encode ``item`` as one element of the struct array reached from the message by the field names ``path``
    (e.g. ``("topics",)`` for Metadata's topics), at ``version``; the result may be put in that array in place of
    the dict. Raises ProtocolEncodeError (also for a path that names no struct array)."""
    key = (schema.full_name, version, path)
    writer = _ELEMENT_WRITERS.get(key)
    if writer is None:
        _check_version(schema, version)
        fields = schema.fields
        found: Field | None = None
        for name in path:
            found = next((f for f in fields if f.name == name and version in f.versions), None)
            if found is None or found.type != "array" or found.element != "struct":
                raise ProtocolEncodeError(f"{schema.full_name} v{version}: no struct array at {'/'.join(path)}")
            fields = found.fields
        if found is None:
            raise ProtocolEncodeError(f"{schema.full_name} v{version}: empty path")
        writer = _ELEMENT_WRITERS[key] = _struct_writer(found.fields, version, schema.is_flexible(version))
    out = Output()
    try:
        writer(out, item)
    except ProtocolEncodeError as e:
        raise ProtocolEncodeError(f"{schema.full_name} v{version}: {e}") from None
    except (struct.error, TypeError, AttributeError, ValueError) as e:
        raise ProtocolEncodeError(f"{schema.full_name} v{version}: {type(e).__name__}: {e}") from None
    if out.deferred:
        raise ProtocolEncodeError(f"{schema.full_name} v{version}: deferred records in a pre-encoded element")
    encoded = EncodedStruct(out)
    encoded.error_counts = _element_error_counts(item)
    return encoded


def _element_error_counts(item: dict) -> dict[int, int]:
    counts: dict[int, int] = {}
    code = item.get("error_code")
    if code is not None:
        counts[code] = 1
    for value in item.values():
        if type(value) is list:
            for entry in value:
                if type(entry) is dict and (code := entry.get("error_code")) is not None:
                    counts[code] = counts.get(code, 0) + 1
    return counts


def encode(schema: MessageSchema, version: int, body: dict, header: bytes = b"", size_prefix: bool = False) -> bytes:
    """Like :func:`encode_parts` but one ``bytes``; raises ProtocolEncodeError if a deferred region is present."""
    parts = encode_parts(schema, version, body, header, size_prefix)
    if len(parts) != 1 or not isinstance(parts[0], _BYTES_LIKE):
        raise ProtocolEncodeError(f"{schema.full_name} v{version}: has deferred records; use encode_parts")
    return bytes(parts[0])
