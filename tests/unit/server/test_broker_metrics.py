"""BrokerTopicStats recorded by ReplicaManager appends (Kafka's MessagesInPerSec, BytesInPerSec, produce
totals and failures) and the ReplicaManager gauges, on an in-process ReplicaManager."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pykbroker.metadata.partition_registration import PartitionRegistration
from pykbroker.server.broker_topic_stats import (
    BYTES_IN,
    BYTES_OUT,
    FAILED_PRODUCE_REQUESTS,
    MESSAGES_IN,
    TOTAL_PRODUCE_REQUESTS,
    BrokerTopicStats,
    TopicFetchCounts,
    metric_name,
)
from pykbroker.utils.metrics import MetricsRegistry
from tests.unit.server.apis_harness import LocalBroker, records


@pytest.fixture
def broker(tmp_path):
    b = LocalBroker(tmp_path / "logs")
    b.add_topic("t", 2)
    b.add_topic("u", 1)
    yield b
    b.close()


def _append(rm, entries):
    out = []
    rm.append_records(1000, 1, False, entries, out.append)
    rm.try_complete_actions()
    return out[0]


def _count(rm, name, topic=None) -> int:
    return rm.metrics.get(metric_name(name, topic)).count


def test_appends_count_records_and_bytes_per_topic_and_in_all(broker):
    rm = broker.replica_manager
    a, b, c = records(3), records(5), records(4)
    _append(rm, {("t", 0): a, ("t", 1): b, ("u", 0): c})
    _append(rm, {("t", 0): records(2)})
    assert _count(rm, MESSAGES_IN, "t") == 10
    assert _count(rm, MESSAGES_IN, "u") == 4
    assert _count(rm, MESSAGES_IN) == 14
    assert _count(rm, BYTES_IN, "u") == len(c)
    assert _count(rm, BYTES_IN) == len(a) + len(b) + len(c) + len(records(2))
    assert _count(rm, TOTAL_PRODUCE_REQUESTS, "t") == 3  # one per partition appended to, as Kafka
    assert _count(rm, FAILED_PRODUCE_REQUESTS) == 0


def test_rejected_appends_count_nothing_in_and_only_unexpected_failures(broker):
    rm = broker.replica_manager
    data = bytearray(records(2))
    data[-1] ^= 0xFF  # CRC mismatch: CORRUPT_MESSAGE, the client's fault (not a failed request in Kafka)
    _append(rm, {("t", 0): memoryview(data), ("t", 9): records(1), ("nope", 0): records(1)})
    assert _count(rm, MESSAGES_IN, "t") == 0 and _count(rm, BYTES_IN) == 0
    assert _count(rm, TOTAL_PRODUCE_REQUESTS, "t") == 1  # t-9 and "nope" do not exist: not counted
    assert _count(rm, FAILED_PRODUCE_REQUESTS, "t") == 0
    assert rm.metrics.get(metric_name(MESSAGES_IN, "nope")) is None  # no series for unknown topics


def test_replica_manager_gauges_read_partition_state(broker):
    rm, m = broker.replica_manager, broker.replica_manager.metrics

    def gauge(name):
        return m.get(f"kafka.server:type=ReplicaManager,name={name}").value

    assert (gauge("PartitionCount"), gauge("LeaderCount"), gauge("UnderReplicatedPartitions")) == (3, 3, 0)
    # t-1 led here with a replica out of sync: under-replicated; u-0 becomes a follower.
    topic_ids = broker.topic_ids
    leaders = {("t", 1): (topic_ids["t"], PartitionRegistration(replicas=(1, 2), isr=(1,), leader=1, leader_epoch=1))}
    followers = {
        ("u", 0): (topic_ids["u"], PartitionRegistration(replicas=(1, 2), isr=(1, 2), leader=2, leader_epoch=1))
    }
    rm.apply_delta(SimpleNamespace(deletes=set(), leaders=leaders, followers=followers), None)
    assert (gauge("PartitionCount"), gauge("LeaderCount"), gauge("UnderReplicatedPartitions")) == (3, 2, 1)
    assert gauge("AtMinIsrPartitionCount") == 2  # min.insync.replicas=1, ISR of one on both leaders


def test_topic_meters_are_removed_when_the_topic_is_deleted(broker):
    rm = broker.replica_manager
    _append(rm, {("u", 0): records(1)})
    assert rm.metrics.get(metric_name(MESSAGES_IN, "u")) is not None
    rm.apply_delta(SimpleNamespace(deletes={("u", 0)}, leaders={}, followers={}), None)
    assert rm.metrics.get(metric_name(MESSAGES_IN, "u")) is None
    assert _count(rm, MESSAGES_IN) == 1  # the all-topics total keeps what it counted


def _fetch_counts(sent: int, partitions: int, failed: int) -> TopicFetchCounts:
    counts = TopicFetchCounts()
    counts.bytes, counts.partitions, counts.failed_partitions = sent, partitions, failed
    return counts


def test_record_takes_a_requests_totals_at_once():
    stats = BrokerTopicStats(MetricsRegistry())
    stats.record_fetch({"a": _fetch_counts(100, 2, 0), "b": _fetch_counts(0, 1, 1)})
    stats.record_fetch({})
    assert stats.topic_count("a", BYTES_OUT) == 100
    assert stats.all_topics[BYTES_OUT].count == 100
    assert stats.metrics.get(metric_name("TotalFetchRequestsPerSec")).count == 3
    assert stats.topic_count("b", "FailedFetchRequestsPerSec") == 1
    assert stats.topic_count("never", BYTES_OUT) == 0
