"""pykbroker's KafkaProducer and bin/kafka-producer-perf-test against a real broker (issue 6)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time

import pytest

from pykbroker.clients.producer import KafkaProducer
from pykbroker.protocol import errors
from tests.helpers.topics import create_topic

pytestmark = pytest.mark.integration


@pytest.fixture
def broker(module_broker):
    """The module's one broker: the tests that take it each create and check a topic of their own and change no
    broker or cluster config (those that do start their own with ``broker_factory``)."""
    return module_broker


# The final line as Kafka's own system tests parse it.
PERF_FINAL = re.compile(
    r"^(?P<records>\d+) records sent, (?P<rps>\d+\.\d+) records/sec \((?P<mbps>\d+\.\d+) MB/sec\), "
    r"(?P<avg>\d+\.\d+) ms avg latency, (?P<max>\d+\.\d+) ms max latency, (?P<p50>\d+) ms 50th, "
    r"(?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99\.9th\.$"
)


def consume_all(bootstrap, topic, partitions, expect, timeout=90):
    """Every record of the topic via confluent-kafka: ``{partition: [(offset, key, value)]}``."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[int, list] = {p: [] for p in range(partitions)}
    n = 0
    deadline = time.monotonic() + timeout
    try:
        while n < expect and time.monotonic() < deadline:
            for m in c.consume(10000, 0.5):
                assert not m.error(), m.error()
                out[m.partition()].append((m.offset(), m.key(), m.value()))
                n += 1
        # Anything beyond ``expect`` (a duplicate) would show up now.
        for m in c.consume(10000, 1.0):
            out[m.partition()].append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    return out


def test_keys_land_on_the_same_partitions_as_confluent_murmur2_random(broker):
    from confluent_kafka import Producer

    create_topic(broker.bootstrap, "keys", 6)
    keys = [b"key-%d" % i for i in range(10_000)]
    theirs = {}
    p = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random", "linger.ms": 5})
    for k in keys:
        p.produce("keys", b"c", k, on_delivery=lambda err, m: theirs.__setitem__(m.key(), m.partition()))
    assert p.flush(30) == 0
    with KafkaProducer({"bootstrap.servers": broker.bootstrap}) as producer:
        futures = [(k, producer.send("keys", b"p", key=k)) for k in keys]
        producer.flush(30)
        ours = {k: f.get(10).partition for k, f in futures}
    assert len(theirs) == len(ours) == 10_000
    assert ours == theirs
    assert len(set(ours.values())) == 6


def test_every_codec_and_acks_round_trip(broker):
    create_topic(broker.bootstrap, "codecs", 3)
    sent = []
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        for acks in ("0", "1", "all"):
            with KafkaProducer(
                {"bootstrap.servers": broker.bootstrap, "compression.type": codec, "acks": acks, "linger.ms": 2}
            ) as producer:
                futures = [
                    producer.send(
                        "codecs",
                        b"%s-%s-%d" % (codec.encode(), acks.encode(), i),
                        key=b"%d" % i,
                        headers=[("h", b"%d" % i)],
                    )
                    for i in range(200)
                ]
                producer.flush(30)
                metadata = [f.get(10) for f in futures]
                assert all(m.offset >= 0 for m in metadata) == (acks != "0")
                sent += [b"%s-%s-%d" % (codec.encode(), acks.encode(), i) for i in range(200)]
    got = consume_all(broker.bootstrap, "codecs", 3, len(sent))
    values = [v for records in got.values() for _, _, v in records]
    assert sorted(values) == sorted(sent)


def test_send_errors_are_kafka_errors(broker_factory):
    b = broker_factory(**{"auto.create.topics.enable": "false"})
    with KafkaProducer({"bootstrap.servers": b.bootstrap, "max.block.ms": 1500, "max.request.size": 10000}) as producer:
        with pytest.raises(TimeoutError, match="not present in metadata"):
            producer.send("missing", b"x")
        create_topic(b.bootstrap, "small", 1)
        with pytest.raises(errors.RecordTooLargeError):
            producer.send("small", b"x" * 20000)
        callbacks = []
        producer.send("small", b"ok", callback=lambda m, e: callbacks.append((m, e))).get(10)
        assert callbacks and callbacks[0][1] is None and callbacks[0][0].offset == 0


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@pytest.mark.slow
def test_idempotent_producer_survives_broker_kill_9(broker_factory):
    """acks=all, idempotence on; the broker is killed with -9 and restarted mid-run (same ports): every
    acknowledged record is in the log exactly once, in send order per partition."""
    port, controller = free_ports(2)
    broker = broker_factory(
        **{
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
            "controller.quorum.voters": f"1@127.0.0.1:{controller}",
        }
    )
    n = int(os.environ.get("PYKBROKER_KILL9_RECORDS", "120000"))  # the full run: 1000000
    create_topic(broker.bootstrap, "kill9", 6)
    failed = []

    def on_delivery(metadata, exc):
        if exc is not None:
            failed.append(exc)

    killed = threading.Event()
    producer = KafkaProducer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "enable.idempotence": "true",
            "linger.ms": 5,
            "delivery.timeout.ms": 120000,
            "request.timeout.ms": 10000,
            "reconnect.backoff.max.ms": 200,
        }
    )
    futures = []
    for i in range(n):
        futures.append(producer.send("kill9", b"%08d" % i, key=b"%d" % (i % 97), callback=on_delivery))
        if i == n // 3:
            producer.flush(60)  # some records are certainly acknowledged before the kill
        if i == n // 2 and not killed.is_set():
            broker.kill()
            killed.set()
            broker.start()
    producer.flush(120)
    producer.close()
    results = []
    for i, f in enumerate(futures):
        try:
            results.append((i, f.get(0)))
        except Exception:  # noqa: BLE001 - a record whose delivery failed is not acknowledged
            pass
    assert len(results) > n // 2, f"only {len(results)} acknowledged, failures: {failed[:3]}"
    got = consume_all(broker.bootstrap, "kill9", 6, len(results))
    seen: dict[bytes, tuple[int, int]] = {}
    for partition, records in got.items():
        indexes = [int(v) for _, _, v in records]
        assert indexes == sorted(indexes), f"partition {partition} out of send order"
        for offset, _, v in records:
            assert v not in seen, f"record {v!r} twice: {seen[v]} and {(partition, offset)}"
            seen[v] = (partition, offset)
    for i, metadata in results:
        assert seen.get(b"%08d" % i) == (metadata.partition, metadata.offset), i


def test_perf_tool_final_line_matches_what_a_consumer_reads(broker):
    create_topic(broker.bootstrap, "perf", 6)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pykbroker.tools.producer_performance",
            "--topic",
            "perf",
            "--num-records",
            "50000",
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "--producer-props",
            f"bootstrap.servers={broker.bootstrap}",
            "acks=1",
            "linger.ms=5",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr
    final = [m for m in map(PERF_FINAL.match, run.stdout.splitlines()) if m]
    assert len(final) == 1, run.stdout
    reported = int(final[0].group("records"))
    assert reported == 50000
    assert float(final[0].group("rps")) > 0
    got = consume_all(broker.bootstrap, "perf", 6, reported)
    assert sum(len(r) for r in got.values()) == reported
    assert all(len(v) == 100 for records in got.values() for _, _, v in records)


def test_perf_tool_throttles_to_throughput(broker):
    create_topic(broker.bootstrap, "throttled", 1)
    start = time.monotonic()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pykbroker.tools.producer_performance",
            "--topic",
            "throttled",
            "--num-records",
            "3000",
            "--record-size",
            "10",
            "--throughput",
            "1000",
            "--bootstrap-server",
            broker.bootstrap,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    elapsed = time.monotonic() - start
    assert run.returncode == 0, run.stderr
    assert PERF_FINAL.match(run.stdout.splitlines()[-1]), run.stdout
    assert elapsed >= 2.5  # 3000 records at 1000 records/s
