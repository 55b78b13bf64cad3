"""The share coordinator keeps share partitions' state across a kill -9 (issue 29 item 4, KIP-932): a 3-node
cluster (combined nodes, ``__share_group_state`` with RF 3 and min ISR 2); a DefaultStatePersister (the one brokers
hand to their share partitions, run here in the test process) initializes, writes and reads the state of two share
partitions; the node coordinating the first is killed with SIGKILL; the persister, retrying through the survivors,
reads the same state back from the new coordinator (which loaded it from the replicated log), keeps writing, and
the new coordinator still fences the old partition leader's epoch."""

from __future__ import annotations

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.coordinator.share.default_state_persister import DefaultStatePersister
from pykbroker.coordinator.share.persister import ACKNOWLEDGED, ARCHIVED, AVAILABLE, PersisterStateBatch
from pykbroker.coordinator.share.share_coordinator_records import coordinator_key
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.types import ZERO_UUID
from tests.helpers.cluster import KRaftCluster
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

GROUP, TOPIC = "sg", "shared"
B = PersisterStateBatch


def _find(bootstrap: str, key: str) -> dict:
    with BrokerConnection.to(bootstrap) as c:
        return c.request(ApiKeys.FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": [key]})["coordinators"][0]


def _topic_id(bootstrap: str):
    with BrokerConnection.to(bootstrap) as c:
        r = c.request(ApiKeys.METADATA, 12, {"topics": [{"name": TOPIC, "topic_id": ZERO_UUID}]})
    return r["topics"][0]["topic_id"]


def test_share_state_survives_a_kill_9_of_its_coordinator(tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = KRaftCluster(
        tmp_path / "cluster",
        controllers=3,
        brokers=0,
        combined=True,
        **{
            "share.coordinator.state.topic.num.partitions": "3",
            "share.coordinator.snapshot.update.records.per.snapshot": "3",
            "replica.lag.time.max.ms": "3000",
        },
    ).start()
    alive = dict(cluster.brokers)
    persister = DefaultStatePersister(
        -1, lambda: [(i, "127.0.0.1", b.port) for i, b in alive.items()], timeout_ms=30000, retry_backoff_ms=50
    )
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 3)])[TOPIC].result(30)
        # the node answering Metadata may not have applied the topic yet (its id reads as the zero UUID until then)
        wait_until(lambda: _topic_id(cluster.bootstrap) != ZERO_UUID, 10, message="topic id visible")
        tid = _topic_id(cluster.bootstrap)

        # the state topic is created on first use: the persister retries COORDINATOR_NOT_AVAILABLE meanwhile
        for p in (0, 1):
            assert persister.initialize_state(GROUP, tid, p, 0, 0).result(40) == errors.NONE
        writes = [
            (0, [B(0, 9, AVAILABLE, 1)]),
            (3, [B(3, 5, ACKNOWLEDGED, 1), B(10, 14, AVAILABLE, 2)]),
            (-1, [B(7, 7, ARCHIVED, 5)]),
            (6, [B(10, 11, ACKNOWLEDGED, 2)]),  # the 4th update of a key: a snapshot (records per snapshot 3)
            (-1, [B(15, 20, AVAILABLE, 1)]),
        ]
        for start, batches in writes:
            for p in (0, 1):
                assert persister.write_state(GROUP, tid, p, 0, 4, start, tuple(batches)).result(30) == errors.NONE
        before = persister.read_state(GROUP, tid, 0, 4).result(30)
        assert before.error_code == errors.NONE and before.start_offset == 6
        assert before.state_batches == (
            B(6, 6, AVAILABLE, 1),
            B(7, 7, ARCHIVED, 5),
            B(8, 9, AVAILABLE, 1),
            B(10, 11, ACKNOWLEDGED, 2),
            B(12, 14, AVAILABLE, 2),
            B(15, 20, AVAILABLE, 1),
        )
        assert persister.read_state(GROUP, tid, 1, 4).result(30) == before

        found = _find(cluster.bootstrap, coordinator_key(GROUP, tid, 0))
        assert found["error_code"] == errors.NONE
        victim = found["node_id"]
        survivors = ",".join(b.bootstrap for i, b in cluster.brokers.items() if i != victim)
        cluster.brokers[victim].kill()
        del alive[victim]

        after = persister.read_state(GROUP, tid, 0, 5).result(40)
        assert after == before
        assert _find(survivors, coordinator_key(GROUP, tid, 0))["node_id"] != victim
        assert persister.read_state(GROUP, tid, 1, 5).result(40) == before
        assert persister.read_summary(GROUP, tid, 0, 5).result(30)[:3] == (errors.NONE, 0, 6)
        # the read at leader epoch 5 was recorded: the old leader (epoch 4) is fenced, the new one writes
        assert persister.write_state(GROUP, tid, 0, 0, 4, -1, ()).result(30) == errors.FENCED_LEADER_EPOCH
        assert persister.write_state(GROUP, tid, 0, 0, 5, 8, (B(8, 9, ACKNOWLEDGED, 1),)).result(30) == errors.NONE
        assert persister.read_state(GROUP, tid, 0, 5).result(30).state_batches[0] == B(8, 9, ACKNOWLEDGED, 1)
        assert persister.delete_state(GROUP, tid, 1).result(30) == errors.NONE
        assert persister.read_state(GROUP, tid, 1, 5).result(30).error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
        for node in alive.values():
            assert "Traceback" not in node.output(), node.output()[-5000:]
    finally:
        persister.stop()
        cluster.stop()
