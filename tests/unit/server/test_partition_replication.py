"""Partition replication state on a real UnifiedLog: the leader's view of its followers (Replica),
high watermark over the maximal ISR, ISR expand/shrink through AlterPartition, ISR eligibility by the
followers' broker epochs (KIP-903), no proposal while one is pending, min.insync.replicas, stale
registrations, and the follower side (append as follower, truncation)."""

from __future__ import annotations

import uuid

import pytest

from pykbroker.log.log_config import LogConfig
from pykbroker.log.unified_log import UnifiedLog
from pykbroker.metadata.partition_registration import PartitionRegistration
from pykbroker.protocol import errors
from pykbroker.server.alter_partition_manager import AlterPartitionManager
from pykbroker.server.partition import IsrChangeListener, Partition
from pykbroker.server.replica import Replica
from pykbroker.server.replica_fetcher_manager import fetcher_id, java_string_hash
from pykbroker.utils.scheduler import MockScheduler
from pykbroker.utils.time import MockTime
from tests.unit.log.log_test_utils import make_batch
from tests.unit.server.test_alter_partition_manager import FakeController, partition_ok

LAG_MS = 10_000
TOPIC_ID = uuid.uuid4()


class RecordingAlterPartitionManager:
    """Records submits as ``(new ISR ids, leader epoch, partition epoch, callback, broker epochs)``."""

    def __init__(self):
        self.submitted = []

    def submit(self, topic_id, partition, leader_epoch, new_isr_with_epochs, partition_epoch, callback):
        ids = tuple(b for b, _ in new_isr_with_epochs)
        self.submitted.append((ids, leader_epoch, partition_epoch, callback, dict(new_isr_with_epochs)))
        return True

    def is_pending(self, topic_id, partition):
        return bool(self.submitted)

    def answer(self, code=errors.NONE, isr=None, partition_epoch=None, leader_epoch=None):
        new_isr, le, pe, callback, _ = self.submitted.pop(0)
        result = None
        if code == errors.NONE:
            result = {
                "leader_id": 1,
                "leader_epoch": le if leader_epoch is None else leader_epoch,
                "isr": list(new_isr if isr is None else isr),
                "partition_epoch": pe + 1 if partition_epoch is None else partition_epoch,
            }
        callback(code, result)


class FakeMetadata:
    """The brokers' registrations as the leader's metadata cache sees them:
    ``{broker id: (broker epoch, fenced, in controlled shutdown)}`` (Kafka's KRaftMetadataCache calls)."""

    def __init__(self, brokers):
        self.brokers = dict(brokers)

    def is_broker_fenced(self, broker_id):
        b = self.brokers.get(broker_id)
        return b is not None and b[1]

    def is_broker_shutting_down(self, broker_id):
        b = self.brokers.get(broker_id)
        return b is not None and b[2]

    def get_alive_broker_epoch(self, broker_id):
        b = self.brokers.get(broker_id)
        return b[0] if b is not None and not b[1] else None


class CountingListener(IsrChangeListener):
    def __init__(self):
        self.counts = {"expand": 0, "shrink": 0, "failed": 0}

    def mark_expand(self):
        self.counts["expand"] += 1

    def mark_shrink(self):
        self.counts["shrink"] += 1

    def mark_failed(self):
        self.counts["failed"] += 1


@pytest.fixture
def time():
    return MockTime(current_ms=1_000_000)


def make_partition(tmp_path, time, min_isr=1, metadata=None, apm=None):
    config = LogConfig({"min.insync.replicas": min_isr, "file.delete.delay.ms": 0})
    log = UnifiedLog.create(str(tmp_path / "t-0"), config, None, time)
    apm = apm if apm is not None else RecordingAlterPartitionManager()
    listener = CountingListener()
    p = Partition("t", 0, TOPIC_ID, log, 1, time, LAG_MS, apm, metadata, listener, lambda: 11)
    hw_moves = []
    p.on_high_watermark_increment = lambda: hw_moves.append(p.log.high_watermark)
    return p, apm, listener, hw_moves


def reg(isr, leader=1, leader_epoch=0, partition_epoch=0, replicas=(1, 2, 3)):
    return PartitionRegistration(
        replicas=tuple(replicas),
        isr=tuple(isr),
        leader=leader,
        leader_epoch=leader_epoch,
        partition_epoch=partition_epoch,
    )


def append(p, count=2, acks=-1):
    info, _ = p.append_records_to_leader(memoryview(make_batch(0, count, 10)), acks)
    return info


def fetch(p, replica, offset, time, broker_epoch=-1):
    return p.update_follower_fetch_state(replica, offset, 0, time.milliseconds(), p.log.log_end_offset, broker_epoch)


def test_high_watermark_waits_for_every_isr_member(tmp_path, time):
    p, apm, _, _ = make_partition(tmp_path, time)
    assert p.make_leader(reg((1, 2, 3)))
    append(p)
    assert p.log.log_end_offset == 2 and p.log.high_watermark == 0
    assert p.check_enough_replicas_reach_offset(2) == (False, errors.NONE)
    assert not fetch(p, 2, 2, time)  # replica 3's LEO is still unknown
    assert p.log.high_watermark == 0
    assert fetch(p, 3, 1, time)  # the smallest LEO of the ISR
    assert p.log.high_watermark == 1
    assert fetch(p, 3, 2, time)
    assert p.log.high_watermark == 2
    assert p.check_enough_replicas_reach_offset(2) == (True, errors.NONE)
    assert apm.submitted == []  # nothing to change in the ISR


def test_lagging_follower_is_shrunk_out_and_the_high_watermark_moves_on_commit(tmp_path, time):
    p, apm, listener, hw_moves = make_partition(tmp_path, time)
    p.make_leader(reg((1, 2, 3)))
    append(p)
    fetch(p, 2, 2, time)
    time.sleep(LAG_MS // 2)
    assert not p.maybe_shrink_isr()  # within replica.lag.time.max.ms
    time.sleep(LAG_MS)
    fetch(p, 2, 2, time)  # replica 2 keeps fetching at the LEO: caught up
    assert p.maybe_shrink_isr()
    assert [s[0] for s in apm.submitted] == [(1, 2)]
    assert not p.maybe_shrink_isr()  # one change in flight at a time
    # Until the controller commits, the removed replica still holds the HW (the maximal ISR).
    assert p.log.high_watermark == 0 and p.isr == (1, 2, 3)
    apm.answer()
    assert p.isr == (1, 2) and p.partition_epoch == 1 and p.pending_isr_change is None
    assert p.log.high_watermark == 2 and hw_moves == [2]
    assert listener.counts == {"expand": 0, "shrink": 1, "failed": 0}


def test_caught_up_follower_joins_the_isr(tmp_path, time):
    p, apm, listener, _ = make_partition(tmp_path, time)
    p.make_leader(reg((1, 2), partition_epoch=3))
    append(p)
    fetch(p, 2, 2, time)
    assert p.log.high_watermark == 2
    fetch(p, 3, 1, time)  # below the HW: not in sync yet
    assert apm.submitted == []
    fetch(p, 3, 2, time)
    assert [(s[0], s[2]) for s in apm.submitted] == [((1, 2, 3), 3)]
    assert p.maximal_isr == (1, 2, 3) and p.isr == (1, 2)
    apm.answer()
    assert p.isr == (1, 2, 3) and p.partition_epoch == 4
    assert listener.counts["expand"] == 1


def test_ineligible_replica_does_not_join_and_rejected_expansion_reverts(tmp_path, time):
    metadata = FakeMetadata({1: (11, False, False), 2: (12, False, False), 3: (13, True, False)})
    p, apm, listener, _ = make_partition(tmp_path, time, metadata=metadata)
    p.make_leader(reg((1, 2)))
    append(p)
    fetch(p, 2, 2, time, 12)
    fetch(p, 3, 2, time, 13)
    assert apm.submitted == []  # fenced: Kafka's isReplicaIsrEligible
    metadata.brokers[3] = (13, False, True)
    fetch(p, 3, 2, time, 13)
    assert apm.submitted == []  # in controlled shutdown
    metadata.brokers[3] = (13, False, False)
    fetch(p, 3, 2, time, 13)
    assert apm.submitted[0][4] == {1: 11, 2: 12, 3: 13}
    apm.answer(errors.INELIGIBLE_REPLICA)
    assert p.isr == p.maximal_isr == (1, 2) and p.pending_isr_change is None
    assert listener.counts["failed"] == 1


def test_follower_joins_the_isr_only_under_its_registered_broker_epoch(tmp_path, time):
    # Broker 3 restarted: its new incarnation (epoch 14) fetches while this leader's metadata still has
    # the previous registration (13, not fenced), then the new one (fenced until it has caught up).
    metadata = FakeMetadata({1: (11, False, False), 2: (12, False, False), 3: (13, False, False)})
    p, apm, _, _ = make_partition(tmp_path, time, metadata=metadata)
    p.make_leader(reg((1, 2)))
    append(p)
    fetch(p, 2, 2, time, 12)
    assert p.log.high_watermark == 2
    fetch(p, 3, 2, time, 14)
    assert apm.submitted == []  # the predecessor's registration does not make the new incarnation eligible
    metadata.brokers[3] = (14, True, False)
    fetch(p, 3, 2, time, 14)
    assert apm.submitted == []  # registered, but fenced
    del metadata.brokers[3]
    fetch(p, 3, 2, time, 14)
    assert apm.submitted == []  # not registered at all
    metadata.brokers[3] = (14, False, False)
    fetch(p, 3, 2, time, 14)
    # The AlterPartition names each member with the epoch of its Fetch (the leader: its own).
    assert [(s[0], s[4]) for s in apm.submitted] == [((1, 2, 3), {1: 11, 2: 12, 3: 14})]


def test_fetch_with_a_stale_broker_epoch_is_refused(tmp_path, time):
    metadata = FakeMetadata({1: (11, False, False), 2: (12, False, False), 3: (14, False, False)})
    p, apm, _, _ = make_partition(tmp_path, time, metadata=metadata)
    p.make_leader(reg((1, 2)))
    append(p)
    fetch(p, 2, 2, time, 12)
    with pytest.raises(errors.NotLeaderOrFollowerError):
        fetch(p, 3, 2, time, 13)  # a previous incarnation's Fetch (Kafka's updateFetchStateOrThrow)
    assert p.remote_replicas[3].log_end_offset == -1 and p.remote_replicas[3].broker_epoch is None
    assert apm.submitted == []
    metadata.brokers[3] = (14, True, False)
    fetch(p, 3, 2, time, 13)  # no live registration to compare with: recorded, but not eligible
    assert p.remote_replicas[3].log_end_offset == 2 and apm.submitted == []
    metadata.brokers[3] = (14, False, False)
    fetch(p, 3, 2, time)  # a Fetch without an epoch (-1) skips the epoch checks, as in Kafka
    assert [(s[0], s[4]) for s in apm.submitted] == [((1, 2, 3), {1: 11, 2: 12, 3: -1})]


class CountingAlterPartitionManager(AlterPartitionManager):
    def __init__(self, *args):
        super().__init__(*args)
        self.submits = 0

    def submit(self, *args):
        self.submits += 1
        return super().submit(*args)


def test_no_isr_change_is_proposed_while_the_manager_still_holds_one(tmp_path, time):
    controller = FakeController()
    apm = CountingAlterPartitionManager(1, lambda: controller, lambda: 11, MockScheduler(time))
    p, _, listener, _ = make_partition(tmp_path, time, apm=apm)
    p.make_leader(reg((1, 2, 3)))
    append(p)
    fetch(p, 2, 2, time)
    fetch(p, 3, 2, time)
    append(p)
    time.sleep(LAG_MS + 1)
    fetch(p, 2, 4, time)  # replica 3 lags
    assert p.maybe_shrink_isr()
    assert apm.submits == 1 and len(controller.requests) == 1
    # The controller committed the shrink; its record reaches this leader before the answer does.
    p.make_leader(reg((1, 2), partition_epoch=1))
    assert p.pending_isr_change is None and p.log.high_watermark == 4
    for _ in range(5):
        fetch(p, 3, 4, time)  # replica 3 is back at the HW, but the shrink is still in flight
    assert not p.maybe_shrink_isr()
    assert apm.submits == 1 and listener.counts["failed"] == 0 and p.maximal_isr == (1, 2)
    controller.requests[0][1].set_result(
        {"error_code": 0, "topics": [{"topic_id": TOPIC_ID, "partitions": [partition_ok(0, [1, 2], 1)]}]}
    )
    fetch(p, 3, 4, time)
    assert apm.submits == 2 and len(controller.requests) == 2
    part = controller.requests[1][0]["topics"][0]["partitions"][0]
    assert (part["new_isr"], part["partition_epoch"]) == ([1, 2, 3], 1)


def test_fenced_alter_partition_waits_for_the_metadata_log(tmp_path, time):
    p, apm, _, _ = make_partition(tmp_path, time)
    p.make_leader(reg((1, 2)))
    append(p)
    fetch(p, 2, 2, time)
    fetch(p, 3, 2, time)
    apm.answer(errors.FENCED_LEADER_EPOCH)
    assert p.pending_isr_change is not None  # no new change until the metadata log moves the partition
    fetch(p, 3, 2, time)
    assert apm.submitted == []
    p.make_leader(reg((1, 2, 3), leader_epoch=0, partition_epoch=1))
    assert p.pending_isr_change is None and p.isr == (1, 2, 3)


def test_min_insync_replicas(tmp_path, time):
    p, apm, _, _ = make_partition(tmp_path, time, min_isr=2)
    p.make_leader(reg((1,)))
    with pytest.raises(errors.NotEnoughReplicasError):
        append(p, acks=-1)
    append(p, acks=1)  # acks=1 ignores min.insync.replicas
    assert p.log.log_end_offset == 2
    p.make_leader(reg((1, 2), partition_epoch=1))
    append(p, acks=-1)
    fetch(p, 2, 4, time)
    assert p.log.high_watermark == 4
    time.sleep(LAG_MS + 1)
    assert not p.maybe_shrink_isr()  # a follower at the leader's LEO stays in sync (Kafka's isCaughtUp)
    append(p, acks=-1)  # offsets 4-5: replica 2 no longer fetches
    time.sleep(LAG_MS + 1)
    assert p.maybe_shrink_isr()
    apm.answer()
    assert p.log.high_watermark == 6
    assert p.check_enough_replicas_reach_offset(6) == (True, errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


def test_stale_registration_and_stale_answer_are_ignored(tmp_path, time):
    p, apm, _, _ = make_partition(tmp_path, time)
    p.make_leader(reg((1, 2, 3), partition_epoch=5))
    assert not p.make_leader(reg((1, 2), partition_epoch=4))
    assert p.isr == (1, 2, 3)
    time.sleep(LAG_MS + 1)
    p.maybe_shrink_isr()
    apm.answer(partition_epoch=4)  # older than what the partition knows
    assert p.isr == (1, 2, 3)


def test_new_leader_epoch_starts_at_leo_and_resets_followers(tmp_path, time):
    p, _, _, _ = make_partition(tmp_path, time)
    p.make_leader(reg((1, 2, 3)))
    append(p)
    fetch(p, 2, 2, time)
    fetch(p, 3, 2, time)
    assert p.make_follower(reg((1, 2, 3), leader=2, leader_epoch=1, partition_epoch=1))
    assert not p.is_leader and p.remote_replicas == {}
    with pytest.raises(errors.NotLeaderOrFollowerError):
        fetch(p, 3, 2, time)
    assert p.make_leader(reg((1, 2, 3), leader_epoch=2, partition_epoch=2))
    assert p.leader_epoch_start_offset == 2
    assert p.log.end_offset_for_epoch(2) == (2, 2)
    assert all(r.log_end_offset == -1 for r in p.remote_replicas.values())
    with pytest.raises(errors.NotLeaderOrFollowerError):
        fetch(p, 7, 0, time)  # not an assigned replica


def test_follower_appends_leader_batches_and_truncates(tmp_path, time):
    p, _, _, _ = make_partition(tmp_path, time)
    p.make_follower(reg((1, 2), leader=2, leader_epoch=3))
    batches = make_batch(0, 2, 10, leader_epoch=3) + make_batch(2, 3, 10, leader_epoch=3)
    p.append_records_as_follower(memoryview(batches), leader_high_watermark=4, leader_log_start_offset=0)
    assert p.log.log_end_offset == 5 and p.log.high_watermark == 4
    assert p.log.latest_epoch == 3
    assert p.truncate_to(2)
    assert p.log.log_end_offset == 2 and p.log.high_watermark == 2


def test_replica_caught_up_time_follows_kafka_rules():
    r = Replica(2)
    r.update_fetch_state(fetch_offset=5, log_start_offset=0, fetch_time_ms=100, leader_end_offset=10)
    assert r.last_caught_up_time_ms == 0  # behind the leader, and no earlier fetch
    r.update_fetch_state(fetch_offset=10, log_start_offset=0, fetch_time_ms=200, leader_end_offset=15)
    assert r.last_caught_up_time_ms == 100  # it has what the leader had at the previous fetch
    r.update_fetch_state(fetch_offset=15, log_start_offset=0, fetch_time_ms=300, leader_end_offset=15)
    assert r.last_caught_up_time_ms == 300
    assert r.is_caught_up(20, 300 + LAG_MS, LAG_MS) and not r.is_caught_up(20, 301 + LAG_MS, LAG_MS)


def test_fetcher_id_uses_java_string_hash():
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0
    assert {fetcher_id("topic", p, 3) for p in range(30)} == {0, 1, 2}
    assert fetcher_id("t", 0, 1) == 0


def test_replica_keeps_its_broker_epoch_across_a_new_epoch_of_the_same_leader():
    r = Replica(2)
    r.update_fetch_state(fetch_offset=5, log_start_offset=0, fetch_time_ms=100, leader_end_offset=5, broker_epoch=7)
    r.reset(200, 5, in_sync=True, new_leader=False)
    assert r.broker_epoch == 7  # Kafka's resetReplicaState(isNewLeader = false)
    r.reset(300, 5, in_sync=True, new_leader=True)
    assert r.broker_epoch is None  # unknown until the follower fetches from the new leader


def test_a_reassignment_in_progress_counts_as_reassigning_and_its_removing_replicas_not_as_under_replicated(
    tmp_path, time
):
    """Kafka's Partition.isReassigning and assignmentState.replicationFactor (the ReassigningPartitions and
    UnderReplicatedPartitions gauges): replicas 4,1,2,3 adding 4 removing 3 with ISR 1,2,3 are not under-replicated
    (3 of the target's 3), the new replica joining the ISR does not change that, and the follower side is not
    reassigning (only leaders count)."""
    p, *_ = make_partition(tmp_path, time)
    p.make_leader(reg([1, 2, 3]))
    assert not p.is_reassigning and not p.is_under_replicated
    moving = PartitionRegistration(
        replicas=(4, 1, 2, 3), isr=(1, 2, 3), leader=1, partition_epoch=1, adding_replicas=(4,), removing_replicas=(3,)
    )
    p.make_leader(moving)
    assert p.is_reassigning and not p.is_under_replicated
    assert set(p.remote_replicas) == {2, 3, 4}  # the new replica is tracked for the ISR expansion
    p.make_leader(PartitionRegistration(replicas=(4, 1, 2), isr=(1, 2), leader=1, leader_epoch=1, partition_epoch=2))
    assert not p.is_reassigning and p.is_under_replicated
    p.make_follower(PartitionRegistration(replicas=(4, 1, 2), isr=(4, 2), leader=4, leader_epoch=2, partition_epoch=3,
                                          adding_replicas=(9,)))  # fmt: skip
    assert not p.is_reassigning


def test_sole_replica_leader_moves_the_hw_as_the_general_computation(tmp_path, time):
    # a leader without followers moves the HW to its LEO directly (UnifiedLog.maybe_increment_high_watermark_to_end);
    # the other partition takes Partition._maybe_increment_leader_hw_locked for the same appends
    fast, _, _, fast_moves = make_partition(tmp_path / "fast", time)
    general, _, _, general_moves = make_partition(tmp_path / "general", time)
    general.log.maybe_increment_high_watermark_to_end = general._maybe_increment_leader_hw_locked
    results = {}
    for p in (fast, general):
        assert p.make_leader(reg((1,), replicas=(1,)))
        assert not p.remote_replicas
        appends = [make_batch(0, 2, 10), make_batch(0, 3, 10, producer_id=5, producer_epoch=0, base_sequence=0)]
        appends.append(appends[-1])  # a duplicate: nothing written, the HW does not move
        appends.append(make_batch(0, 1, 10))
        results[p] = [
            (p.append_records_to_leader(memoryview(bytearray(b)), -1), p.log.high_watermark, p.log.log_end_offset)
            for b in appends
        ] + [p.log._high_watermark_metadata, p.check_enough_replicas_reach_offset(p.log.log_end_offset)]
    assert results[fast] == results[general]
    assert [hw_incremented for (_, hw_incremented), _, _ in results[fast][:4]] == [True, True, False, True]
    assert fast.log.high_watermark == fast.log.log_end_offset == 6
    assert fast_moves == general_moves
