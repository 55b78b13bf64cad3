"""ShareFetch round trips of one share member on a 1-partition topic, without a client library: records/s and ms per
ShareFetch (each fetch piggy-backs the ACCEPT of the previous one's ``acquired_records``), the broker's own cost of a
share fetch + acknowledgement + state write, free of librdkafka's ShareConsumer poll cadence.

    .venv/bin/python bench/share_fetch_rounds.py --records 40000
    .venv/bin/python bench/share_fetch_rounds.py --records 40000 --compare /tmp/old-checkout   # alternately, same run

Records of 1 KB, produced in batches of 200 (confluent-kafka), fetched with ``max_records`` 500 by a share session of
pykbroker's own client codec (group ``share.auto.offset.reset`` stays ``latest``: the share partition is created
before the records are produced). ``--compare`` runs the same measurement against another checkout (its own broker
subprocess, ``PYTHONPATH`` = that checkout), alternating ``--rounds`` times.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ACCEPT = 1


def _fetch(conn, tid, member, epoch: int, acks: list) -> dict:
    from pykbroker.protocol.api_keys import ApiKeys

    ack_batches = [{"first_offset": a, "last_offset": b, "acknowledge_types": [ACCEPT]} for a, b in acks]
    body = {
        "group_id": "rounds",
        "member_id": member,
        "share_session_epoch": epoch,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 8 << 20,
        "max_records": 500,
        "batch_size": 500,
        "topics": [{"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": ack_batches}]}],
        "forgotten_topics_data": [],
    }
    r = conn.request(ApiKeys.SHARE_FETCH, 1, body)
    assert r["error_code"] == 0, r
    return r


def measure(n: int) -> str:
    from confluent_kafka import Producer

    from pykbroker.clients.broker_connection import BrokerConnection
    from pykbroker.protocol.api_keys import ApiKeys
    from pykbroker.protocol.types import ZERO_UUID
    from tests.helpers.broker import BrokerProcess
    from tests.helpers.topics import create_topic

    broker = BrokerProcess(Path(tempfile.mkdtemp(prefix="bench-rounds-")), **{"group.initial.rebalance.delay.ms": "0"})
    broker.start()
    try:
        create_topic(broker.bootstrap, "rounds", partitions=1)
        with BrokerConnection.to(broker.bootstrap) as conn:
            meta = {"topics": [{"name": "rounds", "topic_id": ZERO_UUID}], "allow_auto_topic_creation": False}
            tid = conn.request(ApiKeys.METADATA, 12, meta)["topics"][0]["topic_id"]
            _fetch(conn, tid, "m", 0, [])  # the share partition starts at the log end (latest)
            p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.num.messages": 200})
            for _ in range(n):
                while True:
                    try:
                        p.produce("rounds", b"x" * 1024, partition=0)
                        break
                    except BufferError:
                        p.poll(0.05)
            assert p.flush(60) == 0
            got, acks, fetches, epoch = 0, [], 0, 1
            start = time.monotonic()
            while got < n:
                r = _fetch(conn, tid, "m", epoch, acks)
                epoch, fetches, acks = epoch + 1, fetches + 1, []
                for t in r["responses"]:
                    for part in t["partitions"]:
                        assert part["acknowledge_error_code"] == 0, part
                        for a in part["acquired_records"]:
                            got += a["last_offset"] - a["first_offset"] + 1
                            acks.append((a["first_offset"], a["last_offset"]))
            elapsed = time.monotonic() - start
            return f"{n / elapsed:>10.0f} rec/s {1000 * elapsed / fetches:>7.2f} ms/fetch ({fetches} fetches)"
    finally:
        broker.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=40000)
    ap.add_argument("--compare", help="another checkout to measure alternately in the same run")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child or not args.compare:
        print(measure(args.records), flush=True)
        return
    for _ in range(args.rounds):
        for tree in (str(ROOT), args.compare):
            env = dict(os.environ, PYTHONPATH=tree)
            cmd = [sys.executable, str(Path(tree) / "bench" / Path(__file__).name), "--child", "--records"]
            out = subprocess.run(
                [*cmd, str(args.records)], env=env, cwd=tree, capture_output=True, text=True, timeout=300
            )
            line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr.strip()[-300:]
            print(f"{tree:<30} load {os.getloadavg()[0]:.1f}: {line}", flush=True)


if __name__ == "__main__":
    main()
