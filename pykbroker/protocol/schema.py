"""Message schemas as data: a compact text DSL, parsed once at import into :class:`MessageSchema` objects.

Mirrors the message JSON specs read by Kafka's ``generator`` module (``MessageSpec``/``FieldSpec``), in our own
compact form. One schema block per message (request, response or KRaft metadata record)::

    request Metadata 3 0-12 flex=9+
      topics [] 0+ null=1+
        topic_id uuid 10+
        name string 0+ null=10+
      allow_auto_topic_creation bool 4+ =true

Header line: ``<kind> <Name> <api key> <valid versions> flex=<flexible versions>``, kind one of ``request``,
``response``, ``metadata`` or ``data`` (Kafka's ``"type": "data"``: the coordinators' record keys and values, see
:mod:`pykbroker.protocol.coordinator_records`). Each field line, indented two spaces per nesting level::

    <snake_name> <type> <versions> [null=<versions>] [tag=<n>] [tagv=<versions>] [=<default>]

- type: ``int8 int16 int32 int64 uint16 uint32 float64 bool uuid string bytes records``, ``[]<primitive>`` (array
  of a primitive), ``[]`` (array of structs, fields indented below) or ``{}`` (a struct, fields indented below);
- versions: ``3+``, ``0-4``, ``5`` or ``none``; ``null=`` gives the nullable versions, ``tag=`` makes the field a
  tagged field (tagged in ``tagv=`` versions, default: all its versions);
- ``=<default>``: ``=-1``, ``=true``, ``=null``, ``=0x7fffffff``, ``=`` (empty string). Without one: 0, false,
  ``""``, ``b""``, the zero UUID, ``[]``, a struct of defaults, and ``None`` for records.

Names are Kafka's CamelCase names in snake_case (``PartitionIndex`` -> ``partition_index``, see :func:`snake_case`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from dataclasses import field as dc_field
from typing import Any

from pykbroker.protocol.types import FIXED_FORMATS, ZERO_UUID

PRIMITIVES = frozenset(FIXED_FORMATS) | {"uuid", "string", "bytes", "records"}
NULLABLE_TYPES = frozenset({"string", "bytes", "records", "array", "struct"})
KINDS = ("request", "response", "metadata", "data")


class SchemaError(ValueError):
    """A schema text that does not parse or is inconsistent (a bug in our schema data, raised at import)."""


@dataclass(frozen=True)
class VersionRange:
    """Inclusive version range ``[lo, hi]``; ``hi`` None means open-ended ("3+"). Empty when ``lo > hi``."""

    lo: int
    hi: int | None

    @classmethod
    def parse(cls, text: str) -> VersionRange:
        """``"3+"``, ``"0-4"``, ``"5"`` or ``"none"``. Ranges are immutable: one object per text is shared (the
        schema table parses ~2,000 of a few dozen texts at every start, issue 31)."""
        parsed = _PARSED_RANGES.get(text)
        if parsed is None:
            parsed = _PARSED_RANGES[text] = cls._parse(text)
        return parsed

    @classmethod
    def _parse(cls, text: str) -> VersionRange:
        try:
            if text == "none":
                return cls(0, -1)
            if text.endswith("+"):
                return cls(int(text[:-1]), None)
            if "-" in text:
                lo, hi = text.split("-")
                return cls(int(lo), int(hi))
            return cls(int(text), int(text))
        except ValueError:
            raise SchemaError(f"bad version range {text!r}") from None

    def __contains__(self, version: int) -> bool:
        return self.lo <= version and (self.hi is None or version <= self.hi)

    @property
    def empty(self) -> bool:
        return self.hi is not None and self.hi < self.lo

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.hi is None:
            return f"{self.lo}+"
        return f"{self.lo}" if self.lo == self.hi else f"{self.lo}-{self.hi}"


_PARSED_RANGES: dict[str, VersionRange] = {}
NO_VERSIONS = VersionRange(0, -1)


@dataclass(frozen=True, eq=False)
class Field:
    """One field of a message or struct.

    ``type`` is a primitive name, ``"array"`` or ``"struct"``; arrays carry their ``element`` type (a primitive name
    or ``"struct"``); arrays of structs and structs carry their ``fields``. ``default`` is the immutable default
    (``None`` for a null default); arrays and structs get a fresh value from :meth:`default_value`.
    """

    name: str
    type: str
    versions: VersionRange
    element: str | None = None
    nullable_versions: VersionRange = NO_VERSIONS
    default: Any = None
    tag: int | None = None
    tagged_versions: VersionRange = NO_VERSIONS
    fields: tuple[Field, ...] = ()
    null_default: bool = False

    @property
    def mutable_default(self) -> bool:
        """True when the default is a fresh list/dict per message (so it must not be shared)."""
        return self.type in ("array", "struct") and not self.null_default

    def default_value(self) -> Any:
        """The field's default, a fresh object for arrays and structs."""
        if self.null_default:
            return None
        if self.type == "array":
            return []
        if self.type == "struct":
            return {f.name: f.default_value() for f in self.fields}
        return self.default

    def is_tagged(self, version: int) -> bool:
        return self.tag is not None and version in self.tagged_versions


@dataclass(eq=False)
class MessageSchema:
    """One message: ``name`` (Kafka's class-style name without the kind, e.g. ``"Produce"``), ``kind``
    (request/response/metadata), ``api_key``, ``valid_versions``, ``flexible_versions`` and its ``fields``.

    Compiled readers/writers per version are cached on the object by :mod:`pykbroker.protocol.codec`.
    """

    name: str
    kind: str
    api_key: int
    valid_versions: VersionRange
    flexible_versions: VersionRange
    fields: tuple[Field, ...]
    readers: dict[int, Any] = dc_field(default_factory=dict, repr=False)
    writers: dict[int, Any] = dc_field(default_factory=dict, repr=False)

    @property
    def full_name(self) -> str:
        """Kafka's data class name: ``ProduceRequest``, ``FetchResponse``, ``TopicRecord``, ``OffsetCommitValue``."""
        return self.name + ("" if self.kind in ("metadata", "data") else self.kind.capitalize())

    @property
    def versions(self) -> range:
        return range(self.valid_versions.lo, (self.valid_versions.hi or self.valid_versions.lo) + 1)

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible_versions


def snake_case(name: str) -> str:
    """Kafka CamelCase -> snake_case, as Kafka's generator does: ``PartitionIndex`` -> ``partition_index``,
    ``KRaftVersion`` -> ``kraft_version`` (a run of capitals starts one word)."""
    out = []
    prev_upper = True
    for ch in name:
        if ch.isupper():
            if not prev_upper:
                out.append("_")
            out.append(ch.lower())
            prev_upper = True
        else:
            out.append(ch)
            prev_upper = False
    return "".join(out)


# ------------------------------------------------------------------------------------------------------ parser

_INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1),
    "uint32": (0, (1 << 32) - 1),
}


def _parse_default(ftype: str, text: str | None, where: str) -> Any:
    if text is None:
        return {
            "float64": 0.0,
            "bool": False,
            "uuid": ZERO_UUID,
            "string": "",
            "bytes": b"",
            "records": None,
            "array": None,
            "struct": None,
        }.get(ftype, 0)
    if ftype in _INT_RANGES:
        value = int(text, 0)
        lo, hi = _INT_RANGES[ftype]
        if not lo <= value <= hi:
            raise SchemaError(f"{where}: default {value} out of range for {ftype}")
        return value
    if ftype == "bool":
        if text not in ("true", "false"):
            raise SchemaError(f"{where}: bad bool default {text!r}")
        return text == "true"
    if ftype == "float64":
        return float(text)
    if ftype == "string":
        return text
    raise SchemaError(f"{where}: unsupported default {text!r} for {ftype}")


def _parse_field(tokens: list[str], where: str) -> Field:
    if len(tokens) < 3:
        raise SchemaError(f"{where}: expected '<name> <type> <versions> ...'")
    name, ftype, versions = tokens[0], tokens[1], VersionRange.parse(tokens[2])
    element = None
    if ftype.startswith("[]"):
        element = ftype[2:] or "struct"
        if element != "struct" and element not in PRIMITIVES:
            raise SchemaError(f"{where}: unknown array element type {element!r}")
        ftype = "array"
    elif ftype == "{}":
        ftype = "struct"
    elif ftype not in PRIMITIVES:
        raise SchemaError(f"{where}: unknown type {ftype!r}")
    nullable, tag, tagged, default_text = NO_VERSIONS, None, None, None
    for tok in tokens[3:]:
        if tok.startswith("null="):
            nullable = VersionRange.parse(tok[5:])
        elif tok.startswith("tag="):
            tag = int(tok[4:])
        elif tok.startswith("tagv="):
            tagged = VersionRange.parse(tok[5:])
        elif tok.startswith("="):
            default_text = tok[1:]
        else:
            raise SchemaError(f"{where}: unknown attribute {tok!r}")
    if not nullable.empty and ftype not in NULLABLE_TYPES:
        raise SchemaError(f"{where}: {ftype} cannot be nullable")
    null_default = default_text == "null"
    if null_default:
        if nullable.empty:
            raise SchemaError(f"{where}: null default on a non-nullable field")
        default = None
    elif ftype in ("array", "struct"):
        if default_text is not None:
            raise SchemaError(f"{where}: arrays and structs take only a null default")
        default = None
    else:
        default = _parse_default(ftype, default_text, where)
    if tag is not None and tagged is None:
        tagged = versions
    return Field(
        name=name,
        type=ftype,
        versions=versions,
        element=element,
        nullable_versions=nullable,
        default=default,
        tag=tag,
        tagged_versions=tagged or NO_VERSIONS,
        null_default=null_default,
    )


def _attach_children(field: Field, children: list[Field]) -> Field:
    if field.type == "struct" or field.element == "struct":
        if not children:
            raise SchemaError(f"struct field {field.name!r} has no fields")
        return replace(field, fields=tuple(children))
    if children:
        raise SchemaError(f"field {field.name!r} of type {field.type} cannot have nested fields")
    return field


def _check(schema: MessageSchema, fields: tuple[Field, ...]) -> None:
    seen_names: set[str] = set()
    seen_tags: set[int] = set()
    for f in fields:
        where = f"{schema.full_name}.{f.name}"
        if f.name in seen_names:
            raise SchemaError(f"{where}: duplicate field")
        seen_names.add(f.name)
        if f.tag is not None:
            if f.tag in seen_tags:
                raise SchemaError(f"{where}: duplicate tag {f.tag}")
            seen_tags.add(f.tag)
            lo = f.tagged_versions.lo
            if lo not in schema.flexible_versions:
                raise SchemaError(f"{where}: tagged in non-flexible version {lo}")
        _check(schema, f.fields)


def parse_schemas(text: str) -> list[MessageSchema]:
    """Parse DSL ``text`` (see module docstring) into schemas; raises :class:`SchemaError` on malformed input."""
    schemas: list[MessageSchema] = []
    header: list[str] | None = None
    # stack of (depth, field, children) for the block being read; depth 0 is the message itself
    stack: list[tuple[int, Field | None, list[Field]]] = []

    def close_to(depth: int) -> None:
        while len(stack) > 1 and stack[-1][0] >= depth:
            _, fld, children = stack.pop()
            stack[-1][2].append(_attach_children(fld, children))  # type: ignore[arg-type]

    def finish() -> None:
        if header is None:
            return
        close_to(1)
        kind, name, key, valid, flex = header
        if not flex.startswith("flex="):
            raise SchemaError(f"{name}: header needs flex=<versions>")
        schema = MessageSchema(
            name=name,
            kind=kind,
            api_key=int(key),
            valid_versions=VersionRange.parse(valid),
            flexible_versions=VersionRange.parse(flex[5:]),
            fields=tuple(stack[0][2]),
        )
        _check(schema, schema.fields)
        schemas.append(schema)

    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].rstrip()
        if not line:
            continue
        indent = len(line) - len(line.lstrip(" "))
        tokens = line.split()
        if indent == 0:
            finish()
            if len(tokens) != 5 or tokens[0] not in KINDS:
                raise SchemaError(f"line {lineno}: expected '<kind> <Name> <key> <versions> flex=<versions>'")
            header = tokens
            stack = [(0, None, [])]
            continue
        if header is None or indent % 2:
            raise SchemaError(f"line {lineno}: field outside a message or odd indentation")
        depth = indent // 2
        if depth > stack[-1][0] + 1:
            raise SchemaError(f"line {lineno}: indented too deep")
        close_to(depth)
        stack.append((depth, _parse_field(tokens, f"{header[1]} line {lineno}"), []))
    finish()
    return schemas
