"""DescribeShareGroupOffsets v1's share-partition lag (KIP-1226, Kafka 4.2) against real brokers: the share partition
writes its delivery complete count (offsets above the start offset already acknowledged or archived) with each state
write, the share coordinator keeps it in ``__share_group_state`` and answers it in ReadShareGroupStateSummary v1, and
the group coordinator subtracts the start offset and that count from the partition's high watermark (read locally,
or asked of the leader with ListOffsets when another broker leads the partition)."""

from __future__ import annotations

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.cluster import KRaftCluster
from tests.helpers.topics import create_topic, wait_logs_ready
from tests.helpers.wait import wait_until
from tests.integration.test_share_consumer import FAST, poll_records, produce, set_group_configs, share_consumer

pytestmark = pytest.mark.integration


def describe_offsets(bootstrap: str, group: str, version: int) -> dict:
    """The group's DescribeShareGroupOffsets entry, asked of its coordinator (FindCoordinator first)."""

    def find() -> dict | None:
        with BrokerConnection.to(bootstrap) as c:
            r = c.request(ApiKeys.FIND_COORDINATOR, 6, {"key_type": 0, "coordinator_keys": [group]})
        found = r["coordinators"][0]
        return found if found["error_code"] == errors.NONE else None

    found = wait_until(find, 15, message="the group coordinator")
    with BrokerConnection.to(f"{found['host']}:{found['port']}") as c:
        r = c.request(ApiKeys.DESCRIBE_SHARE_GROUP_OFFSETS, version, {"groups": [{"group_id": group, "topics": None}]})
    (g,) = r["groups"]
    assert g["error_code"] == errors.NONE, g
    return g


def accept_some(bootstrap: str, group: str, topic: str, n: int, accepted: set[int]) -> None:
    """One explicit ShareConsumer receives the ``n`` records, accepts the offsets in ``accepted``, releases the
    others, commits and closes."""
    from confluent_kafka import AcknowledgeType

    c = share_consumer(bootstrap, group, topic, explicit=True)
    try:
        got: list = []
        wait_until(lambda: got.extend(poll_records(c)) or len(got) >= n, 30, message=f"{n} records")
        for m in got:
            c.acknowledge(m, AcknowledgeType.ACCEPT if m.offset() in accepted else AcknowledgeType.RELEASE)
        c.commit_sync(30)
    finally:
        c.close()


def lag_of(bootstrap: str, group: str) -> tuple[int, int, int]:
    (t,) = describe_offsets(bootstrap, group, 1)["topics"]
    (p,) = t["partitions"]
    assert p["error_code"] == errors.NONE, p
    return p["start_offset"], p["leader_epoch"], p["lag"]


def test_lag_is_the_high_watermark_less_the_start_offset_and_the_completed_deliveries(broker_factory):
    broker = broker_factory(**FAST)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "lagt", partitions=1)
    set_group_configs(bootstrap, "lagg", {"share.auto.offset.reset": "earliest"})
    produce(bootstrap, "lagt", [b"%d" % i for i in range(10)], batch=1)
    # 0, 1 accepted (the start offset moves to 2), 5 and 6 accepted above it, the rest released
    accept_some(bootstrap, "lagg", "lagt", 10, {0, 1, 5, 6})
    wait_until(lambda: lag_of(bootstrap, "lagg")[0] == 2, 10, message="start offset 2")
    start, leader_epoch, lag = lag_of(bootstrap, "lagg")
    assert (start, lag) == (2, 10 - 2 - 2)
    assert leader_epoch >= 0  # the share partition leader's epoch, kept by the share coordinator
    # v0 has no lag on the wire (decoded as the field's default -1), the rest is the same
    (t0,) = describe_offsets(bootstrap, "lagg", 0)["topics"]
    assert (t0["partitions"][0]["start_offset"], t0["partitions"][0]["lag"]) == (2, -1)
    # new records raise the lag; accepting everything brings it to 0
    produce(bootstrap, "lagt", [b"x", b"y"], batch=1)
    assert lag_of(bootstrap, "lagg")[2] == 8
    accept_some(bootstrap, "lagg", "lagt", 8, set(range(12)))
    wait_until(lambda: lag_of(bootstrap, "lagg")[2] == 0, 10, message="lag 0")
    assert lag_of(bootstrap, "lagg")[0] == 12


def test_lag_of_a_partition_led_by_another_broker(tmp_path):
    """The group's coordinator does not lead the partition: the high watermark comes from the leader (ListOffsets)."""
    cluster = KRaftCluster(
        tmp_path / "cluster",
        controllers=1,
        brokers=2,
        **FAST,
        **{"offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "1"},
    ).start()
    try:
        bootstrap = cluster.bootstrap
        set_group_configs(bootstrap, "rg", {"share.auto.offset.reset": "earliest"})

        def find() -> int | None:
            with BrokerConnection.to(bootstrap) as c:
                r = c.request(ApiKeys.FIND_COORDINATOR, 6, {"key_type": 0, "coordinator_keys": ["rg"]})
            found = r["coordinators"][0]
            return found["node_id"] if found["error_code"] == errors.NONE else None

        coordinator = wait_until(find, 15, message="the group coordinator")
        other = next(n for n in sorted(cluster.brokers) if n != coordinator)
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("remote", num_partitions=1, replica_assignment=[[other]])])["remote"].result(30)
        wait_logs_ready(bootstrap, "remote")
        produce(bootstrap, "remote", [b"%d" % i for i in range(6)], batch=1)
        accept_some(bootstrap, "rg", "remote", 6, {0, 3})
        wait_until(lambda: lag_of(bootstrap, "rg")[0] == 1, 15, message="start offset 1")
        assert lag_of(bootstrap, "rg")[2] == 6 - 1 - 1
    finally:
        cluster.stop()
