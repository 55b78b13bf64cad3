"""Idle replication cost (issue 31, first row): CPU and RSS of 3 combined nodes holding many RF 3 partitions
while no client is connected.

Each run starts 3 combined nodes (``process.roles=broker,controller``) the Kafka way (tests/helpers/cluster.py:
``kafka-storage format`` then ``python -m pykbroker.kafka``), creates ``--topics`` topics x ``--partitions``
partitions with replication factor 3 in CreateTopics batches of 100, waits until Metadata shows every partition
with 3 in-sync replicas and then until every node has created its logs (DescribeLogDirs; both times are printed:
the image shows a partition, with its initial full ISR, before its logs exist), closes every client connection,
waits ``--settle`` seconds and then reads ``/proc/<pid>/stat`` utime+stime of each node over ``--seconds``: CPU
as % of one core per node, and the RSS (``/proc/<pid>/status`` VmRSS) at the end.

``--pythonpath`` (repeatable) names the checkout the nodes run; one cluster per checkout, one after the other, so
a before/after comparison is made in the same run (e.g. the old tree from ``git archive HEAD~3 | tar -x -C
/tmp/old``). Default: this checkout. The replica fetchers run with the broker defaults (``replica.fetch.wait.max.ms``
500) unless ``--fetch-wait-ms`` says otherwise.

    .venv/bin/python bench/idle_cluster.py                                   # 500 x 10, 30 s (the issue's row)
    .venv/bin/python bench/idle_cluster.py --topics 100 --partitions 10 --seconds 20 \\
        --pythonpath /tmp/old --pythonpath .
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tests.helpers.broker as broker_helper
import tests.helpers.cluster as cluster_helper
from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.cluster import KRaftCluster

CLK_TCK = os.sysconf("SC_CLK_TCK")
BATCH = 100


def cpu_ticks(pid: int) -> int:
    """utime + stime of ``pid`` in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of stat(5), after pid and comm


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    """CreateTopics v7 in batches of ``BATCH`` topics, RF 3; raises on any error but TOPIC_ALREADY_EXISTS."""
    with BrokerConnection.to(bootstrap, timeout=120) as c:
        for i in range(0, len(names), BATCH):
            r = c.request(
                ApiKeys.CREATE_TOPICS,
                7,
                {
                    "topics": [
                        {
                            "name": n,
                            "num_partitions": partitions,
                            "replication_factor": 3,
                            "assignments": [],
                            "configs": [],
                        }
                        for n in names[i : i + BATCH]
                    ],
                    "timeout_ms": 60000,
                    "validate_only": False,
                },
            )
            # TOPIC_ALREADY_EXISTS (36): on a loaded machine the forwarding broker may be fenced meanwhile (its
            # heartbeats late) and resend the forwarded request, which the controller had already committed.
            bad = [t for t in r["topics"] if t["error_code"] not in (0, 36)]
            if bad:
                raise RuntimeError(f"CreateTopics failed: {bad[:3]}")


def full_isr_count(bootstrap: str, prefix: str) -> int:
    """Partitions of the ``prefix`` topics that one node's Metadata shows with a leader and 3 in-sync replicas."""
    with BrokerConnection.to(bootstrap, timeout=30) as c:
        r = c.request(ApiKeys.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
    return sum(
        1
        for t in r["topics"]
        if t["name"].startswith(prefix) and not t["error_code"]
        for p in t["partitions"]
        if p["leader_id"] >= 0 and len(p["isr_nodes"]) == 3
    )


def local_log_count(bootstrap: str, prefix: str) -> int:
    """Partitions of the ``prefix`` topics with a log on the node at ``bootstrap`` (DescribeLogDirs v4, all
    topics): Metadata shows a topic with its full ISR before the nodes have created its logs."""
    with BrokerConnection.to(bootstrap, timeout=60) as c:
        r = c.request(ApiKeys.DESCRIBE_LOG_DIRS, 4, {"topics": None})
    return sum(
        len(t["partitions"])
        for res in r["results"]
        if not res["error_code"]
        for t in res["topics"]
        if t["name"].startswith(prefix)
    )


def run(pythonpath: Path, args) -> list[tuple[int, float, float]]:
    broker_helper.ROOT = cluster_helper.ROOT = pythonpath  # the nodes (and the format tool) run this checkout
    overrides = {"default.replication.factor": "3", "offsets.topic.replication.factor": "3"}
    if args.fetch_wait_ms is not None:
        overrides["replica.fetch.wait.max.ms"] = str(args.fetch_wait_ms)
    with tempfile.TemporaryDirectory(prefix="idle-cluster-") as tmp:
        cluster = KRaftCluster(Path(tmp), controllers=3, brokers=0, combined=True, **overrides)
        try:
            cluster.start(timeout=120)
            cluster.await_leader(60)
            nodes = list(cluster.brokers.values())
            names = [f"idle-{i:04d}" for i in range(args.topics)]
            total = args.topics * args.partitions
            start = time.monotonic()
            create_topics(nodes[0].bootstrap, names, args.partitions)
            created = time.monotonic() - start
            deadline = start + args.isr_timeout
            while True:
                counts = [full_isr_count(n.bootstrap, "idle-") for n in nodes]
                if all(c == total for c in counts):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"full ISR not reached in {args.isr_timeout}s: {counts} of {total}")
                time.sleep(0.2)
            print(
                f"  {total} partitions: CreateTopics answered in {created:.1f} s, "
                f"every partition with 3 in-sync replicas on every node after {time.monotonic() - start:.1f} s",
                flush=True,
            )
            while (logs := [local_log_count(n.bootstrap, "idle-") for n in nodes]) != [total] * len(nodes):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"logs not created in {args.isr_timeout}s: {logs} of {total} per node")
                time.sleep(0.5)
            print(f"  every node has created its {total} logs after {time.monotonic() - start:.1f} s", flush=True)
            time.sleep(args.settle)  # no client connected from here on
            pids = [n.proc.pid for n in nodes if n.proc is not None]
            print(f"  measuring node pids {pids}", flush=True)
            before = [cpu_ticks(p) for p in pids]
            t0 = time.monotonic()
            time.sleep(args.seconds)
            elapsed = time.monotonic() - t0
            after = [cpu_ticks(p) for p in pids]
            return [
                (node_id, 100.0 * (a - b) / CLK_TCK / elapsed, rss_mb(p))
                for node_id, p, b, a in zip(cluster.brokers, pids, before, after, strict=True)
            ]
        finally:
            try:
                cluster.stop()
            except subprocess.TimeoutExpired as e:  # the helper killed it: closing thousands of logs takes a while
                print(f"  (a node took more than {e.timeout:.0f} s to stop and was killed)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=500)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=30.0, help="idle measurement window")
    ap.add_argument("--settle", type=float, default=3.0, help="idle seconds before the window")
    ap.add_argument("--isr-timeout", type=float, default=600.0)
    ap.add_argument("--fetch-wait-ms", type=int, default=None, help="replica.fetch.wait.max.ms (default: Kafka's)")
    ap.add_argument("--pythonpath", action="append", type=Path, help="checkout the nodes run (repeatable)")
    args = ap.parse_args()
    trees = [p.resolve() for p in args.pythonpath or [Path(__file__).resolve().parents[1]]]
    print(
        f"3 combined nodes, {args.topics} topics x {args.partitions} partitions RF 3, idle {args.seconds:.0f} s, "
        f"{os.cpu_count()} cores"
    )
    for tree in trees:
        print(f"nodes from {tree}:")
        for node_id, cpu, rss in run(tree, args):
            print(f"  node {node_id}: CPU {cpu:5.1f}% of a core, RSS {rss:.0f} MB")


if __name__ == "__main__":
    main()
