"""Groups load in the background when this broker becomes leader of their ``__consumer_offsets`` partition
(Kafka's ``GroupMetadataManager.scheduleLoadGroupAndOffsets``): the load starts at the election, without
any request, on the manager's scheduler thread; meanwhile requests for the partition's groups answer
COORDINATOR_LOAD_IN_PROGRESS (Heartbeat NONE, SyncGroup REBALANCE_IN_PROGRESS); a resignation discards a
load in progress; transaction markers written while it loads apply to what it loads."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from pykbroker.coordinator.group import record_codec as codec
from pykbroker.coordinator.group.group_metadata import GroupState, OffsetAndMetadata
from pykbroker.protocol import errors
from pykbroker.record.control_record import ControlRecordType, EndTransactionMarker
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from pykbroker.utils.scheduler import KafkaScheduler
from tests.helpers.wait import wait_until
from tests.unit.coordinator.harness import Harness


class SlowLog:
    """A ``__consumer_offsets`` log holding ``batches`` whose reads wait until ``release`` is set."""

    def __init__(self, batches: list[bytes], end_offset: int):
        self.data = b"".join(batches)
        self.log_start_offset = 0
        self.log_end_offset = end_offset
        self.reading = threading.Event()
        self.release = threading.Event()

    def read(self, offset, max_bytes, isolation):
        self.reading.set()
        assert self.release.wait(10), "the test never released the load"
        return SimpleNamespace(records=SimpleNamespace(read_bytes=lambda: self.data))


class OneLogManager:
    def __init__(self, log):
        self.log = log

    def get_log(self, topic, partition):
        return self.log


def offsets_batch(base: int, group: str, offsets: dict, producer: tuple[int, int] | None = None) -> bytes:
    b = MemoryRecordsBuilder(base, is_transactional=producer is not None)
    if producer is not None:
        b.set_producer_state(producer[0], producer[1], 0, True)
    for (topic, partition), offset in offsets.items():
        b.append(1000, codec.offset_key(group, topic, partition), codec.offset_value(offset, -1, "", 1000))
    return b.build()


def group_batch(base: int, group: str, generation: int) -> bytes:
    b = MemoryRecordsBuilder(base)
    b.append(1000, codec.group_key(group), codec.group_value("consumer", generation, "range", "m", 1000, []))
    return b.build()


def marker_batch(base: int, producer_id: int, commit: bool) -> bytes:
    b = MemoryRecordsBuilder(base, is_transactional=True, is_control_batch=True)
    b.set_producer_state(producer_id, 0, -1, True)
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    b.append_end_txn_marker(1000, EndTransactionMarker(kind, 0))
    return b.build()


@pytest.fixture
def h():
    harness = Harness()
    yield harness
    harness.close()


def slow_election(h, group: str, batches: list[bytes], end_offset: int, epoch: int = 2) -> SlowLog:
    """Resign ``group``'s partition, then elect it again over a SlowLog with a real scheduler thread."""
    log = SlowLog(batches, end_offset)
    p = h.manager.partition_for(group)
    h.coordinator.on_resignation(p, epoch - 1)
    h.manager.log_manager = OneLogManager(log)
    h.manager.scheduler = KafkaScheduler(1, "group-metadata-manager-")
    h.coordinator.on_election(p, epoch)
    return log


def test_load_starts_at_election_and_requests_get_load_in_progress_until_it_is_done(h):
    log = slow_election(
        h, "g", [group_batch(0, "g", 3), offsets_batch(1, "g", {("t", 0): 42, ("t", 1): 7})], end_offset=3
    )
    p = h.manager.partition_for("g")
    # No request was made: the election alone started the load, on the manager's thread.
    assert log.reading.wait(5), "the load did not start at the election"
    assert p in h.manager.loading and p not in h.manager.loaded
    with pytest.raises(errors.CoordinatorLoadInProgressError):
        h.coordinator.handle_fetch_offsets("g", [("t", 0)])
    with pytest.raises(errors.CoordinatorLoadInProgressError):
        h.join("g")
    with pytest.raises(errors.CoordinatorLoadInProgressError):
        h.commit("g", {("t", 0): OffsetAndMetadata(1, -1, "", 0)})
    with pytest.raises(errors.CoordinatorLoadInProgressError):
        h.coordinator.describe_group("g")
    assert h.coordinator.handle_heartbeat("g", "m", None, 3) == errors.NONE  # Kafka answers "blindly"
    assert h.sync("g", 3, "m")[0].error_code == errors.REBALANCE_IN_PROGRESS
    code, _ = h.coordinator.list_groups([])
    assert code == errors.COORDINATOR_LOAD_IN_PROGRESS
    # A group of another (loaded) partition is served meanwhile.
    other = next(g for g in (f"other-{i}" for i in range(100)) if h.manager.partition_for(g) != p)
    assert h.coordinator.handle_fetch_offsets(other, [("t", 0)]) == {("t", 0): None}

    log.release.set()
    wait_until(lambda: p in h.manager.loaded, timeout=5, message="partition loaded")
    assert p not in h.manager.loading
    fetched = h.coordinator.handle_fetch_offsets("g", None)
    assert {tp: o.offset for tp, o in fetched.items()} == {("t", 0): 42, ("t", 1): 7}
    described = h.coordinator.describe_group("g")
    assert (described["error_code"], described["group_state"], described["protocol_type"]) == (0, "Empty", "consumer")
    assert h.manager.get_group("g").generation_id == 3
    assert h.coordinator.list_groups([]) == (
        errors.NONE,
        [{"group_id": "g", "protocol_type": "consumer", "group_state": "Empty", "group_type": "classic"}],
    )


def test_resignation_during_the_load_discards_it(h):
    log = slow_election(h, "g", [offsets_batch(0, "g", {("t", 0): 42})], end_offset=1)
    p = h.manager.partition_for("g")
    assert log.reading.wait(5)
    h.coordinator.on_resignation(p, 3)
    log.release.set()
    h.manager.scheduler.shutdown()  # waits for the running load to end
    assert p not in h.manager.loaded and p not in h.manager.loading and "g" not in h.manager.groups
    with pytest.raises(errors.NotCoordinatorError):
        h.coordinator.handle_fetch_offsets("g", [("t", 0)])


def test_a_marker_written_while_loading_applies_to_the_loaded_offsets(h):
    # Producer 9's offset is in the log without its marker: pending; the COMMIT marker lands meanwhile.
    log = slow_election(h, "g", [offsets_batch(0, "g", {("t", 0): 42}, producer=(9, 0))], end_offset=1)
    p = h.manager.partition_for("g")
    assert log.reading.wait(5)
    h.coordinator.schedule_handle_txn_completion(9, {p}, True)
    log.release.set()
    wait_until(lambda: p in h.manager.loaded, timeout=5, message="partition loaded")
    assert h.coordinator.handle_fetch_offsets("g", [("t", 0)])[("t", 0)].offset == 42
    assert h.coordinator.unstable_partitions("g", [("t", 0)]) == set()


def test_a_transaction_closed_in_the_log_and_records_that_do_not_decode(h):
    batches = [
        offsets_batch(0, "g", {("t", 0): 42}, producer=(9, 0)),
        marker_batch(1, 9, commit=False),  # aborted: 42 never becomes the offset
        offsets_batch(2, "g", {("t", 1): 5}, producer=(11, 0)),  # still open at the log end: pending
        MemoryRecordsBuilder(3),  # replaced below by a record whose key version is unknown
        offsets_batch(4, "g", {("t", 2): 8}),
    ]
    junk = batches[3]
    junk.append(1000, b"\x00\x63garbage", b"value")
    batches[3] = junk.build()
    log = slow_election(h, "g", batches, end_offset=5)
    log.release.set()
    p = h.manager.partition_for("g")
    wait_until(lambda: p in h.manager.loaded, timeout=5, message="partition loaded")
    fetched = h.coordinator.handle_fetch_offsets("g", None)
    assert {tp: o.offset for tp, o in fetched.items()} == {("t", 2): 8}
    assert h.coordinator.unstable_partitions("g", [("t", 0), ("t", 1)]) == {("t", 1)}
    assert h.manager.get_group("g").state is GroupState.EMPTY
