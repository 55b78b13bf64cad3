"""Produce and fetch throughput through pykbroker, measured with confluent-kafka (issue 3 benchmark).

    .venv/bin/python bench/produce_fetch.py                          # starts its own broker (subprocess)
    .venv/bin/python bench/produce_fetch.py --record-size 1024 --num-records 200000 --partitions 1 6
    .venv/bin/python bench/produce_fetch.py --bootstrap-server 127.0.0.1:9092
    .venv/bin/python bench/produce_fetch.py --prometheus-scrape 1     # PrometheusReporter on, scraped every 1 s

For each partition count: create a topic, produce ``--num-records`` records of ``--record-size`` bytes
with acks=1 (linger.ms=5, lz4 off) and wait for every delivery report, then consume the whole topic
from the beginning with an assigned consumer. Prints MB/s (MiB of payload) and records/s for both.
With ``--prometheus-scrape S`` the broker it starts runs the PrometheusReporter and /metrics is scraped
every S seconds during the run (the number of scrapes is printed).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def produce(bootstrap: str, topic: str, n: int, size: int, acks: str) -> float:
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "enable.idempotence": False,
        }
    )
    payload = os.urandom(size)
    failures = []
    start = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, payload, on_delivery=lambda e, m: e and failures.append(e))
                break
            except BufferError:
                p.poll(0.01)
    p.flush(300)
    elapsed = time.perf_counter() - start
    if failures:
        raise SystemExit(f"{len(failures)} deliveries failed: {failures[0]}")
    return elapsed


def consume(bootstrap: str, topic: str, n: int, partitions: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 10485760,
            # room for a whole 6 x 10 MiB response: at the default 64 MiB librdkafka backs off
            # fetching for fetch.error.backoff.ms (1 s) with "Queue full", which measures the client.
            "queued.max.messages.kbytes": 1048576,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    start = time.perf_counter()
    while got < n:
        for m in c.consume(100000, 1.0):
            if m.error():
                raise SystemExit(str(m.error()))
            got += 1
    elapsed = time.perf_counter() - start
    c.close()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap-server")
    ap.add_argument("--num-records", type=int, default=200_000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, nargs="+", default=[1, 6])
    ap.add_argument("--acks", default="1")
    ap.add_argument("--prometheus-scrape", type=float, default=0, help="seconds between scrapes; 0: no reporter")
    ap.add_argument("--num-network-threads", type=int, help="the broker num.network.threads (default 2)")
    args = ap.parse_args()
    broker = None
    stop_scraping = threading.Event()
    scrapes = []
    if not args.bootstrap_server:
        from tests.helpers.broker import BrokerProcess

        reporter = {}
        if args.prometheus_scrape > 0:
            reporter = {
                "metric_reporters": "pykbroker.metrics.prometheus.PrometheusReporter",
                "prometheus_metrics_listener": "127.0.0.1:0",
            }
        threads = {"num_network_threads": str(args.num_network_threads)} if args.num_network_threads else {}
        broker = BrokerProcess(Path(tempfile.mkdtemp(prefix="bench-")), **reporter, **threads).start()
        args.bootstrap_server = broker.bootstrap
        if reporter:
            line = broker.wait_for_line(r"Prometheus metrics endpoint listening on \S+:\d+")
            url = "http://{}:{}/metrics".format(*re.search(r"listening on (\S+):(\d+)", line).groups())

            def scrape() -> None:
                while not stop_scraping.wait(args.prometheus_scrape):
                    urllib.request.urlopen(url, timeout=30).read()
                    scrapes.append(1)

            threading.Thread(target=scrape, daemon=True).start()
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": args.bootstrap_server})
    mib = args.num_records * args.record_size / 1048576
    print(
        f"# confluent-kafka, {args.num_records} records x {args.record_size} B, acks={args.acks}, "
        f"{os.cpu_count()} cores"
    )
    try:
        for parts in args.partitions:
            topic = f"bench-{parts}-{uuid.uuid4().hex[:6]}"
            admin.create_topics([NewTopic(topic, parts, 1)])[topic].result(30)
            time.sleep(0.5)
            tp = produce(args.bootstrap_server, topic, args.num_records, args.record_size, args.acks)
            tc = consume(args.bootstrap_server, topic, args.num_records, parts)
            print(
                f"partitions={parts}  produce {mib / tp:7.1f} MB/s {args.num_records / tp:9.0f} records/s   "
                f"fetch {mib / tc:7.1f} MB/s {args.num_records / tc:9.0f} records/s"
            )
        if scrapes:
            print(f"# {len(scrapes)} scrapes of /metrics during the run")
    finally:
        stop_scraping.set()
        if broker:
            broker.stop()


if __name__ == "__main__":
    main()
