"""The share coordinator in process (Kafka's ShareCoordinatorShardTest / ShareCoordinatorServiceTest cases): the
shard's records and their replay (snapshot, updates laid over it, a snapshot every N updates, tombstones), fencing
by state epoch and leader epoch, and the ShareCoordinator over an in-memory ``__share_group_state`` log: operations
answered after their records are written, a reload from the log giving the same state, NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS around elections, append errors mapped as Kafka does. Also the SHARE coordinator key's
partition (Java's String.hashCode of ``group:topicId:partition``)."""

from __future__ import annotations

import uuid

import pytest

from pykbroker.coordinator.share import share_coordinator_records as rec
from pykbroker.coordinator.share.persister import ACKNOWLEDGED, ARCHIVED, AVAILABLE, PersisterStateBatch
from pykbroker.coordinator.share.share_coordinator import ShareCoordinator
from pykbroker.coordinator.share.share_coordinator_shard import ShareCoordinatorShard
from pykbroker.metadata.topic_names import SHARE_GROUP_STATE_TOPIC_NAME
from pykbroker.protocol import errors
from pykbroker.protocol.types import uuid_from_base64, uuid_to_base64
from pykbroker.server.handlers.groups import share_key_partition
from pykbroker.utils.scheduler import MockScheduler
from pykbroker.utils.time import MockTime
from tests.unit.coordinator.txn_harness import FakeLogManager, FakeReplicaManager

T = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
B = PersisterStateBatch


def _apply(shard: ShareCoordinatorShard, records) -> None:
    for k, v in records:
        shard.replay(k, v)


def _write(shard, key, state_epoch, leader_epoch, start, batches=()):
    records, code = shard.write_state(key, state_epoch, leader_epoch, start, tuple(batches))
    if code == errors.NONE:
        _apply(shard, records)
    return records, code


def test_coordinator_key_and_partition_follow_kafkas_string_hash():
    key = rec.coordinator_key("g", T, 3)
    assert key == f"g:{uuid_to_base64(T)}:3"
    assert uuid_from_base64(key.split(":")[1]) == T
    # Java: "g1:AAAAAAAAAAAAAAAAAAAAAQ:0".hashCode() = 1530573466 -> % 50 = 16
    one = uuid.UUID(int=1)
    assert rec.coordinator_key("g1", one, 0) == "g1:AAAAAAAAAAAAAAAAAAAAAQ:0"
    h = 0
    for ch in "g1:AAAAAAAAAAAAAAAAAAAAAQ:0":
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h & 0x80000000 else h
    assert rec.partition_for("g1:AAAAAAAAAAAAAAAAAAAAAQ:0", 50) == abs(h) % 50
    assert share_key_partition("g1:AAAAAAAAAAAAAAAAAAAAAQ:0", 50) == abs(h) % 50
    for bad in ("g1", "g1:nope:0", "g1:AAAAAAAAAAAAAAAAAAAAAQ:x", ":AAAAAAAAAAAAAAAAAAAAAQ:0", "a:b:c:d"):
        assert share_key_partition(bad, 50) is None


def test_first_write_is_a_snapshot_later_writes_are_updates_laid_over_it():
    shard = ShareCoordinatorShard(records_per_snapshot=500)
    key = ("g", T, 0)
    records, code = _write(shard, key, 0, 1, 0, [B(0, 9, AVAILABLE, 1)])
    assert code == errors.NONE and rec.key_version(records[0][0]) == rec.SNAPSHOT_KEY_VERSION
    records, code = _write(shard, key, 0, 1, 5, [B(5, 6, ACKNOWLEDGED, 1), B(10, 12, ARCHIVED, 5)])
    assert code == errors.NONE and rec.key_version(records[0][0]) == rec.UPDATE_KEY_VERSION
    _, result = shard.read_state(key, 1)
    assert result.error_code == errors.NONE and result.start_offset == 5 and result.state_epoch == 0
    assert result.state_batches == (B(5, 6, ACKNOWLEDGED, 1), B(7, 9, AVAILABLE, 1), B(10, 12, ARCHIVED, 5))
    # start offset -1 keeps the stored one
    _write(shard, key, 0, 1, -1, [B(7, 7, ACKNOWLEDGED, 2)])
    assert shard.read_state(key, 1)[1].start_offset == 5


def test_a_snapshot_every_n_updates_and_replay_gives_the_same_state():
    shard = ShareCoordinatorShard(records_per_snapshot=2)
    key = ("g", T, 1)
    kinds, log = [], []
    for i in range(6):
        records, code = _write(shard, key, 0, 0, i, [B(i, i, ACKNOWLEDGED, 1)])
        assert code == errors.NONE
        kinds.append(rec.key_version(records[0][0]))
        log.extend(records)
    S, U = rec.SNAPSHOT_KEY_VERSION, rec.UPDATE_KEY_VERSION
    assert kinds == [S, U, U, S, U, U]
    assert shard.states[key].snapshot_epoch == 1
    reloaded = ShareCoordinatorShard(records_per_snapshot=2)
    _apply(reloaded, log)
    assert reloaded.read_state(key, 0)[1] == shard.read_state(key, 0)[1]
    assert reloaded.read_state(key, 0)[1].state_batches == (B(5, 5, ACKNOWLEDGED, 1),)


def test_writes_and_reads_are_fenced_by_leader_and_state_epochs():
    shard = ShareCoordinatorShard()
    key = ("g", T, 0)
    assert shard.read_state(key, 0)[1].error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
    _apply(shard, shard.initialize_state(key, 2, 10)[0])
    assert _write(shard, key, 1, 0, -1)[1] == errors.FENCED_STATE_EPOCH
    assert _write(shard, key, 2, 3, -1)[1] == errors.NONE
    assert _write(shard, key, 2, 2, -1)[1] == errors.FENCED_LEADER_EPOCH
    assert shard.read_state(key, 2)[1].error_code == errors.FENCED_LEADER_EPOCH
    # a read by a newer leader records its epoch, so the older leader is fenced from then on
    records, result = shard.read_state(key, 7)
    assert result.error_code == errors.NONE and result.start_offset == 10 and result.state_epoch == 2
    assert len(records) == 1
    _apply(shard, records)
    assert _write(shard, key, 2, 5, -1)[1] == errors.FENCED_LEADER_EPOCH
    assert shard.initialize_state(key, 1, 0)[1] == errors.FENCED_STATE_EPOCH
    assert shard.read_summary(key) == (errors.NONE, 2, 10, None, 7, 0)  # leader epoch 7 read; nothing complete
    assert shard.write_state(("g", T, -1), 2, 9, 0, ())[1] == errors.INVALID_REQUEST


def test_initialize_resets_the_batches_and_delete_writes_tombstones():
    shard = ShareCoordinatorShard()
    key = ("g", T, 0)
    _write(shard, key, 0, 0, 0, [B(0, 4, ACKNOWLEDGED, 1)])
    _apply(shard, shard.initialize_state(key, 1, 3)[0])
    assert shard.read_state(key, 0)[1][:4] == (errors.NONE, 1, 3, ())
    records, code = shard.delete_state(key)
    assert code == errors.NONE and [v for _, v in records] == [None, None]
    _apply(shard, records)
    assert shard.read_state(key, 0)[1].error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
    assert shard.read_summary(key).error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
    assert shard.delete_state(key) == ([], errors.NONE)
    # after a delete the epochs are forgotten too: a new state can start from 0
    assert shard.initialize_state(key, 0, 0)[1] == errors.NONE


class _Logs(FakeLogManager):
    def get_log(self, topic, partition):
        assert topic == SHARE_GROUP_STATE_TOPIC_NAME
        return self.logs.get(partition)


CONFIG = {
    "share.coordinator.state.topic.num.partitions": 3,
    "share.coordinator.snapshot.update.records.per.snapshot": 2,
    "share.coordinator.write.timeout.ms": 5000,
    "share.coordinator.state.topic.prune.interval.ms": 300000,
}


def _coordinator(logs=None, exists=None):
    logs = logs or _Logs()
    rm = FakeReplicaManager(logs)
    scheduler = MockScheduler(MockTime())
    c = ShareCoordinator(1, rm, logs, CONFIG, MockTime(), scheduler, exists)
    return c, rm, logs, scheduler


def _sync(fn, *args):
    got = []
    fn(*args, got.append)
    assert len(got) == 1
    return got[0]


def _elect_all(c, scheduler, epoch=0):
    for p in range(3):
        c.on_election(p, epoch)
    scheduler.tick()


def test_coordinator_answers_after_writing_and_a_new_leader_reloads_the_same_state():
    c, _rm, logs, scheduler = _coordinator()
    assert _sync(c.write_state, "g", T, 0, 0, 0, 0, (B(0, 1, AVAILABLE, 1),)) == errors.NOT_COORDINATOR
    for p in range(3):
        c.on_election(p, 0)
    assert _sync(c.read_state, "g", T, 0, 0).error_code == errors.COORDINATOR_LOAD_IN_PROGRESS
    scheduler.tick()
    assert _sync(c.initialize_state, "g", T, 0, 0, 0) == errors.NONE
    for i in range(5):
        assert _sync(c.write_state, "g", T, 0, 0, 1, i, (B(i, i + 2, ACKNOWLEDGED, i + 1),)) == errors.NONE
    assert _sync(c.initialize_state, "g", T, 1, 0, -1) == errors.NONE
    before = _sync(c.read_state, "g", T, 0, 1)
    assert before.error_code == errors.NONE and before.start_offset == 4
    assert before.state_batches == (B(4, 6, ACKNOWLEDGED, 5),)
    assert logs.logs[c.partition_for("g", T, 0)].log_end_offset >= 6

    again, _, _, scheduler2 = _coordinator(logs)
    _elect_all(again, scheduler2, 1)
    assert _sync(again.read_state, "g", T, 0, 1) == before
    assert _sync(again.read_summary, "g", T, 1) == (errors.NONE, 0, -1, None, -1, -1)
    assert _sync(again.write_state, "g", T, 0, 0, 0, -1, ()) == errors.FENCED_LEADER_EPOCH
    assert _sync(again.delete_state, "g", T, 0) == errors.NONE
    assert _sync(again.read_state, "g", T, 0, 1).error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
    # resignation: NOT_COORDINATOR
    again.on_resignation(again.partition_for("g", T, 1), 2)
    assert _sync(again.read_summary, "g", T, 1).error_code == errors.NOT_COORDINATOR


@pytest.mark.parametrize(
    ("append_error", "answer"),
    [
        (errors.NOT_ENOUGH_REPLICAS, errors.COORDINATOR_NOT_AVAILABLE),
        (errors.REQUEST_TIMED_OUT, errors.COORDINATOR_NOT_AVAILABLE),
        (errors.NOT_LEADER_OR_FOLLOWER, errors.NOT_COORDINATOR),
    ],
)
def test_append_errors_are_answered_as_kafka_and_leave_the_state_unchanged(append_error, answer):
    c, rm, _, scheduler = _coordinator()
    _elect_all(c, scheduler)
    rm.errors.append(append_error)
    assert _sync(c.write_state, "g", T, 0, 0, 0, 0, (B(0, 1, AVAILABLE, 1),)) == answer
    assert _sync(c.read_state, "g", T, 0, 0).error_code == errors.UNKNOWN_TOPIC_OR_PARTITION


def test_operations_of_a_shard_run_one_at_a_time_and_queued_ones_fail_on_resignation():
    c, rm, _, scheduler = _coordinator()
    _elect_all(c, scheduler)
    rm.hold = True
    got: list = []
    c.write_state("g", T, 0, 0, 0, 0, (B(0, 1, AVAILABLE, 1),), got.append)
    c.write_state("g", T, 0, 0, 0, -1, (B(0, 0, ACKNOWLEDGED, 1),), got.append)
    assert got == [] and len(rm.held) == 1  # the second waits for the first
    rm.release()
    assert got == [errors.NONE, errors.NONE]
    assert _sync(c.read_state, "g", T, 0, 0).state_batches == (B(0, 0, ACKNOWLEDGED, 1), B(1, 1, AVAILABLE, 1))
    rm.hold = True
    c.write_state("g", T, 0, 0, 0, -1, (), got.append)
    c.write_state("g", T, 0, 0, 0, -1, (), got.append)
    c.on_resignation(c.partition_for("g", T, 0), 1)
    assert got[2:] == [errors.NOT_COORDINATOR]  # the queued one
    rm.release()
    assert got[2:] == [errors.NOT_COORDINATOR, errors.NOT_COORDINATOR]


def test_writes_and_reads_of_unknown_topic_partitions_are_refused():
    c, _, _, scheduler = _coordinator(exists=lambda tid, p: p == 0)
    _elect_all(c, scheduler)
    assert _sync(c.write_state, "g", T, 1, 0, 0, 0, ()) == errors.UNKNOWN_TOPIC_OR_PARTITION
    assert _sync(c.read_state, "g", T, 1, 0).error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
    assert _sync(c.write_state, "g", T, 0, 0, 0, 0, ()) == errors.NONE


def test_records_have_kafkas_byte_layout():
    """ShareSnapshotKey/Value and ShareUpdateKey/Value as Kafka's ShareCoordinatorRecordSerde writes them: key =
    int16 record type + group (int16 length) + topic id (16 bytes) + partition (int32); value = int16 version 0 +
    the flexible message (uint16 snapshot epoch, ..., a compact array of batches each with empty tagged fields)."""
    key = ("g1", T, 5)
    batch = B(3, 4, ACKNOWLEDGED, 2)
    k, v = rec.snapshot_record(key, rec.ShareGroupOffset(7, 1, 2, 3, (batch,)))
    assert k == b"\x00\x00" + b"\x00\x02g1" + T.bytes + b"\x00\x00\x00\x05"
    batch_bytes = (3).to_bytes(8, "big") + (4).to_bytes(8, "big") + b"\x02" + b"\x00\x02" + b"\x00"
    assert v == (
        b"\x00\x00"  # value version 0
        + b"\x00\x07"  # snapshot epoch (uint16)
        + (1).to_bytes(4, "big")  # state epoch
        + (2).to_bytes(4, "big")  # leader epoch
        + (3).to_bytes(8, "big")  # start offset
        + b"\x02"  # compact array of 1
        + batch_bytes
        + b"\x00"  # tagged fields
    )
    uk, uv = rec.update_record(key, 7, 2, -1, (batch,))
    assert uk == b"\x00\x01" + b"\x00\x02g1" + T.bytes + b"\x00\x00\x00\x05"
    assert uv == b"\x00\x00\x00\x07" + (2).to_bytes(4, "big") + b"\xff" * 8 + b"\x02" + batch_bytes + b"\x00"
    assert rec.decode_key(uk) == key and rec.decode_snapshot_value(v).state_batches == (batch,)
    assert [t[1] for t in rec.tombstones(key)] == [None, None]


def test_stale_leadership_changes_are_ignored():
    c, _, _, scheduler = _coordinator()
    _elect_all(c, scheduler, epoch=5)
    p = c.partition_for("g", T, 0)
    assert _sync(c.initialize_state, "g", T, 0, 0, 0) == errors.NONE
    c.on_resignation(p, 4)  # older than the election: ignored
    c.on_election(p, 3)
    scheduler.tick()
    assert _sync(c.read_summary, "g", T, 0).error_code == errors.NONE
    c.on_resignation(p, None)  # the partition is gone
    assert _sync(c.read_summary, "g", T, 0).error_code == errors.NOT_COORDINATOR


def test_delivery_complete_count_is_kept_by_the_records_kip_1226():
    """Initialize: 0 with a start offset, -1 without; a write's count (snapshot or update, tagged field 0 of both
    values) is replayed, a reader's epoch-only update keeps it, and a shard rebuilt from the records has it too."""
    shard = ShareCoordinatorShard(records_per_snapshot=2)
    key, fresh = ("g", T, 0), ("g", T, 1)
    log = []
    for records in (shard.initialize_state(key, 1, 0)[0], shard.initialize_state(fresh, 1, -1)[0]):
        _apply(shard, records)
        log += records
    assert shard.read_summary(key).delivery_complete_count == 0
    assert shard.read_summary(fresh).delivery_complete_count == -1
    for dcc in (2, 3, 4):  # the third write is a snapshot (2 records per snapshot)
        records, code = shard.write_state(key, 1, 0, -1, (B(5, 5 + dcc, ACKNOWLEDGED, 1),), dcc)
        assert code == errors.NONE
        _apply(shard, records)
        log += records
        assert shard.read_summary(key).delivery_complete_count == dcc
    records, _ = shard.read_state(key, 9)  # a newer leader's read: an update with its epoch only
    _apply(shard, records)
    log += records
    assert shard.read_summary(key)[4:] == (9, 4)
    again = ShareCoordinatorShard()
    _apply(again, log)
    assert again.read_summary(key) == shard.read_summary(key)
    assert again.read_summary(fresh).delivery_complete_count == -1


def test_last_redundant_offset_is_the_oldest_latest_snapshot_of_the_live_share_partitions():
    """Kafka's ShareCoordinatorOffsetsManager: records below every live key's latest snapshot are not needed; with no
    live key everything replayed is; a snapshot replayed without its offset keeps everything."""
    shard = ShareCoordinatorShard(records_per_snapshot=1)
    a, b = ("g", T, 0), ("g", T, 1)
    offset = 0

    def append(records):
        nonlocal offset
        for k, v in records:
            shard.replay(k, v, offset)
            offset += 1

    assert shard.last_redundant_offset() is None  # nothing replayed
    append(shard.initialize_state(a, 1, 0)[0])  # 0: a's snapshot
    append(shard.initialize_state(b, 1, 0)[0])  # 1: b's snapshot
    assert shard.last_redundant_offset() == 0
    append(shard.write_state(a, 1, 0, 0, (B(0, 1, ACKNOWLEDGED, 1),))[0])  # 2: a's update
    append(shard.write_state(a, 1, 0, -1, (B(2, 3, ACKNOWLEDGED, 1),))[0])  # 3: a's snapshot (1 update per snapshot)
    assert shard.last_redundant_offset() == 1  # b's snapshot at 1 is still needed
    append(shard.write_state(b, 1, 0, -1, ())[0])  # 4: b's update
    append(shard.write_state(b, 1, 0, -1, ())[0])  # 5: b's snapshot
    assert shard.last_redundant_offset() == 3
    append(shard.delete_state(a)[0])  # 6, 7: a's tombstones
    assert shard.last_redundant_offset() == 5
    append(shard.delete_state(b)[0])  # 8, 9
    assert shard.last_redundant_offset() == 10  # nothing live: every record replayed is redundant
    shard.replay(*rec.snapshot_record(a, rec.ShareGroupOffset(0, 1, 0, 0, ())))  # offset unknown
    assert shard.last_redundant_offset() is None
