"""Produce/consume drivers for each real client, used by the data-path acceptance tests.

Every driver produces records ``i = 0..n-1`` with key ``k<i % 1000>``, value ``value(i)`` and a header,
and consumes a whole topic back as ``[(partition, offset, key, value, headers)]``.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time

N_KEYS = 1000


def key(i: int) -> bytes:
    return b"k%d" % (i % N_KEYS)


def value(i: int) -> bytes:
    return b"value-%08d-" % i + bytes([65 + i % 26]) * (i % 50)


def index_of(v: bytes) -> int:
    return int(v[6:14])


# -- confluent-kafka (librdkafka) --------------------------------------------------------------
def confluent_produce(bootstrap, topic, n, codec):
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "linger.ms": 20,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": 1000000,
        }
    )
    failures = []
    cb = lambda err, _m: err and failures.append(err)  # noqa: E731
    for i in range(n):
        while True:
            try:
                p.produce(topic, value(i), key(i), headers=[("idx", b"%d" % i)], on_delivery=cb)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    assert not failures, failures[:3]


def confluent_consume(bootstrap, topic, n, partitions, timeout=120):
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < n and time.monotonic() < deadline:
            for m in c.consume(10000, 1.0):
                assert not m.error(), m.error()
                out.append((m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ())))
    finally:
        c.close()
    return out


# -- kafka-python ------------------------------------------------------------------------------
def kafka_python_produce(bootstrap, topic, n, codec):
    from kafka import KafkaProducer

    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        linger_ms=20,
        batch_size=256 * 1024,
        acks=1,
    )
    futures = [p.send(topic, value=value(i), key=key(i), headers=[("idx", b"%d" % i)]) for i in range(n)]
    p.flush(120)
    for f in futures[:: max(1, n // 1000)]:
        f.get(60)
    p.close(30)


def kafka_python_consume(bootstrap, topic, n, partitions, timeout=120):
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=4 * 1024 * 1024,
    )
    c.assign([TopicPartition(topic, p) for p in range(partitions)])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < n and time.monotonic() < deadline:
            for _tp, msgs in c.poll(1000, max_records=50000).items():
                for m in msgs:
                    out.append((m.partition, m.offset, m.key, m.value, tuple(m.headers or ())))
    finally:
        c.close()
    return out


# -- aiokafka ----------------------------------------------------------------------------------
def aiokafka_produce(bootstrap, topic, n, codec):
    from aiokafka import AIOKafkaProducer

    async def run():
        p = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if codec == "none" else codec,
            linger_ms=20,
            max_batch_size=256 * 1024,
            acks=1,
        )
        await p.start()
        try:
            batch = []
            for i in range(n):
                batch.append(await p.send(topic, value=value(i), key=key(i), headers=[("idx", b"%d" % i)]))
                if len(batch) >= 20000:
                    await asyncio.gather(*batch)
                    batch = []
            await asyncio.gather(*batch)
        finally:
            await p.stop()

    asyncio.run(run())


def aiokafka_consume(bootstrap, topic, n, partitions, timeout=120):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        c = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=4 * 1024 * 1024,
        )
        await c.start()
        out = []
        try:
            c.assign([TopicPartition(topic, p) for p in range(partitions)])
            deadline = time.monotonic() + timeout
            while len(out) < n and time.monotonic() < deadline:
                for _tp, msgs in (await c.getmany(timeout_ms=1000, max_records=50000)).items():
                    for m in msgs:
                        out.append((m.partition, m.offset, m.key, m.value, tuple(m.headers or ())))
        finally:
            await c.stop()
        return out

    return asyncio.run(run())


# -- kcat --------------------------------------------------------------------------------------
def kcat_produce(bootstrap, topic, n, codec):
    lines = b"".join(key(i) + b"\t" + value(i) + b"\n" for i in range(n))
    r = subprocess.run(
        [
            shutil.which("kcat"),
            "-P",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-K",
            "\t",
            "-H",
            "src=kcat",
            "-z",
            codec,
            "-X",
            "linger.ms=20",
        ],
        input=lines,
        capture_output=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr.decode()


def kcat_consume(bootstrap, topic, n, partitions, timeout=120):
    fmt = "%p\t%o\t%k\t%h\t%s\n"
    r = subprocess.run(
        [shutil.which("kcat"), "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-c", str(n), "-f", fmt],
        capture_output=True,
        timeout=timeout,
    )
    assert r.returncode == 0, r.stderr.decode()
    out = []
    for line in r.stdout.split(b"\n"):
        if not line:
            continue
        p, o, k, h, v = line.split(b"\t", 4)
        name, _, hv = h.partition(b"=")
        out.append((int(p), int(o), k, v, ((name.decode(), hv),)))
    return out


CLIENTS = {
    "confluent-kafka": (confluent_produce, confluent_consume),
    "kafka-python": (kafka_python_produce, kafka_python_consume),
    "aiokafka": (aiokafka_produce, aiokafka_consume),
    "kcat": (kcat_produce, kcat_consume),
}
