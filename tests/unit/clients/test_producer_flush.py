"""KafkaProducer.flush() returns only once every delivery callback of the flushed records has run
(Kafka's ProducerBatch.completeFutureAndFireCallbacks: callbacks first, then the produce future)."""

from __future__ import annotations

import socket
import threading
import time

from pykbroker.clients.producer import KafkaProducer


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_flush_waits_for_callbacks_still_running():
    producer = KafkaProducer({"bootstrap.servers": f"127.0.0.1:{_unused_port()}", "linger.ms": 60000})
    entered, release = threading.Event(), threading.Event()
    ran: list[int] = []

    def blocking(metadata, exception):
        entered.set()
        assert release.wait(10)
        ran.append(metadata.offset)

    def recording(metadata, exception):
        ran.append(metadata.offset)

    try:
        acc = producer.accumulator
        now_ms = int(time.time() * 1000)
        acc.append("t", 0, now_ms, None, b"a", None, blocking, 1.0)
        acc.append("t", 0, now_ms, None, b"b", None, recording, 1.0)
        batch = acc.batches[("t", 0)].popleft()
        # Stands in for the Sender thread answering the batch (no broker: the real Sender cannot drain it).
        completer = threading.Thread(target=producer.sender._complete, args=(batch, 100, -1))
        completer.start()
        assert entered.wait(10)
        flushed = threading.Event()
        flusher = threading.Thread(target=lambda: (producer.flush(10), flushed.set()))
        flusher.start()
        flusher.join(0.5)
        assert not flushed.is_set(), "flush() returned while a delivery callback was still running"
        release.set()
        completer.join(10)
        flusher.join(10)
        assert flushed.is_set()
        assert ran == [100, 101]
    finally:
        release.set()
        producer.close(5)
