"""Strict codec mode: a dict key that is no field of the message (in any version) fails the encode instead of
silently going on the wire as the field's default."""

from __future__ import annotations

import dataclasses

import pytest

from pykbroker.protocol import ApiKeys, codec, response_schema
from pykbroker.protocol.types import ProtocolEncodeError


def _fresh(strict: bool, monkeypatch):
    """The Produce response schema with no cached writers, compiled in the given mode."""
    monkeypatch.setattr(codec, "STRICT", strict)
    return dataclasses.replace(response_schema(ApiKeys.PRODUCE), readers={}, writers={})


def _partition(**extra):
    return {"index": 0, "error_code": 0, "base_offset": 42, **extra}


def _body(partition=None, **extra):
    return {
        "responses": [{"name": "t", "partition_responses": [partition or _partition()]}],
        "throttle_time_ms": 0,
        **extra,
    }


def test_the_test_suite_runs_strict():
    assert codec.STRICT


def test_strict_rejects_a_misspelled_top_level_field(monkeypatch):
    schema = _fresh(True, monkeypatch)
    body = _body()
    body["throttle_ms"] = body.pop("throttle_time_ms")
    with pytest.raises(ProtocolEncodeError, match="unknown field.*throttle_ms"):
        codec.encode(schema, 9, body)


def test_strict_rejects_a_misspelled_nested_field(monkeypatch):
    schema = _fresh(True, monkeypatch)
    with pytest.raises(ProtocolEncodeError, match="unknown field.*log_start_ofset"):
        codec.encode(schema, 9, _body(_partition(log_start_ofset=7)))


def test_strict_accepts_fields_of_other_versions_tagged_fields_and_unknown_tags(monkeypatch):
    schema = _fresh(True, monkeypatch)
    # log_start_offset is a field from v5, record_errors from v8, node_endpoints a tagged field from v10.
    body = _body(_partition(log_start_offset=3, record_errors=[]), node_endpoints=[], _unknown_tagged_fields={99: b"x"})
    v3 = codec.encode(schema, 3, body)
    assert codec.decode(schema, 3, v3)[0]["responses"][0]["partition_responses"][0]["base_offset"] == 42
    v10 = codec.encode(schema, 10, body)
    assert codec.decode(schema, 10, v10)[0]["responses"][0]["partition_responses"][0]["log_start_offset"] == 3


def test_production_mode_ignores_unknown_keys(monkeypatch):
    schema = _fresh(False, monkeypatch)
    # The misspelled key is dropped and the field goes out as its default: what strict mode exists to catch.
    encoded = codec.encode(schema, 9, _body(_partition(log_start_ofset=7)))
    assert codec.decode(schema, 9, encoded)[0]["responses"][0]["partition_responses"][0]["log_start_offset"] == -1
    assert encoded == codec.encode(_fresh(False, monkeypatch), 9, _body())
