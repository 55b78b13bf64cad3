"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802 / RFC 7677; Kafka's ``ScramSaslServer``,
``ScramFormatter``, ``ScramCredential``).

The server keeps per user and mechanism a :class:`ScramCredential` (salt, StoredKey, ServerKey,
iterations) -- never the password. Exchange: client-first ``n,,n=<user>,r=<cnonce>`` -> server-first
``r=<cnonce><snonce>,s=<salt>,i=<iterations>`` -> client-final ``c=biws,r=<nonce>,p=<proof>`` (the proof is
checked: ``H(ClientSignature XOR proof) == StoredKey``) -> server-final ``v=<ServerSignature>``. Failures raise
:class:`pykbroker.protocol.errors.SaslAuthenticationError`; the authenticator answers Kafka's
``Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256``.
``credential_for(password, mechanism)`` derives a credential (PBKDF2, ``hashlib``), for the storage tool and
AlterUserScramCredentials.

Delegation tokens (KIP-48, Kafka's ``ScramExtensions.tokenAuthenticated``): a client-first message with the
extension ``tokenauth=true`` names a token id as user; its credential comes from ``token_lookup(token id,
mechanism)`` (the broker's DelegationTokenCache), the authorization id is the token's owner, the session is
:attr:`ScramSaslServer.token_authenticated` and :attr:`ScramSaslServer.credential_expiration_ms` is the token's
expiry (the session ends then, KIP-368). An unknown token fails with ``Token Authentication failed: Invalid tokenId``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from typing import NamedTuple

from pykbroker.protocol.errors import SaslAuthenticationError

MECHANISMS = {"SCRAM-SHA-256": ("sha256", 1), "SCRAM-SHA-512": ("sha512", 2)}  # name -> (hash, Kafka's type id)
MECHANISM_BY_TYPE = {t: name for name, (_, t) in MECHANISMS.items()}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096


class ScramCredential(NamedTuple):
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(hash_name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hash_name).digest()


def credential_for(password: str, mechanism: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None):
    """The ScramCredential of ``password`` (a random 32-byte salt unless given)."""
    hash_name = MECHANISMS[mechanism][0]
    salt = os.urandom(32) if salt is None else salt
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
    client_key = _hmac(hash_name, salted, b"Client Key")
    stored_key = hashlib.new(hash_name, client_key).digest()
    server_key = _hmac(hash_name, salted, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def _attributes(message: str) -> list[tuple[str, str]]:
    out = []
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise SaslAuthenticationError(f"Invalid SCRAM message attribute: {part[:20]!r}")
        out.append((part[0], part[2:]))
    return out


def _sasl_name(value: str) -> str:
    """RFC 5802 saslname decoding (``=2C`` -> ``,``, ``=3D`` -> ``=``)."""
    return value.replace("=2C", ",").replace("=3D", "=")


class ScramSaslServer:
    def __init__(self, mechanism: str, credential_lookup, token_lookup=None):
        """``credential_lookup(username, mechanism)`` -> ScramCredential or None; ``token_lookup(token id,
        mechanism)`` -> (ScramCredential, TokenInformation) or None (None: token logins fail)."""
        self.mechanism = mechanism
        self.hash_name = MECHANISMS[mechanism][0]
        self.lookup = credential_lookup
        self.token_lookup = token_lookup
        self.complete = False
        self.authorization_id: str | None = None
        #: the client logged in with a delegation token (``tokenauth=true``)
        self.token_authenticated = False
        #: a token login: the token's expiry (ms since the epoch), which bounds the session; else None
        self.credential_expiration_ms: int | None = None
        self._state = "RECEIVE_CLIENT_FIRST"

    def _invalid(self) -> SaslAuthenticationError:
        return SaslAuthenticationError(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism "
            + self.mechanism
        )

    def evaluate_response(self, token: bytes) -> bytes:
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SCRAM message: not UTF-8") from None
        if self._state == "RECEIVE_CLIENT_FIRST":
            return self._client_first(text)
        if self._state == "RECEIVE_CLIENT_FINAL":
            return self._client_final(text)
        raise SaslAuthenticationError("Unexpected SCRAM message after the exchange completed")

    def _client_first(self, text: str) -> bytes:
        # gs2-header: "n," or "y," then an optional "a=authzid", then ","; "p=" (channel binding) is refused.
        if not (text.startswith("n,") or text.startswith("y,")):
            raise SaslAuthenticationError("Invalid SCRAM client first message: channel binding is not supported")
        comma = text.find(",", 2)
        if comma < 0:
            raise SaslAuthenticationError("Invalid SCRAM client first message")
        authzid = text[2:comma]
        self._gs2_header = text[: comma + 1]
        self._client_first_bare = text[comma + 1 :]
        # n=<saslname>,r=<nonce>[,<extension key>=<value>...] (Kafka's ClientFirstMessage and ScramExtensions)
        parts = self._client_first_bare.split(",")
        attrs = dict(_attributes(",".join(parts[:2])))
        extensions = dict(p.partition("=")[::2] for p in parts[2:])
        if "n" not in attrs or "r" not in attrs or not attrs["r"]:
            raise SaslAuthenticationError("Invalid SCRAM client first message: user name or nonce missing")
        username = _sasl_name(attrs["n"])
        if authzid and _sasl_name(authzid[2:] if authzid.startswith("a=") else authzid) != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        authorization_id = username
        if extensions.get("tokenauth", "").lower() == "true":
            found = self.token_lookup(username, self.mechanism) if self.token_lookup is not None else None
            if found is None:
                raise SaslAuthenticationError(f"Token Authentication failed: Invalid tokenId : {username}")
            credential, token = found
            authorization_id = token.owner.partition(":")[2] or token.owner
            self.token_authenticated = True
            self.credential_expiration_ms = token.expiry_timestamp
        else:
            credential = self.lookup(username, self.mechanism)
        if credential is None:
            raise self._invalid()
        self._username = authorization_id
        self._credential = credential
        self._nonce = attrs["r"] + os.urandom(16).hex()  # alphanumeric, as Kafka's secureRandomString
        self._server_first = f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},i={credential.iterations}"
        self._state = "RECEIVE_CLIENT_FINAL"
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        attrs = _attributes(text)
        keys = [k for k, _ in attrs]
        if len(attrs) < 3 or keys[0] != "c" or keys[1] != "r" or keys[-1] != "p":
            raise SaslAuthenticationError("Invalid SCRAM client final message")
        values = dict(attrs)
        if not values["r"].endswith(self._nonce):  # Kafka's check (older librdkafka repeats its client nonce)
            raise SaslAuthenticationError("Invalid client nonce in the final client message.")
        try:
            binding = base64.b64decode(values["c"], validate=True)
            proof = base64.b64decode(values["p"], validate=True)
        except ValueError:
            raise SaslAuthenticationError("Invalid SCRAM client final message: bad base64") from None
        if binding != self._gs2_header.encode():
            raise SaslAuthenticationError("Invalid SCRAM channel binding")
        without_proof = text[: text.rindex(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        credential = self._credential
        signature = _hmac(self.hash_name, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise self._invalid()
        client_key = bytes(a ^ b for a, b in zip(signature, proof, strict=True))
        if not hmac.compare_digest(hashlib.new(self.hash_name, client_key).digest(), credential.stored_key):
            raise self._invalid()
        server_signature = _hmac(self.hash_name, credential.server_key, auth_message)
        self.authorization_id = self._username
        self.complete = True
        self._state = "COMPLETE"
        return b"v=" + base64.b64encode(server_signature)
