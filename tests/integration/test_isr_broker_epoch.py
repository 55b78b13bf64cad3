"""A restarted follower rejoins the ISR only under its new registration (KIP-903), on a real cluster of
one controller and two brokers as separate processes.

The follower is killed with SIGKILL; the leader shrinks it out of the ISR (``replica.lag.time.max.ms``)
and the follower is started again while its previous incarnation's session is still valid
(``broker.session.timeout.ms`` much longer), so the new incarnation cannot register
(DUPLICATE_BROKER_REGISTRATION) until the controller fences the old one. Until then the leader must not
propose it for the ISR: the controller's log must show no ISR change bringing the follower back before
it registered the new incarnation, the leader's proposals must name the follower with its new broker
epoch, and the partition must have its full ISR again afterwards.
"""

from __future__ import annotations

import re

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.cluster import KRaftCluster
from tests.helpers.replication import partitions, raw_produce, wait_for_full_isr
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

TOPIC = "epoch-isr"
SETTINGS = {
    "replica.lag.time.max.ms": "1000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "100",
    # The killed incarnation's session outlives the ISR shrink and the restart by several seconds.
    "broker.session.timeout.ms": "8000",
    "offsets.topic.replication.factor": "2",
    "offsets.topic.num.partitions": "1",
    "default.replication.factor": "2",
    "leader.imbalance.check.interval.seconds": "3600",
}


@pytest.fixture
def cluster(tmp_path):
    c = KRaftCluster(tmp_path, controllers=1, brokers=2, **SETTINGS)
    try:
        c.start()
        yield c
    finally:
        c.kill_all()


def test_restarted_follower_rejoins_the_isr_only_under_its_new_registration(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 2)])[TOPIC].result(30)
    wait_for_full_isr(lambda: cluster.bootstrap, TOPIC, replicas=2)
    state = partitions(cluster.bootstrap, TOPIC)[0]
    leader = state["leader_id"]
    follower = next(b for b in state["replica_nodes"] if b != leader)
    leader_addr = cluster.brokers[leader].bootstrap
    controller = cluster.controllers[1]

    cluster.brokers[follower].kill()
    mark, leader_mark = len(controller.lines), len(cluster.brokers[leader].lines)

    def shrunk() -> bool:
        # The killed follower sits at the leader's LEO (caught up for ever); new records make it lag.
        raw_produce(leader_addr, TOPIC, 0, 1, [b"while-down"])
        return partitions(leader_addr, TOPIC)[0]["isr_nodes"] == [leader]

    wait_until(shrunk, 15, interval=0.2, message="the ISR shrunk to the leader")
    cluster.brokers[follower].start(60)  # returns once the new incarnation has registered
    wait_for_full_isr(lambda: cluster.bootstrap, TOPIC, replicas=2, timeout=30)

    lines = controller.lines[mark:]
    registered = next(
        (i for i, line in enumerate(lines) if re.search(rf"Registering a new incarnation.*broker={follower}\b", line)),
        None,
    )
    assert registered is not None, "\n".join(lines)
    rejoined = [
        i for i, line in enumerate(lines) if re.search(rf"altered ISR for {TOPIC}-0 to \[.*\b{follower}\b.*\]", line)
    ]
    assert rejoined, "\n".join(lines)
    # Not a single ISR change with the follower before its new incarnation was registered.
    assert rejoined[0] > registered, "\n".join(lines[: registered + 1])
    # The leader proposed it under the new incarnation's broker epoch (KIP-903).
    epoch = re.search(r"epoch=(\d+)", lines[registered]).group(1)
    proposals = [line for line in cluster.brokers[leader].lines[leader_mark:] if f"{TOPIC}-0: expanding" in line]
    assert proposals and all(f"{follower}: {epoch}" in line for line in proposals), proposals
