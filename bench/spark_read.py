"""Batch read throughput of format("pykbroker") into Spark's noop sink (issue 5 benchmark).

    .venv/bin/python bench/spark_read.py   # starts its own broker, 1,000,000 x 100 B, 6 partitions
    .venv/bin/python bench/spark_read.py --num-records 1000000 --partitions 6 --bootstrap-server 127.0.0.1:9092

Produces the records with confluent-kafka, starts a local[2] SparkSession (127.0.0.1, UI off), runs
one warm-up read, then times ``--runs`` full reads of the topic into ``format("noop")`` and prints
rows/s for each, each next to the peer measured in the same run: one confluent-kafka consumer (a
Python loop over ``consume()``) reading the whole topic, and the ratio Spark / confluent-kafka. On a
loaded machine throughput swings between runs; the CPU seconds each reader spends per million records
(bench process tree less the broker: the consumer, or Spark's JVM and Python workers) are steadier.
Not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _cpu_seconds(pid: int) -> float:
    """utime + stime + reaped children's (cutime + cstime) of ``pid`` from /proc, 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int, exclude: set[int]) -> float:
    """CPU seconds of ``root`` and every descendant (Spark's JVM, its Python daemons and workers), less the
    ``exclude`` subtrees (the broker). Linux only."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rpartition(")")[2].split()[1])
            except OSError:
                pass
    total = 0.0
    for pid in parents:
        p = pid
        while p not in (0, 1, root) and p not in exclude:
            p = parents.get(p, 0)
        if p == root and pid not in exclude:
            total += _cpu_seconds(pid)
    return total


def confluent_consume(bootstrap: str, topic: str, partitions: int, expected: int) -> float:
    """records/s of one confluent-kafka consumer reading every partition from the start."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{time.time()}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 10485760,
            "queued.max.messages.kbytes": 262144,
        }
    )
    start = time.perf_counter()
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    n = 0
    while n < expected:
        n += sum(1 for m in c.consume(10000, 1.0) if m.error() is None)
    elapsed = time.perf_counter() - start
    c.close()
    return expected / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap-server")
    ap.add_argument("--num-records", type=int, default=1_000_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    broker = None
    if not args.bootstrap_server:
        from tests.helpers.broker import BrokerProcess

        broker = BrokerProcess(Path(tempfile.mkdtemp(prefix="bench-spark-"))).start()
        args.bootstrap_server = broker.bootstrap
    try:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic

        topic = f"spark-read-{int(time.time())}"
        admin = AdminClient({"bootstrap.servers": args.bootstrap_server})  # keep a reference while it works
        admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
        p = Producer(
            {
                "bootstrap.servers": args.bootstrap_server,
                "linger.ms": 20,
                "batch.size": 1000000,
                "queue.buffering.max.kbytes": 1048576,
            }
        )
        payload = os.urandom(args.record_size)
        for i in range(args.num_records):
            while True:
                try:
                    p.produce(topic, payload, b"%d" % i, partition=i % args.partitions)
                    break
                except BufferError:
                    p.poll(0.01)
        p.flush(300)
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        from pyspark.sql import SparkSession

        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.memory", "1g")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        import pyspark_pykbroker

        pyspark_pykbroker.register(spark)

        def reader(fast: bool):
            return (
                spark.read.format("pykbroker")
                .option("kafka.bootstrap.servers", args.bootstrap_server)
                .option("subscribe", topic)
                .option("fastFetch", str(fast).lower())
            )

        for fast in (False, True):  # warm-up: Python workers start
            reader(fast).load().write.format("noop").mode("overwrite").save()
        print(
            f"# format('pykbroker') batch read -> noop, {args.num_records:,} records x {args.record_size} B, "
            f"{args.partitions} partitions, local[2]; fastFetch=false is the librdkafka-only read"
        )
        me, exclude = os.getpid(), {broker.proc.pid} if broker is not None and broker.proc is not None else set()
        m = args.num_records / 1e6
        for run in range(args.runs):
            cpu = tree_cpu(me, exclude)
            peer = confluent_consume(args.bootstrap_server, topic, args.partitions, args.num_records)
            peer_cpu = tree_cpu(me, exclude) - cpu
            rates, cpus = {}, {}
            for fast in (False, True):
                cpu = tree_cpu(me, exclude)
                start = time.perf_counter()
                reader(fast).load().write.format("noop").mode("overwrite").save()
                rates[fast] = args.num_records / (time.perf_counter() - start)
                cpus[fast] = tree_cpu(me, exclude) - cpu
            print(
                f"run {run + 1}: confluent-kafka {peer:,.0f} records/s ({peer_cpu / m:.2f} CPU s per 1M); "
                f"spark fastFetch=false {rates[False]:,.0f} rows/s (ratio {rates[False] / peer:.2f}, "
                f"{cpus[False] / m:.2f} CPU s per 1M), fastFetch=true {rates[True]:,.0f} rows/s "
                f"(ratio {rates[True] / peer:.2f}, {cpus[True] / m:.2f} CPU s per 1M); load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        spark.stop()
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
