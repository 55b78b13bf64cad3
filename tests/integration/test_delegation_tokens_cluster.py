"""Delegation tokens (KIP-48) in a 3-node cluster (1 controller, 2 brokers; SASL_PLAINTEXT everywhere, the
StandardAuthorizer): a broker forwards CreateDelegationToken / RenewDelegationToken / ExpireDelegationToken to the
controller in an Envelope with the client's principal (the controller records alice as owner and requester and
checks owner/renewer by that principal), every broker replays the DelegationTokenRecords into its token cache, so a
token created through one broker logs in and is described on the other, and expiring it ends its logins there."""

from __future__ import annotations

import base64

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
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" '
    'user_bob="bob-secret";'
)
ALICE = ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "alice", "alice-secret")
BOB = ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "bob", "bob-secret")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    security = {
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS,
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.internal.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.internal.plain.sasl.jaas.config": PLAIN_JAAS,
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "false",
        "delegation.token.master.key": "cluster-secret",  # the deprecated alias works too
    }
    cluster = KRaftCluster(tmp_path_factory.mktemp("tokens-cluster"), controllers=1, brokers=2)
    for node in cluster.nodes:
        node.props.update(security)
    for broker in cluster.brokers.values():
        broker.props.update({"listeners": "INTERNAL://127.0.0.1:0", "inter.broker.listener.name": "INTERNAL"})
    cluster.start(60)
    yield cluster
    cluster.stop()


def _broker(cluster, node: int, security: ClientSecurity) -> BrokerConnection:
    return BrokerConnection("127.0.0.1", cluster.brokers[node].ports["INTERNAL"], security=security, timeout=15)


def _token_login(cluster, node: int, token_id: str, hmac_b64: str) -> bool:
    security = ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-512", token_id, hmac_b64, token_auth=True)
    try:
        with _broker(cluster, node, security) as conn:
            # the token session may not use the token APIs, at the broker before anything is forwarded
            r = conn.request(ApiKeys.EXPIRE_DELEGATION_TOKEN, 2, {"hmac": b"x", "expiry_time_period_ms": -1})
            assert r["error_code"] == errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    except errors.SaslAuthenticationError:
        return False
    return True


def _describe(cluster, node: int, security: ClientSecurity) -> list[dict]:
    with _broker(cluster, node, security) as conn:
        r = conn.request(ApiKeys.DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None})
    assert r["error_code"] == errors.NONE, r
    return r["tokens"]


def test_tokens_are_forwarded_replicated_and_used_on_every_broker(cluster):
    with _broker(cluster, 101, ALICE) as alice:
        # creating a token for someone else needs CREATE_TOKENS on that user (checked by the broker)
        r = alice.request(
            ApiKeys.CREATE_DELEGATION_TOKEN,
            3,
            {"owner_principal_type": "User", "owner_principal_name": "bob", "renewers": [], "max_lifetime_ms": -1},
        )
        assert r["error_code"] == errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED
        created = alice.request(ApiKeys.CREATE_DELEGATION_TOKEN, 3, {"renewers": [], "max_lifetime_ms": 3_600_000})
    assert created["error_code"] == errors.NONE, created
    # the controller saw alice (the Envelope's principal), not the forwarding broker's admin
    assert (created["principal_name"], created["token_requester_principal_name"]) == ("alice", "alice")
    token_id, hmac = created["token_id"], created["hmac"]
    hmac_b64 = base64.b64encode(hmac).decode()

    # the other broker has it: describe and token login
    wait_until(lambda: [t["token_id"] for t in _describe(cluster, 102, ALICE)] == [token_id], timeout=15)
    assert _describe(cluster, 102, BOB) == []  # neither owner nor renewer, no DESCRIBE ACL
    assert _token_login(cluster, 102, token_id, hmac_b64)

    # renew / expire through broker 102: bob is no renewer; alice renews and expires
    with _broker(cluster, 102, BOB) as bob:
        r = bob.request(ApiKeys.RENEW_DELEGATION_TOKEN, 2, {"hmac": hmac, "renew_period_ms": -1})
        assert r["error_code"] == errors.DELEGATION_TOKEN_OWNER_MISMATCH
    with _broker(cluster, 102, ALICE) as alice:
        r = alice.request(ApiKeys.RENEW_DELEGATION_TOKEN, 2, {"hmac": hmac, "renew_period_ms": 60_000})
        assert r["error_code"] == errors.NONE and r["expiry_timestamp_ms"] > created["issue_timestamp_ms"]
        r = alice.request(ApiKeys.EXPIRE_DELEGATION_TOKEN, 2, {"hmac": hmac, "expiry_time_period_ms": -1})
        assert r["error_code"] == errors.NONE
        r = alice.request(ApiKeys.EXPIRE_DELEGATION_TOKEN, 2, {"hmac": hmac, "expiry_time_period_ms": -1})
        assert r["error_code"] == errors.DELEGATION_TOKEN_NOT_FOUND
    wait_until(lambda: not _token_login(cluster, 101, token_id, hmac_b64), timeout=15, message="token still logs in")
    assert _describe(cluster, 101, ALICE) == []
