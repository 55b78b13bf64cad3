"""KIP-848 online migration with confluent-kafka (issue 25): three classic consumers of a 6-partition topic under a
steady producer are rolled one by one to ``group.protocol=consumer`` (the first one converts the classic group to a
consumer group) and then back to ``group.protocol=classic`` (the last consumer-protocol member leaving converts it
back). Every produced record is consumed (at least once, duplicates bounded), no partition is ever owned by two
members at once (from the members' assignment callbacks). Short session timeouts set by config."""

from __future__ import annotations

import threading

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until
from tests.integration.test_consumer_protocol import FAST, Member, Ownership

pytestmark = pytest.mark.integration

CLASSIC = {"session.timeout.ms": 3000, "heartbeat.interval.ms": 300}
COMMON = {"auto.commit.interval.ms": 200, "topic.metadata.refresh.interval.ms": 1000}


class SteadyProducer:
    """Produces ``b"<n>"`` for n = 0, 1, ... round-robin over the partitions, about 200 records/s, until stopped;
    ``delivered`` holds the acknowledged numbers."""

    def __init__(self, bootstrap, topic, partitions):
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
        self.topic, self.partitions = topic, partitions
        self.delivered: set[int] = set()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="steady-producer", daemon=True)
        self.thread.start()

    def _ack(self, err, msg):
        if err is None:
            self.delivered.add(int(msg.value()))

    def _run(self):
        n = 0
        while not self._stop.is_set():
            for _ in range(10):
                self.producer.produce(self.topic, b"%d" % n, partition=n % self.partitions, on_delivery=self._ack)
                n += 1
            self.producer.poll(0)
            self._stop.wait(0.05)
        self.producer.flush(30)

    def stop(self):
        self._stop.set()
        self.thread.join(40)


def _group_type(bootstrap, group) -> str:
    with BrokerConnection.to(bootstrap) as c:
        r = c.request(ApiKeys.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    return next((g["group_type"] for g in r["groups"] if g["group_id"] == group), "")


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_roll_classic_to_consumer_and_back(broker_factory, strategy):
    b = broker_factory(**FAST, **{"group.min.session.timeout.ms": 1000, "group.initial.rebalance.delay.ms": 0})
    topic, group = f"mig-{strategy}", f"gmig-{strategy}"
    create_topic(b.bootstrap, topic, 6)
    own = Ownership()
    classic = dict(COMMON, **CLASSIC, **{"group.protocol": "classic", "partition.assignment.strategy": strategy})
    consumer = dict(COMMON, **{"group.protocol": "consumer"})
    producer = SteadyProducer(b.bootstrap, topic, 6)
    members: dict[str, Member] = {}
    done: list[Member] = []

    def start(name, conf):
        members[name] = Member(b.bootstrap, group, topic, name, own, **conf)

    def stable(names):
        """Each named member owns some partition and together they own all 6 (a finished rebalance)."""
        snap = own.snapshot()
        return sorted(snap) == list(range(6)) and {snap[p] for p in snap} == set(names)

    def roll(old, new, conf):
        m = members.pop(old)
        m.close()
        done.append(m)
        start(new, conf)
        wait_until(lambda: stable(members), 30, message=f"{sorted(members)} share the 6 partitions")

    try:
        for name in ("c1", "c2", "c3"):
            start(name, classic)
        wait_until(lambda: stable(members), 30, message="3 classic members share the 6 partitions")
        assert _group_type(b.bootstrap, group) == "classic"
        roll("c1", "k1", consumer)
        assert _group_type(b.bootstrap, group) == "consumer"  # upgraded online
        roll("c2", "k2", consumer)
        roll("c3", "k3", consumer)
        # and back: the last consumer-protocol member leaving downgrades the group to classic
        roll("k1", "d1", classic)
        roll("k2", "d2", classic)
        assert _group_type(b.bootstrap, group) == "consumer"
        roll("k3", "d3", classic)
        assert _group_type(b.bootstrap, group) == "classic"
        producer.stop()
        produced = producer.delivered
        assert len(produced) > 100

        def consumed() -> list[int]:
            return [int(v) for m in [*done, *members.values()] for v in list(m.records)]

        wait_until(lambda: produced <= set(consumed()), 30, message="every produced record consumed")
    finally:
        producer.stop()
        for m in members.values():
            m.close()
    assert own.violations == []
    output = b.output()
    assert "Traceback" not in output, output[output.index("Traceback") - 2000 :][:6000]
    assert "Converting the classic group to a consumer group" in output
    assert "Downgrading the consumer group to a classic group" in output
    values = consumed()
    duplicates = len(values) - len(set(values))
    print(f"{strategy}: produced {len(produced)}, consumed {len(values)}, duplicates {duplicates}")
    assert duplicates <= len(produced) // 4, f"{duplicates} duplicates of {len(produced)}"
