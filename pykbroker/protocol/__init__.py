"""The Kafka wire protocol, sans-I/O: schemas as data, one generic codec, headers, api keys, errors.

Broker side (a frame is the bytes after the 4-byte size prefix)::

    header, offset = parse_request_header(frame)          # or peek_api_key_version(frame) first
    body = decode_request(header.api_key, header.api_version, frame[offset:])
    parts = encode_response_parts(header.api_key, header.api_version, header.correlation_id, response_body)

Client side (producer, tools, tests)::

    frame = encode_request(ApiKeys.METADATA, 12, correlation_id, "my-client", {"topics": None})
    correlation_id, offset = parse_response_header(frame, response_header_version(key, version))
    body = decode_response(key, version, frame[offset:])

Messages are plain dicts keyed by snake_case field names (see :mod:`pykbroker.protocol.codec` for the
representation, :mod:`pykbroker.protocol.schema` for the schema DSL, :mod:`pykbroker.protocol.schemas` for the
table). This package imports nothing of pykbroker outside itself.
"""

from __future__ import annotations

from typing import Any

from pykbroker.protocol import codec
from pykbroker.protocol.api_keys import ApiKeys, api_name
from pykbroker.protocol.errors import InvalidRequestError
from pykbroker.protocol.header import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    parse_response_header,
    peek_api_key_version,
    request_header_version,
    response_header_version,
)
from pykbroker.protocol.produce_request import decode_produce_request
from pykbroker.protocol.produce_response import encode_produce_response_frame
from pykbroker.protocol.schema import MessageSchema
from pykbroker.protocol.schemas import REQUESTS, RESPONSES
from pykbroker.protocol.types import ProtocolDecodeError, ProtocolEncodeError

__all__ = [
    "REQUESTS",
    "RESPONSES",
    "ApiKeys",
    "MessageSchema",
    "ProtocolDecodeError",
    "ProtocolEncodeError",
    "RequestHeader",
    "api_name",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_request_header",
    "encode_response",
    "encode_response_header",
    "encode_response_parts",
    "parse_request_header",
    "parse_response_header",
    "peek_api_key_version",
    "request_header_version",
    "request_schema",
    "response_header_version",
    "response_schema",
]


def request_schema(api_key: int) -> MessageSchema:
    """The request schema of ``api_key``; InvalidRequestError when we have none."""
    schema = REQUESTS.get(api_key)
    if schema is None:
        raise InvalidRequestError(f"unsupported api key {api_key}")
    return schema


def response_schema(api_key: int) -> MessageSchema:
    """The response schema of ``api_key``; InvalidRequestError when we have none."""
    schema = RESPONSES.get(api_key)
    if schema is None:
        raise InvalidRequestError(f"unsupported api key {api_key}")
    return schema


def decode_request(api_key: int, version: int, buf: Any) -> dict:
    """Decode a request body (the bytes after the header) -> dict. Trailing bytes are allowed, never read past.

    Raises ProtocolDecodeError (malformed), UnsupportedVersionError (version outside the schema), InvalidRequestError
    (unknown api key). A ProduceRequest is read by :mod:`pykbroker.protocol.produce_request` (the same dict, fewer
    steps) unless it is unusual (tagged fields, an error: then as any request).
    """
    if api_key == 0:
        body = decode_produce_request(version, codec.as_byte_view(buf))
        if body is not None:
            return body
    return codec.decode(request_schema(api_key), version, buf)[0]


def decode_response(api_key: int, version: int, buf: Any) -> dict:
    """Decode a response body (the bytes after the response header) -> dict; errors as :func:`decode_request`."""
    return codec.decode(response_schema(api_key), version, buf)[0]


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str | None, body: dict) -> bytes:
    """A complete request frame: int32 size prefix + request header (version per the API) + body."""
    header = encode_request_header(api_key, version, correlation_id, client_id)
    return codec.encode(request_schema(api_key), version, body, header=header, size_prefix=True)


def encode_response_parts(api_key: int, version: int, correlation_id: int, body: dict) -> list[Any]:
    """A complete response frame as parts: the first part starts with the int32 size prefix (total size of header +
    body, deferred regions included) then the header; deferred ``records`` regions are separate parts, for
    ``write_to(sock, offset, max_bytes)``/``os.sendfile``. Bytes-like parts are bytearray/bytes. A ProduceResponse
    of the common shape is written by :mod:`pykbroker.protocol.produce_response` (the same bytes, fewer steps)."""
    if api_key == 0:
        try:
            frame = encode_produce_response_frame(version, correlation_id, body)
        except Exception:  # noqa: BLE001 - the generic codec below raises the proper ProtocolEncodeError
            frame = None
        if frame is not None:
            return [frame]
    header = encode_response_header(correlation_id, response_header_version(api_key, version))
    return codec.encode_parts(response_schema(api_key), version, body, header=header, size_prefix=True)


def encode_response_body(api_key: int, version: int, body: dict) -> bytes:
    """The response body alone (no size prefix, no header), e.g. to cache a response that never changes;
    frame it per request with :func:`response_frame`."""
    return codec.encode(response_schema(api_key), version, body)


def response_frame(api_key: int, version: int, correlation_id: int, encoded_body: bytes) -> list[Any]:
    """The parts of a complete response frame around an already encoded body (see encode_response_body)."""
    header = encode_response_header(correlation_id, response_header_version(api_key, version))
    return [(len(header) + len(encoded_body)).to_bytes(4, "big") + header, encoded_body]


def encode_response(api_key: int, version: int, correlation_id: int, body: dict) -> bytes:
    """Like :func:`encode_response_parts` as one ``bytes``; ProtocolEncodeError if a deferred region is present."""
    header = encode_response_header(correlation_id, response_header_version(api_key, version))
    return codec.encode(response_schema(api_key), version, body, header=header, size_prefix=True)
