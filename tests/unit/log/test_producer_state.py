"""Idempotent producer checks on append, duplicates, epochs, snapshots and their reload."""

import os

import pytest

from pykbroker.log.fetch_data_info import FetchIsolation
from pykbroker.log.log_config import LogConfig
from pykbroker.log.producer_state_entry import AppendOrigin
from pykbroker.log.producer_state_snapshot import CorruptSnapshotError, decode, encode
from pykbroker.log.unified_log import UnifiedLog
from pykbroker.protocol.errors import (
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
)
from pykbroker.record.control_record import ControlRecordType, EndTransactionMarker
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from pykbroker.utils.time import MockTime
from tests.unit.log.log_test_utils import (
    TRANSACTIONAL,
    assign_offsets,
    make_batch,
)

PID = 4242


@pytest.fixture
def time():
    return MockTime(current_ms=1_700_000_000_000)


def new_log(tmp_path, time, **overrides):
    return UnifiedLog.create(str(tmp_path / "idem-0"), LogConfig({"segment.bytes": 1000, **overrides}), None, time)


def send(log, seq, count=2, epoch=0, pid=PID, attributes=0, origin=AppendOrigin.CLIENT, time=None):
    ts = time.milliseconds() if time else 1_700_000_000_000
    data = make_batch(
        0, count, 50, producer_id=pid, producer_epoch=epoch, base_sequence=seq, attributes=attributes, max_timestamp=ts
    )
    return log.append_as_leader(data, 0, assign_offsets(), origin)


def test_in_sequence_appends(tmp_path, time):
    log = new_log(tmp_path, time)
    assert (send(log, 0).first_offset, send(log, 2).first_offset, send(log, 4).first_offset) == (0, 2, 4)
    entry = log.producer_state_manager.last_entry(PID)
    assert entry.producer_epoch == 0 and entry.last_seq == 5 and entry.last_data_offset == 5


def test_duplicate_returns_original_offsets_and_writes_nothing(tmp_path, time):
    log = new_log(tmp_path, time)
    for seq in range(0, 14, 2):
        send(log, seq)
    size, leo = log.size, log.log_end_offset
    dup = send(log, 8)  # one of the last 5 batches (seqs 4..13)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (8, 9)
    assert log.size == size and log.log_end_offset == leo
    with pytest.raises(OutOfOrderSequenceError):
        send(log, 2)  # older than the 5 retained batches: not recognised, out of order


def test_out_of_order_sequence(tmp_path, time):
    log = new_log(tmp_path, time)
    send(log, 0)
    with pytest.raises(OutOfOrderSequenceError):
        send(log, 3)
    with pytest.raises(OutOfOrderSequenceError):
        send(log, 1)  # overlaps the previous batch without being a duplicate
    assert log.log_end_offset == 2


def test_new_producer_may_start_anywhere(tmp_path, time):
    log = new_log(tmp_path, time)
    assert send(log, 17).first_offset == 0  # unknown producer: any sequence is accepted
    assert send(log, 19).first_offset == 2


def test_epoch_bump_must_start_at_zero(tmp_path, time):
    log = new_log(tmp_path, time)
    send(log, 0, epoch=1)
    with pytest.raises(OutOfOrderSequenceError):
        send(log, 5, epoch=2)
    send(log, 0, epoch=2)
    assert log.producer_state_manager.last_entry(PID).producer_epoch == 2


def test_older_epoch_is_fenced(tmp_path, time):
    log = new_log(tmp_path, time)
    send(log, 0, epoch=3)
    with pytest.raises(InvalidProducerEpochError):
        send(log, 2, epoch=2)
    with pytest.raises(InvalidProducerEpochError):
        send(log, 2, epoch=2, origin=AppendOrigin.COORDINATOR)
    assert log.log_end_offset == 2


def test_sequence_wraps_at_int_max(tmp_path, time):
    log = new_log(tmp_path, time)
    send(log, 0x7FFFFFFF - 1)  # seqs MAX-1, MAX
    assert send(log, 0).first_offset == 2


def test_transactions_bound_last_stable_offset(tmp_path, time):
    log = new_log(tmp_path, time)
    send(log, 0)  # offsets 0-1, non transactional
    send(log, 0, pid=7, attributes=TRANSACTIONAL)  # txn starts at 2
    send(log, 2)  # 4-5
    log.update_high_watermark(log.log_end_offset)
    assert log.first_unstable_offset == 2 and log.last_stable_offset == 2
    assert log.read(0, 10_000, FetchIsolation.TXN_COMMITTED).records.size_in_bytes == 111
    builder = MemoryRecordsBuilder(is_transactional=True, is_control_batch=True)
    builder.set_producer_state(7, 0, -1, True)
    builder.append_end_txn_marker(10, EndTransactionMarker(ControlRecordType.COMMIT, 0))
    log.append_as_leader(builder.build(), 0, assign_offsets(), AppendOrigin.COORDINATOR)
    log.update_high_watermark(log.log_end_offset)
    assert log.first_unstable_offset is None and log.last_stable_offset == 7


def test_snapshot_on_roll_and_reload_after_clean_shutdown(tmp_path, time):
    log = new_log(tmp_path, time)
    for seq in range(0, 40, 2):
        send(log, seq, time=time)
    snapshots = log.producer_state_manager.snapshot_offsets()
    assert snapshots and all(os.path.exists(os.path.join(log.dir, f"{o:020d}.snapshot")) for o in snapshots)
    log.close()
    again = new_log(tmp_path, time)
    entry = again.producer_state_manager.last_entry(PID)
    assert entry.last_seq == 39 and len(entry.batch_metadata) == 5
    dup = send(again, 32)
    assert dup.duplicate and dup.first_offset == 32


def test_rebuild_by_scanning_after_unclean_shutdown(tmp_path, time):
    log = new_log(tmp_path, time)
    for seq in range(0, 40, 2):
        send(log, seq, time=time)
    # crash: no close, no snapshot at the log end; the state is rebuilt from the last roll's snapshot
    again = UnifiedLog.create(log.dir, log.config, None, time, had_clean_shutdown=False)
    assert again.producer_state_manager.last_entry(PID).last_seq == 39
    with pytest.raises(OutOfOrderSequenceError):
        send(again, 50)
    assert send(again, 38).duplicate


def test_corrupt_snapshot_falls_back(tmp_path, time):
    log = new_log(tmp_path, time)
    for seq in range(0, 40, 2):
        send(log, seq, time=time)
    log.close()
    latest = max(log.producer_state_manager.snapshot_offsets())
    path = os.path.join(log.dir, f"{latest:020d}.snapshot")
    with open(path, "r+b") as f:
        f.seek(20)
        f.write(b"\x55\x55")
    again = new_log(tmp_path, time)
    assert again.producer_state_manager.last_entry(PID).last_seq == 39  # older snapshot + scan
    with open(path, "rb") as f:  # rewritten at the log end after the rebuild, valid again
        assert decode(f.read())[0].last_seq == 39


def test_snapshot_codec_round_trip_and_crc():
    from pykbroker.log.producer_state_entry import ProducerStateEntry

    e = ProducerStateEntry(1, 2, 3, 4, None)
    e.add_batch(2, 9, 100, 4, 77)
    data = encode([e])
    [back] = decode(data)
    assert back.producer_epoch == 2 and list(back.batch_metadata) == list(e.batch_metadata)
    with pytest.raises(CorruptSnapshotError):
        decode(data[:-1] + b"\x00")


def test_expired_producers_are_removed(tmp_path, time):
    log = UnifiedLog.create(str(tmp_path / "exp-0"), LogConfig(), None, time, producer_id_expiration_ms=1000)
    send(log, 0, time=time)
    time.sleep(999)
    assert log.remove_expired_producers() == 0
    time.sleep(1)
    assert log.remove_expired_producers() == 1
    assert send(log, 99).first_offset == 2  # unknown again: any sequence
