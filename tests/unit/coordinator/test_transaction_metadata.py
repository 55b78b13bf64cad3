"""TransactionMetadata's transition table, the __transaction_state record formats and partitioning."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykbroker.coordinator.transaction import transaction_log as txn_log
from pykbroker.coordinator.transaction.transaction_metadata import (
    VALID_PREVIOUS_STATES,
    IllegalTransitionError,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from pykbroker.protocol import errors

S = TransactionState


def test_java_string_hash_and_partition_match_kafka():
    # Values of Java's "...".hashCode()
    assert txn_log.java_string_hash("") == 0
    assert txn_log.java_string_hash("a") == 97
    assert txn_log.java_string_hash("hello") == 99162322
    h = txn_log.java_string_hash("polygenelubricants")
    assert h == -2147483648  # Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0
    assert txn_log.partition_for("polygenelubricants", 50) == 0
    assert txn_log.partition_for("hello", 50) == 99162322 % 50


def test_transition_table_is_kafkas():
    assert VALID_PREVIOUS_STATES[S.PREPARE_COMMIT] == {S.ONGOING}
    assert VALID_PREVIOUS_STATES[S.PREPARE_ABORT] == {S.ONGOING, S.PREPARE_EPOCH_FENCE}
    assert VALID_PREVIOUS_STATES[S.COMPLETE_COMMIT] == {S.PREPARE_COMMIT}
    assert VALID_PREVIOUS_STATES[S.EMPTY] == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert S.ONGOING.state_name == "Ongoing" and S.from_name("PrepareEpochFence") is S.PREPARE_EPOCH_FENCE


def _complete(m: TransactionMetadata, t: TxnTransitMetadata) -> None:
    m.complete_transition_to(t)


def test_a_transaction_goes_through_its_states():
    m = TransactionMetadata("t", 42, txn_timeout_ms=1000)
    init = m.prepare_increment_producer_epoch(1000, None, now_ms=1)
    assert isinstance(init, TxnTransitMetadata) and init.producer_epoch == 0
    with pytest.raises(IllegalTransitionError):
        m.prepare_add_partitions({("x", 0)}, 2)  # a transition is pending already
    _complete(m, init)
    add = m.prepare_add_partitions({("x", 0), ("x", 1)}, 5)
    _complete(m, add)
    assert m.state is S.ONGOING and m.txn_start_timestamp == 5
    commit = m.prepare_abort_or_commit(S.PREPARE_COMMIT, 6)
    _complete(m, commit)
    m.remove_partition(("x", 0))
    m.remove_partition(("x", 1))
    done = m.prepare_complete(7)
    _complete(m, done)
    assert m.state is S.COMPLETE_COMMIT and not m.topic_partitions
    with pytest.raises(IllegalTransitionError):
        m.prepare_abort_or_commit(S.PREPARE_ABORT, 8)  # CompleteCommit -> PrepareAbort is not allowed


def test_kip_360_retry_with_the_previous_epoch_gets_the_current_one():
    m = TransactionMetadata("t", 7, producer_epoch=3, last_producer_epoch=2, state=S.EMPTY)
    t = m.prepare_increment_producer_epoch(1000, 2, 1)
    assert (t.producer_epoch, t.last_producer_epoch) == (3, 2)
    m.abort_transition()
    assert m.prepare_increment_producer_epoch(1000, 1, 1) == errors.PRODUCER_FENCED


def test_fencing_bumps_the_epoch_of_an_ongoing_transaction():
    m = TransactionMetadata("t", 7, producer_epoch=3, state=S.ONGOING, topic_partitions={("x", 0)})
    fence = m.prepare_fence_producer_epoch()
    assert fence.txn_state is S.PREPARE_EPOCH_FENCE and fence.producer_epoch == 4


@given(
    tid=st.text(min_size=1, max_size=20),
    pid=st.integers(0, 2**62),
    epoch=st.integers(0, 32766),
    timeout=st.integers(1, 2**31 - 1),
    state=st.sampled_from([s for s in S if s is not S.DEAD]),
    tps=st.frozensets(st.tuples(st.text(min_size=1, max_size=10), st.integers(0, 1000)), max_size=5),
    ts=st.integers(-1, 2**50),
    version=st.sampled_from([0, 1]),
    previous=st.sampled_from([-1, 5]),
)
def test_value_round_trip(tid, pid, epoch, timeout, state, tps, ts, version, previous):
    t = TxnTransitMetadata(pid, previous, epoch, -1, timeout, state, tps, ts, ts + 1)
    assert txn_log.decode_key(txn_log.key_bytes(tid)) == tid
    value = txn_log.value_bytes(t, version)
    assert value[:2] == bytes([0, version])
    m = txn_log.decode_value(tid, value)
    assert (m.producer_id, m.producer_epoch, m.txn_timeout_ms, m.state) == (pid, epoch, timeout, state)
    assert m.topic_partitions == set(tps) and m.txn_start_timestamp == ts and m.txn_last_update_timestamp == ts + 1
    assert m.previous_producer_id == (previous if version == 1 else -1)


def test_flexible_value_layout():
    """TransactionLogValue v1 as Kafka's generated code writes it: compact arrays/strings, tagged fields."""
    t = TxnTransitMetadata(1000, 999, 3, 2, 60000, S.ONGOING, frozenset({("a", 0)}), 5, 6)
    assert txn_log.value_bytes(t, 1).hex() == (
        "0001"
        "00000000000003e8"
        "0003"
        "0000ea60"
        "01"  # version, producer id, epoch, timeout, state
        "02"
        "0261"
        "02"
        "00000000"
        "00"  # [{topic "a", [0]}] with no tags
        "0000000000000006"
        "0000000000000005"  # last update, start
        "01"
        "00"
        "08"
        "00000000000003e7"  # tag 0 PreviousProducerId = 999
    )


def test_unknown_versions_are_rejected():
    with pytest.raises(ValueError):
        txn_log.decode_key(b"\x00\x05\x00\x01a")
    with pytest.raises(ValueError):
        txn_log.decode_value("t", b"\x00\x09")
