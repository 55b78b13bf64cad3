"""Cost of a SASL login per mechanism: PLAIN, SCRAM-SHA-512, OAUTHBEARER with an unsecured JWS and OAUTHBEARER
with an OIDC token (RS256, checked against a JWKS), on one broker.

Each sample is one new TCP connection from a raw client: connect, SaslHandshake v1, the SaslAuthenticate rounds of
the mechanism (SCRAM: two, the client checking the server's signature; the others: one), until the broker
answers the last one. The mechanisms take turns in every round so that they share the machine's state; the
OAUTHBEARER tokens are made once beforehand (clients reuse theirs until it nears expiry). Prints the median and
p90 per mechanism in ms.

The broker (a subprocess, tests/helpers/broker.py) has a SASL_PLAINTEXT listener with PLAIN, SCRAM-SHA-512 and
unsecured OAUTHBEARER, and an OIDC listener whose keys come from the identity provider of tests/helpers/oauth.py.

    .venv/bin/python bench/sasl_handshake.py              # 200 logins per mechanism
    .venv/bin/python bench/sasl_handshake.py --samples 500
"""

from __future__ import annotations

import argparse
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from pykbroker.protocol import decode_response, encode_request
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.security.sasl_client import PlainSaslClient, ScramSaslClient
from tests.helpers.broker import BrokerProcess
from tests.helpers.oauth import AUDIENCE, IdentityProvider, initial_response, unsecured_token

JAAS_PLAIN = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
JAAS_OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
OIDC_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


def _frame(sock: socket.socket) -> bytes:
    def read(n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by the broker")
            out += chunk
        return bytes(out)

    return read(struct.unpack(">i", read(4))[0])


class OneShot:
    """An OAUTHBEARER client with a ready token: one message, an empty answer."""

    def __init__(self, token: str):
        self.message = initial_response(token)
        self.complete = False

    def initial_response(self) -> bytes:
        return self.message

    def evaluate_challenge(self, token: bytes) -> bytes | None:
        if token:
            raise RuntimeError(f"refused: {token!r}")
        self.complete = True
        return None


def login(port: int, mechanism: str, client) -> float:
    """Seconds from connect to the last SaslAuthenticate answer."""
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(encode_request(ApiKeys.SASL_HANDSHAKE, 1, 1, "bench", {"mechanism": mechanism}))
        assert decode_response(ApiKeys.SASL_HANDSHAKE, 1, _frame(s)[4:])["error_code"] == 0
        token: bytes | None = client.initial_response()
        correlation_id = 2
        while token is not None:
            s.sendall(encode_request(ApiKeys.SASL_AUTHENTICATE, 2, correlation_id, "bench", {"auth_bytes": token}))
            r = decode_response(ApiKeys.SASL_AUTHENTICATE, 2, _frame(s)[5:])
            if r["error_code"]:
                raise RuntimeError(f"{mechanism}: {r['error_message']}")
            token = client.evaluate_challenge(bytes(r["auth_bytes"]))
            correlation_id += 1
        elapsed = time.perf_counter() - t0
    assert client.complete
    return elapsed


def add_scram_user(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # dropped on return, before the broker stops
    upsert = UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-secret"
    )
    admin.alter_user_scram_credentials([upsert])["alice"].result(30)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200, help="logins per mechanism")
    args = parser.parse_args(argv)
    idp = IdentityProvider()
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(
            Path(tmp),
            listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,OIDC://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        )
        broker.props.update(
            {
                "listener.security.protocol.map": (
                    "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,OIDC:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"
                ),
                "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,OAUTHBEARER",
                "listener.name.oidc.sasl.enabled.mechanisms": "OAUTHBEARER",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS_PLAIN,
                "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": JAAS_OAUTH,
                "listener.name.oidc.oauthbearer.sasl.jaas.config": JAAS_OAUTH,
                "listener.name.oidc.oauthbearer.sasl.server.callback.handler.class": OIDC_HANDLER,
                "sasl.oauthbearer.jwks.endpoint.url": f"{idp.url}/jwks",
                "sasl.oauthbearer.expected.audience": AUDIENCE,
                "sasl.oauthbearer.expected.issuer": idp.issuer,
            }
        )
        broker.start()
        try:
            add_scram_user(broker.bootstrap)
            sasl, oidc = broker.ports["SASL_PLAINTEXT"], broker.ports["OIDC"]
            unsecured, signed = unsecured_token("alice", 3600), idp.mint("alice", lifetime_s=3600)
            cases = {
                "PLAIN": (sasl, "PLAIN", lambda: PlainSaslClient("alice", "alice-secret")),
                "SCRAM-SHA-512 (4096 iterations)": (
                    sasl,
                    "SCRAM-SHA-512",
                    lambda: ScramSaslClient("SCRAM-SHA-512", "alice", "alice-secret"),
                ),
                "OAUTHBEARER unsecured JWS": (sasl, "OAUTHBEARER", lambda: OneShot(unsecured)),
                "OAUTHBEARER OIDC RS256": (oidc, "OAUTHBEARER", lambda: OneShot(signed)),
            }
            deadline = time.monotonic() + 30
            while True:  # the SCRAM credential reaches the broker's cache through the metadata log
                try:
                    login(sasl, "SCRAM-SHA-512", ScramSaslClient("SCRAM-SHA-512", "alice", "alice-secret"))
                    break
                except RuntimeError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            for port, mechanism, make in cases.values():  # warm-up
                for _ in range(10):
                    login(port, mechanism, make())
            samples: dict[str, list[float]] = {name: [] for name in cases}
            for _ in range(args.samples):
                for name, (port, mechanism, make) in cases.items():
                    samples[name].append(login(port, mechanism, make()))
        finally:
            broker.stop()
            idp.close()
    print(f"SASL login (connect + SaslHandshake + SaslAuthenticate rounds), {args.samples} samples each:")
    for name, values in samples.items():
        values.sort()
        p90 = values[int(len(values) * 0.9) - 1]
        print(f"  {name:34s} median {statistics.median(values) * 1000:7.2f} ms   p90 {p90 * 1000:7.2f} ms")


if __name__ == "__main__":
    main()
