"""Producer throughput: pykbroker's perf tool vs kafka-python and confluent-kafka, in one run (issue 6).

    .venv/bin/python bench/producer_compare.py                      # starts its own broker (subprocess)
    .venv/bin/python bench/producer_compare.py --num-records 200000 --record-sizes 100 1000 --acks 1 all \\
        --linger-ms 0 5 --clients pykbroker kafka-python confluent-kafka

For each shape (record size x acks x linger.ms) and client, a fresh 6-partition topic receives
``--num-records`` records (``--num-records-large`` for records of 1000 bytes or more). pykbroker runs
``bin/kafka-producer-perf-test`` (its final line is parsed); the peers run the same loop in Python:
one ``send`` per record with a per-record delivery callback measuring latency, then ``flush``.
Idempotence follows each client's default for the acks setting. Prints a table: records/s, MB/s,
average latency (ms). Each client runs in its own process. Not a test.

``--rounds R`` (issue 31's "perf tool" row) alternates pykbroker and confluent-kafka R times on the first
shape, each round on a fresh topic, and ends with the median records/s of each and their ratio;
``--compare PATH`` adds the perf tool of another checkout (before / after a change, same run)::

    .venv/bin/python bench/producer_compare.py --rounds 3 --num-records 1000000 --record-sizes 100 \\
        --acks 1 --linger-ms 5 [--compare /tmp/main-export]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FINAL = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency")

PEER = r"""
import json, sys, time
bootstrap, topic, n, size, acks, linger, client = sys.argv[1:8]
n, size, linger = int(n), int(size), int(linger)
payload = bytes(65 + i % 26 for i in range(size))
lat = []
if client == "kafka-python":
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap, acks=(acks if acks == "all" else int(acks)), linger_ms=linger)
    start = time.time()
    for _ in range(n):
        t = time.time()
        p.send(topic, payload).add_callback(lambda _m, t=t: lat.append(time.time() - t))
    p.flush()
else:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": linger})
    start = time.time()
    for _ in range(n):
        t = time.time()
        while True:
            try:
                p.produce(topic, payload, on_delivery=lambda e, m, t=t: e or lat.append(time.time() - t))
                break
            except BufferError:
                p.poll(0.001)
        p.poll(0)
    p.flush(300)
elapsed = time.time() - start
print(json.dumps({"records": len(lat), "elapsed": elapsed, "avg_ms": 1000 * sum(lat) / max(1, len(lat))}))
"""


def run_pykbroker(bootstrap, topic, n, size, acks, linger, root: Path = ROOT) -> dict:
    """The perf tool of the checkout at ``root`` (this one by default; ``--compare`` gives another)."""
    env = dict(os.environ, PYTHONPATH=str(root))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pykbroker.tools.producer_performance",
            "--topic",
            topic,
            "--num-records",
            str(n),
            "--record-size",
            str(size),
            "--throughput",
            "-1",
            "--producer-props",
            f"bootstrap.servers={bootstrap}",
            f"acks={acks}",
            f"linger.ms={linger}",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=root,
        env=env,
    )
    for line in out.stdout.splitlines():
        m = FINAL.match(line)
        if m:
            return {
                "records": int(m.group(1)),
                "rps": float(m.group(2)),
                "mbps": float(m.group(3)),
                "avg_ms": float(m.group(4)),
            }
    raise SystemExit(f"perf tool failed: {out.stdout}\n{out.stderr}")


def run_peer(client, bootstrap, topic, n, size, acks, linger) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PEER, bootstrap, topic, str(n), str(size), acks, str(linger), client],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if out.returncode != 0:
        raise SystemExit(f"{client} failed: {out.stderr[-2000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return {
        "records": r["records"],
        "rps": r["records"] / r["elapsed"],
        "mbps": r["records"] * size / r["elapsed"] / 1048576,
        "avg_ms": r["avg_ms"],
    }


def compare_rounds(args, admin) -> None:
    """Alternate the perf tool and confluent-kafka (and the ``--compare`` checkout's perf tool) on the
    first shape, rotating the order each round; print each round, the medians and the ratios."""
    from confluent_kafka.admin import NewTopic

    size, acks, linger = args.record_sizes[0], args.acks[0], args.linger_ms[0]
    n = args.num_records
    clients = ["pykbroker", "confluent-kafka"] + (["pykbroker-compare"] if args.compare else [])
    rps: dict[str, list[float]] = {c: [] for c in clients}
    for rnd in range(args.rounds):
        order = clients[rnd % len(clients) :] + clients[: rnd % len(clients)]
        for client in order:
            topic = f"cmp-{uuid.uuid4().hex[:8]}"
            admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(30)
            time.sleep(0.5)
            load = os.getloadavg()[0]
            if client == "pykbroker":
                r = run_pykbroker(args.bootstrap_server, topic, n, size, acks, linger)
            elif client == "pykbroker-compare":
                r = run_pykbroker(args.bootstrap_server, topic, n, size, acks, linger, Path(args.compare).resolve())
            else:
                r = run_peer(client, args.bootstrap_server, topic, n, size, acks, linger)
            rps[client].append(r["rps"])
            print(
                f"{size:>5} {acks:>4} {linger:>6} {client:>17} {r['rps']:>11,.0f} {r['mbps']:>7.2f} "
                f"{r['avg_ms']:>8.1f}   round {rnd + 1}, load {load:.2f}",
                flush=True,
            )
    peer = statistics.median(rps["confluent-kafka"])
    medians = "  ".join(f"{c} {statistics.median(v):,.0f}" for c, v in rps.items())
    print(f"median records/s: {medians}")
    ratios = "  ".join(f"{c} {statistics.median(rps[c]) / peer:.2f}" for c in clients if c != "confluent-kafka")
    print(f"ratio to confluent-kafka: {ratios}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap-server")
    ap.add_argument("--num-records", type=int, default=200_000)
    ap.add_argument("--num-records-large", type=int, default=50_000)
    ap.add_argument("--record-sizes", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--acks", nargs="+", default=["1", "all"])
    ap.add_argument("--linger-ms", type=int, nargs="+", default=[0, 5])
    ap.add_argument("--clients", nargs="+", default=["pykbroker", "kafka-python", "confluent-kafka"])
    ap.add_argument("--rounds", type=int, default=0, help="alternate pykbroker / confluent-kafka R times (ratio)")
    ap.add_argument(
        "--compare",
        metavar="PATH",
        help="with --rounds: also run the perf tool of the pykbroker checkout at PATH (e.g. an exported main)",
    )
    args = ap.parse_args()
    broker = None
    if not args.bootstrap_server:
        from tests.helpers.broker import BrokerProcess

        broker = BrokerProcess(Path(tempfile.mkdtemp(prefix="bench-"))).start()
        args.bootstrap_server = broker.bootstrap
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": args.bootstrap_server})
    print("# producers against pykbroker, 6 partitions, 2 cores; records/s, MB/s, avg latency ms")
    print(f"{'size':>5} {'acks':>4} {'linger':>6} {'client':>17} {'records/s':>11} {'MB/s':>7} {'avg ms':>8}")
    try:
        if args.rounds:
            compare_rounds(args, admin)
            return
        for size in args.record_sizes:
            n = args.num_records if size < 1000 else args.num_records_large
            for acks in args.acks:
                for linger in args.linger_ms:
                    for client in args.clients:
                        topic = f"cmp-{uuid.uuid4().hex[:8]}"
                        admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(30)
                        time.sleep(0.5)
                        if client == "pykbroker":
                            r = run_pykbroker(args.bootstrap_server, topic, n, size, acks, linger)
                        else:
                            r = run_peer(client, args.bootstrap_server, topic, n, size, acks, linger)
                        print(
                            f"{size:>5} {acks:>4} {linger:>6} {client:>16} {r['rps']:>11,.0f} {r['mbps']:>7.2f} "
                            f"{r['avg_ms']:>8.1f}",
                            flush=True,
                        )
    finally:
        admin = None  # drop the client before its broker goes (no reconnect noise on stderr)
        gc.collect()
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
