"""Interop oracle: kafka-python (>= 3.0) has its own JSON-driven codec, written independently of ours. For every
message and version both implement, a random body encoded by us must decode there and re-encode to the same bytes.

Uses kafka-python internals (its message classes and compiled encoders); skipped when they are not available.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pykbroker.protocol import codec
from pykbroker.protocol.schemas import REQUESTS, RESPONSES

from .strategies import all_versions, message_strategy

kp = pytest.importorskip("kafka.protocol")
try:
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.schemas.fields.codecs import EncodeBufferPool
except ImportError:  # pragma: no cover - older kafka-python
    pytest.skip("kafka-python without the JSON message codec", allow_module_level=True)


def _their_classes() -> dict[tuple[int, str], type]:
    classes = {}
    for info in pkgutil.walk_packages(kp.__path__, "kafka.protocol."):
        try:
            module = importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - optional modules of theirs
            continue
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, ApiMessage) and cls is not ApiMessage and getattr(cls, "_json", None):
                classes[(cls.API_KEY, cls.type)] = cls
    return classes


THEIRS = _their_classes()
CASES = [
    (s, v)
    for s, v in all_versions(REQUESTS) + all_versions(RESPONSES)
    if (s.api_key, s.kind) in THEIRS
    and THEIRS[(s.api_key, s.kind)].valid_versions[0] <= v <= THEIRS[(s.api_key, s.kind)].valid_versions[1]
]


def _their_encode(cls, obj, version: int) -> bytes:
    flexible = cls.flexible_version_q(version)
    with EncodeBufferPool.acquire() as out:
        cls._struct.compiled_encode_into(version, compact=flexible, tagged=flexible)(obj, out)
        return bytes(out.result())


def test_most_messages_are_cross_checked():
    assert len(CASES) > 250


@pytest.mark.parametrize(("schema", "version"), CASES, ids=[f"{s.full_name}-v{v}" for s, v in CASES])
@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_kafka_python_reads_and_rewrites_our_bytes(schema, version, data):
    body = data.draw(message_strategy(schema, version))
    if schema.full_name == "ApiVersionsResponse":
        body["error_code"] = 0  # clients re-read an error response as v0 (KIP-511): not a schema question
    ours = codec.encode(schema, version, body)
    cls = THEIRS[(schema.api_key, schema.kind)]
    assert _their_encode(cls, cls.decode(ours, version=version), version) == ours
