"""Raft snapshots: snapshot files (write, freeze, read, torn writes), cleaning the log up to a snapshot,
restarting from one, and a follower catching up through FetchSnapshot."""

from __future__ import annotations

import os

import pytest

from pykbroker.raft.control_records import SNAPSHOT_FOOTER, SNAPSHOT_HEADER, parse_control_type
from pykbroker.raft.file_replicated_log import FileReplicatedLog
from pykbroker.raft.log_batch_codec import decode_log_batches
from pykbroker.raft.raft_messages import FetchResponseData, FetchSnapshotRequestData, FetchSnapshotResponseData
from pykbroker.raft.records_snapshot import CorruptSnapshotError, RecordsSnapshotReader, RecordsSnapshotWriter
from pykbroker.raft.replicated_log import LogRecord, MemoryReplicatedLog, OffsetAndEpoch, ValidKind
from pykbroker.raft.snapshots import (
    FileRawSnapshotReader,
    MemoryRawSnapshotReader,
    SnapshotId,
    parse_snapshot_filename,
    snapshot_filename,
)
from pykbroker.utils.time import MockTime
from tests.unit.raft.test_kafka_raft_client import RecordingListener, StringSerde
from tests.unit.raft.test_kafka_raft_client_multi_voter import Cluster


def fill(log, epochs_and_values):
    """Append one single-record batch per (epoch, value)."""
    for epoch, value in epochs_and_values:
        log.append_as_leader([LogRecord(None, value.encode())], epoch, append_time_ms=100)
    log.flush()
    log.update_high_watermark(log.end_offset())


def write_snapshot(log, snapshot_id, records, time_ms=100):
    writer = RecordsSnapshotWriter(log.create_new_snapshot(snapshot_id), StringSerde(), time_ms)
    writer.append(records)
    writer.freeze()
    return writer


def test_file_names():
    name = snapshot_filename(SnapshotId(42, 3))
    assert name == "00000000000000000042-0000000003.checkpoint"
    assert parse_snapshot_filename(name) == (SnapshotId(42, 3), ".checkpoint")
    assert parse_snapshot_filename(name + ".part") == (SnapshotId(42, 3), ".checkpoint.part")
    assert parse_snapshot_filename("00000000000000000042.log") is None
    assert parse_snapshot_filename("x-y.checkpoint") is None


def test_snapshot_file_written_as_part_then_renamed_and_read_back(tmp_path):
    log = FileReplicatedLog.open(str(tmp_path), MockTime())
    fill(log, [(1, "a"), (1, "b"), (2, "c")])
    directory = os.path.join(tmp_path, "__cluster_metadata-0")
    writer = RecordsSnapshotWriter(log.create_new_snapshot(SnapshotId(2, 1)), StringSerde(), 1234)
    writer.append(["x", "y"])
    writer.append(["z"])
    files = sorted(f for f in os.listdir(directory) if ".checkpoint" in f)
    assert files == ["00000000000000000002-0000000001.checkpoint.part"]
    assert log.latest_snapshot_id() is None  # invisible until frozen
    writer.freeze()
    assert sorted(f for f in os.listdir(directory) if ".checkpoint" in f) == [snapshot_filename(SnapshotId(2, 1))]
    assert log.latest_snapshot_id() == log.earliest_snapshot_id() == SnapshotId(2, 1)

    raw = log.read_snapshot(SnapshotId(2, 1))
    assert isinstance(raw, FileRawSnapshotReader)
    batches = list(decode_log_batches(raw.read_all()))
    assert [parse_control_type(batches[0].records[0].key), parse_control_type(batches[-1].records[0].key)] == [
        SNAPSHOT_HEADER,
        SNAPSHOT_FOOTER,
    ]
    assert {b.epoch for b in batches} == {1} and [b.base_offset for b in batches] == [0, 1, 3, 4]
    reader = RecordsSnapshotReader(raw, StringSerde())
    assert reader.records() == ["x", "y", "z"] and reader.last_contained_log_timestamp == 1234
    assert [len(b.records) for b in reader] == [2, 1] and reader.last_contained_log_offset == 1
    with pytest.raises(RuntimeError):
        writer.freeze()
    log.close()


def test_snapshot_id_validation(tmp_path):
    log = FileReplicatedLog.open(str(tmp_path), MockTime())
    fill(log, [(1, "a"), (1, "b"), (2, "c")])
    log.update_high_watermark(2)
    with pytest.raises(ValueError, match="high watermark"):
        log.create_new_snapshot(SnapshotId(3, 2))
    with pytest.raises(ValueError, match="not valid"):
        log.create_new_snapshot(SnapshotId(2, 2))  # the record at offset 1 was written in epoch 1
    write_snapshot(log, SnapshotId(2, 1), ["s"])
    assert log.create_new_snapshot(SnapshotId(2, 1)) is None  # exists
    log.maybe_clean()
    assert log.create_new_snapshot(SnapshotId(1, 1)) is None  # below the log start
    log.close()


def test_unfrozen_writer_close_and_torn_part_file_ignored_on_restart(tmp_path):
    log = FileReplicatedLog.open(str(tmp_path), MockTime())
    fill(log, [(1, "a"), (1, "b")])
    directory = os.path.join(tmp_path, "__cluster_metadata-0")
    writer = log.create_new_snapshot(SnapshotId(1, 1))
    writer.append(b"garbage")
    writer.close()  # not frozen: discarded
    assert not [f for f in os.listdir(directory) if "checkpoint." in f]
    crashed = log.create_new_snapshot(SnapshotId(2, 1))
    crashed.append(b"half a batch")  # the process dies here: a .part stays behind
    crashed._file.flush()
    log.close()

    again = FileReplicatedLog.open(str(tmp_path), MockTime())
    assert again.latest_snapshot_id() is None and again.start_offset() == 0 and again.end_offset() == 2
    assert not [f for f in os.listdir(directory) if f.endswith(".part")]
    again.close()


def test_torn_snapshot_bytes_rejected_by_the_reader():
    with pytest.raises(CorruptSnapshotError):
        RecordsSnapshotReader(MemoryRawSnapshotReader(SnapshotId(1, 1), b""), StringSerde())
    log = MemoryReplicatedLog()
    fill(log, [(1, "a")])
    raw = log.create_new_snapshot(SnapshotId(1, 1))
    writer = RecordsSnapshotWriter(raw, StringSerde(), 0)
    writer.append(["x"])
    data = raw._buf  # header and data, no footer
    with pytest.raises(CorruptSnapshotError, match="Footer"):
        RecordsSnapshotReader(MemoryRawSnapshotReader(SnapshotId(1, 1), bytes(data)), StringSerde())


@pytest.mark.parametrize("kind", ["file", "memory"])
def test_clean_to_snapshot_keeps_epochs_answerable(tmp_path, kind):
    log = (
        FileReplicatedLog.open(str(tmp_path), MockTime(), segment_bytes=200)
        if kind == "file"
        else MemoryReplicatedLog()
    )
    fill(log, [(1, "a"), (1, "b"), (2, "c"), (2, "d"), (3, "e"), (4, "f")])
    write_snapshot(log, SnapshotId(2, 1), ["s1"])
    write_snapshot(log, SnapshotId(4, 2), ["s2"])
    assert log.maybe_clean()
    assert log.start_offset() == 4
    assert log.earliest_snapshot_id() == log.latest_snapshot_id() == SnapshotId(4, 2)  # the older one is gone
    assert [b.base_offset for b in log.read(0)] == [4, 5]
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(4, 2)  # below the start: the snapshot's id
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(4, 2)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(5, 3)
    assert log.validate_offset_and_epoch(3, 2).kind is ValidKind.SNAPSHOT
    assert log.validate_offset_and_epoch(4, 1).kind is ValidKind.SNAPSHOT  # at the start, another epoch
    assert log.validate_offset_and_epoch(4, 2).kind is ValidKind.VALID
    assert log.validate_offset_and_epoch(6, 4).kind is ValidKind.VALID
    assert not log.maybe_clean()
    if kind == "file":
        directory = os.path.join(tmp_path, "__cluster_metadata-0")
        assert sorted(f for f in os.listdir(directory) if ".checkpoint" in f) == [snapshot_filename(SnapshotId(4, 2))]
        assert log.log.segments.first_segment().base_offset > 0  # whole segments below the snapshot went
        log.close()
        again = FileReplicatedLog.open(str(tmp_path), MockTime(), segment_bytes=200)
        assert again.start_offset() == 4 and again.end_offset() == 6 and again.latest_snapshot_id() == SnapshotId(4, 2)
        assert [b.base_offset for b in again.read(0)] == [4, 5]
        assert again.end_offset_for_epoch(1) == OffsetAndEpoch(4, 2)
        again.close()


def test_restart_with_a_snapshot_ahead_of_the_log_starts_the_log_there(tmp_path):
    log = FileReplicatedLog.open(str(tmp_path), MockTime())
    fill(log, [(1, "a"), (1, "b")])
    writer = log.create_new_snapshot_unchecked(SnapshotId(10, 5))  # fetched from a leader; crash before truncation
    RecordsSnapshotWriter(writer, StringSerde(), 0).freeze()
    log.close()
    again = FileReplicatedLog.open(str(tmp_path), MockTime())
    assert again.start_offset() == again.end_offset() == 10 and again.last_fetched_epoch() == 5
    assert again.read(0) == []
    again.append_as_follower(
        [next(iter(decode_log_batches(_one_batch(10, 6))))]
    )  # and replication resumes at the snapshot's end
    assert again.end_offset() == 11 and again.last_fetched_epoch() == 6
    again.close()


def _one_batch(offset, epoch):
    from pykbroker.raft.log_batch_codec import encode_log_batches
    from pykbroker.raft.replicated_log import LogBatch

    return encode_log_batches([LogBatch(offset, epoch, (LogRecord(None, b"n"),))], 0)


# ---- the client ---------------------------------------------------------------------------------
class SnapshotListener(RecordingListener):
    def __init__(self):
        super().__init__()
        self.snapshots = []

    def handle_load_snapshot(self, reader):
        self.snapshots.append((reader.snapshot_id, reader.records()))
        self.events.append(("snapshot", reader.snapshot_id.end_offset))


def test_follower_far_behind_catches_up_by_snapshot_then_by_fetch():
    cluster = Cluster()
    for c in cluster.clients.values():
        c.fetch_snapshot_max_bytes = 40  # several FetchSnapshot round trips
    cut = lambda m: 3 in (m.source_id, m.destination_id)  # noqa: E731 - node 3 is partitioned away
    cluster.elect(1, drop=cut)
    leader = cluster.clients[1]
    epoch = leader.quorum.epoch
    for i in range(5):
        leader.prepare_append(epoch, [f"r{i}"])
        cluster.exchange(cluster.poll(1, 2), drop=cut)
    hw = leader.high_watermark()
    assert hw == 6 and cluster.logs[3].end_offset() == 0
    writer = leader.create_snapshot(SnapshotId(hw, epoch), 777)
    writer.append(["state-up-to-6"])
    writer.freeze()
    cluster.exchange(cluster.poll(1, 2), drop=cut)
    assert cluster.logs[1].start_offset() == 6 and cluster.logs[2].start_offset() == 0  # only the leader cleaned
    leader.prepare_append(epoch, ["after"])
    cluster.exchange(cluster.poll(1, 2), drop=cut)

    listener = SnapshotListener()
    cluster.clients[3].register(listener)
    cluster.delivered.clear()
    cluster.run(3000)  # heal: node 3 fetches, is told to load the snapshot, downloads it, then fetches on
    kinds = [type(m.data).__name__ for m in cluster.delivered if 3 in (m.source_id, m.destination_id)]
    assert kinds.count("FetchSnapshotRequestData") >= 3
    snapshot_answers = [
        m.data for m in cluster.delivered if isinstance(m.data, FetchResponseData) and m.data.snapshot_id
    ]
    assert snapshot_answers and snapshot_answers[0].snapshot_id == SnapshotId(6, epoch)
    follower_log = cluster.logs[3]
    assert follower_log.latest_snapshot_id() == SnapshotId(6, epoch) and follower_log.start_offset() == 6
    assert follower_log.end_offset() == cluster.logs[1].end_offset()
    assert cluster.clients[3].high_watermark() == leader.high_watermark()
    assert listener.snapshots == [(SnapshotId(6, epoch), ["state-up-to-6"])]
    assert [e for e in listener.events if e[0] != "leader"][0] == ("snapshot", 6)  # before any batch
    assert listener.data_records() == ["after"] and listener.batches[0].base_offset == 6


def test_fetch_snapshot_request_errors_and_chunks():
    cluster = Cluster()
    cluster.elect(1)
    leader = cluster.clients[1]
    epoch = leader.quorum.epoch
    leader.prepare_append(epoch, ["a"])
    cluster.exchange(cluster.poll())
    sid = SnapshotId(leader.high_watermark(), epoch)
    writer = leader.create_snapshot(sid, 0)
    writer.append(["s"])
    writer.freeze()
    size = cluster.logs[1].read_snapshot(sid).size_in_bytes()

    def ask(snapshot_id, position, max_bytes=10, leader_epoch=epoch):
        from pykbroker.raft.raft_messages import RaftRequest

        leader.handle(RaftRequest(5, 2, 1, FetchSnapshotRequestData(2, leader_epoch, snapshot_id, position, max_bytes)))
        leader.poll_once()
        return [m.data for m in leader.drain_outbound() if isinstance(m.data, FetchSnapshotResponseData)][0]

    first = ask(sid, 0)
    assert first.error_code == 0 and first.size == size and len(first.unaligned_records) == 10
    assert first.unaligned_records == cluster.logs[1].read_snapshot(sid).read(0, 10)
    assert ask(sid, size - 3).unaligned_records == cluster.logs[1].read_snapshot(sid).read(size - 3, 10)
    assert ask(sid, size).error_code == 99  # POSITION_OUT_OF_RANGE
    assert ask(SnapshotId(1, epoch), 0).error_code == 98  # SNAPSHOT_NOT_FOUND
    assert ask(sid, 0, leader_epoch=epoch - 1).error_code == 74  # FENCED_LEADER_EPOCH


def test_new_listener_gets_the_snapshot_first_and_restart_from_snapshot():
    cluster = Cluster(ids=(1,), voters=(1,))
    client = cluster.clients[1]
    client.poll_once()
    epoch = client.quorum.epoch
    client.prepare_append(epoch, ["a", "b"])
    client.schedule_prepared_append()
    client.poll_once()
    hw = client.high_watermark()
    writer = client.create_snapshot(SnapshotId(hw, epoch), 0)
    writer.append(["a+b"])
    writer.freeze()
    client.prepare_append(epoch, ["c"])
    client.schedule_prepared_append()
    client.poll_once()
    assert cluster.logs[1].start_offset() == hw
    listener = SnapshotListener()
    client.register(listener)
    client.poll_once()
    assert [e for e in listener.events if e[0] != "leader"][0] == ("snapshot", hw)
    assert listener.data_records() == ["c"]
