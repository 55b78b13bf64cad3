"""UnifiedLog.append_as_leader's fast path (one batch without a producer id or a client's idempotent or
transactional data batch: _append_plain_locked with LogSegment.append_unless_roll) leaves the log exactly as
the general path (_append_locked) does."""

import os

import pytest

from pykbroker.log.log_config import LogConfig
from pykbroker.log.log_segment import LogSegment
from pykbroker.log.log_validator import LOG_APPEND_TIME, LogValidator
from pykbroker.log.producer_state_entry import AppendOrigin
from pykbroker.log.unified_log import UnifiedLog
from pykbroker.protocol.errors import KafkaError
from pykbroker.record.control_record import ControlRecordType, EndTransactionMarker
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from pykbroker.utils.time import MockTime
from tests.unit.log.log_test_utils import make_batch

START_MS = 10_000_000


def general_path(
    self, buf, first, last, max_ts, offset_of_max, count, log_append_time, epoch, idempotent=None, guard=None
):
    """What append_as_leader did before the fast path: the general append of the batch's headers."""
    headers = self._batch_headers(buf, verify=False)
    return self._append_locked(
        buf, headers, first, last, max_ts, offset_of_max, count, log_append_time, AppendOrigin.CLIENT, epoch, guard
    )


def end_marker(pid: int, epoch: int, commit: bool) -> bytes:
    b = MemoryRecordsBuilder(is_transactional=True, is_control_batch=True)
    b.set_producer_state(pid, epoch, -1, True)
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    b.append_end_txn_marker(START_MS, EndTransactionMarker(kind, 0))
    return b.build()


def run(tmp_path, name, overrides, steps):
    """Apply ``steps`` to a new log; returns what each step returned and the closed log's files."""
    time = MockTime(current_ms=START_MS)
    config = LogConfig({"file.delete.delay.ms": 0, **overrides})
    log = UnifiedLog.create(str(tmp_path / name / "topic-0"), config, None, time)
    append_time = LOG_APPEND_TIME if overrides.get("message.timestamp.type") == "LogAppendTime" else 0
    results = []
    for step in steps:
        if step[0] == "sleep":
            time.sleep(step[1])
            continue
        if step[0] == "verify":  # KIP-890 part 1 transaction verification on
            log.producer_state_manager.transaction_verification_enabled = True
            continue
        origin, kwargs = AppendOrigin.CLIENT, {}
        if step[0] == "marker":  # the coordinator's end of a transaction (the general path)
            _, epoch, pid, producer_epoch, commit = step
            batch, origin = end_marker(pid, producer_epoch, commit), AppendOrigin.COORDINATOR
        else:
            _, epoch, batch_args, *guarded = step
            batch = make_batch(0, **batch_args)
            if guarded:  # the coordinator confirmed the partition is in the transaction
                guard = log.maybe_start_transaction_verification(
                    batch_args["producer_id"], batch_args["producer_epoch"]
                )
                kwargs["verification_guard"] = guard

        def validate(records, next_offset, epoch=epoch, origin=origin):
            return LogValidator(
                records, "topic-0", time, partition_leader_epoch=epoch, timestamp_type=append_time, origin=origin
            ).validate_messages_and_assign_offsets(next_offset)

        try:
            info = log.append_as_leader(bytearray(batch), epoch, validate, origin, **kwargs)
            results.append(info)
            log.maybe_increment_high_watermark_to_end()
        except KafkaError as e:
            results.append((type(e), str(e)))
        results.append(
            (
                log.log_end_offset_metadata,
                log.high_watermark,
                log.recovery_point,
                [(s.base_offset, s.size) for s in log.segments],
                log.leader_epoch_cache.epoch_entries(),
                log.last_stable_offset,
                log.producer_state_manager.first_unstable_offset,
            )
        )
    log.close()
    directory = tmp_path / name / "topic-0"
    files = {f: (directory / f).read_bytes() for f in sorted(os.listdir(directory))}
    return results, files


def plain(count=2, payload=100, ts=None):
    return {"count": count, "payload": payload, **({"max_timestamp": ts, "base_timestamp": ts} if ts else {})}


def idempotent(pid, epoch, sequence, count=2, **kw):
    return {"count": count, "producer_id": pid, "producer_epoch": epoch, "base_sequence": sequence, **kw}


TXN = 0x10

SCENARIOS = {
    "transactions": (
        {"segment.bytes": 3000, "index.interval.bytes": 200},
        [
            ("append", 0, idempotent(20, 0, 0, attributes=TXN)),  # no verification: a transaction starts
            ("append", 0, idempotent(20, 0, 2, attributes=TXN)),
            ("append", 0, idempotent(20, 0, 2, attributes=TXN)),  # a duplicate
            ("append", 0, idempotent(20, 0, 4)),  # not transactional inside its transaction: INVALID_TXN_STATE
            ("append", 0, plain()),
            ("marker", 0, 20, 0, True),
            ("verify",),
            ("append", 0, idempotent(20, 0, 4, attributes=TXN)),  # unverified start: INVALID_TXN_STATE
            ("append", 0, idempotent(20, 0, 4, attributes=TXN), "guard"),  # verified: starts
            ("append", 0, idempotent(20, 0, 6, attributes=TXN)),  # ongoing: no guard needed
            ("append", 0, idempotent(21, 0, 0, attributes=TXN), "guard"),
            ("marker", 0, 20, 0, False),
            ("append", 0, idempotent(20, 0, 8, attributes=TXN)),  # after the abort, unverified: INVALID_TXN_STATE
            ("append", 0, idempotent(21, 0, 2, attributes=TXN)),
            ("marker", 0, 21, 0, True),
            ("append", 0, idempotent(20, 1, 0, attributes=TXN), "guard"),  # a new epoch, verified
            ("append", 0, idempotent(20, 0, 10, attributes=TXN), "guard"),  # a fenced epoch
        ],
    ),
    "idempotent producers": (
        {"segment.bytes": 1500, "index.interval.bytes": 200},
        [
            ("append", 0, idempotent(9, 0, 0, count=3)),
            ("append", 0, idempotent(9, 0, 3)),
            ("append", 0, idempotent(9, 0, 3)),  # a duplicate: the original offsets, nothing written
            ("append", 0, idempotent(9, 0, 0, count=3)),  # an older duplicate
            ("append", 0, idempotent(9, 0, 10)),  # a gap: OUT_OF_ORDER_SEQUENCE_NUMBER
            ("append", 0, idempotent(7, 0, 0)),
            ("append", 0, idempotent(9, 1, 0)),  # epoch bump
            ("append", 0, idempotent(9, 0, 5)),  # fenced epoch: INVALID_PRODUCER_EPOCH
            ("append", 1, idempotent(9, 1, 2, count=4)),
            ("append", 1, plain()),
            ("append", 1, idempotent(11, 0, 0, attributes=0x10)),  # transactional: the general path in both
            ("append", 1, idempotent(11, 0, 2)),  # not transactional inside its transaction: INVALID_TXN_STATE
            ("append", 1, idempotent(7, 0, 2, count=30)),
        ],
    ),
    "size rolls and index entries": (
        {"segment.bytes": 1000, "index.interval.bytes": 300},
        [("append", 0, plain(ts=START_MS + i)) for i in range(20)],
    ),
    "full indexes roll": (
        {"segment.index.bytes": 48, "index.interval.bytes": 10},
        [("append", 0, plain(ts=START_MS + i)) for i in range(14)],
    ),
    "too large for a segment": (
        {"segment.bytes": 1000},
        [("append", 0, plain()), ("append", 0, plain(payload=1200)), ("append", 0, plain())],
    ),
    "time rolls from batch timestamps": (
        {"segment.ms": 60_000},
        [step for i in range(6) for step in (("append", 0, plain(ts=START_MS + i * 40_000)), ("sleep", 40_000))],
    ),
    "time rolls without timestamps": (
        {"segment.ms": 60_000},
        [step for _ in range(6) for step in (("append", 0, plain(ts=-1)), ("sleep", 40_000))],
    ),
    "log append time and flush.messages": (
        {"message.timestamp.type": "LogAppendTime", "flush.messages": 3},
        [step for _ in range(7) for step in (("append", 0, plain()), ("sleep", 5))],
    ),
    "epochs and idempotent batches in between": (
        {"segment.bytes": 2000, "index.interval.bytes": 100},
        [
            ("append", 0, plain()),
            ("append", 0, {"count": 3, "producer_id": 9, "producer_epoch": 0, "base_sequence": 0}),
            ("append", 1, plain()),
            ("append", 1, plain(count=5, payload=10)),
            ("append", 3, plain()),
            ("append", 3, {"count": 1, "producer_id": 9, "producer_epoch": 0, "base_sequence": 3}),
            ("append", 3, plain(ts=START_MS)),
        ],
    ),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_fast_path_leaves_the_log_as_the_general_path(tmp_path, monkeypatch, scenario):
    overrides, steps = SCENARIOS[scenario]
    calls = []
    real_fast = LogSegment.append_unless_roll

    def counted(self, *args):
        calls.append(1)
        return real_fast(self, *args)

    monkeypatch.setattr(LogSegment, "append_unless_roll", counted)
    fast = run(tmp_path, "fast", overrides, steps)
    assert calls, "the fast path was not taken"
    monkeypatch.setattr(UnifiedLog, "_append_plain_locked", general_path)
    general = run(tmp_path, "general", overrides, steps)
    assert fast[0] == general[0]
    assert fast[1] == general[1]
