"""A secured cluster: 1 controller and 2 brokers with no PLAINTEXT listener at all.

The controller listener is SASL_PLAINTEXT with PLAIN (``sasl.mechanism.controller.protocol``), the brokers'
only listener is SASL_SSL with SCRAM-SHA-512 (``sasl.mechanism.inter.broker.protocol``; the credential comes
from ``kafka-storage format --add-scram``), the StandardAuthorizer is on with ``super.users=User:admin`` and
nothing allowed without an ACL. So registration, heartbeats and Raft fetches from the brokers, replica fetches,
and transaction markers and partition verification between the brokers all authenticate as admin. A replicated
acks=all produce with min.insync.replicas=2 and a transaction over partitions led by both brokers prove it.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.security.client_security import client_security
from tests.helpers.broker import ROOT
from tests.helpers.cluster import KRaftCluster
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration
trustme = pytest.importorskip("trustme")

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)
SCRAM_JAAS = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";'
)


@pytest.fixture(scope="module")
def secured_cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("secured")
    ca = trustme.CA()
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(root / "node.pem"))
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    security = {
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,INTERNAL:SASL_SSL",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS,
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(root / "node.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(root / "ca.pem"),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "false",
        "offsets.topic.replication.factor": "2",
        "transaction.state.log.replication.factor": "2",
        "transaction.state.log.min.isr": "2",
        "transaction.state.log.num.partitions": "2",
    }
    cluster = KRaftCluster(root, controllers=1, brokers=2)
    for node in cluster.nodes:
        node.props.update(security)
    for broker in cluster.brokers.values():
        broker.props.update({"listeners": "INTERNAL://127.0.0.1:0", "inter.broker.listener.name": "INTERNAL"})
    controller = cluster.controllers[1]
    for node in cluster.nodes:
        node.write_config()
        scram = ["--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]"] if node is controller else []
        args = ["format", "-t", cluster.cluster_id, "-c", str(node.config_path), *scram]
        subprocess.run([sys.executable, "-m", "pykbroker.tools.storage_tool", *args],
                       check=True, capture_output=True, cwd=str(ROOT), timeout=60)  # fmt: skip
    KRaftCluster.start_nodes(cluster.nodes, 60)
    yield cluster, root
    cluster.stop()


def _conf(cluster, root) -> dict:
    return {
        "bootstrap.servers": ",".join(f"127.0.0.1:{b.ports['INTERNAL']}" for b in cluster.brokers.values()),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(root / "ca.pem"),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "admin",
        "sasl.password": "admin-secret",
    }


def test_replication_and_transactions_run_over_sasl_ssl(secured_cluster):
    cluster, root = secured_cluster
    conf = _conf(cluster, root)
    admin = AdminClient(conf)
    topic = NewTopic("secured", 4, 2, config={"min.insync.replicas": "2"})
    admin.create_topics([topic])["secured"].result(30)

    def isr_complete() -> bool:
        parts = admin.list_topics("secured", timeout=10).topics["secured"].partitions
        return len(parts) == 4 and all(len(p.isrs) == 2 for p in parts.values())

    wait_until(isr_complete, 30, message="both replicas in every ISR")
    leaders = {p.leader for p in admin.list_topics("secured", timeout=10).topics["secured"].partitions.values()}
    assert leaders == set(cluster.brokers), leaders  # replica fetches in both directions

    delivered: list = []
    producer = Producer({**conf, "acks": "all", "linger.ms": 5})
    for i in range(400):
        producer.produce("secured", str(i).encode(), partition=i % 4, on_delivery=lambda e, m: delivered.append(e))
    producer.flush(30)
    assert len(delivered) == 400 and not any(delivered), [e for e in delivered if e][:3]

    # A transaction over partitions led by both brokers: markers and verification cross the SASL_SSL listener.
    txn = Producer({**conf, "transactional.id": "secured-txn", "transaction.timeout.ms": 20000})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(40):
        txn.produce("secured", f"t{i}".encode(), partition=i % 4)
    txn.commit_transaction(30)

    consumer = Consumer({**conf, "group.id": "secured-g", "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed", "enable.partition.eof": True})  # fmt: skip
    consumer.subscribe(["secured"])
    values, eof, deadline = [], set(), time.monotonic() + 30
    while len(eof) < 4 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
            continue
        values.append(m.value())
    consumer.close()
    assert sorted(values) == sorted([str(i).encode() for i in range(400)] + [f"t{i}".encode() for i in range(40)])


def test_inter_broker_client_authenticates_like_the_brokers(secured_cluster):
    cluster, root = secured_cluster
    broker = next(iter(cluster.brokers.values()))
    port = broker.ports["INTERNAL"]
    originals = {k: v for k, v in broker.props.items()}
    good = client_security(originals, "INTERNAL", "SASL_SSL", "sasl.mechanism.inter.broker.protocol")
    with BrokerConnection("127.0.0.1", port, security=good, timeout=10) as conn:
        brokers = conn.request(ApiKeys.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})["brokers"]
        assert {b["node_id"] for b in brokers} == set(cluster.brokers)
    wrong = dict(originals)
    wrong["listener.name.internal.scram-sha-512.sasl.jaas.config"] = SCRAM_JAAS.replace("admin-secret", "nope")
    bad = client_security(wrong, "INTERNAL", "SASL_SSL", "sasl.mechanism.inter.broker.protocol")
    with pytest.raises(errors.SaslAuthenticationError, match="invalid credentials"):
        BrokerConnection("127.0.0.1", port, security=bad, timeout=10)
    # A peer whose certificate the truststore does not trust is refused before any SASL byte.
    other_ca = trustme.CA()
    other_ca.cert_pem.write_to_path(str(root / "other-ca.pem"))
    untrusted = client_security(
        {**originals, "ssl.truststore.location": str(root / "other-ca.pem")},
        "INTERNAL",
        "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol",
    )
    with pytest.raises(OSError, match="certificate verify failed|CERTIFICATE_VERIFY_FAILED"):
        BrokerConnection("127.0.0.1", port, security=untrusted, timeout=10)


def test_controller_apis_need_cluster_action(secured_cluster):
    """A principal that may log in to the controller listener but is not allowed CLUSTER_ACTION / DESCRIBE on
    the cluster gets CLUSTER_AUTHORIZATION_FAILED from the controller-only node's authorizer."""
    from pykbroker.security.client_security import ClientSecurity

    cluster, _ = secured_cluster
    port = cluster.controller_ports[1]
    quorum = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
    heartbeat = {"broker_id": 101, "broker_epoch": 1, "current_metadata_offset": 0, "want_fence": False,
                 "want_shut_down": False}  # fmt: skip
    alice = ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "alice", "alice-secret")
    with BrokerConnection("127.0.0.1", port, security=alice, timeout=10) as conn:
        assert conn.request(ApiKeys.DESCRIBE_QUORUM, 1, quorum)["error_code"] == errors.CLUSTER_AUTHORIZATION_FAILED
        assert conn.request(ApiKeys.BROKER_HEARTBEAT, 1, heartbeat)["error_code"] == errors.CLUSTER_AUTHORIZATION_FAILED
    admin = ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "admin", "admin-secret")
    with BrokerConnection("127.0.0.1", port, security=admin, timeout=10) as conn:
        assert conn.request(ApiKeys.DESCRIBE_QUORUM, 1, quorum)["error_code"] == errors.NONE


def test_mutual_tls_between_nodes(tmp_path):
    """SSL controller and inter-broker listeners with ``ssl.client.auth=required``: every node presents its
    keystore's certificate, mapped by ``ssl.principal.mapping.rules`` to the super user ``User:node``."""
    ca = trustme.CA()
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "node.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    security = {
        "listener.security.protocol.map": "CONTROLLER:SSL,INTERNAL:SSL,CLIENT:PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tmp_path / "node.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tmp_path / "ca.pem"),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^OU=[^,]*,O=trustme.*$/node/,DEFAULT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:node;User:ANONYMOUS",  # ANONYMOUS: this test's PLAINTEXT client listener
    }
    cluster = KRaftCluster(tmp_path, controllers=1, brokers=2)
    for node in cluster.nodes:
        node.props.update(security)
    for broker in cluster.brokers.values():
        broker.props.update(
            {"listeners": "INTERNAL://127.0.0.1:0,CLIENT://127.0.0.1:0", "inter.broker.listener.name": "INTERNAL"}
        )
    cluster.start(60)
    try:
        bootstrap = ",".join(f"127.0.0.1:{b.ports['CLIENT']}" for b in cluster.brokers.values())
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("mtls", 2, 2, config={"min.insync.replicas": "2"})])["mtls"].result(30)

        def isr_complete() -> bool:
            parts = admin.list_topics("mtls", timeout=10).topics["mtls"].partitions
            return len(parts) == 2 and all(len(p.isrs) == 2 for p in parts.values())

        wait_until(isr_complete, 30, message="both replicas in every ISR")
        delivered: list = []
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(100):
            producer.produce("mtls", b"x", partition=i % 2, on_delivery=lambda e, m: delivered.append(e))
        producer.flush(30)
        assert len(delivered) == 100 and not any(delivered)
    finally:
        cluster.stop()
    for node in cluster.nodes:
        assert not [line for line in node.lines if "Failed authentication" in line], node.props["node.id"]
