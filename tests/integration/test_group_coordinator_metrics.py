"""Kafka 4's group coordinator metrics (``kafka.server:type=group-coordinator-metrics``) on /metrics of a real broker:
group counts per protocol and consumer-group counts per state, the rebalance, offset commit and offset deletion
sensors, after a classic and a consumer-protocol confluent-kafka group consumed and committed."""

from __future__ import annotations

import re

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until
from tests.integration.test_consumer_protocol import FAST
from tests.integration.test_prometheus_metrics import REPORTER, by_label, scrape, value

pytestmark = pytest.mark.integration

M = "kafka_server_group_coordinator_metrics_"


def _consume_and_commit(bootstrap, group, topic, protocol, n):
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    seen = []

    def consumed() -> bool:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            seen.append(m)
        return len(seen) >= n

    wait_until(consumed, 30, interval=0, message=f"{group}: {n} records")
    c.commit(asynchronous=False)
    return c


def test_group_coordinator_metrics(broker_factory):
    from confluent_kafka import Producer

    b = broker_factory(**REPORTER, **FAST)
    line = b.wait_for_line(r"Prometheus metrics endpoint listening on \S+:\d+")
    host, port = re.search(r"listening on (\S+):(\d+)", line).groups()
    url = f"http://{host}:{port}/metrics"
    create_topic(b.bootstrap, "gcm", 2)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(10):
        p.produce("gcm", b"%d" % i, partition=i % 2)
    assert p.flush(30) == 0

    classic = _consume_and_commit(b.bootstrap, "gcm-classic", "gcm", "classic", 10)
    consumer = _consume_and_commit(b.bootstrap, "gcm-consumer", "gcm", "consumer", 10)
    try:

        def settled():
            s = scrape(url)
            stable = by_label(s, M + "consumer_group_count", "state").get("Stable")
            return s if stable == 1 and s.get((M + "offset_commit_count", ())) == 4 else None

        s = wait_until(settled, 15, message="both groups counted, 4 offsets committed")
        assert by_label(s, M + "group_count", "protocol") == {
            "classic": 1,
            "consumer": 1,
            "share": 0,
        }  # no share group here
        assert by_label(s, M + "consumer_group_count", "state") == {
            "Empty": 0,
            "Assigning": 0,
            "Reconciling": 0,
            "Stable": 1,
            "Dead": 0,
        }
        assert value(s, M + "consumer_group_rebalance_count") == 1  # the member's join bumped the epoch once
        assert value(s, M + "group_completed_rebalance_count") == 1
        assert value(s, M + "offset_commit_rate") > 0
        assert value(s, M + "offset_deletion_count") == 0
        assert value(s, M + "offset_expiration_count") == 0
    finally:
        classic.close()
        consumer.close()
    # OffsetDelete (admin) of the classic group's two partitions, once its members' leave emptied it
    wait_until(lambda: _offset_delete(b.bootstrap), 15, message="offsets of the empty classic group deleted")
    s = wait_until(lambda: (x := scrape(url)).get((M + "offset_deletion_count", ())) == 2 and x, 10, message="2")
    assert value(s, M + "offset_commit_count") == 4


def _offset_delete(bootstrap) -> bool:
    with BrokerConnection.to(bootstrap) as c:
        r = c.request(
            ApiKeys.OFFSET_DELETE,
            0,
            {
                "group_id": "gcm-classic",
                "topics": [{"name": "gcm", "partitions": [{"partition_index": 0}, {"partition_index": 1}]}],
            },
        )
    return r["error_code"] == 0 and all(p["error_code"] == 0 for t in r["topics"] for p in t["partitions"])
