"""Structured Streaming (issue 5): maxOffsetsPerTrigger + availableNow, restart from the checkpoint."""
from __future__ import annotations

import json

import pytest

from tests.integration.test_data_path import create_topic
from tests.spark.test_batch import produce

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def run_available_now(spark, bs, out, checkpoint, max_offsets):
    q = (spark.readStream.format("pykbroker").option("kafka.bootstrap.servers", bs).option("subscribe", "sstream")
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(max_offsets)).load()
         .select("topic", "partition", "offset", "value")
         .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(180), "streaming query did not finish"
    assert q.exception() is None, q.exception()
    return q


def test_stream_restart_from_checkpoint_is_exactly_once(spark, spark_broker, tmp_path):
    bs = spark_broker.bootstrap
    create_topic(bs, "sstream", 3)
    produce(bs, "sstream", 3000, 3, headers=False)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    q1 = run_available_now(spark, bs, out, checkpoint, 1000)
    assert len(q1.recentProgress) >= 3  # 3000 records at most 1000 per trigger
    produce(bs, "sstream", 1500, 3, headers=False)  # the producer keeps writing while the query is down
    run_available_now(spark, bs, out, checkpoint, 1000)
    rows = spark.read.parquet(str(out)).select("topic", "partition", "offset").collect()
    keys = [(r.topic, r.partition, r.offset) for r in rows]
    assert len(keys) == len(set(keys)) == 4500
    assert set(keys) == {("sstream", p, o) for p in range(3) for o in range(1500)}
    last = sorted((checkpoint / "offsets").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)[-1]
    assert json.loads(last.read_text().splitlines()[-1]) == {"sstream": {"0": 1500, "1": 1500, "2": 1500}}
