"""Replication throttles (KIP-73): Kafka's ReplicationQuotaManager rate and throttled partitions, the throttled
replicas config parsing, and the leader leaving a throttled partition out of an out-of-ISR follower's fetch."""

from __future__ import annotations

from pykbroker.server.quotas.replication_quota_manager import (
    ALL_REPLICAS,
    UNLIMITED,
    ReplicationQuotaManager,
    parse_throttled_partitions,
)
from pykbroker.utils.time import MockTime


def test_parse_throttled_partitions_keeps_this_brokers_entries():
    assert parse_throttled_partitions("0:101,1:102, 2:101 ,x:1,3", 101) == [0, 2]
    assert parse_throttled_partitions("*", 7) == [ALL_REPLICAS]
    assert parse_throttled_partitions("", 7) is None and parse_throttled_partitions(None, 7) is None
    assert parse_throttled_partitions("0:101", 102) == []


def test_rate_over_the_windows_and_throttled_partitions():
    time = MockTime(current_ms=1_000_000)
    q = ReplicationQuotaManager("LeaderReplication", time)
    assert q.quota == UNLIMITED
    q.record(10_000_000)
    assert not q.is_quota_exceeded()  # unlimited
    q.update_quota(100_000)
    assert q.is_quota_exceeded()  # 10 MB over at least 10 s of windows: 1 MB/s
    time.sleep(12_000)  # the windows expire
    assert not q.is_quota_exceeded()
    q.record(500_000)
    assert not q.is_quota_exceeded()  # 50 kB/s over 10 s
    q.record(600_000)
    assert q.is_quota_exceeded() and q.byte_rate() > 100_000
    q.mark_throttled("t", [0, 2])
    assert q.is_throttled("t", 0) and not q.is_throttled("t", 1) and not q.is_throttled("u", 0)
    q.mark_throttled("t", [ALL_REPLICAS])
    assert q.is_throttled("t", 5)
    q.mark_throttled("t", None)
    assert not q.is_throttled("t", 0)
