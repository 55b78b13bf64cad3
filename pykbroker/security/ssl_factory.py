"""TLS contexts and certificate principals from the broker config (Kafka's ``DefaultSslEngineFactory`` and
``SslPrincipalMapper``).

Keys, each also per listener as ``listener.name.<listener>.<key>`` (the prefixed one wins):

* ``ssl.keystore.type`` PEM (the default when unset) or PKCS12; JKS is refused (ConfigException: convert it
  with ``keytool -importkeystore -deststoretype PKCS12``). PEM: the key and certificate chain come from
  ``ssl.keystore.location`` (one PEM file holding both) or inline ``ssl.keystore.key`` +
  ``ssl.keystore.certificate.chain``; ``ssl.key.password`` decrypts the key. PKCS12: ``ssl.keystore.location``
  opened with ``ssl.keystore.password`` (``ssl.key.password`` when that is unset), its private key entry and
  certificate chain are used;
* ``ssl.truststore.type`` PEM with ``ssl.truststore.location`` or inline ``ssl.truststore.certificates``, or
  PKCS12 with ``ssl.truststore.location`` and ``ssl.truststore.password`` (every certificate in it is trusted);
* ``ssl.client.auth`` none | requested | required;
* ``ssl.enabled.protocols`` (TLSv1.2,TLSv1.3 by default) and ``ssl.cipher.suites`` (OpenSSL names);
* ``ssl.principal.mapping.rules``: ``DEFAULT`` (the certificate's RFC 2253 distinguished name) or
  ``RULE:<regex>/<replacement>/[LU]`` rules, first match wins, as Kafka's SslPrincipalMapper.

The principal of a TLS connection is ``User:<mapped name>``, or ``User:ANONYMOUS`` without a client
certificate. Inline PEM material is written to a private temporary directory (``ssl`` loads files only).

A PKCS12 keystore is read with ``cryptography`` (``serialization.pkcs12``); since ``ssl.SSLContext`` loads a key
from a file only, the key is re-encrypted with a one-time random password, written with its chain to a 0600
temporary file, loaded with that password and the file is removed at once (no key material stays on disk, and
what is briefly there is encrypted). A PKCS12 truststore's certificates are handed over in memory (``cadata``).
"""

from __future__ import annotations

import os
import re
import secrets
import ssl
import tempfile
from typing import TYPE_CHECKING, NamedTuple

from pykbroker.config.config_def import ConfigException

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization.pkcs12 import PKCS12PrivateKeyTypes

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
# RFC 2253 short names of the attributes Python reports
_DN_NAMES = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "countryName": "C",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _get(originals: dict, listener: str, key: str, default=None):
    value = originals.get(f"listener.name.{listener.lower()}.{key}")
    return value if value is not None else originals.get(key, default)


def _materialize(text: str, name: str) -> str:
    directory = tempfile.mkdtemp(prefix="pykbroker-ssl-")
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def _protocols_and_ciphers(ctx: ssl.SSLContext, originals: dict, listener: str) -> None:
    protocols = [
        p.strip() for p in str(_get(originals, listener, "ssl.enabled.protocols", "TLSv1.2,TLSv1.3")).split(",")
    ]
    versions = [_PROTOCOLS[p] for p in protocols if p in _PROTOCOLS]
    if not versions:
        raise ConfigException(f"ssl.enabled.protocols of listener {listener} has no supported protocol: {protocols}")
    ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)
    ciphers = _get(originals, listener, "ssl.cipher.suites")
    if ciphers:
        try:
            ctx.set_ciphers(":".join(c.strip() for c in str(ciphers).split(",")))
        except ssl.SSLError as e:
            raise ConfigException(f"Invalid ssl.cipher.suites of listener {listener}: {e}") from None


_STORE_TYPES = ("PEM", "PKCS12")


def _store_type(originals: dict, listener: str, key: str) -> str:
    """``ssl.keystore.type`` / ``ssl.truststore.type`` of the listener (PEM when unset); ConfigException for
    JKS and other types."""
    store_type = str(_get(originals, listener, key) or "PEM").strip().upper()
    if store_type not in _STORE_TYPES:
        raise ConfigException(
            f"{key} {store_type} of listener {listener} is not supported by pykbroker (use PEM or PKCS12; "
            "a JKS store converts with keytool -importkeystore -deststoretype PKCS12)"
        )
    return store_type


def _check_keystore_type(originals: dict, listener: str) -> None:
    """The keystore type must be PEM or PKCS12; so must the truststore's when a truststore file is set (a
    Kafka config may carry its default ``ssl.truststore.type=JKS`` without any truststore)."""
    _store_type(originals, listener, "ssl.keystore.type")
    if _get(originals, listener, "ssl.truststore.location") is not None:
        _store_type(originals, listener, "ssl.truststore.type")


def _read_pkcs12(originals: dict, listener: str, kind: str, password):
    """The parsed PKCS12 ``kind`` store (keystore or truststore) at ``ssl.<kind>.location``, opened with
    ``password``; ConfigException (Kafka's "Failed to load SSL keystore ... of type PKCS12") when it cannot be
    read, the password is wrong or the file is not PKCS12."""
    from cryptography.hazmat.primitives.serialization import pkcs12

    location = _get(originals, listener, f"ssl.{kind}.location")
    if location is None:
        raise ConfigException(f"Listener {listener} has ssl.{kind}.type PKCS12 but no ssl.{kind}.location")
    prefix = f"Failed to load SSL {kind} {location} of type PKCS12 of listener {listener}"
    try:
        with open(str(location), "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConfigException(f"{prefix}: {e.strerror or e}") from None
    try:
        return pkcs12.load_pkcs12(data, str(password).encode() if password else None)
    except ValueError:
        raise ConfigException(f"{prefix}: {kind} password was incorrect or the file is not PKCS12") from None


def _pkcs12_keystore(
    originals: dict, listener: str
) -> tuple[PKCS12PrivateKeyTypes, x509.Certificate, list[x509.Certificate]]:
    """``(private key, certificate, chain)`` of the listener's PKCS12 keystore."""
    password = _get(originals, listener, "ssl.keystore.password") or _get(originals, listener, "ssl.key.password")
    store = _read_pkcs12(originals, listener, "keystore", password)
    if store.key is None or store.cert is None:
        raise ConfigException(
            f"The SSL keystore {_get(originals, listener, 'ssl.keystore.location')} of listener {listener} "
            "holds no private key entry"
        )
    return store.key, store.cert.certificate, [c.certificate for c in store.additional_certs]


def _load_pkcs12_keystore(ctx: ssl.SSLContext, originals: dict, listener: str) -> None:
    from cryptography.hazmat.primitives import serialization

    key, certificate, chain = _pkcs12_keystore(originals, listener)
    one_time = secrets.token_bytes(32)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(one_time),
    )
    pem += b"".join(c.public_bytes(serialization.Encoding.PEM) for c in (certificate, *chain))
    fd, path = tempfile.mkstemp(prefix="pykbroker-keystore-", suffix=".pem")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(path, password=one_time)
    except (OSError, ssl.SSLError) as e:
        raise ConfigException(f"Failed to load the SSL keystore of listener {listener}: {e}") from None
    finally:
        os.unlink(path)


def _keystore_location(originals: dict, listener: str) -> str | None:
    """The PEM file holding the listener's key and certificate chain (inline PEM is written to a private
    temporary file first), or None when the listener has no keystore."""
    location = _get(originals, listener, "ssl.keystore.location")
    if location is None:
        key, chain = (
            _get(originals, listener, "ssl.keystore.key"),
            _get(originals, listener, "ssl.keystore.certificate.chain"),
        )
        if key is None or chain is None:
            return None
        location = _materialize(str(chain).strip() + "\n" + str(key).strip() + "\n", "keystore.pem")
    return str(location)


def _load_keystore(ctx: ssl.SSLContext, originals: dict, listener: str, required: bool) -> None:
    if _store_type(originals, listener, "ssl.keystore.type") == "PKCS12":
        if required or _get(originals, listener, "ssl.keystore.location") is not None:
            _load_pkcs12_keystore(ctx, originals, listener)
        return
    password = _get(originals, listener, "ssl.key.password") or _get(originals, listener, "ssl.keystore.password")
    location = _keystore_location(originals, listener)
    if location is None:
        if not required:
            return
        raise ConfigException(
            f"Listener {listener} needs ssl.keystore.location, or ssl.keystore.key and ssl.keystore.certificate.chain"
        )
    try:
        ctx.load_cert_chain(str(location), password=str(password) if password else None)
    except (OSError, ssl.SSLError) as e:
        raise ConfigException(f"Failed to load the SSL keystore of listener {listener}: {e}") from None


def _load_truststore(ctx: ssl.SSLContext, originals: dict, listener: str) -> bool:
    """Loads the listener's PEM or PKCS12 truststore; False when none is configured."""
    truststore = _get(originals, listener, "ssl.truststore.location")
    certificates = _get(originals, listener, "ssl.truststore.certificates")
    if truststore is not None and _store_type(originals, listener, "ssl.truststore.type") == "PKCS12":
        from cryptography.hazmat.primitives import serialization

        store = _read_pkcs12(originals, listener, "truststore", _get(originals, listener, "ssl.truststore.password"))
        trusted = [c.certificate for c in ([store.cert] if store.cert else []) + list(store.additional_certs)]
        if not trusted:
            raise ConfigException(f"The SSL truststore {truststore} of listener {listener} holds no certificate")
        certificates = "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in trusted)
        truststore = None
    try:
        if truststore is not None:
            ctx.load_verify_locations(cafile=str(truststore))
        elif certificates is not None:
            ctx.load_verify_locations(cadata=str(certificates))
        else:
            return False
    except (OSError, ssl.SSLError) as e:
        raise ConfigException(f"Failed to load the SSL truststore of listener {listener}: {e}") from None
    return True


def server_context(originals: dict, listener: str) -> ssl.SSLContext:
    """The SSLContext of a TLS listener; ConfigException for missing or unsupported material."""
    _check_keystore_type(originals, listener)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols_and_ciphers(ctx, originals, listener)
    _load_keystore(ctx, originals, listener, required=True)
    _load_truststore(ctx, originals, listener)
    client_auth = str(_get(originals, listener, "ssl.client.auth", "none")).lower()
    if client_auth not in ("none", "requested", "required"):
        raise ConfigException(f"Invalid value {client_auth} for configuration ssl.client.auth")
    ctx.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}[
        client_auth
    ]
    return ctx


def client_context(originals: dict, listener: str) -> ssl.SSLContext:
    """The SSLContext this node uses to connect to ``listener`` of other nodes (Kafka builds the inter-broker
    and controller clients from the same listener's ``ssl.*`` keys): the listener's truststore verifies the
    peer (the system's CAs when none is set), the keystore, when there is one, is presented as the client
    certificate, and ``ssl.endpoint.identification.algorithm`` (``https`` by default, empty to disable)
    checks the peer's host name."""
    _check_keystore_type(originals, listener)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _protocols_and_ciphers(ctx, originals, listener)
    _load_keystore(ctx, originals, listener, required=False)
    if not _load_truststore(ctx, originals, listener):
        ctx.load_default_certs()
    algorithm = str(_get(originals, listener, "ssl.endpoint.identification.algorithm", "https") or "").strip()
    ctx.check_hostname = algorithm.lower() == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


class KeystoreCertificate(NamedTuple):
    """The identity of a listener's own certificate that a keystore update must keep (Kafka's
    ``SslFactory.CertificateEntries``): ``subject`` as Java's ``X500Principal.getName()`` (RFC 2253/4514,
    most specific RDN first) and ``subject_alt_names`` as ``(type, value)`` pairs."""

    subject: str
    subject_alt_names: frozenset[tuple[str, str]]


def keystore_certificate(originals: dict, listener: str) -> KeystoreCertificate | None:
    """The listener's own (first) certificate, read with ``cryptography`` (PEM or PKCS12 keystore), or None
    without a keystore. ConfigException when the file cannot be read or holds no certificate."""
    from cryptography import x509

    if _store_type(originals, listener, "ssl.keystore.type") == "PKCS12":
        if _get(originals, listener, "ssl.keystore.location") is None:
            return None
        certificate = _pkcs12_keystore(originals, listener)[1]
    else:
        location = _keystore_location(originals, listener)
        if location is None:
            return None
        try:
            with open(location, "rb") as f:
                certificate = x509.load_pem_x509_certificates(f.read())[0]
        except (OSError, ValueError) as e:
            raise ConfigException(f"Failed to load the SSL keystore of listener {listener}: {e}") from None
    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        names = x509.SubjectAlternativeName([])
    return KeystoreCertificate(
        certificate.subject.rfc4514_string(), frozenset((type(n).__name__, str(n.value)) for n in names)
    )


def check_compatible_keystores(
    new: KeystoreCertificate | None, old: KeystoreCertificate | None, allow_dn_changes: bool, allow_san_changes: bool
) -> None:
    """Kafka's ``SslFactory.CertificateEntries.ensureCompatible`` for a keystore replaced at run time: the new
    certificate keeps the subject (unless ``ssl.allow.dn.changes``) and every subject alternative name
    (unless ``ssl.allow.san.changes``) of the old one. Raises ConfigException with Kafka's message."""
    if new is None or old is None:
        return
    if not allow_dn_changes and new.subject.lower() != old.subject.lower():
        raise ConfigException(
            f"Keystore DistinguishedName does not match:  existing={{alias=mykey, DN={old.subject}}}, "
            f"new={{alias=mykey, DN={new.subject}}}"
        )
    if not allow_san_changes and not old.subject_alt_names <= new.subject_alt_names:
        raise ConfigException(
            "Keystore SubjectAltNames do not match:  "
            f"existing={{alias=mykey, SAN={sorted(old.subject_alt_names)}}}, "
            f"new={{alias=mykey, SAN={sorted(new.subject_alt_names)}}}"
        )


def distinguished_name(certificate: dict) -> str:
    """The subject of a ``getpeercert()`` dict in RFC 2253 order (most specific RDN first), as Java's
    ``X500Principal.getName()``: ``CN=alice,OU=eng,O=example,C=US``."""
    rdns = []
    for rdn in certificate.get("subject", ()):
        parts = []
        for name, value in rdn:
            escaped = re.sub(r'([,+"\\<>;])', r"\\\1", value)
            parts.append(f"{_DN_NAMES.get(name, name)}={escaped}")
        rdns.append("+".join(parts))
    return ",".join(reversed(rdns))


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules`` (Kafka's syntax)."""

    _RULE = re.compile(r"RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?)")

    def __init__(self, rules: str = "DEFAULT"):
        self.rules: list[tuple[re.Pattern, str, str] | None] = []
        text = rules.strip()
        while text:
            text = text.lstrip(", \n")
            if not text:
                break
            if text.startswith("DEFAULT"):
                self.rules.append(None)
                text = text[len("DEFAULT") :]
                continue
            m = self._RULE.match(text)
            if m is None:
                raise ConfigException(f"Invalid rule: {text}")
            replacement = re.sub(r"\$(\d)", r"\\\1", m.group(3))
            self.rules.append((re.compile(m.group(1)), replacement, m.group(5)))
            text = text[m.end() :]

    def name(self, dn: str) -> str:
        for rule in self.rules:
            if rule is None:
                return dn
            pattern, replacement, case = rule
            if pattern.fullmatch(dn):
                result = pattern.sub(replacement, dn, count=1)
                return result.lower() if case == "L" else result.upper() if case == "U" else result
        raise ConfigException(f"No rules apply to {dn}, rules {self.rules}")

    def principal(self, certificate: dict | None) -> str:
        if not certificate:
            return "User:ANONYMOUS"
        return f"User:{self.name(distinguished_name(certificate))}"
