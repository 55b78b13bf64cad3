"""Idle broker cost: CPU and RSS with no connections, then with N idle connections (issue 16, target 5).

    .venv/bin/python bench/idle_connections.py --connections 10000 --seconds 10

Starts a broker (subprocess, Kafka's default ``num.network.threads=3``, ``num.io.threads=8``), measures its CPU
(utime+stime of every thread from /proc/<pid>/stat, as a percentage of one core) and RSS over ``--seconds``
with no client, then opens ``--connections`` connections, sends one ApiVersions v0 on each and waits for every
answer (so each is registered with a Processor and has been served), and measures again while they sit idle.
Needs RLIMIT_NOFILE above the connection count (raised here to the hard limit for the client and the broker).
"""

from __future__ import annotations

import argparse
import resource
import selectors
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.request_cost import cpu_seconds
from tests.helpers.broker import BrokerProcess


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def idle_cpu_percent(pid: int, seconds: float) -> float:
    before, start = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return 100.0 * (cpu_seconds(pid) - before) / (time.monotonic() - start)


def open_connections(port: int, n: int, timeout: float = 120.0, chunk: int = 40) -> list[socket.socket]:
    """``n`` connections, ``chunk`` at a time (below ``socket.listen.backlog.size``, 50, so the accept queue
    never drops a handshake), each answered once before the next chunk is opened."""
    body = struct.pack(">hhih", 18, 0, 7, 1) + b"x"
    frame = struct.pack(">i", len(body)) + body
    sel = selectors.DefaultSelector()
    socks, deadline = [], time.monotonic() + timeout
    try:
        while len(socks) < n:
            batch = min(chunk, n - len(socks))
            for _ in range(batch):
                s = socket.socket()
                s.setblocking(False)
                s.connect_ex(("127.0.0.1", port))
                socks.append(s)
                sel.register(s, selectors.EVENT_WRITE)
            answered = 0
            while answered < batch:
                if time.monotonic() > deadline:
                    raise SystemExit(f"only {len(socks) - batch + answered} of {n} connections answered")
                answered += _pump(sel, frame, 0.2)
    finally:
        sel.close()
    return socks


def _pump(sel: selectors.BaseSelector, frame: bytes, timeout: float) -> int:
    answered = 0
    for key, events in sel.select(timeout):
        s = key.fileobj
        if events & selectors.EVENT_WRITE:
            s.send(frame)
            sel.modify(s, selectors.EVENT_READ)
        else:
            try:
                s.recv(64)
            except ConnectionResetError:  # a handshake the full accept queue dropped: connect again
                sel.unregister(s)
                s.close()
                raise
            sel.unregister(s)
            answered += 1
    return answered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=10000)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < args.connections + 200:
        print(f"note: RLIMIT_NOFILE hard limit {hard}; client and broker each need {args.connections}+", flush=True)
    with tempfile.TemporaryDirectory() as d:
        broker = BrokerProcess(
            Path(d),
            num_network_threads="3",
            num_io_threads="8",
            max_connections_per_ip=str(args.connections + 100),
        )
        broker.start()
        pid = broker.proc.pid
        try:
            time.sleep(2)  # start-up work (metadata publishing, first scheduler runs) settles
            cpu0, rss0 = idle_cpu_percent(pid, args.seconds), rss_mib(pid)
            print(f"no connections: CPU {cpu0:.2f}% of a core, RSS {rss0:.1f} MiB", flush=True)
            start = time.monotonic()
            socks = open_connections(broker.ports["PLAINTEXT"], args.connections)
            print(f"{args.connections} connections opened and served in {time.monotonic() - start:.1f} s", flush=True)
            time.sleep(1)
            cpu1, rss1 = idle_cpu_percent(pid, args.seconds), rss_mib(pid)
            per_conn_kib = (rss1 - rss0) * 1024 / args.connections
            print(
                f"{args.connections} idle connections: CPU {cpu1:.2f}% of a core, RSS {rss1:.1f} MiB "
                f"(+{per_conn_kib:.1f} KiB per connection)",
                flush=True,
            )
            for s in socks:
                s.close()
        except BaseException:
            print("\n".join(line for line in broker.lines if "rror" in line or "eject" in line)[-2000:])
            raise
        finally:
            broker.stop(60)


if __name__ == "__main__":
    main()
