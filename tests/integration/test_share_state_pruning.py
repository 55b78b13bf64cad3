"""``__share_group_state`` pruning (Kafka 4.1+, KIP-932): every ``share.coordinator.state.topic.prune.interval.ms``
the share coordinator deletes (DeleteRecords on its own partition) the records below the oldest latest ShareSnapshot
of the share partitions it holds; the state read back after a restart (a reload from the pruned log) is the same."""

from __future__ import annotations

import re

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.coordinator.share.share_coordinator_records import coordinator_key
from pykbroker.metadata.topic_names import SHARE_GROUP_STATE_TOPIC_NAME
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until
from tests.integration.test_prometheus_metrics import REPORTER, scrape, value
from tests.integration.test_share_fetch import topic_id
from tests.integration.test_share_state_apis import _find, _partition, _req, _write_partition

pytestmark = pytest.mark.integration

CONFIGS = {
    **REPORTER,
    "share.coordinator.state.topic.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "share.coordinator.snapshot.update.records.per.snapshot": "2",
    "share.coordinator.state.topic.prune.interval.ms": "300",
}


def log_start_and_end(conn) -> tuple[int, int]:
    """``__share_group_state-0``'s earliest and latest offsets (ListOffsets -2 / -1)."""

    def offset(timestamp: int) -> int:
        body = {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": SHARE_GROUP_STATE_TOPIC_NAME,
                    "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}],
                }
            ],
        }
        p = conn.request(ApiKeys.LIST_OFFSETS, 7, body)["topics"][0]["partitions"][0]
        assert p["error_code"] == errors.NONE, p
        return p["offset"]

    return offset(-2), offset(-1)


def test_records_below_the_oldest_latest_snapshot_are_deleted_and_the_state_survives_a_reload(broker_factory):
    broker = broker_factory(**CONFIGS)
    create_topic(broker.bootstrap, "pt", partitions=2)
    with BrokerConnection.to(broker.bootstrap, timeout=15) as conn:
        tid = topic_id(conn, "pt")
        wait_until(lambda: _find(conn, coordinator_key("pg", tid, 0))["error_code"] == errors.NONE, 20)
        for p in (0, 1):
            init = _req("pg", tid, {"partition": p, "state_epoch": 1, "start_offset": 0})
            assert _partition(conn.request(ApiKeys.INITIALIZE_SHARE_GROUP_STATE, 0, init))["error_code"] == 0
        # records: 0, 1 the snapshots of p0 and p1; p0's writes then go update, update, snapshot, ... (2 per snapshot)
        for i in range(6):
            batch = {"first_offset": i, "last_offset": i, "delivery_state": 2, "delivery_count": 1}
            write = _req("pg", tid, _write_partition(0, 1, 0, -1, [batch]))
            assert _partition(conn.request(ApiKeys.WRITE_SHARE_GROUP_STATE, 0, write))["error_code"] == 0
        # p1's only snapshot (offset 1) is still needed: nothing below it may go, and it stays
        wait_until(lambda: log_start_and_end(conn)[0] == 1, 10, message="pruned to p1's snapshot")
        assert log_start_and_end(conn) == (1, 8)
        # p1 gets a newer snapshot after p0's latest one (offset 7): everything below p0's (offset 7) goes
        for _ in range(3):
            write = _req("pg", tid, _write_partition(1, 1, 0, 5, []))
            assert _partition(conn.request(ApiKeys.WRITE_SHARE_GROUP_STATE, 0, write))["error_code"] == 0
        wait_until(lambda: log_start_and_end(conn)[0] == 7, 10, message="pruned to p0's latest snapshot")
        line = broker.wait_for_line(r"Prometheus metrics endpoint listening on \S+:\d+")
        assert line is not None
        host, port = re.search(r"listening on (\S+):(\d+)", line).groups()
        url = f"http://{host}:{port}/metrics"
        pruned = "kafka_server_share_coordinator_metrics_last_pruned_offset"
        assert value(scrape(url), pruned, topic=SHARE_GROUP_STATE_TOPIC_NAME, partition="0") == 7
        read = [_req("pg", tid, {"partition": p, "leader_epoch": 0}) for p in (0, 1)]
        before = [_partition(conn.request(ApiKeys.READ_SHARE_GROUP_STATE, 0, r)) for r in read]
    assert (
        before[0]["state_batches"] == [{"first_offset": 0, "last_offset": 5, "delivery_state": 2, "delivery_count": 1}]
        and before[1]["start_offset"] == 5
    )
    broker.restart()
    with BrokerConnection.to(broker.bootstrap, timeout=15) as conn:

        def reloaded():
            got = [_partition(conn.request(ApiKeys.READ_SHARE_GROUP_STATE, 0, r)) for r in read]
            return got if all(p["error_code"] == errors.NONE for p in got) else None

        assert wait_until(reloaded, 20, message="the state reloaded") == before
