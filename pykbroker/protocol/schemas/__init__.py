"""The schema table: every request/response schema pykbroker speaks, parsed from the DSL modules of this package.

``REQUESTS[api_key]`` / ``RESPONSES[api_key]`` -> :class:`~pykbroker.protocol.schema.MessageSchema`. A request and
its response always share valid and flexible versions (checked here at import). To add an API: write its request
and response blocks in the DSL (see :mod:`pykbroker.protocol.schema`) in the module of its family, or a new module
listed in ``_MODULES``; the round-trip tests pick it up from this table.
"""

from __future__ import annotations

from importlib import import_module

from pykbroker.protocol.schema import MessageSchema, SchemaError, parse_schemas

_MODULES = (
    "cluster",
    "produce",
    "fetch",
    "offsets",
    "topics",
    "configs",
    "groups",
    "consumer_groups",
    "share_groups",
    "group_offsets",
    "transactions",
    "raft",
    "replication",
    "share_state",
    "share_fetch",
)

REQUESTS: dict[int, MessageSchema] = {}
RESPONSES: dict[int, MessageSchema] = {}


def _load() -> None:
    for module in _MODULES:
        for schema in parse_schemas(import_module(f"{__name__}.{module}").SCHEMAS):
            table = REQUESTS if schema.kind == "request" else RESPONSES if schema.kind == "response" else None
            if table is None:
                raise SchemaError(f"{module}: {schema.full_name} is not a request or response")
            if schema.api_key in table:
                raise SchemaError(f"{module}: api key {schema.api_key} defined twice")
            table[schema.api_key] = schema
    for key, request in REQUESTS.items():
        response = RESPONSES.get(key)
        if response is None or response.name != request.name:
            raise SchemaError(f"{request.full_name} has no matching response")
        if (response.valid_versions, response.flexible_versions) != (request.valid_versions, request.flexible_versions):
            raise SchemaError(f"{request.name}: request and response versions differ")
    if set(RESPONSES) != set(REQUESTS):
        raise SchemaError(f"responses without requests: {sorted(set(RESPONSES) - set(REQUESTS))}")


_load()
