"""keystore_certificate / check_compatible_keystores: what a dynamic keystore update must keep (Kafka's
SslFactory.CertificateEntries.ensureCompatible), read from real PEM certificates made by trustme."""

from __future__ import annotations

import pytest
import trustme

from pykbroker.config.config_def import ConfigException
from pykbroker.security.ssl_factory import check_compatible_keystores, keystore_certificate


def keystore(tmp_path, name: str, *identities: str, common_name: str | None = None):
    cert = trustme.CA().issue_cert(
        *identities, common_name=common_name, organization_name="pyk", organization_unit_name="brokers"
    )
    path = tmp_path / f"{name}.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(path))
    return keystore_certificate({"ssl.keystore.location": str(path)}, "SSL")


def test_subject_and_alternative_names_are_read(tmp_path):
    cert = keystore(tmp_path, "a", "localhost", "127.0.0.1", common_name="broker-1")
    assert cert is not None and cert.subject.startswith("CN=broker-1")
    assert cert.subject_alt_names == {("DNSName", "localhost"), ("IPAddress", "127.0.0.1")}
    assert keystore_certificate({}, "SSL") is None


def test_an_update_keeps_the_subject_and_every_alternative_name(tmp_path):
    old = keystore(tmp_path, "old", "localhost", common_name="broker-1")
    wider = keystore(tmp_path, "wider", "localhost", "broker.example", common_name="broker-1")
    check_compatible_keystores(wider, old, False, False)  # more names: fine
    narrower = keystore(tmp_path, "narrower", "broker.example", common_name="broker-1")
    with pytest.raises(ConfigException, match="Keystore SubjectAltNames do not match"):
        check_compatible_keystores(narrower, old, False, False)
    check_compatible_keystores(narrower, old, False, True)  # ssl.allow.san.changes
    renamed = keystore(tmp_path, "renamed", "localhost", common_name="broker-2")
    with pytest.raises(ConfigException, match="Keystore DistinguishedName does not match"):
        check_compatible_keystores(renamed, old, False, False)
    check_compatible_keystores(renamed, old, True, False)  # ssl.allow.dn.changes


def test_a_file_without_a_certificate_is_a_config_error(tmp_path):
    path = tmp_path / "empty.pem"
    path.write_text("not a certificate\n")
    with pytest.raises(ConfigException, match="Failed to load the SSL keystore of listener SSL"):
        keystore_certificate({"ssl.keystore.location": str(path)}, "SSL")
