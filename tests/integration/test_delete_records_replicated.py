"""DeleteRecords on a replicated partition (Kafka's DelayedDeleteRecords): the leader answers once every live
follower has moved its log start offset too, and answers REQUEST_TIMED_OUT when one does not follow in time.

One controller and three brokers; a topic of one partition, RF 3, led by broker 101. After DeleteRecords
answers, each follower's own log start offset (a KIP-392 Fetch v12 to that follower reports it) is already the
requested offset. A follower stopped with SIGSTOP (still registered: its session outlives the wait) keeps the
low watermark below the next requested offset, so the request times out; resumed, it follows and the same
request succeeds.
"""

from __future__ import annotations

import os
import signal

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.cluster import KRaftCluster
from tests.helpers.replication import REPLICATION_TIMEOUTS, raw_produce, wait_for_full_isr

pytestmark = pytest.mark.integration

TOPIC = "dr-replicated"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = KRaftCluster(
        tmp_path_factory.mktemp("delete-records-replicated"),
        controllers=1,
        brokers=3,
        **{k.replace(".", "_"): v for k, v in {**REPLICATION_TIMEOUTS, "offsets.topic.num.partitions": "1"}.items()},
    )
    try:
        c.start()
        yield c
    finally:
        c.stop()


def delete_records(bootstrap: str, offset: int, timeout_ms: int) -> tuple[int, int]:
    """DeleteRecords v2 of partition 0 -> ``(low_watermark, error_code)``."""
    with BrokerConnection.to(bootstrap, timeout=timeout_ms / 1000 + 10) as conn:
        resp = conn.request(
            ApiKeys.DELETE_RECORDS,
            2,
            {
                "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "offset": offset}]}],
                "timeout_ms": timeout_ms,
            },
        )
    (p,) = resp["topics"][0]["partitions"]
    return p["low_watermark"], p["error_code"]


def local_log_start_offset(bootstrap: str, fetch_offset: int) -> int:
    """The log start offset of ``bootstrap``'s own replica of partition 0: a consumer's Fetch v12 (with a
    rack, so a follower may answer it, KIP-392) at ``fetch_offset``."""
    with BrokerConnection.to(bootstrap, timeout=10) as conn:
        resp = conn.request(
            ApiKeys.FETCH,
            12,
            {
                "replica_id": -1,
                "max_wait_ms": 0,
                "min_bytes": 0,
                "max_bytes": 1 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": TOPIC,
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": -1,
                                "fetch_offset": fetch_offset,
                                "last_fetched_epoch": -1,
                                "log_start_offset": -1,
                                "partition_max_bytes": 1 << 20,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
        )
    (p,) = resp["responses"][0]["partitions"]
    assert p["error_code"] == errors.NONE, p
    return p["log_start_offset"]


def test_delete_records_waits_for_the_followers_low_watermark(cluster):
    from confluent_kafka.admin import AdminClient, NewTopic

    brokers = cluster.brokers
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[[101, 102, 103]])])[TOPIC].result(30)
    del admin
    wait_for_full_isr(lambda: cluster.bootstrap, TOPIC)
    leader = brokers[101].bootstrap
    assert raw_produce(leader, TOPIC, 0, -1, [b"v%d" % i for i in range(50)])["error_code"] == errors.NONE

    # every follower has deleted the records when the leader answers
    assert delete_records(leader, 20, 10_000) == (20, errors.NONE)
    assert [local_log_start_offset(brokers[b].bootstrap, 40) for b in (101, 102, 103)] == [20, 20, 20]

    # a follower that does not follow (paused, still registered) holds the low watermark: REQUEST_TIMED_OUT
    paused = brokers[103].proc
    assert paused is not None
    os.kill(paused.pid, signal.SIGSTOP)
    try:
        assert delete_records(leader, 30, 800) == (-1, errors.REQUEST_TIMED_OUT)
    finally:
        os.kill(paused.pid, signal.SIGCONT)
    assert local_log_start_offset(leader, 40) == 30  # the leader deleted them
    assert delete_records(leader, 30, 10_000) == (30, errors.NONE)
    assert local_log_start_offset(brokers[103].bootstrap, 40) == 30
