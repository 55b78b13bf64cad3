"""SASL/PLAIN server (RFC 4616; Kafka's ``PlainSaslServer`` with ``PlainServerCallbackHandler``).

The client's one message is ``[authzid] NUL authcid NUL passwd``; the password is checked against the JAAS
options ``user_<name>="<password>"`` of the listener's PlainLoginModule (constant-time comparison). An
authorization id other than the user is refused, as Kafka does. Errors raise
:class:`pykbroker.protocol.errors.SaslAuthenticationError` with Kafka's message (never the password).
"""

from __future__ import annotations

import hmac

from pykbroker.protocol.errors import SaslAuthenticationError

MECHANISM = "PLAIN"


class PlainSaslServer:
    mechanism = MECHANISM

    def __init__(self, users: dict[str, str]):
        self.users = users
        self.complete = False
        self.authorization_id: str | None = None

    def evaluate_response(self, token: bytes) -> bytes:
        parts = bytes(token).split(b"\x00")
        if len(parts) != 3:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: expected 3 tokens, got " + str(len(parts)))
        authzid, username, password = (p.decode("utf-8", "replace") for p in parts)
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self.users.get(username)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self.authorization_id = username
        self.complete = True
        return b""


def users_from_jaas(options: dict[str, str]) -> dict[str, str]:
    """``{user: password}`` from a PlainLoginModule's ``user_<name>`` options."""
    return {k[5:]: v for k, v in options.items() if k.startswith("user_")}
