"""A broker whose TLS listeners read PKCS12 stores made here with ``cryptography`` (``ssl.keystore.type=PKCS12``,
``ssl.truststore.type=PKCS12``): confluent-kafka with a PEM CA produces and consumes; on the mTLS listener
(``ssl.client.auth=required``, trust from the PKCS12 truststore) the client certificate's principal is the one
the ACLs see; a wrong keystore password stops the start-up with one clear line and no traceback."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from tests.helpers.broker import BrokerProcess
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration
trustme = pytest.importorskip("trustme")


def _pkcs12(cert, password: bytes | None, with_key: bool = True) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    chain = [x509.load_pem_x509_certificate(p.bytes()) for p in cert.cert_chain_pems]
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), None)
    encryption = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    return pkcs12.serialize_key_and_certificates(b"mykey", key, chain[0], chain[1:] or None, encryption)  # type: ignore[arg-type]


def _pkcs12_truststore(ca, password: bytes) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    certificate = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    encryption = serialization.BestAvailableEncryption(password)
    return pkcs12.serialize_key_and_certificates(None, None, None, [certificate], encryption)


def _broker(d, files: dict, keystore_password: str) -> BrokerProcess:
    broker = BrokerProcess(
        d, listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0,CONTROLLER://127.0.0.1:0"
    )
    broker.props.update(
        {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,CONTROLLER:PLAINTEXT",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": files["server.p12"],
            "ssl.keystore.password": keystore_password,
            "ssl.key.password": keystore_password,
            "listener.name.mtls.ssl.truststore.type": "PKCS12",
            "listener.name.mtls.ssl.truststore.location": files["trust.p12"],
            "listener.name.mtls.ssl.truststore.password": "trust-pass",
            "listener.name.mtls.ssl.client.auth": "required",
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",  # PLAINTEXT, SSL without a client certificate, the controller
        }
    )
    return broker


@pytest.fixture(scope="module")
def pkcs12_broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("pkcs12")
    ca = trustme.CA()
    files = {name: str(d / name) for name in ("server.p12", "trust.p12", "ca.pem")}
    (d / "server.p12").write_bytes(_pkcs12(ca.issue_cert("127.0.0.1", "localhost"), b"store-pass"))
    (d / "trust.p12").write_bytes(_pkcs12_truststore(ca, b"trust-pass"))
    ca.cert_pem.write_to_path(files["ca.pem"])
    for user in ("alice", "mallory"):
        cert = ca.issue_cert(f"{user}@example.com", common_name=user, organization_name="Example")
        files[f"{user}.pem"], files[f"{user}.key"] = str(d / f"{user}.pem"), str(d / f"{user}.key")
        cert.cert_chain_pems[0].write_to_path(files[f"{user}.pem"])
        cert.private_key_pem.write_to_path(files[f"{user}.key"])
    broker = _broker(d / "broker", files, "store-pass").start()
    yield broker, files, d
    broker.stop()


def _conf(broker, files, listener: str, user: str | None = None) -> dict:
    conf = {
        "bootstrap.servers": f"127.0.0.1:{broker.ports[listener]}",
        "security.protocol": "SSL",
        "ssl.ca.location": files["ca.pem"],
    }
    if user:
        conf.update({"ssl.certificate.location": files[f"{user}.pem"], "ssl.key.location": files[f"{user}.key"]})
    return conf


def _produce(conf: dict, topic: str, values: list[bytes]) -> KafkaError | None:
    errors: list = []
    p = Producer({**conf, "retries": 0, "message.timeout.ms": 8000})
    for v in values:
        p.produce(topic, v, partition=0, on_delivery=lambda e, m: e and errors.append(e))
    p.flush(15)
    return errors[0] if errors else None


def test_pkcs12_keystore_serves_produce_and_consume(pkcs12_broker):
    broker, files, _ = pkcs12_broker
    create_topic(broker.bootstrap, "p12-ssl", 1)
    values = [f"v{i}".encode() * 100 for i in range(100)]
    conf = _conf(broker, files, "SSL")
    assert _produce(conf, "p12-ssl", values) is None
    c = Consumer({**conf, "group.id": f"g-{uuid.uuid4()}"})
    c.assign([TopicPartition("p12-ssl", 0, 0)])
    got: list[bytes] = []
    deadline = time.time() + 20
    while time.time() < deadline and len(got) < len(values):
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == values


def test_pkcs12_truststore_authenticates_the_client_certificate(pkcs12_broker):
    broker, files, _ = pkcs12_broker
    create_topic(broker.bootstrap, "p12-mtls", 1)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    binding = AclBinding(ResourceType.TOPIC, "p12-mtls", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.WRITE, AclPermissionType.ALLOW)  # fmt: skip
    admin.create_acls([binding])[binding].result(15)
    # alice's certificate maps to User:alice, which the ACL allows; mallory's does not.
    wait_until(lambda: _produce(_conf(broker, files, "MTLS", "alice"), "p12-mtls", [b"a"]) is None, 20)
    error = _produce(_conf(broker, files, "MTLS", "mallory"), "p12-mtls", [b"m"])
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Without a client certificate the mTLS listener refuses the handshake.
    errors: list = []
    p = Producer({**_conf(broker, files, "MTLS"), "error_cb": errors.append})
    p.produce("p12-mtls", b"never")
    assert p.flush(5) == 1


def test_wrong_keystore_password_is_one_clear_line(pkcs12_broker):
    _, files, d = pkcs12_broker
    broker = _broker(d / "broker-wrong", files, "not-the-password")
    with pytest.raises(RuntimeError, match="broker did not start"):
        broker.start(timeout=20)
    out = broker.output()
    assert "Failed to load SSL keystore" in out and "of type PKCS12" in out and "password was incorrect" in out, out
    assert "Traceback" not in out, out
