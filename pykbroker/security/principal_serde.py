"""The client principal as bytes, as forwarded in an Envelope (KIP-590).

Mirrors Kafka's ``KafkaPrincipalSerde`` as implemented by ``DefaultKafkaPrincipalBuilder``: the principal is a
``DefaultPrincipalData`` message (``Type`` string, ``Name`` string, ``TokenAuthenticated`` bool; version 0,
flexible) prefixed with its version as an int16 (Kafka's ``MessageUtil.toVersionPrefixedBytes``). pykbroker's
principals are strings ``"<type>:<name>"`` (``User:alice``); the type is what precedes the first colon.

:func:`deserialize` raises :class:`~pykbroker.protocol.errors.PrincipalDeserializationError`
(PRINCIPAL_DESERIALIZATION_FAILURE, 97) for bytes that are not such a message, as Kafka's
``EnvelopeUtils.parseForwardedPrincipal`` does.

Pure functions: thread-safe.
"""

from __future__ import annotations

from pykbroker.protocol import codec, errors
from pykbroker.protocol.schema import parse_schemas

_SCHEMA = parse_schemas(
    """
metadata DefaultPrincipalData 0 0 flex=0+
  type string 0+
  name string 0+
  token_authenticated bool 0+
"""
)[0]
_VERSION = 0


def serialize(principal: str, token_authenticated: bool = False) -> bytes:
    """``"User:alice"`` -> the version-prefixed DefaultPrincipalData bytes. A principal without a colon is
    taken as a name of type ``User``."""
    kind, sep, name = principal.partition(":")
    if not sep:
        kind, name = "User", principal
    body = {"type": kind, "name": name, "token_authenticated": token_authenticated}
    return _VERSION.to_bytes(2, "big") + codec.encode(_SCHEMA, _VERSION, body)


def deserialize(data: bytes | None) -> str:
    """The principal string (``"User:alice"``) of :func:`serialize`'s bytes; PrincipalDeserializationError when
    they are missing, truncated, of an unknown version or carry an empty type."""
    message = "Failed to deserialize client principal from envelope"
    if data is None or len(data) < 2:
        raise errors.PrincipalDeserializationError(message)
    version = int.from_bytes(data[:2], "big", signed=True)
    if version != _VERSION:
        raise errors.PrincipalDeserializationError(f"{message}: unsupported DefaultPrincipalData version {version}")
    try:
        body, _end = codec.decode(_SCHEMA, version, memoryview(bytes(data))[2:])
    except Exception as e:
        raise errors.PrincipalDeserializationError(f"{message}: {e}") from e
    if not body["type"]:
        raise errors.PrincipalDeserializationError(f"{message}: empty principal type")
    return f"{body['type']}:{body['name']}"
