"""Partition reassignment figures (issue 27, KIP-455 / KIP-73) on 1 controller + 4 brokers, separate processes
(tests/helpers/cluster.py): ``--partitions`` partitions of ``--mb`` MB each, RF 3 on brokers 101-103, each moved so
that broker 104 replaces one old replica, with ``bin/kafka-reassign-partitions --execute`` and polled with
``--verify`` until every partition is done (``--verify`` then clears the throttles). Run without a throttle and with
``--throttle-mb`` MB/s (``--throttle``, Kafka's leader/follower replication throttles), on a fresh topic each.

Per run it prints: the time from ``--execute`` to the completed ``--verify``; the bytes broker 104 received (its log
directories' size) over that time, mean and the highest one-second rate seen; and the latency of an acks=all probe
producer writing 200 records/s of 100 bytes to the moving partitions meanwhile (p50 / p99 / max ms). The time
includes the tool's start-up (``--execute`` and each ``--verify`` are processes, about a second each). A throttle
is a rate over Kafka's 11 one-second quota windows, so about ten seconds' worth passes at once before it bites:
with 6 x 5 MB a 10 MB/s throttle never shows; 1 MB/s does.

    .venv/bin/python bench/reassignment.py --partitions 6 --mb 5             # small, about a minute
    .venv/bin/python bench/reassignment.py --mb 5 --modes throttled --throttle-mb 1
    .venv/bin/python bench/reassignment.py --partitions 6 --mb 100           # the issue's figure (6 x 100 MB)
    .venv/bin/python bench/reassignment.py --mb 100 --throttle-mb 10 --modes throttled
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.cluster import KRaftCluster
from tests.helpers.replication import REPLICATION_TIMEOUTS, wait_for_full_isr

OLD = [101, 102, 103]
NEW = 104
RECORD = 16 * 1024


def fill(bootstrap: str, topic: str, partitions: int, mb: int) -> None:
    """Write ``mb`` MB to each partition (16 KB records, acks=1)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20, "batch.size": 1 << 20})
    payload = b"x" * RECORD
    errors: list = []
    for partition in range(partitions):
        for _ in range(mb * (1 << 20) // RECORD):
            while True:
                try:
                    p.produce(topic, payload, partition=partition, on_delivery=lambda e, m: e and errors.append(e))
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
    if p.flush(300) != 0 or errors:
        raise RuntimeError(f"fill failed: {errors[:3]}")


class Probe:
    """An acks=all producer writing ``rate`` records/s of 100 bytes over the topic's partitions; ``latencies_ms``."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: int = 200):
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        self.topic, self.partitions, self.interval = topic, partitions, 1.0 / rate
        self.latencies_ms: list[float] = []
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            sent = time.perf_counter()

            def done(err, msg, sent=sent):
                if err is not None:
                    self.failed += 1
                else:
                    self.latencies_ms.append((time.perf_counter() - sent) * 1000)

            self.producer.produce(self.topic, b"p" * 100, partition=i % self.partitions, on_delivery=done)
            self.producer.poll(0)
            i += 1
            time.sleep(self.interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.producer.flush(30)


def bytes_on(cluster: KRaftCluster, broker: int, topic: str) -> int:
    logs = cluster.brokers[broker].data_dir / "logs"
    total = 0
    for d in logs.glob(f"{topic}-*"):
        for f in d.glob("*.log"):
            try:
                total += f.stat().st_size
            except FileNotFoundError:
                pass
    return total


def reassign_tool(cluster: KRaftCluster, action: str, path: Path, *extra: str) -> str:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pykbroker.tools.reassign_partitions_command",
            "--bootstrap-server",
            cluster.bootstrap,
            f"--{action}",
            "--reassignment-json-file",
            str(path),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if run.returncode != 0:
        raise RuntimeError(f"kafka-reassign-partitions --{action}: {run.stdout}{run.stderr}")
    return run.stdout


def one_run(cluster: KRaftCluster, root: Path, mode: str, partitions: int, mb: int, throttle: int | None) -> dict:
    topic = f"move-{mode}"
    assignment = [[OLD[(p + i) % 3] for i in range(3)] for p in range(partitions)]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replica_assignment=assignment)])[topic].result(30)
    wait_for_full_isr(lambda: cluster.bootstrap, topic)
    fill(cluster.bootstrap, topic, partitions, mb)
    wait_for_full_isr(lambda: cluster.bootstrap, topic, timeout=120)
    targets = [[NEW if r == replicas[-1] else r for r in replicas] for replicas in assignment]
    path = root / f"{topic}.json"
    body = {
        "version": 1,
        "partitions": [{"topic": topic, "partition": p, "replicas": r} for p, r in enumerate(targets)],
    }
    path.write_text(json.dumps(body))

    probe = Probe(cluster.bootstrap, topic, partitions)
    time.sleep(1.0)  # a baseline before the move
    samples: list[tuple[float, int]] = []
    done = threading.Event()

    def sample() -> None:  # broker 104's bytes every 0.25 s, from before --execute until --verify says done
        while not done.is_set():
            samples.append((time.monotonic(), bytes_on(cluster, NEW, topic)))
            done.wait(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.monotonic()
    reassign_tool(cluster, "execute", path, *(["--throttle", str(throttle)] if throttle else []))
    while reassign_tool(cluster, "verify", path).count("is completed.") < partitions:
        if time.monotonic() - start > 3600:
            raise RuntimeError("reassignment not complete within an hour")
        time.sleep(0.5)
    elapsed = time.monotonic() - start
    done.set()
    sampler.join(5)
    samples.append((time.monotonic(), bytes_on(cluster, NEW, topic)))
    probe.stop()
    moved = samples[-1][1]
    peak = 0.0
    for i, (t0, b0) in enumerate(samples):  # the highest rate over any window of at least a second
        for t1, b1 in samples[i + 1 :]:
            if t1 - t0 >= 1.0:
                peak = max(peak, (b1 - b0) / (t1 - t0))
                break
    lat = sorted(probe.latencies_ms)
    return {
        "mode": mode,
        "seconds": elapsed,
        "moved_mb": moved / 1e6,
        "mean_mb_s": moved / elapsed / 1e6,
        "peak_mb_s": peak / 1e6,
        "p50_ms": statistics.median(lat) if lat else float("nan"),
        "p99_ms": lat[int(len(lat) * 0.99) - 1] if lat else float("nan"),
        "max_ms": lat[-1] if lat else float("nan"),
        "probe_records": len(lat),
        "probe_failed": probe.failed,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--mb", type=int, default=100, help="MB per partition")
    ap.add_argument("--throttle-mb", type=float, default=10.0, help="the throttled run's rate, MB/s")
    ap.add_argument("--modes", nargs="+", choices=["unthrottled", "throttled"], default=["unthrottled", "throttled"])
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-reassignment-"))
    cluster = KRaftCluster(
        root,
        controllers=1,
        brokers=4,
        **{
            k.replace(".", "_"): v
            for k, v in {
                **REPLICATION_TIMEOUTS,
                "log.segment.bytes": str(64 << 20),
                "offsets.topic.num.partitions": "1",
            }.items()
        },
    )
    cluster.start(timeout=120)
    try:
        print(f"{args.partitions} partitions x {args.mb} MB, RF 3, one replica each moved to broker {NEW}")
        for mode in args.modes:
            throttle = int(args.throttle_mb * 1e6) if mode == "throttled" else None
            r = one_run(cluster, root, mode, args.partitions, args.mb, throttle)
            label = f"throttled {args.throttle_mb:g} MB/s" if throttle else "unthrottled"
            print(
                f"{label:>22}: {r['seconds']:7.1f} s, {r['moved_mb']:8.1f} MB to {NEW} "
                f"(mean {r['mean_mb_s']:6.2f} MB/s, peak 1 s {r['peak_mb_s']:6.2f} MB/s); "
                f"produce acks=all p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, max {r['max_ms']:.1f} ms "
                f"({r['probe_records']} records, {r['probe_failed']} failed)",
                flush=True,
            )
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
