"""Throughput of 1, 2 and 4 share consumers on a 1-partition topic vs one classic consumer (issue 29's closing
figure), records/s of 1 KB records, in the same run.

    .venv/bin/python bench/share_consumers.py                       # starts its own broker (subprocess)
    .venv/bin/python bench/share_consumers.py --records 50000 --bootstrap-server 127.0.0.1:9092

The topic is filled once; then a classic consumer (confluent-kafka ``Consumer``, the partition assigned from offset 0)
reads it all, and share groups of 1, 2 and 4 ``ShareConsumer``s (implicit acknowledgement: each poll accepts the
previous one's records; ``share.auto.offset.reset=earliest`` set as a group config) read it together, each consumer
polled by its own thread. Rates: the classic consumer's from its ``assign`` to its last record (it prefetches in the
background, so a rate from its first record would only measure the client); the share group's from its first record
to its last (a ShareConsumer fetches only when polled; the group join is not counted). Share consumers acknowledge
every record and the leader tracks each acquisition, so a share group pays a ShareAcknowledge round (piggy-backed on
the next ShareFetch) that a classic consumer does not.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TOPIC = "share-bench"
VALUE = b"x" * 1024


def _wait(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


def fill(bootstrap: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "none"})
    for _ in range(n):
        while True:
            try:
                p.produce(TOPIC, VALUE, partition=0)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0
    del p  # closed before the broker stops


def classic(bootstrap: str, n: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-classic", "auto.offset.reset": "earliest"})
    start = time.monotonic()
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got = 0
    try:
        while got < n:
            got += sum(1 for m in c.consume(500, 1.0) if m.error() is None)
        return n / (time.monotonic() - start)
    finally:
        c.close()


def set_earliest(bootstrap: str, group: str) -> None:
    from pykbroker.clients.broker_connection import BrokerConnection
    from pykbroker.protocol.api_keys import ApiKeys

    with BrokerConnection.to(bootstrap) as c:
        r = c.request(
            ApiKeys.INCREMENTAL_ALTER_CONFIGS,
            1,
            {
                "resources": [
                    {
                        "resource_type": 32,
                        "resource_name": group,
                        "configs": [{"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}],
                    }
                ],
                "validate_only": False,
            },
        )
    assert r["responses"][0]["error_code"] == 0, r
    time.sleep(1)  # the metadata log carries the group config to the partition leader


def share(bootstrap: str, n: int, consumers: int) -> float:
    from confluent_kafka import ShareConsumer

    group = f"bench-share-{consumers}"
    set_earliest(bootstrap, group)
    lock = threading.Lock()
    state = {"got": 0, "first": 0.0, "last": 0.0}
    stop = threading.Event()

    def work() -> None:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        c.subscribe([TOPIC])
        try:
            while not stop.is_set():
                msgs = [m for m in c.poll(0.5) or [] if m.error() is None]
                if msgs:
                    now = time.monotonic()
                    with lock:
                        state["first"] = state["first"] or now
                        state["got"] += len(msgs)
                        state["last"] = now
        finally:
            c.close()

    threads = [threading.Thread(target=work, daemon=True) for _ in range(consumers)]
    for t in threads:
        t.start()
    try:
        _wait(lambda: state["got"] >= n, 300, f"{n} records by {consumers} share consumers")
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    return state["got"] / (state["last"] - state["first"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap-server")
    ap.add_argument("--records", type=int, default=20000)
    args = ap.parse_args()
    broker = None
    if not args.bootstrap_server:
        from tests.helpers.broker import BrokerProcess

        broker = BrokerProcess(Path(tempfile.mkdtemp(prefix="bench-")), **{"group.initial.rebalance.delay.ms": "0"})
        broker.start()
        args.bootstrap_server = broker.bootstrap
    try:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": args.bootstrap_server})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        _wait(lambda: TOPIC in admin.list_topics(timeout=5).topics, 10, "the topic")
        fill(args.bootstrap_server, args.records)
        rows = [("classic consumer (1)", classic(args.bootstrap_server, args.records))]
        for k in (1, 2, 4):
            rows.append((f"share consumers ({k})", share(args.bootstrap_server, args.records, k)))
        print(f"\n{args.records} records of 1 KB, one partition:")
        print(f"{'consumers':<24} {'records/s':>10}")
        for name, rate in rows:
            print(f"{name:<24} {rate:>10.0f}")
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
