"""Batch reads (issue 5): every record exactly once with its fields; endingOffsets ranges; data loss."""

from __future__ import annotations

import json
import os

import pytest

from tests.helpers.topics import BASE_TS, create_topic, produce_numbered

pytestmark = [pytest.mark.spark, pytest.mark.integration]
N = int(os.environ.get("PYKBROKER_SPARK_RECORDS", "100000"))  # the full run: 1000000


def test_batch_read_returns_every_record_once_with_its_fields(spark, spark_broker):
    bs = spark_broker.bootstrap
    create_topic(bs, "sbatch", 6)
    produce_numbered(bs, "sbatch", N, 6)
    df = (
        spark.read.format("pykbroker")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", "sbatch")
        .option("includeHeaders", "true")
        .load()
    )
    assert [f.name for f in df.schema.fields] == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    from pyspark.sql import functions as F

    stats = df.agg(
        F.count("*").alias("n"),
        F.countDistinct("partition", "offset").alias("distinct"),
        F.countDistinct("key").alias("keys"),
    ).first()
    assert (stats.n, stats.distinct, stats.keys) == (N, N, N)
    # Every field of every record matches what was produced: index i is in the key.
    bad = (
        df.withColumn("i", F.expr("CAST(substring(CAST(key AS STRING), 2) AS BIGINT)"))
        .where(
            (F.col("partition") != F.col("i") % 6)
            | (F.col("offset") != (F.col("i") / 6).cast("long"))
            | (F.length("value") != 100)
            | (F.col("topic") != "sbatch")
            | (F.col("timestampType") != 0)
            | (F.unix_millis("timestamp") != F.lit(BASE_TS) + F.col("i"))
            | (F.expr("CAST(headers[0].value AS STRING)") != F.col("i").cast("string"))
            | (F.expr("headers[0].key") != "i")
        )
        .count()
    )
    assert bad == 0


def test_ending_offsets_json_returns_exactly_the_requested_ranges(spark, spark_broker):
    bs = spark_broker.bootstrap
    create_topic(bs, "sranges", 3)
    produce_numbered(bs, "sranges", 3000, 3, headers=False)
    df = (
        spark.read.format("pykbroker")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", "sranges")
        .option("startingOffsets", json.dumps({"sranges": {"0": 100, "1": -2, "2": 900}}))
        .option("endingOffsets", json.dumps({"sranges": {"0": 200, "1": 50, "2": -1}}))
        .load()
    )
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    expected = sorted(
        [(0, o) for o in range(100, 200)] + [(1, o) for o in range(0, 50)] + [(2, o) for o in range(900, 1000)]
    )
    assert got == expected
    with pytest.raises(Exception, match="starting offset can't be latest"):
        (
            spark.read.format("pykbroker")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribe", "sranges")
            .option("startingOffsets", "latest")
            .load()
            .count()
        )
    with pytest.raises(Exception, match="auto.offset.reset"):
        (
            spark.read.format("pykbroker")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribe", "sranges")
            .option("kafka.auto.offset.reset", "earliest")
            .load()
            .count()
        )


def test_fail_on_data_loss(spark, spark_broker):
    from confluent_kafka import TopicPartition

    bs = spark_broker.bootstrap
    admin = create_topic(bs, "sloss", 1)
    produce_numbered(bs, "sloss", 100, 1, headers=False)
    # The start of the planned range goes away (DeleteRecords moves the log start offset to 40).
    (future,) = admin.delete_records([TopicPartition("sloss", 0, 40)]).values()
    assert future.result(10).low_watermark == 40

    def read(fail: str):
        return (
            spark.read.format("pykbroker")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribe", "sloss")
            .option("startingOffsets", json.dumps({"sloss": {"0": 10}}))
            .option("failOnDataLoss", fail)
            .load()
        )

    with pytest.raises(Exception, match="failOnDataLoss"):
        read("true").count()
    assert sorted(r.offset for r in read("false").select("offset").collect()) == list(range(40, 100))


def test_isolation_level_as_sparks_connector(spark, spark_broker):
    """Spark's default reads every record; kafka.isolation.level=read_committed only committed ones, and the
    read ends although the range ends in an abort marker."""
    from confluent_kafka import Producer

    bs = spark_broker.bootstrap
    create_topic(bs, "stxn", 1)
    p = Producer({"bootstrap.servers": bs, "transactional.id": "spark-txn", "linger.ms": 5})
    p.init_transactions(30)
    for i in range(3):
        p.begin_transaction()
        for j in range(10):
            p.produce("stxn", f"{i}-{j}".encode(), partition=0)
        if i == 2:
            p.flush(30)
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)

    def read(**options) -> list[str]:
        reader = spark.read.format("pykbroker").option("kafka.bootstrap.servers", bs).option("subscribe", "stxn")
        for k, v in options.items():
            reader = reader.option(k, v)
        return sorted(r.value.decode() for r in reader.load().select("value").collect())

    everything = sorted(f"{i}-{j}" for i in range(3) for j in range(10))
    assert read() == everything
    assert read(**{"kafka.isolation.level": "read_committed"}) == everything[:20]
