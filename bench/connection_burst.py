"""How fast the broker accepts a burst of connections (hardening issue, item 10).

    .venv/bin/python bench/connection_burst.py --connections 9000 --runs 3

Starts a broker (subprocess, default ``socket.listen.backlog.size`` = 50, 3 network threads), opens
``--connections`` non-blocking connections at once, sends one ApiVersions v0 request on each as soon as
it is connected and waits for every answer. Prints, per run: seconds until all were answered and the
kernel's ListenOverflows delta (handshakes dropped because the accept queue was full; each costs the
client a 1 s, 3 s, 7 s ... retransmit, and a few end in a reset). Needs RLIMIT_NOFILE above the
connection count (client and broker).
"""

from __future__ import annotations

import argparse
import selectors
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.broker import BrokerProcess


def listen_overflows() -> int:
    lines = Path("/proc/net/netstat").read_text().splitlines()
    for names, values in zip(lines[::2], lines[1::2], strict=True):
        if names.startswith("TcpExt:"):
            return int(dict(zip(names.split()[1:], values.split()[1:], strict=True))["ListenOverflows"])
    return 0


def burst(port: int, n: int, timeout: float = 120.0) -> tuple[float, int]:
    body = struct.pack(">hhih", 18, 0, 7, 1) + b"x"
    frame = struct.pack(">i", len(body)) + body
    writers, readers = selectors.DefaultSelector(), selectors.DefaultSelector()
    socks = []
    start = time.monotonic()
    try:
        for _ in range(n):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            socks.append(s)
            writers.register(s, selectors.EVENT_WRITE)
        answered, resets, deadline = 0, 0, start + timeout
        while answered < n and time.monotonic() < deadline:
            for key, _ in writers.select(0 if readers.get_map() else 1):
                key.fileobj.send(frame)
                writers.unregister(key.fileobj)
                readers.register(key.fileobj, selectors.EVENT_READ)
            for key, _ in readers.select(0.05):
                readers.unregister(key.fileobj)
                try:
                    key.fileobj.recv(64)
                    answered += 1
                except ConnectionResetError:  # the kernel gave up on a handshake the accept queue dropped
                    resets += 1
        if answered + resets < n:
            raise SystemExit(f"only {answered} of {n} answered in {timeout} s")
        return time.monotonic() - start, resets
    finally:
        writers.close()
        readers.close()
        for s in socks:
            s.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        broker = BrokerProcess(Path(d), num_network_threads="3", max_connections_per_ip=str(args.connections + 10))
        broker.start()
        try:
            for run in range(args.runs):
                before = listen_overflows()
                seconds, resets = burst(broker.ports["PLAINTEXT"], args.connections)
                print(
                    f"run {run + 1}: {args.connections - resets} of {args.connections} connections answered in "
                    f"{seconds:.2f} s ({resets} reset), ListenOverflows +{listen_overflows() - before}",
                    flush=True,
                )
        except BaseException:
            print(
                "\n".join(
                    line
                    for line in broker.lines
                    if ("rror" in line and "reset by peer" not in line)
                    or "Reject" in line
                    or "Closing" in line
                    or "accept" in line
                )[-3000:]
            )
            raise
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
