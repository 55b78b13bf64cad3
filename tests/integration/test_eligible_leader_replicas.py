"""Eligible leader replicas (KIP-966) on a cluster formatted with ``eligible.leader.replicas.version=1``.

One controller and three brokers; a topic of one partition, RF 3, ``min.insync.replicas=2``, led by 101. The
brokers stop one by one (SIGTERM: a controlled shutdown): 102 leaves the ISR at min ISR (no ELR), 103 leaves
it below (it joins the ELR), 101, the last ISR member, leaves an empty ISR (it joins the ELR and stays the last
known leader). ``kafka-topics --describe`` shows the Elr and LastKnownElr columns throughout. Broker 102 comes
back: not eligible, the partition stays leaderless; with 102 stopped again, 103 comes back: elected from the ELR,
a clean election (no ``unclean.leader.election.enable``), and it serves every record acknowledged before.
"""

from __future__ import annotations

import pytest

from pykbroker.protocol import errors
from tests.helpers.cluster import KRaftCluster
from tests.helpers.replication import REPLICATION_TIMEOUTS, partitions, raw_produce, wait_for_full_isr
from tests.helpers.tools import run_tool
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

TOPIC = "elr"


@pytest.fixture
def cluster(tmp_path):
    c = KRaftCluster(
        tmp_path,
        controllers=1,
        brokers=3,
        format_args=("--feature", "eligible.leader.replicas.version=1"),
        **{k.replace(".", "_"): v for k, v in {**REPLICATION_TIMEOUTS, "offsets.topic.num.partitions": "1"}.items()},
    )
    try:
        c.start()
        yield c
    finally:
        c.stop()


def describe_line(bootstrap: str) -> str:
    run = run_tool("topic_command", "--bootstrap-server", bootstrap, "--describe", "--topic", TOPIC)
    assert run.returncode == 0, run.stderr
    (line,) = [x for x in run.stdout.splitlines() if "Partition: 0" in x]
    return line.strip()


def test_elr_member_leads_again_after_every_isr_member_stopped(cluster):
    from confluent_kafka.admin import AdminClient, NewTopic

    b = cluster.brokers
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = NewTopic(TOPIC, num_partitions=1, replica_assignment=[[101, 102, 103]], config={"min.insync.replicas": "2"})
    admin.create_topics([topic])[TOPIC].result(30)
    del admin
    wait_for_full_isr(lambda: cluster.bootstrap, TOPIC)
    assert raw_produce(b[101].bootstrap, TOPIC, 0, -1, [b"r%d" % i for i in range(20)])["error_code"] == errors.NONE

    def isr_on(addr, isr):
        wait_until(lambda: (p := partitions(addr, TOPIC).get(0)) is not None and p["isr_nodes"] == isr, 20)

    b[102].stop()
    isr_on(b[101].bootstrap, [101, 103])
    assert describe_line(b[101].bootstrap).endswith("Isr: 101,103\tElr: \tLastKnownElr:")
    b[103].stop()
    isr_on(b[101].bootstrap, [101])
    assert describe_line(b[101].bootstrap).endswith(
        "Leader: 101\tReplicas: 101,102,103\tIsr: 101\tElr: 103\tLastKnownElr:"
    )
    b[101].stop()
    b[102].start()
    wait_until(lambda: "Isr: \tElr: 101,103" in describe_line(b[102].bootstrap), 20, message="empty ISR, ELR 101,103")
    assert describe_line(b[102].bootstrap).endswith(
        "Leader: none\tReplicas: 101,102,103\tIsr: \tElr: 101,103\tLastKnownElr: 101"
    )
    b[102].stop()  # so that it cannot catch up and join the ISR (clearing the ELR) before the checks below
    b[103].start()
    wait_until(lambda: (p := partitions(b[103].bootstrap, TOPIC).get(0)) is not None and p["leader_id"] == 103, 20)
    assert describe_line(b[103].bootstrap).endswith(
        "Leader: 103\tReplicas: 101,102,103\tIsr: 103\tElr: 101\tLastKnownElr:"
    )
    # 103 was in the ISR when the records were acknowledged: it has them all
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": b[103].bootstrap, "group.id": "elr", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(TOPIC, 0, 0)])
        got: list[bytes] = []
        wait_until(lambda: got.extend(m.value() for m in c.consume(20, 0.5) if not m.error()) or len(got) >= 20, 20)
        assert got == [b"r%d" % i for i in range(20)]
    finally:
        c.close()
