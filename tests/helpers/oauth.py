"""A small OAuth/OIDC identity provider on 127.0.0.1 for SASL/OAUTHBEARER tests and benches, and a raw SASL client.

:class:`IdentityProvider` (``http.server`` in a daemon thread; RSA keys made with ``cryptography``) serves
``GET /jwks`` (the public keys, ``kid`` k1, more with :meth:`IdentityProvider.rotate`) and ``POST /token`` (OAuth
client credentials: HTTP Basic ``client_id:client_secret`` of :attr:`IdentityProvider.clients`, answered with a
signed JWT whose ``sub`` is the client id, as confluent-kafka's ``sasl.oauthbearer.method=oidc`` expects).
:meth:`IdentityProvider.mint` makes tokens with any claims, key or kid for the refusal tests.

:func:`sasl_authenticate` runs SaslHandshake v1 + SaslAuthenticate v2 rounds on a fresh socket and returns the
decoded SaslAuthenticate responses (for OAUTHBEARER: the error challenge, then the client's ``\\x01`` and the
failure, as a real client does).
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from pykbroker.protocol import decode_response, encode_request
from pykbroker.protocol.api_keys import ApiKeys

AUDIENCE = "kafka"


def _new_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class IdpRequestHandler(BaseHTTPRequestHandler):
    """``GET /jwks`` and ``POST /token`` of the server's :class:`IdentityProvider` (``server.idp``)."""

    def log_message(self, *args) -> None:  # quiet
        pass

    def _answer(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        idp = self.server.idp  # type: ignore[attr-defined]
        idp.requests.append(f"GET {self.path}")
        if self.path != "/jwks":
            return self._answer(404, {"error": "not_found"})
        self._answer(200, idp.jwks())

    def do_POST(self) -> None:
        idp = self.server.idp  # type: ignore[attr-defined]
        idp.requests.append(f"POST {self.path}")
        form = parse_qs(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode())
        basic = (self.headers.get("Authorization") or "Basic ").split(" ", 1)[1]
        user, _, secret = base64.b64decode(basic or b"").decode().partition(":")
        if self.path != "/token" or form.get("grant_type") != ["client_credentials"]:
            return self._answer(400, {"error": "unsupported_grant_type"})
        if idp.clients.get(user) != secret:
            return self._answer(401, {"error": "invalid_client"})
        token = idp.mint(sub=user, scope=" ".join(form.get("scope", [])) or None)
        self._answer(200, {"access_token": token, "token_type": "bearer", "expires_in": 300})


class IdentityProvider:
    def __init__(self, clients: dict[str, str] | None = None):
        self.clients = dict(clients or {})
        self.keys = {"k1": _new_key()}
        self.requests: list[str] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), IdpRequestHandler)
        self.server.idp = self  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.issuer = self.url
        self._thread = threading.Thread(target=self.server.serve_forever, name="test-idp", daemon=True)
        self._thread.start()

    def jwks(self) -> dict:
        keys = []
        for kid, key in self.keys.items():
            public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
            keys.append({**public, "kid": kid, "use": "sig", "alg": "RS256"})
        return {"keys": keys}

    def rotate(self, kid: str) -> None:
        """Publish a new key ``kid`` in the JWKS (the old ones stay)."""
        self.keys[kid] = _new_key()

    def mint(self, sub: str = "alice", kid: str = "k1", key=None, lifetime_s: int = 300, **claims) -> str:
        """A signed JWT (RS256) for ``sub``; ``claims`` override aud, iss, iat, exp or add others (None drops)."""
        now = int(time.time())
        body = {"sub": sub, "aud": AUDIENCE, "iss": self.issuer, "iat": now, "exp": now + lifetime_s, **claims}
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, key or self.keys[kid], algorithm="RS256", headers={"kid": kid})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def unsecured_token(sub: str = "alice", lifetime_s: int = 300, **claims) -> str:
    """An unsigned JWS (``alg: none``), as librdkafka's ``sasl.oauthbearer.config=principal=...`` makes."""
    now = int(time.time())

    def b64(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{b64({'alg': 'none'})}.{b64({'sub': sub, 'iat': now, 'exp': now + lifetime_s, **claims})}."


def initial_response(token: str) -> bytes:
    """RFC 7628 client initial response."""
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def _frame(sock: socket.socket) -> bytes:
    def read(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by the broker")
            out += chunk
        return out

    return read(struct.unpack(">i", read(4))[0])


def sasl_authenticate(port: int, mechanism: str, tokens: list[bytes], timeout: float = 10.0) -> list[dict]:
    """Handshake ``mechanism`` then send ``tokens`` one SaslAuthenticate each, stopping at an error; for
    OAUTHBEARER an error challenge (a non-empty answer) is followed by the client's ``\\x01``."""
    out: list[dict] = []
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(encode_request(ApiKeys.SASL_HANDSHAKE, 1, 1, "raw", {"mechanism": mechanism}))
        handshake = decode_response(ApiKeys.SASL_HANDSHAKE, 1, _frame(s)[4:])
        assert handshake["error_code"] == 0, handshake
        pending = list(tokens)
        correlation_id = 2
        while pending:
            s.sendall(
                encode_request(ApiKeys.SASL_AUTHENTICATE, 2, correlation_id, "raw", {"auth_bytes": pending.pop(0)})
            )
            response = decode_response(ApiKeys.SASL_AUTHENTICATE, 2, _frame(s)[5:])
            out.append(response)
            correlation_id += 1
            if response["error_code"]:
                break
            if mechanism == "OAUTHBEARER" and response["auth_bytes"] and not pending:
                pending.append(b"\x01")
    return out
