"""SASL/OAUTHBEARER (KIP-255, KIP-768) with real clients: one broker with a SASL_PLAINTEXT listener in Kafka's
unsecured-JWS mode and an OIDC listener validating signed JWTs against the JWKS of an identity provider the test
starts on 127.0.0.1 (tests/helpers/oauth.py); the StandardAuthorizer checks the token's principal.

confluent-kafka logs in with librdkafka's unsecured JWT (``sasl.oauthbearer.config=principal=...``) and with its
OIDC client (``sasl.oauthbearer.method=oidc``: client credentials at the provider's token endpoint); kafka-python
and aiokafka with a token provider. Expired, wrong-audience, wrong-issuer, wrong-signature and unsigned tokens are
refused with Kafka's answer (the ``{"status":"invalid_token"}`` challenge, then SASL_AUTHENTICATION_FAILED with it)
and the reason in the broker's log; a key published later in the JWKS is picked up (refresh on an unknown ``kid``);
a broker whose JWKS cannot be read does not start."""

from __future__ import annotations

import asyncio
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

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.security.client_security import client_security
from tests.helpers.broker import BrokerProcess
from tests.helpers.oauth import (
    AUDIENCE,
    IdentityProvider,
    initial_response,
    sasl_authenticate,
    unsecured_token,
)
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

OIDC_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
INVALID = '{"status":"invalid_token"}'


@pytest.fixture(scope="module")
def idp():
    provider = IdentityProvider({"svc-alice": "alice-secret"})
    yield provider
    provider.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory, idp):
    b = BrokerProcess(
        tmp_path_factory.mktemp("oauthbearer"),
        listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,OIDC://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
    )
    b.props.update(
        {
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,OIDC:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"
            ),
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": LOGIN_MODULE,
            "listener.name.oidc.oauthbearer.sasl.jaas.config": LOGIN_MODULE,
            "listener.name.oidc.oauthbearer.sasl.server.callback.handler.class": OIDC_HANDLER,
            "listener.name.oidc.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": f"{idp.url}/jwks",
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.expected.issuer": idp.issuer,
            "sasl.oauthbearer.clock.skew.seconds": "5",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",  # the PLAINTEXT listener: inter-broker traffic and this test's admin
        }
    )
    b.start()
    yield b
    b.stop()


def _allow(broker, principal: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    bindings = [
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW)
        for op in (AclOperation.WRITE, AclOperation.READ)
    ]
    bindings.append(AclBinding(ResourceType.GROUP, "oauth-", ResourcePatternType.PREFIXED, principal, "*",
                               AclOperation.READ, AclPermissionType.ALLOW))  # fmt: skip
    for future in admin.create_acls(bindings).values():
        future.result(15)


def _unsecured_conf(broker, principal: str) -> dict:
    return {
        "bootstrap.servers": f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": f"principal={principal}",
    }


def _oidc_conf(broker, idp, client_id: str, secret: str) -> dict:
    return {
        "bootstrap.servers": f"127.0.0.1:{broker.ports['OIDC']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": client_id,
        "sasl.oauthbearer.client.secret": secret,
        "sasl.oauthbearer.token.endpoint.url": f"{idp.url}/token",
    }


def _produce(conf: dict, topic: str, values: list[bytes]) -> KafkaError | None:
    result: dict = {}
    p = Producer({**conf, "retries": 0, "message.timeout.ms": 8000})
    for v in values:
        p.produce(topic, v, partition=0, on_delivery=lambda e, m: result.setdefault("error", e))
    p.flush(10)
    return result.get("error")


def _consume(conf: dict, topic: str, n: int) -> list[bytes]:
    c = Consumer({**conf, "group.id": f"oauth-{uuid.uuid4()}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.time() + 20
    while time.time() < deadline and len(got) < n:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    return got


def test_unsecured_jws_with_acls_on_the_principal(broker):
    topic = "oauth-unsecured"
    create_topic(broker.bootstrap, topic, 1)
    alice = _unsecured_conf(broker, "alice")
    refused = _produce(alice, topic, [b"x"])
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, refused
    _allow(broker, "User:alice", topic)
    values = [f"u{i}".encode() for i in range(20)]
    wait_until(lambda: _produce(alice, topic, values) is None, 15, message="alice may write")
    assert _consume(alice, topic, 20)[:20] == values
    # Another principal is still refused: the principal is the token's sub.
    bob = _produce(_unsecured_conf(broker, "bob"), topic, [b"y"])
    assert bob is not None and bob.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_oidc_client_credentials_produce_and_consume(broker, idp):
    topic = "oauth-oidc"
    create_topic(broker.bootstrap, topic, 1)
    _allow(broker, "User:svc-alice", topic)
    conf = _oidc_conf(broker, idp, "svc-alice", "alice-secret")
    values = [f"o{i}".encode() for i in range(20)]
    wait_until(lambda: _produce(conf, topic, values) is None, 15, message="svc-alice may write")
    assert "POST /token" in idp.requests and "GET /jwks" in idp.requests
    got = _consume(conf, topic, 20)
    assert got[:20] == values

    # kafka-python with a token provider (the same provider's tokens).
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        def token(self):
            return idp.mint(sub="svc-alice")

    kc = KafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{broker.ports['OIDC']}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=Provider(),
        enable_auto_commit=False,
    )
    kc.assign([KTP(topic, 0)])
    kc.seek_to_beginning()
    seen: list[bytes] = []
    deadline = time.time() + 20
    while time.time() < deadline and len(seen) < 20:
        for records in kc.poll(500).values():
            seen += [r.value for r in records]
    kc.close()
    assert seen[:20] == values

    # aiokafka with an async token provider produces.
    from aiokafka import AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider as AsyncTokenProvider

    class AsyncProvider(AsyncTokenProvider):
        async def token(self):
            return idp.mint(sub="svc-alice")

    async def aio_produce() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=f"127.0.0.1:{broker.ports['OIDC']}",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=AsyncProvider(),
        )
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"from-aiokafka", partition=0)
        finally:
            await producer.stop()

    asyncio.run(aio_produce())
    assert _consume(conf, topic, 21)[20:] == [b"from-aiokafka"]


def test_wrong_client_secret_fails_authentication(broker, idp):
    errors_seen: list = []
    p = Producer({**_oidc_conf(broker, idp, "svc-alice", "wrong"), "error_cb": errors_seen.append})
    p.produce("oauth-oidc", b"x")
    wait_until(lambda: p.poll(0.2) >= 0 and bool(errors_seen), 15, message="an error")
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors_seen), errors_seen


def _refused(port: int, token: str) -> list[dict]:
    return sasl_authenticate(port, "OAUTHBEARER", [initial_response(token)])


def test_bad_tokens_are_refused_with_kafkas_answer(broker, idp):
    from cryptography.hazmat.primitives.asymmetric import rsa

    port = broker.ports["OIDC"]
    ok = _refused(port, idp.mint(sub="svc-alice"))
    assert [(r["error_code"], bytes(r["auth_bytes"])) for r in ok] == [(0, b"")]  # a good token passes
    now = int(time.time())
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cases = {
        "expired": (idp.mint(exp=now - 60, iat=now - 120), "Signature has expired"),
        "wrong audience": (idp.mint(aud="not-kafka"), "Audience doesn't match"),
        "wrong issuer": (idp.mint(iss="https://evil.example"), "Invalid issuer"),
        "wrong signature": (idp.mint(key=other_key), "Signature verification failed"),
        "unsigned": (unsecured_token(aud=AUDIENCE, iss=idp.issuer), "signature section missing"),
    }
    for name, (token, reason) in cases.items():
        start = len(broker.lines)
        challenge, failure = _refused(port, token)
        assert (challenge["error_code"], bytes(challenge["auth_bytes"])) == (0, INVALID.encode()), name
        assert (failure["error_code"], failure["error_message"]) == (58, INVALID), name
        assert broker.wait_for_line(reason, 10, start) is not None, name
        assert broker.wait_for_line("Failed authentication with /127.0.0.1", 10, start) is not None, name
    # The unsecured listener refuses an expired unsigned token the same way.
    challenge, failure = _refused(broker.ports["SASL_PLAINTEXT"], unsecured_token(lifetime_s=-60))
    assert bytes(challenge["auth_bytes"]) == INVALID.encode() and failure["error_code"] == 58
    # A malformed client initial response gets Kafka's generic message.
    [bad] = sasl_authenticate(port, "OAUTHBEARER", [b"n,,garbage"])
    assert (bad["error_code"], bad["error_message"]) == (
        58,
        "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER",
    )


def test_a_rotated_key_is_fetched_on_an_unknown_kid(broker, idp):
    idp.rotate("k2")
    token = idp.mint(sub="svc-alice", kid="k2")
    port = broker.ports["OIDC"]
    start = len(broker.lines)
    first = _refused(port, token)  # the JWKS is refreshed hourly: k2 is unknown, the token refused, a refresh due
    assert len(first) == 2 and first[1]["error_message"] == INVALID
    assert broker.wait_for_line("Unable to find a suitable verification key for JWS w/ header {kid=k2", 10, start)
    wait_until(lambda: _refused(port, token)[-1]["error_code"] == 0, 15, message="k2 is fetched")


def test_the_broker_does_not_start_without_its_jwks(tmp_path):
    """Kafka's OAuthBearerValidatorCallbackHandler fails the broker's start when the JWKS cannot be read (after
    the retries of sasl.oauthbearer.jwks.endpoint.retry.backoff.*)."""
    closed = IdentityProvider()
    url = f"{closed.url}/jwks"
    closed.close()  # nothing listens there any more
    b = BrokerProcess(tmp_path, listeners="PLAINTEXT://127.0.0.1:0,OIDC://127.0.0.1:0,CONTROLLER://127.0.0.1:0")
    b.props.update(
        {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OIDC:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.oidc.oauthbearer.sasl.jaas.config": LOGIN_MODULE,
            "listener.name.oidc.oauthbearer.sasl.server.callback.handler.class": OIDC_HANDLER,
            "sasl.oauthbearer.jwks.endpoint.url": url,
            "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "300",
        }
    )
    with pytest.raises(RuntimeError) as e:
        b.start(timeout=20)
    assert "Invalid OAUTHBEARER configuration of listener OIDC" in str(e.value)
    assert f"could not read the JWKS from {url}" in str(e.value)


def test_nodes_log_in_with_oauthbearer(tmp_path, idp):
    """The node's own clients use OAUTHBEARER: the controller listener validates OIDC tokens and the node gets
    its own from the provider (client credentials, OAuthBearerLoginCallbackHandler): registration is authorized
    as User:svc-broker, the only super user besides the PLAINTEXT test admin; the inter-broker listener takes
    unsecured tokens the node makes from unsecuredLoginStringClaim_sub."""
    idp.clients["svc-broker"] = "broker-secret"
    login = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
    b = BrokerProcess(tmp_path, listeners="PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0")
    b.props.update(
        {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
            "sasl.mechanism.controller.protocol": "OAUTHBEARER",
            "listener.name.internal.oauthbearer.sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                'unsecuredLoginStringClaim_sub="svc-broker";'
            ),
            "listener.name.controller.oauthbearer.sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                'clientId="svc-broker" clientSecret="broker-secret";'
            ),
            "listener.name.controller.oauthbearer.sasl.server.callback.handler.class": OIDC_HANDLER,
            "listener.name.controller.oauthbearer.sasl.login.callback.handler.class": login,
            "sasl.oauthbearer.token.endpoint.url": f"{idp.url}/token",
            "sasl.oauthbearer.jwks.endpoint.url": f"{idp.url}/jwks",
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.expected.issuer": idp.issuer,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:svc-broker;User:ANONYMOUS",
        }
    )
    fetched = idp.requests.count("POST /token")
    b.start()
    try:
        assert idp.requests.count("POST /token") > fetched  # the node's own login
        assert not b.wait_for_line("Failed authentication", 1)
        create_topic(b.bootstrap, "oauth-nodes", 1)  # through the controller: the broker's registration worked
        assert _produce({"bootstrap.servers": b.bootstrap}, "oauth-nodes", [b"x"]) is None
        originals = dict(b.props)
        security = client_security(originals, "INTERNAL", "SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol")
        with BrokerConnection("127.0.0.1", b.ports["INTERNAL"], security=security, timeout=10) as conn:
            metadata = conn.request(ApiKeys.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
            assert [x["node_id"] for x in metadata["brokers"]] == [1]
        # A node whose token the controller refuses: the exchange fails with Kafka's answer.
        stranger = {**originals, "listener.name.internal.oauthbearer.sasl.jaas.config": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'unsecuredLoginStringClaim_sub="x" unsecuredLoginLifetimeSeconds="-60";')}  # fmt: skip
        expired = client_security(stranger, "INTERNAL", "SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol")
        with pytest.raises(errors.SaslAuthenticationError, match="invalid_token"):
            BrokerConnection("127.0.0.1", b.ports["INTERNAL"], security=expired, timeout=10)
    finally:
        b.stop()
