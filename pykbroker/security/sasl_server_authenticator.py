"""SaslServerAuthenticator: the SASL exchange of one connection on a SASL listener, before any other request.

Mirrors ``org.apache.kafka.common.security.authenticator.SaslServerAuthenticator`` (KIP-43, KIP-152):

* before the handshake only ApiVersions (answered by the broker's usual handler) and SaslHandshake are
  accepted; any other request closes the connection (``Unexpected Kafka request of type X during SASL
  handshake``);
* SaslHandshake picks a mechanism from the listener's ``sasl.enabled.mechanisms`` (UNSUPPORTED_SASL_MECHANISM
  with the enabled list, then close); after a v1 handshake the tokens come in SaslAuthenticate requests, after
  a v0 handshake as raw size-prefixed frames (old clients);
* a failed step answers SASL_AUTHENTICATION_FAILED with the mechanism's message (the password never appears)
  and closes the connection once the answer is sent;
* once the mechanism completes, the connection's principal is ``User:<name>`` and it serves every API.

:meth:`handle` returns what the network thread does with a frame: ``(PASS, None, False)`` (dispatch it as a
request), ``(RESPOND, frame, close_after)`` or ``(CLOSE, reason, False)``. Frames before completion are bounded
by ``sasl.server.max.receive.size`` (the Processor sets the channel's limit).

Threading: used by the connection's Processor thread only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pykbroker import protocol
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys, is_known
from pykbroker.protocol.header import parse_request_header, peek_api_key_version

PASS, RESPOND, CLOSE = "PASS", "RESPOND", "CLOSE"
_HANDSHAKE_VERSIONS = (0, 1)
_AUTHENTICATE_VERSIONS = (0, 2)


class SaslServer(Protocol):
    """A mechanism's server side (Kafka's ``javax.security.sasl.SaslServer``): PlainSaslServer, ScramSaslServer."""

    complete: bool
    authorization_id: str | None

    def evaluate_response(self, token: bytes) -> bytes: ...


class SaslServerAuthenticator:
    def __init__(self, mechanisms: list[str], server_factory: Callable[[str], SaslServer]):
        """``mechanisms``: the listener's enabled mechanisms; ``server_factory(mechanism)`` -> a SASL server
        with ``evaluate_response(token) -> bytes``, ``complete`` and ``authorization_id``."""
        self.mechanisms = list(mechanisms)
        self.server_factory = server_factory
        self.state = "HANDSHAKE"
        self.server: SaslServer | None = None
        self.mechanism: str | None = None
        self.principal: str | None = None
        self.failure: str | None = None

    @property
    def complete(self) -> bool:
        return self.state == "COMPLETE"

    def handle(self, payload) -> tuple[str, object, bool]:
        if self.state == "RAW":  # after a v0 handshake: the frame is the token itself
            return self._evaluate(bytes(payload), None)
        api_key, version, correlation_id = peek_api_key_version(payload)
        if api_key == ApiKeys.API_VERSIONS and self.state == "HANDSHAKE":
            return PASS, None, False
        if api_key == ApiKeys.SASL_HANDSHAKE and self.state == "HANDSHAKE":
            if not _HANDSHAKE_VERSIONS[0] <= version <= _HANDSHAKE_VERSIONS[1]:
                return CLOSE, f"Unsupported SaslHandshake version {version}", False
            return self._handshake(payload, version, correlation_id)
        if api_key == ApiKeys.SASL_AUTHENTICATE and self.state == "AUTHENTICATE":
            if not _AUTHENTICATE_VERSIONS[0] <= version <= _AUTHENTICATE_VERSIONS[1]:
                return CLOSE, f"Unsupported SaslAuthenticate version {version}", False
            _, header_size = parse_request_header(payload)
            body = protocol.decode_request(api_key, version, payload[header_size:])
            return self._evaluate(bytes(body["auth_bytes"]), (version, correlation_id))
        name = ApiKeys(api_key).name if is_known(api_key) else str(api_key)
        return CLOSE, f"Unexpected Kafka request of type {name} during SASL handshake.", False

    def _handshake(self, payload, version: int, correlation_id: int):
        _, header_size = parse_request_header(payload)
        body = protocol.decode_request(ApiKeys.SASL_HANDSHAKE, version, payload[header_size:])
        mechanism = body["mechanism"]
        ok = mechanism in self.mechanisms
        response = protocol.encode_response(
            ApiKeys.SASL_HANDSHAKE,
            version,
            correlation_id,
            {"error_code": errors.NONE if ok else errors.UNSUPPORTED_SASL_MECHANISM, "mechanisms": self.mechanisms},
        )
        if not ok:
            self.state = "FAILED"
            self.failure = f"Unsupported SASL mechanism {mechanism}"
            return RESPOND, response, True
        self.mechanism = mechanism
        self.server = self.server_factory(mechanism)
        self.state = "AUTHENTICATE" if version >= 1 else "RAW"
        return RESPOND, response, False

    def _evaluate(self, token: bytes, request: tuple[int, int] | None):
        server = self.server
        assert server is not None  # the handshake that entered RAW/AUTHENTICATE created it
        try:
            challenge = server.evaluate_response(token)
            code, message = errors.NONE, None
        except errors.SaslAuthenticationError as e:
            challenge, code, message = b"", errors.SASL_AUTHENTICATION_FAILED, str(e)
        except Exception as e:  # noqa: BLE001 - a malformed token must fail this connection only
            challenge, code = b"", errors.SASL_AUTHENTICATION_FAILED
            message = (
                "Authentication failed during authentication due to invalid credentials with SASL mechanism "
                f"{self.mechanism}"
            )
            self.failure = f"{message} ({type(e).__name__})"
        if code == errors.NONE and server.complete:
            self.state = "COMPLETE"
            self.principal = f"User:{server.authorization_id}"
        elif code != errors.NONE:
            self.state = "FAILED"
            self.failure = self.failure or message
        if request is None:  # v0: raw token frames; a failure just closes the connection
            if code != errors.NONE:
                return CLOSE, self.failure, False
            return RESPOND, len(challenge).to_bytes(4, "big") + challenge, False
        version, correlation_id = request
        response = protocol.encode_response(
            ApiKeys.SASL_AUTHENTICATE,
            version,
            correlation_id,
            {"error_code": code, "error_message": message, "auth_bytes": challenge, "session_lifetime_ms": 0},
        )
        return RESPOND, response, code != errors.NONE
