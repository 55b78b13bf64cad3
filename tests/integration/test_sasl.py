"""SASL on a SASL_PLAINTEXT listener with real clients: PLAIN (JAAS users), SCRAM-SHA-256 and SCRAM-SHA-512
(credentials from ``kafka-storage format --add-scram`` and from AlterUserScramCredentials); confluent-kafka,
kafka-python, aiokafka and kcat produce and consume; a wrong password fails; before authentication only
ApiVersions and the SASL APIs are served, a SASL frame above the limit is refused, and fuzzed tokens fail
their own connection only."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import struct
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import decode_response, encode_request
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.broker import ROOT, BrokerProcess
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    """PLAINTEXT (inter-broker, admin) and SASL_PLAINTEXT listeners; bob's SCRAM-SHA-512 credential comes
    from ``kafka-storage format --add-scram``."""
    broker = BrokerProcess(
        tmp_path_factory.mktemp("sasl"),
        listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
    )
    broker.props.update(
        {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        }
    )
    broker.write_config()
    formatted = subprocess.run(
        [
            sys.executable,
            "-m",
            "pykbroker.tools.storage_tool",
            "format",
            "-t",
            "MkU3OEVBNTcwNTJENDM2Qk",
            "-c",
            str(broker.config_path),
            "--add-scram",
            "SCRAM-SHA-512=[name=bob,password=bob-secret]",
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=60,
    )
    assert formatted.returncode == 0, formatted.stderr
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-256")]
    )["alice"].result(30)
    yield broker
    broker.stop()


def sasl_bootstrap(broker) -> str:
    return f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}"


CLIENTS = [
    ("PLAIN", "alice", "alice-secret"),
    ("SCRAM-SHA-256", "alice", "alice-256"),
    ("SCRAM-SHA-512", "bob", "bob-secret"),
]


def _confluent(mechanism: str, user: str, password: str) -> dict:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


@pytest.mark.parametrize("mechanism,user,password", CLIENTS)
def test_confluent_kafka_produces_and_consumes(sasl_broker, mechanism, user, password):
    topic = f"sasl-ck-{mechanism.lower()}"
    create_topic(sasl_broker.bootstrap, topic, 1)
    bs = sasl_bootstrap(sasl_broker)
    p = Producer({"bootstrap.servers": bs, **_confluent(mechanism, user, password)})
    for i in range(20):
        p.produce(topic, f"v{i}".encode(), partition=0)
    assert p.flush(20) == 0
    c = Consumer({"bootstrap.servers": bs, "group.id": f"g-{uuid.uuid4()}", **_confluent(mechanism, user, password)})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.time() + 20
    while time.time() < deadline and len(got) < 20:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == [f"v{i}".encode() for i in range(20)]


@pytest.mark.parametrize("mechanism,user,password", CLIENTS)
def test_kafka_python_and_aiokafka(sasl_broker, mechanism, user, password):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    topic = f"sasl-py-{mechanism.lower()}"
    create_topic(sasl_broker.bootstrap, topic, 1)
    bs = sasl_bootstrap(sasl_broker)
    auth = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }
    kp = KafkaProducer(bootstrap_servers=bs, **auth)
    for i in range(10):
        kp.send(topic, f"kp{i}".encode(), partition=0)
    kp.flush(20)
    kp.close()

    async def aio() -> list[bytes]:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
        from aiokafka import TopicPartition as ATP

        ap = AIOKafkaProducer(bootstrap_servers=bs, **auth)
        await ap.start()
        try:
            for i in range(10):
                await ap.send_and_wait(topic, f"ap{i}".encode(), partition=0)
        finally:
            await ap.stop()
        ac = AIOKafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, **auth)
        await ac.start()
        try:
            ac.assign([ATP(topic, 0)])
            await ac.seek_to_beginning()
            out: list[bytes] = []
            end = time.time() + 20
            while time.time() < end and len(out) < 20:
                for records in (await ac.getmany(timeout_ms=500)).values():
                    out += [r.value for r in records]
            return out
        finally:
            await ac.stop()

    want = [f"kp{i}".encode() for i in range(10)] + [f"ap{i}".encode() for i in range(10)]
    assert asyncio.run(aio()) == want
    kc = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, **auth)
    kc.assign([KTP(topic, 0)])
    kc.seek_to_beginning()
    got: list[bytes] = []
    deadline = time.time() + 20
    while time.time() < deadline and len(got) < 20:
        for records in kc.poll(500).values():
            got += [r.value for r in records]
    kc.close()
    assert got == want


@pytest.mark.parametrize("mechanism,user,password", CLIENTS)
def test_kcat(sasl_broker, mechanism, user, password):
    topic = f"sasl-kcat-{mechanism.lower()}"
    create_topic(sasl_broker.bootstrap, topic, 1)
    auth = [
        *("-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanisms={mechanism}"),
        *("-X", f"sasl.username={user}", "-X", f"sasl.password={password}"),
    ]
    bs = sasl_bootstrap(sasl_broker)
    produced = subprocess.run(
        ["kcat", "-b", bs, *auth, "-P", "-t", topic, "-p", "0"],
        input="one\ntwo\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        ["kcat", "-b", bs, *auth, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert consumed.returncode == 0 and consumed.stdout.split() == ["one", "two"], consumed.stderr


@pytest.mark.parametrize("mechanism,user", [("PLAIN", "alice"), ("SCRAM-SHA-256", "alice"), ("SCRAM-SHA-512", "bob")])
def test_wrong_password_fails_authentication(sasl_broker, mechanism, user):
    from confluent_kafka import KafkaError

    errors_seen: list = []
    p = Producer(
        {
            "bootstrap.servers": sasl_bootstrap(sasl_broker),
            **_confluent(mechanism, user, "wrong"),
            "error_cb": errors_seen.append,
        }
    )
    deadline = time.time() + 10
    while time.time() < deadline and not any(e.code() == KafkaError._AUTHENTICATION for e in errors_seen):
        p.poll(0.2)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors_seen), errors_seen
    assert any("Authentication failed" in e.str() for e in errors_seen if e.code() == KafkaError._AUTHENTICATION)
    wait_until(lambda: any("Failed authentication with /127.0.0.1" in line for line in sasl_broker.lines), 10)
    assert not any("wrong" in line for line in sasl_broker.lines if "Failed authentication" in line)


def _frame(sock: socket.socket) -> bytes | None:
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    size = struct.unpack(">i", head)[0]
    body = b""
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            return None
        body += chunk
    return body


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(5)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_only_sasl_apis_before_authentication(sasl_broker):
    host, port = "127.0.0.1", sasl_broker.ports["SASL_PLAINTEXT"]
    with socket.create_connection((host, port), timeout=5) as s:  # ApiVersions is answered, Metadata closes
        s.sendall(
            encode_request(
                ApiKeys.API_VERSIONS, 3, 1, "t", {"client_software_name": "t", "client_software_version": "1"}
            )
        )
        body = _frame(s)
        assert body is not None
        keys = {k["api_key"] for k in decode_response(ApiKeys.API_VERSIONS, 3, body[4:])["api_keys"]}
        assert {ApiKeys.SASL_HANDSHAKE, ApiKeys.SASL_AUTHENTICATE} <= keys
        s.sendall(encode_request(ApiKeys.METADATA, 12, 2, "t", {"topics": None, "allow_auto_topic_creation": False}))
        assert _closed(s)
    with socket.create_connection((host, port), timeout=5) as s:  # a SASL frame above the limit
        s.sendall(struct.pack(">i", 600_000) + b"\x00" * 100)
        assert _closed(s)
    with socket.create_connection((host, port), timeout=5) as s:  # an unsupported mechanism
        s.sendall(encode_request(ApiKeys.SASL_HANDSHAKE, 1, 1, "t", {"mechanism": "GSSAPI"}))
        r = decode_response(ApiKeys.SASL_HANDSHAKE, 1, _frame(s)[4:])
        assert r["error_code"] == 33 and r["mechanisms"] == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert _closed(s)


def test_fuzzed_tokens_fail_their_connection_only(sasl_broker):
    rng = random.Random(1234)
    host, port = "127.0.0.1", sasl_broker.ports["SASL_PLAINTEXT"]
    for i in range(60):
        mechanism = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"][i % 3]
        with socket.create_connection((host, port), timeout=5) as s:
            s.sendall(encode_request(ApiKeys.SASL_HANDSHAKE, 1, 1, "t", {"mechanism": mechanism}))
            assert decode_response(ApiKeys.SASL_HANDSHAKE, 1, _frame(s)[4:])["error_code"] == 0
            token = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200)))
            if i % 2:
                token = b"n,,n=alice,r=" + token  # a SCRAM-looking start
            s.sendall(encode_request(ApiKeys.SASL_AUTHENTICATE, 2, 2, "t", {"auth_bytes": token}))
            body = _frame(s)
            if body is not None:
                r = decode_response(ApiKeys.SASL_AUTHENTICATE, 2, body[5:])
                assert r["error_code"] in (0, 58)  # a SCRAM first message may pass; garbage fails
    # The broker still serves everyone else.
    with BrokerConnection.to(sasl_broker.bootstrap) as c:
        assert c.request(ApiKeys.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})["brokers"]
    test = Producer({"bootstrap.servers": sasl_bootstrap(sasl_broker), **_confluent(*CLIENTS[0])})
    test.produce("sasl-after-fuzz", b"x")
    assert test.flush(20) == 0


def test_kafka_configs_manages_scram_users(sasl_broker):
    from confluent_kafka import KafkaError

    def configs(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "pykbroker.tools.config_command",
                "--bootstrap-server",
                sasl_broker.bootstrap,
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )

    add = configs(
        "--alter", "--entity-type", "users", "--entity-name", "carol",
        "--add-config", "SCRAM-SHA-256=[iterations=8192,password=carol-secret],SCRAM-SHA-512=[password=carol-512]",
    )  # fmt: skip
    assert add.returncode == 0 and add.stdout == "Completed updating config for user carol.\n", add.stderr
    described = configs("--describe", "--entity-type", "users", "--entity-name", "carol")
    assert described.stdout == (
        "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-256=iterations=8192, "
        "SCRAM-SHA-512=iterations=4096\n"
    )
    everyone = configs("--describe", "--entity-type", "users").stdout
    assert "user-principal 'bob' are SCRAM-SHA-512=iterations=4096" in everyone

    def authenticates(mechanism: str, password: str) -> bool:
        seen: list = []
        p = Producer({"bootstrap.servers": sasl_bootstrap(sasl_broker), **_confluent(mechanism, "carol", password),
                      "error_cb": seen.append})  # fmt: skip
        p.produce("sasl-carol", b"x")
        return p.flush(10) == 0 and not any(e.code() == KafkaError._AUTHENTICATION for e in seen)

    wait_until(lambda: authenticates("SCRAM-SHA-256", "carol-secret"), 15, message="carol authenticates")
    assert authenticates("SCRAM-SHA-512", "carol-512")
    delete = configs("--alter", "--user", "carol", "--delete-config", "SCRAM-SHA-512")
    assert delete.returncode == 0, delete.stderr
    wait_until(lambda: "SCRAM-SHA-512" not in configs("--describe", "--user", "carol").stdout, 10)
    missing = configs("--describe", "--entity-type", "users", "--entity-name", "nobody")
    assert missing.stdout == (
        "Error retrieving SCRAM credential configs for user-principal 'nobody': ResourceNotFoundException: "
        "Attempt to describe a user credential that does not exist\n"
    )
    bad = configs("--alter", "--user", "carol", "--add-config", "bogus=1024")
    assert bad.returncode == 1 and "Only quota and SCRAM credential configs can be added" in bad.stderr
