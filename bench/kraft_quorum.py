"""KRaft quorum figures: election time after kill -9 of the active controller, and metadata commit latency
(CreateTopics round trip through a broker) on 1 voter vs 3 voters.

    .venv/bin/python bench/kraft_quorum.py                      # 10 elections + 50 creations per setup
    .venv/bin/python bench/kraft_quorum.py --elections 10 --topics 50 --election-timeout-ms 1000

(a) election: a cluster of 3 controllers (process.roles=controller) and 1 broker, started as separate
    processes (tests/helpers/cluster.py). Each round kill -9's the active controller (found with
    DescribeQuorum) and measures two times from the kill: until a live controller reports a new leader
    in a higher epoch ("elected"), and until a CreateTopics through the broker succeeds ("writable").
    Then it restarts the killed controller and waits until it is a voter in sync again. Defaults are
    Kafka's: controller.quorum.election.timeout.ms=1000 and controller.quorum.fetch.timeout.ms=2000. A
    follower stands for election when it has not heard from the leader for the fetch timeout, plus a
    random part of the election timeout.
(b) commit latency: ``--topics`` sequential CreateTopics (1 partition each) through one broker, on the
    single-node default (one combined voter: the commit needs no network) and on the 3-controller
    cluster. That cluster has a broker-only node, so the request is forwarded to the active controller and
    the record commits when a majority of voters has fetched it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.broker import BrokerProcess
from tests.helpers.cluster import KRaftCluster


def create_topic(bootstrap: str, name: str, timeout_ms: int = 5000) -> int:
    body = {
        "topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": timeout_ms,
        "validate_only": False,
    }
    with BrokerConnection.to(bootstrap, timeout=timeout_ms / 1000 + 5) as c:
        return c.request(ApiKeys.CREATE_TOPICS, 7, body)["topics"][0]["error_code"]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def elections(root: Path, rounds: int, overrides: dict[str, str]) -> None:
    cluster = KRaftCluster(root / "election", controllers=3, brokers=1, **overrides)
    cluster.start()
    broker = next(iter(cluster.brokers.values()))
    elected, writable = [], []
    try:
        for r in range(rounds):
            leader, epoch = cluster.leader_and_epoch()
            while leader < 0:
                time.sleep(0.05)
                leader, epoch = cluster.leader_and_epoch()
            t0 = time.monotonic()
            cluster.controllers[leader].kill()
            while True:
                new_leader, new_epoch = cluster.leader_and_epoch()
                if new_leader >= 0 and new_epoch > epoch:
                    break
                time.sleep(0.01)
            elected.append(time.monotonic() - t0)
            while create_topic(broker.bootstrap, f"after-{r}", 3000) not in (0, 36):
                pass
            writable.append(time.monotonic() - t0)
            print(
                f"round {r + 1}: leader {leader} killed -> {new_leader} elected in {elected[-1] * 1000:.0f} ms, "
                f"CreateTopics ok after {writable[-1] * 1000:.0f} ms",
                flush=True,
            )
            cluster.controllers[leader].start()
            while True:  # the restarted controller is a voter in sync again before the next kill
                p = cluster.describe_quorum(cluster.controller_address(new_leader))
                lag = {v["replica_id"]: p["high_watermark"] - v["log_end_offset"] for v in p["current_voters"]}
                if p["error_code"] == 0 and lag.get(leader, 1) <= 0:
                    break
                time.sleep(0.05)
    finally:
        cluster.kill_all()
    print(
        f"election after kill -9 (n={rounds}): elected median {statistics.median(elected) * 1000:.0f} ms "
        f"(min {min(elected) * 1000:.0f}, max {max(elected) * 1000:.0f}); CreateTopics ok median "
        f"{statistics.median(writable) * 1000:.0f} ms (max {max(writable) * 1000:.0f})"
    )


def commit_latency(bootstrap: str, n: int, label: str, prefix: str) -> None:
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        code = create_topic(bootstrap, f"lat-{prefix}-{i}")
        times.append((time.perf_counter() - t0) * 1000)
        assert code == 0, code
    print(
        f"CreateTopics round trip, {label}: median {statistics.median(times):.1f} ms, "
        f"p90 {pct(times, 0.9):.1f} ms, max {max(times):.1f} ms (n={n})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--elections", type=int, default=10)
    ap.add_argument("--topics", type=int, default=50)
    ap.add_argument("--election-timeout-ms", default="1000")
    ap.add_argument("--fetch-timeout-ms", default="2000")
    args = ap.parse_args()
    overrides = {
        "controller.quorum.election.timeout.ms": args.election_timeout_ms,
        "controller.quorum.fetch.timeout.ms": args.fetch_timeout_ms,
        "controller.quorum.election.backoff.max.ms": "1000",
    }
    with tempfile.TemporaryDirectory(prefix="kraft-bench-") as tmp:
        root = Path(tmp)
        single = BrokerProcess(root / "single").start()
        try:
            commit_latency(single.bootstrap, args.topics, "1 voter (combined node)", "single")
        finally:
            single.stop()
        cluster = KRaftCluster(root / "cluster", controllers=3, brokers=1, **overrides).start()
        try:
            commit_latency(
                cluster.bootstrap, args.topics, "3 voters (broker forwards to the active controller)", "quorum"
            )
        finally:
            cluster.kill_all()
        if args.elections:
            elections(root, args.elections, overrides)


if __name__ == "__main__":
    main()
