"""Transactional produce vs idempotent produce, confluent-kafka, 1 KB records, one local broker
(``pykbroker.testing.EmbeddedKafka`` in this process's interpreter is avoided: the broker runs as a
subprocess, tests/helpers/broker.py), alternating in the same run:

* idempotent: ``enable.idempotence=true``, acks=all, linger.ms=5;
* transactional with 100 and with 1,000 records per transaction (begin, produce, commit).

Prints MB/s and records/s per mode (median of ``--rounds``).

    .venv/bin/python bench/transactions.py                       # 3 rounds x 50,000 records
    .venv/bin/python bench/transactions.py --records 100000 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer

from tests.helpers.broker import BrokerProcess
from tests.helpers.topics import create_topic

VALUE = b"x" * 1024


def idempotent(bs: str, topic: str, n: int) -> float:
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "acks": "all", "linger.ms": 5})
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, VALUE, partition=i % 3)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    return time.perf_counter() - t0


def transactional(bs: str, topic: str, n: int, per_txn: int, tid: str) -> float:
    p = Producer({"bootstrap.servers": bs, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(30)
    t0 = time.perf_counter()
    for start in range(0, n, per_txn):
        p.begin_transaction()
        for i in range(start, min(n, start + per_txn)):
            while True:
                try:
                    p.produce(topic, VALUE, partition=i % 3)
                    break
                except BufferError:
                    p.poll(0.01)
        p.commit_transaction(60)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(
            Path(tmp),
            **{"transaction.state.log.num.partitions": "3", "transaction.state.log.replication.factor": "1"},
        ).start()
        try:
            bs = broker.bootstrap
            create_topic(bs, "bench-txn", 3)
            results: dict[str, list[float]] = {"idempotent": [], "txn-100": [], "txn-1000": []}
            for r in range(args.rounds):
                results["idempotent"].append(idempotent(bs, "bench-txn", args.records))
                results["txn-100"].append(transactional(bs, "bench-txn", args.records, 100, f"b100-{r}"))
                results["txn-1000"].append(transactional(bs, "bench-txn", args.records, 1000, f"b1000-{r}"))
            mb = args.records * len(VALUE) / 1e6
            for mode, times in results.items():
                t = statistics.median(times)
                print(f"{mode:12s} {mb / t:8.1f} MB/s {args.records / t:10.0f} records/s (median of {len(times)})")
        finally:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
