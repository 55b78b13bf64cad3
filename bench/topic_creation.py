"""Topic creation and Metadata for many topics (issue 31, rows 2 and 3).

Each run starts 3 combined nodes (``process.roles=broker,controller``) the Kafka way (tests/helpers/cluster.py:
``kafka-storage format`` then ``python -m pykbroker.kafka``), creates ``--topics`` topics x ``--partitions``
partitions with replication factor 3 in CreateTopics batches of 100 (bench/idle_cluster.py's helpers) and prints

- the seconds from the first CreateTopics request to every partition being shown by every node's Metadata with
  a leader and 3 in-sync replicas (and when CreateTopics itself was answered); then the seconds until every
  partition's leader answers ListOffsets for it (its log exists there: the image shows a topic before its logs
  exist, as in Kafka) and how many partitions still have 3 in-sync replicas then;
- the milliseconds of one Metadata v12 request for all topics (request sent -> whole response frame read, not
  decoded, so the figure is the broker's cost plus transfer): median, min and max over ``--calls`` calls on one
  connection, after one warm-up call, once the logs are ready.

``--compare PATH`` (repeatable) runs the same, one cluster after the other, against another checkout (e.g. the
tree from ``git archive main | tar -x -C /tmp/main``) so before/after figures come from the same run.

    .venv/bin/python bench/topic_creation.py                                  # 500 x 10 (the issue's rows)
    .venv/bin/python bench/topic_creation.py --topics 100 --partitions 10 --compare /tmp/main
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tests.helpers.broker as broker_helper
import tests.helpers.cluster as cluster_helper
from bench.idle_cluster import create_topics, full_isr_count
from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.cluster import KRaftCluster

PREFIX = "tc-"


def metadata_ms(bootstrap: str, calls: int) -> list[float]:
    """Milliseconds of ``calls`` Metadata v12 all-topics requests on one connection (after one warm-up)."""
    body = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    out = []
    with BrokerConnection.to(bootstrap, timeout=60) as c:
        for i in range(calls + 1):
            t0 = time.perf_counter()
            c.send(ApiKeys.METADATA, 12, body)
            c.receive_frame()
            c.pending.clear()
            if i:
                out.append((time.perf_counter() - t0) * 1000.0)
    return out


def ready_count(nodes, prefix: str) -> int:
    """Partitions of the ``prefix`` topics whose leader answers ListOffsets (latest) without error: their log
    exists there. One Metadata request, then one ListOffsets v7 per leader."""
    with BrokerConnection.to(nodes[0].bootstrap, timeout=30) as c:
        meta = c.request(ApiKeys.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
    by_leader: dict[int, dict[str, list[int]]] = {}
    for t in meta["topics"]:
        if t["name"].startswith(prefix):
            for p in t["partitions"]:
                if p["leader_id"] >= 0:
                    by_leader.setdefault(p["leader_id"], {}).setdefault(t["name"], []).append(p["partition_index"])
    bootstrap = {b["node_id"]: f"{b['host']}:{b['port']}" for b in meta["brokers"]}
    ok = 0
    for leader, topics in by_leader.items():
        with BrokerConnection.to(bootstrap[leader], timeout=30) as c:
            r = c.request(
                ApiKeys.LIST_OFFSETS,
                7,
                {
                    "replica_id": -1,
                    "isolation_level": 0,
                    "topics": [
                        {
                            "name": name,
                            "partitions": [
                                {"partition_index": i, "current_leader_epoch": -1, "timestamp": -1} for i in indexes
                            ],
                        }
                        for name, indexes in topics.items()
                    ],
                },
            )
        ok += sum(1 for t in r["topics"] for p in t["partitions"] if p["error_code"] == 0)
    return ok


def run(tree: Path, args) -> None:
    broker_helper.ROOT = cluster_helper.ROOT = tree  # the nodes (and the format tool) run this checkout
    overrides = {"default.replication.factor": "3", "offsets.topic.replication.factor": "3"}
    with tempfile.TemporaryDirectory(prefix="topic-creation-") as tmp:
        cluster = KRaftCluster(Path(tmp), controllers=3, brokers=0, combined=True, **overrides)
        try:
            cluster.start(timeout=120)
            cluster.await_leader(60)
            nodes = list(cluster.brokers.values())
            names = [f"{PREFIX}{i:04d}" for i in range(args.topics)]
            total = args.topics * args.partitions
            start = time.monotonic()
            create_topics(nodes[0].bootstrap, names, args.partitions)
            created = time.monotonic() - start
            deadline = start + args.isr_timeout
            while True:
                counts = [full_isr_count(n.bootstrap, PREFIX) for n in nodes]
                if all(c == total for c in counts):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"full ISR not reached in {args.isr_timeout}s: {counts} of {total}")
                time.sleep(0.1)
            visible = time.monotonic() - start
            print(
                f"  {total} partitions: CreateTopics answered after {created:.2f} s; every partition visible "
                f"with 3 in-sync replicas on every node after {visible:.2f} s",
                flush=True,
            )
            while (ready := ready_count(nodes, PREFIX)) < total:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"logs not ready in {args.isr_timeout}s: {ready} of {total}")
                time.sleep(0.2)
            counts = [full_isr_count(n.bootstrap, PREFIX) for n in nodes]
            print(
                f"  every partition's log ready on its leader (ListOffsets answered) after "
                f"{time.monotonic() - start:.2f} s; then {min(counts)} of {total} with 3 in-sync replicas",
                flush=True,
            )
            ms = metadata_ms(nodes[0].bootstrap, args.calls)
            print(
                f"  Metadata v12 for all {args.topics} topics: median {statistics.median(ms):.1f} ms "
                f"(min {min(ms):.1f}, max {max(ms):.1f}; {len(ms)} calls)",
                flush=True,
            )
        finally:
            try:
                stop_start = time.monotonic()
                cluster.stop()  # SIGTERM to the three nodes at once, each closing its logs
                print(f"  every node stopped (SIGTERM to exit) after {time.monotonic() - stop_start:.2f} s", flush=True)
            except subprocess.TimeoutExpired as e:  # the helper killed it: closing thousands of logs takes a while
                print(f"  (a node took more than {e.timeout:.0f} s to stop and was killed)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=500)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--calls", type=int, default=50, help="Metadata calls for the median")
    ap.add_argument("--isr-timeout", type=float, default=600.0)
    ap.add_argument("--compare", action="append", type=Path, default=[], help="another checkout (repeatable)")
    args = ap.parse_args()
    trees = [Path(__file__).resolve().parents[1], *(p.resolve() for p in args.compare)]
    print(
        f"3 combined nodes, {args.topics} topics x {args.partitions} partitions RF 3, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    for tree in trees:
        print(f"nodes from {tree}:", flush=True)
        run(tree, args)


if __name__ == "__main__":
    main()
