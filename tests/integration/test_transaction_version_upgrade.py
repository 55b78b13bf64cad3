"""Upgrading transaction.version 1 -> 2 (KIP-890 part 2) on a live 3-node cluster while a transactional producer
keeps committing: bin/kafka-features upgrades it with Kafka's output, every node's describe and ApiVersions then
show the new level, no commit fails, a read_committed consumer reads exactly the committed records, and a
transaction version 2 client (Produce v12, EndTxn v5) commits afterwards."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Producer

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.cluster import KRaftCluster
from tests.helpers.raw_txn import RawTxnProducer
from tests.helpers.tools import run_tool
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until
from tests.integration.test_transactions import _read_all

pytestmark = pytest.mark.integration

TOPIC, PARTITIONS, PER_TXN = "tv-upgrade", 3, 10


def finalized_transaction_version(bootstrap: str) -> int:
    """transaction.version's finalized level in the node's ApiVersions v3 (0 when not finalized)."""
    with BrokerConnection.to(bootstrap) as conn:
        r = conn.request(ApiKeys.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    levels = {f["name"]: f["max_version_level"] for f in r["finalized_features"]}
    return levels.get("transaction.version", 0)


def describe_level(bootstrap: str) -> str | None:
    """The FinalizedVersionLevel ``kafka-features describe`` prints for transaction.version on that node."""
    run = run_tool("feature_command", "--bootstrap-server", bootstrap, "describe")
    for line in run.stdout.splitlines():
        if line.startswith("Feature: transaction.version\t"):
            return line.split("FinalizedVersionLevel: ")[1].split("\t")[0]
    return None


class CommittingProducer(threading.Thread):
    """confluent-kafka (transaction version 1) committing transactions of PER_TXN records until stopped; the
    values of commit n are ``n-0`` .. ``n-9``. Any exception ends the thread and is kept in ``failure``."""

    def __init__(self, bootstrap: str):
        super().__init__(daemon=True, name="committing-producer")
        self.bootstrap = bootstrap
        self.commits = 0
        self.failure: BaseException | None = None
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": "tv-upgrade", "linger.ms": 5})
            p.init_transactions(30)
            while not self.stopping.is_set():
                p.begin_transaction()
                for i in range(PER_TXN):
                    p.produce(TOPIC, f"{self.commits}-{i}".encode(), partition=i % PARTITIONS)
                p.commit_transaction(30)
                self.commits += 1
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.failure = e


def test_upgrade_transaction_version_1_to_2_under_a_committing_producer(tmp_path):
    cluster = KRaftCluster(
        tmp_path,
        controllers=3,
        brokers=0,
        combined=True,
        format_args=("--feature", "transaction.version=1"),
        **{"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"},
    ).start()
    producer = None
    try:
        nodes = [b.bootstrap for b in cluster.brokers.values()]
        bs = cluster.bootstrap
        for node in nodes:  # every node has the formatted level (format --feature reached the controller)
            wait_until(lambda n=node: finalized_transaction_version(n) == 1, 15, message=f"{node} at level 1")
        create_topic(bs, TOPIC, PARTITIONS)
        producer = CommittingProducer(bs)
        producer.start()
        wait_until(lambda: producer.commits >= 3 or producer.failure, 30, message="first commits")
        assert producer.failure is None, producer.failure

        before = producer.commits
        run = run_tool(
            "feature_command", "--bootstrap-server", nodes[0], "upgrade", "--feature", "transaction.version=2"
        )
        assert (run.returncode, run.stdout.strip(), run.stderr) == (0, "transaction.version was upgraded to 2.", "")
        upgraded_at = producer.commits
        for node in nodes:  # each node's metadata catches up
            wait_until(lambda n=node: describe_level(n) == "2", 15, message=f"{node} describe at level 2")
            assert finalized_transaction_version(node) == 2
        wait_until(lambda: producer.commits >= upgraded_at + 3 or producer.failure, 30, message="commits after")
        producer.stopping.set()
        producer.join(60)
        assert not producer.is_alive() and producer.failure is None, producer.failure
        total = producer.commits
        assert before > 0 and total - upgraded_at > 0, (before, upgraded_at, total)
        print(f"commits: {before} before the upgrade, {total - upgraded_at} after it, {total} in all")

        expected = {f"{n}-{i}".encode() for n in range(total) for i in range(PER_TXN)}
        got = [
            v for vs in _read_all(bs, TOPIC, PARTITIONS, "read_committed", expected=len(expected)).values() for v in vs
        ]
        assert len(got) == len(expected) and set(got) == expected

        # a transaction version 2 client on the upgraded cluster: every partition (leaders on different
        # nodes), no AddPartitionsToTxn, EndTxn v5 bumps the epoch
        with RawTxnProducer(bs, "tv-upgrade-v2", 2) as v2:
            pid, epoch = v2.pid, v2.epoch
            v2.send({(TOPIC, p): [f"v2-{p}".encode()] for p in range(PARTITIONS)})
            r = v2.end(True)
            assert (r["producer_id"], r["producer_epoch"]) == (pid, epoch + 1)
        got = _read_all(bs, TOPIC, PARTITIONS, "read_committed", expected=len(expected) + PARTITIONS)
        assert {p: vs[-1] for p, vs in got.items()} == {p: f"v2-{p}".encode() for p in range(PARTITIONS)}
        assert sum(map(len, got.values())) == len(expected) + PARTITIONS
    finally:
        if producer is not None:
            producer.stopping.set()
            producer.join(60)
        cluster.stop()
