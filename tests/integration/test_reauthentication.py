"""Re-authentication (KIP-368) on a SASL_PLAINTEXT listener with ``connections.max.reauth.ms=2000``:
SaslAuthenticate answers ``session_lifetime_ms``; confluent-kafka (librdkafka re-authenticates on its own)
produces for ~6 s on one connection without an error while the broker counts its re-authentications; a raw
client that does not re-authenticate is closed at its next request after the lifetime (counted in
``expired-connections-killed-count``); one that re-authenticates by hand keeps its connection; changing the
principal or the mechanism on re-authentication fails with Kafka's messages."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from prometheus_client.parser import text_string_to_metric_families

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.clients.network_client import NetworkClient
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.security.client_security import ClientSecurity
from pykbroker.security.sasl_client import sasl_client
from tests.helpers.broker import BrokerProcess
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

LIFETIME_MS = 2000
JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob="bob-secret";'
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(
        tmp_path_factory.mktemp("reauth"),
        listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        metric_reporters="pykbroker.metrics.prometheus.PrometheusReporter",
        prometheus_metrics_listener="127.0.0.1:0",
    )
    b.props.update(
        {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            # per listener and mechanism, as Kafka; SCRAM-SHA-256 stays without expiry
            "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": str(LIFETIME_MS),
        }
    )
    b.start()
    yield b
    b.stop()


def socket_metric(broker, name: str, listener: str = "SASL_PLAINTEXT") -> float:
    """The sum over ``listener``'s Processors of a socket-server-metrics value."""
    line = broker.wait_for_line(r"Prometheus metrics endpoint listening on \S+:\d+")
    assert line is not None
    host, port = re.search(r"listening on (\S+):(\d+)", line).groups()
    page = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10).read().decode()
    total = 0.0
    for family in text_string_to_metric_families(page):
        for s in family.samples:
            if s.name == f"kafka_server_socket_server_metrics_{name}" and s.labels.get("listener") == listener:
                total += s.value
    return total


_SOFTWARE = {"client_software_name": "t", "client_software_version": "1"}


def _login(conn: BrokerConnection, user: str, password: str, mechanism: str = "PLAIN") -> dict:
    handshake = conn.request(ApiKeys.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
    assert handshake["error_code"] == 0, handshake
    token = b"\0" + user.encode() + b"\0" + password.encode()
    return conn.request(ApiKeys.SASL_AUTHENTICATE, 2, {"auth_bytes": token})


def _served(conn: BrokerConnection) -> bool:
    try:
        return conn.request(ApiKeys.METADATA, 9, {"topics": [], "allow_auto_topic_creation": False})["brokers"] != []
    except (ConnectionError, OSError):
        return False


def test_librdkafka_reauthenticates_and_keeps_producing(broker):
    create_topic(broker.bootstrap, "reauth-t", 1)
    before = socket_metric(broker, "successful_reauthentication_total")
    errors_seen: list = []
    delivered: list = []
    p = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
            "linger.ms": 5,
            "error_cb": errors_seen.append,
        }
    )
    start = time.monotonic()
    i = 0
    while time.monotonic() - start < 6.5:  # three session lifetimes
        p.produce("reauth-t", f"m{i}".encode(), partition=0, on_delivery=lambda e, m: delivered.append(e))
        i += 1
        p.poll(0.05)
    assert p.flush(15) == 0
    assert len(delivered) == i and not any(delivered), [e for e in delivered if e][:3]
    assert errors_seen == []
    # librdkafka re-authenticated (at least twice in 6.5 s) on the broker's lifetime, nothing was killed
    wait_until(lambda: socket_metric(broker, "successful_reauthentication_total") >= before + 2, 10)
    assert socket_metric(broker, "failed_reauthentication_total") == 0


def test_a_client_that_does_not_reauthenticate_is_closed_after_the_lifetime(broker):
    killed = socket_metric(broker, "expired_connections_killed_count")
    conn = BrokerConnection("127.0.0.1", broker.ports["SASL_PLAINTEXT"], timeout=10)
    assert conn.request(ApiKeys.API_VERSIONS, 3, _SOFTWARE)["error_code"] == 0
    answer = _login(conn, "alice", "alice-secret")
    authenticated = time.monotonic()
    assert answer["error_code"] == 0 and answer["session_lifetime_ms"] == LIFETIME_MS, answer
    assert _served(conn)
    wait_until(lambda: not _served(conn), 10, interval=0.2, message="closed once the session expired")
    assert time.monotonic() - authenticated >= LIFETIME_MS / 1000 - 0.1
    assert broker.wait_for_line(r"its SASL session expired \d+ ms ago and it did not re-authenticate", 5)
    wait_until(lambda: socket_metric(broker, "expired_connections_killed_count") == killed + 1, 10)
    conn.close()
    # SCRAM-SHA-256 has no lifetime on this listener (the key is per mechanism): 0 in the final answer
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    upsert = UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"carol-secret"
    )
    admin.alter_user_scram_credentials([upsert])["carol"].result(30)
    answers = wait_until(lambda: _scram_login(broker, "carol", "carol-secret"), 10, message="carol logs in")
    assert [a["session_lifetime_ms"] for a in answers] == [0, 0]


def _scram_login(broker, user: str, password: str) -> list[dict] | None:
    """A SCRAM-SHA-256 login by hand with SaslAuthenticate v1: its answers, or None when it fails (the
    credential may not have reached the broker's cache yet)."""
    with BrokerConnection("127.0.0.1", broker.ports["SASL_PLAINTEXT"], timeout=10) as conn:
        assert conn.request(ApiKeys.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})["error_code"] == 0
        client = sasl_client("SCRAM-SHA-256", user, password)
        token: bytes | None = client.initial_response()
        answers = []
        while token is not None:
            answers.append(conn.request(ApiKeys.SASL_AUTHENTICATE, 1, {"auth_bytes": token}))
            if answers[-1]["error_code"] != 0:
                return None
            token = client.evaluate_challenge(answers[-1]["auth_bytes"])
        return answers if _served(conn) else None


def test_reauthentication_by_hand_renews_the_session(broker):
    conn = BrokerConnection("127.0.0.1", broker.ports["SASL_PLAINTEXT"], timeout=10)
    assert _login(conn, "alice", "alice-secret")["error_code"] == 0
    deadline = time.monotonic() + 3 * LIFETIME_MS / 1000
    renewals = 0
    while time.monotonic() < deadline:  # re-authenticate at ~60% of each lifetime, serving requests between
        renewed_at = time.monotonic() + 0.6 * LIFETIME_MS / 1000
        while time.monotonic() < renewed_at:
            assert _served(conn)
            time.sleep(0.1)
        answer = _login(conn, "alice", "alice-secret")
        assert answer["error_code"] == 0 and answer["session_lifetime_ms"] == LIFETIME_MS, answer
        renewals += 1
    assert renewals >= 4 and _served(conn)
    # a second handshake within a second of the last re-authentication is an ordinary, refused request
    refused = conn.request(ApiKeys.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    assert refused["error_code"] == errors.ILLEGAL_SASL_STATE
    conn.close()


def test_reauthentication_keeps_the_principal_and_the_mechanism(broker):
    failed = socket_metric(broker, "failed_reauthentication_total")
    conn = BrokerConnection("127.0.0.1", broker.ports["SASL_PLAINTEXT"], timeout=10)
    assert _login(conn, "alice", "alice-secret")["error_code"] == 0
    answer = _login(conn, "bob", "bob-secret")
    assert answer["error_code"] == errors.SASL_AUTHENTICATION_FAILED
    assert answer["error_message"] == "Cannot change principals during re-authentication from User.alice: User.bob"
    wait_until(lambda: not _served(conn), 5, message="closed after the failed re-authentication")
    conn.close()
    conn = BrokerConnection("127.0.0.1", broker.ports["SASL_PLAINTEXT"], timeout=10)
    assert _login(conn, "alice", "alice-secret")["error_code"] == 0
    assert conn.request(ApiKeys.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})["error_code"] == 0
    answer = conn.request(ApiKeys.SASL_AUTHENTICATE, 2, {"auth_bytes": b"n,,n=alice,r=abc"})
    assert answer["error_code"] == errors.SASL_AUTHENTICATION_FAILED
    assert answer["error_message"] == (
        "SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for re-authentication of mechanism 'PLAIN'"
    )
    conn.close()
    wait_until(lambda: socket_metric(broker, "failed_reauthentication_total") == failed + 2, 10)


def test_the_nodes_own_clients_reauthenticate(tmp_path):
    """pykbroker's own clients follow the lifetime too: the NetworkClient (heartbeats, forwarding, Raft, markers)
    and the blocking BrokerConnection (replica fetchers) re-authenticate on their connection instead of being
    closed, here against a controller listener with SASL PLAIN and connections.max.reauth.ms."""
    admin_jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" user_admin="admin-secret";'
    )
    node = BrokerProcess(
        tmp_path / "node",
        listeners="PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        metric_reporters="pykbroker.metrics.prometheus.PrometheusReporter",
        prometheus_metrics_listener="127.0.0.1:0",
    )
    node.props.update(
        {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": admin_jaas,
            "sasl.mechanism.controller.protocol": "PLAIN",
            "connections.max.reauth.ms": str(LIFETIME_MS),
        }
    )
    node.start()
    security = ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "admin", "admin-secret")
    client = NetworkClient("reauth-test", security=security)
    try:
        client.set_address(1, ("127.0.0.1", node.ports["CONTROLLER"]))

        def ready() -> bool:
            client.poll(0.05)
            return client.is_ready(1, client.now())

        wait_until(ready, 10, message="NetworkClient connected and authenticated")
        connection = client.conns[1]
        answers: list = []
        with BrokerConnection("127.0.0.1", node.ports["CONTROLLER"], timeout=10, security=security) as conn:
            start = time.monotonic()
            while time.monotonic() - start < 3 * LIFETIME_MS / 1000:
                assert conn.request(ApiKeys.API_VERSIONS, 3, _SOFTWARE)["error_code"] == 0
                if client.is_ready(1, client.now()):
                    client.send(
                        1, ApiKeys.API_VERSIONS, 3, _SOFTWARE, lambda r, e: answers.append(e or r["error_code"])
                    )
                client.poll(0.1)
        assert len(answers) >= 20 and set(answers) == {0}, answers[:5]
        assert client.conns[1] is connection  # the same connection all along

        def reauthentications() -> float:
            return socket_metric(node, "successful_reauthentication_total", "CONTROLLER")

        # each client at least twice in three lifetimes
        wait_until(lambda: reauthentications() >= 4, 10, message="re-authentications on the controller listener")
        assert socket_metric(node, "expired_connections_killed_count", "CONTROLLER") == 0
        assert socket_metric(node, "failed_reauthentication_total", "CONTROLLER") == 0
        assert not any("Failed authentication" in line or "session expired" in line for line in node.lines)
    finally:
        client.close_all()
        node.stop()
