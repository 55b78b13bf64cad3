"""Broker CPU per request and latency at a fixed produce rate; ApiVersions/Metadata request rates.

    .venv/bin/python bench/request_cost.py                              # produce 5,000/s for 10 s + api rates
    .venv/bin/python bench/request_cost.py --rate 5000 --seconds 10 --skip-api
    .venv/bin/python bench/request_cost.py --skip-produce --connections 1 16 256 --api-seconds 5
    .venv/bin/python bench/request_cost.py --pythonpath /tmp/base . --rounds 3   # A/B: alternate two trees

Starts its own broker subprocess (tests/helpers/broker.py BrokerProcess, Kafka's default thread
counts num.network.threads=3, num.io.threads=8 unless overridden) and measures:

(a) produce: one confluent-kafka producer (acks=all, linger.ms=0, 1 KB values, one partition,
    idempotence off) calls ``produce`` at ``--rate`` records/s for ``--seconds`` seconds. Each record
    is its own request when the broker keeps up (librdkafka batches what queued while a request was in
    flight, so ``records/request`` above 1.0 means the broker fell behind). Reported: Produce requests
    sent (librdkafka statistics ``req.Produce``), broker CPU (utime+stime of all its threads from
    /proc/<pid>/stat) per request in microseconds, the broker's context switches per request (all its
    threads, /proc/<pid>/task/*/status: thread and GIL hand-offs), and p50/p99/max latency from
    ``produce`` to the delivery callback.
(b) ApiVersions v3 and Metadata v12 (no topics) request/s over ``--connections`` lock-step
    connections (one request in flight per connection, as bench/api_versions.py), with broker CPU
    and context switches per request.

``--rounds N`` repeats everything N times on the same broker. ``--pythonpath A B`` runs one broker
from each source tree (e.g. ``git archive <base> pykbroker | tar -x -C /tmp/base``) and alternates every
measurement between them, so a baseline and a candidate see the same machine load (the machine may be
shared: compare within one run, over several rounds).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pykbroker.protocol import encode_request
from pykbroker.protocol.api_keys import ApiKeys

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of every thread of ``pid`` (seconds)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def _api_worker(bootstrap: str, api: str, n_conns: int, seconds: float, start_at: float, out: mp.Queue) -> None:
    import selectors
    import socket
    import struct

    host, port = bootstrap.rsplit(":", 1)
    if api == "ApiVersions":
        req = encode_request(
            ApiKeys.API_VERSIONS, 3, 1, "bench", {"client_software_name": "bench", "client_software_version": "1.0"}
        )
    else:
        req = encode_request(
            ApiKeys.METADATA,
            12,
            1,
            "bench",
            {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
        )
    sel = selectors.DefaultSelector()
    socks = []
    for _ in range(n_conns):
        s = socket.create_connection((host, int(port)))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        socks.append(s)
        sel.register(s, selectors.EVENT_READ, bytearray())
    time.sleep(max(0.0, start_at - time.time()))
    count = 0
    deadline = time.perf_counter() + seconds
    for s in socks:
        s.send(req)
    while time.perf_counter() < deadline:
        for key, _ in sel.select(0.5):
            s, buf = key.fileobj, key.data
            chunk = s.recv(65536)
            if not chunk:
                raise SystemExit("broker closed the connection")
            buf += chunk
            while len(buf) >= 4:
                size = struct.unpack_from(">i", buf)[0]
                if len(buf) < 4 + size:
                    break
                del buf[: 4 + size]
                count += 1
                s.send(req)
    out.put(count)
    for s in socks:
        s.close()


def context_switches(pid: int) -> int:
    """Voluntary + involuntary context switches of every live thread of ``pid`` (/proc/<pid>/task/*/status):
    each hand-off of a request between threads (and of the GIL between them) shows up here."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as f:
                for line in f:
                    if "ctxt_switches" in line:  # voluntary_ctxt_switches, nonvoluntary_ctxt_switches
                        total += int(line.split()[-1])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
    return total


def api_rate(bootstrap: str, pid: int, api: str, connections: int, seconds: float, processes: int):
    """Returns (requests/s, broker CPU µs/request, broker context switches/request)."""
    procs = min(processes, connections)
    per = [connections // procs + (1 if i < connections % procs else 0) for i in range(procs)]
    q: mp.Queue = mp.Queue()
    start_at = time.time() + 1.0 + connections / 500
    ps = [mp.Process(target=_api_worker, args=(bootstrap, api, n, seconds, start_at, q)) for n in per]
    for p in ps:
        p.start()
    time.sleep(max(0.0, start_at - time.time()))
    cpu0, cs0 = cpu_seconds(pid), context_switches(pid)
    total = sum(q.get(timeout=seconds + 60) for _ in ps)
    cpu1, cs1 = cpu_seconds(pid), context_switches(pid)
    for p in ps:
        p.join()
    return total / seconds, 1e6 * (cpu1 - cpu0) / max(total, 1), (cs1 - cs0) / max(total, 1)


def produce_at_rate(bootstrap: str, pid: int, topic: str, rate: float, seconds: float, size: int):
    """Returns dict: sent, delivered, requests (approx: deliveries), cpu_us_per_req, p50/p99/max ms."""
    import json

    from confluent_kafka import Producer

    produce_requests = [0]

    def on_stats(raw: str) -> None:
        brokers = json.loads(raw).get("brokers", {}).values()
        produce_requests[0] = sum(b.get("req", {}).get("Produce", 0) for b in brokers if b.get("nodeid", -1) >= 0)

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 0,
            "enable.idempotence": False,
            "queue.buffering.max.messages": 1_000_000,
            "statistics.interval.ms": 200,
            "stats_cb": on_stats,
        }
    )
    payload = os.urandom(size)
    latencies: list[float] = []
    failures: list = []

    def make_cb(t0: float):
        def cb(err, _msg):
            if err is not None:
                failures.append(err)
            else:
                latencies.append(time.perf_counter() - t0)

        return cb

    # warm up: connection, metadata
    p.produce(topic, payload)
    p.flush(10)
    _settle_stats(p)
    req_before = produce_requests[0]
    n = int(rate * seconds)
    interval = 1.0 / rate
    cpu0, cs0 = cpu_seconds(pid), context_switches(pid)
    start = time.perf_counter()
    for i in range(n):
        target = start + i * interval
        while True:
            now = time.perf_counter()
            if now >= target:
                break
            p.poll(0)
            if target - now > 0.0005:
                time.sleep(min(target - now - 0.0003, 0.001))
        p.produce(topic, payload, on_delivery=make_cb(time.perf_counter()))
        p.poll(0)
    p.flush(60)
    elapsed = time.perf_counter() - start
    cpu1, cs1 = cpu_seconds(pid), context_switches(pid)
    _settle_stats(p)
    requests = produce_requests[0] - req_before
    if failures:
        raise SystemExit(f"{len(failures)} deliveries failed: {failures[0]}")
    latencies.sort()
    return {
        "sent": n,
        "elapsed": elapsed,
        "requests": requests,
        "cpu_us": 1e6 * (cpu1 - cpu0) / max(requests, 1),
        "cs": (cs1 - cs0) / max(requests, 1),
        "p50": 1000 * latencies[len(latencies) // 2],
        "p99": 1000 * latencies[int(len(latencies) * 0.99)],
        "max": 1000 * latencies[-1],
    }


def _settle_stats(producer) -> None:
    """Serve the statistics callback long enough for one fresh report (interval 200 ms)."""
    end = time.perf_counter() + 0.5
    while time.perf_counter() < end:
        producer.poll(0.05)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=5000)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--connections", type=int, nargs="+", default=[1, 16, 256])
    ap.add_argument("--apis", nargs="+", default=["ApiVersions", "Metadata"])
    ap.add_argument("--api-seconds", type=float, default=5)
    ap.add_argument("--client-processes", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--skip-produce", action="store_true")
    ap.add_argument("--skip-api", action="store_true")
    ap.add_argument("--num-network-threads", type=int, default=3)
    ap.add_argument("--num-io-threads", type=int, default=8)
    ap.add_argument(
        "--pythonpath",
        nargs="+",
        help="source trees to run brokers from (default: this checkout); with several, one broker per tree "
        "runs for the whole benchmark and every measurement alternates between them, round by round",
    )
    args = ap.parse_args()

    from tests.helpers import broker as broker_mod

    trees = [Path(t).resolve() for t in args.pythonpath] if args.pythonpath else [broker_mod.ROOT]
    brokers = []
    print(f"# network threads={args.num_network_threads}, io threads={args.num_io_threads}, {os.cpu_count()} cores")
    try:
        for tree in trees:
            broker_mod.ROOT = tree
            broker = broker_mod.BrokerProcess(
                Path(tempfile.mkdtemp(prefix="bench-")),
                num_network_threads=args.num_network_threads,
                num_io_threads=args.num_io_threads,
            ).start()
            brokers.append(broker)
            topic = None
            if not args.skip_produce:
                from confluent_kafka.admin import AdminClient, NewTopic

                admin = AdminClient({"bootstrap.servers": broker.bootstrap})
                topic = f"cost-{uuid.uuid4().hex[:6]}"
                admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
            broker.bench_topic = topic
        time.sleep(0.5)
        label_width = max(len(str(t)) for t in trees)
        for r in range(args.rounds):
            if not args.skip_produce:
                for tree, broker in zip(trees, brokers, strict=True):
                    res = produce_at_rate(
                        broker.bootstrap, broker.proc.pid, broker.bench_topic, args.rate, args.seconds, args.record_size
                    )
                    print(
                        f"round={r} {str(tree):<{label_width}s} produce {args.rate:.0f}/s acks=all "
                        f"{args.record_size}B: achieved {res['sent'] / res['elapsed']:5.0f}/s  "
                        f"requests={res['requests']} ({res['sent'] / max(res['requests'], 1):.2f} records/request)  "
                        f"broker CPU {res['cpu_us']:6.1f} us/request  {res['cs']:5.2f} cs/request  "
                        f"p50 {res['p50']:7.2f} ms  p99 {res['p99']:7.2f} ms  max {res['max']:7.2f} ms",
                        flush=True,
                    )
            if not args.skip_api:
                for api in args.apis:
                    for c in args.connections:
                        for tree, broker in zip(trees, brokers, strict=True):
                            rate, cpu, cs = api_rate(
                                broker.bootstrap, broker.proc.pid, api, c, args.api_seconds, args.client_processes
                            )
                            print(
                                f"round={r} {str(tree):<{label_width}s} {api:<11s} connections={c:<4d} "
                                f"{rate:9.0f} requests/s  broker CPU {cpu:6.1f} us/request  {cs:5.2f} cs/request",
                                flush=True,
                            )
    finally:
        for broker in brokers:
            broker.stop()


if __name__ == "__main__":
    main()
