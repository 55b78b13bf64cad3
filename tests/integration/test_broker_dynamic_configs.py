"""Dynamic broker configs (IncrementalAlterConfigs on BROKER resources) reported by DescribeConfigs with
Kafka's sources and synonyms, and kafka-configs --alter/--describe/--delete-config on brokers."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 2, 3, 4, 5
SET, DELETE = 0, 1


@pytest.fixture(scope="module")
def kafka(module_broker):
    return module_broker


def alter(kafka, name: str, *ops: tuple[str, int, str | None]) -> None:
    with BrokerConnection.to(kafka.bootstrap, client_id="t") as conn:
        response = conn.request(
            ApiKeys.INCREMENTAL_ALTER_CONFIGS,
            1,
            {
                "resources": [
                    {
                        "resource_type": 4,
                        "resource_name": name,
                        "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops],
                    }
                ],
                "validate_only": False,
            },
        )
    assert [r["error_code"] for r in response["responses"]] == [errors.NONE], response


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
