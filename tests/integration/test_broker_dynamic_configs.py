"""Dynamic broker configs (IncrementalAlterConfigs on BROKER resources) reported by DescribeConfigs with
Kafka's sources and synonyms, and kafka-configs --alter/--describe/--delete-config on brokers."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.broker_configs import alter_broker_configs
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 2, 3, 4, 5
SET, DELETE = 0, 1


@pytest.fixture(scope="module")
def kafka(module_broker):
    return module_broker


def alter(kafka, name: str, *ops: tuple[str, int, str | None]) -> None:
    code, message = alter_broker_configs(kafka.bootstrap, name, *ops)
    assert code == errors.NONE, message


def describe(kafka, name: str, key: str) -> dict | None:
    with BrokerConnection.to(kafka.bootstrap, client_id="t") as conn:
        response = conn.request(
            ApiKeys.DESCRIBE_CONFIGS,
            4,
            {
                "resources": [{"resource_type": 4, "resource_name": name, "configuration_keys": [key]}],
                "include_synonyms": True,
                "include_documentation": False,
            },
        )
    [result] = response["results"]
    assert result["error_code"] == errors.NONE, result
    return next((c for c in result["configs"] if c["name"] == key), None)


def synonyms(entry: dict) -> list[tuple[int, str | None]]:
    return [(s["source"], s["value"]) for s in entry["synonyms"]]


def test_per_broker_and_default_dynamic_configs(kafka):
    key = "log.cleaner.min.cleanable.ratio"
    before = describe(kafka, "1", key)
    assert before["config_source"] == DEFAULT_CONFIG and before["value"] == "0.5"
    assert describe(kafka, "", key) is None

    alter(kafka, "", (key, SET, "0.3"))
    wait_until(lambda: describe(kafka, "1", key)["config_source"] == DYNAMIC_DEFAULT_BROKER_CONFIG)
    default = describe(kafka, "", key)
    assert (default["value"], default["config_source"], synonyms(default)) == (
        "0.3",
        DYNAMIC_DEFAULT_BROKER_CONFIG,
        [(DYNAMIC_DEFAULT_BROKER_CONFIG, "0.3")],
    )

    alter(kafka, "1", (key, SET, "0.2"))
    wait_until(lambda: describe(kafka, "1", key)["config_source"] == DYNAMIC_BROKER_CONFIG)
    entry = describe(kafka, "1", key)
    assert entry["value"] == "0.2" and entry["is_default"] is False and entry["read_only"] is False
    # Kafka's precedence order: per-broker, cluster default, static, default
    assert synonyms(entry) == [
        (DYNAMIC_BROKER_CONFIG, "0.2"),
        (DYNAMIC_DEFAULT_BROKER_CONFIG, "0.3"),
        (DEFAULT_CONFIG, "0.5"),
    ]

    alter(kafka, "1", (key, DELETE, None))
    wait_until(lambda: describe(kafka, "1", key)["config_source"] == DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert synonyms(describe(kafka, "1", key)) == [(DYNAMIC_DEFAULT_BROKER_CONFIG, "0.3"), (DEFAULT_CONFIG, "0.5")]
    alter(kafka, "", (key, DELETE, None))
    wait_until(lambda: describe(kafka, "1", key)["config_source"] == DEFAULT_CONFIG)
    assert describe(kafka, "", key) is None


def configs(kafka, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pykbroker.tools.config_command", "--bootstrap-server", kafka.bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_kafka_configs_describe_and_delete_broker_config(kafka):
    add = configs(
        kafka, "--alter", "--entity-type", "brokers", "--entity-name", "1", "--add-config", "log.retention.ms=7200000"
    )
    assert add.returncode == 0, add.stderr
    assert add.stdout == "Completed updating config for broker 1.\n"

    def dynamic() -> list[str]:
        return configs(kafka, "--describe", "--entity-type", "brokers", "--entity-name", "1").stdout.splitlines()

    wait_until(lambda: len(dynamic()) == 2)
    lines = dynamic()
    assert lines[0] == "Dynamic configs for broker 1 are:"
    assert lines[1].startswith(
        "  log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=7200000"
    ), lines
    delete = configs(
        kafka, "--alter", "--entity-type", "brokers", "--entity-name", "1", "--delete-config", "log.retention.ms"
    )
    assert delete.returncode == 0, delete.stderr
    wait_until(lambda: dynamic() == ["Dynamic configs for broker 1 are:"])


def test_dynamic_broker_configs_are_applied_to_the_running_broker(kafka):
    """message.max.bytes set as a cluster default takes effect at once for topics without their own
    max.message.bytes, and deleting it restores the static value (Kafka's DynamicLogConfig)."""
    from confluent_kafka import KafkaException, Producer

    from tests.helpers.topics import create_topic

    create_topic(kafka.bootstrap, "dyn-max-bytes", 1)

    def produce(size: int) -> None:
        p = Producer({"bootstrap.servers": kafka.bootstrap, "message.max.bytes": 1_000_000, "retries": 0})
        result = {}
        p.produce("dyn-max-bytes", b"x" * size, partition=0, on_delivery=lambda e, m: result.update(error=e))
        p.flush(15)
        if result.get("error") is not None:
            raise KafkaException(result["error"])

    produce(5000)
    alter(kafka, "", ("message.max.bytes", SET, "2000"))
    wait_until(lambda: describe(kafka, "1", "message.max.bytes")["value"] == "2000")

    def rejected() -> bool:
        try:
            produce(5000)
        except KafkaException as e:
            return e.args[0].code() == 10  # MSG_SIZE_TOO_LARGE from the broker
        return False

    wait_until(rejected, 10, message="the dynamic message.max.bytes applied")
    alter(kafka, "", ("message.max.bytes", DELETE, None))
    wait_until(lambda: not rejected(), 10, message="the static message.max.bytes back")


def test_configs_that_cannot_change_at_run_time_are_refused(kafka):
    with BrokerConnection.to(kafka.bootstrap, client_id="t") as conn:
        response = conn.request(
            ApiKeys.INCREMENTAL_ALTER_CONFIGS,
            1,
            {
                "resources": [
                    {
                        "resource_type": 4,
                        "resource_name": "",
                        "configs": [{"name": "log.dirs", "config_operation": SET, "value": "/elsewhere"}],
                    }
                ],
                "validate_only": False,
            },
        )
    [r] = response["responses"]
    assert r["error_code"] == errors.INVALID_REQUEST
    assert r["error_message"] == "Cannot update these configs dynamically: Set(log.dirs)"
    assert describe(kafka, "1", "num.io.threads")["read_only"] is False
    assert describe(kafka, "1", "log.dirs")["read_only"] is True


def alter_result(kafka, name: str, *ops: tuple[str, int, str | None]) -> tuple[int, str | None]:
    return alter_broker_configs(kafka.bootstrap, name, *ops)


def test_kafka_dynamic_broker_keys_per_broker_default_and_listener(kafka):
    """librdkafka's admin test sets sasl.kerberos.min.time.before.relogin on a broker with AlterConfigs: a key
    of Kafka's DynamicListenerConfig, accepted at run time (stored, described, no effect without Kerberos)."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    relogin = "sasl.kerberos.min.time.before.relogin"
    per_listener = f"listener.name.plaintext.{relogin}"
    # legacy AlterConfigs, as librdkafka's 0081-admin test
    legacy = ConfigResource(ResourceType.BROKER, "1", set_config={relogin: "58000"})
    admin.alter_configs([legacy])[legacy].result(30)
    wait_until(lambda: describe(kafka, "1", relogin)["config_source"] == DYNAMIC_BROKER_CONFIG)
    entry = describe(kafka, "1", relogin)
    assert (entry["value"], entry["read_only"], synonyms(entry)) == (
        "58000",
        False,
        [(DYNAMIC_BROKER_CONFIG, "58000"), (DEFAULT_CONFIG, "60000")],
    )

    # IncrementalAlterConfigs: per listener (per broker), and Kafka keys at the cluster default
    listener_res = ConfigResource(
        ResourceType.BROKER,
        "1",
        incremental_configs=[ConfigEntry(per_listener, "59000", incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([listener_res])[listener_res].result(30)
    # (confluent-kafka's client refuses the empty broker name of the cluster default: sent as is here)
    alter(
        kafka,
        "",
        ("log.cleaner.io.max.bytes.per.second", SET, "1000000.0"),
        ("listener.name.plaintext.max.connection.creation.rate", SET, "500"),
    )
    wait_until(lambda: describe(kafka, "1", per_listener) is not None)
    entry = describe(kafka, "1", per_listener)
    assert (entry["value"], entry["config_source"]) == ("59000", DYNAMIC_BROKER_CONFIG)
    # Kafka's brokerConfigSynonyms: the listener key, then its base key, in precedence order
    assert [(s["name"], s["source"], s["value"]) for s in entry["synonyms"]] == [
        (per_listener, DYNAMIC_BROKER_CONFIG, "59000"),
        (relogin, DYNAMIC_BROKER_CONFIG, "58000"),
        (relogin, DEFAULT_CONFIG, "60000"),
    ]
    wait_until(lambda: describe(kafka, "", "log.cleaner.io.max.bytes.per.second") is not None)
    default = describe(kafka, "", "log.cleaner.io.max.bytes.per.second")
    assert (default["value"], default["config_source"]) == ("1000000.0", DYNAMIC_DEFAULT_BROKER_CONFIG)
    rate = describe(kafka, "1", "listener.name.plaintext.max.connection.creation.rate")
    assert (rate["value"], rate["config_source"]) == ("500", DYNAMIC_DEFAULT_BROKER_CONFIG)

    # Kafka's refusals, INVALID_REQUEST with Kafka's messages
    assert alter_result(kafka, "1", ("broker.id", SET, "7")) == (
        errors.INVALID_REQUEST,
        "Cannot update these configs dynamically: Set(broker.id)",
    )
    assert alter_result(kafka, "", (relogin, SET, "1000")) == (
        errors.INVALID_REQUEST,
        f"Cannot update these configs at default cluster level, broker id must be specified: Set({relogin})",
    )
    assert alter_result(kafka, "1", ("ssl.keystore.location", SET, "/x.pem")) == (
        errors.INVALID_REQUEST,
        "These security configs can be dynamically updated only per-listener using the listener prefix: "
        "Set(ssl.keystore.location)",
    )
    assert alter_result(kafka, "1", (per_listener, SET, "soon")) == (
        errors.INVALID_REQUEST,
        f"Invalid value soon for configuration {relogin}: Not a number of type LONG",
    )
    assert alter_result(kafka, "1", ("num.io.threads", SET, "100")) == (
        errors.INVALID_REQUEST,
        "Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread count update validation "
        "failed for num.io.threads=100, value should not be greater than double the current value 4 for "
        "configuration Invalid dynamic configuration",
    )
    assert alter_result(kafka, "2", (relogin, SET, "1000")) == (
        errors.INVALID_REQUEST,
        "Unexpected broker id, expected 1, but received 2",
    )
    assert describe(kafka, "1", "broker.id")["read_only"] is True
    assert describe(kafka, "1", relogin)["value"] == "58000"  # nothing refused was stored

    # legacy AlterConfigs with no config clears the broker's own set; then the cluster default's
    cleared = ConfigResource(ResourceType.BROKER, "1", set_config={})
    admin.alter_configs([cleared])[cleared].result(30)
    alter(
        kafka,
        "",
        ("log.cleaner.io.max.bytes.per.second", DELETE, None),
        ("listener.name.plaintext.max.connection.creation.rate", DELETE, None),
    )
    wait_until(lambda: describe(kafka, "1", relogin)["config_source"] == DEFAULT_CONFIG)
    wait_until(lambda: describe(kafka, "", "log.cleaner.io.max.bytes.per.second") is None)
