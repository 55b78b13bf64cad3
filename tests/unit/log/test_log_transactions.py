"""The log side of transactions on a real UnifiedLog: the LSO, the .txnindex, read_committed reads,
recovery after an unclean shutdown, and compaction of aborted data and markers."""

from __future__ import annotations

import os

import pytest

from pykbroker.log.fetch_data_info import FetchIsolation
from pykbroker.log.log_cleaner import LogCleaner
from pykbroker.log.log_config import LogConfig
from pykbroker.log.producer_state_entry import AppendOrigin
from pykbroker.log.unified_log import UnifiedLog
from pykbroker.protocol.errors import InvalidTxnStateError, TransactionCoordinatorFencedError
from pykbroker.record.control_record import ControlRecordType, EndTransactionMarker
from pykbroker.record.default_record_batch import iter_batches
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from pykbroker.utils.time import MockTime
from tests.unit.log.log_test_utils import assign_offsets

NOW = 1_700_000_000_000


@pytest.fixture
def time():
    return MockTime(current_ms=NOW)


def new_log(tmp_path, time, **overrides):
    return UnifiedLog.create(str(tmp_path / "txn-0"), LogConfig({"segment.bytes": 100_000, **overrides}), None, time)


class Producer:
    def __init__(self, log, pid: int, epoch: int = 0):
        self.log, self.pid, self.epoch, self.seq = log, pid, epoch, 0

    def send(self, *items: tuple[bytes | None, bytes | None]) -> None:
        b = MemoryRecordsBuilder(is_transactional=True)
        b.set_producer_state(self.pid, self.epoch, self.seq, True)
        for key, value in items:
            b.append(NOW, key, value)
        self.seq += len(items)
        self.log.append_as_leader(b.build(), 0, assign_offsets(), AppendOrigin.CLIENT)

    def end(self, commit: bool, coordinator_epoch: int = 0) -> None:
        b = MemoryRecordsBuilder(is_transactional=True, is_control_batch=True)
        b.set_producer_state(self.pid, self.epoch, -1, True)
        kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        b.append_end_txn_marker(NOW, EndTransactionMarker(kind, coordinator_epoch))
        self.log.append_as_leader(b.build(), 0, assign_offsets(), AppendOrigin.COORDINATOR)


def values(log, isolation=FetchIsolation.LOG_END) -> list[bytes | None]:
    data = log.read(log.log_start_offset, 1 << 20, isolation).records.read_bytes()
    return [r.value for _, b in iter_batches(memoryview(data)) if not b.is_control_batch for r in b.records()]


def test_lso_aborted_index_and_read_committed(tmp_path, time):
    log = new_log(tmp_path, time)
    a, b = Producer(log, 1), Producer(log, 2)
    a.send((b"k", b"a1"))  # 0
    b.send((b"k", b"b1"))  # 1
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 0
    a.end(commit=False)  # 2: ABORT; b is still open from 1
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 1
    assert [tuple(t) for t in log.active_segment.txn_index.entries] == [(1, 0, 2, 1)]
    b.end(commit=True)  # 3
    assert log.last_stable_offset == 1  # completed, but its marker is not below the HW yet
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 4 and log.first_unstable_offset is None
    info = log.read(0, 1 << 20, FetchIsolation.TXN_COMMITTED)
    assert [(t.producer_id, t.first_offset) for t in info.aborted_transactions] == [(1, 0)]
    assert log.read(0, 1 << 20, FetchIsolation.HIGH_WATERMARK).aborted_transactions is None
    with pytest.raises(TransactionCoordinatorFencedError):
        Producer(log, 2).end(commit=True, coordinator_epoch=-5)  # an older coordinator's marker


def test_unclean_shutdown_rebuilds_the_lso_and_the_aborted_index(tmp_path, time):
    log = new_log(tmp_path, time)
    a, b = Producer(log, 1), Producer(log, 2)
    a.send((b"k", b"1"))
    a.end(commit=False)
    b.send((b"k", b"2"))  # open at 2
    a.send((b"k", b"3"))
    a.end(commit=False)
    log.update_high_watermark(log.log_end_offset)
    before = (log.last_stable_offset, [tuple(t) for t in log.active_segment.txn_index.entries])
    assert before == (2, [(1, 0, 1, 2), (1, 3, 4, 2)])
    index_path = log.active_segment.txn_index.path
    log.close_handlers()  # no clean shutdown: no snapshot at the log end, no marker file
    os.unlink(index_path)  # and the index lost as well: the replay must rebuild it
    again = UnifiedLog.create(
        str(tmp_path / "txn-0"), LogConfig({"segment.bytes": 100_000}), None, time, had_clean_shutdown=False
    )
    again.update_high_watermark(again.log_end_offset)
    assert again.last_stable_offset == 2
    assert [tuple(t) for t in again.active_segment.txn_index.entries] == before[1]


def test_cleaner_drops_aborted_data_then_its_markers(tmp_path, time):
    log = new_log(
        tmp_path, time, **{"cleanup.policy": "compact", "delete.retention.ms": 0, "min.cleanable.dirty.ratio": 0.01}
    )
    committed, aborted = Producer(log, 1), Producer(log, 2)
    committed.send((b"k1", b"committed"))
    committed.end(commit=True)
    aborted.send((b"k1", b"aborted"), (b"k2", b"aborted"))
    aborted.end(commit=False)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    cleaner = LogCleaner(None, time)
    time.sleep(10)
    assert cleaner.clean(log) > 0
    # The aborted records are gone and did not shadow k1's committed value; the markers stay while this
    # pass saw their transactions' data.
    assert values(log) == [b"committed"]
    assert [tuple(t)[:3] for t in log.segments.values()[0].txn_index.entries] == [(2, 2, 4)]
    cleaner.clean(log)  # nothing of the aborted transaction is left: its marker (and index entry) can go
    assert not log.segments.values()[0].txn_index.entries
    markers = [
        b for _, b in iter_batches(memoryview(log.segments.values()[0].log.read(0, 1 << 20))) if b.is_control_batch
    ]
    assert [b.producer_id for b in markers] == [1]  # the COMMIT stays while its data does


@pytest.mark.parametrize("version_2", [True, False])
def test_the_previous_transactions_marker_keeps_a_version_2_verification(tmp_path, time, version_2):
    """Transaction version 2: the next transaction's first write (epoch + 1) may reach the leader before the
    previous transaction's marker, which carries epoch + 1 too; the verification it started survives that
    marker (Kafka 4.0's UnifiedLog.updateProducers), so the write succeeds once the coordinator added the
    partition. A version 1 verification (any other marker) still ends there."""
    log = new_log(tmp_path, time)
    log.producer_state_manager.transaction_verification_enabled = True

    def write(epoch: int, seq: int, guard) -> None:
        b = MemoryRecordsBuilder(is_transactional=True)
        b.set_producer_state(1, epoch, seq, True)
        b.append(NOW, None, f"e{epoch}".encode())
        log.append_as_leader(b.build(), 0, assign_offsets(), AppendOrigin.CLIENT, verification_guard=guard)

    write(0, 0, log.maybe_start_transaction_verification(1, 0, version_2))
    next_guard = log.maybe_start_transaction_verification(1, 1, version_2)  # the next transaction's write
    assert next_guard is not None
    Producer(log, 1, epoch=1).end(commit=True)  # the previous transaction's marker, at the bumped epoch
    if version_2:
        write(1, 0, next_guard)
        log.update_high_watermark(log.log_end_offset)
        assert values(log) == [b"e0", b"e1"] and log.last_stable_offset == 2  # e1's transaction is open
    else:
        with pytest.raises(InvalidTxnStateError):
            write(1, 0, next_guard)


def test_log_start_passing_an_open_transaction_keeps_it_out_of_read_committed(tmp_path, time):
    """DeleteRecords (or retention) moving the log start past the first offset of an open transaction: the LSO
    stays at the log start until the transaction ends, and its abort marker still indexes it (Kafka keeps the
    transaction open and clamps the first unstable offset to the log start)."""
    log = new_log(tmp_path, time)
    a = Producer(log, 1)
    a.send((b"k", b"a1"))  # 0
    a.send((b"k", b"a2"))  # 1
    log.update_high_watermark(log.log_end_offset)
    assert log.maybe_increment_log_start_offset(1)
    assert (log.first_unstable_offset, log.last_stable_offset) == (1, 1)
    assert values(log, FetchIsolation.TXN_COMMITTED) == []
    a.end(commit=False)  # 2
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 3 and log.first_unstable_offset is None
    info = log.read(1, 1 << 20, FetchIsolation.TXN_COMMITTED)
    assert [(t.producer_id, t.first_offset) for t in info.aborted_transactions] == [(1, 0)]
