"""ReplicaManager in process (LogManager on tmp_path, MockTime): appends, fetches, DelayedProduce and
DelayedFetch completion and expiry, DeleteRecords, and the errors of each (``kafka.server.ReplicaManager``)."""

from __future__ import annotations

import pytest

from pykbroker.log.fetch_data_info import FetchIsolation
from pykbroker.protocol import errors
from pykbroker.record.default_record_batch import iter_batches
from pykbroker.server.replica_manager import FetchParams, PartitionFetch
from tests.helpers.wait import wait_until
from tests.unit.server.apis_harness import LocalBroker, records


@pytest.fixture
def broker(tmp_path):
    b = LocalBroker(tmp_path / "logs")
    b.add_topic("t", 2)
    yield b
    b.close()


def append(rm, entries, acks=1, timeout_ms=1000, internal=False) -> dict:
    out = []
    rm.append_records(timeout_ms, acks, internal, entries, out.append)
    rm.try_complete_actions()
    return out[0] if out else None


def fetch(rm, fetches, max_wait_ms=0, min_bytes=1, isolation=FetchIsolation.HIGH_WATERMARK, max_bytes=1 << 20):
    out = []
    rm.fetch_messages(FetchParams(-1, max_wait_ms, min_bytes, max_bytes, isolation), fetches, out.append)
    return out


def record_count(records) -> int:
    data = records.read_bytes()
    return sum(batch.records_count for _, batch in iter_batches(memoryview(data)))


# -- append ----------------------------------------------------------------------------------------------


def test_append_acks_1_assigns_offsets_and_advances_the_high_watermark(broker):
    rm = broker.replica_manager
    r = append(rm, {("t", 0): records(3), ("t", 1): records(2)})
    assert (r[("t", 0)].error_code, r[("t", 0)].base_offset) == (errors.NONE, 0)
    assert (r[("t", 1)].error_code, r[("t", 1)].base_offset) == (errors.NONE, 0)
    assert append(rm, {("t", 0): records(2)})[("t", 0)].base_offset == 3
    assert rm.get_partition("t", 0).log.high_watermark == 5
    assert rm.get_partition("t", 1).log.high_watermark == 2


def test_append_errors_per_partition(broker):
    rm = broker.replica_manager
    r = append(rm, {("t", 0): records(1), ("missing", 0): records(1), ("t", 9): records(1)})
    assert r[("t", 0)].error_code == errors.NONE
    assert r[("missing", 0)].error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
    assert r[("t", 9)].error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
    assert r[("missing", 0)].base_offset == -1


def test_append_invalid_acks_and_internal_topic(broker):
    rm = broker.replica_manager
    r = append(rm, {("t", 0): records(1)}, acks=2)
    assert r[("t", 0)].error_code == errors.INVALID_REQUIRED_ACKS
    broker.add_topic("__consumer_offsets", 1)
    assert (
        append(rm, {("__consumer_offsets", 0): records(1)})[("__consumer_offsets", 0)].error_code
        == errors.INVALID_TOPIC_EXCEPTION
    )
    assert (
        append(rm, {("__consumer_offsets", 0): records(1)}, internal=True)[("__consumer_offsets", 0)].error_code
        == errors.NONE
    )


def test_append_corrupt_batch_is_rejected_and_nothing_appended(broker):
    rm = broker.replica_manager
    data = bytearray(records(2))
    data[-1] ^= 0xFF  # breaks the CRC
    r = append(rm, {("t", 0): memoryview(data)})
    assert r[("t", 0)].error_code == errors.CORRUPT_MESSAGE
    assert rm.get_partition("t", 0).log.log_end_offset == 0


def test_append_to_a_follower_is_not_leader(broker):
    from types import SimpleNamespace

    from pykbroker.metadata.partition_registration import PartitionRegistration

    rm = broker.replica_manager
    reg = PartitionRegistration(replicas=(1, 2), isr=(1, 2), leader=2, leader_epoch=1)
    rm.apply_delta(SimpleNamespace(deletes=set(), leaders={}, followers={("t", 1): (broker.topic_ids["t"], reg)}), None)
    assert append(rm, {("t", 1): records(1)})[("t", 1)].error_code == errors.NOT_LEADER_OR_FOLLOWER
    assert fetch(rm, [PartitionFetch("t", 1, 0, 1 << 20)])[0][0][1].error_code == errors.NOT_LEADER_OR_FOLLOWER


# -- DelayedProduce --------------------------------------------------------------------------------------


def test_acks_all_single_replica_isr_answers_at_once(broker):
    r = append(broker.replica_manager, {("t", 0): records(2)}, acks=-1)
    assert r[("t", 0)].error_code == errors.NONE


def test_acks_all_reached_by_the_append_skips_the_produce_purgatory(broker, monkeypatch):
    rm = broker.replica_manager
    watched = []
    monkeypatch.setattr(rm.produce_purgatory, "try_complete_else_watch", lambda op, keys: watched.append(op))
    r = append(rm, {("t", 0): records(2)}, acks=-1)
    assert (r[("t", 0)].error_code, r[("t", 0)].base_offset) == (errors.NONE, 0)
    assert watched == []


def delayed_produce(broker, count: int) -> list:
    """An acks=all produce of ``count`` records to r-0 (replicas 1, 2; the follower's LEO is unknown, so the HW
    stays) left waiting in the produce purgatory; the list its answer is appended to."""
    broker.add_topic("r", 1, replicas=(1, 2), isr=(1, 2))
    rm = broker.replica_manager
    out: list = []
    rm.append_records(30_000, -1, False, {("r", 0): records(count)}, out.append)
    rm.try_complete_actions()
    assert out == [] and rm.produce_purgatory.num_delayed == 1
    return out


def test_delayed_produce_completes_when_the_high_watermark_passes_the_append(broker):
    rm = broker.replica_manager
    out = delayed_produce(broker, 3)
    broker.set_isr("r", 0, (1,))  # ISR shrinks to the leader: HW = LEO, the produce is acknowledged
    assert len(out) == 1
    assert (out[0][("r", 0)].error_code, out[0][("r", 0)].base_offset) == (errors.NONE, 0)
    assert rm.produce_purgatory.num_delayed == 0


def test_delayed_produce_of_a_partition_removed_from_this_broker_is_answered_at_once(broker):
    """A reassignment that drops this leader deletes the partition here: its waiting acks=all produce is
    answered by the delta (Kafka's stopPartitions), not when its timeout expires."""
    from types import SimpleNamespace

    rm = broker.replica_manager
    out = delayed_produce(broker, 1)
    rm.apply_delta(SimpleNamespace(deletes={("r", 0)}, leaders={}, followers={}), None)
    assert len(out) == 1 and out[0][("r", 0)].error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
    assert rm.produce_purgatory.num_delayed == 0


def test_delayed_produce_expires_with_request_timed_out(broker):
    broker.add_topic("r", 1, replicas=(1, 2), isr=(1, 2))
    rm = broker.replica_manager
    out = []
    rm.append_records(100, -1, False, {("r", 0): records(1)}, out.append)
    assert out == []
    broker.time.sleep(100)
    rm.produce_purgatory.advance_clock(0)
    wait_until(lambda: out, 5, interval=0.005, message="delayed produce expired")
    assert out[0][("r", 0)].error_code == errors.REQUEST_TIMED_OUT
    assert rm.get_partition("r", 0).log.log_end_offset == 1  # appended on the leader nonetheless


# -- fetch -----------------------------------------------------------------------------------------------


def test_fetch_reads_up_to_the_high_watermark(broker):
    rm = broker.replica_manager
    append(rm, {("t", 0): records(3)})
    ((_f, r),) = fetch(rm, [PartitionFetch("t", 0, 0, 1 << 20)])[0]
    assert (r.error_code, r.high_watermark, r.log_start_offset) == (errors.NONE, 3, 0)
    assert record_count(r.records) == 3
    ((_, r),) = fetch(rm, [PartitionFetch("t", 0, 3, 1 << 20)])[0]
    assert r.records.size_in_bytes == 0


def test_fetch_errors(broker):
    rm = broker.replica_manager
    append(rm, {("t", 0): records(3)})
    results = fetch(
        rm,
        [
            PartitionFetch("t", 0, 10, 1 << 20),
            PartitionFetch("nope", 0, 0, 1 << 20),
            PartitionFetch("t", 0, 0, 1 << 20, current_leader_epoch=5),
        ],
    )[0]
    assert [r.error_code for _, r in results] == [
        errors.OFFSET_OUT_OF_RANGE,
        errors.UNKNOWN_TOPIC_OR_PARTITION,
        errors.UNKNOWN_LEADER_EPOCH,
    ]


def test_fetch_max_bytes_still_returns_the_first_batch(broker):
    rm = broker.replica_manager
    append(rm, {("t", 0): records(3)})
    append(rm, {("t", 1): records(3)})
    results = fetch(rm, [PartitionFetch("t", 0, 0, 1 << 20), PartitionFetch("t", 1, 0, 1 << 20)], max_bytes=1)[0]
    assert record_count(results[0][1].records) == 3  # first partition: at least one batch, whatever the limit
    assert results[1][1].records.size_in_bytes == 0  # no byte left for the next one


def test_delayed_fetch_completes_on_append(broker):
    rm = broker.replica_manager
    out = fetch(rm, [PartitionFetch("t", 0, 0, 1 << 20)], max_wait_ms=30_000)
    assert out == [] and rm.fetch_purgatory.num_delayed == 1
    append(rm, {("t", 0): records(2)})  # try_complete_actions pokes the fetch purgatory
    assert len(out) == 1
    ((_, r),) = out[0]
    assert r.error_code == errors.NONE and record_count(r.records) == 2


def test_delayed_fetch_expires_empty(broker):
    rm = broker.replica_manager
    out = fetch(rm, [PartitionFetch("t", 0, 0, 1 << 20)], max_wait_ms=500)
    assert out == []
    broker.time.sleep(500)
    rm.fetch_purgatory.advance_clock(0)
    wait_until(lambda: out, 5, interval=0.005, message="delayed fetch expired")
    ((_, r),) = out[0]
    assert r.error_code == errors.NONE and r.records.size_in_bytes == 0


def test_fetch_with_data_or_no_wait_answers_at_once(broker):
    rm = broker.replica_manager
    assert len(fetch(rm, [PartitionFetch("t", 0, 0, 1 << 20)], max_wait_ms=0)) == 1
    append(rm, {("t", 0): records(1)})
    assert len(fetch(rm, [PartitionFetch("t", 0, 0, 1 << 20)], max_wait_ms=30_000)) == 1


# -- DeleteRecords ---------------------------------------------------------------------------------------


def test_delete_records_moves_the_log_start_offset(broker):
    rm = broker.replica_manager
    append(rm, {("t", 0): records(5)})
    assert rm.delete_records_on_local_log("t", 0, 2) == (2, 2)
    assert rm.delete_records_on_local_log("t", 0, 1) == (1, 2)  # never backwards
    ((_, r),) = fetch(rm, [PartitionFetch("t", 0, 0, 1 << 20)])[0]
    assert r.error_code == errors.OFFSET_OUT_OF_RANGE and r.log_start_offset == 2
    assert rm.delete_records_on_local_log("t", 0, -1) == (5, 5)  # -1: up to the high watermark


def test_delete_records_errors(broker):
    rm = broker.replica_manager
    append(rm, {("t", 0): records(2)})
    with pytest.raises(errors.OffsetOutOfRangeError):
        rm.delete_records_on_local_log("t", 0, 3)  # above the high watermark
    with pytest.raises(errors.OffsetOutOfRangeError):
        rm.delete_records_on_local_log("t", 0, -2)
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        rm.delete_records_on_local_log("nope", 0, 0)
    broker.add_topic("__consumer_offsets", 1)
    with pytest.raises(errors.InvalidTopicError):
        rm.delete_records_on_local_log("__consumer_offsets", 0, 0)
    broker.add_topic("compacted", 1, configs={"cleanup.policy": "compact"})
    with pytest.raises(errors.PolicyViolationError):
        rm.delete_records_on_local_log("compacted", 0, 0)


def test_partition_in_metadata_but_not_hosted_is_not_leader(broker):
    import dataclasses

    from pykbroker.metadata.image import TopicImage, TopicsImage
    from pykbroker.metadata.partition_registration import PartitionRegistration

    image = broker.cache.image
    other = TopicImage(
        "elsewhere", broker.topic_ids["t"], {0: PartitionRegistration(replicas=(2,), isr=(2,), leader=2)}
    )
    broker.cache.set_image(
        dataclasses.replace(image, topics=TopicsImage(image.topics.by_id, {**image.topics.by_name, "elsewhere": other}))
    )
    with pytest.raises(errors.NotLeaderOrFollowerError):
        broker.replica_manager.get_partition_or_error("elsewhere", 0)


def test_append_results_are_named_types(broker):
    """``append_records`` answers each partition with a ProducePartitionResult (Kafka's PartitionResponse), not a
    response dict: offsets on success, the validator's per-record errors with INVALID_RECORD, and the outcome
    of an acks=all wait replacing its provisional error."""
    from pykbroker.log.log_validator import RecordError
    from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
    from pykbroker.server.append_result import ProducePartitionResult

    rm = broker.replica_manager
    ok = append(rm, {("t", 0): records(2)})[("t", 0)]
    assert ok == ProducePartitionResult(errors.NONE, 0, -1, 0, (), None)
    broker.add_topic("c", 1, configs={"cleanup.policy": "compact"})
    keyless = MemoryRecordsBuilder()
    keyless.append(broker.time.milliseconds(), b"k", b"v")
    keyless.append(broker.time.milliseconds(), None, b"v")
    bad = append(rm, {("c", 0): memoryview(bytearray(keyless.build()))})[("c", 0)]
    assert isinstance(bad, ProducePartitionResult)
    assert (bad.error_code, bad.base_offset, bad.log_start_offset) == (errors.INVALID_RECORD, -1, -1)
    assert [e.batch_index for e in bad.record_errors] == [1] and isinstance(bad.record_errors[0], RecordError)
    assert bad.error_message
    broker.add_topic("r", 1, replicas=(1, 2), isr=(1, 2))
    out: list = []
    rm.append_records(30_000, -1, False, {("r", 0): records(1)}, out.append)
    rm.try_complete_actions()
    broker.set_isr("r", 0, (1,))
    assert out == [{("r", 0): ProducePartitionResult(errors.NONE, 0, -1, 0, (), None)}]


def test_fetch_results_are_immutable_named_types(broker):
    """``fetch_messages`` hands the Fetch handler one immutable FetchPartitionResult per partition (Kafka's
    FetchPartitionData): the read's offsets, records and position, no preferred read replica; errors likewise."""
    from pykbroker.server.replica_manager import FetchPartitionResult

    rm = broker.replica_manager
    append(rm, {("t", 0): records(2)})
    ((_, r), (_, missing)) = fetch(rm, [PartitionFetch("t", 0, 0, 1 << 20), PartitionFetch("nope", 0, 0, 1 << 20)])[0]
    assert isinstance(r, FetchPartitionResult) and isinstance(r, tuple)
    assert (r.error_code, r.high_watermark, r.last_stable_offset, r.log_start_offset) == (errors.NONE, 2, 2, 0)
    assert (r.diverging_epoch, r.aborted_transactions, r.preferred_read_replica) == (None, None, -1)
    assert record_count(r.records) == 2 and r.fetch_offset_metadata.message_offset == 0
    assert missing == FetchPartitionResult(errors.UNKNOWN_TOPIC_OR_PARTITION)
    with pytest.raises(AttributeError):
        r.error_code = errors.UNKNOWN_SERVER_ERROR  # type: ignore[misc]


def test_leader_replication_throttle_holds_back_throttled_partitions_of_an_out_of_isr_follower(broker):
    """KIP-73 (Kafka's readFromLog with shouldLeaderThrottle): while the leader quota is exceeded, a follower outside
    the ISR gets no data for a throttled partition (the others are served), and its DelayedFetch does not count the
    throttled partition's new bytes."""
    rm = broker.replica_manager
    broker.add_topic("r", 2, replicas=(1, 5), isr=(1,))  # replica 5 is catching up (not in the ISR)
    append(rm, {("r", 0): records(3), ("r", 1): records(2)})

    def follower_fetch(max_wait_ms=0) -> dict:
        out: list = []
        params = FetchParams(5, max_wait_ms, 1, 1 << 20, FetchIsolation.LOG_END)
        rm.fetch_messages(params, [PartitionFetch("r", 0, 0, 1 << 20), PartitionFetch("r", 1, 0, 1 << 20)], out.append)
        return {f.partition: r for f, r in out[0]} if out else {}

    assert {p: r.records.size_in_bytes > 0 for p, r in follower_fetch().items()} == {0: True, 1: True}
    rm.leader_quota.mark_throttled("r", [0])
    assert {p: r.records.size_in_bytes > 0 for p, r in follower_fetch().items()} == {0: True, 1: True}  # not exceeded
    rm.leader_quota.update_quota(10)
    rm.leader_quota.record(10_000)
    results = follower_fetch()
    assert results[0].error_code == errors.NONE and results[0].records.size_in_bytes == 0
    assert results[1].records.size_in_bytes > 0
    rm.leader_quota.mark_throttled("r", [0, 1])
    assert follower_fetch(max_wait_ms=100) == {}  # parked: the throttled bytes do not complete it
