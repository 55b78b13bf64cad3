"""Log compaction (cleanup.policy=compact) on a real broker (issue 4)."""

from __future__ import annotations

import time

import pytest

from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration


def read_all(bootstrap, topic):
    """``[(offset, key, value)]`` of partition 0, read to its end."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False})
    low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.assign([TopicPartition(topic, 0, low)])
    out = []
    deadline = time.monotonic() + 60
    try:
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            for m in c.consume(10000, 0.5):
                assert not m.error(), m.error()
                out.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    return out


def produce(bootstrap, topic, items):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 2000})
    for key, value in items:
        while True:
            try:
                p.produce(topic, value, key, partition=0)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0


@pytest.mark.slow
def test_compacted_topic_keeps_the_latest_value_of_each_key_and_drops_old_tombstones(broker_factory):
    b = broker_factory(**{"log.cleaner.backoff.ms": "300"})
    create_topic(
        b.bootstrap,
        "compacted",
        1,
        {
            "cleanup.policy": "compact",
            "segment.bytes": "65536",
            "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "1500",
            "segment.ms": "1000",
        },
    )
    keys, n = 1000, 30_000  # 30 updates of every key, over several closed 64 KiB segments
    produce(b.bootstrap, "compacted", [(b"k%d" % (i % keys), b"v%d" % i) for i in range(n)])
    latest = {b"k%d" % (i % keys): b"v%d" % i for i in range(n - keys, n)}
    time.sleep(1.1)  # segment.ms: the next append rolls, so every update sits in a closed segment
    produce(b.bootstrap, "compacted", [(b"sentinel", b"s")])

    def compacted():
        records = read_all(b.bootstrap, "compacted")
        return len(records) == keys + 1 and records

    records = wait_until(compacted, timeout=60, interval=0.5, message="log compacted to one record per key")
    got = {k: v for _, k, v in records if k != b"sentinel"}
    assert got == latest
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(offsets) and offsets[-1] == n  # original offsets kept, with gaps
    # Tombstones: deleted keys vanish once delete.retention.ms has passed.
    produce(b.bootstrap, "compacted", [(b"k%d" % i, None) for i in range(100)])
    time.sleep(1.1)
    produce(b.bootstrap, "compacted", [(b"sentinel", b"s2")])
    time.sleep(1.6)  # delete.retention.ms
    produce(b.bootstrap, "compacted", [(b"sentinel", b"s3")])

    def tombstones_gone():
        records = read_all(b.bootstrap, "compacted")
        keys_left = {k for _, k, _ in records}
        return all(b"k%d" % i not in keys_left for i in range(100)) and records

    records = wait_until(tombstones_gone, timeout=60, interval=0.5, message="tombstones removed")
    assert {k: v for _, k, v in records if k != b"sentinel"} == {k: v for k, v in latest.items() if int(k[1:]) >= 100}
    # The cleaned log survives a restart (indexes rebuilt, offsets intact).
    b.restart()
    assert read_all(b.bootstrap, "compacted")[:5] == records[:5]
