"""SASL/OAUTHBEARER: the client initial response, the unsecured-JWS validator, the OIDC JWT validator (keys from a
``file://`` JWKS; the HTTP JWKS and real clients are in tests/integration/test_sasl_oauthbearer.py), the server's
error challenge and the listener set-up."""

from __future__ import annotations

import base64
import json
import re
import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import given, settings
from hypothesis import strategies as st

from pykbroker import protocol
from pykbroker.config.config_def import ConfigException
from pykbroker.config.endpoint import EndPoint
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.security.channel_builders import authenticator_factories
from pykbroker.security.oauthbearer import (
    OAuthBearerSaslException,
    OAuthBearerSaslServer,
    TokenValidationError,
    UnsecuredValidator,
    parse_client_initial_response,
)
from pykbroker.security.oauthbearer_login import OIDC_LOGIN_HANDLERS, OAuthBearerSaslClient, token_provider
from pykbroker.security.oauthbearer_oidc import JwksKeyResolver, jwt_validator
from pykbroker.security.sasl_server_authenticator import RESPOND, SaslServerAuthenticator

OIDC = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"


def _b64(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def unsecured(claims: dict, header: dict | None = None, signature: str = "") -> str:
    return f"{_b64(header or {'alg': 'none'})}.{_b64(claims)}.{signature}"


def initial(token: str, authzid: str = "", extensions: str = "") -> bytes:
    a = f"a={authzid}" if authzid else ""
    return f"n,{a},\x01auth=Bearer {token}\x01{extensions}\x01".encode()


def test_client_initial_response():
    r = parse_client_initial_response(initial("a.b.", "alice", "traceId=42\x01"))
    assert (r.token, r.authorization_id, r.extensions) == ("a.b.", "alice", {"traceId": "42"})
    for bad, message in [
        (b"n,,auth=Bearer x\x01\x01", "Invalid OAUTHBEARER client first message"),
        (b"n,,\x01other=1\x01\x01", "Invalid OAUTHBEARER client first message: 'auth' not specified"),
        (b"n,,\x01auth=Bearer\x01\x01", "Invalid OAUTHBEARER client first message: invalid 'auth' format"),
        (b"n,,\x01auth=Basic abc\x01\x01", "Invalid scheme in OAUTHBEARER client first message: Basic"),
    ]:
        with pytest.raises(OAuthBearerSaslException, match=message):
            parse_client_initial_response(bad)


def test_unsecured_validator_like_kafkas():
    now = int(time.time())
    v = UnsecuredValidator({}, clock=lambda: now * 1000)
    token = v.validate(unsecured({"sub": "alice", "iat": now, "exp": now + 60, "scope": ["a", "b"]}))
    assert token.principal_name == "alice" and token.scope == {"a", "b"}
    assert token.lifetime_ms == round((now + 60) * 1000)
    refused = {
        unsecured({"sub": "alice", "exp": now - 1}): "minus allowable clock skew (0 ms) was on or after",
        unsecured({"sub": "alice"}): "No expiration time in JWT",
        unsecured({"exp": now + 60}): "No principal name in JWT claim: sub",
        unsecured({"sub": 7, "exp": now + 60}): "The 'sub' claim was not of type String",
        unsecured({"sub": "a", "exp": now + 60}, {"alg": "RS256"}): "Unsecured JWS must have 'none' for an algorithm",
        unsecured({"sub": "a", "exp": now + 60}, signature="c2ln"): "must not contain a digital signature",
        unsecured({"sub": "a", "exp": now + 60, "iat": now + 120}): "The Issued At value",
        "a..b": "Malformed compact serialization contains '..'",
        "abc.def": "must have 3 dot-separated Base64URL-encoded values",
        "e30.!!!.": "malformed",
    }
    for bad, message in refused.items():
        with pytest.raises(TokenValidationError, match=re.escape(message)):
            v.validate(bad)
    skewed = UnsecuredValidator({"unsecuredValidatorAllowableClockSkewMs": "5000"}, clock=lambda: now * 1000)
    assert skewed.validate(unsecured({"sub": "alice", "exp": now - 1})).principal_name == "alice"
    custom = UnsecuredValidator({"unsecuredValidatorPrincipalClaimName": "user"}, clock=lambda: now * 1000)
    assert custom.validate(unsecured({"user": "bob", "exp": now + 60})).principal_name == "bob"
    scoped = UnsecuredValidator({"unsecuredValidatorRequiredScope": "write read"}, clock=lambda: now * 1000)
    with pytest.raises(TokenValidationError) as e:
        scoped.validate(unsecured({"sub": "a", "exp": now + 60, "scope": "read"}))
    assert (e.value.status, e.value.scope) == ("insufficient_scope", "[write, read]")
    with pytest.raises(ValueError, match="must not be negative"):
        UnsecuredValidator({"unsecuredValidatorAllowableClockSkewMs": "-1"})


def _authenticate(authenticator: SaslServerAuthenticator, token: bytes, correlation_id: int) -> dict:
    action, frame, _close = authenticator.handle(
        memoryview(
            protocol.encode_request(ApiKeys.SASL_AUTHENTICATE, 2, correlation_id, "t", {"auth_bytes": token})[4:]
        )
    )
    assert action == RESPOND
    return protocol.decode_response(ApiKeys.SASL_AUTHENTICATE, 2, bytes(frame)[4 + 5 :])


def _handshake(authenticator: SaslServerAuthenticator) -> None:
    frame = protocol.encode_request(ApiKeys.SASL_HANDSHAKE, 1, 1, "t", {"mechanism": "OAUTHBEARER"})[4:]
    assert authenticator.handle(memoryview(frame))[0] == RESPOND


def test_server_error_challenge_then_failure():
    """An invalid token gets the RFC 7628 JSON challenge, the client's 0x01 then fails with that JSON (Kafka's
    OAuthBearerSaslServer); a valid one completes with the principal and the token's expiry."""
    now = time.time()
    validator = UnsecuredValidator({})
    auth = SaslServerAuthenticator(["OAUTHBEARER"], lambda m: OAuthBearerSaslServer(validator))
    _handshake(auth)
    r = _authenticate(auth, initial(unsecured({"sub": "alice", "exp": now - 10})), 2)
    assert (r["error_code"], bytes(r["auth_bytes"])) == (0, b'{"status":"invalid_token"}')
    r = _authenticate(auth, b"\x01", 3)
    assert (r["error_code"], r["error_message"]) == (errors.SASL_AUTHENTICATION_FAILED, '{"status":"invalid_token"}')

    auth = SaslServerAuthenticator(["OAUTHBEARER"], lambda m: OAuthBearerSaslServer(validator))
    _handshake(auth)
    r = _authenticate(auth, initial(unsecured({"sub": "alice", "exp": now + 60}), authzid="bob"), 2)
    assert r["error_code"] == errors.SASL_AUTHENTICATION_FAILED
    assert r["error_message"] == (
        "Authentication failed: Client requested an authorization id (bob) that is different from the token's "
        "principal name (alice)"
    )

    auth = SaslServerAuthenticator(["OAUTHBEARER"], lambda m: OAuthBearerSaslServer(validator))
    _handshake(auth)
    r = _authenticate(auth, b"n,,garbage", 2)
    assert r["error_message"] == (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER"
    )

    server = OAuthBearerSaslServer(validator)
    auth = SaslServerAuthenticator(["OAUTHBEARER"], lambda m: server)
    _handshake(auth)
    r = _authenticate(auth, initial(unsecured({"sub": "alice", "exp": int(now) + 60})), 2)
    assert r["error_code"] == 0 and auth.complete and auth.principal == "User:alice"
    assert server.credential_expiration_ms == (int(now) + 60) * 1000
    # KIP-368: the session ends with the token even when connections.max.reauth.ms is 0 (Kafka's
    # calcCompletionTimesAndReturnSessionLifetimeMs), and with the shorter of the two otherwise
    assert 55_000 < r["session_lifetime_ms"] <= 60_000 and 55_000 < (auth.session_lifetime_ms or 0) <= 60_000
    capped = SaslServerAuthenticator(["OAUTHBEARER"], lambda m: OAuthBearerSaslServer(validator), {"OAUTHBEARER": 2000})
    _handshake(capped)
    r = _authenticate(capped, initial(unsecured({"sub": "alice", "exp": int(now) + 60})), 2)
    assert r["error_code"] == 0 and r["session_lifetime_ms"] == 2000


@pytest.fixture
def rsa_jwks(tmp_path):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}))
    return key, path.as_uri()


def _signed(key, claims: dict, kid: str = "k1", alg: str = "RS256") -> str:
    return jwt.encode(claims, key, algorithm=alg, headers={"kid": kid})


def test_oidc_validator_with_a_file_jwks(rsa_jwks):
    key, url = rsa_jwks
    settings = {
        "sasl.oauthbearer.jwks.endpoint.url": url,
        "sasl.oauthbearer.expected.audience": "kafka,other",
        "sasl.oauthbearer.expected.issuer": "https://issuer",
        "sasl.oauthbearer.clock.skew.seconds": "5",
    }
    v = jwt_validator(settings.get)
    now = int(time.time())
    good = {"sub": "alice", "aud": "kafka", "iss": "https://issuer", "iat": now, "exp": now + 60, "scope": "x"}
    token = v.validate(_signed(key, good))
    assert (token.principal_name, token.scope, token.lifetime_ms) == ("alice", {"x"}, (now + 60) * 1000)
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    refused = {
        _signed(key, {**good, "exp": now - 60}): "Signature has expired",
        _signed(key, {**good, "aud": "nope"}): "Audience doesn't match",
        _signed(key, {**good, "iss": "https://evil"}): "Invalid issuer",
        _signed(other_key, good): "Signature verification failed",
        _signed(key, good, kid="k9"): "Unable to find a suitable verification key",
        _signed(key, {k: v for k, v in good.items() if k != "iat"}): 'Token is missing the "iat" claim',
        _signed(key, {k: v for k, v in good.items() if k != "sub"}): "sub value must be non-null",
        jwt.encode(good, "secret-long-enough-for-hmac-sha256!", algorithm="HS256", headers={"kid": "k1"}): (
            "'HS256' is not a permitted algorithm"
        ),
        unsecured(good, signature="c2ln"): "'none' is not a permitted algorithm",
    }
    for bad, message in refused.items():
        with pytest.raises(TokenValidationError, match=f"Could not validate the access token: .*{message}"):
            v.validate(bad)
    for bad, message in {
        unsecured(good): "Malformed JWT provided; expected at least three sections (header, payload, and signature), "
        "but signature section missing",
        "a.b": "Malformed JWT provided; expected three sections (header, payload, and signature), but 2 sections",
        " ": "Empty JWT provided",
    }.items():
        with pytest.raises(TokenValidationError, match=re.escape(message)):
            v.validate(bad)
    sub_claim = jwt_validator({**settings, "sasl.oauthbearer.sub.claim.name": "client_id"}.get)
    assert sub_claim.validate(_signed(key, {**good, "client_id": "svc"})).principal_name == "svc"


def test_oidc_configuration_errors(tmp_path):
    with pytest.raises(ValueError, match="sasl.oauthbearer.jwks.endpoint.url must be non-null"):
        jwt_validator({}.get)
    with pytest.raises(ValueError, match='invalid protocol \\(ftp\\); only "http", "https", and "file"'):
        jwt_validator({"sasl.oauthbearer.jwks.endpoint.url": "ftp://x/jwks"}.get)
    missing = (tmp_path / "none.json").as_uri()
    with pytest.raises(ValueError, match="error when initializing the VerificationKeyResolver"):
        jwt_validator({"sasl.oauthbearer.jwks.endpoint.url": missing}.get)


def test_listener_set_up():
    endpoint = EndPoint("SASL_PLAINTEXT", "SASL_PLAINTEXT", "127.0.0.1", 0)
    base = {"sasl.enabled.mechanisms": "OAUTHBEARER"}
    with pytest.raises(ConfigException, match="listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"):
        authenticator_factories([endpoint], base, None)
    jaas = {**base, "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": JAAS}
    factory = authenticator_factories([endpoint], jaas, None)["SASL_PLAINTEXT"]
    assert factory().mechanisms == ["OAUTHBEARER"]
    oidc = {**jaas, "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": OIDC}
    with pytest.raises(ConfigException, match="sasl.oauthbearer.jwks.endpoint.url must be non-null"):
        authenticator_factories([endpoint], oidc, None)
    bad = {**jaas, "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": "com.Other"}
    with pytest.raises(ConfigException, match="com.Other is not supported"):
        authenticator_factories([endpoint], bad, None)


def _jwks_bytes(keys: dict) -> bytes:
    out = []
    for kid, key in keys.items():
        out.append({**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key())), "kid": kid, "alg": "RS256"})
    return json.dumps({"keys": out}).encode()


def test_jwks_resolver_retries_then_refreshes_on_an_unknown_kid():
    """The first fetch is retried with backoff (Kafka's RefreshingHttpsJwks init); an unknown kid refuses the
    token and wakes the refresh thread, which picks up the new key; the same kid does not wake it again within
    the minute."""
    k1, k2 = (rsa.generate_private_key(public_exponent=65537, key_size=2048) for _ in range(2))
    published = {"k1": k1}
    calls: list[float] = []

    def fetch(url: str) -> bytes:
        calls.append(time.monotonic())
        if len(calls) < 3:
            raise OSError("connection refused")
        return _jwks_bytes(published)

    resolver = JwksKeyResolver(
        "http://idp/jwks", refresh_ms=3_600_000, backoff_ms=10, backoff_max_ms=5_000, fetch=fetch
    )
    resolver.init()
    try:
        assert len(calls) == 3 and calls[2] - calls[1] >= 0.015  # 10 ms, then 20 ms
        assert resolver.resolve("k1", "RS256") is not None
        published["k2"] = k2
        with pytest.raises(TokenValidationError, match="Unable to find a suitable verification key"):
            resolver.resolve("k2", "RS256")
        deadline = time.monotonic() + 5
        while "k2" not in resolver.keys and time.monotonic() < deadline:
            time.sleep(0.01)
        assert resolver.resolve("k2", "RS256") is not None and len(calls) == 4
        with pytest.raises(TokenValidationError):
            resolver.resolve("k3", "RS256")
        n = len(calls)
        with pytest.raises(TokenValidationError):
            resolver.resolve("k3", "RS256")  # still unknown: no second expedited refresh within the minute
        time.sleep(0.2)
        assert len(calls) <= n + 1
        with pytest.raises(TokenValidationError):
            resolver.resolve("k1", "ES256")  # a key of another family does not fit
    finally:
        resolver.close()
    failing = JwksKeyResolver("http://idp/jwks", 1000, 10, 50, fetch=lambda url: (_ for _ in ()).throw(OSError("no")))
    with pytest.raises(ValueError, match="could not read the JWKS from http://idp/jwks: no"):
        failing.init()


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=300),
        st.text(alphabet="abcXYZ019-_.=+/ ", max_size=200).map(lambda t: initial(t) if t.strip() else t.encode()),
        st.lists(st.text(alphabet="eyJ0abcQWE-_=", max_size=60), min_size=3, max_size=3).map(
            lambda parts: initial(".".join(parts))
        ),
    )
)
def test_any_client_message_fails_with_a_sasl_error_only(message):
    """Garbage fails the exchange with Kafka's exceptions, never another error (a traceback on the broker)."""
    server = OAuthBearerSaslServer(UnsecuredValidator({}))
    try:
        challenge = server.evaluate_response(message)
    except (errors.SaslAuthenticationError, OAuthBearerSaslException):
        return
    assert challenge.startswith(b'{"status":"') or server.complete


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=200),
        st.lists(st.text(alphabet="eyJ0abcQWE-_=", max_size=60), min_size=3, max_size=3).map(".".join),
        st.lists(
            st.dictionaries(
                st.sampled_from(["alg", "kid", "typ", "sub", "exp", "iat", "aud"]),
                st.one_of(st.none(), st.integers(), st.text(max_size=5), st.lists(st.integers())),
            ),
            min_size=2,
            max_size=2,
        ).map(lambda hp: f"{_b64(hp[0])}.{_b64(hp[1])}.c2ln"),
    )
)
def test_any_token_is_refused_with_a_validation_error_only(oidc_validator, token):
    with pytest.raises(TokenValidationError):
        oidc_validator.validate(token)


@pytest.fixture(scope="module")
def oidc_validator(tmp_path_factory):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    path = tmp_path_factory.mktemp("jwks") / "jwks.json"
    path.write_text(json.dumps({"keys": [{**jwk, "kid": "k1"}]}))
    return jwt_validator({"sasl.oauthbearer.jwks.endpoint.url": path.as_uri()}.get)


def test_node_login_with_an_unsecured_token():
    """The node's own OAUTHBEARER client (Kafka's OAuthBearerSaslClient with the unsecured login handler): its
    token passes the unsecured validator; an error challenge is answered with 0x01."""
    provider = token_provider({}.get, {"unsecuredLoginStringClaim_sub": "admin", "unsecuredLoginNumberClaim_n": "7"})
    client = OAuthBearerSaslClient(provider())
    server = OAuthBearerSaslServer(UnsecuredValidator({}))
    assert server.evaluate_response(client.initial_response()) == b"" and server.authorization_id == "admin"
    assert client.evaluate_challenge(b"") is None and client.complete
    validator = UnsecuredValidator({})  # a token used at once is never issued "in the future" (ms rounding)
    assert all(validator.validate(provider()).principal_name == "admin" for _ in range(500))
    refused = OAuthBearerSaslClient(provider())
    refused.initial_response()
    assert refused.evaluate_challenge(b'{"status":"invalid_token"}') == b"\x01" and not refused.complete
    with pytest.raises(ValueError, match="unsecuredLoginStringClaim_sub"):
        token_provider({}.get, {})
    with pytest.raises(ValueError, match="Cannot explicitly set the 'exp' claim"):
        token_provider({}.get, {"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginNumberClaim_exp": "1"})
    oidc_login = {"sasl.login.callback.handler.class": OIDC_LOGIN_HANDLERS[0]}
    with pytest.raises(ValueError, match="sasl.oauthbearer.token.endpoint.url must be non-null"):
        token_provider(oidc_login.get, {"clientId": "a", "clientSecret": "b"})
    with pytest.raises(ValueError, match="clientId and clientSecret"):
        token_provider({**oidc_login, "sasl.oauthbearer.token.endpoint.url": "http://127.0.0.1:1/t"}.get, {})
    with pytest.raises(ValueError, match="Could not get an access token from http://127.0.0.1:1/t"):
        token_provider(
            {**oidc_login, "sasl.oauthbearer.token.endpoint.url": "http://127.0.0.1:1/t"}.get,
            {"clientId": "a", "clientSecret": "b"},
        )


def test_node_login_with_client_credentials():
    """OAuthBearerLoginCallbackHandler's client credentials: HTTP Basic with the raw id and secret unless
    sasl.oauthbearer.header.urlencode=true (Kafka's default: not encoded); the token is kept until 80 % of its
    lifetime; a failed refresh keeps a still valid token, an expired one fails the connection."""
    from tests.helpers.oauth import IdentityProvider

    idp = IdentityProvider({"svc b": "s3cret/+"})
    try:
        settings = {
            "sasl.login.callback.handler.class": OIDC_LOGIN_HANDLERS[1],
            "sasl.oauthbearer.token.endpoint.url": f"{idp.url}/token",
        }
        provider = token_provider(settings.get, {"clientId": "svc b", "clientSecret": "s3cret/+"})
        token = provider()
        assert jwt.decode(token, options={"verify_signature": False})["sub"] == "svc b"
        assert provider() == token and idp.requests.count("POST /token") == 1  # cached
        provider._refresh_at = 0.0  # due for a refresh
        assert provider() and idp.requests.count("POST /token") == 2  # fetched again
        token = provider()
        idp.clients.clear()  # the provider now refuses: the valid token is kept, until it expires
        provider._refresh_at = 0.0
        assert provider() == token and idp.requests.count("POST /token") == 3
        provider._refresh_at, provider._expires_at = 0.0, 0.0
        with pytest.raises(errors.SaslAuthenticationError, match="HTTP Error 401"):
            provider()
        idp.clients["svc b"] = "s3cret/+"
        with pytest.raises(ValueError, match="HTTP Error 401"):
            token_provider(
                {**settings, "sasl.oauthbearer.header.urlencode": "true"}.get,
                {"clientId": "svc b", "clientSecret": "s3cret/+"},
            )
    finally:
        idp.close()
