"""ApiVersions requests per second over 1 and 16 connections (issue 2 benchmark).

    .venv/bin/python bench/api_versions.py                       # starts its own broker (subprocess)
    .venv/bin/python bench/api_versions.py --bootstrap-server 127.0.0.1:9092 --connections 1 16 64

Each client connection runs request/response lock-step (one in flight, like a Kafka client doing
metadata calls); connections are spread over ``--client-processes`` processes so the client side is not
limited to one core's GIL. Prints one line per connection count: requests/s and mean latency.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.request_cost import _api_worker


def run(bootstrap: str, connections: int, seconds: float, processes: int) -> float:
    procs = min(processes, connections)
    per = [connections // procs + (1 if i < connections % procs else 0) for i in range(procs)]
    q: mp.Queue = mp.Queue()
    # The lock-step client loop of bench/request_cost.py, starting at once.
    ps = [mp.Process(target=_api_worker, args=(bootstrap, "ApiVersions", n, seconds, time.time(), q)) for n in per]
    for p in ps:
        p.start()
    total = sum(q.get(timeout=seconds + 30) for _ in ps)
    for p in ps:
        p.join()
    return total / seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap-server")
    ap.add_argument("--connections", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--client-processes", type=int, default=1)
    ap.add_argument("--num-network-threads", type=int, default=3)
    ap.add_argument("--num-io-threads", type=int, default=8)
    args = ap.parse_args()
    broker = None
    if not args.bootstrap_server:
        from tests.helpers.broker import BrokerProcess

        broker = BrokerProcess(
            Path(tempfile.mkdtemp(prefix="bench-")),
            num_network_threads=args.num_network_threads,
            num_io_threads=args.num_io_threads,
        ).start()
        args.bootstrap_server = broker.bootstrap
    try:
        print(
            f"# ApiVersions v3, lock-step per connection, {args.seconds:.0f}s per run, "
            f"{os.cpu_count()} cores, client processes={args.client_processes}"
        )
        for c in args.connections:
            rate = run(args.bootstrap_server, c, args.seconds, args.client_processes)
            print(f"connections={c:<4d} {rate:10.0f} requests/s  {1000.0 * c / rate:8.3f} ms mean latency")
    finally:
        if broker:
            broker.stop()


if __name__ == "__main__":
    main()
