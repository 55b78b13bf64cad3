"""Envelope (api key 58, KIP-590): a client's request forwarded by a broker to the controller under the client's
identity.

Broker side (Kafka's ``ForwardingManager.buildEnvelopeRequest`` / ``parseResponse``):

* :func:`build_envelope` wraps a request: ``request_data`` is the request header (the client's api version,
  correlation id and client id) followed by the body, ``request_principal`` the client's principal as
  DefaultPrincipalData bytes (:mod:`pykbroker.security.principal_serde`), ``client_host_address`` the client's
  IPv4 (4 bytes) or IPv6 (16 bytes) address;
* :func:`unwrap_response` turns the EnvelopeResponse into the inner response body: an envelope-level
  NOT_CONTROLLER becomes ``{"error_code": NOT_CONTROLLER}`` (the channel then finds the new controller), any other
  envelope error raises that error (the broker answers its client with the API's error response).

Controller side (Kafka's ``EnvelopeUtils.handleEnvelopeRequest`` and ``RequestChannel.Request.buildResponseSend``):

* :func:`parse_forwarded_request` builds the inner :class:`~pykbroker.network.request_channel.Request` whose
  context carries the forwarded principal, client address and header (client id, version) and whose
  ``envelope`` is the outer request. Errors, as Kafka: PRINCIPAL_DESERIALIZATION_FAILURE (97) for a principal
  that does not parse, INVALID_REQUEST (42) for a client address that is not 4 or 16 bytes or an API that is not
  forwardable, UNSUPPORTED_VERSION (35) for an inner header or body that does not parse;
* :func:`envelope_response` wraps the inner response (header + body) for the EnvelopeResponse; an inner response
  with NOT_CONTROLLER is answered as an envelope error NOT_CONTROLLER without data.

Pure functions: thread-safe.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from pykbroker.network.request_channel import Request, RequestContext
from pykbroker.protocol import (
    codec,
    decode_request,
    decode_response,
    encode_request_header,
    encode_response_parts,
    errors,
    request_schema,
    response_header_version,
)
from pykbroker.protocol.api_keys import ApiKeys, api_name
from pykbroker.protocol.header import parse_request_header, parse_response_header
from pykbroker.security import principal_serde
from pykbroker.server.node_to_controller_channel_manager import has_not_controller

ENVELOPE_VERSION = 0

#: APIs a broker may forward in an Envelope (Kafka's ``ApiKeys.forwardable``)
FORWARDABLE = frozenset(
    {
        ApiKeys.CREATE_TOPICS,
        ApiKeys.DELETE_TOPICS,
        ApiKeys.CREATE_PARTITIONS,
        ApiKeys.ALTER_CONFIGS,
        ApiKeys.INCREMENTAL_ALTER_CONFIGS,
        ApiKeys.CREATE_ACLS,
        ApiKeys.DELETE_ACLS,
        ApiKeys.ALTER_CLIENT_QUOTAS,
        ApiKeys.ALTER_USER_SCRAM_CREDENTIALS,
        ApiKeys.UPDATE_FEATURES,
        ApiKeys.ELECT_LEADERS,
        ApiKeys.ALTER_PARTITION_REASSIGNMENTS,
        ApiKeys.LIST_PARTITION_REASSIGNMENTS,
        ApiKeys.CREATE_DELEGATION_TOKEN,
        ApiKeys.RENEW_DELEGATION_TOKEN,
        ApiKeys.EXPIRE_DELEGATION_TOKEN,
        ApiKeys.ADD_RAFT_VOTER,
        ApiKeys.REMOVE_RAFT_VOTER,
    }
)


def address_bytes(address: str) -> bytes:
    """``"127.0.0.1"`` -> 4 bytes, an IPv6 address -> 16 bytes (Java's ``InetAddress.getAddress``); an address
    that is not an IP (a unit test's fake one) -> the unspecified IPv4 address."""
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).packed
    except ValueError:
        return bytes(4)


def build_envelope(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: dict, principal: str, address: str
) -> dict:
    """The EnvelopeRequest body forwarding ``body`` (api ``api_key`` at ``version``) for ``principal`` at
    ``address``; encoding errors are raised (ProtocolEncodeError)."""
    header = encode_request_header(api_key, version, correlation_id, client_id)
    return {
        "request_data": codec.encode(request_schema(api_key), version, body, header=header),
        "request_principal": principal_serde.serialize(principal),
        "client_host_address": address_bytes(address),
    }


def unwrap_response(api_key: int, version: int, envelope: dict) -> dict:
    """The inner response body of an EnvelopeResponse to a request of ``api_key`` at ``version``; raises the
    envelope's error (a KafkaError) when it is not NONE or NOT_CONTROLLER, UnknownServerError when the data does
    not parse."""
    code = envelope.get("error_code", errors.NONE)
    if code == errors.NOT_CONTROLLER:
        return {"error_code": errors.NOT_CONTROLLER}
    if code != errors.NONE:
        raise errors.for_code(code)(f"The controller refused the forwarded request: {errors.name_of(code)}")
    data = envelope.get("response_data")
    if data is None:
        raise errors.UnknownServerError("The controller's envelope response has no response data")
    try:
        _, pos = parse_response_header(data, response_header_version(api_key, version))
        return decode_response(api_key, version, memoryview(bytes(data))[pos:])
    except errors.KafkaError as e:
        raise errors.UnknownServerError(f"Cannot parse the controller's forwarded response: {e}") from e


def parse_forwarded_request(envelope: Request) -> Request:
    """The request an Envelope carries, with the forwarded client's context (see the module docstring)."""
    body = envelope.body or {}
    principal = principal_serde.deserialize(body.get("request_principal"))
    raw_address = bytes(body.get("client_host_address") or b"")
    if len(raw_address) not in (4, 16):
        raise errors.InvalidRequestError("Failed to parse client address from envelope")
    address = str(ipaddress.ip_address(raw_address))
    data = bytes(body.get("request_data") or b"")  # a copy: the envelope's frame is released after handling
    try:
        header, pos = parse_request_header(data)
    except errors.KafkaError as e:
        raise errors.UnsupportedVersionError(f"Failed to parse request header from envelope: {e}") from e
    if header.api_key not in FORWARDABLE:
        raise errors.InvalidRequestError(f"API {header.api_key} is not enabled or is not eligible for forwarding")
    try:
        inner_body = decode_request(header.api_key, header.api_version, memoryview(data)[pos:])
    except errors.KafkaError as e:
        raise errors.UnsupportedVersionError(f"Failed to parse forwarded request with header {header}: {e}") from e
    outer = envelope.context
    context = RequestContext(
        header=header,
        connection_id=outer.connection_id,
        client_address=address,
        client_port=0,
        listener_name=outer.listener_name,
        security_protocol=outer.security_protocol,
        principal=principal,
    )
    name = api_name(header.api_key)
    request = Request(envelope.processor, context, inner_body, data, envelope.start_time_ns, name, len(data))
    request.request_dequeue_time_ns = envelope.request_dequeue_time_ns
    request.envelope = envelope
    return request


def envelope_response(inner: Request, body: dict) -> dict[str, Any]:
    """The EnvelopeResponse body answering the forwarded request ``inner`` with ``body`` (its response at the
    inner version; encoding errors are raised)."""
    if has_not_controller(body):
        return {"response_data": None, "error_code": errors.NOT_CONTROLLER}
    h = inner.context.header
    parts = encode_response_parts(h.api_key, h.api_version, h.correlation_id, body)
    frame = b"".join(bytes(p) for p in parts)
    return {"response_data": frame[4:], "error_code": errors.NONE}
