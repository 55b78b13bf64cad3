"""SASL/OAUTHBEARER server (RFC 7628, KIP-255; Kafka's ``OAuthBearerSaslServer``) and the unsecured-JWS
validator Kafka uses when no ``sasl.server.callback.handler.class`` is configured
(``OAuthBearerUnsecuredValidatorCallbackHandler``).

Exchange: the client's initial response ``n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[<key>=<value>\\x01]*\\x01``
(:func:`parse_client_initial_response`); the token goes to the listener's validator
(``validate(token) -> OAuthBearerToken``, raising :class:`TokenValidationError`):

* valid: the exchange completes, the principal is ``User:<principal name>`` (the ``sub`` claim unless configured
  otherwise) and :attr:`OAuthBearerSaslServer.credential_expiration_ms` is the token's expiry (ms since the epoch;
  Kafka's ``CREDENTIAL.LIFETIME.MS`` negotiated property, the session expiry for KIP-368 re-authentication);
* invalid: the server answers the RFC 7628 error challenge ``{"status":"invalid_token"}`` (with ``"scope"`` for a
  missing required scope: ``insufficient_scope``), the client answers ``\\x01`` and the server then fails with that
  JSON as the SASL_AUTHENTICATION_FAILED message, as Kafka does;
* a malformed initial response fails with Kafka's generic ``Authentication failed during authentication due to
  invalid credentials with SASL mechanism OAUTHBEARER`` (:class:`OAuthBearerSaslException`, a SaslException);
* an authorization id other than the token's principal: ``Authentication failed: Client requested an
  authorization id (x) that is different from the token's principal name (y)``.

Extensions (``key=value`` pairs besides ``auth``) are accepted and kept, as Kafka's default handlers do.
The OIDC validator (signed JWTs checked against a JWKS endpoint) is in
:mod:`pykbroker.security.oauthbearer_oidc`; :func:`validator_for_listener` picks one from the broker config.

Threading: a server and the unsecured validator are used by one connection's Processor thread at a time; the
unsecured validator keeps no mutable state.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Callable
from typing import NamedTuple, Protocol

from pykbroker.config.broker_configs.security_configs import SASL_SERVER_CALLBACK_HANDLER_CLASS_CONFIG
from pykbroker.protocol.errors import SaslAuthenticationError
from pykbroker.utils.logging import get_logger

MECHANISM = "OAUTHBEARER"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
UNSECURED_VALIDATOR = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
)
OIDC_VALIDATORS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
)
_log = get_logger("OAuthBearerSaslServer")

_SEP = "\x01"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7E \t\r\n]+"
_INITIAL_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_SEP}(?P<kvpairs>(?:{_KEY}={_VALUE}{_SEP})*){_SEP}", re.DOTALL
)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")


class OAuthBearerToken(NamedTuple):
    """A validated token (Kafka's ``OAuthBearerToken``): the compact JWT, its principal name, scope, expiry
    (``lifetime_ms``, ms since the epoch) and issue time (``start_time_ms``, ms since the epoch, or None)."""

    value: str
    principal_name: str
    scope: frozenset[str]
    lifetime_ms: int
    start_time_ms: int | None


class TokenValidationError(Exception):
    """A refused token (Kafka's ``OAuthBearerIllegalTokenException`` / ``ValidateException``): ``str(e)`` is the
    reason (logged, never sent), ``status`` and ``scope`` go in the RFC 7628 error challenge."""

    def __init__(self, message: str, status: str = "invalid_token", scope: str | None = None):
        super().__init__(message)
        self.status = status
        self.scope = scope


class OAuthBearerSaslException(Exception):
    """A malformed exchange (Kafka's ``javax.security.sasl.SaslException``): the client gets the generic
    SASL_AUTHENTICATION_FAILED message, this text is only logged."""


class TokenValidator(Protocol):
    def validate(self, token: str) -> OAuthBearerToken: ...


class ClientInitialResponse(NamedTuple):
    token: str
    authorization_id: str
    extensions: dict[str, str]


def parse_client_initial_response(response: bytes) -> ClientInitialResponse:
    """RFC 7628 client initial response (Kafka's ``OAuthBearerClientInitialResponse``); OAuthBearerSaslException
    with Kafka's message when malformed."""
    text = bytes(response).decode("utf-8", "replace")
    m = _INITIAL_RESPONSE.fullmatch(text)
    if m is None:
        raise OAuthBearerSaslException("Invalid OAUTHBEARER client first message")
    pairs: dict[str, str] = {}
    for kv in m.group("kvpairs").split(_SEP):
        if kv:
            key, _, value = kv.partition("=")
            pairs[key] = value
    auth = pairs.pop("auth", None)
    if auth is None:
        raise OAuthBearerSaslException("Invalid OAUTHBEARER client first message: 'auth' not specified")
    a = _AUTH.fullmatch(auth)
    if a is None:
        raise OAuthBearerSaslException("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if a.group("scheme").lower() != "bearer":
        raise OAuthBearerSaslException(f"Invalid scheme in OAUTHBEARER client first message: {a.group('scheme')}")
    return ClientInitialResponse(a.group("token"), m.group("authzid") or "", pairs)


def _json_error(status: str, scope: str | None) -> str:
    out = f'{{"status":"{status}"'
    if scope is not None:
        out += f', "scope":"{scope}"'
    return out + "}"


class OAuthBearerSaslServer:
    """One connection's OAUTHBEARER exchange (Kafka's ``OAuthBearerSaslServer``), see the module docstring.
    ``evaluate_response(token) -> challenge bytes``; SaslAuthenticationError / OAuthBearerSaslException on
    failure."""

    mechanism = MECHANISM

    def __init__(self, validator: TokenValidator):
        self.validator = validator
        self.complete = False
        self.authorization_id: str | None = None
        self.credential_expiration_ms: int | None = None
        self.token: OAuthBearerToken | None = None
        self.extensions: dict[str, str] = {}
        self._error: str | None = None

    def evaluate_response(self, token: bytes) -> bytes:
        if bytes(token) == b"\x01" and self._error is not None:
            raise SaslAuthenticationError(self._error)
        self._error = None
        response = parse_client_initial_response(token)
        try:
            validated = self.validator.validate(response.token)
        except TokenValidationError as e:
            self._error = _json_error(e.status, e.scope)
            _log.debug(f"{self._error}: {e}")
            return self._error.encode()
        if response.authorization_id and response.authorization_id != validated.principal_name:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({response.authorization_id}) that "
                f"is different from the token's principal name ({validated.principal_name})"
            )
        self.token = validated
        self.extensions = response.extensions
        self.authorization_id = validated.principal_name
        self.credential_expiration_ms = validated.lifetime_ms
        self.complete = True
        return b""


def _b64url_json(part: str) -> dict:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        raise TokenValidationError("malformed Base64 URL encoded value") from None
    try:
        value = json.loads(raw)
    except ValueError:
        raise TokenValidationError("malformed JSON") from None
    if not isinstance(value, dict):
        raise TokenValidationError("malformed JSON")
    return value


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _type_name(value) -> str:
    return {str: "String", list: "List", dict: "Map", bool: "Boolean"}.get(type(value), type(value).__name__)


class UnsecuredValidator:
    """Kafka's ``OAuthBearerUnsecuredValidatorCallbackHandler``: an unsigned JWS (``alg: none``, empty signature)
    with a string principal claim and a numeric ``exp``; options (the listener's OAuthBearerLoginModule JAAS
    line): ``unsecuredValidatorPrincipalClaimName`` (default ``sub``), ``unsecuredValidatorScopeClaimName``
    (default ``scope``), ``unsecuredValidatorRequiredScope`` (space-separated), and
    ``unsecuredValidatorAllowableClockSkewMs`` (default 0; ValueError when not a non-negative integer). For
    development only: anyone may claim any principal. ``clock`` returns ms since the epoch (tests)."""

    def __init__(self, options: dict[str, str], clock: Callable[[], float] | None = None):
        self.principal_claim = (options.get("unsecuredValidatorPrincipalClaimName") or "").strip() or "sub"
        self.scope_claim = (options.get("unsecuredValidatorScopeClaimName") or "").strip() or "scope"
        self.required_scope = (options.get("unsecuredValidatorRequiredScope") or "").split()
        skew = (options.get("unsecuredValidatorAllowableClockSkewMs") or "").strip() or "0"
        try:
            self.clock_skew_ms = int(skew)
        except ValueError:
            raise ValueError(f'For input string: "{skew}"') from None
        if self.clock_skew_ms < 0:
            raise ValueError(f"Allowable clock skew millis must not be negative: {skew}")
        self.clock = clock or (lambda: time.time() * 1000)

    def validate(self, token: str) -> OAuthBearerToken:
        if ".." in token:
            raise TokenValidationError("Malformed compact serialization contains '..'")
        splits = token.split(".")
        if len(splits) != 3:
            raise TokenValidationError(
                "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values"
            )
        header, claims = _b64url_json(splits[0]), _b64url_json(splits[1])
        if "alg" not in header:
            raise TokenValidationError("JWS header must have an Algorithm value")
        if header["alg"] != "none":
            raise TokenValidationError("Unsecured JWS must have 'none' for an algorithm")
        if splits[2]:
            raise TokenValidationError("Unsecured JWS must not contain a digital signature")
        scope = self._scope(claims)
        exp, iat = claims.get("exp"), claims.get("iat")
        for name, value in (("exp", exp), ("iat", iat)):
            if value is not None and not _is_number(value):
                raise TokenValidationError(f"The '{name}' claim was not of type Number: {_type_name(value)}")
        if exp is None:
            raise TokenValidationError("No expiration time in JWT")
        principal = claims.get(self.principal_claim)
        if principal is not None and not isinstance(principal, str):
            raise TokenValidationError(
                f"The '{self.principal_claim}' claim was not of type String: {_type_name(principal)}"
            )
        if not principal or not principal.strip():
            raise TokenValidationError(f"No principal name in JWT claim: {self.principal_claim}")
        now = int(self.clock())
        skew = self.clock_skew_ms
        if iat is not None and 1000 * iat > now + skew:
            raise TokenValidationError(
                f"The Issued At value ({iat:f} seconds) was after the indicated time ({now} ms) plus allowable "
                f"clock skew ({skew} ms)"
            )
        if now - skew >= 1000 * exp:
            raise TokenValidationError(
                f"The indicated time ({now} ms) minus allowable clock skew ({skew} ms) was on or after the "
                f"Expiration Time value ({exp:f} seconds)"
            )
        if iat is not None and exp <= iat:
            raise TokenValidationError(
                f"The Expiration Time time ({exp:f} seconds) was not after the Issued At time ({iat:f} seconds)"
            )
        for required in self.required_scope:
            if required not in scope:
                wanted = "[" + ", ".join(self.required_scope) + "]"
                raise TokenValidationError(
                    f"The provided scope ({sorted(scope)}) was missing a required scope ({required}).  All "
                    f"required scope elements: {wanted}",
                    status="insufficient_scope",
                    scope=wanted,
                )
        start = None if iat is None else round(iat * 1000)
        return OAuthBearerToken(token, principal, scope, round(exp * 1000), start)

    def _scope(self, claims: dict) -> frozenset[str]:
        value = claims.get(self.scope_claim)
        if isinstance(value, str):
            return frozenset([value.strip()]) if value.strip() else frozenset()
        if value is None:
            return frozenset()
        if not isinstance(value, list):
            raise TokenValidationError(f"The '{self.scope_claim}' claim was not of type List: {_type_name(value)}")
        return frozenset(str(s).strip() for s in value if str(s).strip())


def listener_value(originals: dict, listener: str, key: str):
    """``listener.name.<l>.oauthbearer.<key>``, else ``listener.name.<l>.<key>``, else ``<key>`` (Kafka's
    listener prefix override, then the mechanism prefix of its OAuth ``ConfigurationUtils``)."""
    for name in (f"listener.name.{listener.lower()}.oauthbearer.{key}", f"listener.name.{listener.lower()}.{key}", key):
        if originals.get(name) is not None:
            return originals[name]
    return None


def validator_for_listener(originals: dict, listener: str, jaas_options: dict[str, str]) -> TokenValidator:
    """The token validator of ``listener``'s OAUTHBEARER: ``sasl.server.callback.handler.class`` (per listener
    and mechanism: ``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class``) names Kafka's OIDC
    ``OAuthBearerValidatorCallbackHandler`` (:class:`~pykbroker.security.oauthbearer_oidc.JwtValidator`), or is
    unset / the unsecured handler (:class:`UnsecuredValidator`). ValueError for another class or a bad
    setting (the caller turns it into a ConfigException)."""
    handler = str(listener_value(originals, listener, SASL_SERVER_CALLBACK_HANDLER_CLASS_CONFIG) or "").strip()
    if handler in ("", UNSECURED_VALIDATOR):
        return UnsecuredValidator(jaas_options)
    if handler in OIDC_VALIDATORS:
        from pykbroker.security.oauthbearer_oidc import jwt_validator

        return jwt_validator(lambda key: listener_value(originals, listener, key))
    raise ValueError(
        f"sasl.server.callback.handler.class {handler} is not supported for OAUTHBEARER by pykbroker (supported: "
        f"{', '.join((UNSECURED_VALIDATOR, *OIDC_VALIDATORS))})"
    )
