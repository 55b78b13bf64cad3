"""Replication figures on 3 local brokers (+1 controller), as separate processes (tests/helpers/cluster.py):

(a) produce throughput of a confluent-kafka producer, 1 KB records, acks=all, on a topic with
    replication factor 3 (min.insync.replicas=2) vs replication factor 1, alternating in the same run;
(b) leader failover time: kill -9 of the leader of the partition an acks=all idempotent producer writes
    to, until the next record it writes is acknowledged (median of ``--failovers``), with the killed
    broker restarted and back in the ISR between rounds. The time includes the controller's
    ``broker.session.timeout.ms`` (the broker is fenced when its heartbeats stop).

    .venv/bin/python bench/replication.py                     # 3 rounds x 100,000 records, 10 failovers
    .venv/bin/python bench/replication.py --records 200000 --rounds 3 --failovers 10 --session-timeout-ms 3000

``--compare TREE`` runs (a) on a second cluster whose nodes run from the source tree ``TREE`` too (a baseline, e.g.
``git archive main | tar -x -C /tmp/base``), both clusters up at once and measured alternately (baseline rf3, rf1,
then this tree's rf3, rf1, each round), so both trees' figures come from the same machine load; (b) then runs on
this tree's cluster only:

    .venv/bin/python bench/replication.py --records 30000 --rounds 5 --failovers 0 --compare /tmp/base

Each round produces to new topics (``rf3-<round>``, ``rf1-<round>``) and deletes them after measuring, the brokers
set to ``log.segment.delete.delay.ms=0``: their files are gone before the kernel writes their dirty pages back. On
one machine the three replicas share one disk, so once the dirty data passes ``vm.dirty_background_ratio`` (2 GB on
a 24 GB machine, a few rounds in) RF 3 pays three times RF 1's writeback in CPU and I/O, a cost of co-locating the
brokers rather than of the replication protocol (per broker a real cluster writes what RF 1 writes here).
``--keep-data`` keeps one pair of topics for the whole run (the data accumulates, as before). Each line shows the
kernel's writeback during its round (``/proc/vmstat`` ``nr_written``).

Each line splits the brokers' CPU into user time (their Python) and system time (the kernel: socket copies,
page-cache writes, wake-ups). On a virtual machine that hands free memory back to its host (virtio-balloon free page
reporting, ``/sys/module/page_reporting``), a page-cache page the guest has not used since it was handed back costs a
host fault on first touch: writing 1,500 MB to a new file then takes 0.8-2.3 ms of CPU per MB against 0.2 ms once
the pages are the guest's again (measured with a plain ``os.pwrite`` loop, 1 MB writes). ``perf`` shows it as time
in the kernel's copy into the page cache (``copy_folio_from_iter_atomic``): 44-57 % of a follower's CPU in RF 3
rounds, 7 % of the RF 1 leader's. RF 3 writes every byte three times, so on such a machine its system time per MB
varies with the machine's memory history (rounds of one run differ by 2x); the user time is the brokers' own cost.

``--override KEY=VALUE`` (repeatable) sets a broker config on this tree's cluster only (the baseline keeps the
defaults), e.g. ``--compare . --override socket.send.buffer.bytes=-1`` shows what a config costs in the same run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.cluster import KRaftCluster
from tests.helpers.replication import REPLICATION_TIMEOUTS, partitions, wait_for_full_isr


def produce_rate(bootstrap: str, topic: str, records: int, size: int) -> tuple[float, float]:
    """(records/s, MB/s) of one producer sending ``records`` of ``size`` bytes with acks=all."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "queue.buffering.max.kbytes": 1 << 20,
        }
    )
    payload = b"x" * size
    errors = []
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(topic, payload, on_delivery=lambda e, m: e and errors.append(e))
                break
            except BufferError:
                p.poll(0.01)
    p.flush(300)
    elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, first: {errors[0]}")
    return records / elapsed, records * size / elapsed / 1e6


def failover_ms(cluster: KRaftCluster, topic: str) -> float:
    acked: list[float] = []
    stop = threading.Event()
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 0})

    def run() -> None:
        while not stop.is_set():
            p.produce(topic, b"x", partition=0, on_delivery=lambda e, m: e is None and acked.append(time.monotonic()))
            p.poll(0.002)
        p.flush(60)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        while not acked:
            time.sleep(0.01)
        victim = partitions(cluster.bootstrap, topic)[0]["leader_id"]
        cluster.brokers[victim].kill()
        killed = time.monotonic()
        deadline = killed + 60
        while not (acked and acked[-1] > killed) and time.monotonic() < deadline:
            time.sleep(0.005)
        first = next(a for a in acked if a > killed)
    finally:
        stop.set()
        t.join(90)
    cluster.brokers[victim].start(60)
    wait_for_full_isr(lambda: cluster.bootstrap, topic, timeout=60)
    return (first - killed) * 1000


def create_topic(cluster: KRaftCluster, name: str, rf: int) -> None:
    """One partition, replication factor ``rf``, min.insync.replicas 2 (1 for RF 1)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    config = {"min.insync.replicas": str(min(rf, 2))}
    admin.create_topics([NewTopic(name, 1, rf, config=config)])[name].result(30)
    wait_for_full_isr(lambda: cluster.bootstrap, name, replicas=rf)


def delete_topics(cluster: KRaftCluster, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.delete_topics(names).values():
        future.result(30)


def start_cluster(root: Path, tree: Path | None, overrides: dict[str, str], keep_data: bool) -> KRaftCluster:
    """A cluster of 1 controller and 3 brokers (from ``tree``, or this checkout) with the topic failover (and rf3,
    rf1 with ``keep_data``)."""
    cluster = KRaftCluster(root, controllers=1, brokers=3, **overrides)
    if tree is not None:
        cluster.use_tree(tree)
    try:
        cluster.start()
        for name, rf in ((("rf3", 3), ("rf1", 1)) if keep_data else ()) + (("failover", 3),):
            create_topic(cluster, name, rf)
    except BaseException:
        cluster.kill_all()
        raise
    return cluster


def written_mb() -> float:
    """MB the kernel has written back from the page cache so far (``/proc/vmstat`` nr_written; 0 elsewhere)."""
    try:
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("nr_written "):
                return int(line.split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
    except OSError:
        pass
    return 0.0


def broker_counters(cluster: KRaftCluster) -> tuple[float, float, int]:
    """(user CPU seconds, system CPU seconds, voluntary context switches) the cluster's brokers used so far (Linux
    /proc; zeros elsewhere). User time is the brokers' Python; system time is the kernel working for them (socket
    copies, page-cache writes, wake-ups). A voluntary switch is a thread going to sleep to wait (for a socket, a
    lock, a queue): per MB replicated, the count of wake-ups on the produce -> replicate -> acknowledge path, which
    the machine's load does not change (the time each wake-up costs it does)."""
    user, system, switches = 0.0, 0.0, 0
    for broker in cluster.brokers.values():
        if broker.proc is None:
            continue
        pid = broker.proc.pid
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            user += int(fields[11]) / os.sysconf("SC_CLK_TCK")
            system += int(fields[12]) / os.sysconf("SC_CLK_TCK")
            for task in Path(f"/proc/{pid}/task").iterdir():
                for line in (task / "status").read_text().splitlines():
                    if line.startswith("voluntary_ctxt_switches:"):
                        switches += int(line.split()[1])
        except OSError:  # no /proc, or a thread that just ended
            continue
    return user, system, switches


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.1f} {five:.1f} {fifteen:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--failovers", type=int, default=10)
    ap.add_argument("--session-timeout-ms", type=int, default=3000)
    ap.add_argument(
        "--keep-data", action="store_true", help="one pair of topics for the whole run (data accumulates; see above)"
    )
    ap.add_argument("--compare", type=Path, metavar="TREE", help="also measure a baseline source tree (see above)")
    ap.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker config for this tree's cluster only (repeatable), e.g. socket.send.buffer.bytes=-1",
    )
    args = ap.parse_args()
    overrides = {
        **REPLICATION_TIMEOUTS,
        "broker.session.timeout.ms": str(args.session_timeout_ms),
        "log.segment.delete.delay.ms": "0",  # a deleted round's files go before their pages are written back
    }
    this_overrides = {**overrides, **dict(o.split("=", 1) for o in args.override)}
    with tempfile.TemporaryDirectory() as tmp:
        clusters: dict[str, KRaftCluster] = {}
        try:
            if args.compare is not None:
                clusters["base"] = start_cluster(Path(tmp) / "base", args.compare.resolve(), overrides, args.keep_data)
            clusters["this"] = start_cluster(Path(tmp) / "this", None, this_overrides, args.keep_data)
            results: dict[tuple[str, str], list[float]] = {
                (tree, name): [] for tree in clusters for name in ("rf3", "rf1")
            }
            costs: dict[tuple[str, str], list[tuple[float, float, float]]] = {key: [] for key in results}
            print(f"start: {load()}", flush=True)
            for r in range(args.rounds):
                for tree, cluster in clusters.items():
                    topics = {name: name if args.keep_data else f"{name}-{r}" for name in ("rf3", "rf1")}
                    if not args.keep_data:
                        for name, topic in topics.items():
                            create_topic(cluster, topic, 3 if name == "rf3" else 1)
                    for name in ("rf3", "rf1"):
                        user0, system0, switches0 = broker_counters(cluster)
                        written0 = written_mb()
                        rate, mbps = produce_rate(cluster.bootstrap, topics[name], args.records, args.record_size)
                        user1, system1, switches1 = broker_counters(cluster)
                        mb = args.records * args.record_size / 1e6
                        cost = (
                            (user1 - user0) * 1000 / mb,
                            (system1 - system0) * 1000 / mb,
                            (switches1 - switches0) / mb,
                        )
                        results[tree, name].append(mbps)
                        costs[tree, name].append(cost)
                        print(
                            f"round {r}: {tree} {name} acks=all {rate:,.0f} records/s {mbps:.1f} MB/s; brokers "
                            f"{cost[0] + cost[1]:.1f} CPU ms/MB (user {cost[0]:.1f}, system {cost[1]:.1f}), "
                            f"{cost[2]:.0f} wake-ups/MB; kernel writeback "
                            f"{written_mb() - written0:.0f} MB ({load()})",
                            flush=True,
                        )
                    if not args.keep_data:
                        delete_topics(cluster, list(topics.values()))
            for tree in clusters:
                rf3, rf1 = statistics.median(results[tree, "rf3"]), statistics.median(results[tree, "rf1"])
                ratios = [a / b for a, b in zip(results[tree, "rf3"], results[tree, "rf1"], strict=True)]
                print(
                    f"{tree}: rf3 median {rf3:.1f} MB/s, rf1 median {rf1:.1f} MB/s over {args.rounds} rounds; "
                    f"RF3/RF1 {rf3 / rf1:.2f} (per-round ratios {' '.join(f'{x:.2f}' for x in ratios)})"
                )
                for name in ("rf3", "rf1"):
                    user = statistics.median(c[0] for c in costs[tree, name])
                    system = statistics.median(c[1] for c in costs[tree, name])
                    wakeups = statistics.median(c[2] for c in costs[tree, name])
                    print(
                        f"{tree}: {name} brokers' median CPU ms/MB: user {user:.1f}, system {system:.1f}; "
                        f"{wakeups:.0f} wake-ups/MB"
                    )
            print(f"end: {load()}")
            cluster = clusters["this"]
            times = []
            for i in range(args.failovers):
                ms = failover_ms(cluster, "failover")
                times.append(ms)
                print(f"failover {i}: {ms:.0f} ms", flush=True)
            if times:
                print(
                    f"failover (kill -9 -> next acknowledged produce): median {statistics.median(times):.0f} ms, "
                    f"min {min(times):.0f}, max {max(times):.0f} (broker.session.timeout.ms={args.session_timeout_ms})"
                )
        finally:
            for cluster in clusters.values():
                cluster.kill_all()


if __name__ == "__main__":
    main()
