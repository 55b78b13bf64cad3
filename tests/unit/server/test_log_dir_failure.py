"""ReplicaManager and a failed log directory (Kafka's LogDirFailureHandler / handleLogDirFailure): a
full disk answers KAFKA_STORAGE_ERROR (56, retriable) -- never UNKNOWN_SERVER_ERROR or a crash --, the
directory goes offline with its partitions, the other directories keep serving, acknowledged data
survives a restart, and the broker halts when no log directory is left."""

from __future__ import annotations

import time as _time
import uuid
from types import SimpleNamespace

import pytest

from pykbroker.config.kafka_config_def import BROKER_CONFIG_DEF
from pykbroker.log.fetch_data_info import FetchIsolation
from pykbroker.log.log_manager import LogManager
from pykbroker.metadata.partition_registration import PartitionRegistration
from pykbroker.protocol import errors
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from pykbroker.server.append_result import ProducePartitionResult
from pykbroker.server.metadata_cache import MetadataCache
from pykbroker.server.replica_manager import FetchParams, PartitionFetch, ReplicaManager
from pykbroker.utils.scheduler import MockScheduler
from pykbroker.utils.time import MockTime
from tests.helpers.wait import wait_until
from tests.unit.log.log_test_utils import inject_enospc

CONFIG = {
    **BROKER_CONFIG_DEF.parse({}),
    "producer.purgatory.purge.interval.requests": 1000,
    "fetch.purgatory.purge.interval.requests": 1000,
    "fetch.max.bytes": 1 << 20,
}
TOPIC_ID = uuid.uuid4()


def _broker(dirs, with_halt: bool = True, **log_props):
    time = MockTime(current_ms=int(_time.time() * 1000))
    lm = LogManager.from_broker_config(
        [str(d) for d in dirs], {"log.index.interval.bytes": "1", **log_props}, MockScheduler(time), time
    )
    lm.startup()
    halts: list[int] = []
    rm = ReplicaManager(1, CONFIG, lm, MetadataCache(1), time, halt=halts.append if with_halt else None)
    rm.startup()
    reg = PartitionRegistration(replicas=(1,), isr=(1,), leader=1, leader_epoch=0)
    rm.apply_delta(
        SimpleNamespace(deletes=set(), followers={}, leaders={("t", i): (TOPIC_ID, reg) for i in range(len(dirs))}),
        None,
    )
    return lm, rm, halts


def _produce(rm, partition: int, n: int = 3) -> ProducePartitionResult:
    b = MemoryRecordsBuilder()
    for i in range(n):
        b.append(int(_time.time() * 1000), b"k%d" % i, b"v%d" % i)
    out = {}
    rm.append_records(1000, 1, False, {("t", partition): memoryview(bytearray(b.build()))}, out.update)
    return out[("t", partition)]


def _fetch_error(rm, partition: int) -> int:
    out = []
    rm.fetch_messages(
        FetchParams(-1, 0, 1, 1 << 20, FetchIsolation.HIGH_WATERMARK),
        [PartitionFetch("t", partition, 0, 1 << 20)],
        out.extend,
    )
    return out[0][1].error_code


@pytest.mark.parametrize("segment_bytes", [str(1 << 20), "100"], ids=["append", "roll"])
def test_full_disk_takes_only_its_dir_offline(tmp_path, monkeypatch, segment_bytes):
    full, ok = tmp_path / "full", tmp_path / "ok"
    lm, rm, halts = _broker([full, ok], **{"log.segment.bytes": segment_bytes})
    assert lm.log_dir_of("t", 0) == str(full) and lm.log_dir_of("t", 1) == str(ok)
    assert _produce(rm, 0).error_code == errors.NONE  # acknowledged (acks=1)
    assert _produce(rm, 1).error_code == errors.NONE
    assert _produce(rm, 1).error_code == errors.NONE
    rolls = segment_bytes == "100"
    assert lm.get_log("t", 1).num_segments == (2 if rolls else 1)  # so t-0's next append rolls first
    inject_enospc(monkeypatch, full)

    r = _produce(rm, 0)
    assert r.error_code == errors.KAFKA_STORAGE_ERROR and errors.for_code(r.error_code).retriable
    wait_until(lambda: rm.is_offline("t", 0), 5, message="partition t-0 offline")
    assert lm.live_log_dirs == [str(ok)]
    assert _produce(rm, 0).error_code == errors.KAFKA_STORAGE_ERROR
    assert _fetch_error(rm, 0) == errors.KAFKA_STORAGE_ERROR
    assert _produce(rm, 1).error_code == errors.NONE  # the other directory keeps serving
    assert _fetch_error(rm, 1) == errors.NONE
    assert halts == []

    rm.shutdown()
    lm.shutdown()
    monkeypatch.undo()  # space freed, restart: the acknowledged records of t-0 are there
    lm2 = LogManager.from_broker_config([str(full), str(ok)], {}, MockScheduler(MockTime()), MockTime())
    lm2.startup()
    assert lm2.get_log("t", 0).log_end_offset == 3
    assert lm2.get_log("t", 1).log_end_offset == 9
    lm2.shutdown()


def test_no_log_dir_left_on_a_single_node_keeps_answering_storage_errors(tmp_path, monkeypatch):
    lm, rm, _ = _broker([tmp_path / "only"], with_halt=False)  # as the single-node server builds it
    inject_enospc(monkeypatch, tmp_path)
    assert _produce(rm, 0).error_code == errors.KAFKA_STORAGE_ERROR
    wait_until(lambda: not lm.live_log_dirs, 5, message="dir offline")
    assert _produce(rm, 0).error_code == errors.KAFKA_STORAGE_ERROR
    rm.shutdown()


def test_no_log_dir_left_halts_when_given_halt(tmp_path, monkeypatch):
    _lm, rm, halts = _broker([tmp_path / "only"])
    inject_enospc(monkeypatch, tmp_path)
    assert _produce(rm, 0).error_code == errors.KAFKA_STORAGE_ERROR
    wait_until(lambda: halts == [1], 5, message="halt(1)")
    rm.shutdown()


def test_shutdown_stops_log_creation_in_progress(tmp_path):
    """A SIGTERM while the publisher creates a large backlog of logs: ReplicaManager.shutdown stops it
    (and waits for it), so the LogManager shuts down with no log created behind its back."""
    import threading

    time = MockTime()
    lm = LogManager.from_broker_config([str(tmp_path)], {}, MockScheduler(time), time)
    lm.startup()
    rm = ReplicaManager(1, CONFIG, lm, MetadataCache(1), time)
    reg = PartitionRegistration(replicas=(1,), isr=(1,), leader=1, leader_epoch=0)
    delta = SimpleNamespace(deletes=set(), followers={}, leaders={(f"t{i}", 0): (TOPIC_ID, reg) for i in range(3000)})
    publisher = threading.Thread(target=rm.apply_delta, args=(delta, None))
    publisher.start()
    wait_until(lambda: len(lm.all_logs()) > 0, 10, message="log creation started")
    rm.shutdown()
    lm.shutdown()
    publisher.join(60)
    assert lm.all_logs() == []
    created = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert 0 < len(created) < 3000
    for d in created:
        # a new log's index files are created on first use
        assert sorted(f.name for f in d.iterdir() if f.suffix in (".log", ".index", ".timeindex")) == [
            "00000000000000000000.log"
        ]
