"""OIDC validation of SASL/OAUTHBEARER tokens (KIP-768; Kafka's ``OAuthBearerValidatorCallbackHandler`` with
``ValidatorAccessTokenValidator`` and ``RefreshingHttpsJwksVerificationKeyResolver``), with PyJWT.

A token is a signed JWT (RS*, PS*, ES*, EdDSA; ``none`` and HMAC are refused) whose key comes from the JWKS at
``sasl.oauthbearer.jwks.endpoint.url`` (by ``kid``). It must carry ``exp`` and ``iat``; ``aud`` must hold one of
``sasl.oauthbearer.expected.audience`` (a token with an ``aud`` when none is expected is refused, as jose4j does),
``iss`` must equal ``sasl.oauthbearer.expected.issuer`` when set; times allow
``sasl.oauthbearer.clock.skew.seconds``. The principal is the ``sasl.oauthbearer.sub.claim.name`` claim, the scope
the ``sasl.oauthbearer.scope.claim.name`` claim. A refused token raises
:class:`~pykbroker.security.oauthbearer.TokenValidationError` ``Could not validate the access token: <reason>``
(logged at WARN by the validator; the client only gets ``{"status":"invalid_token"}``, as from Kafka).

Keys (:class:`JwksKeyResolver`): an ``http(s)://`` JWKS is fetched when the listener is built (retried with
``sasl.oauthbearer.jwks.endpoint.retry.backoff.ms`` doubling up to ``...retry.backoff.max.ms``; the broker does
not start without keys, as Kafka's ``init``), then refreshed every ``sasl.oauthbearer.jwks.endpoint.refresh.ms`` by
a daemon thread, and sooner when a token names an unknown ``kid`` (at most once a minute per kid, as Kafka's
``maybeExpediteRefresh``); that token is refused meanwhile. A ``file://`` JWKS is read once.

Threading: validation runs on Processor threads and only reads the resolver's current key map (one reference,
replaced whole by the refresh thread ``jwks-refresh-<url>``); the unknown-kid bookkeeping is under a lock; fetching
never happens on a Processor thread.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import NamedTuple

import jwt

from pykbroker.config.broker_configs.security_configs import (
    SASL_OAUTHBEARER_CLOCK_SKEW_SECONDS_CONFIG,
    SASL_OAUTHBEARER_EXPECTED_AUDIENCE_CONFIG,
    SASL_OAUTHBEARER_EXPECTED_ISSUER_CONFIG,
    SASL_OAUTHBEARER_JWKS_ENDPOINT_REFRESH_MS_CONFIG,
    SASL_OAUTHBEARER_JWKS_ENDPOINT_RETRY_BACKOFF_MAX_MS_CONFIG,
    SASL_OAUTHBEARER_JWKS_ENDPOINT_RETRY_BACKOFF_MS_CONFIG,
    SASL_OAUTHBEARER_JWKS_ENDPOINT_URL_CONFIG,
    SASL_OAUTHBEARER_SCOPE_CLAIM_NAME_CONFIG,
    SASL_OAUTHBEARER_SUB_CLAIM_NAME_CONFIG,
)
from pykbroker.security.oauthbearer import OAuthBearerToken, TokenValidationError
from pykbroker.utils.logging import get_logger

_log = get_logger("OAuthBearerValidatorCallbackHandler")
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
MISSING_KEY_ID_IN_FLIGHT_S = 60.0
MISSING_KEY_ID_MAX_ENTRIES = 16
MISSING_KEY_ID_MAX_LENGTH = 1000
_RESOLVERS: dict[tuple, JwksKeyResolver] = {}
_RESOLVERS_LOCK = threading.Lock()


def _option(get: Callable[[str], object], key: str, required: bool = False) -> str | None:
    value = get(key)
    if isinstance(value, list):
        value = ",".join(str(v) for v in value)
    text = None if value is None else str(value).strip()
    if required and not text:
        raise ValueError(f"The OAuth configuration option {key} must be non-null")
    return text or None


def _long(get: Callable[[str], object], key: str, default: int, minimum: int = 0) -> int:
    raw = _option(get, key)
    try:
        value = default if raw is None else int(raw)
    except ValueError:
        raise ValueError(f"The OAuth configuration option {key} must be a number: {raw}") from None
    if value < minimum:
        raise ValueError(f"The OAuth configuration option {key} value must be at least {minimum}")
    return value


class JwksKeyResolver:
    """The verification keys of one JWKS location, by ``kid`` (see the module docstring). ``keys`` is
    ``{kid or None: key}``; :meth:`resolve` never blocks. ``fetch(url) -> bytes`` is replaceable (tests)."""

    def __init__(self, url: str, refresh_ms: int, backoff_ms: int, backoff_max_ms: int, fetch=None):
        self.url = url
        self.refresh_ms = refresh_ms
        self.backoff_ms = backoff_ms
        self.backoff_max_ms = backoff_max_ms
        self.fetch = fetch or _fetch
        self.keys: dict[str | None, _Key] = {}
        self._missing: dict[str, float] = {}  # kid -> monotonic time before which it is not refreshed again
        self._missing_lock = threading.Lock()  # Processor threads share the resolver
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def init(self) -> None:
        """Fetch the keys once (retrying until ``backoff_max_ms`` has passed), then start the refresh thread
        (``http(s)`` only). ValueError when no key could be read."""
        try:
            self.keys = self._fetch_with_retry()
        except Exception as e:  # noqa: BLE001 - any failure to read keys stops the listener's set-up
            raise ValueError(
                "The OAuth validator configuration encountered an error when initializing the VerificationKeyResolver"
                f": could not read the JWKS from {self.url}: {e}"
            ) from None
        if not self.url.lower().startswith("file:"):
            self._thread = threading.Thread(target=self._run, name=f"jwks-refresh-{self.url}", daemon=True)
            self._thread.start()

    def _fetch_with_retry(self) -> dict[str | None, _Key]:
        deadline = time.monotonic() + self.backoff_max_ms / 1000
        wait = self.backoff_ms / 1000
        while True:
            try:
                return _parse_jwks(self.fetch(self.url))
            except Exception:
                if self.url.lower().startswith("file:") or time.monotonic() + wait > deadline or self._closed.is_set():
                    raise
                self._closed.wait(wait)
                wait *= 2

    def _run(self) -> None:
        while not self._closed.is_set():
            self._wake.wait(self.refresh_ms / 1000)
            self._wake.clear()
            if self._closed.is_set():
                return
            try:
                self.keys = self._fetch_with_retry()
            except Exception as e:  # noqa: BLE001 - keep the last keys; the next refresh tries again
                _log.warning(f"Could not refresh JWKS from {self.url}: {e}")

    def resolve(self, kid: str | None, alg: str) -> jwt.PyJWK:
        """The key for a JWS header's ``kid`` (any key of ``alg``'s family without one); TokenValidationError
        when none fits (an unknown kid schedules a refresh)."""
        keys = self.keys
        key = keys.get(kid) if kid is not None else next((k for k in keys.values() if _fits(k, alg)), None)
        if key is not None and _fits(key, alg):
            return key.jwk
        if kid is not None and self._thread is not None and self._expedite(kid):
            _log.debug(f"Refreshing JWKs from {self.url} as no suitable verification key for kid {kid} was found")
        raise TokenValidationError(
            f"Unable to find a suitable verification key for JWS w/ header {{kid={kid}, alg={alg}}} from JWKs "
            f"{sorted(str(k) for k in keys)} obtained from {self.url}"
        )

    def _expedite(self, kid: str) -> bool:
        if len(kid) > MISSING_KEY_ID_MAX_LENGTH:
            return False
        now = time.monotonic()
        with self._missing_lock:
            if now < self._missing.get(kid, 0.0):
                return False
            self._missing.pop(kid, None)
            while len(self._missing) >= MISSING_KEY_ID_MAX_ENTRIES:  # the eldest goes, as Kafka's LRU map
                del self._missing[next(iter(self._missing))]
            self._missing[kid] = now + MISSING_KEY_ID_IN_FLIGHT_S
        self._wake.set()
        return True

    def close(self) -> None:
        self._closed.set()
        self._wake.set()


class _Key(NamedTuple):
    jwk: jwt.PyJWK
    alg: str | None  # the JWK's declared "alg", if any
    kty: str


def _fits(key: _Key, alg: str) -> bool:
    if key.alg is not None:
        return key.alg == alg
    family = {"RSA": ("RS", "PS"), "EC": ("ES",), "OKP": ("EdDSA",)}.get(key.kty, ())
    return alg.startswith(family)


def _fetch(url: str) -> bytes:
    if url.lower().startswith("file:"):
        with open(urllib.request.url2pathname(urllib.parse.urlparse(url).path), "rb") as f:
            return f.read()
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read()


def _parse_jwks(raw: bytes) -> dict[str | None, _Key]:
    keys: dict[str | None, _Key] = {}
    for data in json.loads(raw).get("keys", []):
        if data.get("use", "sig") != "sig":
            continue
        try:
            key = jwt.PyJWK(data)
        except jwt.PyJWTError:
            continue  # an unsupported key type: jose4j skips it too
        keys[data.get("kid")] = _Key(key, data.get("alg"), str(data.get("kty")))
    if not keys:
        raise ValueError("the JWKS holds no usable signing key")
    return keys


class JwtValidator:
    """Kafka's ``ValidatorAccessTokenValidator`` (see the module docstring): ``validate(token) ->
    OAuthBearerToken`` or TokenValidationError."""

    def __init__(
        self,
        resolver: JwksKeyResolver,
        audiences: list[str],
        issuer: str | None,
        clock_skew_s: int,
        sub_claim: str = "sub",
        scope_claim: str = "scope",
    ):
        self.resolver = resolver
        self.audiences = audiences
        self.issuer = issuer
        self.clock_skew_s = clock_skew_s
        self.sub_claim = sub_claim
        self.scope_claim = scope_claim

    def validate(self, token: str) -> OAuthBearerToken:
        try:
            return self._validate(token)
        except TokenValidationError as e:
            _log.warning(str(e))
            raise

    def _validate(self, token: str) -> OAuthBearerToken:
        token = token.strip()
        if not token:
            raise TokenValidationError("Empty JWT provided; expected three sections (header, payload, and signature)")
        sections = token.split(".")
        if len(sections) != 3:
            raise TokenValidationError(
                f"Malformed JWT provided; expected three sections (header, payload, and signature), but "
                f"{len(sections)} sections provided"
            )
        for name, section in zip(("header", "payload", "signature"), sections, strict=True):
            if not section.strip():
                raise TokenValidationError(
                    "Malformed JWT provided; expected at least three sections (header, payload, and signature), "
                    f"but {name} section missing"
                )
        try:
            header = jwt.get_unverified_header(token)
            alg = str(header.get("alg"))
            if alg not in ALGORITHMS:
                raise jwt.InvalidAlgorithmError(f"'{alg}' is not a permitted algorithm")
            key = self.resolver.resolve(header.get("kid"), alg)
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[alg],
                audience=self.audiences or None,
                issuer=self.issuer,
                leeway=self.clock_skew_s,
                options={"require": ["exp", "iat"]},
            )
        except (jwt.PyJWTError, TokenValidationError) as e:
            raise TokenValidationError(f"Could not validate the access token: {e}") from None
        sub = claims.get(self.sub_claim)
        if not isinstance(sub, str) or not sub.strip():
            what = "non-null" if sub is None else "non-empty" if sub == "" else "a string, not only whitespace"
            raise TokenValidationError(f"Could not validate the access token: {self.sub_claim} value must be {what}")
        raw_scope = claims.get(self.scope_claim)
        scopes = [raw_scope] if isinstance(raw_scope, str) else raw_scope if isinstance(raw_scope, list) else []
        scope = frozenset(str(s).strip() for s in scopes if str(s).strip())
        exp, iat = claims["exp"], claims["iat"]
        return OAuthBearerToken(token, sub.strip(), scope, round(exp * 1000), round(iat * 1000))


def jwt_validator(get: Callable[[str], object]) -> JwtValidator:
    """A JwtValidator from the listener's settings (``get(config key) -> value or None``); the key resolver is
    shared by listeners with the same JWKS settings (Kafka's ``VERIFICATION_KEY_RESOLVER_CACHE``). ValueError with
    Kafka's ConfigurationUtils wording for a missing or bad setting."""
    url = _option(get, SASL_OAUTHBEARER_JWKS_ENDPOINT_URL_CONFIG, required=True)
    assert url is not None
    scheme = urllib.parse.urlparse(url).scheme.lower()
    if not scheme:
        raise ValueError(f"The OAuth configuration option sasl.oauthbearer.jwks.endpoint.url contains a URL ({url}) "
                         "that is missing the protocol")  # fmt: skip
    if scheme not in ("http", "https", "file"):
        raise ValueError(
            f"The OAuth configuration option sasl.oauthbearer.jwks.endpoint.url contains a URL ({url}) that contains "
            f'an invalid protocol ({scheme}); only "http", "https", and "file" protocol are supported'
        )
    settings = (
        url,
        _long(get, SASL_OAUTHBEARER_JWKS_ENDPOINT_REFRESH_MS_CONFIG, 3_600_000, 1),
        _long(get, SASL_OAUTHBEARER_JWKS_ENDPOINT_RETRY_BACKOFF_MS_CONFIG, 100),
        _long(get, SASL_OAUTHBEARER_JWKS_ENDPOINT_RETRY_BACKOFF_MAX_MS_CONFIG, 10_000),
    )
    with _RESOLVERS_LOCK:
        resolver = _RESOLVERS.get(settings)
        if resolver is None:
            resolver = JwksKeyResolver(*settings)
            resolver.init()
            _RESOLVERS[settings] = resolver
    audiences = [
        a.strip() for a in (_option(get, SASL_OAUTHBEARER_EXPECTED_AUDIENCE_CONFIG) or "").split(",") if a.strip()
    ]
    return JwtValidator(
        resolver,
        audiences,
        _option(get, SASL_OAUTHBEARER_EXPECTED_ISSUER_CONFIG),
        _long(get, SASL_OAUTHBEARER_CLOCK_SKEW_SECONDS_CONFIG, 30),
        _option(get, SASL_OAUTHBEARER_SUB_CLAIM_NAME_CONFIG) or "sub",
        _option(get, SASL_OAUTHBEARER_SCOPE_CLAIM_NAME_CONFIG) or "scope",
    )
