"""Partition reassignment (KIP-455) on a real cluster with bin/kafka-reassign-partitions: 1 controller and 4 brokers.

Covered: every partition of a 6-partition RF 3 topic moves onto the 4th broker and off one old replica (the leader,
for half of them) while a confluent-kafka acks=all idempotent producer writes; ``--verify`` reports completion,
no acknowledged record is lost or duplicated, the removed replicas' log directories are deleted, ``--list`` is
empty after. A reassignment to a stopped broker stays in progress (``--list`` / ``--verify`` show it, also after
the controller restarts) and ``--cancel`` reverts it. The replication factor changes through a reassignment.
AlterPartitionReassignments' errors (INVALID_REPLICA_ASSIGNMENT, UNKNOWN_TOPIC_OR_PARTITION,
NO_REASSIGNMENT_IN_PROGRESS) come back through a broker, which forwards the request to the controller.

One cluster serves the module; each test leaves every broker running.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.tools.reassign_partitions_command import YOU_MUST_RUN_VERIFY_PERIODICALLY_MESSAGE as cmd_warning
from tests.helpers.cluster import KRaftCluster
from tests.helpers.replication import REPLICATION_TIMEOUTS, partitions, wait_for_full_isr
from tests.helpers.tools import run_tool
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

OLD = [101, 102, 103]
NEW = 104


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = KRaftCluster(
        tmp_path_factory.mktemp("reassignment"),
        controllers=1,
        brokers=4,
        **REPLICATION_TIMEOUTS,
        **{
            "log.segment.bytes": "262144",
            "log.segment.delete.delay.ms": "100",
            "num.partitions": "1",
            "replica.fetch.max.bytes": "65536",  # small fetches, so that a replication throttle shows at once
        },
    )
    try:
        c.start()
        yield c
    finally:
        c.kill_all()


def create_topic(cluster, name: str, assignment: dict[int, list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = NewTopic(
        name,
        num_partitions=len(assignment),
        replica_assignment=[assignment[p] for p in sorted(assignment)],
        config={"min.insync.replicas": "2" if len(assignment[0]) > 1 else "1"},
    )
    admin.create_topics([topic])[name].result(30)
    wait_for_full_isr(lambda: cluster.bootstrap, name, replicas=len(assignment[0]))


def reassign(cluster, tmp_path, action: str, targets: dict[tuple[str, int], list[int]] | None = None, *extra: str):
    args = ["--bootstrap-server", cluster.bootstrap, f"--{action}"]
    if targets is not None:
        path = tmp_path / f"reassignment-{action}.json"
        body = {
            "version": 1,
            "partitions": [{"topic": t, "partition": p, "replicas": r} for (t, p), r in targets.items()],
        }
        path.write_text(json.dumps(body))
        args += ["--reassignment-json-file", str(path)]
    return run_tool("reassign_partitions_command", *args, *extra)


def replica_dirs(cluster, broker: int, topic: str) -> list[str]:
    logs = cluster.brokers[broker].data_dir / "logs"
    return sorted(d.name for d in logs.iterdir() if d.is_dir() and d.name.startswith(f"{topic}-"))


def alter_reassignment(cluster, topic: str, replicas: list[int] | None, via: int = 101) -> int:
    """One AlterPartitionReassignments for ``topic``-0 sent to broker ``via`` (forwarded to the controller): the
    partition's error code."""
    with BrokerConnection.to(cluster.brokers[via].bootstrap, timeout=30) as c:
        r = c.request(
            ApiKeys.ALTER_PARTITION_REASSIGNMENTS,
            0,
            {
                "timeout_ms": 10000,
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "replicas": replicas}]}],
            },
        )
    assert r["error_code"] == errors.NONE
    return r["responses"][0]["partitions"][0]["error_code"]


class Load:
    """A confluent-kafka acks=all idempotent producer writing unique values until stopped; ``acked`` holds the
    values the cluster acknowledged."""

    def __init__(self, bootstrap: str, topic: str):
        self.topic = topic
        self.acked: list[str] = []
        self.failed: list[str] = []
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 60000,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err, msg) -> None:
        (self.failed if err is not None else self.acked).append(msg.value().decode())

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self.producer.produce(self.topic, f"v-{i}".encode(), partition=i % 6, on_delivery=self._delivered)
            i += 1
            self.producer.poll(0.002)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self.producer.flush(60) == 0


def consume_all(bootstrap: str, topic: str, expected: int) -> list[str]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    values: list[str] = []
    try:
        consumer.subscribe([topic])

        def more() -> bool:
            for m in consumer.consume(500, 0.5):
                if m.error() is None:
                    values.append(m.value().decode())
            return len(values) >= expected

        wait_until(more, timeout=60, message=f"{expected} records of {topic}")
    finally:
        consumer.close()
    return values


def test_reassign_every_partition_onto_a_new_broker_under_load(cluster, tmp_path):
    topic = "moving"
    current = {p: [OLD[(p + i) % 3] for i in range(3)] for p in range(6)}
    create_topic(cluster, topic, current)
    # even partitions drop their leader (leadership must move), odd ones their last follower
    targets = {(topic, p): [NEW, *(r[1:] if p % 2 == 0 else r[:2])] for p, r in current.items()}
    dropped = {p: (r[0] if p % 2 == 0 else r[2]) for p, r in current.items()}
    with Load(cluster.bootstrap, topic) as load:
        wait_until(lambda: len(load.acked) > 500, timeout=30, message="records acknowledged before the move")
        run = reassign(cluster, tmp_path, "execute", targets)
        assert run.returncode == 0, run.stdout + run.stderr
        assert "Current partition replica assignment" in run.stdout
        assert "Save this to use as the --reassignment-json-file option during rollback" in run.stdout
        rollback = json.loads(run.stdout.split("\n\n")[1])
        assert {(e["topic"], e["partition"]): e["replicas"] for e in rollback["partitions"]} == {
            (topic, p): r for p, r in current.items()
        }
        assert (
            "Successfully started partition reassignments for " + ",".join(f"{topic}-{p}" for p in range(6))
            in run.stdout
        )

        def verified() -> str | None:
            out = reassign(cluster, tmp_path, "verify", targets).stdout
            return out if all(f"Reassignment of partition {topic}-{p} is completed." in out for p in range(6)) else None

        out = wait_until(verified, timeout=60, interval=0.5, message="reassignment completed")
        assert out.startswith("Status of partition reassignment:")
        assert "Clearing broker-level throttles on brokers 101,102,103,104" in out
        assert f"Clearing topic-level throttles on topic {topic}" in out
        acked_during = len(load.acked)
        wait_until(lambda: len(load.acked) > acked_during + 200, timeout=30, message="records acknowledged after")
    assert load.failed == []
    state = wait_for_full_isr(lambda: cluster.bootstrap, topic)
    assert {p: s["replica_nodes"] for p, s in state.items()} == {p: targets[(topic, p)] for p in range(6)}
    assert all(s["leader_id"] != dropped[p] for p, s in state.items())
    values = consume_all(cluster.bootstrap, topic, len(load.acked))
    assert set(load.acked) <= set(values), "acknowledged records lost"
    assert len(values) == len(set(values)), "duplicated records"
    # the removed replicas' logs are renamed "-delete" then deleted; the new broker holds every partition
    for p, broker in dropped.items():
        wait_until(
            lambda b=broker, p=p: not [d for d in replica_dirs(cluster, b, topic) if d.startswith(f"{topic}-{p}")],
            timeout=30,
            message=f"{topic}-{p} deleted on {broker}",
        )
    assert replica_dirs(cluster, NEW, topic) == sorted(f"{topic}-{p}" for p in range(6))
    run = reassign(cluster, tmp_path, "list")
    assert run.returncode == 0 and run.stdout.strip() == "No partition reassignments found.", run.stdout


def test_cancel_reverts_a_reassignment_to_a_stopped_broker(cluster, tmp_path):
    topic = "cancelled"
    create_topic(cluster, topic, {0: OLD})
    cluster.brokers[NEW].stop(30)
    try:
        targets = {(topic, 0): [NEW, 101, 102]}
        run = reassign(cluster, tmp_path, "execute", targets)  # the tool checks the brokers are alive, as Kafka's
        assert run.returncode == 1 and run.stdout.strip() == f"Error: Unknown broker id {NEW}", run.stdout
        # the controller takes a registered (fenced) broker, as Kafka's does
        assert alter_reassignment(cluster, topic, [NEW, 101, 102]) == errors.NONE
        listed = f"{topic}-0: replicas: 104,101,102,103. adding: 104. removing: 103."
        run = reassign(cluster, tmp_path, "list")
        assert listed in run.stdout, run.stdout
        # the reassignment is in the metadata log: a restarted controller still has it
        cluster.controllers[1].stop(30)
        cluster.controllers[1].start(60)
        wait_until(lambda: listed in reassign(cluster, tmp_path, "list").stdout, timeout=30, message="still listed")
        run = reassign(cluster, tmp_path, "execute", targets)
        assert run.returncode == 1 and "Cannot execute because there is an existing partition assignment" in run.stdout
        out = reassign(cluster, tmp_path, "verify", targets).stdout
        assert f"Reassignment of partition {topic}-0 is still in progress." in out and "Clearing" not in out
        run = reassign(cluster, tmp_path, "cancel", targets)
        assert run.returncode == 0, run.stdout + run.stderr
        assert f"Successfully cancelled partition reassignment for: {topic}-0" in run.stdout
        assert reassign(cluster, tmp_path, "list").stdout.strip() == "No partition reassignments found."
        wait_until(
            lambda: sorted(partitions(cluster.bootstrap, topic)[0]["replica_nodes"]) == OLD,
            timeout=10,
            message="replicas reverted",
        )
        assert sorted(partitions(cluster.bootstrap, topic)[0]["isr_nodes"]) == OLD
        run = reassign(cluster, tmp_path, "cancel", targets)
        assert "None of the specified partition reassignments are active." in run.stdout
    finally:
        cluster.brokers[NEW].start(60)


def test_replication_factor_changes_through_a_reassignment(cluster, tmp_path):
    topic = "grown"
    create_topic(cluster, topic, {0: [101, 102]})
    for target in ([101, 102, 103, 104], [104]):
        run = reassign(cluster, tmp_path, "execute", {(topic, 0): target})
        assert run.returncode == 0, run.stdout + run.stderr
        wait_until(
            lambda t=target: (
                partitions(cluster.bootstrap, topic)[0]["replica_nodes"] == t
                and sorted(partitions(cluster.bootstrap, topic)[0]["isr_nodes"]) == sorted(t)
            ),
            timeout=30,
            message=f"replicas {target}",
        )
    assert partitions(cluster.bootstrap, topic)[0]["leader_id"] == 104


def test_generate_proposes_an_assignment_over_the_broker_list(cluster, tmp_path):
    topic = "generated"
    create_topic(cluster, topic, {p: OLD for p in range(3)})
    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"topics": [{"topic": topic}], "version": 1}))
    run = run_tool(
        "reassign_partitions_command", "--bootstrap-server", cluster.bootstrap, "--generate",
        "--topics-to-move-json-file", str(topics_file), "--broker-list", "102,103,104",
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    current_text, proposed_text = run.stdout.split("\n\n")
    assert current_text.startswith("Current partition replica assignment\n")
    assert json.loads(current_text.split("\n", 1)[1]) == {
        "version": 1,
        "partitions": [{"topic": topic, "partition": p, "replicas": OLD, "log_dirs": ["any"] * 3} for p in range(3)],
    }
    assert proposed_text.startswith("Proposed partition reassignment configuration\n")
    proposed = json.loads(proposed_text.split("\n", 1)[1])
    assert [sorted(e["replicas"]) for e in proposed["partitions"]] == [[102, 103, 104]] * 3


def test_alter_partition_reassignments_errors_through_a_broker(cluster):
    topic = "errors"
    create_topic(cluster, topic, {0: OLD})

    def alter(name: str, replicas):
        return alter_reassignment(cluster, name, replicas)

    assert alter(topic, [101, 101, 102]) == errors.INVALID_REPLICA_ASSIGNMENT
    assert alter(topic, [101, 102, 999]) == errors.INVALID_REPLICA_ASSIGNMENT
    assert alter(topic, []) == errors.INVALID_REPLICA_ASSIGNMENT
    assert alter("no-such-topic", [101, 102, 103]) == errors.UNKNOWN_TOPIC_OR_PARTITION
    assert alter(topic, None) == errors.NO_REASSIGNMENT_IN_PROGRESS
    with BrokerConnection.to(cluster.brokers[102].bootstrap, timeout=30) as c:
        r = c.request(ApiKeys.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 10000, "topics": None})
    assert r["error_code"] == errors.NONE and r["topics"] == []


def test_throttle_bounds_the_replication_rate_and_verify_removes_it(cluster, tmp_path):
    """``--throttle`` sets Kafka's throttle configs, the leader and the new follower hold the move to about that
    rate (KIP-73; the rate is measured over 11 one-second windows, so the first ~10 s worth passes at once), and
    ``--verify`` removes the configs once done."""
    topic, rate, size = "throttled", 50_000, 900_000
    create_topic(cluster, topic, {0: [101]})
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 20, "batch.size": 65536})
    failures: list = []
    for i in range(size // 1000):
        p.produce(topic, bytes([i % 256]) * 1000, partition=0, on_delivery=lambda e, m: e and failures.append(e))
    assert p.flush(30) == 0 and failures == []
    targets = {(topic, 0): [101, NEW]}
    start = time.monotonic()
    run = reassign(cluster, tmp_path, "execute", targets, "--throttle", str(rate))
    assert run.returncode == 0, run.stdout + run.stderr
    assert cmd_warning in run.stdout and f"The inter-broker throttle limit was set to {rate} B/s" in run.stdout

    def verified() -> str | None:
        out = reassign(cluster, tmp_path, "verify", targets).stdout
        return out if f"Reassignment of partition {topic}-0 is completed." in out else None

    out = wait_until(verified, timeout=60, interval=0.5, message="throttled reassignment completed")
    elapsed = time.monotonic() - start
    # unthrottled this takes well under a second; the throttle lets ~10 s of the rate through, then the rate
    minimum = (size - 10 * rate) / rate
    assert elapsed >= 0.5 * minimum, f"{size} bytes moved in {elapsed:.1f} s despite a {rate} B/s throttle"
    print(f"throttled move: {size} B in {elapsed:.1f} s = {size / elapsed:.0f} B/s (throttle {rate} B/s)")
    assert f"Clearing topic-level throttles on topic {topic}" in out
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(30)
    assert not configs["leader.replication.throttled.replicas"].value
    assert not configs["follower.replication.throttled.replicas"].value
