"""Client side of SASL/OAUTHBEARER for this node's own connections to other nodes (Kafka's
``OAuthBearerSaslClient`` with the login callback handlers), when ``sasl.mechanism.inter.broker.protocol`` or
``sasl.mechanism.controller.protocol`` is OAUTHBEARER.

The token comes from the listener's ``listener.name.<l>.oauthbearer.sasl.jaas.config`` (an OAuthBearerLoginModule
line) and ``sasl.login.callback.handler.class``:

* unset: Kafka's ``OAuthBearerUnsecuredLoginCallbackHandler`` (:class:`UnsecuredLoginTokenProvider`), an unsigned
  JWS made from the options ``unsecuredLoginStringClaim_sub="admin"`` (required), ``unsecuredLoginLifetimeSeconds``
  (default 3600) and ``unsecuredLoginStringClaim_<claim>`` / ``unsecuredLoginNumberClaim_<claim>``; for development;
* ``org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler`` (KIP-768;
  :class:`ClientCredentialsTokenProvider`): OAuth client credentials (the options ``clientId``, ``clientSecret``,
  optional ``scope``) posted to ``sasl.oauthbearer.token.endpoint.url``; the token is fetched when the node starts
  (no token: the node does not start, as Kafka's login), kept, and fetched again by the first connection made after
  80 % of its lifetime (``sasl.login.refresh.window.factor``; a failed refresh keeps the token while it is valid).

:class:`OAuthBearerSaslClient` sends ``n,,\\x01auth=Bearer <token>\\x01\\x01``; a server error challenge is answered
with ``\\x01`` (RFC 7628), after which the server fails the exchange. Providers raise ValueError on bad settings
or a failed fetch.

Threading: a provider may be called from several client threads (the Raft and controller channels, replica
fetchers); the client-credentials provider fetches under its lock.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
import urllib.request

from pykbroker.config.broker_configs.security_configs import (
    SASL_LOGIN_CALLBACK_HANDLER_CLASS_CONFIG,
    SASL_OAUTHBEARER_HEADER_URLENCODE_CONFIG,
    SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL_CONFIG,
)
from pykbroker.protocol.errors import SaslAuthenticationError

OIDC_LOGIN_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
)


class OAuthBearerSaslClient:
    """One connection's OAUTHBEARER exchange: ``initial_response()`` then ``evaluate_challenge(answer)``."""

    mechanism = "OAUTHBEARER"

    def __init__(self, token: str):
        self._message = f"n,,\x01auth=Bearer {token}\x01\x01".encode()
        self._state = "SEND_CLIENT_FIRST"
        self.complete = False

    def initial_response(self) -> bytes:
        self._state = "RECEIVE_SERVER_FIRST"
        return self._message

    def evaluate_challenge(self, token: bytes) -> bytes | None:
        if self._state != "RECEIVE_SERVER_FIRST":
            raise SaslAuthenticationError(f"Unexpected challenge in Sasl client state {self._state}")
        if token:  # the server's JSON error: answer 0x01, the server then fails the exchange
            self._state = "RECEIVE_SERVER_MESSAGE_AFTER_FAILURE"
            return b"\x01"
        self._state = "COMPLETE"
        self.complete = True
        return None


def _b64(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).rstrip(b"=").decode()


class UnsecuredLoginTokenProvider:
    """Kafka's ``OAuthBearerUnsecuredLoginCallbackHandler``: ``provider() -> str``, a fresh unsigned JWS."""

    def __init__(self, options: dict[str, str]):
        self.principal_claim = (options.get("unsecuredLoginPrincipalClaimName") or "").strip() or "sub"
        lifetime = (options.get("unsecuredLoginLifetimeSeconds") or "3600").strip()
        try:
            self.lifetime_s = int(lifetime)
        except ValueError:
            raise ValueError(f"unsecuredLoginLifetimeSeconds is not a number: {lifetime}") from None
        self.claims: dict[str, object] = {}
        for key, value in options.items():
            if key.startswith("unsecuredLoginStringClaim_"):
                self.claims[key[len("unsecuredLoginStringClaim_") :]] = value
            elif key.startswith("unsecuredLoginNumberClaim_"):
                try:
                    self.claims[key[len("unsecuredLoginNumberClaim_") :]] = float(value) if "." in value else int(value)
                except ValueError:
                    raise ValueError(f"{key} is not a number: {value}") from None
        for reserved in ("iat", "exp"):
            if reserved in self.claims:
                raise ValueError(f"Cannot explicitly set the '{reserved}' claim")
        if not str(self.claims.get(self.principal_claim) or "").strip():
            raise ValueError(
                f"The OAUTHBEARER JAAS config needs unsecuredLoginStringClaim_{self.principal_claim} (the principal "
                "this node authenticates as)"
            )

    def __call__(self) -> str:
        now_ms = int(time.time() * 1000)  # truncated as Kafka's time.milliseconds(): iat is never ahead of now
        claims = {**self.claims, "iat": now_ms / 1000, "exp": (now_ms + self.lifetime_s * 1000) / 1000}
        return f"{_b64({'alg': 'none'})}.{_b64(claims)}."


class ClientCredentialsTokenProvider:
    """Kafka's ``OAuthBearerLoginCallbackHandler`` with the HTTP token retriever: ``provider() -> str``, the
    current access token (see the module docstring). ``fetch(url, headers, body) -> bytes`` is replaceable."""

    def __init__(
        self,
        url: str,
        client_id: str,
        client_secret: str,
        scope: str | None,
        refresh_factor: float = 0.8,
        urlencode: bool = False,
    ):
        """``urlencode``: ``sasl.oauthbearer.header.urlencode``, URL-encode the id and secret in the Basic header."""
        self.url = url
        if urlencode:
            client_id, client_secret = (
                urllib.parse.quote(client_id, safe=""),
                urllib.parse.quote(client_secret, safe=""),
            )
        credentials = f"{client_id}:{client_secret}"
        self._headers = {
            "Authorization": "Basic " + base64.b64encode(credentials.encode()).decode(),
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        }
        form = {"grant_type": "client_credentials", **({"scope": scope} if scope else {})}
        self._body = urllib.parse.urlencode(form).encode()
        self.refresh_factor = refresh_factor
        self._lock = threading.Lock()
        self._token, self._refresh_at, self._expires_at = self._fetch()  # the login happens when the node starts

    def __call__(self) -> str:
        """The current token; a failed refresh keeps the old one while it is valid (tried again in 10 s), after
        which it raises SaslAuthenticationError (that connection fails, a later one fetches again)."""
        with self._lock:
            now = time.time()
            if now >= self._refresh_at:
                try:
                    self._token, self._refresh_at, self._expires_at = self._fetch()
                except ValueError as e:
                    if now >= self._expires_at:
                        raise SaslAuthenticationError(str(e)) from None
                    self._refresh_at = now + 10
            return self._token

    def _fetch(self) -> tuple[str, float, float]:
        """(token, time to refresh it, its expiry), times in seconds since the epoch."""
        request = urllib.request.Request(self.url, data=self._body, headers=self._headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                answer = json.loads(response.read())
        except (OSError, ValueError) as e:
            raise ValueError(f"Could not get an access token from {self.url}: {e}") from None
        token = answer.get("access_token") if isinstance(answer, dict) else None
        if not isinstance(token, str) or not token:
            raise ValueError(f"The token endpoint {self.url} answered without an access_token")
        now = time.time()
        try:
            payload = token.split(".")[1]
            exp = float(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["exp"])
        except (IndexError, KeyError, TypeError, ValueError):
            raise ValueError(f"The access token from {self.url} is not a JWT with an exp claim") from None
        return token, now + max(0.0, exp - now) * self.refresh_factor, exp


def token_provider(get, jaas_options: dict[str, str]):
    """The token provider of a listener's OAUTHBEARER login: ``get(config key) -> value or None`` (listener and
    mechanism prefixes applied by the caller). ValueError on a bad setting or a failed first fetch."""
    handler = str(get(SASL_LOGIN_CALLBACK_HANDLER_CLASS_CONFIG) or "").strip()
    if not handler:
        return UnsecuredLoginTokenProvider(jaas_options)
    if handler not in OIDC_LOGIN_HANDLERS:
        raise ValueError(f"sasl.login.callback.handler.class {handler} is not supported by pykbroker for OAUTHBEARER")
    url = str(get(SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL_CONFIG) or "").strip()
    if not url:
        raise ValueError("The OAuth configuration option sasl.oauthbearer.token.endpoint.url must be non-null")
    if urllib.parse.urlparse(url).scheme.lower() not in ("http", "https"):
        raise ValueError(f"The OAuth configuration option sasl.oauthbearer.token.endpoint.url ({url}) must be http(s)")
    client_id, secret = jaas_options.get("clientId"), jaas_options.get("clientSecret")
    if not client_id or not secret:
        raise ValueError("The OAuth login needs the clientId and clientSecret options of the JAAS config")
    factor = float(get("sasl.login.refresh.window.factor") or 0.8)
    urlencode = str(get(SASL_OAUTHBEARER_HEADER_URLENCODE_CONFIG) or "false").strip().lower() == "true"
    return ClientCredentialsTokenProvider(url, client_id, secret, jaas_options.get("scope"), factor, urlencode)
