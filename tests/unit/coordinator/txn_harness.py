"""A TransactionCoordinator over a real TransactionStateManager, in process: ``__transaction_state`` appends
land in an in-memory log (a fake ReplicaManager/LogManager) that the manager loads back on an election; a
fake marker channel records the markers the coordinator asks for and completes a transaction on demand
(as the TransactionMarkerChannelManager does once every partition acknowledged); a MockScheduler and a
MockTime drive partition loads, the timeout abort and the expiration tasks. Synchronous wrappers of the
callback APIs return what the callback got.

Fault injection: ``replica_manager.errors`` (error codes the next appends answer, before anything is
written), ``replica_manager.hold = True`` (appends wait in ``replica_manager.held`` until
``release()``), ``pids.error`` (the ProducerIdManager fails)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import NamedTuple

from pykbroker.coordinator.transaction import transaction_log as txn_log
from pykbroker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from pykbroker.coordinator.transaction.transaction_metadata import TransactionMetadata
from pykbroker.coordinator.transaction.transaction_state_manager import TransactionStateManager
from pykbroker.metadata.topic_names import TRANSACTION_STATE_TOPIC_NAME
from pykbroker.protocol import errors
from pykbroker.record.default_record_batch import RecordBatch, iter_batches
from pykbroker.server.append_result import ProducePartitionResult
from pykbroker.utils.scheduler import MockScheduler
from pykbroker.utils.time import MockTime

PARTITIONS = 4
MAX_TIMEOUT_MS = 900_000
ABORT_INTERVAL_MS = 10_000
EXPIRATION_MS = 604_800_000
CONFIG = {
    "transaction.state.log.num.partitions": PARTITIONS,
    "transaction.max.timeout.ms": MAX_TIMEOUT_MS,
    "transactional.id.expiration.ms": EXPIRATION_MS,
    "request.timeout.ms": 30_000,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": ABORT_INTERVAL_MS,
    "transaction.remove.expired.transaction.cleanup.interval.ms": 3_600_000,
}
NOW = 1_700_000_000_000


class FakeLog:
    """A ``__transaction_state`` partition: batches with offsets, read back whole from an offset."""

    def __init__(self):
        self.batches: list[bytes] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.fail_reads = False

    def append(self, data: bytes) -> None:
        buf = bytearray(data)
        pos = 0
        while pos < len(buf):
            batch = RecordBatch.at(memoryview(buf), pos)
            batch.set_base_offset(self.log_end_offset)
            self.log_end_offset = batch.next_offset
            pos += batch.size_in_bytes
        self.batches.append(bytes(buf))

    def read(self, offset, max_bytes, isolation):
        if self.fail_reads:
            raise OSError("disk gone")
        data = b"".join(b for b in self.batches if RecordBatch.at(memoryview(b), 0).next_offset > offset)
        return SimpleNamespace(records=SimpleNamespace(read_bytes=lambda: data))

    def records(self) -> list[tuple[str, bytes | None]]:
        """``[(transactional id, value or None)]`` of the data records, in offset order."""
        out = []
        for data in self.batches:
            for _, batch in iter_batches(memoryview(data)):
                if batch.is_control_batch:
                    continue
                for r in batch.records():
                    out.append((txn_log.decode_key(r.key), None if r.value is None else bytes(r.value)))
        return out


class FakeLogManager:
    def __init__(self):
        self.logs: dict[int, FakeLog] = {}

    def log(self, partition: int) -> FakeLog:
        return self.logs.setdefault(partition, FakeLog())

    def get_log(self, topic, partition):
        assert topic == TRANSACTION_STATE_TOPIC_NAME
        return self.logs.get(partition)


class FakeReplicaManager:
    """``append_records`` writes to the FakeLogManager's logs and answers at once (acks=-1 with one replica)."""

    def __init__(self, logs: FakeLogManager):
        self.logs = logs
        self.errors: list[int] = []
        self.hold = False
        self.held: list = []
        self.appends = 0

    def append_records(self, timeout, acks, internal, entries, callback, origin=None):
        assert acks == -1 and internal
        self.appends += 1
        if self.hold:
            self.held.append((entries, callback))
            return
        self._complete(entries, callback, self.errors.pop(0) if self.errors else errors.NONE)

    def _complete(self, entries, callback, code: int) -> None:
        if code == errors.NONE:
            for (_topic, partition), data in entries.items():
                self.logs.log(partition).append(bytes(data))
        callback({tp: ProducePartitionResult.error(code) if code else ProducePartitionResult(code) for tp in entries})

    def release(self, code: int = errors.NONE) -> int:
        """Complete the held appends with ``code``; returns how many."""
        held, self.held, self.hold = self.held, [], False
        for entries, callback in held:
            self._complete(entries, callback, code)
        return len(held)


class Markers(NamedTuple):
    coordinator_epoch: int
    commit: bool
    producer_id: int
    producer_epoch: int
    partitions: frozenset


class FakeMarkerChannel:
    """Records the markers asked for; ``complete(tid)`` plays the TransactionMarkerChannelManager once every
    partition acknowledged: the partitions leave the transaction and Complete* is appended."""

    def __init__(self, state_manager: TransactionStateManager, time):
        self.state_manager = state_manager
        self.time = time
        self.sent: list[Markers] = []
        self.pending: dict[str, tuple[int, TransactionMetadata]] = {}
        self.removed: list[int] = []

    def start(self) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def add_txn_markers_to_send(self, coordinator_epoch, commit, metadata, transit) -> None:
        self.sent.append(
            Markers(coordinator_epoch, commit, transit.producer_id, transit.producer_epoch, transit.topic_partitions)
        )
        self.pending[metadata.transactional_id] = (coordinator_epoch, metadata)

    def remove_markers_for_txn_topic_partition(self, partition: int) -> None:
        self.removed.append(partition)
        for tid in [t for t in self.pending if self.state_manager.partition_for(t) == partition]:
            del self.pending[tid]

    def complete(self, transactional_id: str) -> int:
        """Every marker of the transaction was written: append Complete*; returns the append's error code."""
        coordinator_epoch, m = self.pending.pop(transactional_id)
        with m.lock:
            for tp in list(m.topic_partitions):
                m.remove_partition(tp)
            transit = m.prepare_complete(self.time.milliseconds())
        out: list[int] = []
        self.state_manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit, out.append)
        return out[0]


class FakeProducerIds:
    def __init__(self, first: int = 1000):
        self.next = first
        self.error = errors.NONE

    def generate_producer_id(self, callback) -> None:
        if self.error != errors.NONE:
            return callback(self.error, -1)
        self.next += 1
        return callback(errors.NONE, self.next)


class TxnHarness:
    def __init__(self, elect: bool = True, transaction_version: int = 0, **config):
        self.time = MockTime(current_ms=NOW)
        self.scheduler = MockScheduler(self.time)
        self.log_manager = FakeLogManager()
        self.replica_manager = FakeReplicaManager(self.log_manager)
        self.config = dict(CONFIG, **config)
        self.manager = TransactionStateManager(
            1,
            self.replica_manager,
            self.log_manager,
            self.config,
            self.time,
            self.scheduler,
            lambda: transaction_version,
        )
        self.markers = FakeMarkerChannel(self.manager, self.time)
        self.pids = FakeProducerIds()
        self.coordinator = TransactionCoordinator(
            1, self.config, self.manager, self.markers, self.pids, self.scheduler, self.time
        )
        self.coordinator.startup()
        if elect:
            for p in range(self.config["transaction.state.log.num.partitions"]):
                self.coordinator.on_election(p, 0)
            self.scheduler.tick()

    # -- synchronous request wrappers ---------------------------------------------------------
    def init(self, tid: str, timeout_ms: int = 60_000, expected: tuple[int, int] | None = None) -> tuple:
        """InitProducerId: ``(error_code, producer_id, producer_epoch)``."""
        out: list = []
        self.coordinator.handle_init_producer_id(tid, timeout_ms, expected, lambda *r: out.append(r))
        assert len(out) == 1, out
        return out[0]

    def init_ok(self, tid: str, **kw) -> tuple[int, int]:
        code, pid, epoch = self.init(tid, **kw)
        assert code == errors.NONE, errors.name_of(code)
        return pid, epoch

    def add(self, tid: str, pid: int, epoch: int, *tps, tv: int = 0) -> int:
        """AddPartitionsToTxn: the error code."""
        out: list = []
        self.coordinator.handle_add_partitions_to_transaction(tid, pid, epoch, set(tps or [("t", 0)]), out.append, tv)
        assert len(out) <= 1
        return out[0] if out else None

    def end(self, tid: str, pid: int, epoch: int, commit: bool, tv: int = 0):
        """EndTxn: ``(error_code, producer_id, producer_epoch)``, None while its append is held."""
        out: list = []
        self.coordinator.handle_end_transaction(tid, pid, epoch, commit, lambda *r: out.append(r), tv)
        assert len(out) <= 1
        return out[0] if out else None

    def verify(self, tid: str, pid: int, epoch: int, *tps) -> dict:
        return self.coordinator.handle_verify_partitions_in_transaction(tid, pid, epoch, set(tps))

    # -- state --------------------------------------------------------------------------------
    def metadata(self, tid: str) -> TransactionMetadata:
        entry = self.manager.get_transaction_state(tid)
        assert entry is not None
        return entry.metadata

    def written(self, tid: str) -> list:
        """Every value written for ``tid`` decoded (None for a tombstone), oldest first."""
        log = self.log_manager.log(self.manager.partition_for(tid))
        return [None if v is None else txn_log.decode_value(t, v) for t, v in log.records() if t == tid]

    def open_transaction(self, tid: str = "tx", *tps) -> tuple[int, int]:
        """InitProducerId + AddPartitionsToTxn: an Ongoing transaction; ``(producer id, epoch)``."""
        pid, epoch = self.init_ok(tid)
        assert self.add(tid, pid, epoch, *tps) == errors.NONE
        return pid, epoch
