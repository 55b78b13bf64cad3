"""ProducerStateManager and ProducerAppendInfo on their own (no UnifiedLog), the cases of Kafka's
ProducerStateManagerTest: sequence and epoch validation per append origin, duplicates among the 5 retained
batches, transactions (begin, markers, first unstable / last stable offset), coordinator fencing, snapshots
written and reloaded, truncation, producer expiry (``producer.id.expiration.ms``) and the KIP-890
verification guard. Batches are 61-byte headers built by ``log_test_utils.make_batch``."""

from __future__ import annotations

import os

import pytest

from pykbroker.log.producer_state_entry import (
    NUM_BATCHES_TO_RETAIN,
    AppendOrigin,
    CompletedTxn,
    ProducerAppendInfo,
)
from pykbroker.log.producer_state_manager import ProducerStateManager
from pykbroker.protocol.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from pykbroker.record.control_record import ControlRecordType, EndTransactionMarker
from pykbroker.record.file_records import BatchHeader
from tests.unit.log.log_test_utils import CONTROL, TRANSACTIONAL, make_batch

PID = 4242
NOW = 1_700_000_000_000
EXPIRATION_MS = 60_000
TP = ("t", 0)
CLIENT, COORDINATOR, REPLICATION = AppendOrigin.CLIENT, AppendOrigin.COORDINATOR, AppendOrigin.REPLICATION


def batch(offset: int, seq: int, count: int = 1, epoch: int = 0, pid: int = PID, txn: bool = False, ts: int = NOW):
    """The header of a data batch at ``offset`` holding ``count`` records with sequences from ``seq``."""
    data = make_batch(
        offset,
        count,
        0,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        attributes=TRANSACTIONAL if txn else 0,
        max_timestamp=ts,
    )
    return BatchHeader.parse(data, 0, 0)


def marker_batch(offset: int, epoch: int = 0, pid: int = PID, ts: int = NOW) -> BatchHeader:
    data = make_batch(
        offset, 1, 0, producer_id=pid, producer_epoch=epoch, attributes=TRANSACTIONAL | CONTROL, max_timestamp=ts
    )
    return BatchHeader.parse(data, 0, 0)


def append(psm: ProducerStateManager, header: BatchHeader, origin=CLIENT, marker=None) -> ProducerAppendInfo:
    """Validate and apply one batch as the log does: update, complete what a marker ended, advance the map end."""
    info = psm.prepare_update(header.producer_id, origin)
    info.append(header, marker)
    psm.update(info)
    for txn in info.completed_txns:
        psm.complete_txn(txn)
    psm.update_map_end_offset(header.next_offset)
    return info


def end_txn(
    psm, offset: int, commit: bool = True, epoch: int = 0, coordinator_epoch: int = 0, pid=PID, origin=COORDINATOR
):
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return append(psm, marker_batch(offset, epoch, pid), origin, EndTransactionMarker(kind, coordinator_epoch))


@pytest.fixture
def psm(tmp_path):
    return ProducerStateManager(TP, str(tmp_path), EXPIRATION_MS)


def reloaded(psm: ProducerStateManager, log_end: int, now: int = NOW, log_start: int = 0) -> ProducerStateManager:
    again = ProducerStateManager(TP, psm.log_dir, EXPIRATION_MS)
    again.truncate_and_reload(log_start, log_end, now)
    return again


# -- sequences and epochs -------------------------------------------------------------------------
def test_in_sequence_appends_update_the_entry(psm):
    append(psm, batch(0, 0, count=3))
    append(psm, batch(3, 3, count=2, ts=NOW + 5))
    e = psm.last_entry(PID)
    assert (e.producer_epoch, e.first_seq, e.last_seq, e.last_data_offset, e.last_timestamp) == (0, 0, 4, 4, NOW + 5)
    assert psm.map_end_offset == 5


def test_out_of_order_sequence(psm):
    """Kafka's testBasicIdMapping: a gap, a repeat of the last batch (checked as a duplicate by the log first)."""
    append(psm, batch(0, 0))
    append(psm, batch(1, 1))
    for seq in (1, 5, 0):
        with pytest.raises(OutOfOrderSequenceError):
            append(psm, batch(2, seq))
    assert psm.last_entry(PID).last_seq == 1


def test_a_failed_validation_changes_nothing(psm):
    """Kafka's testPrepareUpdateDoesNotMutate: the state changes only with ``update``."""
    append(psm, batch(0, 0, count=6))
    info = psm.prepare_update(PID, CLIENT)
    info.append(batch(6, 6, count=5))
    assert psm.last_entry(PID).last_seq == 5
    psm.update(info)
    assert (psm.last_entry(PID).first_seq, psm.last_entry(PID).last_seq) == (0, 10)
    info = psm.prepare_update(PID, CLIENT)
    with pytest.raises(OutOfOrderSequenceError):
        info.append(batch(11, 12))
    assert psm.last_entry(PID).last_seq == 10 and len(psm.last_entry(PID).batch_metadata) == 2


def test_an_older_epoch_is_fenced_but_replicated(psm):
    append(psm, batch(0, 0, epoch=3))
    for origin in (CLIENT, COORDINATOR):
        with pytest.raises(InvalidProducerEpochError):
            append(psm, batch(1, 1, epoch=2), origin)
    append(psm, batch(1, 0, epoch=2), REPLICATION)  # a follower copies what the leader wrote
    assert psm.last_entry(PID).producer_epoch == 2


def test_a_new_epoch_restarts_the_sequence_at_zero(psm):
    append(psm, batch(0, 0, count=5, epoch=1))
    with pytest.raises(OutOfOrderSequenceError):
        append(psm, batch(5, 5, epoch=2))
    append(psm, batch(5, 0, count=2, epoch=2))
    e = psm.last_entry(PID)
    assert (e.producer_epoch, e.first_seq, e.last_seq, len(e.batch_metadata)) == (2, 0, 1, 1)


def test_an_unknown_producer_may_start_at_any_sequence(psm):
    """No UNKNOWN_PRODUCER_ID: a producer whose state is gone (retention, expiry) starts anywhere (KIP-360)."""
    append(psm, batch(0, 1234, epoch=7))
    assert psm.last_entry(PID).first_seq == 1234
    with pytest.raises(OutOfOrderSequenceError):
        append(psm, batch(1, 1236, epoch=7))  # once known, it is checked
    append(psm, batch(1, 1235, epoch=7))


def test_the_sequence_wraps_after_int_max(psm):
    """Kafka's testProducerSequenceWrapAround / ...InvalidWrapAround / ...WithWrapAroundBatchRecord."""
    append(psm, batch(0, 0x7FFFFFFF, epoch=15), REPLICATION)
    with pytest.raises(OutOfOrderSequenceError):
        append(psm, batch(1, 1, epoch=15))
    append(psm, batch(1, 0, epoch=15))
    append(psm, batch(2, 0x7FFFFFFF - 1, count=4, epoch=16), REPLICATION)  # a batch wrapping inside itself
    e = psm.last_entry(PID)
    assert (e.first_seq, e.last_seq, e.batch_metadata[-1].first_offset) == (0x7FFFFFFF - 1, 1, 2)


def test_coordinator_and_replication_appends_skip_the_sequence_check(psm):
    """Kafka's testSequenceNotValidatedForGroupMetadataTopic and testAcceptAppendWithSequenceGapsOnReplica."""
    append(psm, batch(0, 0))
    append(psm, batch(1, 9), COORDINATOR)
    append(psm, batch(2, 30), REPLICATION)
    assert psm.last_entry(PID).last_seq == 30


# -- duplicates and the 5-batch cache -------------------------------------------------------------
def test_duplicates_among_the_last_five_batches_return_their_offsets(psm):
    for i in range(7):  # 7 batches of 2 records: sequences 0..13 at offsets 100..113
        append(psm, batch(100 + 2 * i, 2 * i, count=2, ts=NOW + i))
    e = psm.last_entry(PID)
    assert len(e.batch_metadata) == NUM_BATCHES_TO_RETAIN and e.first_seq == 4
    dup = e.find_duplicate_batch(batch(999, 6, count=2))
    assert (dup.first_offset, dup.last_offset, dup.timestamp) == (106, 107, NOW + 3)
    assert e.find_duplicate_batch(batch(999, 2, count=2)) is None  # evicted
    assert e.find_duplicate_batch(batch(999, 6, count=1)) is None  # another range
    assert e.find_duplicate_batch(batch(999, 6, count=2, epoch=1)) is None  # another epoch


def test_a_new_epoch_forgets_the_retained_batches(psm):
    append(psm, batch(0, 0, count=2))
    append(psm, batch(2, 0, count=2, epoch=1))
    e = psm.last_entry(PID)
    assert [m.first_offset for m in e.batch_metadata] == [2]
    assert e.find_duplicate_batch(batch(9, 0, count=2)) is None


# -- transactions ---------------------------------------------------------------------------------
def test_a_transaction_holds_the_first_unstable_offset_until_its_marker_is_replicated(psm):
    append(psm, batch(0, 0))
    assert psm.first_unstable_offset is None
    info = append(psm, batch(1, 1, count=2, txn=True))
    assert info.started_txn_first_offsets == [1] and psm.last_entry(PID).current_txn_first_offset == 1
    append(psm, batch(3, 3, txn=True))
    assert psm.first_unstable_offset == 1
    info = end_txn(psm, 4, commit=False, coordinator_epoch=2)
    assert info.completed_txns == [CompletedTxn(PID, 1, 4, True)]
    e = psm.last_entry(PID)
    assert (e.current_txn_first_offset, e.coordinator_epoch, e.last_seq) == (None, 2, 3)
    assert psm.first_unstable_offset == 1 and psm.has_unreplicated_txns  # the marker is not below the HW yet
    psm.on_high_watermark_updated(4)
    assert psm.first_unstable_offset == 1
    psm.on_high_watermark_updated(5)
    assert psm.first_unstable_offset is None and not psm.has_unreplicated_txns


def test_last_stable_offset_of_completed_transactions(psm):
    """Kafka's testLastStableOffsetCompletedTxn."""
    for pid, first in ((1, 100), (2, 125), (3, 157)):
        append(psm, batch(first, 0, pid=pid, txn=True))
    t1 = CompletedTxn(1, 100, 172)
    assert psm.last_stable_offset(t1) == 125
    psm.complete_txn(t1)
    psm.on_high_watermark_updated(173)
    assert psm.first_unstable_offset == 125
    t3 = CompletedTxn(3, 157, 192)
    assert psm.last_stable_offset(t3) == 125
    psm.complete_txn(t3)
    t2 = CompletedTxn(2, 125, 270)
    assert psm.last_stable_offset(t2) == 271
    psm.complete_txn(t2)
    psm.on_high_watermark_updated(271)
    assert psm.first_unstable_offset is None


def test_a_non_transactional_write_during_a_transaction_is_invalid_txn_state(psm):
    append(psm, batch(0, 0, txn=True))
    with pytest.raises(InvalidTxnStateError):
        append(psm, batch(1, 1))
    append(psm, batch(1, 1), REPLICATION)


def test_markers_without_a_transaction_complete_nothing(psm):
    """Kafka's testSkipEmptyTransactions: several transactions, some empty, in one append."""
    first = append(psm, batch(16, 0, count=5, txn=True))
    assert first.started_txn_first_offsets == [16]
    info = psm.prepare_update(PID, COORDINATOR)

    def mark(offset, kind):
        info.append(marker_batch(offset), EndTransactionMarker(kind, 0))

    mark(21, ControlRecordType.COMMIT)
    mark(22, ControlRecordType.COMMIT)
    mark(23, ControlRecordType.ABORT)
    info.append(batch(24, 5, count=4, txn=True))
    mark(28, ControlRecordType.ABORT)
    mark(29, ControlRecordType.ABORT)
    info.append(batch(30, 9, count=2, txn=True))
    assert info.completed_txns == [CompletedTxn(PID, 16, 21, False), CompletedTxn(PID, 24, 28, True)]
    assert info.started_txn_first_offsets == [24, 30]
    psm.update(info)
    for txn in info.completed_txns:
        psm.complete_txn(txn)
    psm.on_high_watermark_updated(32)
    assert psm.first_unstable_offset == 30


def test_a_marker_with_a_bumped_epoch_resets_the_sequence(psm):
    """Kafka's testControlRecordBumpsProducerEpoch / testOutOfSequenceAfterControlRecordEpochBump."""
    append(psm, batch(0, 0, txn=True))
    append(psm, batch(1, 1, txn=True))
    end_txn(psm, 2, commit=False, epoch=1)
    e = psm.last_entry(PID)
    assert (e.producer_epoch, e.current_txn_first_offset, e.first_seq, e.last_seq) == (1, None, -1, -1)
    with pytest.raises(OutOfOrderSequenceError):
        append(psm, batch(3, 2, epoch=1, txn=True))
    with pytest.raises(OutOfOrderSequenceError):
        append(psm, batch(3, 2, epoch=2, txn=True))
    append(psm, batch(3, 0, epoch=1, txn=True))
    assert psm.last_entry(PID).last_seq == 0


def test_a_marker_as_the_only_state_still_fences_and_checks_sequences(psm):
    """Kafka's testAppendTxnMarkerWithNoProducerState."""
    end_txn(psm, 27, epoch=2)
    e = psm.last_entry(PID)
    assert (e.producer_epoch, e.last_seq) == (2, -1)
    with pytest.raises(InvalidProducerEpochError):
        append(psm, batch(28, 0, epoch=0))
    with pytest.raises(OutOfOrderSequenceError):
        append(psm, batch(28, 17, epoch=2))
    append(psm, batch(28, 0, epoch=2))
    assert psm.last_entry(PID).last_seq == 0


def test_a_marker_of_an_older_epoch_or_coordinator_is_refused(psm):
    """Kafka's testOldEpochForControlRecord, testCoordinatorFencing and testCoordinatorFencedAfterReload."""
    append(psm, batch(0, 0, epoch=3, txn=True))
    with pytest.raises(InvalidProducerEpochError):
        end_txn(psm, 1, epoch=2)
    end_txn(psm, 1, epoch=3, coordinator_epoch=5)
    append(psm, batch(2, 1, epoch=3, txn=True))
    with pytest.raises(TransactionCoordinatorFencedError):
        end_txn(psm, 3, epoch=3, coordinator_epoch=4)
    psm.take_snapshot()
    again = reloaded(psm, psm.map_end_offset)
    with pytest.raises(TransactionCoordinatorFencedError):
        end_txn(again, 3, epoch=3, coordinator_epoch=4)
    end_txn(again, 3, epoch=3, coordinator_epoch=4, origin=REPLICATION)
    assert again.last_entry(PID).coordinator_epoch == 4 and again.first_unstable_offset == 2


def test_replaying_batches_rebuilds_the_state(psm):
    """``apply_batches`` (recovery): no validation, markers complete transactions with their LSO."""
    marker = marker_batch(5)
    completed: list = []
    psm.apply_batches(
        [batch(0, 40), batch(1, 0, pid=7, txn=True), batch(2, 45, count=3), marker, batch(6, 1, pid=7, txn=True)],
        marker_of=lambda b: EndTransactionMarker(ControlRecordType.ABORT, 1) if b is marker else None,
        on_completed=lambda txn, lso: completed.append((txn, lso)),
    )
    marker7 = marker_batch(7, pid=7)
    psm.apply_batches(
        [marker7],
        marker_of=lambda b: EndTransactionMarker(ControlRecordType.COMMIT, 1),
        on_completed=lambda t, lso: completed.append((t, lso)),
    )
    assert completed == [(CompletedTxn(7, 1, 7, False), 8)]
    assert psm.last_entry(PID).last_seq == 47 and psm.map_end_offset == 8
    assert psm.first_unstable_offset == 1  # until the HW passes the marker


# -- snapshots, truncation ------------------------------------------------------------------------
def test_snapshot_and_reload_round_trip(psm):
    """Kafka's testRecoverFromSnapshotUnfinishedTransaction / testReadWriteSnapshot."""
    for i in range(6):
        append(psm, batch(10 * i, 3 * i, count=3, ts=NOW + i))
    append(psm, batch(60, 0, pid=9, epoch=4, txn=True))
    end_txn(psm, 61, pid=9, epoch=4, coordinator_epoch=3)
    append(psm, batch(62, 1, pid=9, epoch=4, txn=True))
    path = psm.take_snapshot()
    assert path == os.path.join(psm.log_dir, f"{63:020d}.snapshot") and os.path.exists(path)
    assert psm.take_snapshot() is None  # already there
    again = reloaded(psm, 63)
    assert again.map_end_offset == 63 and again.snapshot_offsets() == [63]
    for pid in (PID, 9):
        a, b = psm.last_entry(pid), again.last_entry(pid)
        assert (a.producer_epoch, a.coordinator_epoch, a.last_timestamp, a.current_txn_first_offset) == (
            b.producer_epoch,
            b.coordinator_epoch,
            b.last_timestamp,
            b.current_txn_first_offset,
        )
        assert list(a.batch_metadata) == list(b.batch_metadata)
    assert again.first_unstable_offset == 62
    dup = again.last_entry(PID).find_duplicate_batch(batch(0, 9, count=3))
    assert (dup.first_offset, dup.last_offset) == (30, 32)


def test_reload_drops_producers_expired_meanwhile(psm):
    """Kafka's testRemoveExpiredPidsOnReload / testLoadFromSnapshotRetainsNonExpiredProducers."""
    append(psm, batch(0, 0, ts=NOW))
    append(psm, batch(1, 0, pid=2, ts=NOW + 10_000))
    append(psm, batch(2, 0, pid=3, ts=NOW, txn=True))  # open transaction: never expires
    psm.take_snapshot()
    again = reloaded(psm, 3, now=NOW + EXPIRATION_MS)
    assert again.last_entry(PID) is None
    assert again.last_entry(2) is not None and again.last_entry(3) is not None
    append(again, batch(3, 5, ts=NOW + EXPIRATION_MS))  # unknown again: any sequence
    assert again.last_entry(PID).last_seq == 5


def test_truncate_and_reload_keeps_the_snapshots_inside_the_log(psm):
    """Kafka's testTruncateAndReloadRemovesOutOfRangeSnapshots."""
    for offset in range(4):
        append(psm, batch(offset, offset))
        psm.take_snapshot()
    assert psm.snapshot_offsets() == [1, 2, 3, 4]
    psm.truncate_and_reload(1, 3, NOW)
    assert psm.snapshot_offsets() == [2, 3]
    assert sorted(f for f in os.listdir(psm.log_dir) if f.endswith(".snapshot")) == [
        f"{2:020d}.snapshot",
        f"{3:020d}.snapshot",
    ]
    assert psm.map_end_offset == 3 and psm.last_entry(PID).last_seq == 2


def test_truncate_below_a_transaction_start_forgets_it(psm):
    """Kafka's testFirstUnstableOffsetAfterTruncation."""
    append(psm, batch(0, 0))
    psm.take_snapshot()  # at 1
    append(psm, batch(1, 0, pid=7, txn=True))
    psm.take_snapshot()  # at 2: the transaction is in it
    assert psm.first_unstable_offset == 1
    psm.truncate_and_reload(0, 1, NOW)
    assert psm.first_unstable_offset is None and psm.last_entry(7) is None and psm.map_end_offset == 1


def test_truncate_fully_forgets_everything(psm):
    """Kafka's testTruncateFullyAndStartAt."""
    append(psm, batch(0, 0, txn=True))
    psm.take_snapshot()
    psm.truncate_fully_and_start_at(50)
    assert (psm.producers, psm.first_unstable_offset, psm.snapshot_offsets(), psm.map_end_offset) == ({}, None, [], 50)
    assert not [f for f in os.listdir(psm.log_dir) if f.endswith(".snapshot")]
    append(psm, batch(50, 77))
    assert psm.last_entry(PID).last_seq == 77


def test_log_start_offset_passing_an_open_transaction_keeps_it_open(psm):
    """Kafka's onLogStartOffsetIncremented forgets only completed transactions whose marker is below the new
    log start; an open transaction that started below it stays open (the first unstable offset is reported
    no lower than the log start, as UnifiedLog.maybeIncrementFirstUnstableOffset does) and its marker
    completes it."""
    append(psm, batch(0, 0, pid=1, txn=True))
    append(psm, batch(1, 0, pid=2, txn=True))
    end_txn(psm, 2, pid=2)  # completed, its marker not below the HW yet
    psm.on_log_start_offset_incremented(1)
    assert psm.first_unstable_offset == 1 and psm.last_entry(1).current_txn_first_offset == 0
    psm.on_log_start_offset_incremented(3)
    assert psm.first_unstable_offset == 3 and not psm.has_unreplicated_txns
    assert psm.map_end_offset == 3
    info = end_txn(psm, 3, pid=1, commit=False)
    assert info.completed_txns == [CompletedTxn(1, 0, 3, True)]
    assert psm.first_unstable_offset == 3
    psm.on_high_watermark_updated(4)
    assert psm.first_unstable_offset is None


def test_delete_snapshot(psm):
    append(psm, batch(0, 0))
    psm.take_snapshot()
    psm.delete_snapshot(1)
    psm.delete_snapshot(5)  # none there: nothing happens
    assert psm.snapshot_offsets() == [] and psm.latest_snapshot_offset() is None


# -- expiry ---------------------------------------------------------------------------------------
def test_producers_expire_after_producer_id_expiration_ms(psm):
    """Kafka's testPidExpirationTimeout / testProducersWithOngoingTransactionsDontExpire."""
    append(psm, batch(0, 0, ts=NOW))
    append(psm, batch(1, 0, pid=2, ts=NOW, txn=True))
    assert psm.remove_expired_producers(NOW + EXPIRATION_MS - 1) == 0
    assert psm.remove_expired_producers(NOW + EXPIRATION_MS) == 1
    assert psm.last_entry(PID) is None and psm.last_entry(2) is not None
    append(psm, batch(2, 99, ts=NOW + EXPIRATION_MS))  # back, at any sequence
    end_txn(psm, 3, pid=2)
    assert psm.remove_expired_producers(NOW + 2 * EXPIRATION_MS) == 2


# -- KIP-890 verification guard -------------------------------------------------------------------
def test_verification_guard_serves_one_transaction_start(psm):
    guard = psm.maybe_create_verification_guard(PID, 0)
    assert psm.maybe_create_verification_guard(PID, 0) is guard  # same epoch: the same guard
    assert psm.verification_guard(PID) is guard
    append(psm, batch(0, 0, txn=True))
    assert psm.verification_guard(PID) is None  # used by the transaction it started
    newer = psm.maybe_create_verification_guard(PID, 1)
    assert psm.maybe_create_verification_guard(PID, 0) is newer  # an older epoch does not replace it
    end_txn(psm, 1, epoch=1)
    assert psm.verification_guard(PID) is None  # a marker ends the verification


@pytest.mark.parametrize("damage", ["empty", "truncated", "flipped"])
def test_a_damaged_snapshot_is_deleted_and_an_older_one_used(psm, damage):
    """Kafka's testLoadFromEmptySnapshotFile / ...TruncatedSnapshotFile / ...CorruptSnapshotFile."""
    append(psm, batch(0, 0))
    psm.take_snapshot()  # at 1
    append(psm, batch(1, 1))
    path = psm.take_snapshot()  # at 2
    with open(path, "rb") as f:
        data = f.read()
    bad = {"empty": b"", "truncated": data[:-3], "flipped": data[:-1] + bytes([data[-1] ^ 1])}[damage]
    with open(path, "wb") as f:
        f.write(bad)
    again = reloaded(psm, 2)
    assert again.map_end_offset == 1 and again.last_entry(PID).last_seq == 0  # the caller replays from 1
    assert again.snapshot_offsets() == [1] and not os.path.exists(path)
