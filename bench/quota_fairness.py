"""Produce quota fairness: two confluent-kafka producers send as fast as they can to one broker; one client id
has ``producer_byte_rate`` set. Prints each producer's delivered rate over a steady-state window and the
throttle times the limited one saw (throttle_cb), and the unlimited producer's rate when it runs alone (the same
window, just before), so that ``free / free alone`` shows what the limited client leaves to the others.

    PYTHONPATH=. python bench/quota_fairness.py [--rate 1048576] [--seconds 10] [--warmup 3]

Starts its own broker (quota.window.num=3, quota.window.size.seconds=1) in a temporary directory.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer

from pykbroker.tools import config_command
from tests.helpers.broker import BrokerProcess
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until


def measure(bootstrap: str, rate: int, seconds: float, warmup: float, value_size: int = 1000) -> dict:
    """The unlimited producer alone, then both producers, each for ``warmup + seconds``: ``{"free alone",
    "limited", "free": {"bytes_per_s", "throttle_events", "max_throttle_s"}}``, bytes (values) delivered per second
    in the last ``seconds``."""
    create_topic(bootstrap, "quota-fairness", partitions=1)
    out = io.StringIO()
    rc = config_command.main(
        [
            "--bootstrap-server",
            bootstrap,
            "--alter",
            "--client",
            "limited",
            "--add-config",
            f"producer_byte_rate={rate}",
        ],
        out=out,
    )
    assert rc == 0
    _await_quota(bootstrap, "limited", rate)
    alone = _run_producers(bootstrap, ("free",), seconds, warmup, value_size)
    both = _run_producers(bootstrap, ("limited", "free"), seconds, warmup, value_size)
    both["free alone"] = alone["free"]
    return both


def _await_quota(bootstrap: str, client_id: str, rate: int, timeout_s: float = 10.0) -> None:
    """Wait until the broker describes the quota from its metadata image (the image that the quota managers
    follow)."""

    def described() -> bool:
        out = io.StringIO()
        args = ["--bootstrap-server", bootstrap, "--describe", "--entity-type", "clients", "--entity-name", client_id]
        config_command.main(args, out=out)
        return f"producer_byte_rate={float(rate)}" in out.getvalue() or f"producer_byte_rate={rate}" in out.getvalue()

    wait_until(described, timeout_s, message=f"quota of {client_id} described")


def _run_producers(bootstrap: str, clients: tuple[str, ...], seconds: float, warmup: float, value_size: int) -> dict:
    start = time.monotonic()
    window = (start + warmup, start + warmup + seconds)
    results: dict[str, dict] = {}

    def run(client_id: str) -> None:
        stats = {"bytes": 0, "throttles": []}
        results[client_id] = stats

        def delivered(err, msg) -> None:
            if err is None and window[0] <= time.monotonic() < window[1]:
                stats["bytes"] += len(msg.value())

        p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                "linger.ms": 5,
                "acks": 1,
                "queue.buffering.max.kbytes": 4096,
                "throttle_cb": lambda ev: stats["throttles"].append(ev.throttle_time),
            }
        )
        value = b"x" * value_size
        while time.monotonic() < window[1]:
            try:
                p.produce("quota-fairness", value, on_delivery=delivered)
            except BufferError:
                p.poll(0.01)
            p.poll(0)
        p.flush(30)

    threads = [threading.Thread(target=run, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {
        c: {
            "bytes_per_s": s["bytes"] / seconds,
            "throttle_events": len(s["throttles"]),
            "max_throttle_s": max(s["throttles"], default=0.0),
        }
        for c, s in results.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=1048576)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        broker = BrokerProcess(Path(d), quota_window_num="3").start()
        try:
            figures = measure(broker.bootstrap, args.rate, args.seconds, args.warmup)
        finally:
            broker.stop()
    for client, f in figures.items():
        print(
            f"{client}: {f['bytes_per_s'] / 1048576:.3f} MiB/s delivered, {f['throttle_events']} throttle events, "
            f"max throttle {f['max_throttle_s']:.3f} s"
        )
    print(f"limited / quota = {figures['limited']['bytes_per_s'] / args.rate:.3f}")
    print(f"free / free alone = {figures['free']['bytes_per_s'] / figures['free alone']['bytes_per_s']:.3f}")


if __name__ == "__main__":
    main()
