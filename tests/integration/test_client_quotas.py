"""Client quota configuration (KIP-546) against a real broker: kafka-configs for users, clients and ips,
DescribeClientQuotas / AlterClientQuotas on the wire (neither confluent-kafka 2.16 nor kafka-python has a
client-quota admin call), errors, and quotas surviving a restart (ClientQuotaRecords in the metadata log)."""

from __future__ import annotations

import io
import time

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.types import ZERO_UUID
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from pykbroker.tools import config_command
from tests.helpers.broker import BrokerProcess
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until


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


# -- enforcement (KIP-219) ------------------------------------------------------------------------------------


def _big_batch(n: int, size: int) -> bytearray:
    b = MemoryRecordsBuilder()
    now = int(time.time() * 1000)
    for i in range(n):
        b.append(now, b"k%d" % i, b"x" * size)
    return bytearray(b.build())


def _produce(conn: BrokerConnection, topic: str, records) -> dict:
    return conn.request(
        ApiKeys.PRODUCE,
        9,
        {
            "transactional_id": None,
            "acks": 1,
            "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
        },
    )


@pytest.fixture(scope="module")
def quota_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("quota-enforce"), quota_window_num="2").start()
    yield b
    b.stop()


def test_client_ignoring_throttle_time_gains_nothing(quota_broker):
    """A raw client over its producer_byte_rate gets throttle_time_ms and its channel stays muted that long:
    its next request (even an ApiVersions) is answered only after the throttle."""
    create_topic(quota_broker.bootstrap, "raw-quota", partitions=1)
    assert configs(quota_broker, "--alter", "--client", "raw", "--add-config", "producer_byte_rate=100000")[0] == 0
    with BrokerConnection.to(quota_broker.bootstrap, client_id="raw") as conn:
        wait_until(
            lambda: _produce(conn, "raw-quota", _big_batch(1, 10))["throttle_time_ms"] == 0, 10, message="quota seen"
        )

        def throttled_once() -> int:
            return _produce(conn, "raw-quota", _big_batch(30, 10_000))["throttle_time_ms"]

        throttle_ms = 0
        deadline = time.monotonic() + 15
        while throttle_ms == 0 and time.monotonic() < deadline:
            throttle_ms = throttled_once()
        # 300 KB in one window of at least 1 s against 100 KB/s: about 2 s
        assert 1000 <= throttle_ms <= 4000
        started = time.monotonic()
        versions = conn.request(ApiKeys.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        waited_ms = (time.monotonic() - started) * 1000
        assert versions["error_code"] == 0
        assert waited_ms >= throttle_ms * 0.8, (waited_ms, throttle_ms)
    # an unlimited client on the same broker is answered at once
    with BrokerConnection.to(quota_broker.bootstrap, client_id="free") as conn:
        assert _produce(conn, "raw-quota", _big_batch(30, 10_000))["throttle_time_ms"] == 0


def test_fetch_over_quota_is_throttled(quota_broker):
    create_topic(quota_broker.bootstrap, "fetch-quota", partitions=1)
    with BrokerConnection.to(quota_broker.bootstrap, client_id="filler") as conn:
        for _ in range(3):
            _produce(conn, "fetch-quota", _big_batch(10, 10_000))
    assert configs(quota_broker, "--alter", "--client", "reader", "--add-config", "consumer_byte_rate=50000")[0] == 0
    topic_id = None
    with BrokerConnection.to(quota_broker.bootstrap, client_id="reader") as conn:
        md = conn.request(
            ApiKeys.METADATA, 12, {"topics": [{"name": "fetch-quota", "topic_id": ZERO_UUID}],
                                   "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
        )  # fmt: skip
        topic_id = md["topics"][0]["topic_id"]

        def fetch(offset: int) -> dict:
            return conn.request(
                ApiKeys.FETCH, 13,
                {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 10_000_000, "isolation_level": 0,
                 "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
                 "topics": [{"topic_id": topic_id, "partitions": [
                     {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
                      "log_start_offset": -1, "partition_max_bytes": 10_000_000}]}]},
            )  # fmt: skip

        throttles = []
        deadline = time.monotonic() + 15
        while not any(throttles) and time.monotonic() < deadline:
            r = fetch(0)
            throttles.append(r["throttle_time_ms"])
        assert any(throttles), throttles
        assert r["responses"] == []  # a throttled fetch is answered empty


def test_limited_producer_keeps_its_rate_and_the_other_is_not_starved(tmp_path):
    """Two confluent-kafka producers flood one broker; ``producer_byte_rate`` = 1 MiB/s on one client id: over
    10 s of steady state it delivers 1 MiB/s within 20% and sees throttle times, the other keeps at least 70% of
    the rate it has alone on the same broker (measured just before)."""
    from bench.quota_fairness import measure

    b = BrokerProcess(tmp_path, quota_window_num="3").start()
    try:
        figures = measure(b.bootstrap, 1048576, seconds=10, warmup=3)
    finally:
        b.stop()
    limited, free = figures["limited"], figures["free"]
    assert 0.8 * 1048576 <= limited["bytes_per_s"] <= 1.2 * 1048576, figures
    assert limited["throttle_events"] > 0 and limited["max_throttle_s"] > 0, figures
    assert free["throttle_events"] == 0 and free["bytes_per_s"] >= 0.7 * figures["free alone"]["bytes_per_s"], figures
