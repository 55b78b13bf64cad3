"""Consumer groups against a real broker with real clients (issue 4): rebalances, commits, restarts."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.helpers.topics import create_topic

pytestmark = pytest.mark.integration


def produce_indexed(bootstrap, topic, n, partitions):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, b"%d" % i, partition=i % partitions)
    assert p.flush(30) == 0


def confluent_member(bootstrap, group, topic, assigned, name, **extra):
    from confluent_kafka import Consumer

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
    }
    conf.update(extra)
    c = Consumer(conf)
    c.subscribe(
        [topic],
        on_assign=lambda _c, ps: assigned.__setitem__(name, sorted(p.partition for p in ps)),
        on_revoke=lambda _c, ps: assigned.__setitem__(name, []),
    )
    return c


def poll_all(consumers, seen, until, timeout=30.0):
    """Poll every consumer, commit synchronously after processing each message batch."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not until():
        for c in consumers:
            msgs = c.consume(500, 0.1)
            for m in msgs:
                assert not m.error(), m.error()
                seen.append(int(m.value()))
            if msgs:
                c.commit(asynchronous=False)
    return until()


def test_confluent_group_rebalances_without_loss_or_duplicates(module_broker):
    broker = module_broker  # shared: its own topic and group
    create_topic(broker.bootstrap, "grp6", 6)
    produce_indexed(broker.bootstrap, "grp6", 600, 6)
    assigned: dict[str, list[int]] = {}
    members = [confluent_member(broker.bootstrap, "g1", "grp6", assigned, f"c{i}") for i in range(3)]
    seen: list[int] = []
    ok = poll_all(
        members,
        seen,
        lambda: (
            len(seen) >= 600
            and sorted(p for ps in assigned.values() for p in ps) == list(range(6))
            and all(len(ps) == 2 for ps in assigned.values())
            and len(assigned) == 3
        ),
    )
    assert ok, (assigned, len(seen))
    # One member leaves; the other two take over all six partitions within the session timeout.
    members[2].close()
    del assigned["c2"]
    produce_indexed(broker.bootstrap, "grp6", 600, 6)
    start = time.monotonic()
    ok = poll_all(
        members[:2],
        seen,
        lambda: sorted(p for ps in assigned.values() for p in ps) == list(range(6)) and len(seen) >= 1200,
        timeout=30,
    )
    assert ok, (assigned, len(seen))
    assert time.monotonic() - start < 6 + 10
    assert sorted(seen) == sorted(list(range(600)) * 2), "a record was skipped or consumed twice"
    for c in members[:2]:
        c.close()


def test_committed_offsets_survive_broker_and_consumer_restart(broker):
    from confluent_kafka import Consumer, TopicPartition

    create_topic(broker.bootstrap, "resume", 2)
    produce_indexed(broker.bootstrap, "resume", 100, 2)
    assigned: dict[str, list[int]] = {}
    c = confluent_member(broker.bootstrap, "g2", "resume", assigned, "a")
    seen: list[int] = []
    assert poll_all([c], seen, lambda: len(seen) >= 60)
    c.close()
    committed_count = len(seen)
    broker.restart()
    produce_indexed(broker.bootstrap, "resume", 100, 2)
    probe = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g2"})
    committed = probe.committed([TopicPartition("resume", 0), TopicPartition("resume", 1)], timeout=10)
    probe.close()
    assert sum(tp.offset for tp in committed) == committed_count
    c = confluent_member(broker.bootstrap, "g2", "resume", assigned, "b")
    rest: list[int] = []
    assert poll_all([c], rest, lambda: len(seen) + len(rest) >= 200)
    c.close()
    assert sorted(seen + rest) == sorted(list(range(100)) * 2)


def test_kafka_python_group(module_broker):
    broker = module_broker  # shared: its own topic and group
    from kafka import KafkaConsumer

    create_topic(broker.bootstrap, "kpg", 4)
    produce_indexed(broker.bootstrap, "kpg", 200, 4)
    consumers = [
        KafkaConsumer(
            "kpg",
            bootstrap_servers=broker.bootstrap,
            group_id="kp",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            consumer_timeout_ms=200,
        )
        for _ in range(2)
    ]
    seen: list[int] = []
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and (len(seen) < 200 or any(len(c.assignment()) != 2 for c in consumers)):
        for c in consumers:
            for tp_records in c.poll(timeout_ms=200).values():
                seen += [int(r.value) for r in tp_records]
            c.commit()
    assert sorted(seen) == list(range(200))
    assert sorted(p.partition for c in consumers for p in c.assignment()) == [0, 1, 2, 3]
    for c in consumers:
        c.close()


def test_aiokafka_group(module_broker):
    broker = module_broker  # shared: its own topic and group
    from aiokafka import AIOKafkaConsumer

    create_topic(broker.bootstrap, "aiog", 3)
    produce_indexed(broker.bootstrap, "aiog", 90, 3)

    async def run():
        c = AIOKafkaConsumer(
            "aiog",
            bootstrap_servers=broker.bootstrap,
            group_id="aio",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
        )
        await c.start()
        got = []
        try:
            deadline = time.monotonic() + 30
            while len(got) < 90 and time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=500)
                for records in batch.values():
                    got += [int(r.value) for r in records]
                await c.commit()
            assignment = sorted(tp.partition for tp in c.assignment())
        finally:
            await c.stop()
        return got, assignment

    got, assignment = asyncio.run(run())
    assert sorted(got) == list(range(90))
    assert assignment == [0, 1, 2]


def test_describe_list_and_delete_groups(module_broker):
    broker = module_broker  # shared: its own topic and group
    from confluent_kafka import ConsumerGroupState
    from confluent_kafka.admin import AdminClient

    create_topic(broker.bootstrap, "adm", 1)
    produce_indexed(broker.bootstrap, "adm", 10, 1)
    assigned: dict[str, list[int]] = {}
    c = confluent_member(broker.bootstrap, "g3", "adm", assigned, "x")
    seen: list[int] = []
    assert poll_all([c], seen, lambda: len(seen) >= 10)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    desc = admin.describe_consumer_groups(["g3"])["g3"].result(10)
    assert desc.state == ConsumerGroupState.STABLE
    assert len(desc.members) == 1 and desc.members[0].assignment.topic_partitions[0].topic == "adm"
    listed = admin.list_consumer_groups().result(10)
    assert "g3" in {g.group_id for g in listed.valid}
    busy = admin.delete_consumer_groups(["g3"])["g3"]
    with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
        busy.result(10)
    c.close()
    admin.delete_consumer_groups(["g3"])["g3"].result(10)
    assert "g3" not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}


def groups_tool(bootstrap, *args):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "pykbroker.tools.consumer_group_command", "--bootstrap-server", bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_kafka_consumer_groups_describe_shows_lag_of_a_live_group_and_resets(broker):
    create_topic(broker.bootstrap, "lag", 2)
    produce_indexed(broker.bootstrap, "lag", 100, 2)  # 50 per partition
    assigned: dict[str, list[int]] = {}
    c = confluent_member(broker.bootstrap, "lagging", "lag", assigned, "m", **{"client.id": "lag-client"})
    seen: list[int] = []
    assert poll_all([c], seen, lambda: len(seen) >= 100)
    produce_indexed(broker.bootstrap, "lag", 30, 2)  # 15 more per partition, not consumed
    c.poll(0.5)  # heartbeat; the member stays in the group
    run = groups_tool(broker.bootstrap, "--describe", "--group", "lagging")
    assert run.returncode == 0, run.stderr
    lines = [line.split() for line in run.stdout.splitlines() if line.strip()]
    assert lines[0] == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    rows = {int(r[2]): r for r in lines[1:]}
    for p in (0, 1):
        assert rows[p][3:6] == ["50", "65", "15"], rows[p]
        assert rows[p][6].startswith("lag-client") and rows[p][7] == "/127.0.0.1" and rows[p][8] == "lag-client"
    busy = groups_tool(
        broker.bootstrap, "--reset-offsets", "--group", "lagging", "--topic", "lag", "--to-earliest", "--execute"
    )
    assert busy.returncode == 1 and "inactive" in busy.stderr
    c.close()
    reset = groups_tool(
        broker.bootstrap, "--reset-offsets", "--group", "lagging", "--topic", "lag", "--to-offset", "10", "--execute"
    )
    assert reset.returncode == 0, reset.stderr
    assert [r.split() for r in reset.stdout.splitlines() if r.strip()][1:] == [
        ["lagging", "lag", "0", "10"],
        ["lagging", "lag", "1", "10"],
    ]
    after = groups_tool(broker.bootstrap, "--describe", "--group", "lagging")
    assert "has no active members" in after.stdout
    assert [r.split()[3:6] for r in after.stdout.splitlines()[3:]] == [["10", "65", "55"], ["10", "65", "55"]]
    assert groups_tool(broker.bootstrap, "--list").stdout.split() == ["lagging"]
    deleted = groups_tool(broker.bootstrap, "--delete", "--group", "lagging")
    assert deleted.stdout.strip() == "Deletion of requested consumer groups ('lagging') was successful."
