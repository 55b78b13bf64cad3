"""The producer's Sender arms its selector's lazy wakeup every loop (issue 31): while it waits in a
poll, many wakeups (one per send() to a full batch) cost one eventfd write, not one each."""

from __future__ import annotations

import os
import socket
import threading

from pykbroker.clients.producer import KafkaProducer


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_wakeups_during_one_poll_write_the_eventfd_about_once(monkeypatch):
    producer = KafkaProducer({"bootstrap.servers": f"127.0.0.1:{_unused_port()}", "linger.ms": 60000})
    writes = []
    lock = threading.Lock()
    real_write = os.eventfd_write

    def counting_write(fd, value):
        with lock:
            writes.append(fd)
        real_write(fd, value)

    try:
        monkeypatch.setattr(os, "eventfd_write", counting_write)
        for _ in range(2000):
            producer.sender.wakeup()
        # The Sender loops (no broker answers) with polls of up to 100 ms; 2000 wakeups take a few ms.
        assert len(writes) < 50, f"{len(writes)} eventfd writes for 2000 wakeups"
    finally:
        monkeypatch.undo()
        producer.close(5)
