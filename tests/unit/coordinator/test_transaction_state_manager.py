"""TransactionStateManager in process, the cases of Kafka's TransactionStateManagerTest: the transactional id ->
partition mapping, loading a ``__transaction_state`` partition (replay, tombstones, control batches, unknown
keys, markers of prepared transactions), unloading on resignation, the append path and its error mapping,
the state machine refusing an illegal transition, timed-out and expired transactional ids. The log and the
ReplicaManager are the in-memory fakes of ``txn_harness``; loads run on a MockScheduler."""

from __future__ import annotations

import pytest

from pykbroker.coordinator.transaction import transaction_log as txn_log
from pykbroker.coordinator.transaction.transaction_metadata import (
    IllegalTransitionError,
    TransactionMetadata,
    TransactionState,
)
from pykbroker.protocol import errors
from pykbroker.record.control_record import ControlRecordType, EndTransactionMarker
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from tests.unit.coordinator.txn_harness import EXPIRATION_MS, NOW, TxnHarness

S = TransactionState
TP0, TP1 = ("t", 0), ("t", 1)


def _value(tid: str, pid: int, epoch: int, state: S, tps=(), start: int = -1, version: int = 0) -> bytes:
    m = TransactionMetadata(tid, pid, producer_epoch=epoch, state=state, topic_partitions=set(tps))
    m.txn_start_timestamp = start if start != -1 or state is S.EMPTY else NOW
    m.txn_last_update_timestamp = NOW
    return txn_log.value_bytes(m.prepare_no_transit(), version)


def _batch(*records: tuple[bytes, bytes | None]) -> bytes:
    b = MemoryRecordsBuilder()
    for key, value in records:
        b.append(NOW, key, value)
    return b.build()


def _marker_batch() -> bytes:
    b = MemoryRecordsBuilder(is_transactional=True, is_control_batch=True)
    b.set_producer_state(77, 0, -1, True)
    b.append_end_txn_marker(NOW, EndTransactionMarker(ControlRecordType.COMMIT, 0))
    return b.build()


def _key(tid: str) -> bytes:
    return txn_log.key_bytes(tid)


def _same_partition_ids(h: TxnHarness, n: int) -> list[str]:
    """``n`` transactional ids of partition 0."""
    return [t for t in (f"id-{i}" for i in range(500)) if h.manager.partition_for(t) == 0][:n]


@pytest.fixture
def h():
    return TxnHarness(elect=False)


def _load(h: TxnHarness, partition: int = 0, epoch: int = 0) -> list:
    """Elect, run the load; returns the ``send_markers`` calls."""
    sent: list = []
    h.manager.on_election(partition, epoch, lambda *a: sent.append(a))
    h.scheduler.tick()
    return sent


# -- partitioning ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("tid", "java_hash", "p50", "p3"),
    [  # String.hashCode() and Utils.abs(hash) % partitions, computed with a JDK
        ("my-txn", -1061187895, 45, 1),
        ("transactional-id-1", 1051133891, 41, 2),
        ("orders-producer-7", -492703580, 30, 2),
        ("zürich-ü", 1550868109, 9, 1),
        ("\U0001f600-emoji", -1200436388, 38, 2),  # a surrogate pair: two UTF-16 code units
        ("polygenelubricants", -(1 << 31), 0, 0),  # Integer.MIN_VALUE: Utils.abs gives 0
        ("app.txn.0042", 789791407, 7, 1),
    ],
)
def test_transactional_id_partition_is_kafkas_hash_partitioning(tid, java_hash, p50, p3):
    assert txn_log.java_string_hash(tid) == java_hash
    assert TxnHarness(elect=False, **{"transaction.state.log.num.partitions": 50}).manager.partition_for(tid) == p50
    assert TxnHarness(elect=False, **{"transaction.state.log.num.partitions": 3}).manager.partition_for(tid) == p3


def test_validate_transaction_timeout(h):
    assert [h.manager.validate_transaction_timeout_ms(t) for t in (-1, 0, 1, 900_000, 900_001)] == [
        False,
        False,
        True,
        True,
        False,
    ]


# -- loading --------------------------------------------------------------------------------------
def test_load_replays_the_partition_latest_value_wins_and_tombstones_remove(h):
    a, b, c = _same_partition_ids(h, 3)
    log = h.log_manager.log(0)
    log.append(_batch((_key(a), _value(a, 10, 0, S.EMPTY)), (_key(b), _value(b, 20, 3, S.EMPTY))))
    log.append(_marker_batch())  # control batches carry no transaction state
    log.append(_batch((_key(a), _value(a, 10, 1, S.ONGOING, [TP0, TP1])), (_key(b), None)))
    log.append(_batch((_key(c), _value(c, 30, 5, S.COMPLETE_ABORT, version=1))))
    assert _load(h) == []
    m = h.manager.get_transaction_state(a).metadata
    assert (m.producer_id, m.producer_epoch, m.state, m.topic_partitions) == (10, 1, S.ONGOING, {TP0, TP1})
    assert m.pending_state is None
    assert h.manager.get_transaction_state(b) is None
    assert h.manager.get_transaction_state(c).metadata.state is S.COMPLETE_ABORT
    assert h.manager.coordinator_epoch_of(0) == 0
    assert sorted(t.transactional_id for t in h.manager.all_transactions()) == sorted([a, c])


def test_the_partition_answers_load_in_progress_until_its_load_ran(h):
    [a] = _same_partition_ids(h, 1)
    h.log_manager.log(0).append(_batch((_key(a), _value(a, 10, 0, S.EMPTY))))
    h.manager.on_election(0, 2, lambda *a: None)
    with pytest.raises(errors.CoordinatorLoadInProgressError):
        h.manager.get_transaction_state(a)
    assert h.manager.is_loading and h.manager.coordinator_epoch_of(0) is None
    with pytest.raises(errors.NotCoordinatorError):
        h.manager.put_transaction_state_if_not_exists(TransactionMetadata(a, 11))
    assert h.scheduler.tick() == 1
    assert not h.manager.is_loading and h.manager.coordinator_epoch_of(0) == 2
    assert h.manager.get_transaction_state(a) == (2, h.manager.get_transaction_state(a).metadata)


def test_load_hands_prepared_transactions_to_the_marker_channel(h):
    a, b, c, d = _same_partition_ids(h, 4)
    h.log_manager.log(0).append(
        _batch(
            (_key(a), _value(a, 10, 0, S.PREPARE_COMMIT, [TP0])),
            (_key(b), _value(b, 20, 0, S.PREPARE_ABORT, [TP0, TP1])),
            (_key(c), _value(c, 30, 0, S.ONGOING, [TP0])),
            (_key(d), _value(d, 40, 0, S.COMPLETE_COMMIT)),
        )
    )
    sent = _load(h, epoch=4)
    got = {
        m.transactional_id: (epoch, commit, transit.txn_state, transit.topic_partitions)
        for epoch, commit, m, transit in sent
    }
    assert got == {
        a: (4, True, S.PREPARE_COMMIT, frozenset({TP0})),
        b: (4, False, S.PREPARE_ABORT, frozenset({TP0, TP1})),
    }


def test_load_ignores_records_with_an_unknown_key_version(h):
    """Kafka's testIgnoreUnknownRecordType: a key of an unknown version (left over from an aborted upgrade) is
    skipped with a warning; the partition still loads."""
    [a] = _same_partition_ids(h, 1)
    unknown = b"\x7f\xff" + b"\x00\x01x"
    h.log_manager.log(0).append(_batch((unknown, unknown), (_key(a), _value(a, 10, 2, S.PREPARE_COMMIT, [TP0]))))
    sent = _load(h, epoch=1)
    m = h.manager.get_transaction_state(a).metadata
    assert (m.producer_id, m.producer_epoch, m.state) == (10, 2, S.PREPARE_COMMIT)
    assert [(e, c, t.transactional_id) for e, c, t, _ in sent] == [(1, True, a)]


def test_a_failed_load_leaves_the_partition_unowned(h):
    [a] = _same_partition_ids(h, 1)
    h.log_manager.log(0).append(_batch((_key(a), _value(a, 10, 0, S.EMPTY))))
    h.log_manager.log(0).fail_reads = True
    _load(h)
    assert not h.manager.is_loading
    with pytest.raises(errors.NotCoordinatorError):
        h.manager.get_transaction_state(a)


def test_an_empty_partition_loads_empty(h):
    [a] = _same_partition_ids(h, 1)
    _load(h, partition=0)  # no log at all
    assert h.manager.get_transaction_state(a) is None
    h.log_manager.log(1)
    _load(h, partition=1)  # an empty log
    assert h.manager.coordinator_epoch_of(1) == 0


def test_resignation_during_the_load_discards_it(h):
    [a] = _same_partition_ids(h, 1)
    h.log_manager.log(0).append(_batch((_key(a), _value(a, 10, 0, S.PREPARE_COMMIT, [TP0]))))
    sent: list = []
    h.manager.on_election(0, 1, lambda *x: sent.append(x))
    h.manager.on_resignation(0, 1)
    h.scheduler.tick()
    assert sent == [] and not h.manager.is_loading
    with pytest.raises(errors.NotCoordinatorError):
        h.manager.get_transaction_state(a)


def test_resignation_unloads_the_partition(h):
    a, b = _same_partition_ids(h, 2)
    h.log_manager.log(0).append(_batch((_key(a), _value(a, 10, 0, S.EMPTY))))
    _load(h, epoch=3)
    _load(h, partition=1, epoch=3)
    h.manager.on_resignation(0, 3)
    with pytest.raises(errors.NotCoordinatorError):
        h.manager.get_transaction_state(a)
    with pytest.raises(errors.NotCoordinatorError):
        h.manager.put_transaction_state_if_not_exists(TransactionMetadata(b, 1))
    assert h.manager.coordinator_epoch_of(0) is None and h.manager.coordinator_epoch_of(1) == 3
    assert h.manager.all_transactions() == []


def test_stale_elections_and_resignations_are_ignored(h):
    [a] = _same_partition_ids(h, 1)
    h.log_manager.log(0).append(_batch((_key(a), _value(a, 10, 0, S.EMPTY))))
    _load(h, epoch=5)
    h.manager.on_resignation(0, 4)  # older than the current leadership
    assert h.manager.coordinator_epoch_of(0) == 5
    h.manager.on_election(0, 4, lambda *x: None)
    assert not h.manager.is_loading and h.manager.coordinator_epoch_of(0) == 5
    h.manager.on_resignation(0, None)  # StopReplica: no epoch, always applies
    assert h.manager.coordinator_epoch_of(0) is None


def test_reelection_reloads_what_the_coordinator_wrote():
    h = TxnHarness()
    pid, epoch = h.open_transaction("tx", TP0, TP1)
    h.init_ok("other")
    before = h.metadata("tx")
    for p in range(4):
        h.coordinator.on_resignation(p, 0)
        h.coordinator.on_election(p, 1)
    h.scheduler.tick()
    after = h.metadata("tx")
    assert after is not before
    assert (
        after.producer_id,
        after.producer_epoch,
        after.state,
        after.topic_partitions,
        after.txn_start_timestamp,
    ) == (
        pid,
        epoch,
        S.ONGOING,
        {TP0, TP1},
        before.txn_start_timestamp,
    )
    assert h.add("tx", pid, epoch, ("t", 2)) == errors.NONE  # the reloaded transaction goes on
    assert h.manager.get_transaction_state("tx").coordinator_epoch == 1


# -- appends --------------------------------------------------------------------------------------
def _owned(h: TxnHarness, tid: str = "tx") -> TransactionMetadata:
    p = h.manager.partition_for(tid)
    _load(h, partition=p, epoch=7)
    return h.manager.put_transaction_state_if_not_exists(TransactionMetadata(tid, 42, producer_epoch=3)).metadata


def _append(h: TxnHarness, transit, tid: str = "tx", epoch: int = 7, retry=lambda code: False) -> list:
    out: list = []
    h.manager.append_transaction_to_log(tid, epoch, transit, out.append, retry)
    return out


def test_put_if_not_exists_keeps_the_first(h):
    m = _owned(h)
    again = h.manager.put_transaction_state_if_not_exists(TransactionMetadata("tx", 99))
    assert again == (7, m)


def test_append_writes_the_record_and_completes_the_transition(h):
    m = _owned(h)
    transit = m.prepare_add_partitions({TP0, TP1}, NOW)
    assert m.pending_state is S.ONGOING and m.state is S.EMPTY
    assert _append(h, transit) == [errors.NONE]
    assert (m.state, m.pending_state, m.topic_partitions) == (S.ONGOING, None, {TP0, TP1})
    [written] = h.written("tx")
    assert (written.producer_id, written.producer_epoch, written.state, written.topic_partitions) == (
        42,
        3,
        S.ONGOING,
        {TP0, TP1},
    )


@pytest.mark.parametrize(("transaction_version", "value_version"), [(0, 0), (1, 1), (2, 1)])
def test_the_value_version_follows_the_finalized_transaction_version(transaction_version, value_version):
    h = TxnHarness(elect=False, transaction_version=transaction_version)
    m = _owned(h)
    _append(h, m.prepare_add_partitions({TP0}, NOW))
    [(_, value)] = h.log_manager.log(h.manager.partition_for("tx")).records()
    assert int.from_bytes(value[:2], "big") == value_version


@pytest.mark.parametrize(
    ("append_error", "code"),
    [
        (errors.UNKNOWN_TOPIC_OR_PARTITION, errors.COORDINATOR_NOT_AVAILABLE),
        (errors.NOT_ENOUGH_REPLICAS, errors.COORDINATOR_NOT_AVAILABLE),
        (errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, errors.COORDINATOR_NOT_AVAILABLE),
        (errors.REQUEST_TIMED_OUT, errors.COORDINATOR_NOT_AVAILABLE),
        (errors.NOT_LEADER_OR_FOLLOWER, errors.NOT_COORDINATOR),
        (errors.KAFKA_STORAGE_ERROR, errors.NOT_COORDINATOR),
        (errors.MESSAGE_TOO_LARGE, errors.UNKNOWN_SERVER_ERROR),
        (errors.RECORD_LIST_TOO_LARGE, errors.UNKNOWN_SERVER_ERROR),
        (errors.INVALID_RECORD, errors.INVALID_RECORD),
    ],
)
def test_append_errors_are_mapped_as_kafka_and_the_transition_dropped(h, append_error, code):
    m = _owned(h)
    h.replica_manager.errors = [append_error]
    assert _append(h, m.prepare_add_partitions({TP0}, NOW)) == [code]
    assert (m.state, m.pending_state, m.topic_partitions) == (S.EMPTY, None, set())
    assert h.written("tx") == []


def test_append_error_the_caller_retries_keeps_the_pending_state(h):
    """Kafka's testPendingStateNotResetOnRetryAppend."""
    m = _owned(h)
    h.replica_manager.errors = [errors.UNKNOWN_TOPIC_OR_PARTITION]
    transit = m.prepare_add_partitions({TP0}, NOW)
    assert _append(h, transit, retry=lambda code: code == errors.COORDINATOR_NOT_AVAILABLE) == [
        errors.COORDINATOR_NOT_AVAILABLE
    ]
    assert m.pending_state is S.ONGOING
    assert _append(h, transit) == [errors.NONE] and m.state is S.ONGOING


def test_append_completing_after_resignation_or_at_another_epoch_is_not_coordinator(h):
    m = _owned(h)
    assert _append(h, m.prepare_add_partitions({TP0}, NOW), epoch=6) == [errors.NOT_COORDINATOR]
    assert m.state is S.EMPTY and m.topic_partitions == set()
    m.abort_transition()
    h.replica_manager.hold = True
    out = _append(h, m.prepare_add_partitions({TP0}, NOW))
    h.manager.on_resignation(h.manager.partition_for("tx"), 7)
    h.replica_manager.release()
    assert out == [errors.NOT_COORDINATOR]
    assert m.state is S.EMPTY and m.topic_partitions == set()


def test_append_completing_while_the_partition_reloads_is_load_in_progress(h):
    """Kafka's testAppendFailToCoordinatorLoadingError: the append succeeded, but the partition is being loaded
    again at a new epoch: COORDINATOR_LOAD_IN_PROGRESS (the client retries the same coordinator)."""
    m = _owned(h)
    p = h.manager.partition_for("tx")
    h.replica_manager.hold = True
    out: list = []
    h.manager.append_transaction_to_log("tx", 7, m.prepare_add_partitions({TP0}, NOW), out.append)
    h.manager.on_election(p, 8, lambda *x: None)
    h.replica_manager.release()
    assert out == [errors.COORDINATOR_LOAD_IN_PROGRESS]


def test_an_illegal_transition_is_refused(h):
    m = _owned(h)
    with pytest.raises(IllegalTransitionError):
        m.prepare_abort_or_commit(S.PREPARE_COMMIT, NOW)  # Empty -> PrepareCommit
    assert m.pending_state is None
    transit = m.prepare_add_partitions({TP0}, NOW)
    with pytest.raises(IllegalTransitionError):
        m.prepare_add_partitions({TP1}, NOW)  # a transition is pending
    m.producer_epoch = 4  # the producer was fenced while the append was in flight
    assert _append(h, transit) == [errors.UNKNOWN_SERVER_ERROR]  # completeTransitionTo refuses it
    assert (m.state, m.pending_state, m.topic_partitions) == (S.EMPTY, None, set())


# -- timeouts and expiration ----------------------------------------------------------------------
def test_only_ongoing_transactions_past_their_timeout_are_timed_out():
    h = TxnHarness()
    ongoing, _ = h.open_transaction("ongoing")
    h.init_ok("empty")
    pid, epoch = h.open_transaction("ending")
    h.end("ending", pid, epoch, True)
    h.time.sleep(60_000)
    assert h.manager.timed_out_transactions() == []  # start + timeout is not before now yet
    h.time.sleep(1)
    assert h.manager.timed_out_transactions() == [("ongoing", ongoing, 0)]


@pytest.mark.parametrize(
    ("state", "expires"),
    [
        (S.EMPTY, True),
        (S.COMPLETE_COMMIT, True),
        (S.COMPLETE_ABORT, True),
        (S.ONGOING, False),
        (S.PREPARE_COMMIT, False),
        (S.PREPARE_ABORT, False),
    ],
)
def test_idle_transactional_ids_expire_with_a_tombstone(state, expires):
    h = TxnHarness()
    for task in h.scheduler.pending():  # the periodic tasks would catch up a week of runs at the next tick
        task.cancel()
    pid, epoch = h.init_ok("tx")
    if state is not S.EMPTY:
        h.add("tx", pid, epoch)
    if state is not S.EMPTY and state is not S.ONGOING:
        h.end("tx", pid, epoch, state in (S.PREPARE_COMMIT, S.COMPLETE_COMMIT))
        if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            h.markers.complete("tx")
    h.time.sleep(EXPIRATION_MS - 1)
    assert h.manager.remove_expired_transactional_ids() == 0
    h.time.sleep(1)
    assert h.manager.remove_expired_transactional_ids() == int(expires)
    assert (h.manager.get_transaction_state("tx") is None) == expires
    assert (h.written("tx")[-1] is None) == expires
    if expires:  # the tombstone is what a later load sees
        p = h.manager.partition_for("tx")
        h.coordinator.on_election(p, 1)
        h.scheduler.tick()
        assert h.manager.get_transaction_state("tx") is None
        assert h.init("tx")[0] == errors.NONE


def test_expiration_whose_tombstone_fails_keeps_the_id():
    h = TxnHarness()
    h.init_ok("tx")
    h.time.sleep(EXPIRATION_MS)
    h.replica_manager.errors = [errors.NOT_ENOUGH_REPLICAS]
    assert h.manager.remove_expired_transactional_ids() == 1
    m = h.metadata("tx")
    assert (m.state, m.pending_state) == (S.EMPTY, None)


def test_the_periodic_tasks_are_scheduled_at_their_intervals():
    h = TxnHarness()
    names = {t.name: t.period_ms for t in h.scheduler.pending()}
    assert names == {"transaction-abort": 10_000, "transactionalId-expiration": 3_600_000}
