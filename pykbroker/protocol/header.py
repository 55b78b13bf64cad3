"""Request and response headers, and the header version rules (docs/ARCHITECTURE.md §8).

Mirrors ``org.apache.kafka.common.requests.RequestHeader`` / ``ResponseHeader`` and
``ApiKeys.requestHeaderVersion``/``responseHeaderVersion``:

    request header v0   api_key int16, api_version int16, correlation_id int32      (ControlledShutdown v0 only)
    request header v1   v0 + client_id (nullable string, int16 length)              (non-flexible API versions)
    request header v2   v1 + tagged fields (client_id is never compact)             (flexible API versions)
    response header v0  correlation_id int32                   (non-flexible responses, ApiVersions at every version)
    response header v1  correlation_id int32 + tagged fields   (flexible responses)

The header version follows the API's flexible versions, which are open-ended ("9+"), so a request whose version is
above what we support still parses (the broker answers ApiVersions-too-new with v0, and closes on the others).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from pykbroker.protocol import types as t
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.errors import InvalidRequestError
from pykbroker.protocol.schemas import REQUESTS
from pykbroker.protocol.types import ProtocolDecodeError

_HHI = struct.Struct(">hhi")  # api_key, api_version, correlation_id


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """A parsed request header; ``client_id`` is ``""`` when the client sent null or header v0."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str
    header_version: int


def peek_api_key_version(buf: Any) -> tuple[int, int, int]:
    """``(api_key, api_version, correlation_id)`` from the first 8 bytes of a request (after the size prefix).

    Works for any api key and version, known or not. Raises ProtocolDecodeError when fewer than 8 bytes.
    """
    if len(buf) < 8:
        raise t.truncated("request header", 0, 8, len(buf))
    return _HHI.unpack_from(buf, 0)


def _flexible(api_key: int, api_version: int) -> bool:
    schema = REQUESTS.get(api_key)
    if schema is None:
        raise InvalidRequestError(f"unsupported api key {api_key}")
    return api_version in schema.flexible_versions


def request_header_version(api_key: int, api_version: int) -> int:
    """0 for ControlledShutdown v0, 2 for flexible versions, else 1. Unknown api key: InvalidRequestError."""
    version = _REQUEST_HEADER_VERSIONS.get((api_key, api_version))
    if version is not None:
        return version
    if api_key == ApiKeys.CONTROLLED_SHUTDOWN and api_version == 0:
        version = 0
    else:
        version = 2 if _flexible(api_key, api_version) else 1
    schema = REQUESTS.get(api_key)
    if schema is not None and api_version in schema.versions and len(_REQUEST_HEADER_VERSIONS) < 4096:
        _REQUEST_HEADER_VERSIONS[(api_key, api_version)] = version
    return version


#: (api key, version) -> request header version, filled by request_header_version
_REQUEST_HEADER_VERSIONS: dict[tuple[int, int], int] = {}


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible versions, else 0; ApiVersions is always 0 (so old clients can read the error)."""
    if api_key == ApiKeys.API_VERSIONS:
        return 0
    return 1 if _flexible(api_key, api_version) else 0


def parse_request_header(buf: Any, peeked: tuple[int, int, int] | None = None) -> tuple[RequestHeader, int]:
    """Parse the request header at the start of ``buf`` (a frame without its size prefix).

    Returns ``(header, bytes consumed)``; the body starts at that offset. Raises ProtocolDecodeError on truncated or
    malformed input and InvalidRequestError for an api key without a schema (use :func:`peek_api_key_version` first
    to answer or close). ``peeked``: what :func:`peek_api_key_version` returned for ``buf``, when the caller has it.
    """
    api_key, api_version, correlation_id = peek_api_key_version(buf) if peeked is None else peeked
    version = request_header_version(api_key, api_version)
    if version == 0:
        return RequestHeader(api_key, api_version, correlation_id, "", 0), 8
    size = len(buf)
    if size >= 10:  # (the usual header read inline; a truncated one is read_int16's to judge)
        length, pos = t.INT16.unpack_from(buf, 8)[0], 10
    else:
        length, pos = t.read_int16(buf, 8)
    if length < -1:
        raise ProtocolDecodeError(f"client_id has invalid length {length}")
    client_id = ""
    if length > 0:
        end = pos + length
        if end > size:
            raise t.truncated("client_id", pos, length, size)
        client_id = str(buf[pos:end], "utf-8", "replace")  # only logged: be lenient, as Java is
        pos = end
    if version == 2:
        if pos < size and buf[pos] == 0:  # no tagged fields (the usual header): one byte, read inline
            pos += 1
        else:
            pos = t.skip_tagged_fields(buf, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, version), pos


def encode_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, header_version: int | None = None
) -> bytes:
    """A request header; ``header_version`` defaults to :func:`request_header_version`."""
    if header_version is None:
        header_version = request_header_version(api_key, api_version)
    out = bytearray(_HHI.pack(api_key, api_version, correlation_id))
    if header_version >= 1:
        t.write_nullable_string(out, client_id)
    if header_version >= 2:
        out.append(0)  # no tagged fields
    return bytes(out)


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    """Response header v0 (correlation id) or v1 (plus an empty tagged field section)."""
    return t.INT32.pack(correlation_id) + (b"\x00" if header_version >= 1 else b"")


def parse_response_header(buf: Any, header_version: int) -> tuple[int, int]:
    """``(correlation_id, bytes consumed)`` of a response header of ``header_version`` at the start of ``buf``."""
    correlation_id, pos = t.read_int32(buf, 0)
    if header_version >= 1:
        pos = t.skip_tagged_fields(buf, pos)
    return correlation_id, pos
