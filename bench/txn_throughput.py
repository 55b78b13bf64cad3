"""Transactional throughput, transaction protocol version 1 vs version 2 (KIP-890 part 2), against one local broker
this script starts (a subprocess, tests/helpers/broker.py; a new cluster finalizes transaction.version 2, and
version 1 requests are served beside it), alternating in the same run. Each transaction writes
``--per-txn`` records of ``--record-size`` bytes (one batch per partition of ``--partitions``) and commits:

* ``confluent-v1``: confluent-kafka's transactional producer (librdkafka speaks version 1): begin, produce,
  commit (linger.ms=5);
* ``raw-v1``: the raw-protocol client of tests/helpers/raw_txn.py at version 1: AddPartitionsToTxn v3 (the
  clients' version), Produce v11, EndTxn v4;
* ``raw-v2``: the same client at version 2: Produce v12 (the leader adds the partition), EndTxn v5 (epoch bump).

Prints records/s, MB/s and transactions/s per mode (median of ``--rounds``; each round runs every mode once, in
turn), the raw clients' retries (CONCURRENT_TRANSACTIONS / NOT_ENOUGH_REPLICAS while the previous transaction's
markers are written; backoff ``--backoff-ms``) and the raw v2/v1 ratio.

    .venv/bin/python bench/txn_throughput.py                        # 3 rounds x 200 transactions x 100 x 1 KB
    .venv/bin/python bench/txn_throughput.py --transactions 500 --partitions 3 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer

from tests.helpers.broker import BrokerProcess
from tests.helpers.raw_txn import RawTxnProducer
from tests.helpers.topics import create_topic

TOPIC = "bench-txn-v"


def confluent_v1(bs: str, args: argparse.Namespace, tid: str) -> tuple[float, int]:
    value = b"x" * args.record_size
    p = Producer({"bootstrap.servers": bs, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(30)
    t0 = time.perf_counter()
    for _ in range(args.transactions):
        p.begin_transaction()
        for i in range(args.per_txn):
            p.produce(TOPIC, value, partition=i % args.partitions)
        p.commit_transaction(60)
    elapsed = time.perf_counter() - t0
    p.flush(10)
    return elapsed, 0


def raw(bs: str, args: argparse.Namespace, tid: str, version: int) -> tuple[float, int]:
    value = b"x" * args.record_size
    per_partition = [
        args.per_txn // args.partitions + (p < args.per_txn % args.partitions) for p in range(args.partitions)
    ]
    batches = {(TOPIC, p): [value] * n for p, n in enumerate(per_partition)}
    with RawTxnProducer(bs, tid, version, timeout=30, backoff=args.backoff_ms / 1000) as p:
        t0 = time.perf_counter()
        for _ in range(args.transactions):
            p.send(batches)
            p.end(True)
        return time.perf_counter() - t0, p.retries


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transactions", type=int, default=200)
    ap.add_argument("--per-txn", type=int, default=100, help="records per transaction")
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backoff-ms", type=float, default=5, help="the raw clients' retry backoff")
    args = ap.parse_args()
    modes = ["confluent-v1", "raw-v1", "raw-v2"]
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(
            Path(tmp),
            **{"transaction.state.log.num.partitions": "3", "transaction.state.log.replication.factor": "1"},
        ).start()
        try:
            bs = broker.bootstrap
            create_topic(bs, TOPIC, args.partitions)
            times: dict[str, list[float]] = {m: [] for m in modes}
            retries: dict[str, list[int]] = {m: [] for m in modes}
            for r in range(args.rounds):
                for mode in modes:
                    tid = f"bench-{mode}-{r}"
                    if mode == "confluent-v1":
                        t, n = confluent_v1(bs, args, tid)
                    else:
                        t, n = raw(bs, args, tid, 1 if mode == "raw-v1" else 2)
                    times[mode].append(t)
                    retries[mode].append(n)
            records = args.transactions * args.per_txn
            mb = records * args.record_size / 1e6
            print(
                f"# {args.transactions} transactions x {args.per_txn} records x {args.record_size} B, "
                f"{args.partitions} partition(s), one broker, {os.cpu_count()} cores, median of {args.rounds} rounds"
            )
            print(f"{'mode':13s} {'records/s':>10s} {'MB/s':>7s} {'txn/s':>7s} {'retries':>8s}  per round (s)")
            for mode in modes:
                t = statistics.median(times[mode])
                rounds = " ".join(f"{x:.2f}" for x in times[mode])
                print(
                    f"{mode:13s} {records / t:10.0f} {mb / t:7.1f} {args.transactions / t:7.1f} "
                    f"{statistics.median(retries[mode]):8.0f}  {rounds}"
                )
            ratio = statistics.median(times["raw-v1"]) / statistics.median(times["raw-v2"])
            print(f"raw v2/v1 throughput ratio: {ratio:.2f}")
        finally:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
