"""Client side of SASL PLAIN and SCRAM (Kafka's ``PlainSaslClient`` / ``ScramSaslClient``), used by the broker's
own connections to other nodes (replica fetchers, the controller channel, Raft, transaction markers).

A client is a small state machine: ``initial_response()`` gives the first token (bytes);
``evaluate_challenge(token)`` takes the server's answer and returns the next token, or ``None`` once the
exchange is complete (``complete`` is then True). SCRAM checks the server's signature in the last step, so a
server that does not know the password cannot pose as the cluster. Failures raise
:class:`pykbroker.protocol.errors.SaslAuthenticationError`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

from pykbroker.protocol.errors import SaslAuthenticationError
from pykbroker.security.scram import MECHANISMS as SCRAM_MECHANISMS


class PlainSaslClient:
    """RFC 4616: one message ``\\0<user>\\0<password>``; the server answers with an empty token."""

    mechanism = "PLAIN"

    def __init__(self, username: str, password: str):
        self._token = b"\0" + username.encode() + b"\0" + password.encode()
        self.complete = False

    def initial_response(self) -> bytes:
        return self._token

    def evaluate_challenge(self, token: bytes) -> bytes | None:
        self.complete = True
        return None


def _sasl_name(value: str) -> str:
    return value.replace("=", "=3D").replace(",", "=2C")


def _hmac(hash_name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hash_name).digest()


class ScramSaslClient:
    """RFC 5802 client: client-first -> (server-first) client-final -> (server-final) signature check.
    ``extensions`` are appended to the client-first message (Kafka's ``ScramExtensions``): ``{"tokenauth":
    "true"}`` logs in with a delegation token (user name: the token id, password: its base64 hmac; KIP-48)."""

    def __init__(
        self,
        mechanism: str,
        username: str,
        password: str,
        nonce: str | None = None,
        extensions: dict[str, str] | None = None,
    ):
        if mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"Unsupported SCRAM mechanism {mechanism}")
        self.mechanism = mechanism
        self.hash_name = SCRAM_MECHANISMS[mechanism][0]
        self.password = password
        self.complete = False
        self._nonce = nonce or os.urandom(16).hex()
        self._client_first_bare = f"n={_sasl_name(username)},r={self._nonce}"
        for key, value in (extensions or {}).items():
            self._client_first_bare += f",{key}={value}"
        self._state = "SEND_CLIENT_FIRST"
        self._server_signature = b""

    def initial_response(self) -> bytes:
        self._state = "RECEIVE_SERVER_FIRST"
        return ("n,," + self._client_first_bare).encode()

    def evaluate_challenge(self, token: bytes) -> bytes | None:
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SCRAM server message: not UTF-8") from None
        if self._state == "RECEIVE_SERVER_FIRST":
            return self._server_first(text)
        if self._state == "RECEIVE_SERVER_FINAL":
            self._server_final(text)
            return None  # nothing more to send
        raise SaslAuthenticationError(f"Unexpected SCRAM server message in state {self._state}")

    def _server_first(self, text: str) -> bytes:
        attrs = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if not nonce.startswith(self._nonce) or salt is None or not iterations.isdigit():
            raise SaslAuthenticationError("Invalid SCRAM server first message")
        iterations_n = int(iterations)
        if not 1 <= iterations_n <= 1_000_000:
            raise SaslAuthenticationError(f"Invalid SCRAM iteration count {iterations_n}")
        h = self.hash_name
        salted = hashlib.pbkdf2_hmac(h, self.password.encode(), base64.b64decode(salt), iterations_n)
        client_key = _hmac(h, salted, b"Client Key")
        stored_key = hashlib.new(h, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        signature = _hmac(h, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = _hmac(h, _hmac(h, salted, b"Server Key"), auth_message)
        self._state = "RECEIVE_SERVER_FINAL"
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _server_final(self, text: str) -> None:
        if text.startswith("e="):
            raise SaslAuthenticationError(f"SCRAM authentication failed: {text[2:]}")
        if not text.startswith("v=") or not hmac.compare_digest(
            base64.b64decode(text[2:].split(",")[0]), self._server_signature
        ):
            raise SaslAuthenticationError("Invalid SCRAM server signature")
        self._state = "COMPLETE"
        self.complete = True


def sasl_client(mechanism: str, username: str, password: str, token_auth: bool = False):
    """A fresh client of ``mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512); ValueError for others.
    ``token_auth``: a SCRAM delegation token login (the ``tokenauth=true`` extension)."""
    if mechanism == "PLAIN":
        return PlainSaslClient(username, password)
    return ScramSaslClient(mechanism, username, password, extensions={"tokenauth": "true"} if token_auth else None)
