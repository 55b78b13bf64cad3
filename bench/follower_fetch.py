"""Fetch from the closest replica (KIP-392) on 3 local combined nodes in racks a, b, c (tests/helpers/cluster.py):

A topic of 2 partitions, RF 3, led by the rack-a and rack-c nodes, with
``replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector``. ``--records`` records of
``--size`` bytes are produced (acks=all), then ``--rounds`` rounds of, alternating:

(a) read throughput: a new confluent-kafka consumer group reads them all from the start, once with
    ``client.rack=b`` (served by the rack-b follower) and once without (served by the leaders): records/s
    from the first record to the last;
(b) fetch latency: with the consumer caught up, ``--probes`` records are produced one at a time
    (acks=all, 20 ms apart); latency = arrival at the consumer - send time (median and p99). A follower
    hands a record out once its high watermark covers it, which it learns from its next fetch response
    (up to ``replica.fetch.wait.max.ms`` later), so this includes that delay.

Also prints the bytes out of the topic per broker (BrokerTopicMetrics on /metrics).

    .venv/bin/python bench/follower_fetch.py                      # 100,000 x 100 B, 2 rounds of 50 probes
    .venv/bin/python bench/follower_fetch.py --records 100000 --size 100 --probes 50 --replica-fetch-wait-max-ms 200
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.cluster import KRaftCluster
from tests.helpers.replication import REPLICATION_TIMEOUTS, wait_for_full_isr
from tests.integration.test_follower_fetching import topic_metric

TOPIC = "rack-aware"


def consumer(bootstrap: str, group: str, rack: str | None) -> Consumer:
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 100,
    }
    if rack:
        conf["client.rack"] = rack
    c = Consumer(conf)
    c.subscribe([TOPIC])
    return c


def read_all(c: Consumer, n: int) -> float:
    """Records/s of reading ``n`` records, from the first one's arrival to the last one's."""
    got, first = 0, None
    deadline = time.monotonic() + 120
    while got < n and time.monotonic() < deadline:
        msgs = c.consume(10000, 1.0)
        if msgs and first is None:
            first = time.monotonic()
        got += sum(1 for m in msgs if m.error() is None)
    assert got >= n, f"read {got} of {n}"
    assert first is not None
    return n / max(time.monotonic() - first, 1e-9)


def probe_latencies(bootstrap: str, c: Consumer, probes: int) -> list[float]:
    """ms from send to arrival of ``probes`` records sent one at a time to a caught-up consumer."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    out = []
    for i in range(probes):
        sent = time.monotonic()
        p.produce(TOPIC, value=b"probe", partition=i % 2)
        p.poll(0)
        deadline = sent + 10
        while time.monotonic() < deadline:
            msgs = [m for m in c.consume(10, 0.05) if m.error() is None and m.value() == b"probe"]
            if msgs:
                out.append((time.monotonic() - sent) * 1000)
                break
        time.sleep(0.02)
    p.flush(10)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--probes", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--replica-fetch-wait-max-ms", type=int, default=500)
    args = ap.parse_args()
    overrides = {
        **REPLICATION_TIMEOUTS,
        "offsets.topic.num.partitions": "1",
        "replica.fetch.wait.max.ms": str(args.replica_fetch_wait_max_ms),
        "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector",
        "metric.reporters": "pykbroker.metrics.prometheus.PrometheusReporter",
        "prometheus.metrics.listener": "127.0.0.1:0",
    }
    with tempfile.TemporaryDirectory() as tmp:
        cluster = KRaftCluster(
            Path(tmp), controllers=3, brokers=0, combined=True, **{k.replace(".", "_"): v for k, v in overrides.items()}
        )
        for node_id, rack in {1: "a", 2: "b", 3: "c"}.items():
            cluster.brokers[node_id].props["broker.rack"] = rack
        cluster.start()
        try:
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            admin.create_topics([NewTopic(TOPIC, num_partitions=2, replica_assignment=[[1, 2, 3], [3, 2, 1]])])[
                TOPIC
            ].result(30)
            wait_for_full_isr(lambda: cluster.bootstrap, TOPIC)
            p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
            value = b"x" * args.size
            for i in range(args.records):
                while True:
                    try:
                        p.produce(TOPIC, value=value, partition=i % 2)
                        break
                    except BufferError:
                        p.poll(0.05)
            assert p.flush(60) == 0
            print(f"{args.records} records x {args.size} B, replica.fetch.wait.max.ms={args.replica_fetch_wait_max_ms}")
            modes = (("client.rack=b (follower)", "b"), ("no client.rack (leaders)", None))
            for r, (label, rack) in [(r, m) for r in range(args.rounds) for m in modes]:
                c = consumer(cluster.bootstrap, f"g-{rack}-{r}", rack)
                rate = read_all(c, args.records)
                before = [topic_metric(n, "bytesout") for _, n in sorted(cluster.brokers.items())]
                lat = sorted(probe_latencies(cluster.bootstrap, c, args.probes))
                served = [
                    topic_metric(n, "bytesout") - b
                    for (_, n), b in zip(sorted(cluster.brokers.items()), before, strict=True)
                ]
                c.close()
                p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
                print(
                    f"{label:28s} read {rate:10,.0f} records/s; fetch latency median {statistics.median(lat):6.1f} ms, "
                    f"p99 {p99:6.1f} ms ({len(lat)} probes; probe bytes out per broker {[int(x) for x in served]})"
                )
            for node_id, node in sorted(cluster.brokers.items()):
                out = topic_metric(node, "bytesout")
                print(f"broker {node_id} (rack {'abc'[node_id - 1]}): bytes out of {TOPIC} {out:,.0f}")
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
