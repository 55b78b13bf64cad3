"""Error responses built from a request: every topic/partition/group gets the same error code.

Mirrors each ``AbstractRequest.getErrorResponse``. ``build_error_response(api_key, version, body,
error_code, message)`` returns the response body, or None where the protocol has no way to carry an
error (the connection is then closed, as Kafka does for acks=0 produce).
Handlers register builders for their APIs with :func:`register`.
"""

from __future__ import annotations

from collections.abc import Callable

_BUILDERS: dict[int, Callable[[int, dict, int, str | None], dict | None]] = {}


def register(api_key: int):
    def deco(fn):
        _BUILDERS[int(api_key)] = fn
        return fn

    return deco


def build_error_response(
    api_key: int, version: int, body: dict | None, error_code: int, message: str | None = None
) -> dict | None:
    builder = _BUILDERS.get(int(api_key))
    if builder is None or body is None:
        return None
    return builder(version, body, error_code, message)
