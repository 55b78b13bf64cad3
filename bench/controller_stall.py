"""A stalled active controller: does it fence the brokers when it resumes?

    .venv/bin/python bench/controller_stall.py                    # 7 s pause, 3 s sessions, 1 round
    .venv/bin/python bench/controller_stall.py --pause-s 7 --session-timeout-ms 3000 --rounds 2

A cluster of three combined nodes (``process.roles=broker,controller``, tests/helpers/cluster.py) with
``broker.session.timeout.ms`` shorter than the pause. Each round finds the active controller
(DescribeQuorum), stops it with SIGSTOP for ``--pause-s`` seconds, resumes it with SIGCONT, and watches
every node's log for ``--watch-s`` seconds after that. It prints, per round:

* the time from the SIGSTOP (and from the SIGCONT) to the paused controller's first "Fencing broker
  because its session has timed out" line, and every broker it fenced so; the other controllers'
  fencings apart (a new active controller rightly fences the paused combined node's own broker);
* the fencings committed to the metadata log (BrokerRegistrationChangeRecord with ``fenced=1`` or
  FenceBrokerRecord, appended after the SIGSTOP), read from another node's metadata log segments.

``--fetch-timeout-ms`` is ``controller.quorum.fetch.timeout.ms``: the default here (20 s, longer than the
pause) keeps the paused controller the Raft leader, so whatever it fences on resuming is committed (the
worst case: a slow publisher, a starved process); a short one (e.g. 1200) lets the other voters elect a
new leader during the pause. Times are the log lines' own timestamps (millisecond wall clock).
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pykbroker.metadata.records import MetadataRecordSerde
from pykbroker.raft.log_batch_codec import decode_log_batches
from tests.helpers.cluster import KRaftCluster

_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]")
_FENCING = re.compile(r"Fencing broker because its session has timed out.*broker=(\d+)")
_SERDE = MetadataRecordSerde()


def stamp(line: str) -> float | None:
    """The wall-clock time (epoch seconds) of a log line, from its ``[yyyy-mm-dd hh:mm:ss,mmm]`` prefix."""
    m = _STAMP.match(line)
    if m is None:
        return None
    return time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000


def committed_fencings(cluster: KRaftCluster, node_id: int, since: float) -> list[tuple[float, int]]:
    """(append time, broker) of every fencing record in ``node_id``'s metadata log appended after
    ``since`` (epoch seconds). Reads the segment files as they are (whole batches only)."""
    directory = cluster.controllers[node_id].data_dir / "logs" / "__cluster_metadata-0"
    out = []
    for segment in sorted(directory.glob("*.log")):
        for batch in decode_log_batches(segment.read_bytes()):
            if batch.control or batch.append_time_ms < since * 1000:
                continue
            for r in batch.records:
                rec = _SERDE.read(r.value)
                if rec.name == "FenceBrokerRecord" or (
                    rec.name == "BrokerRegistrationChangeRecord" and rec.data.get("fenced") == 1
                ):
                    out.append((batch.append_time_ms / 1000, rec.data.get("broker_id", rec.data.get("id"))))
    return out


def all_unfenced(cluster: KRaftCluster, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for node in cluster.brokers.values():
        while node.wait_for_line("Transitioning from RECOVERY to RUNNING", 0.1) is None:
            if time.monotonic() > deadline:
                raise SystemExit("a broker was not unfenced in time")


def one_round(cluster: KRaftCluster, pause_s: float, watch_s: float) -> dict:
    leader = cluster.await_leader()
    marks = {i: len(n.lines) for i, n in cluster.controllers.items()}
    node = cluster.controllers[leader]
    assert node.proc is not None
    t_stop = time.time()
    node.proc.send_signal(signal.SIGSTOP)
    time.sleep(pause_s)
    t_cont = time.time()
    node.proc.send_signal(signal.SIGCONT)
    time.sleep(watch_s)
    fencings: list[tuple[float, int, int]] = []  # (time, by controller, broker)
    for i, n in cluster.controllers.items():
        for line in n.lines[marks[i] :]:
            m = _FENCING.search(line)
            t = stamp(line)
            if m and t is not None:
                fencings.append((t, i, int(m.group(1))))
    fencings.sort()
    other = next(i for i in cluster.controllers if i != leader)
    committed = committed_fencings(cluster, other, t_stop)
    return {"leader": leader, "t_stop": t_stop, "t_cont": t_cont, "fencings": fencings, "committed": committed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pause-s", type=float, default=7.0)
    ap.add_argument("--session-timeout-ms", type=int, default=3000)
    ap.add_argument("--fetch-timeout-ms", type=int, default=20000)
    ap.add_argument("--watch-s", type=float, default=6.0)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="controller-stall-") as root:
        cluster = KRaftCluster(
            Path(root),
            controllers=3,
            brokers=0,
            combined=True,
            broker_session_timeout_ms=str(args.session_timeout_ms),
            controller_quorum_fetch_timeout_ms=str(args.fetch_timeout_ms),
        )
        try:
            cluster.start()
            print(
                f"3 combined nodes, broker.session.timeout.ms={args.session_timeout_ms}, "
                f"controller.quorum.fetch.timeout.ms={args.fetch_timeout_ms}, pause {args.pause_s:g} s",
                flush=True,
            )
            for r in range(args.rounds):
                all_unfenced(cluster, 60)
                res = one_round(cluster, args.pause_s, args.watch_s)
                paused = [f for f in res["fencings"] if f[1] == res["leader"]]
                others = [f for f in res["fencings"] if f[1] != res["leader"]]
                if paused:
                    first = paused[0][0]
                    brokers = ", ".join(f"{b} (+{(t - first) * 1000:.0f} ms)" for t, _, b in paused)
                    print(
                        f"round {r + 1}: controller {res['leader']} paused; its first fencing "
                        f"{(first - res['t_stop']) * 1000:.0f} ms after SIGSTOP, "
                        f"{(first - res['t_cont']) * 1000:.0f} ms after SIGCONT; it fenced: {brokers}",
                        flush=True,
                    )
                else:
                    print(
                        f"round {r + 1}: controller {res['leader']} paused; it fenced no broker "
                        f"within {args.watch_s:g} s of SIGCONT",
                        flush=True,
                    )
                if others:
                    brokers = ", ".join(
                        f"{b} by {by} (+{(t - res['t_stop']) * 1000:.0f} ms after SIGSTOP)" for t, by, b in others
                    )
                    print(f"  fenced by the other controllers: {brokers}", flush=True)
                committed = ", ".join(
                    f"{b} (+{(t - res['t_stop']) * 1000:.0f} ms after SIGSTOP)" for t, b in res["committed"]
                )
                print(f"  fencings committed to the metadata log: {committed or 'none'}", flush=True)
        finally:
            cluster.kill_all()


if __name__ == "__main__":
    main()
