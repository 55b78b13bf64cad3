"""A full disk under a real broker (a small tmpfs; root only, skipped elsewhere): the partition on the
full log directory answers KAFKA_STORAGE_ERROR, the directory goes offline, the broker keeps serving
the other directory (no SIGBUS from an index written through mmap), and after space is freed a restart
recovers every acknowledged record."""

from __future__ import annotations

import os
import subprocess

import pytest

from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from tests.helpers.broker import BrokerProcess
from tests.helpers.topics import create_topic, produce_raw

pytestmark = pytest.mark.integration


@pytest.fixture
def small_tmpfs(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _batch(n: int, size: int) -> bytearray:
    b = MemoryRecordsBuilder()
    for i in range(n):
        b.append(0, b"k%d" % i, os.urandom(size))
    return bytearray(b.build())


def test_full_log_dir_goes_offline_and_the_broker_keeps_serving(tmp_path, small_tmpfs):
    full, ok = small_tmpfs / "logs", tmp_path / "logs-ok"
    b = BrokerProcess(
        tmp_path / "broker",
        log_dirs=f"{full},{ok}",
        metadata_log_dir=str(tmp_path / "meta"),
        log_segment_bytes=str(128 * 1024),
    )
    b.start()
    try:
        create_topic(b.bootstrap, "t", partitions=2)
        assert (full / "t-0").is_dir() and (ok / "t-1").is_dir()
        acked = 0
        for _ in range(200):  # 1 MiB disk, 16 KiB per produce: it fills within ~64
            r = produce_raw(b.bootstrap, "t", _batch(4, 4000))
            if r["error_code"] != 0:
                break
            acked = r["base_offset"] + 4
        assert r["error_code"] == 56, r  # KAFKA_STORAGE_ERROR (retriable), not UNKNOWN_SERVER_ERROR
        assert acked > 0
        assert b.wait_for_line(r"Stopping serving replicas in dir", 10), b.output()[-3000:]
        assert b.proc.poll() is None
        assert produce_raw(b.bootstrap, "t", _batch(1, 10))["error_code"] == 56

        def produce_t1():
            from pykbroker.clients.broker_connection import BrokerConnection
            from pykbroker.protocol.api_keys import ApiKeys

            with BrokerConnection.to(b.bootstrap) as c:
                resp = c.request(
                    ApiKeys.PRODUCE,
                    9,
                    {
                        "transactional_id": None,
                        "acks": 1,
                        "timeout_ms": 5000,
                        "topic_data": [{"name": "t", "partition_data": [{"index": 1, "records": _batch(2, 10)}]}],
                    },
                )
            return resp["responses"][0]["partition_responses"][0]

        assert produce_t1()["error_code"] == 0  # the other log directory keeps serving
        assert b.stop() == 0
        assert "Traceback" not in b.output() and "SIGBUS" not in b.output()

        subprocess.run(["mount", "-o", "remount,size=16m", str(small_tmpfs)], check=True)  # space freed
        b.start()
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g", "enable.auto.commit": False})
        try:
            low, high = c.get_watermark_offsets(TopicPartition("t", 0), timeout=10)
        finally:
            c.close()
        assert (low, high) == (0, acked)
    finally:
        b.stop()


def test_single_full_log_dir_keeps_the_broker_up_answering_storage_errors(tmp_path, small_tmpfs):
    """With its only log directory full, a single node stays up (no SIGBUS, no halt) and answers
    KAFKA_STORAGE_ERROR (retriable) for the partition; Metadata keeps being served."""
    full = small_tmpfs / "logs"
    b = BrokerProcess(
        tmp_path / "broker",
        log_dirs=str(full),
        metadata_log_dir=str(tmp_path / "meta"),
        log_segment_bytes=str(128 * 1024),
    )
    b.start()
    try:
        create_topic(b.bootstrap, "t", partitions=1)
        for _ in range(200):
            r = produce_raw(b.bootstrap, "t", _batch(4, 4000))
            if r["error_code"] != 0:
                break
        assert r["error_code"] == 56, r
        assert b.wait_for_line(r"No log directory left to serve", 10), b.output()[-3000:]
        assert produce_raw(b.bootstrap, "t", _batch(1, 10))["error_code"] == 56
        assert b.proc.poll() is None
        from confluent_kafka.admin import AdminClient

        assert "t" in AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10).topics
        assert "Traceback" not in b.output()
    finally:
        b.kill() if b.proc and b.proc.poll() is None else None
