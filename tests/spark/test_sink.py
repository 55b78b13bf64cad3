"""The pykbroker sink (issue 5): rows land in the topic, keys on murmur2 partitions."""

from __future__ import annotations

import os

import pytest

from tests.helpers.topics import create_topic

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def test_sink_writes_rows_and_keys_follow_murmur2(spark, spark_broker):
    from confluent_kafka import Producer

    bs = spark_broker.bootstrap
    create_topic(bs, "ssink", 6)
    create_topic(bs, "sref", 6)
    n = int(os.environ.get("PYKBROKER_SPARK_SINK_ROWS", "20000"))  # the full run: 1000000
    df = spark.range(n).selectExpr(
        "CONCAT('key-', CAST(id AS STRING)) AS key",
        "CAST(id AS STRING) AS value",
        "array(named_struct('key', 'h', 'value', CAST(CAST(id AS STRING) AS BINARY))) AS headers",
    )
    df.write.format("pykbroker").mode("append").option("kafka.bootstrap.servers", bs).option("topic", "ssink").save()
    back = (
        spark.read.format("pykbroker")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", "ssink")
        .option("includeHeaders", "true")
        .load()
        .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition", "headers[0].key AS h")
        .collect()
    )
    assert sorted(int(r.value) for r in back) == list(range(n))
    assert all(r.h == "h" for r in back)
    # Keys land where confluent-kafka's murmur2_random (the Java partitioner) puts them.
    reference = {}
    p = Producer({"bootstrap.servers": bs, "partitioner": "murmur2_random"})
    for r in back[:2000]:
        p.produce(
            "sref",
            b"x",
            r.key.encode(),
            on_delivery=lambda err, m: reference.__setitem__(m.key().decode(), m.partition()),
        )
    assert p.flush(30) == 0
    assert {r.key: r.partition for r in back[:2000]} == reference
