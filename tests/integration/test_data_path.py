"""Issue 3 acceptance: real clients create, produce, consume and delete topics on a real broker."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from tests.helpers.topics import create_topic, list_offset, produce_raw, record_batch
from tests.helpers.wait import wait_until
from tests.integration.data_path_clients import CLIENTS, index_of, key, value

pytestmark = pytest.mark.integration

N = int(os.environ.get("PYKBROKER_ACCEPTANCE_RECORDS", "200000"))
# The pure-Python clients decode every record in Python (~10 us each): a quarter of the records shows the same
# properties (every codec, order, density, headers) in a quarter of the time.
PURE_PYTHON_CLIENTS = {"kafka-python": max(1, N // 4), "aiokafka": max(1, N // 4)}
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    from tests.helpers.broker import BrokerProcess

    b = BrokerProcess(tmp_path_factory.mktemp("data-path"), num_io_threads=4).start()
    yield b
    b.stop()


@pytest.mark.slow
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", list(CLIENTS))
def test_client_round_trip_every_codec(shared_broker, client, codec):
    produce, consume = CLIENTS[client]
    n = PURE_PYTHON_CLIENTS.get(client, N)
    topic = f"rt-{client}-{codec}"
    admin = create_topic(shared_broker.bootstrap, topic, 6)
    produce(shared_broker.bootstrap, topic, n, codec)
    records = consume(shared_broker.bootstrap, topic, n, 6)
    assert len(records) == n
    seen = set()
    last_index: dict[int, int] = {}
    last_offset: dict[int, int] = {}
    for partition, offset, k, v, headers in records:
        i = index_of(v)
        assert v == value(i) and k == key(i), (k, v)
        if client == "kcat":
            assert headers == (("src", b"kcat"),)
        else:
            assert headers == (("idx", b"%d" % i),)
        assert i not in seen
        seen.add(i)
        assert i > last_index.get(partition, -1), "out of order within a partition"
        assert offset == last_offset.get(partition, -1) + 1, "offsets are dense and in order"
        last_index[partition], last_offset[partition] = i, offset
    assert seen == set(range(n))
    admin.delete_topics([topic])[topic].result(30)
    wait_until(lambda: topic not in admin.list_topics(timeout=5).topics, 10, message="topic deleted")


def test_corrupt_batch_gets_corrupt_message_and_nothing_is_appended(shared_broker):
    broker = shared_broker
    create_topic(broker.bootstrap, "crc", 1)
    good = produce_raw(broker.bootstrap, "crc", bytes(record_batch()))
    assert good["error_code"] == 0 and good["base_offset"] == 0
    bad = record_batch()
    bad[-3] ^= 0xFF  # inside the CRC-covered region
    resp = produce_raw(broker.bootstrap, "crc", bytes(bad))
    assert resp["error_code"] == 2  # CORRUPT_MESSAGE
    assert list_offset(broker.bootstrap, "crc", 0, -1) == 10
    again = produce_raw(broker.bootstrap, "crc", bytes(record_batch()))
    assert again["error_code"] == 0 and again["base_offset"] == 10


def test_fetch_past_end_is_offset_out_of_range(shared_broker):
    broker = shared_broker
    create_topic(broker.bootstrap, "oor", 1)
    produce_raw(broker.bootstrap, "oor", bytes(record_batch()))
    with BrokerConnection.to(broker.bootstrap) as c:
        r = c.request(
            ApiKeys.FETCH,
            12,
            {
                "replica_id": -1,
                "max_wait_ms": 0,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": "oor",
                        "partitions": [{"partition": 0, "fetch_offset": 50, "partition_max_bytes": 1 << 20}],
                    }
                ],
            },
        )
    p = r["responses"][0]["partitions"][0]
    assert p["error_code"] == 1 and p["high_watermark"] == 10


def test_long_poll_fetches_do_not_hold_handler_threads(broker_factory):
    b = broker_factory(num_io_threads=2)
    create_topic(b.bootstrap, "idle", 1)
    create_topic(b.bootstrap, "busy", 1)
    fetch = {
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {"topic": "idle", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}
        ],
    }
    conns = [BrokerConnection.to(b.bootstrap) for _ in range(20)]
    try:
        start = time.monotonic()
        for c in conns:
            c.send(ApiKeys.FETCH, 12, fetch)
        time.sleep(0.05)
        t0 = time.monotonic()
        produced = produce_raw(b.bootstrap, "busy", bytes(record_batch()))
        produce_latency = time.monotonic() - t0
        assert produced["error_code"] == 0
        assert produce_latency < 0.3, f"produce took {produce_latency:.3f}s while 20 fetches were parked"
        for c in conns:
            r = c.receive()[1]
            assert r["responses"][0]["partitions"][0]["error_code"] == 0
        elapsed = time.monotonic() - start
        assert 0.45 <= elapsed < 1.5, elapsed
    finally:
        for c in conns:
            c.close()


def test_retention_deletes_old_segments_and_moves_earliest(broker_factory):
    b = broker_factory(log_retention_check_interval_ms=300, log_initial_task_delay_ms=0)
    create_topic(b.bootstrap, "ret", 1, {"segment.bytes": "1024", "retention.ms": "1000", "file.delete.delay.ms": "0"})
    old = int(time.time() * 1000) - 60_000
    for _ in range(20):
        assert produce_raw(b.bootstrap, "ret", bytes(record_batch(10, ts=old)))["error_code"] == 0
    assert list_offset(b.bootstrap, "ret", 0, -2) == 0
    # Every segment is expired: Kafka rolls a new active segment and deletes all the old ones.
    wait_until(lambda: list_offset(b.bootstrap, "ret", 0, -2) == 200, 15, message="log start offset advanced")
    assert list_offset(b.bootstrap, "ret", 0, -1) == 200
    wait_until(
        lambda: len([f for f in os.listdir(b.data_dir / "logs" / "ret-0") if f.endswith(".log")]) == 1,
        10,
        message="expired segment files removed",
    )
    # Fresh records are kept and readable from the new log start.
    assert produce_raw(b.bootstrap, "ret", bytes(record_batch(10)))["base_offset"] == 200
    time.sleep(1.0)
    assert list_offset(b.bootstrap, "ret", 0, -2) == 200


def test_list_offsets_by_timestamp(shared_broker):
    broker = shared_broker
    create_topic(broker.bootstrap, "ts", 1)
    base = 1_700_000_000_000
    for j in range(5):
        b = MemoryRecordsBuilder()
        for i in range(10):
            b.append(base + (j * 10 + i) * 1000, None, b"x")
        assert produce_raw(broker.bootstrap, "ts", b.build())["error_code"] == 0
    assert list_offset(broker.bootstrap, "ts", 0, base + 23_000) == 23
    assert list_offset(broker.bootstrap, "ts", 0, base + 22_500) == 23
    assert list_offset(broker.bootstrap, "ts", 0, -3) == 49  # max timestamp (KIP-734)
    assert list_offset(broker.bootstrap, "ts", 0, base + 10**9) == -1


PRODUCER_SCRIPT = r"""
import sys
from confluent_kafka import Producer
bootstrap, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, "message.timeout.ms": 60000,
              "retries": 1000000, "enable.idempotence": False})
def cb(err, msg):
    if err is None:
        sys.stdout.write("%d %d\n" % (msg.partition(), int(msg.value()[6:14])))
for i in range(n):
    while True:
        try:
            p.produce(topic, (b"value-%08d" % i), b"k%d" % i, on_delivery=cb); break
        except BufferError:
            p.poll(0.05)
    p.poll(0)
p.flush(120)
sys.stdout.flush()
"""


def test_kill_9_during_acks_1_produce_loses_nothing_acknowledged(broker_factory, tmp_path):
    b = broker_factory(num_io_threads=4)
    create_topic(b.bootstrap, "crash", 6)
    script = tmp_path / "producer.py"
    script.write_text(PRODUCER_SCRIPT)
    out = open(tmp_path / "acked.txt", "w")  # noqa: SIM115 - the producer subprocess writes it; closed below
    producer = subprocess.Popen(
        [sys.executable, str(script), b.bootstrap, "crash", "300000"], stdout=out, stderr=subprocess.DEVNULL
    )
    try:
        wait_until(lambda: os.path.getsize(tmp_path / "acked.txt") > 200_000, 60, message="producer progress")
        b.kill()  # SIGKILL mid-run
        port = b.port
        time.sleep(1.0)
        b.props["listeners"] = f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:0"
        b.start()
        assert producer.wait(180) == 0
    finally:
        if producer.poll() is None:
            producer.kill()
        out.close()
    acked = set()
    for line in (tmp_path / "acked.txt").read_text().splitlines():
        _part, i = line.split()
        acked.add(int(i))
    assert len(acked) > 100_000
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "v", "enable.auto.commit": False})
    ends = {p: c.get_watermark_offsets(TopicPartition("crash", p), timeout=10)[1] for p in range(6)}
    c.assign([TopicPartition("crash", p, 0) for p in range(6)])
    total = sum(ends.values())
    found = set()
    got = 0
    deadline = time.monotonic() + 120
    while got < total and time.monotonic() < deadline:
        for m in c.consume(10000, 1.0):
            assert not m.error(), m.error()
            found.add(int(m.value()[6:14]))
            got += 1
    c.close()
    assert got == total, "the log is readable to its end"
    missing = acked - found
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
    # Producing continued after the restart: the producer finished, and every index it sent is in the log
    # (acks=1 with retries may duplicate a record across the crash, never drop an acknowledged one).
    assert found == set(range(300000))
