"""Structured Streaming (issue 5): maxOffsetsPerTrigger + availableNow, restart from the checkpoint."""

from __future__ import annotations

import json

import pytest

from tests.helpers.topics import create_topic, produce_numbered

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def run_available_now(spark, bs, out, checkpoint, max_offsets):
    q = (
        spark.readStream.format("pykbroker")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", "sstream")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_offsets))
        .load()
        .select("topic", "partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(180), "streaming query did not finish"
    assert q.exception() is None, q.exception()
    return q


def test_stream_restart_from_checkpoint_is_exactly_once(spark, spark_broker, tmp_path):
    """Stopped and restarted from its checkpoint while a producer keeps writing: every produced record
    is in the parquet sink exactly once (compared by topic/partition/offset)."""
    import threading

    from confluent_kafka import Producer

    bs = spark_broker.bootstrap
    create_topic(bs, "sstream", 3)
    produce_numbered(bs, "sstream", 3000, 3, headers=False)
    stop = threading.Event()
    produced = [0]
    writer_errors: list[BaseException] = []  # raised in the test thread after join

    def keep_writing():
        try:
            p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
            while not stop.is_set() and produced[0] < 3000:  # bounded: a few more triggers per run
                for _ in range(100):
                    p.produce("sstream", b"live", partition=produced[0] % 3)
                    produced[0] += 1
                p.poll(0)
                stop.wait(0.05)
            unflushed = p.flush(30)
            if unflushed:
                raise AssertionError(f"{unflushed} live records not delivered")
        except BaseException as e:  # noqa: BLE001 - propagated to the test thread below
            writer_errors.append(e)

    writer = threading.Thread(target=keep_writing)
    writer.start()
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    try:
        q1 = run_available_now(spark, bs, out, checkpoint, 1000)
        assert len(q1.recentProgress) >= 3  # at least 3000 records at most 1000 per trigger
        run_available_now(spark, bs, out, checkpoint, 1000)  # restart from the checkpoint, still writing
    finally:
        stop.set()
        writer.join(60)
    assert not writer.is_alive(), "writer thread did not finish"
    if writer_errors:
        raise writer_errors[0]
    total = 3000 + produced[0]
    run_available_now(spark, bs, out, checkpoint, 100000)  # catch up with everything written
    rows = spark.read.parquet(str(out)).select("topic", "partition", "offset").collect()
    keys = [(r.topic, r.partition, r.offset) for r in rows]
    assert len(keys) == len(set(keys)) == total
    per_partition = {p: sum(1 for k in keys if k[1] == p) for p in range(3)}
    assert set(keys) == {("sstream", p, o) for p in range(3) for o in range(per_partition[p])}
    last = sorted((checkpoint / "offsets").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)[-1]
    assert json.loads(last.read_text().splitlines()[-1]) == {"sstream": {str(p): n for p, n in per_partition.items()}}
