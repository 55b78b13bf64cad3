"""Broker-side idempotence: duplicates answered with the original offset, gaps rejected, state survives kill -9."""

from __future__ import annotations

import socket
import time

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from tests.helpers.topics import create_topic, produce_raw
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration


def _pid(bootstrap):
    with BrokerConnection.to(bootstrap) as c:
        r = c.request(
            ApiKeys.INIT_PRODUCER_ID,
            4,
            {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1},
        )
    assert r["error_code"] == 0
    return r["producer_id"], r["producer_epoch"]


def _batch(pid, epoch, seq, n=5):
    b = MemoryRecordsBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    now = int(time.time() * 1000)
    for i in range(n):
        b.append(now, None, b"s%d" % (seq + i))
    return b.build()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_duplicate_gets_original_offset_and_gap_is_out_of_order(broker):
    create_topic(broker.bootstrap, "idem-raw", 1)
    pid, epoch = _pid(broker.bootstrap)
    first = produce_raw(broker.bootstrap, "idem-raw", _batch(pid, epoch, 0), acks=-1)
    second = produce_raw(broker.bootstrap, "idem-raw", _batch(pid, epoch, 5), acks=-1)
    assert (first["error_code"], first["base_offset"], second["base_offset"]) == (0, 0, 5)
    dup = produce_raw(broker.bootstrap, "idem-raw", _batch(pid, epoch, 0), acks=-1)
    assert (dup["error_code"], dup["base_offset"]) == (0, 0), dup
    gap = produce_raw(broker.bootstrap, "idem-raw", _batch(pid, epoch, 20), acks=-1)
    assert gap["error_code"] == 45, gap  # OUT_OF_ORDER_SEQUENCE_NUMBER
    nxt = produce_raw(broker.bootstrap, "idem-raw", _batch(pid, epoch, 10), acks=-1)
    assert (nxt["error_code"], nxt["base_offset"]) == (0, 10)


def test_producer_state_rebuilt_after_kill_9(broker_factory):
    port, cport = _free_port(), _free_port()
    b = broker_factory(
        listeners=f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
        controller_quorum_voters=f"1@127.0.0.1:{cport}",
    )
    create_topic(b.bootstrap, "idem-kill", 1)
    pid, epoch = _pid(b.bootstrap)
    for seq in range(0, 50, 5):
        assert produce_raw(b.bootstrap, "idem-kill", _batch(pid, epoch, seq), acks=-1)["error_code"] == 0
    b.kill()
    b.start()
    answers = []

    def duplicate_acknowledged():  # NOT_LEADER / UNKNOWN while the partition loads after the restart
        answers.append(produce_raw(b.bootstrap, "idem-kill", _batch(pid, epoch, 45), acks=-1))
        return answers[-1]["error_code"] == 0

    wait_until(duplicate_acknowledged, 30, interval=0.2, message="duplicate acknowledged after restart")
    dup = answers[-1]
    assert (dup["error_code"], dup["base_offset"]) == (0, 45), dup
    gap = produce_raw(b.bootstrap, "idem-kill", _batch(pid, epoch, 60), acks=-1)
    assert gap["error_code"] == 45
    nxt = produce_raw(b.bootstrap, "idem-kill", _batch(pid, epoch, 50), acks=-1)
    assert (nxt["error_code"], nxt["base_offset"]) == (0, 50)
