"""The generated message types (pykbroker.protocol.messages) are current and describe what the codec produces."""

from __future__ import annotations

import typing
from importlib import import_module

import pytest

from pykbroker.protocol import codec, generator
from pykbroker.protocol.coordinator_records import RECORDS as COORDINATOR_RECORDS
from pykbroker.protocol.metadata_records import METADATA_RECORDS
from pykbroker.protocol.schema import MessageSchema
from pykbroker.protocol.schemas import _MODULES, REQUESTS, RESPONSES


def test_generated_modules_are_current():
    """Fails when a schema changed without `python -m pykbroker.protocol.generator` being run (the fix)."""
    assert generator.stale_files() == []


def test_check_mode_reports_a_stale_module(tmp_path, monkeypatch):
    for name, text in generator.generate().items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert generator.stale_files(tmp_path) == []
    (tmp_path / "produce.py").write_text("# edited by hand\n", encoding="utf-8")
    (tmp_path / "fetch.py").unlink()
    assert sorted(generator.stale_files(tmp_path)) == ["fetch.py", "produce.py"]


def _type_of(schema: MessageSchema) -> type:
    if schema.kind == "metadata":
        module = "metadata_records"
    elif schema.kind == "data":
        module = "coordinator_records"
    else:
        module = next(
            m for m in _MODULES if schema.full_name in import_module(f"pykbroker.protocol.messages.{m}").__all__
        )
    return getattr(import_module(f"pykbroker.protocol.messages.{module}"), schema.full_name)


def _assert_keys_match(value: dict, typed: type, where: str) -> None:
    hints = typing.get_type_hints(typed)
    assert set(value) == set(hints), where
    for key, item in value.items():
        element = item[0] if isinstance(item, list) and item and isinstance(item[0], dict) else item
        if isinstance(element, dict):
            nested = typed.__name__ + generator.camel_case(key)
            module = import_module(typed.__module__)
            _assert_keys_match(element, getattr(module, nested), f"{where}.{key}")


SCHEMAS = (
    list(REQUESTS.values())
    + list(RESPONSES.values())
    + list(METADATA_RECORDS.values())
    + list(COORDINATOR_RECORDS.values())
)


@pytest.mark.parametrize("schema", SCHEMAS, ids=[s.full_name for s in SCHEMAS])
def test_every_decoded_message_has_exactly_the_keys_of_its_type(schema):
    """A message decoded at its newest version (every field filled, one element per array) has the keys its
    generated TypedDict declares, at every nesting level."""
    version = schema.versions[-1]
    body = _sample(schema.fields)
    decoded, _ = codec.decode(schema, version, codec.encode(schema, version, body))
    _assert_keys_match(decoded, _type_of(schema), schema.full_name)


def _sample(fields) -> dict:
    out = {}
    for f in fields:
        if f.type == "struct":
            out[f.name] = _sample(f.fields)
        elif f.type == "array" and f.element == "struct":
            out[f.name] = [_sample(f.fields)]
        elif f.type == "records":
            out[f.name] = b""
    return out
