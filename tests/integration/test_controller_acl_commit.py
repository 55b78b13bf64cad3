"""ACL changes on a controller-only node become effective for its authorizer only once the quorum commits them
(Kafka's controller authorizer is fed by the AclPublisher from committed metadata, not by the records the active
controller has written).

Three SASL/PLAIN controllers, the StandardAuthorizer with ``super.users=User:admin``. The two followers are stopped
(SIGSTOP; a long ``controller.quorum.fetch.timeout.ms`` keeps the leader active meanwhile), admin asks the leader to
allow alice CREATE on topics "z*": the leader writes the ACL record but cannot commit it, so alice's CreateTopics to
that controller is still refused (before, the controller authorized with the records it had replayed: alice was
authorized and her create waited for the commit). That a committed ACL authorizes the forwarded principal at the
controller is shown by tests/integration/test_envelope_forwarding.py.
"""

from __future__ import annotations

import os
import signal

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
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


def _create(name: str) -> dict:
    topic = {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
    return {"topics": [topic], "timeout_ms": 300, "validate_only": False}


def _log_state(port: int) -> tuple[int, int]:
    """``(high watermark, the leader's log end offset)`` as the leader at ``port`` reports them (DescribeQuorum)."""
    quorum = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
    with BrokerConnection("127.0.0.1", port, security=ADMIN, timeout=15) as conn:
        partition = conn.request(ApiKeys.DESCRIBE_QUORUM, 2, quorum)["topics"][0]["partitions"][0]
    leader = next(v for v in partition["current_voters"] if v["replica_id"] == partition["leader_id"])
    return partition["high_watermark"], leader["log_end_offset"]


def _leader(cluster) -> int:
    """The active controller: the one that answers DescribeQuorum (as admin; the others say NOT_LEADER), or -1."""
    quorum = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
    for port in cluster.controller_ports.values():
        with BrokerConnection("127.0.0.1", port, security=ADMIN, timeout=15) as conn:
            response = conn.request(ApiKeys.DESCRIBE_QUORUM, 2, quorum)
        partition = response["topics"][0]["partitions"][0] if response["topics"] else {"error_code": -1}
        if partition["error_code"] == errors.NONE and partition["leader_id"] >= 0:
            return partition["leader_id"]
    return -1


def test_an_acl_is_effective_on_a_controller_only_once_committed(tmp_path):
    cluster = KRaftCluster(tmp_path, controllers=3, brokers=0)
    for node in cluster.nodes:
        node.props.update(
            {
                "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT",
                "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
                "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS,
                "sasl.mechanism.controller.protocol": "PLAIN",
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:admin",
                "allow.everyone.if.no.acl.found": "false",
                "controller.quorum.fetch.timeout.ms": "6000",  # the isolated leader stays active ~9 s
            }
        )
    cluster.start(60)
    stopped = []
    try:
        leader = wait_until(lambda: max(_leader(cluster), 0), timeout=30, message="no active controller")
        port = cluster.controller_ports[leader]
        with BrokerConnection("127.0.0.1", port, security=ALICE, timeout=15) as alice:
            assert alice.request(ApiKeys.CREATE_TOPICS, 7, _create("z0"))["topics"][0]["error_code"] == (
                errors.TOPIC_AUTHORIZATION_FAILED
            )
            for i, node in cluster.controllers.items():
                if i != leader:
                    os.kill(node.proc.pid, signal.SIGSTOP)
                    stopped.append(node)
            acl = {"resource_type": 2, "resource_name": "z", "resource_pattern_type": 4, "principal": "User:alice",
                   "host": "*", "operation": 5, "permission_type": 3}  # fmt: skip
            admin = BrokerConnection("127.0.0.1", port, security=ADMIN, timeout=15)
            admin.send(ApiKeys.CREATE_ACLS, 3, {"creations": [acl]})  # written by the leader, not committable
            # the leader has written the ACL record: its log ends past the high watermark, which cannot move
            wait_until(lambda: (lambda hw, leo: leo > hw)(*_log_state(port)), timeout=10, message="no ACL record")
            codes: list = []
            with BrokerConnection("127.0.0.1", port, security=ALICE, timeout=5) as probe:
                for _ in range(3):
                    try:
                        response = probe.request(ApiKeys.CREATE_TOPICS, 7, _create("z1"))
                    except TimeoutError:  # authorized, and the controller's answer waits for the commit
                        codes.append("authorized (no answer before the commit)")
                        break
                    codes.append(response["topics"][0]["error_code"])
            assert set(codes) == {errors.TOPIC_AUTHORIZATION_FAILED}, codes
            admin.close()
    finally:
        for node in stopped:
            os.kill(node.proc.pid, signal.SIGCONT)
        cluster.stop()
