"""TransactionCoordinator in process (transaction version 0/1), the cases of Kafka's TransactionCoordinatorTest:
InitProducerId (new id, epoch bump, KIP-360 recovery, producer id rotation, fencing an Ongoing transaction),
AddPartitionsToTxn and its verify-only form, EndTxn and its retries, the timeout abort driven by the
scheduler, and the NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS answers. The state manager is the real one,
over the in-memory ``__transaction_state`` of ``txn_harness``."""

from __future__ import annotations

import pytest

from pykbroker.coordinator.transaction.transaction_metadata import SHORT_MAX, TransactionState
from pykbroker.protocol import errors
from tests.unit.coordinator.txn_harness import ABORT_INTERVAL_MS, MAX_TIMEOUT_MS, PARTITIONS, Markers, TxnHarness

S = TransactionState
TP0, TP1, TP2 = ("t", 0), ("t", 1), ("u", 0)


@pytest.fixture
def h():
    return TxnHarness()


def _prepare(h: TxnHarness, state: S, tid: str = "tx") -> tuple[int, int]:
    """A transaction in ``state`` (PrepareCommit/PrepareAbort: markers not written yet)."""
    pid, epoch = h.open_transaction(tid, TP0)
    assert h.end(tid, pid, epoch, state is S.PREPARE_COMMIT) == (errors.NONE, pid, epoch)
    assert h.metadata(tid).state is state
    return pid, epoch


# -- InitProducerId -------------------------------------------------------------------------------
def test_empty_transactional_id_is_an_invalid_request(h):
    assert h.init("") == (errors.INVALID_REQUEST, -1, -1)
    assert h.add("", 1, 0) == errors.INVALID_REQUEST
    assert h.end("", 1, 0, True) == (errors.INVALID_REQUEST, -1, -1)
    assert h.verify("", 1, 0, TP0) == {TP0: errors.INVALID_REQUEST}
    assert h.replica_manager.appends == 0


def test_new_transactional_id_gets_a_new_producer_id_at_epoch_zero(h):
    assert h.init("a") == (errors.NONE, 1001, 0)
    assert h.init("b") == (errors.NONE, 1002, 0)
    m = h.metadata("a")
    assert (m.producer_id, m.producer_epoch, m.state, m.txn_timeout_ms) == (1001, 0, S.EMPTY, 60_000)
    [written] = h.written("a")
    assert (written.producer_id, written.producer_epoch, written.state) == (1001, 0, S.EMPTY)


@pytest.mark.parametrize(
    ("timeout_ms", "code"),
    [(MAX_TIMEOUT_MS + 1, errors.INVALID_TRANSACTION_TIMEOUT), (0, errors.INVALID_TRANSACTION_TIMEOUT)]
    + [(-5, errors.INVALID_TRANSACTION_TIMEOUT), (MAX_TIMEOUT_MS, errors.NONE), (1, errors.NONE)],
)
def test_transaction_timeout_is_bounded_by_transaction_max_timeout_ms(h, timeout_ms, code):
    assert h.init("tx", timeout_ms=timeout_ms)[0] == code
    assert (h.manager.get_transaction_state("tx") is not None) == (code == errors.NONE)


def test_init_again_bumps_the_epoch_and_fences_the_previous_producer(h):
    pid, epoch = h.init_ok("tx")
    assert h.init("tx") == (errors.NONE, pid, epoch + 1)
    assert h.add("tx", pid, epoch) == errors.PRODUCER_FENCED
    assert h.end("tx", pid, epoch, True)[0] == errors.PRODUCER_FENCED
    assert h.add("tx", pid, epoch + 1) == errors.NONE
    assert h.init("tx", timeout_ms=70_000) == (errors.CONCURRENT_TRANSACTIONS, -1, -1)  # fences the Ongoing one


@pytest.mark.parametrize("commit", [True, False])
def test_init_after_a_completed_transaction_bumps_the_epoch(h, commit):
    pid, epoch = h.open_transaction("tx")
    h.end("tx", pid, epoch, commit)
    assert h.markers.complete("tx") == errors.NONE
    assert h.metadata("tx").state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
    assert h.init("tx", timeout_ms=30_000) == (errors.NONE, pid, epoch + 1)
    m = h.metadata("tx")
    assert (m.state, m.txn_timeout_ms, m.topic_partitions) == (S.EMPTY, 30_000, set())


def test_init_fences_an_ongoing_transaction_by_aborting_it_with_a_bumped_epoch(h):
    pid, epoch = h.open_transaction("tx", TP0, TP1)
    assert h.init("tx") == (errors.CONCURRENT_TRANSACTIONS, -1, -1)
    m = h.metadata("tx")
    assert (m.state, m.producer_epoch) == (S.PREPARE_ABORT, epoch + 1)
    assert h.markers.sent == [Markers(0, False, pid, epoch + 1, frozenset({TP0, TP1}))]
    assert h.written("tx")[-1].state is S.PREPARE_ABORT and h.written("tx")[-1].producer_epoch == epoch + 1
    # the zombie is fenced; the new producer waits for the abort to complete
    assert h.add("tx", pid, epoch, TP2) == errors.PRODUCER_FENCED
    assert h.end("tx", pid, epoch, True)[0] == errors.PRODUCER_FENCED
    assert h.init("tx") == (errors.CONCURRENT_TRANSACTIONS, -1, -1)
    assert h.markers.complete("tx") == errors.NONE
    assert h.init("tx") == (errors.NONE, pid, epoch + 2)


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_init_waits_while_the_previous_transaction_completes(h, state):
    pid, epoch = _prepare(h, state)
    appends = h.replica_manager.appends
    assert h.init("tx") == (errors.CONCURRENT_TRANSACTIONS, -1, -1)
    assert h.init("tx", expected=(pid, epoch)) == (errors.CONCURRENT_TRANSACTIONS, -1, -1)
    assert h.replica_manager.appends == appends and h.metadata("tx").producer_epoch == epoch


def test_init_during_a_pending_transition_is_concurrent_transactions(h):
    pid, epoch = h.init_ok("tx")
    h.replica_manager.hold = True
    assert h.add("tx", pid, epoch) is None  # the append waits
    assert h.init("tx") == (errors.CONCURRENT_TRANSACTIONS, -1, -1)
    assert h.add("tx", pid, epoch, TP1) == errors.CONCURRENT_TRANSACTIONS
    assert h.end("tx", pid, epoch, True)[0] == errors.CONCURRENT_TRANSACTIONS
    h.replica_manager.release()
    assert h.metadata("tx").state is S.ONGOING


def test_failed_fence_append_does_not_bump_the_epoch_again(h):
    """Kafka's shouldNotRepeatedlyBumpEpochDueToInitPidDuringOngoingTxnIfAppendToLogFails."""
    pid, epoch = h.open_transaction("tx")
    m = h.metadata("tx")
    for _ in range(2):
        h.replica_manager.errors = [errors.NOT_ENOUGH_REPLICAS]
        assert h.init("tx") == (errors.COORDINATOR_NOT_AVAILABLE, -1, -1)
        assert (m.producer_epoch, m.has_failed_epoch_fence, m.state, m.pending_state) == (
            epoch + 1,
            True,
            S.ONGOING,
            None,
        )
    assert h.init("tx") == (errors.CONCURRENT_TRANSACTIONS, -1, -1)
    assert (m.state, m.producer_epoch) == (S.PREPARE_ABORT, epoch + 1)
    assert h.markers.sent == [Markers(0, False, pid, epoch + 1, frozenset({TP0}))]
    h.markers.complete("tx")
    assert not m.has_failed_epoch_fence


def test_fence_with_the_epoch_exhausted_uses_the_last_epoch_then_rotates_the_producer_id(h):
    """Kafka's shouldUseLastEpochToFenceWhenEpochsAreExhausted."""
    pid, _ = h.init_ok("tx")
    m = h.metadata("tx")
    m.producer_epoch = SHORT_MAX - 1
    assert h.add("tx", pid, SHORT_MAX - 1) == errors.NONE
    assert h.init("tx") == (errors.CONCURRENT_TRANSACTIONS, -1, -1)
    assert (m.state, m.producer_epoch) == (S.PREPARE_ABORT, SHORT_MAX)
    assert h.markers.sent[-1].producer_epoch == SHORT_MAX
    h.markers.complete("tx")
    code, new_pid, new_epoch = h.init("tx")
    assert (code, new_epoch) == (errors.NONE, 0) and new_pid != pid
    assert (m.producer_id, m.previous_producer_id) == (new_pid, pid)


def test_kip_360_recovery_with_the_current_epoch_bumps_it_and_a_retry_gets_the_same_answer(h):
    pid, epoch = h.init_ok("tx")
    assert h.init("tx", expected=(pid, epoch)) == (errors.NONE, pid, epoch + 1)
    assert h.init("tx", expected=(pid, epoch)) == (errors.NONE, pid, epoch + 1)  # the response was lost
    assert h.metadata("tx").producer_epoch == epoch + 1


def test_kip_360_recovery_with_a_stale_epoch_or_another_producer_id_is_fenced(h):
    pid, epoch = h.init_ok("tx")
    assert h.init("tx") == (errors.NONE, pid, epoch + 1)  # a new producer took over
    assert h.init("tx") == (errors.NONE, pid, epoch + 2)
    assert h.init("tx", expected=(pid, epoch)) == (errors.PRODUCER_FENCED, -1, -1)
    assert h.init("tx", expected=(pid + 7, epoch + 2)) == (errors.PRODUCER_FENCED, -1, -1)
    assert h.metadata("tx").producer_epoch == epoch + 2


def test_exhausted_epoch_rotates_the_producer_id_and_recognises_the_retry(h):
    """Kafka's testRetryInitProducerIdAfterProducerIdRotation / ...WithInvalidEpochAfterProducerIdRotation."""
    pid, _ = h.init_ok("tx")
    h.metadata("tx").producer_epoch = SHORT_MAX - 1
    code, new_pid, epoch = h.init("tx", expected=(pid, SHORT_MAX - 1))
    assert (code, epoch) == (errors.NONE, 0) and new_pid != pid
    assert h.init("tx", expected=(pid, SHORT_MAX - 1)) == (errors.NONE, new_pid, 0)
    assert h.init("tx", expected=(pid, SHORT_MAX - 2)) == (errors.PRODUCER_FENCED, -1, -1)
    assert h.written("tx")[-1].producer_id == new_pid


def test_producer_id_allocation_failure_is_returned(h):
    h.pids.error = errors.COORDINATOR_LOAD_IN_PROGRESS
    assert h.init("tx") == (errors.COORDINATOR_LOAD_IN_PROGRESS, -1, -1)
    assert h.manager.get_transaction_state("tx") is None


# -- coordinator ownership ------------------------------------------------------------------------
def test_requests_for_a_partition_this_broker_does_not_lead_get_not_coordinator():
    h = TxnHarness(elect=False)
    assert h.init("tx") == (errors.NOT_COORDINATOR, -1, -1)
    assert h.add("tx", 1, 0) == errors.NOT_COORDINATOR
    assert h.end("tx", 1, 0, True) == (errors.NOT_COORDINATOR, -1, -1)
    assert h.verify("tx", 1, 0, TP0) == {TP0: errors.NOT_COORDINATOR}
    assert h.coordinator.handle_describe_transactions("tx")["error_code"] == errors.NOT_COORDINATOR


def test_requests_while_the_partition_loads_get_coordinator_load_in_progress():
    h = TxnHarness(elect=False)
    h.coordinator.on_election(h.manager.partition_for("tx"), 3)  # the load is scheduled, not run yet
    load = errors.COORDINATOR_LOAD_IN_PROGRESS
    assert h.init("tx") == (load, -1, -1)
    assert h.add("tx", 1, 0) == load
    assert h.end("tx", 1, 0, False) == (load, -1, -1)
    assert h.verify("tx", 1, 0, TP0) == {TP0: load}
    assert h.coordinator.handle_describe_transactions("tx")["error_code"] == load
    assert h.coordinator.handle_list_transactions(set(), set())["error_code"] == load
    h.scheduler.tick()
    assert h.init("tx")[0] == errors.NONE


def test_resignation_drops_the_partitions_transactions_and_markers(h):
    pid, epoch = _prepare(h, S.PREPARE_COMMIT)
    other = next(f"o{i}" for i in range(100) if h.manager.partition_for(f"o{i}") != h.manager.partition_for("tx"))
    h.init_ok(other)
    partition = h.manager.partition_for("tx")
    h.coordinator.on_resignation(partition, 1)
    assert h.markers.removed[-1] == partition and "tx" not in h.markers.pending
    assert h.end("tx", pid, epoch, True) == (errors.NOT_COORDINATOR, -1, -1)
    assert h.metadata(other).state is S.EMPTY  # other partitions stay


def test_end_txn_whose_append_completes_after_resignation_gets_not_coordinator(h):
    pid, epoch = h.open_transaction("tx")
    h.replica_manager.hold = True
    out: list = []
    h.coordinator.handle_end_transaction("tx", pid, epoch, True, lambda *r: out.append(r))
    assert out == [] and h.end("tx", pid, epoch, True) == (errors.CONCURRENT_TRANSACTIONS, -1, -1)
    h.coordinator.on_resignation(h.manager.partition_for("tx"), 1)
    h.replica_manager.release()
    assert out == [(errors.NOT_COORDINATOR, -1, -1)]
    assert h.markers.sent == []


def test_end_txn_whose_append_completes_while_a_new_election_loads_gets_load_in_progress(h):
    pid, epoch = h.open_transaction("tx")
    h.replica_manager.hold = True
    out: list = []
    h.coordinator.handle_end_transaction("tx", pid, epoch, True, lambda *r: out.append(r))
    h.coordinator.on_election(h.manager.partition_for("tx"), 5)  # re-elected: the cache is reloaded at epoch 5
    h.replica_manager.release()
    assert out == [(errors.COORDINATOR_LOAD_IN_PROGRESS, -1, -1)]
    h.scheduler.tick()
    # the PrepareCommit is in the log: the load at the new epoch finds it and has its markers written
    assert h.markers.sent == [Markers(5, True, pid, epoch, frozenset({TP0}))]
    assert h.metadata("tx").state is S.PREPARE_COMMIT
    assert h.manager.coordinator_epoch_of(h.manager.partition_for("tx")) == 5


# -- AddPartitionsToTxn ---------------------------------------------------------------------------
def test_add_partitions_starts_the_transaction_and_writes_it(h):
    pid, epoch = h.init_ok("tx")
    h.time.sleep(5)
    start = h.time.milliseconds()
    assert h.add("tx", pid, epoch, TP0, TP1) == errors.NONE
    m = h.metadata("tx")
    assert (m.state, m.topic_partitions, m.txn_start_timestamp) == (S.ONGOING, {TP0, TP1}, start)
    assert h.written("tx")[-1].state is S.ONGOING and h.written("tx")[-1].topic_partitions == {TP0, TP1}
    appends = h.replica_manager.appends
    h.time.sleep(5)
    assert h.add("tx", pid, epoch, TP1) == errors.NONE  # already in: answered without a write
    assert h.replica_manager.appends == appends
    assert h.add("tx", pid, epoch, TP2) == errors.NONE
    assert m.topic_partitions == {TP0, TP1, TP2} and m.txn_start_timestamp == start
    assert h.written("tx")[-1].topic_partitions == {TP0, TP1, TP2}


def test_add_partitions_checks_the_producer_id_and_epoch(h):
    pid, epoch = h.init_ok("tx")
    assert h.add("unknown", pid, epoch) == errors.INVALID_PRODUCER_ID_MAPPING
    assert h.add("tx", pid + 1, epoch) == errors.INVALID_PRODUCER_ID_MAPPING
    assert h.add("tx", pid, epoch + 1) == errors.PRODUCER_FENCED
    assert h.add("tx", pid, epoch - 1) == errors.PRODUCER_FENCED
    assert h.metadata("tx").state is S.EMPTY


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_add_partitions_while_the_transaction_ends_is_concurrent_transactions(h, state):
    pid, epoch = _prepare(h, state)
    assert h.add("tx", pid, epoch, TP1) == errors.CONCURRENT_TRANSACTIONS
    assert h.metadata("tx").topic_partitions == {TP0}


@pytest.mark.parametrize("commit", [True, False])
def test_add_partitions_after_a_completed_transaction_starts_the_next_one(h, commit):
    pid, epoch = h.open_transaction("tx", TP0)
    h.end("tx", pid, epoch, commit)
    h.markers.complete("tx")
    h.time.sleep(100)
    assert h.add("tx", pid, epoch, TP1) == errors.NONE
    m = h.metadata("tx")
    assert (m.state, m.topic_partitions, m.txn_start_timestamp) == (S.ONGOING, {TP1}, h.time.milliseconds())


def test_add_partitions_append_failure_leaves_the_transaction_unchanged(h):
    pid, epoch = h.init_ok("tx")
    h.replica_manager.errors = [errors.NOT_LEADER_OR_FOLLOWER]
    assert h.add("tx", pid, epoch) == errors.NOT_COORDINATOR
    m = h.metadata("tx")
    assert (m.state, m.topic_partitions, m.pending_state) == (S.EMPTY, set(), None)
    assert h.add("tx", pid, epoch) == errors.NONE


def test_verify_only_reports_which_partitions_are_in_the_transaction(h):
    """AddPartitionsToTxn v4+ verifyOnly (KIP-890): nothing is added or written."""
    pid, epoch = h.open_transaction("tx", TP0)
    appends = h.replica_manager.appends
    assert h.verify("tx", pid, epoch, TP0, TP1) == {TP0: errors.NONE, TP1: errors.TRANSACTION_ABORTABLE}
    assert h.verify("tx", pid, epoch + 1, TP0) == {TP0: errors.PRODUCER_FENCED}
    assert h.verify("tx", pid + 1, epoch, TP0) == {TP0: errors.INVALID_PRODUCER_ID_MAPPING}
    assert h.verify("nope", pid, epoch, TP0) == {TP0: errors.INVALID_PRODUCER_ID_MAPPING}
    assert h.replica_manager.appends == appends and h.metadata("tx").topic_partitions == {TP0}
    h.end("tx", pid, epoch, True)
    assert h.verify("tx", pid, epoch, TP0) == {TP0: errors.CONCURRENT_TRANSACTIONS}


# -- EndTxn ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_prepares_requests_the_markers_and_completes(h, commit):
    pid, epoch = h.open_transaction("tx", TP0, TP2)
    assert h.end("tx", pid, epoch, commit) == (errors.NONE, pid, epoch)
    prepared, complete = (S.PREPARE_COMMIT, S.COMPLETE_COMMIT) if commit else (S.PREPARE_ABORT, S.COMPLETE_ABORT)
    m = h.metadata("tx")
    assert (m.state, m.topic_partitions) == (prepared, {TP0, TP2})
    assert h.markers.sent == [Markers(0, commit, pid, epoch, frozenset({TP0, TP2}))]
    assert h.markers.complete("tx") == errors.NONE
    assert (m.state, m.topic_partitions, m.producer_epoch) == (complete, set(), epoch)
    assert [v.state for v in h.written("tx")] == [S.EMPTY, S.ONGOING, prepared, complete]
    assert h.written("tx")[2].topic_partitions == {TP0, TP2} and h.written("tx")[3].topic_partitions == set()


@pytest.mark.parametrize(
    ("state", "commit", "code"),
    [
        (S.PREPARE_COMMIT, True, errors.CONCURRENT_TRANSACTIONS),
        (S.PREPARE_COMMIT, False, errors.INVALID_TXN_STATE),
        (S.PREPARE_ABORT, False, errors.CONCURRENT_TRANSACTIONS),
        (S.PREPARE_ABORT, True, errors.INVALID_TXN_STATE),
        (S.COMPLETE_COMMIT, True, errors.NONE),
        (S.COMPLETE_COMMIT, False, errors.INVALID_TXN_STATE),
        (S.COMPLETE_ABORT, False, errors.NONE),
        (S.COMPLETE_ABORT, True, errors.INVALID_TXN_STATE),
    ],
)
def test_retried_end_txn_is_answered_by_the_state(h, state, commit, code):
    prepared = S.PREPARE_COMMIT if state in (S.PREPARE_COMMIT, S.COMPLETE_COMMIT) else S.PREPARE_ABORT
    pid, epoch = _prepare(h, prepared)
    if state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        h.markers.complete("tx")
    appends, sent = h.replica_manager.appends, len(h.markers.sent)
    expected = (code, pid, epoch) if code == errors.NONE else (code, -1, -1)
    assert h.end("tx", pid, epoch, commit) == expected
    assert h.metadata("tx").state is state
    assert (h.replica_manager.appends, len(h.markers.sent)) == (appends, sent)


def test_end_txn_without_a_transaction_is_invalid_txn_state(h):
    pid, epoch = h.init_ok("tx")
    assert h.end("tx", pid, epoch, True) == (errors.INVALID_TXN_STATE, -1, -1)
    assert h.end("tx", pid, epoch, False) == (errors.INVALID_TXN_STATE, -1, -1)


def test_end_txn_checks_the_producer_id_and_epoch(h):
    pid, epoch = h.open_transaction("tx")
    h.init("tx")  # fence: the epoch is now epoch + 1, aborting
    h.markers.complete("tx")
    pid, epoch = h.init_ok("tx")
    h.add("tx", pid, epoch)
    assert h.end("unknown", pid, epoch, True) == (errors.INVALID_PRODUCER_ID_MAPPING, -1, -1)
    assert h.end("tx", pid + 1, epoch, True) == (errors.INVALID_PRODUCER_ID_MAPPING, -1, -1)
    assert h.end("tx", pid, epoch - 1, True) == (errors.PRODUCER_FENCED, -1, -1)  # smaller
    assert h.end("tx", pid, epoch + 1, True) == (errors.PRODUCER_FENCED, -1, -1)  # larger
    assert h.metadata("tx").state is S.ONGOING and h.markers.sent[-1].commit is False


@pytest.mark.parametrize(
    ("append_error", "code"),
    [
        (errors.NOT_ENOUGH_REPLICAS, errors.COORDINATOR_NOT_AVAILABLE),
        (errors.REQUEST_TIMED_OUT, errors.COORDINATOR_NOT_AVAILABLE),
        (errors.NOT_LEADER_OR_FOLLOWER, errors.NOT_COORDINATOR),
        (errors.MESSAGE_TOO_LARGE, errors.UNKNOWN_SERVER_ERROR),
    ],
)
def test_end_txn_append_failure_sends_no_markers_and_can_be_retried(h, append_error, code):
    pid, epoch = h.open_transaction("tx")
    h.replica_manager.errors = [append_error]
    assert h.end("tx", pid, epoch, True) == (code, -1, -1)
    m = h.metadata("tx")
    assert (m.state, m.pending_state, h.markers.sent) == (S.ONGOING, None, [])
    assert h.end("tx", pid, epoch, True) == (errors.NONE, pid, epoch)
    assert h.markers.sent == [Markers(0, True, pid, epoch, frozenset({TP0}))]


# -- transaction timeout --------------------------------------------------------------------------
def test_the_scheduler_aborts_a_transaction_that_exceeded_its_timeout(h):
    pid, epoch = h.init_ok("tx", timeout_ms=15_000)
    h.add("tx", pid, epoch, TP0)
    h.time.sleep(ABORT_INTERVAL_MS)
    h.scheduler.tick()  # 10 s: within the timeout
    assert h.metadata("tx").state is S.ONGOING and h.markers.sent == []
    h.time.sleep(ABORT_INTERVAL_MS)
    h.scheduler.tick()  # 20 s: aborted with the epoch bumped, so the producer is fenced
    m = h.metadata("tx")
    assert (m.state, m.producer_epoch) == (S.PREPARE_ABORT, epoch + 1)
    assert h.markers.sent == [Markers(0, False, pid, epoch + 1, frozenset({TP0}))]
    assert h.end("tx", pid, epoch, True) == (errors.PRODUCER_FENCED, -1, -1)
    assert h.add("tx", pid, epoch, TP1) == errors.PRODUCER_FENCED
    h.markers.complete("tx")
    assert h.metadata("tx").state is S.COMPLETE_ABORT
    h.time.sleep(ABORT_INTERVAL_MS)
    h.scheduler.tick()
    assert len(h.markers.sent) == 1
    assert h.init("tx") == (errors.NONE, pid, epoch + 2)


def test_timeout_abort_skips_a_transaction_with_a_pending_transition(h):
    pid, epoch = h.open_transaction("tx")
    h.time.sleep(61_000)
    h.replica_manager.hold = True
    assert h.end("tx", pid, epoch, True) is None  # PrepareCommit being written
    assert h.coordinator.abort_timed_out_transactions() == 0
    h.replica_manager.release()
    assert h.metadata("tx").state is S.PREPARE_COMMIT and [s.commit for s in h.markers.sent] == [True]


def test_timeout_abort_whose_append_fails_bumps_the_epoch_once(h):
    """Kafka's shouldNotBumpEpochWhenAbortingExpiredTransactionIfAppendToLogFails."""
    pid, epoch = h.open_transaction("tx")
    h.time.sleep(61_000)
    h.replica_manager.errors = [errors.NOT_ENOUGH_REPLICAS]
    assert h.coordinator.abort_timed_out_transactions() == 1
    m = h.metadata("tx")
    assert (m.state, m.producer_epoch, m.has_failed_epoch_fence) == (S.ONGOING, epoch + 1, True)
    assert h.coordinator.abort_timed_out_transactions() == 1  # the next run retries with the same epoch
    assert (m.state, m.producer_epoch) == (S.PREPARE_ABORT, epoch + 1)
    assert h.markers.sent == [Markers(0, False, pid, epoch + 1, frozenset({TP0}))]


# -- DescribeTransactions / ListTransactions ------------------------------------------------------
def test_describe_transactions(h):
    pid, epoch = h.open_transaction("tx", TP2, TP1, TP0)
    d = h.coordinator.handle_describe_transactions("tx")
    assert d["error_code"] == errors.NONE
    assert (d["transaction_state"], d["producer_id"], d["producer_epoch"], d["transaction_timeout_ms"]) == (
        "Ongoing",
        pid,
        epoch,
        60_000,
    )
    assert d["topics"] == [{"topic": "t", "partitions": [0, 1]}, {"topic": "u", "partitions": [0]}]
    assert h.coordinator.handle_describe_transactions("nope")["error_code"] == errors.TRANSACTIONAL_ID_NOT_FOUND
    assert h.coordinator.handle_describe_transactions("")["error_code"] == errors.INVALID_REQUEST
    h.coordinator.shutdown()
    assert h.coordinator.handle_describe_transactions("tx")["error_code"] == errors.COORDINATOR_NOT_AVAILABLE


def test_list_transactions_filters_by_state_and_producer_id(h):
    pid_a, _ = h.open_transaction("a")
    pid_b, _ = h.init_ok("b")
    listed = h.coordinator.handle_list_transactions(set(), {"Ongoing", "Bogus"})
    assert listed["error_code"] == errors.NONE and listed["unknown_state_filters"] == ["Bogus"]
    assert listed["transaction_states"] == [
        {"transactional_id": "a", "producer_id": pid_a, "transaction_state": "Ongoing"}
    ]
    by_pid = h.coordinator.handle_list_transactions({pid_b}, set())["transaction_states"]
    assert [t["transactional_id"] for t in by_pid] == ["b"]
    assert len(h.coordinator.handle_list_transactions(set(), set())["transaction_states"]) == 2


def test_partition_for_uses_the_configured_partition_count(h):
    assert {h.coordinator.partition_for(f"id-{i}") for i in range(200)} == set(range(PARTITIONS))
