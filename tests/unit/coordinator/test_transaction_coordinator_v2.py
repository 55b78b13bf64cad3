"""TransactionCoordinator at transaction version 2 (KIP-890 part 2) over an in-memory state manager: the epoch
bump at every EndTxn, the new producer id when the bump reaches Short.MaxValue, EndTxn retries, fencing of the
previous epoch, and version 1 transactions unchanged beside them."""

from __future__ import annotations

import pytest

from pykbroker.coordinator.transaction import transaction_log as txn_log
from pykbroker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from pykbroker.coordinator.transaction.transaction_metadata import (
    SHORT_MAX,
    TransactionMetadata,
    TransactionState,
)
from pykbroker.coordinator.transaction.transaction_state_manager import CoordinatorEpochAndMetadata
from pykbroker.protocol import errors
from pykbroker.utils.time import MockTime

S = TransactionState
TP = ("t", 0)


class _StateManager:
    """Appends succeed at once; records every transit written."""

    def __init__(self, transaction_version: int = 0):
        self.entries: dict[str, CoordinatorEpochAndMetadata] = {}
        self.written: list = []
        self.transaction_version = lambda: transaction_version

    def partition_for(self, tid):
        return 0

    def coordinator_epoch_of(self, partition):
        return 1

    def validate_transaction_timeout_ms(self, timeout_ms):
        return 0 < timeout_ms <= 900000

    def get_transaction_state(self, tid):
        return self.entries.get(tid)

    def put_transaction_state_if_not_exists(self, m):
        return self.entries.setdefault(m.transactional_id, CoordinatorEpochAndMetadata(1, m))

    def append_transaction_to_log(self, tid, coordinator_epoch, transit, callback, retry_on_error=None):
        m = self.entries[tid].metadata
        with m.lock:
            m.complete_transition_to(transit)
        self.written.append(transit)
        callback(errors.NONE)


class _Markers:
    def __init__(self, state_manager):
        self.sm = state_manager
        self.sent: list = []  # (commit, producer id, epoch of the markers, partitions)

    def add_txn_markers_to_send(self, coordinator_epoch, commit, m, transit):
        self.sent.append((commit, transit.producer_id, transit.producer_epoch, set(transit.topic_partitions)))

    def write_all(self, tid):
        """The markers were written: Complete*."""
        m = self.sm.entries[tid].metadata
        with m.lock:
            for tp in list(m.topic_partitions):
                m.remove_partition(tp)
            transit = m.prepare_complete(0)
        self.sm.append_transaction_to_log(tid, 1, transit, lambda code: None)


class _ProducerIds:
    def __init__(self):
        self.next = 1000

    def generate_producer_id(self, callback):
        self.next += 1
        callback(errors.NONE, self.next)


def _coordinator(transaction_version: int = 0):
    sm = _StateManager(transaction_version)
    markers = _Markers(sm)
    c = TransactionCoordinator(1, {}, sm, markers, _ProducerIds(), None, MockTime())
    return c, sm, markers


def _call(fn, *args):
    out = []
    fn(*args, lambda *r: out.append(r))
    assert len(out) == 1
    return out[0] if len(out[0]) > 1 else out[0][0]


def _init(c, tid="tx"):
    code, pid, epoch = _call(c.handle_init_producer_id, tid, 60000, None)
    assert code == errors.NONE
    return pid, epoch


def _add(c, pid, epoch, tv, tid="tx"):
    out = []
    c.handle_add_partitions_to_transaction(tid, pid, epoch, {TP}, out.append, tv)
    return out[0]


def _end(c, pid, epoch, commit, tv, tid="tx"):
    out = []
    c.handle_end_transaction(tid, pid, epoch, commit, lambda *r: out.append(r), tv)
    return out[0]


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_v5_bumps_the_epoch_and_the_markers_carry_it(commit):
    c, sm, markers = _coordinator()
    pid, epoch = _init(c)
    assert _add(c, pid, epoch, 2) == errors.NONE
    assert _end(c, pid, epoch, commit, 2) == (errors.NONE, pid, epoch + 1)
    assert markers.sent == [(commit, pid, epoch + 1, {TP})]
    m = sm.entries["tx"].metadata
    assert (m.state, m.producer_epoch, m.last_producer_epoch) == (
        S.PREPARE_COMMIT if commit else S.PREPARE_ABORT,
        epoch + 1,
        epoch,
    )
    markers.write_all("tx")
    assert m.state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT) and m.producer_epoch == epoch + 1
    # the next transaction uses the bumped epoch; the previous one is fenced
    assert _add(c, pid, epoch, 2) == errors.PRODUCER_FENCED
    assert _add(c, pid, epoch + 1, 2) == errors.NONE
    assert _end(c, pid, epoch, commit, 2)[0] == errors.PRODUCER_FENCED
    assert _end(c, pid, epoch + 1, commit, 2) == (errors.NONE, pid, epoch + 2)


def test_end_txn_v5_retried_with_the_previous_epoch_is_answered_with_the_bumped_one():
    c, _sm, markers = _coordinator()
    pid, epoch = _init(c)
    _add(c, pid, epoch, 2)
    assert _end(c, pid, epoch, True, 2) == (errors.NONE, pid, epoch + 1)
    assert _end(c, pid, epoch, True, 2)[0] == errors.CONCURRENT_TRANSACTIONS  # markers still pending
    markers.write_all("tx")
    assert _end(c, pid, epoch, True, 2) == (errors.NONE, pid, epoch + 1)  # a retry after completion
    assert _end(c, pid, epoch, False, 2)[0] == errors.INVALID_TXN_STATE
    assert _end(c, pid, epoch - 1 if epoch else epoch + 5, True, 2)[0] == errors.PRODUCER_FENCED


def test_epoch_overflow_moves_the_transaction_to_a_new_producer_id():
    c, sm, markers = _coordinator()
    pid, _ = _init(c)
    m = sm.entries["tx"].metadata
    m.producer_epoch = SHORT_MAX - 1  # the last epoch a transaction may start with
    _add(c, pid, SHORT_MAX - 1, 2)
    code, new_pid, new_epoch = _end(c, pid, SHORT_MAX - 1, True, 2)
    assert code == errors.NONE and new_pid != pid and new_epoch == 0
    assert markers.sent == [(True, pid, SHORT_MAX, {TP})]  # the markers use the old id at the last epoch
    assert (m.producer_id, m.next_producer_id) == (pid, new_pid)
    markers.write_all("tx")
    assert (m.producer_id, m.producer_epoch, m.previous_producer_id, m.next_producer_id) == (new_pid, 0, pid, -1)
    # a retry of the EndTxn that overflowed is recognised
    assert _end(c, pid, SHORT_MAX - 1, True, 2) == (errors.NONE, new_pid, 0)
    assert _add(c, new_pid, 0, 2) == errors.NONE


def test_version_1_transactions_keep_their_epoch_beside_version_2():
    c, _sm, markers = _coordinator()
    pid, epoch = _init(c, "v1")
    assert _add(c, pid, epoch, 0, "v1") == errors.NONE
    assert _end(c, pid, epoch, True, 0, "v1") == (errors.NONE, pid, epoch)
    assert markers.sent == [(True, pid, epoch, {TP})]
    markers.write_all("v1")
    assert _end(c, pid, epoch, True, 0, "v1") == (errors.NONE, pid, epoch)  # v1 retry: same epoch
    pid2, epoch2 = _init(c, "v2")
    _add(c, pid2, epoch2, 2, "v2")
    assert _end(c, pid2, epoch2, True, 2, "v2") == (errors.NONE, pid2, epoch2 + 1)


def test_the_log_value_keeps_the_next_producer_id_and_the_client_version():
    c, sm, _markers = _coordinator()
    pid, _ = _init(c)
    sm.entries["tx"].metadata.producer_epoch = SHORT_MAX - 1
    _add(c, pid, SHORT_MAX - 1, 2)
    _end(c, pid, SHORT_MAX - 1, False, 2)
    prepare = sm.written[-1]
    assert prepare.txn_state is S.PREPARE_ABORT and prepare.next_producer_id > 0
    loaded = txn_log.decode_value("tx", txn_log.value_bytes(prepare, 1))
    assert isinstance(loaded, TransactionMetadata)
    assert (loaded.producer_id, loaded.producer_epoch, loaded.next_producer_id, loaded.client_transaction_version) == (
        pid,
        SHORT_MAX,
        prepare.next_producer_id,
        2,
    )


def test_timeout_abort_of_a_transaction_uses_the_finalized_transaction_version():
    for tv, bumps in ((0, 1), (2, 2)):
        c, sm, markers = _coordinator(transaction_version=tv)
        pid, epoch = _init(c)
        _add(c, pid, epoch, 0)
        c.time.sleep(61000)
        sm.timed_out_transactions = lambda pid=pid, epoch=epoch: [("tx", pid, epoch)]
        assert c.abort_timed_out_transactions() == 1
        assert markers.sent == [(False, pid, epoch + bumps, {TP})]
