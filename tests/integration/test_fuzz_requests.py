"""Fuzzed requests for every advertised (API, version) while real producers verify every delivery.

Hardening acceptance: a broker receiving, on other connections, random, truncated and mutated bodies
for each (API, version) it advertises, disabled versions, unknown API keys and garbage frames must
answer or close only the offending connection:

* every response a fuzz connection reads carries the correlation id of the request it sent;
* confluent-kafka producers (acks=all, idempotent) running meanwhile see no delivery error, and every
  acknowledged record is read back exactly once, in order, at the offset it was acknowledged at;
* the broker logs no traceback and its RSS stays bounded.

Bounded and reproducible: ``PYKBROKER_FUZZ_SEED`` (default 20261123) seeds the cases,
``PYKBROKER_FUZZ_CASES`` (default 2,500) bounds their number; each fuzz thread has a deadline.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import encode_request
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.header import encode_request_header
from tests.helpers.broker import BrokerProcess
from tests.helpers.topics import create_topic

pytestmark = pytest.mark.integration

SEED = int(os.environ.get("PYKBROKER_FUZZ_SEED", "20261123"))
CASES = int(os.environ.get("PYKBROKER_FUZZ_CASES", "2500"))
FUZZ_THREADS = 4
READ_TIMEOUT_S = 1.0  # a valid long-poll (Fetch, JoinGroup) may legitimately take longer: we move on
TOPIC = "fuzz-verified-deliveries"
PRODUCERS, RECORDS_PER_PRODUCER = 3, 4000
RSS_GROWTH_LIMIT = 300 * 1024 * 1024


def advertised_versions(bootstrap: str) -> list[tuple[int, int, int]]:
    with BrokerConnection.to(bootstrap) as c:
        r = c.request(ApiKeys.API_VERSIONS, 3, {"client_software_name": "fuzz", "client_software_version": "1"})
    return [(a["api_key"], a["min_version"], a["max_version"]) for a in r["api_keys"]]


def fuzz_cases(apis: list[tuple[int, int, int]], rng: random.Random, count: int) -> list[tuple[str, bytes, int]]:
    """``[(kind, frame, correlation_id)]``: for each case a full size-prefixed frame."""
    pairs = [(k, v) for k, lo, hi in apis for v in range(lo, hi + 1)]
    cases = []
    for i in range(count):
        corr = 1_000_000 + i
        kind = rng.choice(
            ["default", "truncated", "mutated", "mutated", "garbage", "bad-version", "unknown-key", "bad-size"]
        )
        api_key, version = rng.choice(pairs)
        header = encode_request_header(api_key, version, corr, "fuzz")
        try:
            body = encode_request(api_key, version, corr, "fuzz", {})[4 + len(header) :]
        except Exception:  # noqa: BLE001 - a schema with required values: start from nothing
            body = b""
        if kind == "truncated":
            body = body[: rng.randrange(len(body))] if body else b""
        elif kind == "mutated":
            b = bytearray(body or bytes(8))
            for _ in range(rng.randint(1, 8)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            if rng.random() < 0.3:
                b += rng.randbytes(rng.randint(1, 64))
            body = bytes(b)
        elif kind == "garbage":
            body = rng.randbytes(rng.randint(0, 256))
        elif kind == "bad-version":
            header = encode_request_header(api_key, 0, corr, "fuzz")
            header = (
                struct.pack(">hh", api_key, max(v for k, _, v in apis if k == api_key) + rng.randint(1, 50))
                + header[4:]
            )
        elif kind == "unknown-key":
            header = struct.pack(">hhi", rng.choice([-1, 99, 1000, 32767]), 0, corr) + header[8:]
        payload = header + body
        frame = struct.pack(">i", len(payload)) + payload
        if kind == "bad-size":
            frame = struct.pack(">i", rng.choice([-1, -(2**31), 2**31 - 1, 200 * 1024 * 1024])) + payload
        cases.append((kind, frame, corr))
    return cases


class FuzzClient(threading.Thread):
    """Sends its share of the cases, one at a time, reconnecting whenever the broker closes."""

    def __init__(self, port: int, cases, deadline: float):
        super().__init__(daemon=True)
        self.port, self.cases, self.deadline = port, cases, deadline
        self.wrong_correlation: list[tuple[str, int, int]] = []
        self.answered = self.closed = self.timed_out = 0
        self.error: BaseException | None = None

    def _connect(self) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        s.settimeout(READ_TIMEOUT_S)
        return s

    def _read_frame(self, s: socket.socket) -> bytes | None:
        def exactly(n: int) -> bytes | None:
            buf = b""
            while len(buf) < n:
                chunk = s.recv(n - len(buf))
                if not chunk:
                    return None
                buf += chunk
            return buf

        head = exactly(4)
        if head is None:
            return None
        return exactly(struct.unpack(">i", head)[0])

    def run(self) -> None:
        s = None
        try:
            for kind, frame, corr in self.cases:
                if time.monotonic() > self.deadline:
                    return
                if s is None:
                    s = self._connect()
                try:
                    s.sendall(frame)
                    response = self._read_frame(s)
                except TimeoutError:
                    self.timed_out += 1
                    s.close()
                    s = None
                    continue
                except OSError:  # reset by the broker
                    response = None
                if response is None:
                    self.closed += 1
                    s.close()
                    s = None
                    continue
                self.answered += 1
                got = struct.unpack_from(">i", response)[0]
                if got != corr:
                    self.wrong_correlation.append((kind, corr, got))
        except BaseException as e:  # noqa: BLE001 - reported to the test thread
            self.error = e
        finally:
            if s is not None:
                s.close()


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def test_fuzzed_requests_do_not_disturb_real_producers(tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition

    broker = BrokerProcess(
        tmp_path / "broker", num_network_threads="2", num_io_threads="4", auto_create_topics_enable="false"
    )
    broker.start()
    try:
        create_topic(broker.bootstrap, TOPIC, partitions=3)
        apis = advertised_versions(broker.bootstrap)
        rng = random.Random(SEED)
        cases = fuzz_cases(apis, rng, CASES)
        rss_before = rss_bytes(broker.proc.pid)

        delivered: list[tuple[int, int, bytes]] = []
        delivery_errors: list[str] = []
        lock = threading.Lock()

        def produce(producer_index: int) -> None:
            p = Producer(
                {
                    "bootstrap.servers": broker.bootstrap,
                    "acks": "all",
                    "enable.idempotence": True,
                    "linger.ms": 2,
                    "message.timeout.ms": 60000,
                }
            )

            def on_delivery(err, msg):
                with lock:
                    if err is not None:
                        delivery_errors.append(f"{msg.value()!r}: {err}")
                    else:
                        delivered.append((msg.partition(), msg.offset(), msg.value()))

            for i in range(RECORDS_PER_PRODUCER):
                p.produce(TOPIC, value=b"p%d-%d" % (producer_index, i), key=b"%d" % i, on_delivery=on_delivery)
                if i % 200 == 0:
                    p.poll(0.01)  # spread the records over the fuzzing
            assert p.flush(90) == 0

        deadline = time.monotonic() + 90
        fuzzers = [FuzzClient(broker.port, cases[i::FUZZ_THREADS], deadline) for i in range(FUZZ_THREADS)]
        producers = [threading.Thread(target=produce, args=(i,), daemon=True) for i in range(PRODUCERS)]
        for t in fuzzers + producers:
            t.start()
        for t in fuzzers + producers:
            t.join(120)
        assert not any(t.is_alive() for t in fuzzers + producers), "fuzz or produce threads did not finish"
        for f in fuzzers:
            assert f.error is None, repr(f.error)
            assert f.wrong_correlation == [], f.wrong_correlation[:10]
        sent = sum(f.answered + f.closed + f.timed_out for f in fuzzers)
        assert sent >= CASES * 0.9, f"only {sent} of {CASES} fuzz cases ran before the deadline"
        assert sum(f.answered for f in fuzzers) > 0 and sum(f.closed for f in fuzzers) > 0

        assert delivery_errors == [], delivery_errors[:10]
        assert len(delivered) == PRODUCERS * RECORDS_PER_PRODUCER
        # Read everything back: exactly the acknowledged records, each at its acknowledged offset.
        acked = {(p, o): v for p, o, v in delivered}
        assert len(acked) == len(delivered), "two records acknowledged at the same offset"
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "fuzz-verify", "enable.auto.commit": False})
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(3)])
        seen: dict[tuple[int, int], bytes] = {}
        read_deadline = time.monotonic() + 60
        try:
            while len(seen) < len(acked) and time.monotonic() < read_deadline:
                for m in c.consume(5000, 0.5):
                    assert not m.error(), m.error()
                    seen[(m.partition(), m.offset())] = m.value()
        finally:
            c.close()
        assert seen == acked

        growth = rss_bytes(broker.proc.pid) - rss_before
        assert growth < RSS_GROWTH_LIMIT, f"broker RSS grew by {growth / 2**20:.0f} MiB"
        assert broker.proc.poll() is None
        output = broker.output()
        assert "Traceback" not in output, output[output.index("Traceback") - 2000 :][:6000]
    finally:
        broker.stop()
