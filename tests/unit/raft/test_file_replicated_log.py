"""FileReplicatedLog over UnifiedLog: batches on disk as record batch v2, and a Raft restart from disk."""

from __future__ import annotations

import os

from pykbroker.raft.control_records import LEADER_CHANGE, control_key
from pykbroker.raft.file_replicated_log import FileReplicatedLog
from pykbroker.raft.kafka_raft_client import KafkaRaftClient
from pykbroker.raft.quorum_state_store import FileQuorumStateStore
from pykbroker.raft.replicated_log import LogBatch, LogRecord, OffsetAndEpoch
from pykbroker.record.memory_records import MemoryRecords
from pykbroker.utils.time import MockTime
from tests.unit.raft.test_kafka_raft_client import RecordingListener, StringSerde


def test_append_read_and_reopen(tmp_path):
    log = FileReplicatedLog.open(str(tmp_path), MockTime())
    assert log.end_offset() == 0 and log.last_fetched_epoch() == 0 and log.read(0) == []
    log.append_as_leader([LogRecord(control_key(LEADER_CHANGE), b"lc")], 1, control=True, append_time_ms=5)
    log.append_as_leader([LogRecord(None, b"a"), LogRecord(None, b"b")], 1, append_time_ms=6)
    log.append_as_leader([LogRecord(None, b"c")], 2, append_time_ms=7)
    log.flush()
    batches = log.read(0)
    assert [(b.base_offset, b.epoch, b.control) for b in batches] == [(0, 1, True), (1, 1, False), (3, 2, False)]
    assert batches[1].records == (LogRecord(None, b"a"), LogRecord(None, b"b"))
    assert [b.base_offset for b in log.read(2)] == [1, 3]
    assert [b.base_offset for b in log.read(0, 3)] == [0, 1]
    assert log.end_offset() == 4 and log.last_fetched_epoch() == 2
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(3, 1)
    log.update_high_watermark(4)
    assert log.high_watermark() == 4
    log.close()

    segment = os.path.join(tmp_path, "__cluster_metadata-0", "00000000000000000000.log")
    with open(segment, "rb") as f:
        on_disk = list(MemoryRecords(f.read()).batches())
    assert [b.partition_leader_epoch for b in on_disk] == [1, 1, 2] and on_disk[0].is_control_batch

    again = FileReplicatedLog.open(str(tmp_path), MockTime())
    assert again.end_offset() == 4 and again.last_fetched_epoch() == 2
    again.truncate_to(3)
    assert again.end_offset() == 3
    again.append_as_follower([LogBatch(3, 3, (LogRecord(None, b"z"),), False, 9)])
    assert again.read(3)[0].records == (LogRecord(None, b"z"),) and again.read(3)[0].epoch == 3
    again.close()


def test_raft_client_restarts_from_disk(tmp_path):
    log = FileReplicatedLog.open(str(tmp_path))
    client = KafkaRaftClient(1, [1], log, FileQuorumStateStore(str(tmp_path)), StringSerde())
    client.poll_once()
    client.prepare_append(1, ["x", "y"])
    client.schedule_prepared_append()
    client.poll_once()
    client.close()
    log.close()

    log = FileReplicatedLog.open(str(tmp_path))
    client = KafkaRaftClient(1, [1], log, FileQuorumStateStore(str(tmp_path)), StringSerde())
    listener = RecordingListener()
    client.register(listener)
    client.poll_once()
    assert client.leader_and_epoch.epoch == 2
    assert listener.data_records() == ["x", "y"]
    assert [b.epoch for b in listener.batches] == [1, 1, 2]
    log.close()
