"""A KRaft cluster of separate processes: 3 controllers (process.roles=controller) and 2 brokers
(process.roles=broker), formatted with one cluster id and started with the real entry point.

One cluster serves the module; each test leaves every node running again. Covered: brokers register
with the quorum and serve clients; failover after kill -9 of the active controller; no commit without a
majority of controllers; a full stop and restart keeps topics and configs; a node formatted with another
cluster id refuses to join.
"""

from __future__ import annotations

import time

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server.meta_properties import random_uuid
from tests.helpers.broker import BrokerProcess
from tests.helpers.cluster import QUORUM_TIMEOUTS, KRaftCluster
from tests.helpers.tools import run_tool
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

SNAPSHOT_BYTES = "metadata.log.max.record.bytes.between.snapshots"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # Small snapshot interval: a few topic creations make a snapshot (and clean the metadata log behind it).
    c = KRaftCluster(tmp_path_factory.mktemp("kraft"), controllers=3, brokers=2, **{SNAPSHOT_BYTES: "4096"})
    try:
        c.start()
        yield c
    finally:
        c.kill_all()


def create_topics(bootstrap: str, names: list[str], partitions: int = 2, timeout_ms: int = 10000, configs=None):
    """CreateTopics v7 through one broker; returns ``{name: error_code}``."""
    body = {
        "topics": [
            {
                "name": n,
                "num_partitions": partitions,
                "replication_factor": 1,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
            }
            for n in names
        ],
        "timeout_ms": timeout_ms,
        "validate_only": False,
    }
    with BrokerConnection.to(bootstrap, timeout=timeout_ms / 1000 + 10) as c:
        r = c.request(ApiKeys.CREATE_TOPICS, 7, body)
    return {t["name"]: t["error_code"] for t in r["topics"]}


def metadata(bootstrap: str) -> dict:
    with BrokerConnection.to(bootstrap) as c:
        return c.request(ApiKeys.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})


def topic_names(bootstrap: str) -> set[str]:
    return {t["name"] for t in metadata(bootstrap)["topics"]}


def live_brokers(cluster: KRaftCluster) -> list[BrokerProcess]:
    return list(cluster.brokers.values())


def test_brokers_register_and_serve_clients(cluster):
    for broker in live_brokers(cluster):
        wait_until(
            lambda b=broker: {n["node_id"] for n in metadata(b.bootstrap)["brokers"]} == set(cluster.brokers),
            15,
            message="both brokers in the metadata",
        )
    first, second = live_brokers(cluster)
    assert create_topics(first.bootstrap, ["orders"], partitions=4) == {"orders": 0}
    wait_until(lambda: "orders" in topic_names(second.bootstrap), 10, message="topic on the other broker")
    leaders = {p["leader_id"] for t in metadata(second.bootstrap)["topics"] for p in t["partitions"]}
    assert leaders == set(cluster.brokers), "partitions are placed over both brokers"

    from confluent_kafka import Consumer, Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0})
    for i in range(40):
        producer.produce("orders", value=b"v%d" % i, partition=i % 4)
    assert producer.flush(20) == 0
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "g-cluster", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(["orders"])
    got = set()
    deadline = time.monotonic() + 30
    while len(got) < 40 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            got.add(m.value())
    consumer.close()
    assert got == {b"v%d" % i for i in range(40)}

    quorum = cluster.describe_quorum(cluster.controller_address(cluster.await_leader()))
    assert quorum["error_code"] == 0
    assert sorted(v["replica_id"] for v in quorum["current_voters"]) == [1, 2, 3]
    assert {o["replica_id"] for o in quorum["observers"]} >= set(cluster.brokers)
    assert quorum["high_watermark"] > 0

    # kafka-metadata-quorum through a broker (forwarded to the active controller) and at a controller.
    for flag, address in (("--bootstrap-server", first.bootstrap), ("--bootstrap-controller", cluster.voters_csv)):
        out = run_tool("metadata_quorum_command", flag, address, "describe", "--status")
        assert out.returncode == 0, out.stderr
        status = dict(line.split(":", 1) for line in out.stdout.splitlines() if ":" in line)
        assert int(status["LeaderId"]) in (1, 2, 3)
        assert int(status["LeaderEpoch"]) >= 1
        assert int(status["HighWatermark"]) > 0
        assert status["CurrentVoters"].count('"id"') == 3


def test_kill_9_of_the_active_controller_elects_a_new_one(cluster):
    broker = live_brokers(cluster)[0]
    before = [f"before-{i}" for i in range(3)]
    assert create_topics(broker.bootstrap, before) == {n: 0 for n in before}
    leader = cluster.await_leader()
    cluster.controllers[leader].kill()
    started = time.monotonic()
    result = None
    while time.monotonic() - started < 10:
        result = create_topics(broker.bootstrap, ["after-failover"], timeout_ms=3000)
        if result["after-failover"] in (0, 36):  # NONE or TOPIC_ALREADY_EXISTS (an earlier try committed)
            break
    elapsed = time.monotonic() - started
    assert result is not None and result["after-failover"] in (0, 36), result
    assert elapsed < 10, f"CreateTopics succeeded only after {elapsed:.1f}s"
    new_leader = cluster.await_leader(not_=leader)
    assert new_leader != leader
    for b in live_brokers(cluster):
        wait_until(lambda b=b: set(before) | {"after-failover"} <= topic_names(b.bootstrap), 10, message="topics")
    cluster.controllers[leader].start()
    wait_until(
        lambda: len(cluster.describe_quorum(cluster.controller_address(new_leader))["current_voters"]) == 3,
        10,
        message="the restarted controller back",
    )


def test_no_commit_without_a_majority_of_controllers(cluster):
    broker = live_brokers(cluster)[0]
    down = [1, 2]
    for i in down:
        cluster.controllers[i].kill()
    started = time.monotonic()
    result = create_topics(broker.bootstrap, ["no-majority"], timeout_ms=3000)
    assert result == {"no-majority": 7}, result  # REQUEST_TIMED_OUT
    assert time.monotonic() - started < 15
    cluster.controllers[1].start()
    # A majority again: writes commit. (The timed-out creation may commit now too, as in Kafka: the
    # leader had appended it; REQUEST_TIMED_OUT never meant "not created".)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        result = create_topics(broker.bootstrap, ["majority-back"], timeout_ms=3000)
        if result["majority-back"] in (0, 36):
            break
    assert result["majority-back"] in (0, 36), result
    wait_until(lambda: "majority-back" in topic_names(broker.bootstrap), 10, message="topic published")
    cluster.controllers[2].start()


def snapshot_files(node: BrokerProcess) -> list[str]:
    return sorted(p.name for p in node.data_dir.glob("logs/__cluster_metadata-0/*.checkpoint"))


def test_a_controller_that_missed_snapshots_catches_up_by_fetch_snapshot(cluster):
    broker = live_brokers(cluster)[0]
    leader = cluster.await_leader()
    lagging_id = next(i for i in cluster.controllers if i != leader)
    lagging = cluster.controllers[lagging_id]
    lagging.stop()
    leader_node = cluster.controllers[leader]
    mark_leader = len(leader_node.lines)
    names = [f"while-away-{i}" for i in range(60)]
    for chunk in (names[:20], names[20:40], names[40:]):  # several snapshot intervals' worth of records
        assert create_topics(broker.bootstrap, chunk) == {n: 0 for n in chunk}

    def snapshots_written() -> int:  # the log keeps only the newest snapshot file: count the log lines
        return sum("Wrote snapshot" in line for line in leader_node.lines[mark_leader:])

    wait_until(lambda: snapshots_written() >= 2, 15, message="two new snapshots on the leader")
    mark = len(lagging.lines)
    lagging.start()
    assert lagging.wait_for_line("Fetching a snapshot from the leader", 20, start=mark), lagging.output()[-3000:]
    assert lagging.wait_for_line("Truncated the log fully to the leader's snapshot", 20, start=mark)

    def caught_up() -> bool:
        q = cluster.describe_quorum(cluster.controller_address(cluster.await_leader()))
        ends = {v["replica_id"]: v["log_end_offset"] for v in q["current_voters"]}
        return q["error_code"] == 0 and ends.get(lagging_id, -1) >= q["high_watermark"]

    wait_until(caught_up, 20, message="the restarted controller caught up")
    assert snapshot_files(lagging), "the fetched snapshot is on disk"


def test_full_stop_and_restart_keeps_topics_and_configs(cluster):
    """Also: one controller was down while the last topic was created, so after the restart its log is
    behind. It cannot win an election, and its failed elections must not hold the others' back (Kafka's
    rule: a voter keeps its election deadline when a candidate's higher epoch reaches it)."""
    broker = live_brokers(cluster)[0]
    leader = cluster.await_leader()
    behind = next(i for i in cluster.controllers if i != leader)
    cluster.controllers[behind].stop()
    assert create_topics(broker.bootstrap, ["kept"], partitions=3, configs={"retention.ms": "123456"}) == {"kept": 0}
    for b in live_brokers(cluster):
        wait_until(lambda b=b: "kept" in topic_names(b.bootstrap), 10, message="topic published")
    expected = topic_names(broker.bootstrap)
    cluster.stop()
    KRaftCluster.start_nodes(cluster.nodes)
    for b in live_brokers(cluster):
        wait_until(lambda b=b: expected <= topic_names(b.bootstrap), 20, message="every topic back")
    with BrokerConnection.to(broker.bootstrap) as c:
        r = c.request(
            ApiKeys.DESCRIBE_CONFIGS,
            4,
            {
                "resources": [{"resource_type": 2, "resource_name": "kept", "configuration_keys": ["retention.ms"]}],
                "include_synonyms": False,
                "include_documentation": False,
            },
        )
    (config,) = r["results"][0]["configs"]
    assert config["value"] == "123456"
    kept = next(t for t in metadata(broker.bootstrap)["topics"] if t["name"] == "kept")
    assert len(kept["partitions"]) == 3


def test_a_broker_formatted_for_another_cluster_refuses_to_join(cluster, tmp_path):
    stranger = BrokerProcess(
        tmp_path / "stranger",
        **{
            **QUORUM_TIMEOUTS,
            "controller.quorum.voters": cluster.voters,
            "controller.listener.names": "CONTROLLER",
            "process.roles": "broker",
            "node.id": "199",
        },
        listeners="PLAINTEXT://127.0.0.1:0",
    )
    cluster.format(stranger, cluster_id=random_uuid())
    with pytest.raises(RuntimeError, match="broker did not start"):
        stranger.start(timeout=30)
    assert stranger.proc.returncode == 1
    fatal = [line for line in stranger.lines if "INCONSISTENT_CLUSTER_ID" in line and "ERROR" in line]
    assert fatal, stranger.output()
