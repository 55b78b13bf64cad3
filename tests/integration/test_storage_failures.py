"""A full disk under a real broker (a small tmpfs; root only, skipped elsewhere): the partition on the
full log directory answers KAFKA_STORAGE_ERROR, the directory goes offline, the broker keeps serving
the other directory (no SIGBUS from an index written through mmap), and after space is freed a restart
recovers every acknowledged record. A full *metadata* log directory halts the node (exit code 1, as
Kafka's fatal fault handler), and the other voters of its quorum elect a leader and keep committing."""

from __future__ import annotations

import errno
import os
import subprocess
import time

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from tests.helpers.broker import BrokerProcess
from tests.helpers.cluster import KRaftCluster
from tests.helpers.topics import create_topic, produce_raw
from tests.helpers.wait import wait_until

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


@pytest.fixture
def tmpfs_factory(tmp_path):
    """``mount(name, size)``: a tmpfs of ``size`` (e.g. "4m") at ``tmp_path/name``, unmounted afterwards."""
    mounts = []

    def mount(name: str, size: str):
        mnt = tmp_path / name
        mnt.mkdir()
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True)
        if r.returncode != 0:
            pytest.skip("cannot mount a tmpfs here (needs root)")
        mounts.append(mnt)
        return mnt

    try:
        yield mount
    finally:
        for mnt in mounts:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(directory) -> None:
    """Write a file in ``directory`` until its file system is full (ENOSPC)."""
    fd = os.open(os.path.join(directory, "filler"), os.O_WRONLY | os.O_CREAT)
    try:
        chunk = b"\0" * 65536
        while True:
            try:
                os.write(fd, chunk)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                if len(chunk) == 1:
                    return
                chunk = chunk[: len(chunk) // 2]
    finally:
        os.close(fd)


def _create_topic_code(bootstrap: str, name: str, partitions: int = 1) -> int:
    body = {
        "topics": [
            {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
        ],
        "timeout_ms": 3000,
        "validate_only": False,
    }
    try:
        with BrokerConnection.to(bootstrap, timeout=8) as c:
            return c.request(ApiKeys.CREATE_TOPICS, 7, body)["topics"][0]["error_code"]
    except OSError:
        return -1


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


def test_a_full_metadata_log_dir_halts_the_active_controller_and_the_quorum_goes_on(tmp_path, tmpfs_factory):
    """Three combined nodes, each with its metadata log on a small tmpfs. The active controller's fills up:
    the next metadata write fails with ENOSPC and that node halts with exit code 1 and one fatal line
    (Kafka: the Raft IO thread's fault handler halts), instead of staying the active controller with a log
    it cannot write; the other two elect a leader and commit the write."""
    cluster = KRaftCluster(tmp_path / "cluster", controllers=3, brokers=0, combined=True)
    mounts = {}
    for i, node in cluster.controllers.items():
        mounts[i] = tmpfs_factory(f"meta-{i}", "4m")
        node.props["metadata.log.dir"] = str(mounts[i])
    cluster.start()
    try:
        leader = cluster.await_leader()
        victim = cluster.controllers[leader]
        assert victim.proc is not None
        survivor = next(n for i, n in cluster.brokers.items() if i != leader)
        _fill(mounts[leader])
        started = time.monotonic()
        code = wait_until(
            # 64 PartitionRecords: more than the page left in the full log's last block
            lambda: _create_topic_code(survivor.bootstrap, "after-full", 64) in (0, 36) or None,
            30,
            message="CreateTopics committed by the remaining controllers",
        )
        assert code
        wait_until(lambda: victim.proc.poll() is not None, 10, message=f"halt:\n{victim.output()[-5000:]}")
        assert victim.proc.returncode == 1
        fatal = victim.wait_for_line(r"Encountered fatal fault: Unexpected error in raft IO thread", 1)
        assert fatal is not None and "No space left on device" in fatal, victim.output()[-3000:]
        new_leader = cluster.await_leader(not_=leader)
        assert new_leader != leader and time.monotonic() - started < 30
        assert _create_topic_code(survivor.bootstrap, "after-full-2") == 0  # and it keeps committing
    finally:
        cluster.kill_all()
