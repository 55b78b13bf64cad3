"""JSON events -> per-minute aggregates with a watermark -> parquet; big amounts -> an 'alerts' topic.

    .venv/bin/python spark/examples/events_per_minute.py --bootstrap-server 127.0.0.1:9092 --out /tmp/events-out

Produces 30,000 JSON events over 10 minutes of event time into topic 'events' (3 partitions, created
if missing), then runs two availableNow queries reading it with format("pykbroker"): per-minute counts
and sums by type (watermark 1 minute, append mode, parquet), and alerts (amount >= 99) written back
to topic 'alerts' with the pykbroker sink. Prints what it wrote.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def produce_events(bootstrap: str, n: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for topic in ("events", "alerts"):
        try:
            admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
        except Exception:  # noqa: BLE001 - already exists
            pass
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    start = int(time.time() * 1000) - 15 * 60 * 1000
    for i in range(n):
        event = {
            "event_time": start + i * 20,
            "user": f"u{i % 97}",
            "type": ["click", "view", "buy"][i % 3],
            "amount": i % 100,
        }
        p.produce("events", json.dumps(event).encode(), f"u{i % 97}".encode())
        if i % 10000 == 0:
            p.poll(0)
    p.flush(60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    ap.add_argument("--out", default="/tmp/pykbroker-events")
    ap.add_argument("--events", type=int, default=30000)
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    produce_events(args.bootstrap_server, args.events)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    events = (
        spark.readStream.format("pykbroker")
        .option("kafka.bootstrap.servers", args.bootstrap_server)
        .option("subscribe", "events")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 20000)
        .load()
    )
    parsed = events.select(
        F.from_json(F.col("value").cast("string"), "event_time LONG, user STRING, type STRING, amount INT").alias("e")
    ).select(F.timestamp_millis("e.event_time").alias("event_time"), "e.user", "e.type", "e.amount")
    per_minute = (
        parsed.withWatermark("event_time", "1 minute")
        .groupBy(F.window("event_time", "1 minute"), "type")
        .agg(F.count("*").alias("events"), F.sum("amount").alias("amount"))
    )
    q1 = (
        per_minute.writeStream.format("parquet")
        .outputMode("append")
        .option("path", f"{args.out}/per_minute")
        .option("checkpointLocation", f"{args.out}/checkpoints/per_minute")
        .trigger(availableNow=True)
        .start()
    )
    q2 = (
        parsed.where("amount >= 99")
        .select(F.col("user").alias("key"), F.to_json(F.struct("event_time", "user", "amount")).alias("value"))
        .writeStream.format("pykbroker")
        .option("kafka.bootstrap.servers", args.bootstrap_server)
        .option("topic", "alerts")
        .option("checkpointLocation", f"{args.out}/checkpoints/alerts")
        .trigger(availableNow=True)
        .start()
    )
    q1.awaitTermination()
    q2.awaitTermination()
    windows = spark.read.parquet(f"{args.out}/per_minute")
    print(
        f"per-minute windows written: {windows.count()} (events in closed windows: "
        f"{windows.agg(F.sum('events')).first()[0]})"
    )
    alerts = (
        spark.read.format("pykbroker")
        .option("kafka.bootstrap.servers", args.bootstrap_server)
        .option("subscribe", "alerts")
        .load()
        .count()
    )
    print(f"alerts in topic 'alerts': {alerts}")
    spark.stop()


if __name__ == "__main__":
    main()
