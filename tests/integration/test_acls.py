"""ACLs with the StandardAuthorizer: a SASL user gets TOPIC_AUTHORIZATION_FAILED on produce and
GROUP_AUTHORIZATION_FAILED on a group until kafka-acls (or the Admin API) allows it; the ACLs live in the
metadata log and survive a restart; super.users bypass them."""

from __future__ import annotations

import io
import socket
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from pykbroker.tools import acl_command
from tests.helpers.broker import BrokerProcess
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-secret" user_alice="alice-secret";'
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    plain, sasl, controller = _free_port(), _free_port(), _free_port()
    broker = BrokerProcess(
        tmp_path_factory.mktemp("acls"),
        listeners=f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},CONTROLLER://127.0.0.1:{controller}",
    )
    broker.props.update(
        {
            "controller.quorum.voters": f"1@127.0.0.1:{controller}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # The PLAINTEXT listener (inter-broker traffic, this test's admin) is ANONYMOUS.
            "super.users": "User:admin;User:ANONYMOUS",
            "allow.everyone.if.no.acl.found": "false",
        }
    )
    broker.start()
    yield broker
    broker.stop()


def _alice(broker) -> dict:
    return {
        "bootstrap.servers": f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }


def _produce(conf: dict, topic: str) -> KafkaError | None:
    result: dict = {}
    p = Producer({**conf, "retries": 0, "message.timeout.ms": 8000})
    p.produce(topic, b"v", partition=0, on_delivery=lambda e, m: result.update(error=e))
    p.flush(10)
    return result.get("error")


def _consume_with_group(conf: dict, topic: str, group: str) -> tuple[int, list]:
    errs: list = []
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "error_cb": errs.append})
    c.subscribe([topic])
    got = 0
    deadline = time.time() + 15
    while time.time() < deadline and not got:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            errs.append(m.error())
            if m.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                break
            continue
        got += 1
    c.close()
    return got, errs


def _acls(broker, *args: str) -> str:
    out = io.StringIO()
    assert acl_command.main(["--bootstrap-server", broker.bootstrap, *args], out) == 0
    return out.getvalue()


def test_alice_needs_acls_and_they_survive_a_restart(secured):
    create_topic(secured.bootstrap, "acl-t", 1)
    assert _produce(_alice(secured), "acl-t").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    _, errs = _consume_with_group(_alice(secured), "acl-t", "acl-g")
    assert any(
        e.code() in (KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED) for e in errs
    ), errs

    added = _acls(secured, "--add", "--allow-principal", "User:alice", "--operation", "Write", "--operation", "Read",
                  "--topic", "acl-t")  # fmt: skip
    assert added.startswith(
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=acl-t, patternType=LITERAL)`:"
    )
    assert "\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in added
    wait_until(lambda: _produce(_alice(secured), "acl-t") is None, 15, message="alice may write")
    got, errs = _consume_with_group(_alice(secured), "acl-t", "acl-g")
    assert not got and any(e.code() == KafkaError.GROUP_AUTHORIZATION_FAILED for e in errs), errs
    # The group ACL through the Admin API this time.
    admin = AdminClient({"bootstrap.servers": secured.bootstrap})
    binding = AclBinding(ResourceType.GROUP, "acl-", ResourcePatternType.PREFIXED, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)  # fmt: skip
    admin.create_acls([binding])[binding].result(15)
    wait_until(
        lambda: _consume_with_group(_alice(secured), "acl-t", f"acl-{uuid.uuid4()}")[0] == 1, 20, message="reads"
    )

    listed = _acls(secured, "--list", "--topic", "acl-t")
    assert "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=acl-t, patternType=LITERAL)`:" in listed
    secured.stop()
    secured.start()
    assert _acls(secured, "--list", "--topic", "acl-t") == listed
    assert _produce(_alice(secured), "acl-t") is None
    # A DENY wins over the ALLOW; removing it gives the access back.
    _acls(secured, "--add", "--deny-principal", "User:alice", "--operation", "Write", "--topic", "acl-t")
    wait_until(
        lambda: (_produce(_alice(secured), "acl-t") or KafkaError(0)).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED,
        15,
    )
    _acls(secured, "--remove", "--force", "--deny-principal", "User:alice", "--operation", "Write", "--topic", "acl-t")
    wait_until(lambda: _produce(_alice(secured), "acl-t") is None, 15, message="deny removed")


def test_metadata_hides_topics_alice_may_not_describe(secured):
    create_topic(secured.bootstrap, "acl-secret", 1)
    admin = AdminClient(_alice(secured))
    topics = admin.list_topics(timeout=10).topics
    assert "acl-secret" not in topics
    su = AdminClient({**_alice(secured), "sasl.username": "admin", "sasl.password": "admin-secret"})
    assert "acl-secret" in su.list_topics(timeout=10).topics


def test_group_and_config_apis_follow_the_acls(secured):
    from pykbroker.clients.broker_connection import BrokerConnection
    from pykbroker.protocol.api_keys import ApiKeys

    create_topic(secured.bootstrap, "acl-cfg", 1)
    alice = AdminClient(_alice(secured))
    # DescribeConfigs of a topic without DESCRIBE_CONFIGS, DescribeGroups, DeleteGroups: refused for alice.
    from confluent_kafka.admin import ConfigResource

    with pytest.raises(Exception) as raised:
        alice.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "acl-cfg")])[
            ConfigResource(ConfigResource.Type.TOPIC, "acl-cfg")
        ].result(10)
    assert "TOPIC_AUTHORIZATION_FAILED" in str(raised.value) or "authorization" in str(raised.value).lower()
    described = alice.describe_consumer_groups(["no-acl-group"])["no-acl-group"]
    with pytest.raises(Exception) as raised:
        described.result(10)
    assert "GROUP_AUTHORIZATION_FAILED" in str(raised.value) or "authorization" in str(raised.value).lower()
    # The super user (ANONYMOUS on PLAINTEXT) sees every group; ListOffsets needs DESCRIBE on the topic.
    with BrokerConnection.to(secured.bootstrap) as c:
        r = c.request(
            ApiKeys.LIST_OFFSETS,
            7,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": "acl-cfg",
                        "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}],
                    }
                ],
            },
        )
        assert r["topics"][0]["partitions"][0]["error_code"] == 0
    _acls(secured, "--add", "--allow-principal", "User:alice", "--operation", "DescribeConfigs", "--topic", "acl-cfg")
    wait_until(
        lambda: (
            alice.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "acl-cfg")])[
                ConfigResource(ConfigResource.Type.TOPIC, "acl-cfg")
            ].exception(10)
            is None
        ),
        15,
        message="DescribeConfigs allowed",
    )


def test_describe_topic_partitions_follows_the_acls(secured):
    from pykbroker.clients.broker_connection import BrokerConnection
    from pykbroker.protocol import errors
    from pykbroker.protocol.api_keys import ApiKeys
    from pykbroker.security.client_security import client_security

    create_topic(secured.bootstrap, "acl-dtp-open", 1)
    create_topic(secured.bootstrap, "acl-dtp-hidden", 1)
    _acls(secured, "--add", "--allow-principal", "User:alice", "--operation", "Describe", "--topic", "acl-dtp-open")
    originals = {
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
        'password="alice-secret";',
    }
    alice = client_security(originals, "SASL_PLAINTEXT", "SASL_PLAINTEXT", "sasl.mechanism")

    def describe(names):
        with BrokerConnection.to(f"127.0.0.1:{secured.ports['SASL_PLAINTEXT']}", security=alice) as conn:
            body = {"topics": [{"name": n} for n in names], "response_partition_limit": 2000, "cursor": None}
            return conn.request(ApiKeys.DESCRIBE_TOPIC_PARTITIONS, 0, body)["topics"]

    # Listing every topic leaves out those alice may not describe (earlier tests granted her others).
    wait_until(
        lambda: [t["name"] for t in describe([]) if t["name"].startswith("acl-dtp-")] == ["acl-dtp-open"],
        15,
        message="alice sees acl-dtp-open only",
    )
    named = describe(["acl-dtp-hidden", "acl-dtp-open"])
    assert [(t["name"], t["error_code"]) for t in named] == [
        ("acl-dtp-open", errors.NONE),
        ("acl-dtp-hidden", errors.TOPIC_AUTHORIZATION_FAILED),  # refused topics last, without their id
    ]
    assert named[1]["topic_id"].int == 0 and named[0]["topic_authorized_operations"] == 1 << 8  # DESCRIBE only


def test_authorized_operations_come_from_the_acls(secured):
    from confluent_kafka import TopicCollection

    create_topic(secured.bootstrap, "acl-ops", 1)
    alice = AdminClient(_alice(secured))
    _acls(secured, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "acl-ops")
    _acls(secured, "--add", "--allow-principal", "User:alice", "--operation", "Describe", "--group", "ops-only-g")

    def topic_ops():
        desc = alice.describe_topics(TopicCollection(["acl-ops"]), include_authorized_operations=True)["acl-ops"]
        return set(desc.result(10).authorized_operations or [])

    # READ implies DESCRIBE (Kafka's implied operations); nothing else is granted.
    wait_until(lambda: topic_ops() == {AclOperation.READ, AclOperation.DESCRIBE}, 15, message="topic ops")
    cluster = alice.describe_cluster(include_authorized_operations=True).result(10)
    assert not cluster.authorized_operations
    su = AdminClient({**_alice(secured), "sasl.username": "admin", "sasl.password": "admin-secret"})
    everything = su.describe_cluster(include_authorized_operations=True).result(10).authorized_operations
    assert AclOperation.ALTER in everything and AclOperation.DESCRIBE in everything
    group = alice.describe_consumer_groups(["ops-only-g"], include_authorized_operations=True)["ops-only-g"]
    assert set(group.result(10).authorized_operations or []) == {AclOperation.DESCRIBE}


def test_offset_for_leader_epoch_and_delete_topics_by_id(secured):
    from pykbroker.clients.broker_connection import BrokerConnection
    from pykbroker.protocol import errors
    from pykbroker.protocol.api_keys import ApiKeys
    from pykbroker.security.client_security import ClientSecurity

    create_topic(secured.bootstrap, "acl-epoch", 1)
    create_topic(secured.bootstrap, "acl-del", 1)
    alice = ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "alice", "alice-secret")

    def ofle(conn, replica_id: int) -> dict:
        body = {
            "replica_id": replica_id,
            "topics": [{"topic": "acl-epoch", "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}],
        }  # fmt: skip
        return conn.request(ApiKeys.OFFSET_FOR_LEADER_EPOCH, 4, body)

    def delete_by_id(conn, topic_id) -> int:
        body = {"topics": [{"name": None, "topic_id": topic_id}], "timeout_ms": 10000}
        return conn.request(ApiKeys.DELETE_TOPICS, 6, body)["responses"][0]["error_code"]

    port = secured.ports["SASL_PLAINTEXT"]
    with BrokerConnection("127.0.0.1", port, security=alice, timeout=10) as conn:
        part = ofle(conn, -1)["topics"][0]["partitions"][0]
        assert part["error_code"] == errors.TOPIC_AUTHORIZATION_FAILED
        assert ofle(conn, 5)["topics"][0]["partitions"][0]["error_code"] == errors.CLUSTER_AUTHORIZATION_FAILED
    with BrokerConnection.to(secured.bootstrap) as admin:  # super user: CLUSTER_ACTION covers it
        assert ofle(admin, -1)["topics"][0]["partitions"][0]["error_code"] == errors.NONE
        metadata = admin.request(ApiKeys.METADATA, 12, {"topics": [{"name": "acl-del", "topic_id": uuid.UUID(int=0)}],
                                                        "allow_auto_topic_creation": False,
                                                        "include_topic_authorized_operations": False})  # fmt: skip
        topic_id = metadata["topics"][0]["topic_id"]
    _acls(secured, "--add", "--allow-principal", "User:alice", "--operation", "Describe", "--topic", "acl-epoch")
    with BrokerConnection("127.0.0.1", port, security=alice, timeout=10) as conn:
        wait_until(lambda: ofle(conn, -1)["topics"][0]["partitions"][0]["error_code"] == errors.NONE, 15)
        # DeleteTopics by id is checked under the topic's name.
        assert delete_by_id(conn, topic_id) == errors.TOPIC_AUTHORIZATION_FAILED
    _acls(secured, "--add", "--allow-principal", "User:alice", "--operation", "Delete", "--topic", "acl-del")
    with BrokerConnection("127.0.0.1", port, security=alice, timeout=10) as conn:
        wait_until(lambda: delete_by_id(conn, topic_id) in (errors.NONE, errors.UNKNOWN_TOPIC_ID), 15)


def test_kafka_acls_grants_token_operations_on_a_user_principal(secured):
    # Kafka's AclOperation CREATE_TOKENS (13) / DESCRIBE_TOKENS (14) on a USER resource (kafka-acls --user-principal).
    added = _acls(secured, "--add", "--allow-principal", "User:alice", "--operation", "CreateTokens",
                  "--operation", "DescribeTokens", "--user-principal", "User:bob")  # fmt: skip
    assert added.startswith(
        "Adding ACLs for resource `ResourcePattern(resourceType=USER, name=User:bob, patternType=LITERAL)`:"
    )
    for operation in ("CREATE_TOKENS", "DESCRIBE_TOKENS"):
        assert f"\t(principal=User:alice, host=*, operation={operation}, permissionType=ALLOW)" in added
    # The broker stored them under Kafka's codes: listing them shows them back by name.
    wait_until(lambda: "User:bob" in _acls(secured, "--list", "--user-principal", "User:bob"), 15, message="listed")
    listed = _acls(secured, "--list", "--user-principal", "User:bob")
    assert "ResourcePattern(resourceType=USER, name=User:bob, patternType=LITERAL)" in listed
    assert "operation=CREATE_TOKENS" in listed and "operation=DESCRIBE_TOKENS" in listed
    admin = AdminClient({"bootstrap.servers": secured.bootstrap})
    from confluent_kafka.admin import AclBindingFilter

    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)  # fmt: skip
    stored = [b for b in admin.describe_acls(everything).result(15) if b.name == "User:bob"]
    assert len(stored) == 2, stored
    _acls(secured, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "CreateTokens",
          "--operation", "DescribeTokens", "--user-principal", "User:bob")  # fmt: skip
    wait_until(lambda: "User:bob" not in _acls(secured, "--list"), 15, message="removed")


def test_partition_reassignment_apis_need_alter_and_describe_on_the_cluster(secured):
    """AlterPartitionReassignments needs ALTER, ListPartitionReassignments DESCRIBE on the cluster (Kafka's
    KafkaApis / ControllerApis): CLUSTER_AUTHORIZATION_FAILED at the top level and for every partition."""
    from pykbroker.clients.broker_connection import BrokerConnection
    from pykbroker.protocol import errors
    from pykbroker.protocol.api_keys import ApiKeys
    from pykbroker.security.client_security import ClientSecurity

    create_topic(secured.bootstrap, "acl-moving", 1)
    alice = ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "alice", "alice-secret")
    port = secured.ports["SASL_PLAINTEXT"]

    def alter(conn) -> tuple[int, int]:
        body = {"timeout_ms": 10000, "topics": [{"name": "acl-moving", "partitions": [
            {"partition_index": 0, "replicas": None}]}]}  # fmt: skip
        r = conn.request(ApiKeys.ALTER_PARTITION_REASSIGNMENTS, 0, body)
        return r["error_code"], r["responses"][0]["partitions"][0]["error_code"]

    def list_(conn) -> int:
        return conn.request(ApiKeys.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 10000, "topics": None})[
            "error_code"
        ]

    with BrokerConnection("127.0.0.1", port, security=alice, timeout=10) as conn:
        denied = errors.CLUSTER_AUTHORIZATION_FAILED
        assert alter(conn) == (denied, denied)
        assert list_(conn) == denied
    _acls(secured, "--add", "--allow-principal", "User:alice", "--operation", "Alter", "--operation", "Describe",
          "--cluster")  # fmt: skip
    with BrokerConnection("127.0.0.1", port, security=alice, timeout=10) as conn:
        wait_until(lambda: list_(conn) == errors.NONE, 15)
        assert alter(conn) == (errors.NONE, errors.NO_REASSIGNMENT_IN_PROGRESS)
