"""A failed log directory reported to the controller (KIP-858): one controller, three brokers; broker 101 has two
log dirs, one on a small tmpfs (root only, skipped elsewhere). Four partitions, RF 3, all led by 101, two in each of
its dirs. Under an idempotent acks=all producer load the tmpfs is filled (ENOSPC): 101 takes the dir offline,
reports it in its heartbeat, and the controller moves the leadership of the two partitions in it to other ISR
members within seconds; the partitions of 101's other dir stay with it. The producer goes on, nothing acknowledged
is lost, and ``kafka-log-dirs --describe`` shows the dir with its KafkaStorageException."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from tests.helpers.cluster import KRaftCluster
from tests.helpers.replication import REPLICATION_TIMEOUTS, partitions, wait_for_full_isr
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

TOPIC = "jbod"


@pytest.fixture
def tmpfs(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.fixture
def cluster(tmp_path, tmpfs):
    c = KRaftCluster(
        tmp_path,
        controllers=1,
        brokers=3,
        **{
            k.replace(".", "_"): v
            for k, v in {
                **REPLICATION_TIMEOUTS,
                "offsets.topic.num.partitions": "1",
                "log.segment.bytes": "262144",
            }.items()
        },
    )
    c.brokers[101].props["log.dirs"] = f"{tmpfs / 'logs'},{tmp_path / 'broker-101-logs'}"
    c.brokers[101].props["metadata.log.dir"] = str(tmp_path / "broker-101-metadata")  # not on the failing dir
    try:
        c.start()
        yield c
    finally:
        c.stop()


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


class Load:
    """An idempotent acks=all producer writing to every partition of ``TOPIC`` in a thread; ``acked``: the values
    acknowledged per partition, ``failed``: delivery errors."""

    def __init__(self, bootstrap: str):
        from confluent_kafka import Producer

        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "retry.backoff.ms": 50,
                "topic.metadata.refresh.interval.ms": 1000,
                "delivery.timeout.ms": 60000,
            }
        )
        self.acked: dict[int, set[bytes]] = {p: set() for p in range(4)}
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.acked[msg.partition()].add(msg.value())

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self.producer.produce(TOPIC, b"v-%06d-" % i + b"x" * 200, partition=i % 4, on_delivery=self._delivered)
            self.producer.poll(0)
            i += 1
            time.sleep(0.002)

    def count(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self.producer.flush(60) == 0


def _read_all(bootstrap: str, partition: int, end: int) -> set[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{partition}", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(TOPIC, partition, 0)])
        seen: set[bytes] = set()
        deadline = time.monotonic() + 30
        position = 0
        while position < end and time.monotonic() < deadline:
            for m in c.consume(500, 1.0):
                if m.error() is None:
                    seen.add(m.value())
                    position = m.offset() + 1
        return seen
    finally:
        c.close()


def test_failed_log_dir_moves_the_leadership_of_its_partitions(cluster, tmpfs, tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = NewTopic(TOPIC, num_partitions=4, replica_assignment=[[101, 102, 103], [101, 103, 102]] * 2)
    admin.create_topics([topic])[TOPIC].result(30)
    del admin
    wait_for_full_isr(lambda: cluster.bootstrap, TOPIC)
    failing = {p for p in range(4) if (tmpfs / "logs" / f"{TOPIC}-{p}").is_dir()}
    assert len(failing) == 2, failing  # 101 puts its logs in the dir with the fewest partitions
    other = set(range(4)) - failing

    load = Load(cluster.bootstrap)
    try:
        wait_until(lambda: load.count() > 400, timeout=30, message="the load is acknowledged")
        failed_at = time.monotonic()
        _fill(tmpfs)

        def moved():
            view = partitions(cluster.brokers[102].bootstrap, TOPIC)
            return all(view[p]["leader_id"] in (102, 103) and 101 not in view[p]["isr_nodes"] for p in failing) and view

        view = wait_until(moved, timeout=20, message="the leadership of the failed dir's partitions moves")
        moved_after = time.monotonic() - failed_at
        print(f"leadership of the failed dir's partitions moved {moved_after:.1f}s after it filled")
        assert moved_after < 15, moved_after
        assert all(view[p]["leader_id"] == 101 for p in other), view  # 101's other dir keeps serving
        before = load.count()
        wait_until(lambda: load.count() > before + 400, timeout=30, message="acks=all producing goes on")
    finally:
        load.stop()
    assert load.failed == []
    assert cluster.brokers[101].proc.poll() is None
    assert "Traceback" not in cluster.brokers[101].output()

    for p in range(4):
        leader = partitions(cluster.brokers[102].bootstrap, TOPIC)[p]["leader_id"]
        addr = cluster.brokers[leader].bootstrap
        missing = load.acked[p] - _read_all(addr, p, len(load.acked[p]))
        assert not missing, f"partition {p}: {len(missing)} acknowledged records lost"

    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pykbroker.tools.log_dirs_command",
            "--bootstrap-server",
            cluster.bootstrap,
            "--describe",
            "--broker-list",
            "101",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.splitlines()[-1])
    dirs = {d["logDir"]: d for d in report["brokers"][0]["logDirs"]}
    assert dirs[str(tmpfs / "logs")]["error"] == "org.apache.kafka.common.errors.KafkaStorageException"
    assert dirs[str(tmp_path / "broker-101-logs")]["error"] is None
