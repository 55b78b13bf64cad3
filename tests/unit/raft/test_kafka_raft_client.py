"""KafkaRaftClient, single voter: election on start, epoch persistence, commit delivery, restart replay."""

from __future__ import annotations

import json
import threading
import time as _time

import pytest

from pykbroker.protocol.errors import KafkaStorageError
from pykbroker.raft.batch_accumulator import NotLeaderError
from pykbroker.raft.control_records import LEADER_CHANGE, LeaderChangeMessage
from pykbroker.raft.epoch_state import StateKind
from pykbroker.raft.file_replicated_log import FileReplicatedLog
from pykbroker.raft.kafka_raft_client import KafkaRaftClient
from pykbroker.raft.kafka_raft_client_driver import KafkaRaftClientDriver
from pykbroker.raft.quorum_state_store import FileQuorumStateStore, MemoryQuorumStateStore
from pykbroker.raft.raft_client import LeaderAndEpoch, RaftClientListener
from pykbroker.raft.replicated_log import MemoryReplicatedLog
from pykbroker.utils.fault_handler import ProcessTerminatingFaultHandler
from pykbroker.utils.time import MockTime
from tests.helpers.wait import wait_until
from tests.unit.log.log_test_utils import inject_enospc


class StringSerde:
    def write(self, record: str) -> bytes:
        return record.encode()

    def read(self, value: bytes) -> str:
        return value.decode()


class RecordingListener(RaftClientListener):
    def __init__(self):
        self.batches = []
        self.leaders: list[LeaderAndEpoch] = []
        self.events: list[tuple] = []
        self.shutdown = False

    def handle_commit(self, batch):
        self.batches.append(batch)
        self.events.append(("commit", batch.base_offset))

    def handle_leader_change(self, leader):
        self.leaders.append(leader)
        self.events.append(("leader", leader.epoch))

    def begin_shutdown(self):
        self.shutdown = True

    def data_records(self):
        return [r for b in self.batches for r in b.records]


def new_client(log, store, time=None, node_id=1):
    return KafkaRaftClient(node_id, [node_id], log, store, StringSerde(), time or MockTime(), append_linger_ms=25)


def test_single_voter_becomes_leader_at_start_and_commits_leader_change():
    log, store = MemoryReplicatedLog(), MemoryQuorumStateStore()
    client = new_client(log, store)
    listener = RecordingListener()
    client.register(listener)
    client.poll_once()
    assert client.quorum.kind is StateKind.LEADER
    assert client.leader_and_epoch == LeaderAndEpoch(1, 1)
    assert store.state.epoch == 1 and store.state.leader_id == 1
    assert log.end_offset() == 1 and client.high_watermark() == 1
    (batch,) = listener.batches
    assert batch.is_control and batch.epoch == 1
    ctype, value = batch.control_records[0]
    assert ctype == LEADER_CHANGE
    assert LeaderChangeMessage.decode(value) == LeaderChangeMessage(1, (1,), (1,))
    assert listener.leaders == [LeaderAndEpoch(1, 1)]
    # leader change fired after the commits below the epoch start
    assert listener.events == [("commit", 0), ("leader", 1)]


def test_append_linger_then_commit_in_order():
    time = MockTime()
    log, store = MemoryReplicatedLog(), MemoryQuorumStateStore()
    client = new_client(log, store, time)
    listener = RecordingListener()
    client.register(listener)
    client.poll_once()
    epoch = client.leader_and_epoch.epoch
    assert client.prepare_append(epoch, ["a", "b"]) == 2
    assert client.prepare_append(epoch, ["c"]) == 3
    assert client.log_end_offset() == 4
    assert client.poll_once() > 0  # lingering
    assert listener.data_records() == []
    time.sleep(25)
    client.poll_once()
    assert listener.data_records() == ["a", "b", "c"]
    assert client.high_watermark() == 4 == log.high_watermark()
    assert client.prepare_append(epoch, ["d"]) == 4
    client.schedule_prepared_append()
    assert client.poll_once() == 500
    assert listener.data_records()[-1] == "d"
    assert listener.batches[-1].base_offset == 4


def test_append_in_wrong_epoch_or_before_leadership_refused():
    client = new_client(MemoryReplicatedLog(), MemoryQuorumStateStore())
    with pytest.raises(NotLeaderError):
        client.prepare_append(1, ["x"])
    client.poll_once()
    with pytest.raises(NotLeaderError):
        client.prepare_append(2, ["x"])


def test_restart_resigns_then_leads_a_new_epoch_and_replays(tmp_path):
    log = MemoryReplicatedLog()
    store = FileQuorumStateStore(str(tmp_path))
    client = new_client(log, store)
    client.poll_once()
    client.prepare_append(1, ["a"])
    client.schedule_prepared_append()
    client.poll_once()
    client.close()
    data = json.loads((tmp_path / "quorum-state").read_text())
    assert data["leaderEpoch"] == 1 and data["leaderId"] == 1 and data["data_version"] == 0

    client2 = new_client(log, FileQuorumStateStore(str(tmp_path)))
    client2.initialize()
    assert client2.quorum.kind is StateKind.RESIGNED and client2.quorum.epoch == 1
    listener = RecordingListener()
    client2.register(listener)
    client2.poll_once()
    assert client2.leader_and_epoch == LeaderAndEpoch(1, 2)
    assert json.loads((tmp_path / "quorum-state").read_text())["leaderEpoch"] == 2
    assert [b.base_offset for b in listener.batches] == [0, 1, 2]
    assert listener.data_records() == ["a"]
    assert listener.batches[-1].epoch == 2 and listener.batches[-1].is_control
    assert listener.leaders == [LeaderAndEpoch(1, 2)]


def test_late_registration_replays_from_zero_and_unregister_stops():
    client = new_client(MemoryReplicatedLog(), MemoryQuorumStateStore())
    client.poll_once()
    client.prepare_append(1, ["a"])
    client.schedule_prepared_append()
    client.poll_once()
    late = RecordingListener()
    client.register(late)
    client.poll_once()
    assert late.data_records() == ["a"]
    assert late.leaders == [LeaderAndEpoch(1, 1)]
    client.unregister(late)
    client.poll_once()
    client.prepare_append(1, ["b"])
    client.schedule_prepared_append()
    client.poll_once()
    assert late.data_records() == ["a"]


def test_listener_exception_does_not_stop_delivery():
    client = new_client(MemoryReplicatedLog(), MemoryQuorumStateStore())

    class Bad(RaftClientListener):
        def handle_commit(self, batch):
            raise RuntimeError("bad listener")

    good = RecordingListener()
    client.register(Bad())
    client.register(good)
    client.poll_once()
    client.prepare_append(1, ["a"])
    client.schedule_prepared_append()
    client.poll_once()
    assert good.data_records() == ["a"]


def test_empty_voter_set_refused():
    with pytest.raises(ValueError):
        KafkaRaftClient(1, [], MemoryReplicatedLog(), MemoryQuorumStateStore(), StringSerde())


def test_single_voter_sends_no_rpcs():
    client = new_client(MemoryReplicatedLog(), MemoryQuorumStateStore())
    client.poll_once()
    client.prepare_append(1, ["a"])
    client.schedule_prepared_append()
    client.poll_once()
    assert client.drain_outbound() == []


def test_driver_thread_commits_and_shuts_down():
    log = MemoryReplicatedLog()
    client = KafkaRaftClient(3, [3], log, MemoryQuorumStateStore(), StringSerde(), append_linger_ms=5)
    listener = RecordingListener()
    client.register(listener)
    driver = KafkaRaftClientDriver(client)
    driver.start()
    try:
        assert "kafka-3-raft-io-thread" in {t.name for t in threading.enumerate()}
        deadline = _time.monotonic() + 5
        while not listener.leaders and _time.monotonic() < deadline:
            _time.sleep(0.005)
        epoch = client.leader_and_epoch.epoch
        for i in range(50):
            client.prepare_append(epoch, [f"r{i}"])  # lingering appends
        deadline = _time.monotonic() + 5
        while len(listener.data_records()) < 50 and _time.monotonic() < deadline:
            _time.sleep(0.005)
        assert listener.data_records() == [f"r{i}" for i in range(50)]
        client.prepare_append(epoch, ["last"])
    finally:
        driver.shutdown()
    assert not driver.is_alive
    assert listener.shutdown
    assert listener.data_records()[-1] == "last"  # queued appends written at shutdown


class RecordingFaultHandler:
    """A FaultHandler whose "halt" records the exit code instead of ending the test process."""

    def __init__(self):
        self.faults: list[tuple[str, BaseException | None]] = []
        self.halted = threading.Event()

    def handle_fault(self, message, cause=None):
        ProcessTerminatingFaultHandler(halt=lambda code: self.faults.append((message, cause, code))).handle_fault(
            message, cause
        )
        self.halted.set()


def test_a_full_metadata_log_dir_is_a_fatal_fault_of_the_raft_io_thread(tmp_path, monkeypatch):
    """Kafka: an append or flush of the metadata log that fails (ENOSPC) reaches the Raft IO thread's
    fatal fault handler, which halts the process (exit code 1) instead of leaving a controller that
    accepts writes it cannot persist."""
    log = FileReplicatedLog.open(str(tmp_path / "meta"))
    client = KafkaRaftClient(3, [3], log, FileQuorumStateStore(str(tmp_path / "meta")), StringSerde())
    listener = RecordingListener()
    client.register(listener)
    handler = RecordingFaultHandler()
    driver = KafkaRaftClientDriver(client, fatal_fault_handler=handler)
    driver.start()
    try:
        # elected (it may take a while on a loaded machine): the append below needs a leader
        wait_until(lambda: listener.leaders and client.leader_and_epoch.leader_id == 3, 30, 0.005, "no leader")
        inject_enospc(monkeypatch, tmp_path / "meta")  # the disk is full from now on
        client.prepare_append(client.leader_and_epoch.epoch, ["x" * 8192])
        client.schedule_prepared_append()
        assert handler.halted.wait(5)
        ((message, cause, code),) = handler.faults
        assert message == "Unexpected error in raft IO thread" and code == 1
        assert isinstance(cause, KafkaStorageError) and "No space left on device" in str(cause)
        deadline = _time.monotonic() + 5
        while driver.is_alive and _time.monotonic() < deadline:
            _time.sleep(0.005)
        assert not driver.is_alive
        assert listener.data_records() == []  # nothing was committed
    finally:
        monkeypatch.undo()
        driver.shutdown()
        log.close()
