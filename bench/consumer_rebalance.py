"""Rebalance time when a 4th member joins a 3-member group (issue 25's closing figure).

    .venv/bin/python bench/consumer_rebalance.py                  # starts its own broker (subprocess)
    .venv/bin/python bench/consumer_rebalance.py --trials 10 --bootstrap-server 127.0.0.1:9092

Three confluent-kafka consumers share a 6-partition topic; a 4th subscribes and the time from its ``subscribe`` to
its first assignment callback holding partitions is measured; then it closes (leaves) and the three settle again
before the next trial. Protocols: classic eager (``range``), classic ``cooperative-sticky`` and the KIP-848
``consumer`` protocol (server-side ``uniform`` assignor). Heartbeats every 300 ms in both protocols (the client's
``heartbeat.interval.ms`` for classic, the broker's ``group.consumer.heartbeat.interval.ms`` for consumer), classic
``session.timeout.ms`` 6000, ``group.initial.rebalance.delay.ms`` 0. Prints the median, min and max (ms) per
protocol.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TOPIC, PARTITIONS = "rebalance-bench", 6
HEARTBEAT_MS = 300

PROTOCOLS = {
    "classic eager (range)": {"group.protocol": "classic", "partition.assignment.strategy": "range"},
    "classic cooperative-sticky": {"group.protocol": "classic", "partition.assignment.strategy": "cooperative-sticky"},
    "consumer (KIP-848, uniform)": {"group.protocol": "consumer"},
}


class Member:
    """A consumer polled by its own thread; ``owned`` follows its assignment callbacks, ``first_assigned`` is the
    monotonic time of its first callback with partitions."""

    def __init__(self, bootstrap: str, group: str, extra: dict):
        from confluent_kafka import Consumer

        conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "latest", **extra}
        if extra["group.protocol"] == "classic":
            conf.update({"heartbeat.interval.ms": HEARTBEAT_MS, "session.timeout.ms": 6000})
        self.owned: set[int] = set()
        self.first_assigned: float | None = None
        self.lock = threading.Lock()
        self.consumer = Consumer(conf)
        self.subscribed_at = time.monotonic()
        self.consumer.subscribe([TOPIC], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._revoke)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _assign(self, _c, ps):
        with self.lock:
            if ps and self.first_assigned is None:
                self.first_assigned = time.monotonic()
            self.owned |= {p.partition for p in ps}

    def _revoke(self, _c, ps):
        with self.lock:
            self.owned -= {p.partition for p in ps}

    def _run(self):
        while not self._stop.is_set():
            self.consumer.poll(0.05)

    def close(self):
        self._stop.set()
        self.thread.join(10)
        self.consumer.close()


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _settled(members: list[Member]) -> bool:
    owned = [m.owned for m in members]
    union = set().union(*owned)
    return union == set(range(PARTITIONS)) and sum(len(o) for o in owned) == PARTITIONS and all(owned)


def measure(bootstrap: str, name: str, extra: dict, trials: int) -> list[float]:
    group = f"bench-{name.split()[0]}-{extra.get('partition.assignment.strategy', 'uniform')}-{time.time_ns()}"
    three = [Member(bootstrap, group, extra) for _ in range(3)]
    out = []
    try:
        _wait(lambda: _settled(three), 60, f"{name}: three members settled")
        for _ in range(trials):
            fourth = Member(bootstrap, group, extra)
            try:
                _wait(lambda f=fourth: f.first_assigned is not None, 60, f"{name}: the 4th member's assignment")
                assert fourth.first_assigned is not None
                out.append((fourth.first_assigned - fourth.subscribed_at) * 1000)
                _wait(lambda f=fourth: _settled([*three, f]), 60, f"{name}: four members settled")
            finally:
                fourth.close()
            _wait(lambda: _settled(three), 60, f"{name}: three members settled again")
    finally:
        for m in three:
            m.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap-server")
    ap.add_argument("--trials", type=int, default=10)
    args = ap.parse_args()
    broker = None
    if not args.bootstrap_server:
        from tests.helpers.broker import BrokerProcess

        broker = BrokerProcess(
            Path(tempfile.mkdtemp(prefix="bench-")),
            **{
                "group.initial.rebalance.delay.ms": "0",
                "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
                "group.consumer.min.heartbeat.interval.ms": "100",
            },
        ).start()
        args.bootstrap_server = broker.bootstrap
    try:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": args.bootstrap_server})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        _wait(lambda: TOPIC in admin.list_topics(timeout=5).topics, 10, "the topic")
        rows = []
        for name, extra in PROTOCOLS.items():
            times = measure(args.bootstrap_server, name, extra, args.trials)
            rows.append((name, statistics.median(times), min(times), max(times)))
        print(f"\n4th member joins a 3-member group ({PARTITIONS} partitions), {args.trials} trials each:")
        print(f"{'protocol':<30} {'median ms':>10} {'min ms':>8} {'max ms':>8}")
        for name, med, lo, hi in rows:
            print(f"{name:<30} {med:>10.0f} {lo:>8.0f} {hi:>8.0f}")
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
