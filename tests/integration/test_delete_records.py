"""DeleteRecords (API 21) and bin/kafka-delete-records against a real broker, driven by confluent-kafka."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.topics import create_topic

pytestmark = pytest.mark.integration


def produce(bootstrap, topic, partition, n):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, b"v%d" % i, partition=partition)
    assert p.flush(30) == 0


def watermarks(bootstrap, topic, partition):
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        c.close()


def consume_from(bootstrap, topic, partition, offset, expect):
    """Assign at ``offset`` with auto.offset.reset=earliest; returns the offsets read (bounded wait)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "dr", "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    c.assign([TopicPartition(topic, partition, offset)])
    got = []
    try:
        for _ in range(100):
            for m in c.consume(1000, 0.2):
                assert not m.error(), m.error()
                got.append(m.offset())
            if len(got) >= expect:
                break
    finally:
        c.close()
    return got


def raw_delete(bootstrap, topic, partition, offset):
    with BrokerConnection.to(bootstrap) as conn:
        resp = conn.request(
            ApiKeys.DELETE_RECORDS,
            2,
            {
                "topics": [{"name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}],
                "timeout_ms": 5000,
            },
        )
    (p,) = resp["topics"][0]["partitions"]
    return p["low_watermark"], p["error_code"]


def test_delete_records_moves_the_log_start_and_survives_restart(broker):
    from confluent_kafka import TopicPartition

    admin = create_topic(broker.bootstrap, "dr", 2)
    produce(broker.bootstrap, "dr", 0, 100)
    produce(broker.bootstrap, "dr", 1, 30)
    result = admin.delete_records([TopicPartition("dr", 0, 40)], request_timeout=10)
    (future,) = result.values()
    assert future.result(10).low_watermark == 40
    assert watermarks(broker.bootstrap, "dr", 0) == (40, 100)
    # A fetch below the new start is out of range; the consumer resets to 40 and reads 60 records.
    assert consume_from(broker.bootstrap, "dr", 0, 10, 60) == list(range(40, 100))
    # -1 means "up to the high watermark"; offsets above it or negative are OFFSET_OUT_OF_RANGE.
    assert raw_delete(broker.bootstrap, "dr", 1, -1) == (30, errors.NONE)
    assert raw_delete(broker.bootstrap, "dr", 0, 101) == (-1, errors.OFFSET_OUT_OF_RANGE)
    assert raw_delete(broker.bootstrap, "dr", 0, -7) == (-1, errors.OFFSET_OUT_OF_RANGE)
    assert raw_delete(broker.bootstrap, "dr", 0, 20) == (40, errors.NONE)  # never moves backwards
    assert raw_delete(broker.bootstrap, "dr", 5, 1) == (-1, errors.UNKNOWN_TOPIC_OR_PARTITION)
    assert raw_delete(broker.bootstrap, "__consumer_offsets", 0, 1) == (-1, errors.INVALID_TOPIC_EXCEPTION)
    broker.restart()
    assert watermarks(broker.bootstrap, "dr", 0) == (40, 100)
    assert watermarks(broker.bootstrap, "dr", 1) == (30, 30)


def test_compacted_topics_refuse_delete_records(broker):
    create_topic(broker.bootstrap, "compacted", 1, {"cleanup.policy": "compact"})
    assert raw_delete(broker.bootstrap, "compacted", 0, 0) == (-1, errors.POLICY_VIOLATION)


def test_kafka_delete_records_tool(broker, tmp_path):
    create_topic(broker.bootstrap, "tool", 2)
    produce(broker.bootstrap, "tool", 0, 10)
    offsets = tmp_path / "offsets.json"
    offsets.write_text(
        json.dumps(
            {
                "partitions": [
                    {"topic": "tool", "partition": 0, "offset": 7},
                    {"topic": "tool", "partition": 1, "offset": 3},
                ],
                "version": 1,
            }
        )
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pykbroker.tools.delete_records_command",
            "--bootstrap-server",
            broker.bootstrap,
            "--offset-json-file",
            str(offsets),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[:2] == ["Executing records delete operation", "Records delete operation completed:"]
    assert "partition: tool-0\tlow_watermark: 7" in lines
    assert (
        "partition: tool-1\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException: "
        "The requested offset is not within the range of offsets maintained by the server."
    ) in lines
    offsets.write_text(
        json.dumps(
            {
                "partitions": [
                    {"topic": "tool", "partition": 0, "offset": 1},
                    {"topic": "tool", "partition": 0, "offset": 2},
                ]
            }
        )
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pykbroker.tools.delete_records_command",
            "--bootstrap-server",
            broker.bootstrap,
            "--offset-json-file",
            str(offsets),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1
    assert "duplicate topic partitions: tool-0" in run.stderr
