"""Topic-to-topic enrichment: 'orders' JSON joined with a static customer table -> 'orders-enriched'.

    .venv/bin/python spark/examples/topic_to_topic.py --bootstrap-server 127.0.0.1:9092

Produces 5,000 orders, then one availableNow streaming query reads them with format("pykbroker"),
adds the customer's country and tier from a small DataFrame, and writes JSON back with the pykbroker
sink (key = customer id, so keys keep Kafka's murmur2 partitioning). Prints the count read back.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    ap.add_argument("--orders", type=int, default=5000)
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": args.bootstrap_server})
    for topic in ("orders", "orders-enriched"):
        try:
            admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
        except Exception:  # noqa: BLE001 - already exists
            pass
    p = Producer({"bootstrap.servers": args.bootstrap_server, "linger.ms": 20})
    for i in range(args.orders):
        p.produce(
            "orders",
            json.dumps({"order": i, "customer": f"c{i % 50}", "total": i % 500}).encode(),
            f"c{i % 50}".encode(),
        )
    p.flush(60)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    customers = spark.createDataFrame(
        [(f"c{i}", ["FR", "KR", "JP", "CN"][i % 4], "gold" if i % 5 == 0 else "std") for i in range(50)],
        "customer STRING, country STRING, tier STRING",
    )
    orders = (
        spark.readStream.format("pykbroker")
        .option("kafka.bootstrap.servers", args.bootstrap_server)
        .option("subscribe", "orders")
        .option("startingOffsets", "earliest")
        .load()
        .select(F.from_json(F.col("value").cast("string"), "order LONG, customer STRING, total INT").alias("o"))
        .select("o.*")
    )
    enriched = orders.join(customers, "customer", "left")
    q = (
        enriched.select(F.col("customer").alias("key"), F.to_json(F.struct("*")).alias("value"))
        .writeStream.format("pykbroker")
        .option("kafka.bootstrap.servers", args.bootstrap_server)
        .option("topic", "orders-enriched")
        .option("checkpointLocation", tempfile.mkdtemp(prefix="orders-enriched-"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    back = (
        spark.read.format("pykbroker")
        .option("kafka.bootstrap.servers", args.bootstrap_server)
        .option("subscribe", "orders-enriched")
        .load()
    )
    print(f"enriched orders in topic 'orders-enriched': {back.count()}")
    back.selectExpr("CAST(value AS STRING)").show(3, truncate=False)
    spark.stop()


if __name__ == "__main__":
    main()
