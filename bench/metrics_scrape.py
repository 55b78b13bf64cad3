"""Time of a Prometheus scrape of /metrics with many partitions (PrometheusReporter).

    .venv/bin/python bench/metrics_scrape.py                      # 1000 partitions, 20 scrapes
    .venv/bin/python bench/metrics_scrape.py --partitions 5000 --scrapes 10

Starts a broker (subprocess) with ``metric.reporters=pykbroker.metrics.prometheus.PrometheusReporter``
on an ephemeral port, creates a topic of ``--partitions`` partitions, produces one record to each (so
every partition has per-topic and per-log metrics), waits until the ReplicaManager reports them all,
then scrapes ``--scrapes`` times and prints the median and worst wall time, the page size and the number
of samples (parsed with prometheus_client's parser).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--scrapes", type=int, default=20)
    args = ap.parse_args()

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from prometheus_client.parser import text_string_to_metric_families

    from tests.helpers.broker import BrokerProcess
    from tests.helpers.wait import wait_until

    broker = BrokerProcess(
        Path(tempfile.mkdtemp(prefix="bench-metrics-")),
        metric_reporters="pykbroker.metrics.prometheus.PrometheusReporter",
        prometheus_metrics_listener="127.0.0.1:0",
    ).start()
    try:
        line = broker.wait_for_line(r"Prometheus metrics endpoint listening on \S+:\d+")
        host, port = re.search(r"listening on (\S+):(\d+)", line).groups()
        url = f"http://{host}:{port}/metrics"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("scrape", args.partitions, 1)])["scrape"].result(120)
        wait_until(lambda: "scrape" in admin.list_topics(timeout=10).topics, 120, message="topic visible")
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
        for i in range(args.partitions):
            p.produce("scrape", b"x" * 100, partition=i)
        p.flush(120)

        def page() -> str:
            return urllib.request.urlopen(url, timeout=60).read().decode()

        def all_hosted() -> bool:
            m = re.search(r"^kafka_server_replicamanager_partitioncount (\S+)$", page(), re.M)
            return m is not None and float(m.group(1)) >= args.partitions

        wait_until(all_hosted, timeout=120, interval=0.5, message="every partition hosted")
        times = []
        for _ in range(args.scrapes):
            start = time.perf_counter()
            text = page()
            times.append(time.perf_counter() - start)
        samples = sum(len(f.samples) for f in text_string_to_metric_families(text))
        print(
            f"partitions={args.partitions}  scrape median {statistics.median(times) * 1000:.1f} ms  "
            f"max {max(times) * 1000:.1f} ms  page {len(text) / 1024:.0f} KiB  {samples} samples"
        )
    finally:
        broker.stop(timeout=120)  # closing 1,000 logs takes a while on a loaded machine


if __name__ == "__main__":
    main()
