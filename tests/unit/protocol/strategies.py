"""Hypothesis strategies derived from the schemas themselves, and the normalisation used by round-trip tests."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import strategies as st

from pykbroker.protocol.schema import Field, MessageSchema

_INTS = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1),
    "uint32": (0, (1 << 32) - 1),
}
_UUIDS = st.one_of(st.just(uuid.UUID(int=0)), st.integers(0, (1 << 128) - 1).map(lambda i: uuid.UUID(int=i)))
_TEXT = st.text(max_size=12)


def _primitive(ftype: str) -> st.SearchStrategy[Any]:
    if ftype in _INTS:
        lo, hi = _INTS[ftype]
        return st.one_of(
            st.sampled_from([lo, hi, -1, 0, 1]) if lo < 0 else st.sampled_from([lo, hi, 1]), st.integers(lo, hi)
        )
    return {
        "float64": st.floats(allow_nan=False),
        "bool": st.booleans(),
        "uuid": _UUIDS,
        "string": _TEXT,
        "bytes": st.binary(max_size=16),
        "records": st.binary(max_size=48),
    }[ftype]


def field_strategy(f: Field, version: int) -> st.SearchStrategy[Any]:
    if f.type == "array":
        element = struct_strategy(f.fields, version) if f.element == "struct" else _primitive(f.element)
        base: st.SearchStrategy[Any] = st.lists(element, max_size=3)
    elif f.type == "struct":
        base = struct_strategy(f.fields, version)
    else:
        base = _primitive(f.type)
    if version in f.nullable_versions:
        base = st.one_of(st.none(), base)
    if f.tag is not None:
        base = st.one_of(st.just(f.default_value()), base)
    return base


def struct_strategy(fields: tuple[Field, ...], version: int) -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries({f.name: field_strategy(f, version) for f in fields if version in f.versions})


_MESSAGE_STRATEGIES: dict[tuple[MessageSchema, int], st.SearchStrategy[dict]] = {}


def message_strategy(schema: MessageSchema, version: int) -> st.SearchStrategy[dict]:
    """Random bodies of ``schema`` at ``version``: only the fields the version has, values of their wire types.
    Built once per schema (compared by identity) and version: Hypothesis validates a strategy on its first draw,
    which for a fresh nested strategy on every example cost more than the draw itself (same draws either way)."""
    strategy = _MESSAGE_STRATEGIES.get((schema, version))
    if strategy is None:
        strategy = _MESSAGE_STRATEGIES[(schema, version)] = struct_strategy(schema.fields, version)
    return strategy


def normalise(fields: tuple[Field, ...], version: int, body: dict) -> dict:
    """``body`` as the decoder returns it: absent fields at their defaults, nested structs likewise."""
    out = {}
    for f in fields:
        if version not in f.versions or f.name not in body:
            out[f.name] = f.default_value()
            continue
        value = body[f.name]
        if value is not None and f.type == "struct":
            value = normalise(f.fields, version, value)
        elif value is not None and f.element == "struct":
            value = [normalise(f.fields, version, item) for item in value]
        out[f.name] = value
    return out


def all_versions(schemas: dict[int, MessageSchema]) -> list[tuple[MessageSchema, int]]:
    return [(s, v) for _, s in sorted(schemas.items()) for v in s.versions]
