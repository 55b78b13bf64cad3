"""KIP-368 in the SaslServerAuthenticator: the session lifetime (connections.max.reauth.ms per listener and
mechanism, a credential's expiry), and a re-authentication that must keep its mechanism and principal."""

from __future__ import annotations

import time

import pytest

from pykbroker import protocol
from pykbroker.config.config_def import ConfigException
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.security.channel_builders import max_reauth_ms
from pykbroker.security.plain import PlainSaslServer
from pykbroker.security.sasl_server_authenticator import RESPOND, SaslServerAuthenticator


def _authenticator(reauth=None, server_factory=None) -> SaslServerAuthenticator:
    factory = server_factory or (lambda _m: PlainSaslServer({"alice": "a", "bob": "b"}))
    return SaslServerAuthenticator(["PLAIN", "SCRAM-SHA-256"], factory, reauth)


def _login(auth: SaslServerAuthenticator, user: str, password: str, mechanism="PLAIN", version=1) -> dict:
    action, frame, _ = auth.handle(memoryview(protocol.encode_request(ApiKeys.SASL_HANDSHAKE, 1, 1, "c", {
        "mechanism": mechanism})[4:]))  # fmt: skip
    assert action == RESPOND
    token = b"\0" + user.encode() + b"\0" + password.encode()
    request = protocol.encode_request(ApiKeys.SASL_AUTHENTICATE, version, 2, "c", {"auth_bytes": token})
    action, frame, _ = auth.handle(memoryview(request[4:]))
    assert action == RESPOND
    header = 9 if version >= 2 else 8  # size, correlation id (and v2+: tagged fields)
    return protocol.decode_response(ApiKeys.SASL_AUTHENTICATE, version, bytes(frame)[header:])  # type: ignore[arg-type]


def test_session_lifetime_from_the_mechanism_setting():
    auth = _authenticator({"PLAIN": 2000})
    answer = _login(auth, "alice", "a")
    assert answer["error_code"] == 0 and answer["session_lifetime_ms"] == 2000
    assert auth.complete and auth.session_lifetime_ms == 2000
    off = _authenticator({"PLAIN": 0})
    assert _login(off, "alice", "a")["session_lifetime_ms"] == 0 and off.session_lifetime_ms is None


def test_a_credential_expiry_shortens_the_session():
    class Expiring(PlainSaslServer):
        credential_expiration_ms = int(time.time() * 1000) + 1000

    auth = _authenticator({"PLAIN": 60_000}, lambda _m: Expiring({"alice": "a"}))
    assert 0 < _login(auth, "alice", "a")["session_lifetime_ms"] <= 1000
    auth = _authenticator(None, lambda _m: Expiring({"alice": "a"}))
    assert 0 < _login(auth, "alice", "a")["session_lifetime_ms"] <= 1000


def test_reauthentication_keeps_principal_and_mechanism():
    same = _authenticator({"PLAIN": 2000})
    same.reauthenticate("PLAIN", "User:alice")
    assert _login(same, "alice", "a")["error_code"] == 0 and same.complete and same.reauthenticating
    other_user = _authenticator({"PLAIN": 2000})
    other_user.reauthenticate("PLAIN", "User:alice")
    answer = _login(other_user, "bob", "b")
    assert answer["error_code"] == errors.SASL_AUTHENTICATION_FAILED and not other_user.complete
    assert answer["error_message"] == "Cannot change principals during re-authentication from User.alice: User.bob"
    other_mechanism = _authenticator({"PLAIN": 2000})
    other_mechanism.reauthenticate("SCRAM-SHA-256", "User:alice")
    answer = _login(other_mechanism, "alice", "a")
    assert answer["error_code"] == errors.SASL_AUTHENTICATION_FAILED
    assert "not supported for re-authentication of mechanism 'SCRAM-SHA-256'" in answer["error_message"]


def test_max_reauth_ms_per_listener_and_mechanism():
    originals = {
        "connections.max.reauth.ms": "1000",
        "listener.name.sasl_ssl.connections.max.reauth.ms": "2000",
        "listener.name.sasl_ssl.scram-sha-512.connections.max.reauth.ms": 3000,
    }
    assert max_reauth_ms(originals, "SASL_SSL", "SCRAM-SHA-512") == 3000
    assert max_reauth_ms(originals, "SASL_SSL", "PLAIN") == 2000
    assert max_reauth_ms(originals, "SASL_PLAINTEXT", "PLAIN") == 1000
    assert max_reauth_ms({}, "SASL_PLAINTEXT", "PLAIN") == 0
    with pytest.raises(ConfigException, match="connections.max.reauth.ms"):
        max_reauth_ms({"connections.max.reauth.ms": "soon"}, "SASL_PLAINTEXT", "PLAIN")
