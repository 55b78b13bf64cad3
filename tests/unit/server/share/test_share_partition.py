"""SharePartition's state machine (KIP-932, Kafka's SharePartitionTest): acquisition of whole batches, acknowledge
types, release and redelivery with the delivery count + 1, acquisition lock expiry, the delivery count limit,
read_committed (aborted and control batches archived), the in-flight limit, persisted state and fencing."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import Future

from pykbroker.coordinator.share.persister import InMemoryPersister, PersisterStateBatch
from pykbroker.log.transaction_index import AbortedTxn
from pykbroker.protocol import errors
from pykbroker.server.share.share_partition import (
    ACCEPT,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    REJECT,
    RELEASE,
    AckBatch,
    AcquiredRange,
    FetchedBatch,
    SharePartition,
    SharePartitionConfig,
)
from pykbroker.utils.time import MockTime
from pykbroker.utils.timer import Timer

TOPIC_ID = uuid.UUID(int=7)


def make(start=0, persister=None, leader_epoch=0, **cfg):
    time = MockTime()
    timer = Timer("locks", time)
    persister = persister or InMemoryPersister()
    sp = SharePartition(
        "g", "t", TOPIC_ID, 0, leader_epoch, SharePartitionConfig(**cfg), persister, timer, on_available=None
    )
    assert sp.maybe_initialize(lambda: start).result() == errors.NONE
    return sp, time, timer, persister


def expire(time, timer, ms):
    time.sleep(ms)
    timer.advance_clock(0)


def test_acquire_whole_batches_and_accept_moves_start_offset():
    sp, *_ = make()
    got = sp.acquire("m1", [FetchedBatch(0, 4), FetchedBatch(5, 9)], max_records=500)
    assert got == [AcquiredRange(0, 9, 1)]
    assert (sp.start_offset, sp.end_offset) == (0, 10)
    assert sp.acknowledge("m1", [AckBatch(0, 9, [ACCEPT])]).result() == errors.NONE
    assert (sp.start_offset, sp.end_offset) == (10, 10)
    assert sp.snapshot() == []


def test_max_records_stops_at_a_batch_boundary():
    sp, *_ = make()
    got = sp.acquire("m1", [FetchedBatch(0, 4), FetchedBatch(5, 9)], max_records=3)
    assert got == [AcquiredRange(0, 4, 1)]
    assert sp.end_offset == 5
    assert sp.next_fetch_offset() == 5


def test_acquired_records_are_not_acquired_by_another_member():
    sp, *_ = make()
    sp.acquire("m1", [FetchedBatch(0, 4)], 500)
    assert sp.acquire("m2", [FetchedBatch(0, 4)], 500) == []
    assert sp.acquire("m2", [FetchedBatch(0, 4), FetchedBatch(5, 6)], 500) == [AcquiredRange(5, 6, 1)]


def test_release_redelivers_with_delivery_count_plus_one():
    sp, *_ = make()
    sp.acquire("m1", [FetchedBatch(0, 4)], 500)
    assert sp.acknowledge("m1", [AckBatch(0, 4, [ACCEPT, RELEASE, ACCEPT, ACCEPT, ACCEPT])]).result() == errors.NONE
    assert sp.start_offset == 1 and sp.next_fetch_offset() == 1
    assert sp.acquire("m2", [FetchedBatch(0, 4)], 500) == [AcquiredRange(1, 1, 2)]
    assert sp.acknowledge("m2", [AckBatch(1, 1, [ACCEPT])]).result() == errors.NONE
    assert (sp.start_offset, sp.end_offset, sp.snapshot()) == (5, 5, [])


def test_reject_and_gap_archive():
    sp, *_ = make()
    sp.acquire("m1", [FetchedBatch(0, 3)], 500)
    assert sp.acknowledge("m1", [AckBatch(0, 3, [REJECT, GAP, ACCEPT, RELEASE])]).result() == errors.NONE
    assert sp.snapshot() == [(3, 3, AVAILABLE, 1, None)]
    assert sp.start_offset == 3


def test_acknowledging_records_not_held_is_invalid_record_state_and_changes_nothing():
    sp, *_ = make()
    sp.acquire("m1", [FetchedBatch(0, 4)], 500)
    before = sp.snapshot()
    assert sp.acknowledge("m2", [AckBatch(0, 4, [ACCEPT])]).result() == errors.INVALID_RECORD_STATE
    assert sp.acknowledge("m1", [AckBatch(3, 7, [ACCEPT])]).result() == errors.INVALID_RECORD_STATE
    assert sp.acknowledge("m1", [AckBatch(0, 1, [ACCEPT]), AckBatch(9, 9, [ACCEPT])]).result() == (
        errors.INVALID_RECORD_STATE
    )
    assert sp.snapshot() == before
    assert sp.acknowledge("m1", [AckBatch(0, 4, [ACCEPT])]).result() == errors.NONE
    assert sp.acknowledge("m1", [AckBatch(0, 4, [ACCEPT])]).result() == errors.INVALID_RECORD_STATE


def test_bad_acknowledge_types_are_invalid_request():
    sp, *_ = make()
    sp.acquire("m1", [FetchedBatch(0, 4)], 500)
    assert sp.acknowledge("m1", [AckBatch(0, 4, [ACCEPT, ACCEPT])]).result() == errors.INVALID_REQUEST
    assert sp.acknowledge("m1", [AckBatch(0, 4, [9])]).result() == errors.INVALID_REQUEST
    assert sp.acknowledge("m1", [AckBatch(4, 0, [ACCEPT])]).result() == errors.INVALID_REQUEST


def test_lock_expiry_makes_records_available_again():
    sp, time, timer, _ = make(record_lock_duration_ms=1000)
    sp.acquire("m1", [FetchedBatch(0, 4)], 500)
    expire(time, timer, 999)
    assert sp.snapshot() == [(0, 4, ACQUIRED, 1, "m1")]
    expire(time, timer, 1)
    assert sp.snapshot() == [(0, 4, AVAILABLE, 1, None)]
    # the dead member's late acknowledgement is refused; another member gets the records with count 2
    assert sp.acknowledge("m1", [AckBatch(0, 4, [ACCEPT])]).result() == errors.INVALID_RECORD_STATE
    assert sp.acquire("m2", [FetchedBatch(0, 4)], 500) == [AcquiredRange(0, 4, 2)]


def test_lock_expiry_only_touches_records_still_acquired():
    sp, time, timer, _ = make(record_lock_duration_ms=1000)
    sp.acquire("m1", [FetchedBatch(0, 4)], 500)
    sp.acknowledge("m1", [AckBatch(0, 1, [ACCEPT])])
    expire(time, timer, 1000)
    assert sp.start_offset == 2
    assert sp.snapshot() == [(2, 4, AVAILABLE, 1, None)]


def test_delivery_count_limit_archives():
    sp, time, timer, _ = make(delivery_count_limit=2, record_lock_duration_ms=1000)
    assert sp.acquire("m1", [FetchedBatch(0, 0)], 500) == [AcquiredRange(0, 0, 1)]
    sp.acknowledge("m1", [AckBatch(0, 0, [RELEASE])])
    assert sp.acquire("m1", [FetchedBatch(0, 0)], 500) == [AcquiredRange(0, 0, 2)]
    expire(time, timer, 1000)  # the second delivery's lock expires: the limit is reached
    assert sp.snapshot() == []
    assert sp.start_offset == 1
    assert sp.acquire("m1", [FetchedBatch(0, 0)], 500) == []


def test_read_committed_archives_aborted_and_control_batches():
    sp, *_ = make(read_committed=True)
    batches = [
        FetchedBatch(0, 1, producer_id=5, is_transactional=True),  # aborted
        FetchedBatch(2, 2, producer_id=5, is_transactional=True, is_control=True),  # its abort marker
        FetchedBatch(3, 4, producer_id=6, is_transactional=True),  # committed
        FetchedBatch(5, 5, producer_id=6, is_transactional=True, is_control=True),  # commit marker
        FetchedBatch(6, 7),
    ]
    got = sp.acquire("m1", batches, 500, aborted=[AbortedTxn(5, 0, 2, 0)])
    assert got == [AcquiredRange(3, 4, 1), AcquiredRange(6, 7, 1)]
    assert sp.start_offset == 3
    assert sp.snapshot() == [(3, 4, ACQUIRED, 1, "m1"), (5, 5, ARCHIVED, 0, None), (6, 7, ACQUIRED, 1, "m1")]


def test_read_uncommitted_delivers_aborted_batches_but_not_control_batches():
    sp, *_ = make()
    batches = [FetchedBatch(0, 1, producer_id=5, is_transactional=True), FetchedBatch(2, 2, 5, True, True)]
    assert sp.acquire("m1", batches, 500, aborted=[AbortedTxn(5, 0, 2, 0)]) == [AcquiredRange(0, 1, 1)]


def test_max_in_flight_limits_new_records():
    sp, *_ = make(max_in_flight=100)
    assert sp.acquire("m1", [FetchedBatch(0, 99), FetchedBatch(100, 104)], 1000) == [AcquiredRange(0, 99, 1)]
    assert not sp.can_acquire(log_end=105)
    sp.acknowledge("m1", [AckBatch(0, 9, [ACCEPT])])
    assert sp.can_acquire(log_end=105)
    assert sp.acquire("m1", [FetchedBatch(100, 104)], 1000) == [AcquiredRange(100, 104, 1)]


def test_gap_in_the_log_is_archived():
    sp, *_ = make()
    assert sp.acquire("m1", [FetchedBatch(0, 1), FetchedBatch(5, 6)], 500) == [
        AcquiredRange(0, 1, 1),
        AcquiredRange(5, 6, 1),
    ]
    sp.acknowledge("m1", [AckBatch(0, 1, [ACCEPT])])
    assert sp.start_offset == 5


def test_release_member_releases_only_its_records():
    sp, *_ = make()
    sp.acquire("m1", [FetchedBatch(0, 1)], 500)
    sp.acquire("m2", [FetchedBatch(2, 3)], 500)
    sp.release_member("m1").result()
    assert sp.snapshot() == [(0, 1, AVAILABLE, 1, None), (2, 3, ACQUIRED, 1, "m2")]


def test_state_is_persisted_and_loaded_by_a_new_leader():
    persister = InMemoryPersister()
    sp, *_ = make(persister=persister, leader_epoch=0)
    sp.acquire("m1", [FetchedBatch(0, 9)], 500)
    sp.acknowledge("m1", [AckBatch(0, 9, [ACCEPT, ACCEPT, REJECT, ACCEPT, RELEASE] + [ACCEPT] * 5)]).result()
    sp.acquire("m1", [FetchedBatch(10, 11)], 500)  # in flight at the leader change, never written (as Kafka)
    new, *_ = make(persister=persister, leader_epoch=1, start=99)
    assert (new.start_offset, new.end_offset) == (4, 10)
    assert new.snapshot() == [(4, 4, AVAILABLE, 1, None), (5, 9, ACKNOWLEDGED, 1, None)]
    assert new.acquire("m2", [FetchedBatch(0, 11)], 500) == [AcquiredRange(4, 4, 2), AcquiredRange(10, 11, 1)]
    # the old leader's writes are fenced from now on
    assert sp.acknowledge("m1", [AckBatch(10, 11, [ACCEPT])]).result() == errors.FENCED_LEADER_EPOCH
    assert sp.fenced


def test_auto_offset_reset_start_when_no_state():
    sp, *_ = make(start=42)
    assert (sp.start_offset, sp.end_offset) == (42, 42)
    assert sp.acquire("m1", [FetchedBatch(40, 44)], 500) == [AcquiredRange(42, 44, 1)]


def test_log_start_moving_past_the_start_offset_archives_below_it():
    sp, *_ = make()
    sp.acquire("m1", [FetchedBatch(0, 9)], 500)
    sp.update_log_start(5)
    assert sp.start_offset == 5
    assert sp.snapshot() == [(5, 9, ACQUIRED, 1, "m1")]


class CountingPersister(InMemoryPersister):
    def __init__(self):
        super().__init__()
        self.writes = 0

    def write_state(self, *args):
        self.writes += 1
        return super().write_state(*args)


def test_acquisition_is_not_written_acknowledgement_is():
    persister = CountingPersister()
    sp, *_ = make(persister=persister)
    before = persister.writes
    assert sp.acquire("m1", [FetchedBatch(0, 4), FetchedBatch(5, 9)], 500) == [AcquiredRange(0, 9, 1)]
    assert persister.writes == before  # Kafka's SharePartition.acquire writes nothing
    assert sp.acknowledge("m1", [AckBatch(0, 9, [ACCEPT])]).result() == errors.NONE
    assert persister.writes == before + 1
    assert persister.read_state("g", TOPIC_ID, 0, 0).result().start_offset == 10


def test_persisted_batches_keep_delivery_counts():
    persister = InMemoryPersister()
    persister.write_state("g", TOPIC_ID, 0, 0, 0, 3, (PersisterStateBatch(3, 5, AVAILABLE, 3),))
    sp, *_ = make(persister=persister, leader_epoch=1)
    assert sp.acquire("m", [FetchedBatch(3, 5)], 500) == [AcquiredRange(3, 5, 4)]


def test_fresh_start_offset_is_persisted_for_the_next_leader():
    persister = InMemoryPersister()
    make(persister=persister, start=42)
    assert persister.read_state("g", TOPIC_ID, 0, 0).result().start_offset == 42
    new, *_ = make(persister=persister, leader_epoch=1, start=99)  # the new leader's reset would pick 99
    assert (new.start_offset, new.end_offset) == (42, 42)


def test_initialization_failure_is_an_error_not_a_hang():
    sp = SharePartition(
        "g", "t", TOPIC_ID, 0, 0, SharePartitionConfig(), InMemoryPersister(), Timer("locks", MockTime())
    )

    def moved() -> int:
        raise errors.NotLeaderOrFollowerError("moved")

    assert sp.maybe_initialize(moved).result(timeout=5) == errors.NOT_LEADER_OR_FOLLOWER
    assert not sp.initialized
    assert sp.maybe_initialize(lambda: 3).result(timeout=5) == errors.NONE  # the next request tries again
    assert sp.start_offset == 3


class FailingPersister(InMemoryPersister):
    """Answers write_state with ``fail_with`` while it is set (an unavailable share coordinator)."""

    def __init__(self):
        super().__init__()
        self.fail_with = errors.NONE

    def write_state(self, *args):
        if self.fail_with != errors.NONE:
            f = Future()
            f.set_result(self.fail_with)
            return f
        return super().write_state(*args)


class GatedPersister(FailingPersister):
    """Holds the next write_state call until ``gate`` is set (a slow share coordinator); once released, the write
    fails with ``fail_with`` if that was set meanwhile."""

    def __init__(self):
        super().__init__()
        self.hold_next = False
        self.entered = threading.Event()
        self.gate = threading.Event()

    def write_state(self, *args):
        if self.hold_next:
            self.hold_next = False
            self.entered.set()
            self.gate.wait(5)
        return super().write_state(*args)


def test_concurrent_writes_reach_the_persister_in_snapshot_order():
    persister = GatedPersister()
    sp, *_ = make(persister=persister)
    sp.acquire("m1", [FetchedBatch(0, 9)], 500)
    persister.hold_next = True
    first = threading.Thread(target=lambda: sp.acknowledge("m1", [AckBatch(0, 4, [ACCEPT])]))  # SPSO 5
    first.start()
    assert persister.entered.wait(5)
    second = threading.Thread(target=lambda: sp.acknowledge("m1", [AckBatch(5, 9, [ACCEPT])]))  # SPSO 10
    second.start()
    second.join(0.3)  # it waits for the first write, or (the bug) writes SPSO 10 before it
    persister.gate.set()
    first.join(5)
    second.join(5)
    assert persister.read_state("g", TOPIC_ID, 0, 0).result().start_offset == 10


def test_failed_state_write_rolls_the_acknowledgement_back():
    persister = FailingPersister()
    sp, *_ = make(persister=persister)
    sp.acquire("m1", [FetchedBatch(0, 9)], 500)
    persister.fail_with = errors.COORDINATOR_NOT_AVAILABLE
    acks = [AckBatch(0, 3, [ACCEPT]), AckBatch(4, 5, [RELEASE]), AckBatch(6, 6, [REJECT])]
    assert sp.acknowledge("m1", acks).result() == errors.COORDINATOR_NOT_AVAILABLE
    assert sp.start_offset == 0
    assert {(state, count, member) for _, _, state, count, member in sp.snapshot()} == {(ACQUIRED, 1, "m1")}
    assert [(first, last) for first, last, *_ in sp.snapshot()] == [(0, 3), (4, 5), (6, 6), (7, 9)]
    assert sp.acquire("m2", [FetchedBatch(0, 9)], 500) == []  # nothing was released
    assert persister.read_state("g", TOPIC_ID, 0, 0).result().start_offset == 0
    persister.fail_with = errors.NONE  # the member retries: now it is applied
    assert sp.acknowledge("m1", acks).result() == errors.NONE
    assert sp.start_offset == 4
    assert sp.snapshot() == [(4, 5, AVAILABLE, 1, None), (6, 6, ARCHIVED, 1, None), (7, 9, ACQUIRED, 1, "m1")]


def test_pending_release_is_not_acquired_and_rollback_after_lock_expiry_releases():
    persister = GatedPersister()
    sp, time, timer, _ = make(persister=persister, record_lock_duration_ms=1000)
    sp.acquire("m1", [FetchedBatch(0, 4)], 500)
    persister.hold_next = True
    done = []
    t = threading.Thread(target=lambda: done.append(sp.acknowledge("m1", [AckBatch(0, 4, [RELEASE])]).result()))
    t.start()
    assert persister.entered.wait(5)
    assert sp.acquire("m2", [FetchedBatch(0, 4)], 500) == []  # the release is not done before its write
    time.sleep(1001)
    timer.advance_clock(0)  # the lock expires while the write is pending
    persister.fail_with = errors.COORDINATOR_NOT_AVAILABLE
    persister.gate.set()
    t.join(5)
    assert done == [errors.COORDINATOR_NOT_AVAILABLE]
    assert sp.snapshot() == [(0, 4, AVAILABLE, 1, None)]  # rolled back to ACQUIRED, then released: lock gone
    assert sp.acquire("m2", [FetchedBatch(0, 4)], 500) == [AcquiredRange(0, 4, 2)]
