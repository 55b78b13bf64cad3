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

Re-authentication (KIP-368, Kafka's ``ReauthInfo``): at completion the session lifetime is the mechanism's
``connections.max.reauth.ms`` (``max_reauth_ms_by_mechanism``; 0 or absent: none), or the time left before the
credential expires when the SASL server reports one (``credential_expiration_ms``, ms since the epoch, e.g. an
OAuth token's ``exp``), whichever is shorter. It is sent to SaslAuthenticate v1+ clients as
``session_lifetime_ms`` (0: no expiry) and kept in :attr:`session_lifetime_ms` (None: no expiry) for the
network thread, which closes a connection whose session expired before serving its next request. A client
re-authenticates by sending SaslHandshake again on the authenticated connection: the network thread gives it a
new authenticator started with :meth:`reauthenticate`, which requires the same mechanism (else
SASL_AUTHENTICATION_FAILED "SASL mechanism 'X' requested by client is not supported for re-authentication of
mechanism 'Y'") and the same principal ("Cannot change principals during re-authentication from User.a:
User.b"), then close.

:meth:`handle` returns what the network thread does with a frame: ``(PASS, None, False)`` (dispatch it as a
request), ``(RESPOND, frame, close_after)`` or ``(CLOSE, reason, False)``. Frames before completion are bounded
by ``sasl.server.max.receive.size`` (the Processor sets the channel's limit).

Threading: used by the connection's Processor thread only.
"""

from __future__ import annotations

import time
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
    def __init__(
        self,
        mechanisms: list[str],
        server_factory: Callable[[str], SaslServer],
        max_reauth_ms_by_mechanism: dict[str, int] | None = None,
    ):
        """``mechanisms``: the listener's enabled mechanisms; ``server_factory(mechanism)`` -> a SASL server
        with ``evaluate_response(token) -> bytes``, ``complete`` and ``authorization_id``;
        ``max_reauth_ms_by_mechanism``: ``connections.max.reauth.ms`` (ms) per mechanism."""
        self.mechanisms = list(mechanisms)
        self.server_factory = server_factory
        self.max_reauth_ms_by_mechanism = max_reauth_ms_by_mechanism or {}
        self.state = "HANDSHAKE"
        self.server: SaslServer | None = None
        self.mechanism: str | None = None
        self.principal: str | None = None
        #: the session logged in with a delegation token (Kafka's ``KafkaPrincipal.tokenAuthenticated``)
        self.token_authenticated = False
        self.failure: str | None = None
        #: ms the session lasts from completion (None: no expiry), set when authentication completes
        self.session_lifetime_ms: int | None = None
        #: re-authentication: the mechanism and principal of the session being renewed
        self.previous_mechanism: str | None = None
        self.previous_principal: str | None = None

    @property
    def complete(self) -> bool:
        return self.state == "COMPLETE"

    @property
    def reauthenticating(self) -> bool:
        return self.previous_mechanism is not None

    def reauthenticate(self, previous_mechanism: str, previous_principal: str) -> None:
        """Start as the re-authentication of an authenticated session (Kafka's ``ReauthInfo.reauthenticating``):
        the next frame is the client's SaslHandshake."""
        self.previous_mechanism, self.previous_principal = previous_mechanism, previous_principal

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
        if api_key == ApiKeys.SASL_AUTHENTICATE and self.state == "REAUTH_BAD_MECHANISM":
            return self._refuse_mechanism_change(payload, version, correlation_id)
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
        if self.reauthenticating and mechanism != self.previous_mechanism:
            self.state = "REAUTH_BAD_MECHANISM"  # answered at the SaslAuthenticate that follows, as Kafka
            self.failure = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for re-authentication of "
                f"mechanism '{self.previous_mechanism}'"
            )
            return (CLOSE, self.failure, False) if version < 1 else (RESPOND, response, False)
        self.server = self.server_factory(mechanism)
        self.state = "AUTHENTICATE" if version >= 1 else "RAW"
        return RESPOND, response, False

    def _refuse_mechanism_change(self, payload, version: int, correlation_id: int):
        if not _AUTHENTICATE_VERSIONS[0] <= version <= _AUTHENTICATE_VERSIONS[1]:
            return CLOSE, f"Unsupported SaslAuthenticate version {version}", False
        self.state = "FAILED"
        body = {"error_code": errors.SASL_AUTHENTICATION_FAILED, "error_message": self.failure, "auth_bytes": b""}
        response = protocol.encode_response(
            ApiKeys.SASL_AUTHENTICATE, version, correlation_id, {**body, "session_lifetime_ms": 0}
        )
        return RESPOND, response, True

    def _session_lifetime_ms(self, server: SaslServer) -> int | None:
        """Kafka's ``calcCompletionTimesAndReturnSessionLifetimeMs``: None when neither
        ``connections.max.reauth.ms`` nor a credential expiry applies."""
        max_reauth = self.max_reauth_ms_by_mechanism.get(self.mechanism or "") or 0
        expiration_ms = getattr(server, "credential_expiration_ms", None)
        if expiration_ms is None:
            return max_reauth if max_reauth > 0 else None
        left = max(0, int(expiration_ms) - int(time.time() * 1000))
        return min(left, max_reauth) if max_reauth > 0 else left

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
            principal = f"User:{server.authorization_id}"
            if self.reauthenticating and principal != self.previous_principal:
                challenge, code = b"", errors.SASL_AUTHENTICATION_FAILED
                message = (
                    f"Cannot change principals during re-authentication from "
                    f"{str(self.previous_principal).replace(':', '.', 1)}: {principal.replace(':', '.', 1)}"
                )
            else:
                self.state = "COMPLETE"
                self.principal = principal
                self.token_authenticated = bool(getattr(server, "token_authenticated", False))
                self.session_lifetime_ms = self._session_lifetime_ms(server)
        if code != errors.NONE:
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
            {
                "error_code": code,
                "error_message": message,
                "auth_bytes": challenge,
                "session_lifetime_ms": self.session_lifetime_ms or 0,
            },
        )
        return RESPOND, response, code != errors.NONE
