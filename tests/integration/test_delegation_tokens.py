"""Delegation tokens (KIP-48) end to end on a SASL_PLAINTEXT (SCRAM) broker with ``delegation.token.secret.key``
and the StandardAuthorizer: ``kafka-delegation-tokens`` creates, describes, renews and expires tokens; a client logs
in over SCRAM-SHA-512 / -256 with the token id and hmac and the ``tokenauth=true`` extension and acts as the token's
owner (ACLs); such a session may not use the token APIs; an expired or removed token is refused.

The token logins use pykbroker's own SCRAM client (BrokerConnection): librdkafka (confluent-kafka) cannot send SCRAM
extensions, so it has no delegation token login (its ``sasl.oauthbearer.extensions`` are OAUTHBEARER's)."""

from __future__ import annotations

import base64
import io
import os
import subprocess
import sys
import time

import pytest
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
from pykbroker.security.client_security import ClientSecurity
from pykbroker.tools import acl_command, delegation_token_command
from tests.helpers.broker import ROOT, BrokerProcess
from tests.helpers.topics import create_topic, record_batch
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

TOPIC = "tokens-topic"
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("tokens")
    b = BrokerProcess(data, listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0")
    b.props.update(
        {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "delegation.token.secret.key": "token-secret",
            "delegation.token.expiry.check.interval.ms": "500",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin;User:ANONYMOUS",  # the PLAINTEXT listeners are ANONYMOUS
            "allow.everyone.if.no.acl.found": "false",
        }
    )
    b.write_config()
    scram = [a for user, pw in USERS.items() for a in ("--add-scram", f"SCRAM-SHA-512=[name={user},password={pw}]")]
    formatted = subprocess.run(
        [sys.executable, "-m", "pykbroker.tools.storage_tool", "format", "-t", "MkU3OEVBNTcwNTJENDM2Qk",
         "-c", str(b.config_path), *scram],
        capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60,
    )  # fmt: skip
    assert formatted.returncode == 0, formatted.stderr
    b.start()
    create_topic(b.bootstrap, TOPIC, 1)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    acls = [
        AclBinding(
            ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*", op, AclPermissionType.ALLOW
        )
        for op in (AclOperation.WRITE, AclOperation.DESCRIBE)
    ]
    for f in admin.create_acls(acls).values():
        f.result(30)
    for user in USERS:  # each user's properties file for the tool
        (data / f"{user}.properties").write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{USERS[user]}";\n'
        )
    b.tool_dir = data
    yield b
    b.stop()


def sasl_address(broker) -> tuple[str, int]:
    return "127.0.0.1", broker.ports["SASL_PLAINTEXT"]


def tool(broker, user: str, *args: str, capsys=None) -> tuple[int, str, str]:
    """kafka-delegation-tokens as ``user`` (in this process): (exit code, stdout, stderr)."""
    out = io.StringIO()
    host, port = sasl_address(broker)
    argv = ["--bootstrap-server", f"{host}:{port}", "--command-config", str(broker.tool_dir / f"{user}.properties")]
    code = delegation_token_command.main([*argv, *args], out=out)
    err = capsys.readouterr().err if capsys is not None else ""
    return code, out.getvalue(), err


def created(output: str) -> tuple[str, str]:
    """(token id, base64 hmac) from the create command's table."""
    line = output.strip().splitlines()[-1].split()
    return line[0], line[1]


def token_connection(broker, token_id: str, hmac_b64: str, mechanism: str = "SCRAM-SHA-512") -> BrokerConnection:
    security = ClientSecurity("SASL_PLAINTEXT", None, mechanism, token_id, hmac_b64, token_auth=True)
    return BrokerConnection(*sasl_address(broker), security=security, timeout=10)


def produce(conn: BrokerConnection) -> int:
    r = conn.request(
        ApiKeys.PRODUCE,
        9,
        {
            "transactional_id": None,
            "acks": 1,
            "timeout_ms": 5000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": record_batch(2)}]}],
        },
    )
    return r["responses"][0]["partition_responses"][0]["error_code"]


def login_fails(broker, token_id: str, hmac_b64: str) -> bool:
    try:
        token_connection(broker, token_id, hmac_b64).close()
    except errors.SaslAuthenticationError:
        return True
    return False


def test_create_login_describe_renew_expire(broker, capsys):
    code, out, err = tool(broker, "alice", "--create", "--max-life-time-period", "-1", "--renewer-principal",
                          "User:bob", capsys=capsys)  # fmt: skip
    assert code == 0, err
    assert out.startswith("Calling create token operation with renewers :[User:bob] , max-life-time-period :-1\n")
    assert "Created delegation token with tokenId : " in out
    assert out.split("\n\n")[1].split() == [
        "TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE", "MAXDATE",
    ]  # fmt: skip
    token_id, hmac_b64 = created(out)
    assert out.strip().splitlines()[-1].split()[2:5] == ["User:alice", "User:alice", "[User:bob]"]
    assert len(base64.b64decode(hmac_b64)) == 64  # HMAC-SHA512

    # the token logs in (both SCRAM mechanisms) as its owner alice, who may write the topic
    wait_until(lambda: not login_fails(broker, token_id, hmac_b64), message="the token login never worked")
    for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
        with token_connection(broker, token_id, hmac_b64, mechanism) as conn:
            assert produce(conn) == errors.NONE
            # a token session may not create (nor renew, expire, describe) tokens
            r = conn.request(ApiKeys.CREATE_DELEGATION_TOKEN, 3, {"renewers": [], "max_lifetime_ms": -1})
            assert r["error_code"] == errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
            r = conn.request(ApiKeys.DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None})
            assert r["error_code"] == errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    # the token id is no user without the extension; a wrong hmac fails
    with pytest.raises(errors.SaslAuthenticationError):
        BrokerConnection(
            *sasl_address(broker),
            security=ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-512", token_id, hmac_b64),
            timeout=10,
        )
    assert login_fails(broker, token_id, base64.b64encode(b"x" * 64).decode())
    # token APIs need SASL: PLAINTEXT is refused
    with BrokerConnection.to(broker.bootstrap) as plain:
        r = plain.request(ApiKeys.CREATE_DELEGATION_TOKEN, 3, {"renewers": [], "max_lifetime_ms": -1})
        assert r["error_code"] == errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED

    # describe: the owner and the renewer see it, admin (super user) too, the owner filter applies
    for user in ("alice", "bob", "admin"):
        code, out, err = tool(broker, user, "--describe", capsys=capsys)
        assert code == 0, err
        assert "Total number of tokens : 1" in out and token_id in out, (user, out)
    code, out, _ = tool(broker, "admin", "--describe", "--owner-principal", "User:carol", capsys=capsys)
    assert out.startswith("Calling describe token operation for owners: [User:carol]\nTotal number of tokens : 0")

    # renew: by the renewer; admin is neither owner nor renewer
    code, out, err = tool(broker, "bob", "--renew", "--hmac", hmac_b64, "--renew-time-period", "60000", capsys=capsys)
    assert code == 0, err
    assert f"Calling renew token operation with hmac :{hmac_b64} , renew-time-period :60000" in out
    expected = time.strftime("%Y-%m-%dT%H:%M", time.localtime(time.time() + 60))
    assert "Completed renew operation. New expiry date : " in out
    assert out.strip().rsplit(" ", 1)[1][:13] == expected[:13]
    code, out, err = tool(broker, "admin", "--renew", "--hmac", hmac_b64, "--renew-time-period", "-1", capsys=capsys)
    assert code == 1 and "DelegationTokenOwnerMismatchException" in err

    # expire now: the token is gone, its login refused, renewing it NOT_FOUND
    code, out, err = tool(broker, "alice", "--expire", "--hmac", hmac_b64, "--expiry-time-period", "-1", capsys=capsys)
    assert code == 0, err
    assert "Completed expire operation. New expiry date : " in out
    wait_until(lambda: login_fails(broker, token_id, hmac_b64), message="the expired token still logs in")
    code, out, err = tool(broker, "alice", "--renew", "--hmac", hmac_b64, "--renew-time-period", "-1", capsys=capsys)
    assert code == 1 and "DelegationTokenNotFoundException" in err


def test_token_for_another_owner_acts_as_the_owner(broker, capsys):
    # alice may not create tokens for bob (no CREATE_TOKENS on User:bob); admin may
    code, _, err = tool(broker, "alice", "--create", "--max-life-time-period", "-1", "--owner-principal", "User:bob",
                        capsys=capsys)  # fmt: skip
    assert code == 1 and "DelegationTokenAuthorizationException" in err
    code, out, err = tool(broker, "admin", "--create", "--max-life-time-period", "-1", "--owner-principal", "User:bob",
                          capsys=capsys)  # fmt: skip
    assert code == 0, err
    token_id, hmac_b64 = created(out)
    assert out.strip().splitlines()[-1].split()[2:4] == ["User:bob", "User:admin"]
    wait_until(lambda: not login_fails(broker, token_id, hmac_b64), message="the token login never worked")
    with token_connection(broker, token_id, hmac_b64) as conn:
        # bob has no WRITE on the topic: the session is bob's, not admin's (the requester's)
        assert produce(conn) == errors.TOPIC_AUTHORIZATION_FAILED
    # with CreateTokens on User:bob alice may create bob's tokens; Describe on a token shows it to her
    assert tool(broker, "alice", "--describe", capsys=capsys)[1].count("User:bob") == 0
    for resource in (["--user-principal", "User:bob", "--operation", "CreateTokens"],
                     ["--delegation-token", token_id, "--operation", "Describe"]):  # fmt: skip
        acl_argv = ["--bootstrap-server", broker.bootstrap, "--add", "--allow-principal", "User:alice", *resource]
        assert acl_command.main(acl_argv, out=io.StringIO()) == 0
    wait_until(lambda: token_id in tool(broker, "alice", "--describe", capsys=capsys)[1], message="no Describe ACL")
    code, out, err = tool(broker, "alice", "--create", "--max-life-time-period", "-1", "--owner-principal", "User:bob",
                          capsys=capsys)  # fmt: skip
    assert code == 0, err
    assert out.strip().splitlines()[-1].split()[2:4] == ["User:bob", "User:alice"]

    # bob owns them: he sees and expires them (a broker answers Describe from its token cache, which applies the
    # controller's record of the second token a moment after CreateDelegationToken is answered, as in Kafka)
    def bobs_two_tokens():
        out = tool(broker, "bob", "--describe", "--owner-principal", "User:bob", capsys=capsys)[1]
        return out if "Total number of tokens : 2" in out else None

    out = wait_until(bobs_two_tokens, message="bob never saw both his tokens")
    assert token_id in out
    code, _, err = tool(broker, "bob", "--expire", "--hmac", hmac_b64, "--expiry-time-period", "-1", capsys=capsys)
    assert code == 0, err


def test_expired_token_is_refused_and_swept(broker, capsys):
    code, out, err = tool(broker, "alice", "--create", "--max-life-time-period", "2000", capsys=capsys)
    assert code == 0, err
    token_id, hmac_b64 = created(out)
    wait_until(lambda: not login_fails(broker, token_id, hmac_b64), message="the token login never worked")
    # past its max lifetime the controller's sweep (every 500 ms here) removes it
    wait_until(lambda: login_fails(broker, token_id, hmac_b64), timeout=15, message="the token was never swept")
    code, out, _ = tool(broker, "alice", "--describe", capsys=capsys)
    assert token_id not in out
    code, _, err = tool(broker, "alice", "--renew", "--hmac", hmac_b64, "--renew-time-period", "-1", capsys=capsys)
    assert code == 1 and "DelegationTokenNotFoundException" in err


def test_usage_errors(broker):
    """Kafka's argument checks, in the tool's own process (exit 1 with the usage)."""
    tool_cmd = [
        sys.executable,
        "-m",
        "pykbroker.tools.delegation_token_command",
        "--bootstrap-server",
        broker.bootstrap,
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run(tool_cmd, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 1
    assert "Command must include exactly one action: --create, --renew, --expire or --describe" in r.stderr
    r = subprocess.run([*tool_cmd, "--command-config", "x", "--renew"], capture_output=True, text=True, env=env,
                       timeout=60)  # fmt: skip
    assert r.returncode == 1 and 'Missing required argument "[hmac]"' in r.stderr
