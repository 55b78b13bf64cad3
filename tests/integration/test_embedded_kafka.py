"""pykbroker.testing: EmbeddedKafka (in-process, fast start, stop/restart keeping data and ports, logs to
the caller's logging, nothing left running) and the pytest plugin's fixtures."""

from __future__ import annotations

import logging
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pykbroker.testing import EmbeddedKafka
from tests.helpers.broker import ROOT
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration


def _consume_all(bootstrap: str, topic: str, n: int) -> list[bytes]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while len(values) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                values.append(m.value())
    finally:
        c.close()
    return values


def test_start_produce_consume_restart_keeps_data_and_port(tmp_path):
    """How fast it starts is measured by bench/embedded_start.py, not here (a loaded machine is no clock)."""
    from confluent_kafka import Producer

    before = set(threading.enumerate())
    kafka = EmbeddedKafka()
    kafka.start()
    try:
        kafka.create_topic("orders", partitions=3, config={"cleanup.policy": "delete"})
        p = Producer({"bootstrap.servers": kafka.bootstrap_servers})
        for i in range(3):
            p.produce("orders", b"v%d" % i, partition=i)
        assert p.flush(10) == 0
        bootstrap = kafka.bootstrap_servers
        kafka.restart()
        assert kafka.bootstrap_servers == bootstrap
        assert sorted(_consume_all(bootstrap, "orders", 3)) == [b"v0", b"v1", b"v2"]
        data_dir = Path(kafka.data_dir)
        assert (data_dir / "orders-0").is_dir()
    finally:
        kafka.close()
    assert not data_dir.exists()  # the temporary directory goes with close()
    assert set(threading.enumerate()) <= before  # every broker thread ended


def test_context_manager_and_own_data_dir_kept(tmp_path):
    with EmbeddedKafka(data_dir=str(tmp_path / "data"), config={"num.partitions": "2"}) as kafka:
        kafka.create_topic("t")
        kafka.stop()
        assert not kafka.running
        kafka.start()
        with pytest.raises(Exception, match="already exists"):
            kafka.create_topic("t")
    assert (tmp_path / "data" / "t-0").is_dir() and (tmp_path / "data" / "meta.properties").is_file()


def test_logs_go_to_the_callers_logging_and_disconnects_are_debug(caplog):
    caplog.set_level(logging.INFO, logger="pykbroker")
    caplog.set_level(logging.DEBUG, logger="pykbroker.network.socket_server")  # (last: the handler's level)
    with EmbeddedKafka() as kafka:
        assert any("Kafka Server started" in r.getMessage() for r in caplog.records)
        s = socket.create_connection(("127.0.0.1", kafka.port))
        # ApiVersions v0 (correlation id 7) answered: the connection is registered; then a reset.
        s.sendall(struct.pack(">ihhih", 10, 18, 0, 7, -1))
        (size,) = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
        assert struct.unpack(">i", s.recv(size, socket.MSG_WAITALL)[:4]) == (7,)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.sendall(b"\x00\x00")  # half a size field, then a reset: a client gone, nothing wrong
        s.close()

        def closed():
            return [r for r in caplog.records if "closed: ConnectionResetError" in r.getMessage()]

        (record,) = wait_until(closed, 10, message="the reset connection closed")
        assert record.levelno == logging.DEBUG and record.name == "pykbroker.network.socket_server"
    assert not [r for r in caplog.records if r.name.startswith("pykbroker") and r.levelno >= logging.WARNING]


def test_pytest_plugin_fixtures(tmp_path):
    (tmp_path / "test_user.py").write_text(
        """
import pytest
from confluent_kafka import Consumer, Producer

seen = []

def test_produce_consume(kafka_broker, kafka_topic):
    seen.append(kafka_topic)
    p = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    p.produce(kafka_topic, b"hello")
    assert p.flush(10) == 0
    c = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "g",
                  "auto.offset.reset": "earliest"})
    c.subscribe([kafka_topic])
    m = None
    for _ in range(60):
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            break
    c.close()
    assert m is not None and m.value() == b"hello"

@pytest.mark.kafka_topic(partitions=3)
def test_fresh_topic_per_test(kafka_broker, kafka_topic):
    from confluent_kafka.admin import AdminClient
    assert kafka_topic not in seen and kafka_topic.startswith("test_fresh_topic_per_test-")
    md = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers}).list_topics(kafka_topic, timeout=10)
    assert len(md.topics[kafka_topic].partitions) == 3
"""
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "pykbroker.testing.pytest_plugin"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout + r.stderr


def test_plugin_fixture_names_are_free_in_this_repository():
    conftests = [p for p in ROOT.joinpath("tests").rglob("conftest.py")]
    assert conftests
    for p in conftests:
        text = p.read_text()
        assert "def kafka_broker(" not in text and "def kafka_topic(" not in text, p
