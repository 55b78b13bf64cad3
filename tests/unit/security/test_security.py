"""SASL mechanisms, the authenticator's state machine, JAAS lines and certificate principals."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykbroker import protocol
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.security.jaas import parse_jaas_config
from pykbroker.security.plain import PlainSaslServer
from pykbroker.security.sasl_server_authenticator import CLOSE, PASS, RESPOND, SaslServerAuthenticator
from pykbroker.security.scram import ScramSaslServer, credential_for
from pykbroker.security.ssl_factory import SslPrincipalMapper, distinguished_name


def test_jaas_line_like_kafkas():
    entry = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin secret" user_alice="a\\"b";'
    )
    assert entry.login_module.endswith("PlainLoginModule") and entry.flag == "required"
    assert entry.options == {"username": "admin", "password": "admin secret", "user_alice": 'a"b'}
    for bad in ("Module required a=1", "Module maybe a=1;", "Module required a=;", "M required a=1; N required;"):
        with pytest.raises(ValueError):
            parse_jaas_config(bad)


def test_plain():
    server = PlainSaslServer({"alice": "pw"})
    assert server.evaluate_response(b"\x00alice\x00pw") == b"" and server.complete
    assert server.authorization_id == "alice"
    for token in (b"\x00alice\x00nope", b"\x00bob\x00pw", b"alice\x00pw", b"other\x00alice\x00pw"):
        with pytest.raises(errors.SaslAuthenticationError):
            PlainSaslServer({"alice": "pw"}).evaluate_response(token)


def _scram_client(mechanism: str, user: str, password: str, server: ScramSaslServer, nonce: str = "cnonce") -> bytes:
    """RFC 5802 client side: returns the server's final message."""
    h = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
    first_bare = f"n={user},r={nonce}"
    server_first = server.evaluate_response(f"n,,{first_bare}".encode()).decode()
    attrs = dict(a.split("=", 1) for a in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(h, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", h).digest()
    without_proof = f"c=biws,r={attrs['r']}"
    auth = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.new(h, client_key).digest(), auth, h).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return server.evaluate_response(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram(mechanism):
    creds = {("alice", mechanism): credential_for("secret", mechanism)}
    server = ScramSaslServer(mechanism, lambda u, m: creds.get((u, m)))
    final = _scram_client(mechanism, "alice", "secret", server)
    assert final.startswith(b"v=") and server.complete and server.authorization_id == "alice"
    with pytest.raises(errors.SaslAuthenticationError, match="invalid credentials"):
        _scram_client(mechanism, "alice", "wrong", ScramSaslServer(mechanism, lambda u, m: creds.get((u, m))))
    with pytest.raises(errors.SaslAuthenticationError, match="invalid credentials"):
        _scram_client(mechanism, "nobody", "secret", ScramSaslServer(mechanism, lambda u, m: creds.get((u, m))))


@given(st.binary(max_size=300))
def test_scram_garbage_never_escapes_as_another_error(token):
    server = ScramSaslServer("SCRAM-SHA-256", lambda u, m: credential_for("x", m, salt=b"s"))
    try:
        server.evaluate_response(token)
        server.evaluate_response(token)
    except errors.SaslAuthenticationError:
        pass


def _request(api_key: int, version: int, body: dict) -> memoryview:
    return memoryview(protocol.encode_request(api_key, version, 7, "c", body)[4:])


def test_authenticator_state_machine():
    auth = SaslServerAuthenticator(["PLAIN"], lambda m: PlainSaslServer({"alice": "pw"}))
    assert (
        auth.handle(_request(ApiKeys.API_VERSIONS, 3, {"client_software_name": "a", "client_software_version": "1"}))[0]
        == PASS
    )
    assert auth.handle(_request(ApiKeys.METADATA, 12, {"topics": None}))[0] == CLOSE
    action, frame, close = auth.handle(_request(ApiKeys.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}))
    assert (action, close) == (RESPOND, False) and auth.state == "AUTHENTICATE"
    action, frame, close = auth.handle(_request(ApiKeys.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x00alice\x00pw"}))
    assert (action, close) == (RESPOND, False) and auth.complete and auth.principal == "User:alice"
    body = protocol.decode_response(ApiKeys.SASL_AUTHENTICATE, 2, bytes(frame)[9:])
    assert body["error_code"] == 0


def test_authenticator_v0_raw_tokens_and_failures():
    auth = SaslServerAuthenticator(["PLAIN"], lambda m: PlainSaslServer({"alice": "pw"}))
    auth.handle(_request(ApiKeys.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"}))
    assert auth.state == "RAW"
    action, frame, _ = auth.handle(memoryview(b"\x00alice\x00pw"))
    assert action == RESPOND and frame == b"\x00\x00\x00\x00" and auth.complete
    failing = SaslServerAuthenticator(["PLAIN"], lambda m: PlainSaslServer({"alice": "pw"}))
    failing.handle(_request(ApiKeys.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}))
    action, frame, close = failing.handle(_request(ApiKeys.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\x00alice\x00no"}))
    body = protocol.decode_response(ApiKeys.SASL_AUTHENTICATE, 1, bytes(frame)[8:])
    assert close and body["error_code"] == errors.SASL_AUTHENTICATION_FAILED
    assert body["error_message"] == "Authentication failed: Invalid username or password"


def test_certificate_principals():
    cert = {
        "subject": (
            (("countryName", "US"),),
            (("organizationName", "Example, Inc"),),
            (("organizationalUnitName", "ServiceUsers"),),
            (("commonName", "alice"),),
        )
    }
    dn = distinguished_name(cert)
    assert dn == "CN=alice,OU=ServiceUsers,O=Example\\, Inc,C=US"
    assert SslPrincipalMapper().principal(cert) == f"User:{dn}"
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/U, DEFAULT")
    assert mapper.principal(cert) == "User:ALICE"
    assert mapper.name("CN=bob,OU=Other") == "CN=bob,OU=Other"
    assert SslPrincipalMapper().principal(None) == "User:ANONYMOUS"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_against_the_server(mechanism):
    from pykbroker.security.sasl_client import ScramSaslClient

    creds = {("admin", mechanism): credential_for("s3cret", mechanism, iterations=4096)}
    server = ScramSaslServer(mechanism, lambda u, m: creds.get((u, m)))
    client = ScramSaslClient(mechanism, "admin", "s3cret")
    final = server.evaluate_response(client.evaluate_challenge(server.evaluate_response(client.initial_response())))
    assert client.evaluate_challenge(final) is None and client.complete and server.authorization_id == "admin"
    # A server that does not know the password cannot fake the final signature.
    impostor = ScramSaslServer(mechanism, lambda u, m: credential_for("other", m, iterations=4096))
    client = ScramSaslClient(mechanism, "admin", "s3cret")
    client.evaluate_challenge(impostor.evaluate_response(client.initial_response()))
    with pytest.raises(errors.SaslAuthenticationError):
        client.evaluate_challenge(b"v=" + base64.b64encode(b"x" * 32))
    # A wrong password fails on the server.
    client = ScramSaslClient(mechanism, "admin", "wrong")
    server = ScramSaslServer(mechanism, lambda u, m: creds.get((u, m)))
    with pytest.raises(errors.SaslAuthenticationError):
        server.evaluate_response(client.evaluate_challenge(server.evaluate_response(client.initial_response())))


def test_plain_client_and_client_security_from_the_config():
    from pykbroker.config.config_def import ConfigException
    from pykbroker.security.client_security import PLAINTEXT, client_security
    from pykbroker.security.sasl_client import PlainSaslClient

    client = PlainSaslClient("admin", "pw")
    assert PlainSaslServer({"admin": "pw"}).evaluate_response(client.initial_response()) == b""
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="pw";'
    conf = {"listener.name.internal.plain.sasl.jaas.config": jaas, "sasl.mechanism.inter.broker.protocol": "PLAIN"}
    security = client_security(conf, "INTERNAL", "SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol")
    assert (security.sasl_mechanism, security.username, security.password) == ("PLAIN", "admin", "pw")
    assert security.ssl_context is None and "pw" not in repr(security)
    assert client_security(conf, "INTERNAL", "PLAINTEXT", "sasl.mechanism.inter.broker.protocol") is PLAINTEXT
    with pytest.raises(ConfigException, match="GSSAPI is not supported"):  # Kafka's default mechanism
        client_security({}, "INTERNAL", "SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol")
    no_password = {**conf, "listener.name.internal.plain.sasl.jaas.config": jaas.replace(' password="pw"', "")}
    with pytest.raises(ConfigException, match="username and password"):
        client_security(no_password, "INTERNAL", "SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol")
