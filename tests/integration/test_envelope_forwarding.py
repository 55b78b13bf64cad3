"""KIP-590 Envelope forwarding in a 3-node cluster (1 controller, 2 brokers): the client's principal, address and
client id reach the controller.

Every listener is SASL_PLAINTEXT with PLAIN; ``super.users=User:admin`` (the nodes log in as admin), the
StandardAuthorizer with nothing allowed without an ACL; alice may only CREATE topics whose name starts with "a".
Brokers forward CreateTopics, AlterClientQuotas, CreateAcls ... to the controller wrapped in an Envelope; the
controller authorizes the forwarded principal, applies the controller mutation quota per the client's id, and only
the inter-broker principal may send an Envelope.
"""

from __future__ import annotations

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import codec, decode_response, encode_request_header, errors, request_schema
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.security.client_security import ClientSecurity
from tests.helpers.cluster import KRaftCluster
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)
ADMIN = ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "admin", "admin-secret")
ALICE = ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "alice", "alice-secret")
TOPIC, PREFIXED, CREATE, ALLOW = 2, 4, 5, 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("envelope")
    security = {
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS,
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": PLAIN_JAAS,
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "false",
        "quota.window.num": "2",
        "quota.window.size.seconds": "1",
    }
    cluster = KRaftCluster(root, controllers=1, brokers=2)
    for node in cluster.nodes:
        node.props.update(security)
    for broker in cluster.brokers.values():
        broker.props.update({"listeners": "INTERNAL://127.0.0.1:0", "inter.broker.listener.name": "INTERNAL"})
    cluster.start(60)
    with _broker(cluster, 101, ADMIN) as admin:
        acl = {"resource_type": TOPIC, "resource_name": "a", "resource_pattern_type": PREFIXED,
               "principal": "User:alice", "host": "*", "operation": CREATE, "permission_type": ALLOW}  # fmt: skip
        result = admin.request(ApiKeys.CREATE_ACLS, 3, {"creations": [acl]})["results"][0]
        assert result["error_code"] == errors.NONE, result
    yield cluster
    cluster.stop()


def _broker(cluster, node: int, security: ClientSecurity, client_id: str = "pykbroker") -> BrokerConnection:
    return BrokerConnection(
        "127.0.0.1", cluster.brokers[node].ports["INTERNAL"], client_id=client_id, security=security, timeout=15
    )


def _controller(cluster, security: ClientSecurity) -> BrokerConnection:
    return BrokerConnection("127.0.0.1", cluster.controller_ports[1], security=security, timeout=15)


def _create(name: str, partitions: int = 1) -> dict:
    topic = {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
    return {"topics": [topic], "timeout_ms": 10000, "validate_only": False}


def _topics(cluster, node: int) -> set[str]:
    with _broker(cluster, node, ADMIN) as c:
        meta = c.request(ApiKeys.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
    return {t["name"] for t in meta["topics"] if t["error_code"] == errors.NONE}


def test_client_principal_is_authorized_at_the_controller(cluster):
    """alice (CREATE on prefix "a" only) creates a1 through a broker that is not the controller; b1 is refused."""
    with _broker(cluster, 101, ALICE) as alice:
        codes: list[int] = []

        def created() -> bool:  # the ACL reaches the broker's metadata image shortly after it is committed
            codes[:] = [alice.request(ApiKeys.CREATE_TOPICS, 7, _create("a1"))["topics"][0]["error_code"]]
            return codes[0] in (errors.NONE, errors.TOPIC_ALREADY_EXISTS)

        wait_until(created, timeout=15, message="alice could not create a1")
        refused = alice.request(ApiKeys.CREATE_TOPICS, 7, _create("b1"))["topics"][0]
        assert refused["error_code"] == errors.TOPIC_AUTHORIZATION_FAILED
    wait_until(lambda: "a1" in _topics(cluster, 102), timeout=15)
    assert "b1" not in _topics(cluster, 102)


def _principal(kind: str, name: str) -> bytes:
    """DefaultPrincipalData v0 with its int16 version prefix (Kafka's KafkaPrincipalSerde), written out by hand."""
    compact = lambda s: bytes([len(s) + 1]) + s.encode()  # noqa: E731 - a compact string shorter than 127 bytes
    return b"\x00\x00" + compact(kind) + compact(name) + b"\x00" + b"\x00"  # token_authenticated, no tags


def build_envelope(api_key: int, version: int, correlation_id: int, client_id: str, body: dict, principal: str,
                   address: bytes) -> dict:  # fmt: skip
    header = encode_request_header(api_key, version, correlation_id, client_id)
    kind, _, name = principal.partition(":")
    return {
        "request_data": codec.encode(request_schema(api_key), version, body, header=header),
        "request_principal": _principal(kind, name),
        "client_host_address": address,
    }


def unwrap_response(api_key: int, version: int, envelope: dict) -> dict:
    data = envelope["response_data"]
    return decode_response(api_key, version, memoryview(data)[5:])  # int32 correlation id, empty tagged fields


def _envelope(conn: BrokerConnection, envelope: dict) -> dict:
    return conn.request(ApiKeys.ENVELOPE, 0, envelope)


def test_the_controller_authorizes_the_forwarded_principal(cluster):
    """An Envelope the inter-broker principal (admin) sends carrying alice's CreateTopics: the controller decides as
    alice (a2 created, b2 TOPIC_AUTHORIZATION_FAILED), not as the sender; the answer is the inner response."""
    with _controller(cluster, ADMIN) as conn:
        results = {}
        for name in ("a2", "b2"):
            env = build_envelope(
                ApiKeys.CREATE_TOPICS, 7, 42, "alice-app", _create(name), "User:alice", b"\x0a\x01\x02\x03"
            )
            response = _envelope(conn, env)
            assert response["error_code"] == errors.NONE
            results[name] = unwrap_response(ApiKeys.CREATE_TOPICS, 7, response)["topics"][0]["error_code"]
    assert results == {"a2": errors.NONE, "b2": errors.TOPIC_AUTHORIZATION_FAILED}
    wait_until(lambda: "a2" in _topics(cluster, 101), timeout=15)


def test_only_the_inter_broker_principal_may_send_an_envelope(cluster):
    """alice on the controller listener: CLUSTER_AUTHORIZATION_FAILED (Kafka: CLUSTER_ACTION is required), nothing
    created; an Envelope on a broker's client listener is not an API it serves: the connection is closed."""
    env = build_envelope(ApiKeys.CREATE_TOPICS, 7, 1, "x", _create("a3"), "User:admin", b"\x7f\x00\x00\x01")
    with _controller(cluster, ALICE) as conn:
        response = _envelope(conn, env)
    assert response == {"response_data": None, "error_code": errors.CLUSTER_AUTHORIZATION_FAILED}
    with _broker(cluster, 101, ADMIN) as conn, pytest.raises((ConnectionError, OSError)):
        _envelope(conn, env)
    assert "a3" not in _topics(cluster, 102)


def test_malformed_envelopes_get_kafkas_errors(cluster):
    """Bad principal bytes: PRINCIPAL_DESERIALIZATION_FAILURE; a client address that is not 4 or 16 bytes and a
    forwarded API that is not forwardable: INVALID_REQUEST; inner bytes that do not parse: UNSUPPORTED_VERSION. The
    connection stays usable after each."""
    good = build_envelope(ApiKeys.CREATE_TOPICS, 7, 1, "x", _create("a4"), "User:alice", b"\x7f\x00\x00\x01")
    metadata = encode_request_header(ApiKeys.METADATA, 12, 1, "x") + b"\x01\x00\x00\x00"
    cases = [
        ({**good, "request_principal": b"\x00\x07junk"}, errors.PRINCIPAL_DESERIALIZATION_FAILURE),
        ({**good, "request_principal": None}, errors.PRINCIPAL_DESERIALIZATION_FAILURE),
        ({**good, "client_host_address": b"\x01\x02\x03"}, errors.INVALID_REQUEST),
        ({**good, "request_data": metadata}, errors.INVALID_REQUEST),
        ({**good, "request_data": good["request_data"][:12]}, errors.UNSUPPORTED_VERSION),
        ({**good, "request_data": b"\x00"}, errors.UNSUPPORTED_VERSION),
    ]
    with _controller(cluster, ADMIN) as conn:
        for envelope, code in cases:
            assert _envelope(conn, envelope) == {"response_data": None, "error_code": code}, envelope
        assert _envelope(conn, good)["error_code"] == errors.NONE


def test_controller_mutation_quota_applies_to_the_forwarded_client(cluster):
    """controller_mutation_rate=5 for client id "mut" (burst 5 x 2 windows x 1 s = 10 partitions): a CreateTopics
    v7 loop (4 partitions a topic) through a broker that is not the controller gets THROTTLING_QUOTA_EXCEEDED with a
    throttle time; every topic it was told was created is real, the refused one is not."""
    quota = {"entity": [{"entity_type": "client-id", "entity_name": "mut"}],
             "ops": [{"key": "controller_mutation_rate", "value": 5.0, "remove": False}]}  # fmt: skip
    with _broker(cluster, 102, ADMIN) as admin:
        entry = admin.request(ApiKeys.ALTER_CLIENT_QUOTAS, 1, {"entries": [quota], "validate_only": False})
        assert entry["entries"][0]["error_code"] == errors.NONE, entry
    created, refused, throttle_ms = [], None, 0
    with _broker(cluster, 101, ADMIN, client_id="mut") as conn:
        for i in range(60):
            name = f"q{i}"
            response = conn.request(ApiKeys.CREATE_TOPICS, 7, _create(name, partitions=4))
            result = response["topics"][0]
            if result["error_code"] == errors.THROTTLING_QUOTA_EXCEEDED:
                refused, throttle_ms = name, response["throttle_time_ms"]
                break
            assert result["error_code"] == errors.NONE, result
            created.append(name)
    assert refused is not None, f"never throttled after {len(created)} topics"
    assert throttle_ms > 0
    wait_until(lambda: set(created) <= _topics(cluster, 102), timeout=15)
    assert refused not in _topics(cluster, 102)
