"""Produce and consume throughput through TLS vs plaintext on one broker (confluent-kafka, 1 KB records,
acks=1, 3 partitions), alternating in the same run, and the cost of a TLS handshake (new SSL connections
per second, each one ApiVersions round trip).

The broker (a subprocess, tests/helpers/broker.py) has a PLAINTEXT and an SSL listener with a certificate
made by trustme; TLS fetches cannot use sendfile, so consume shows the copy.

    .venv/bin/python bench/tls.py                          # 3 rounds x 100,000 records, 200 handshakes
    .venv/bin/python bench/tls.py --records 200000 --rounds 3
"""

from __future__ import annotations

import argparse
import socket
import ssl
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trustme
from confluent_kafka import Consumer, Producer, TopicPartition

from pykbroker.protocol import encode_request
from tests.helpers.broker import BrokerProcess
from tests.helpers.topics import create_topic

VALUE = b"x" * 1024


def produce(conf: dict, topic: str, n: int) -> float:
    p = Producer({**conf, "acks": "1", "linger.ms": 5})
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, VALUE, partition=i % 3)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    return time.perf_counter() - t0


def consume(conf: dict, topic: str, n: int) -> float:
    c = Consumer({**conf, "group.id": f"b-{uuid.uuid4()}", "fetch.max.bytes": 52428800})
    c.assign([TopicPartition(topic, p, 0) for p in range(3)])
    got = 0
    t0 = time.perf_counter()
    while got < n:
        for m in c.consume(10000, 1.0):
            if not m.error():
                got += 1
    elapsed = time.perf_counter() - t0
    c.close()
    return elapsed


def handshakes(port: int, cafile: str, count: int) -> float:
    ctx = ssl.create_default_context(cafile=cafile)
    request = encode_request(18, 3, 1, "bench", {"client_software_name": "b", "client_software_version": "1"})
    t0 = time.perf_counter()
    for _ in range(count):
        with (
            socket.create_connection(("127.0.0.1", port)) as raw,
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s,
        ):
            s.sendall(request)
            s.recv(65536)
    return (time.perf_counter() - t0) / count


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--handshakes", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        ca = trustme.CA()
        ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(d / "server.pem"))
        ca.cert_pem.write_to_path(str(d / "ca.pem"))
        broker = BrokerProcess(d / "b", listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0")
        broker.props.update(
            {
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(d / "server.pem"),
            }
        )
        broker.start()
        try:
            plain = {"bootstrap.servers": broker.bootstrap}
            tls = {
                "bootstrap.servers": f"127.0.0.1:{broker.ports['SSL']}",
                "security.protocol": "SSL",
                "ssl.ca.location": str(d / "ca.pem"),
            }
            results: dict[str, list[float]] = {
                k: [] for k in ("produce plain", "produce TLS", "consume plain", "consume TLS")
            }
            for r in range(args.rounds):
                for name, conf in (("plain", plain), ("TLS", tls)):
                    topic = f"bench-{name.lower()}-{r}"
                    create_topic(broker.bootstrap, topic, 3)
                    results[f"produce {name}"].append(produce(conf, topic, args.records))
                    results[f"consume {name}"].append(consume(conf, topic, args.records))
            mb = args.records * len(VALUE) / 1e6
            for k, times in results.items():
                t = statistics.median(times)
                print(f"{k:14s} {mb / t:8.1f} MB/s {args.records / t:10.0f} records/s (median of {len(times)})")
            per = handshakes(broker.ports["SSL"], str(d / "ca.pem"), args.handshakes)
            print(f"TLS connection + handshake + ApiVersions: {per * 1000:.2f} ms each ({args.handshakes} in a row)")
        finally:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
