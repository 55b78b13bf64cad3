"""TLS listeners with real clients and certificates made here (trustme): SSL with ``ssl.client.auth=required``
(a client without a certificate is refused), SASL_SSL with SCRAM-SHA-256 and PLAIN; confluent-kafka,
kafka-python, aiokafka and kcat produce and consume, fetches included (no sendfile through TLS)."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from tests.helpers.broker import BrokerProcess
from tests.helpers.topics import create_topic

pytestmark = pytest.mark.integration
trustme = pytest.importorskip("trustme")

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    files = {name: str(d / name) for name in ("server.pem", "ca.pem", "client.pem", "client.key")}
    server.private_key_and_cert_chain_pem.write_to_path(files["server.pem"])
    ca.cert_pem.write_to_path(files["ca.pem"])
    client = ca.issue_cert("alice@example.com", common_name="alice", organization_name="Example")
    client.cert_chain_pems[0].write_to_path(files["client.pem"])
    client.private_key_pem.write_to_path(files["client.key"])
    broker = BrokerProcess(
        d / "broker",
        listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
    )
    broker.props.update(
        {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": files["server.pem"],
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": files["ca.pem"],
            "listener.name.ssl.ssl.client.auth": "required",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        }
    )
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bob-secret")]
    )["bob"].result(30)
    yield broker, files
    broker.stop()


def _ssl_conf(broker, files, with_cert: bool = True) -> dict:
    conf = {
        "bootstrap.servers": f"127.0.0.1:{broker.ports['SSL']}",
        "security.protocol": "SSL",
        "ssl.ca.location": files["ca.pem"],
    }
    if with_cert:
        conf.update({"ssl.certificate.location": files["client.pem"], "ssl.key.location": files["client.key"]})
    return conf


def _sasl_ssl_conf(broker, files, mechanism: str, user: str, password: str) -> dict:
    return {
        "bootstrap.servers": f"127.0.0.1:{broker.ports['SASL_SSL']}",
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": files["ca.pem"],
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def _roundtrip(conf: dict, topic: str, values: list[bytes]) -> list[bytes]:
    p = Producer(conf)
    for v in values:
        p.produce(topic, v, partition=0)
    assert p.flush(20) == 0
    c = Consumer({**conf, "group.id": f"g-{uuid.uuid4()}", "fetch.max.bytes": 4 << 20})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.time() + 20
    while time.time() < deadline and len(got) < len(values):
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    return got


def test_ssl_with_a_client_certificate(tls):
    broker, files = tls
    create_topic(broker.bootstrap, "tls-ssl", 1)
    values = [f"r{i}".encode() * 200 for i in range(200)] + [b"x" * 600_000]  # small ones and one large record
    assert _roundtrip(_ssl_conf(broker, files), "tls-ssl", values) == values


def test_ssl_refuses_a_client_without_a_certificate(tls):
    broker, files = tls
    seen: list = []
    p = Producer({**_ssl_conf(broker, files, with_cert=False), "error_cb": seen.append})
    p.produce("tls-ssl", b"never")
    assert p.flush(5) == 1
    assert any(e.code() in (KafkaError._TRANSPORT, KafkaError._SSL, KafkaError._ALL_BROKERS_DOWN) for e in seen), seen
    assert any(
        "Failed authentication with /127.0.0.1" in line and "TLS handshake failed" in line for line in broker.lines
    )


@pytest.mark.parametrize(
    "mechanism,user,password", [("SCRAM-SHA-256", "bob", "bob-secret"), ("PLAIN", "alice", "alice-secret")]
)
def test_sasl_ssl(tls, mechanism, user, password):
    broker, files = tls
    topic = f"tls-sasl-{mechanism.lower()}"
    create_topic(broker.bootstrap, topic, 1)
    values = [f"s{i}".encode() for i in range(50)]
    assert _roundtrip(_sasl_ssl_conf(broker, files, mechanism, user, password), topic, values) == values


def test_kafka_python_aiokafka_and_kcat_over_tls(tls):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    broker, files = tls
    create_topic(broker.bootstrap, "tls-clients", 1)
    ssl_bs = f"127.0.0.1:{broker.ports['SSL']}"
    sasl_bs = f"127.0.0.1:{broker.ports['SASL_SSL']}"
    kp = KafkaProducer(
        bootstrap_servers=ssl_bs,
        security_protocol="SSL",
        ssl_cafile=files["ca.pem"],
        ssl_certfile=files["client.pem"],
        ssl_keyfile=files["client.key"],
    )
    for i in range(5):
        kp.send("tls-clients", f"kp{i}".encode(), partition=0)
    kp.flush(20)
    kp.close()

    async def aio() -> None:
        from aiokafka import AIOKafkaProducer

        context = ssl.create_default_context(cafile=files["ca.pem"])
        ap = AIOKafkaProducer(
            bootstrap_servers=sasl_bs,
            security_protocol="SASL_SSL",
            ssl_context=context,
            sasl_mechanism="SCRAM-SHA-256",
            sasl_plain_username="bob",
            sasl_plain_password="bob-secret",
        )
        await ap.start()
        try:
            for i in range(5):
                await ap.send_and_wait("tls-clients", f"ap{i}".encode(), partition=0)
        finally:
            await ap.stop()

    asyncio.run(aio())
    kcat = subprocess.run(
        [
            "kcat", "-b", sasl_bs, "-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={files['ca.pem']}",
            "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret",
            "-C", "-t", "tls-clients", "-p", "0", "-o", "beginning", "-e", "-q",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )  # fmt: skip
    want = [f"kp{i}" for i in range(5)] + [f"ap{i}" for i in range(5)]
    assert kcat.returncode == 0 and kcat.stdout.split() == want, kcat.stderr
    kc = KafkaConsumer(
        bootstrap_servers=sasl_bs,
        security_protocol="SASL_SSL",
        ssl_cafile=files["ca.pem"],
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="bob",
        sasl_plain_password="bob-secret",
        enable_auto_commit=False,
    )
    kc.assign([KTP("tls-clients", 0)])
    kc.seek_to_beginning()
    got: list[str] = []
    deadline = time.time() + 20
    while time.time() < deadline and len(got) < 10:
        for records in kc.poll(500).values():
            got += [r.value.decode() for r in records]
    kc.close()
    assert got == want


_SOFTWARE = {"client_software_name": "test", "client_software_version": "1"}


def test_handshake_and_authentication_are_bounded_in_time(tmp_path):
    """A client that trickles a TLS ClientHello, or that never finishes SASL, is closed at
    min(connections.max.idle.ms, 30 s) after it connected, even though its bytes keep it from being idle."""
    import socket

    from pykbroker.clients.broker_connection import BrokerConnection
    from pykbroker.protocol.api_keys import ApiKeys

    ca = trustme.CA()
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    broker = BrokerProcess(
        tmp_path / "broker",
        listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
    )
    broker.props.update(
        {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
            "CONTROLLER:PLAINTEXT",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(tmp_path / "server.pem"),
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "connections.max.idle.ms": "1500",
        }
    )
    broker.start()
    try:
        tls = socket.create_connection(("127.0.0.1", broker.ports["SSL"]), timeout=10)
        tls.sendall(b"\x16\x03\x01\x02\x00")  # a TLS record header announcing 512 bytes that never all come
        sasl = BrokerConnection("127.0.0.1", broker.ports["SASL_PLAINTEXT"], timeout=10)
        start = time.monotonic()
        closed: dict[str, float] = {}
        while len(closed) < 2 and time.monotonic() - start < 8:
            if "tls" not in closed:
                try:
                    tls.sendall(b"\x01")
                except OSError:
                    closed["tls"] = time.monotonic() - start
            if "sasl" not in closed:
                try:  # ApiVersions is allowed before authentication: the connection is busy, never idle
                    assert sasl.request(ApiKeys.API_VERSIONS, 3, _SOFTWARE)["error_code"] == 0
                except (ConnectionError, OSError):
                    closed["sasl"] = time.monotonic() - start
            time.sleep(0.2)
        assert set(closed) == {"tls", "sasl"}, closed
        assert all(t < 5 for t in closed.values()), closed
        assert broker.wait_for_line(r"TLS handshake not complete within 1500 ms", 5)
        assert broker.wait_for_line(r"SASL authentication not complete within 1500 ms", 5)
        # An authenticated connection stays (it only has the idle expiry, refreshed by its requests).
        with BrokerConnection("127.0.0.1", broker.ports["PLAINTEXT"], timeout=10) as plain:
            for _ in range(12):
                assert plain.request(ApiKeys.API_VERSIONS, 3, _SOFTWARE)["error_code"] == 0
                time.sleep(0.2)
        tls.close()
        sasl.close()
    finally:
        broker.stop()
