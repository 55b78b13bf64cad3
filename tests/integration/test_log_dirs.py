"""bin/kafka-log-dirs (DescribeLogDirs, key 35) against a real broker: Kafka's output, sizes that grow
after producing, --topic-list and --broker-list."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kafka(module_broker):
    return module_broker


def log_dirs(kafka, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pykbroker.tools.log_dirs_command", "--bootstrap-server", kafka.bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def describe(kafka, *args: str) -> dict:
    run = log_dirs(kafka, "--describe", *args)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[:2] == [
        "Querying brokers for log directories information",
        "Received log directory information from brokers 1",
    ]
    assert len(lines) == 3, run.stdout
    return json.loads(lines[2])


def sizes(report: dict) -> dict[str, int]:
    [broker] = report["brokers"]
    [log_dir] = broker["logDirs"]
    return {p["partition"]: p["size"] for p in log_dir["partitions"]}


def produce(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, b"value-%d" % i, partition=0)
    assert p.flush(30) == 0


def test_describe_all_then_sizes_grow(kafka):
    create_topic(kafka.bootstrap, "ld-a", 2)
    create_topic(kafka.bootstrap, "ld-b", 1)
    wait_until(lambda: {"ld-a-0", "ld-a-1", "ld-b-0"} <= set(sizes(describe(kafka))), message="logs created")
    report = describe(kafka)
    assert report["version"] == 1
    [broker] = report["brokers"]
    assert broker["broker"] == 1
    [log_dir] = broker["logDirs"]
    assert log_dir["error"] is None
    assert log_dir["logDir"] == os.path.abspath(kafka.props["log.dirs"])
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in log_dir["partitions"])
    before = sizes(report)
    assert before["ld-a-0"] == 0
    produce(kafka.bootstrap, "ld-a", 20)
    after = sizes(describe(kafka))
    assert after["ld-a-0"] > 0
    assert after["ld-a-1"] == before["ld-a-1"] == 0
    # Kafka's JSON: Jackson over HashMaps, compact
    raw = log_dirs(kafka, "--describe", "--topic-list", "ld-b").stdout.splitlines()[2]
    assert raw == (
        '{"brokers":[{"broker":1,"logDirs":[{"partitions":[{"partition":"ld-b-0","size":0,"offsetLag":0,'
        f'"isFuture":false}}],"error":null,"logDir":{json.dumps(log_dir["logDir"])}}}]}}],"version":1}}'
    )


def test_topic_list_filters_partitions(kafka):
    create_topic(kafka.bootstrap, "ld-c", 1)
    wait_until(lambda: "ld-c-0" in sizes(describe(kafka)), message="log created")
    assert set(sizes(describe(kafka, "--topic-list", "ld-c,nope"))) == {"ld-c-0"}


def test_unknown_broker_is_an_error(kafka):
    run = log_dirs(kafka, "--describe", "--broker-list", "1,5")
    assert run.returncode == 1
    assert run.stdout == ""
    assert run.stderr.strip() == (
        "ERROR: The given brokers do not exist from --broker-list: 5. Current existent brokers: 1"
    )
    assert describe(kafka, "--broker-list", "1")["brokers"][0]["broker"] == 1


def test_describe_is_required(kafka):
    run = log_dirs(kafka)
    assert run.returncode == 1
    assert "--describe" in run.stderr
