"""PKCS12 keystores and truststores (Kafka's ``ssl.keystore.type=PKCS12`` / ``ssl.truststore.type=PKCS12``),
generated here with ``cryptography``: the server and the client (inter-broker/controller link) contexts load
them and complete a mutual TLS handshake; a wrong password, a JKS store, a truststore without certificates are
ConfigExceptions; no key material is left in the temporary directory after a load."""

from __future__ import annotations

import os
import socket
import ssl
import tempfile
import threading

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from pykbroker.config.config_def import ConfigException
from pykbroker.security.client_security import client_security
from pykbroker.security.ssl_factory import keystore_certificate, server_context


def _write_keystore(path, cert: trustme.LeafCert, password: bytes) -> str:
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), None)
    chain = [x509.load_pem_x509_certificate(p.bytes()) for p in cert.cert_chain_pems]
    data = pkcs12.serialize_key_and_certificates(
        b"mykey",
        key,
        chain[0],
        chain[1:] or None,
        serialization.BestAvailableEncryption(password),  # type: ignore[arg-type]
    )
    path.write_bytes(data)
    return str(path)


def _write_truststore(path, ca: trustme.CA, password: bytes) -> str:
    cert = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    data = pkcs12.serialize_key_and_certificates(
        None, None, None, [cert], serialization.BestAvailableEncryption(password)
    )
    path.write_bytes(data)
    return str(path)


@pytest.fixture
def stores(tmp_path):
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost", common_name="broker-1")
    client = ca.issue_cert("client.example", common_name="broker-2")
    return {
        "server": _write_keystore(tmp_path / "server.p12", server, b"server-pass"),
        "client": _write_keystore(tmp_path / "client.p12", client, b"client-pass"),
        "trust": _write_truststore(tmp_path / "trust.p12", ca, b"trust-pass"),
    }


def _server_conf(stores) -> dict:
    return {
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": stores["server"],
        "ssl.keystore.password": "server-pass",
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": stores["trust"],
        "ssl.truststore.password": "trust-pass",
        "ssl.client.auth": "required",
    }


def _client_conf(stores) -> dict:  # the peer node: its own keystore, the same truststore, per listener
    return {
        "listener.name.internal.ssl.keystore.type": "PKCS12",
        "listener.name.internal.ssl.keystore.location": stores["client"],
        "listener.name.internal.ssl.keystore.password": "client-pass",
        "listener.name.internal.ssl.truststore.type": "PKCS12",
        "listener.name.internal.ssl.truststore.location": stores["trust"],
        "listener.name.internal.ssl.truststore.password": "trust-pass",
    }


def _handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext) -> tuple[dict, dict]:
    """A real TLS handshake over a socket pair: ``(certificate the client saw, certificate the server saw)``."""
    a, b = socket.socketpair()
    a.settimeout(10)
    b.settimeout(10)
    seen: dict = {}

    def serve() -> None:
        with server_ctx.wrap_socket(a, server_side=True) as s:
            seen["client"] = s.getpeercert()
            s.recv(1)

    t = threading.Thread(target=serve)
    t.start()
    with client_ctx.wrap_socket(b, server_hostname="localhost") as c:
        seen["server"] = c.getpeercert()
        c.sendall(b"x")
    t.join(10)
    return seen["server"], seen["client"]


def _cn(cert: dict) -> str:
    return next(v for rdn in cert["subject"] for k, v in rdn if k == "commonName")


def test_mutual_tls_between_a_pkcs12_listener_and_a_pkcs12_node_client(stores):
    server_ctx = server_context(_server_conf(stores), "INTERNAL")
    security = client_security(_client_conf(stores), "INTERNAL", "SSL", "sasl.mechanism.inter.broker.protocol")
    assert security.ssl_context is not None
    server_cert, client_cert = _handshake(server_ctx, security.ssl_context)
    assert _cn(server_cert) == "broker-1" and _cn(client_cert) == "broker-2"
    cert = keystore_certificate(_server_conf(stores), "INTERNAL")
    assert cert is not None and cert.subject.startswith("CN=broker-1")
    assert ("DNSName", "localhost") in cert.subject_alt_names


def test_no_key_material_is_left_on_disk(stores, tmp_path, monkeypatch):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    server_context(_server_conf(stores), "INTERNAL")
    assert os.listdir(scratch) == []


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"ssl.keystore.password": "wrong"}, "Failed to load SSL keystore .* of type PKCS12 .*password was incorrect"),
        (
            {"ssl.truststore.password": "wrong"},
            "Failed to load SSL truststore .* of type PKCS12 .*password was incorrect",
        ),
        ({"ssl.keystore.location": "/nonexistent.p12"}, "Failed to load SSL keystore /nonexistent.p12"),
        ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type JKS of listener INTERNAL is not supported .*PKCS12"),
        ({"ssl.truststore.type": "jks"}, "ssl.truststore.type JKS of listener INTERNAL is not supported"),
    ],
)
def test_bad_stores_are_config_exceptions(stores, overrides, message):
    with pytest.raises(ConfigException, match=message):
        server_context({**_server_conf(stores), **overrides}, "INTERNAL")


def test_a_jks_truststore_type_without_a_truststore_is_ignored(stores):
    conf = {k: v for k, v in _server_conf(stores).items() if not k.startswith("ssl.truststore")}
    server_context({**conf, "ssl.client.auth": "none", "ssl.truststore.type": "JKS"}, "INTERNAL")


def test_a_truststore_is_not_a_keystore(stores):
    conf = {**_server_conf(stores), "ssl.keystore.location": stores["trust"], "ssl.keystore.password": "trust-pass"}
    with pytest.raises(ConfigException, match="holds no private key entry"):
        server_context(conf, "INTERNAL")
