"""Client quota configuration (KIP-546) against a real broker: kafka-configs for users, clients and ips,
DescribeClientQuotas / AlterClientQuotas on the wire (neither confluent-kafka 2.16 nor kafka-python has a
client-quota admin call), errors, and quotas surviving a restart (ClientQuotaRecords in the metadata log)."""

from __future__ import annotations

import io

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.tools import config_command
from tests.helpers.broker import BrokerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("quotas")).start()
    yield b
    b.stop()


def configs(broker, *args) -> tuple[int, str]:
    out = io.StringIO()
    rc = config_command.main(["--bootstrap-server", broker.bootstrap, *args], out=out)
    return rc, out.getvalue()


def test_kafka_configs_users_clients_ips(broker, capsys):
    assert configs(
        broker,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--add-config",
        "producer_byte_rate=1048576",
    ) == (0, "Completed updating config for user alice.\n")
    assert configs(
        broker, "--alter", "--entity-type", "users", "--entity-default", "--add-config", "consumer_byte_rate=20000000"
    ) == (0, "Completed updating default config for users in the cluster.\n")
    rc, out = configs(
        broker,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--entity-type",
        "clients",
        "--entity-default",
        "--add-config",
        "request_percentage=50,controller_mutation_rate=2.5",
    )
    assert (rc, out) == (0, "Completed updating config for user alice.\n")
    assert configs(broker, "--alter", "--client", "c1", "--add-config", "producer_byte_rate=1000") == (
        0,
        "Completed updating config for client c1.\n",
    )
    assert configs(broker, "--alter", "--ip-defaults", "--add-config", "connection_creation_rate=10") == (
        0,
        "Completed updating default config for ips in the cluster.\n",
    )

    rc, out = configs(broker, "--describe", "--entity-type", "users", "--entity-type", "clients")
    assert rc == 0
    assert out == (
        "Quota configs for user-principal 'alice', the default client-id are "
        "controller_mutation_rate=2.5, request_percentage=50.0\n"
    )
    rc, out = configs(broker, "--describe", "--entity-type", "users")
    assert rc == 0
    assert out.splitlines() == [
        "Quota configs for the default user-principal are consumer_byte_rate=2.0E7",
        "Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0",
    ]
    rc, out = configs(broker, "--describe", "--entity-type", "clients", "--entity-name", "c1")
    assert (rc, out) == (0, "Quota configs for client-id 'c1' are producer_byte_rate=1000.0\n")
    rc, out = configs(broker, "--describe", "--entity-type", "ips", "--entity-default")
    assert (rc, out) == (0, "Quota configs for the default ip are connection_creation_rate=10.0\n")

    # errors: an unknown key (tool), a key of another entity type (tool), a fractional LONG (broker), deleting
    # an absent key (tool)
    capsys.readouterr()
    assert configs(broker, "--alter", "--client", "c1", "--add-config", "bogus=1")[0] == 1
    assert "Only quota configs can be added for 'clients'" in capsys.readouterr().err
    assert configs(broker, "--alter", "--ip", "127.0.0.1", "--add-config", "producer_byte_rate=1")[0] == 1
    assert "Only connection quota configs can be added for 'ip'" in capsys.readouterr().err
    assert configs(broker, "--alter", "--client", "c1", "--add-config", "producer_byte_rate=1.5")[0] == 1
    assert "InvalidRequestError: producer_byte_rate cannot be a fractional value." in capsys.readouterr().err
    assert configs(broker, "--alter", "--client", "c1", "--delete-config", "consumer_byte_rate")[0] == 1
    assert "Invalid config(s): consumer_byte_rate" in capsys.readouterr().err

    assert configs(broker, "--alter", "--client", "c1", "--delete-config", "producer_byte_rate")[0] == 0
    assert configs(broker, "--describe", "--client", "c1") == (0, "")


def test_wire_errors(broker):
    with BrokerConnection.to(broker.bootstrap) as conn:
        for version in (0, 1):
            r = conn.request(
                ApiKeys.DESCRIBE_CLIENT_QUOTAS,
                version,
                {"components": [{"entity_type": "group", "match_type": 2, "match": None}], "strict": False},
            )
            assert (r["error_code"], r["error_message"], r["entries"]) == (
                errors.UNSUPPORTED_VERSION,
                "Unsupported entity type group",
                None,
            )
        r = conn.request(
            ApiKeys.DESCRIBE_CLIENT_QUOTAS,
            1,
            {"components": [{"entity_type": "user", "match_type": 0, "match": None}], "strict": True},
        )
        assert r["error_code"] == errors.INVALID_REQUEST
        entity = [{"entity_type": "user", "entity_name": "u"}, {"entity_type": "client-id", "entity_name": "c"}]
        r = conn.request(
            ApiKeys.ALTER_CLIENT_QUOTAS,
            1,
            {
                "entries": [
                    {"entity": entity, "ops": [{"key": "connection_creation_rate", "value": 1.0, "remove": False}]},
                    {
                        "entity": [{"entity_type": "user", "entity_name": "v"}],
                        "ops": [{"key": "producer_byte_rate", "value": 10.0, "remove": False}],
                    },
                ],
                "validate_only": True,
            },
        )
        assert [(e["error_code"], e["error_message"]) for e in r["entries"]] == [
            (errors.INVALID_REQUEST, "Invalid configuration key connection_creation_rate"),
            (errors.NONE, None),
        ]
        # validate_only wrote nothing
        r = conn.request(
            ApiKeys.DESCRIBE_CLIENT_QUOTAS,
            1,
            {"components": [{"entity_type": "user", "match_type": 0, "match": "v"}], "strict": False},
        )
        assert r["entries"] == []


def test_quotas_survive_restart(tmp_path):
    b = BrokerProcess(tmp_path).start()
    try:
        assert configs(b, "--alter", "--user", "carol", "--add-config", "producer_byte_rate=4096")[0] == 0
        b.restart()
        assert configs(b, "--describe", "--user", "carol")[1].splitlines()[0] == (
            "Quota configs for user-principal 'carol' are producer_byte_rate=4096.0"
        )
    finally:
        b.stop()
