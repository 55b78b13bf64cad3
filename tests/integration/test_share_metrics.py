"""Kafka 4.2's share group metrics through the Prometheus endpoint: a confluent-kafka ShareConsumer accepts, releases
and rejects records, then /metrics carries ShareGroupMetrics' RecordAcknowledgementsPerSec per ackType,
PartitionLoadTimeMs, the group's RequestTopicPartitionsFetchRatio / TopicPartitionsAcquireTimeMs, and the KIP-1103
BrokerTopicMetrics share fetch / acknowledgement request meters (per topic and all topics)."""

from __future__ import annotations

import re

import pytest

from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until
from tests.integration.test_prometheus_metrics import REPORTER, by_label, scrape, value
from tests.integration.test_share_consumer import FAST, poll_records, produce, set_group_configs, share_consumer

pytestmark = pytest.mark.integration

ACKS = "kafka_server_sharegroupmetrics_recordacknowledgements_total"


def test_share_metrics_count_acknowledgements_fetches_and_loads(broker_factory):
    from confluent_kafka import AcknowledgeType

    broker = broker_factory(**FAST, **REPORTER)
    line = broker.wait_for_line(r"Prometheus metrics endpoint listening on \S+:\d+")
    assert line is not None, broker.output()
    host, port = re.search(r"listening on (\S+):(\d+)", line).groups()
    url = f"http://{host}:{port}/metrics"
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "sm", partitions=1)
    set_group_configs(bootstrap, "smg", {"share.auto.offset.reset": "earliest"})
    produce(bootstrap, "sm", [b"a", b"b", b"c", b"d"], batch=1)
    c = share_consumer(bootstrap, "smg", "sm", explicit=True)
    try:
        got: list = []
        wait_until(lambda: got.extend(poll_records(c)) or len(got) >= 4, 30, message="4 records")
        kinds = [AcknowledgeType.ACCEPT, AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT]
        for m, kind in zip(got, kinds, strict=True):
            c.acknowledge(m, kind)
        c.commit_sync(30)
        again: list = []
        wait_until(lambda: again.extend(poll_records(c)) or again, 30, message="the released record again")
        assert [m.value() for m in again] == [b"c"]
        c.acknowledge(again[0], AcknowledgeType.ACCEPT)
        c.commit_sync(30)

        def counted():
            s = scrape(url)
            return s if by_label(s, ACKS, "ackType").get("Accept") == 3 else None

        samples = wait_until(counted, 10, message="the acknowledgements counted")
    finally:
        c.close()
    assert by_label(samples, ACKS, "ackType") == {"Accept": 3, "Release": 1, "Reject": 1}
    # the consumer's share session was open at the scrape: one session of one partition (ShareSessionCache)
    assert value(samples, "kafka_server_sharesessioncache_sharesessionscount") == 1
    assert value(samples, "kafka_server_sharesessioncache_sharepartitionscount") == 1
    # one share partition created and loaded
    assert value(samples, "kafka_server_sharegroupmetrics_partitionloadtimems_count") == 1
    assert value(samples, "kafka_server_sharegroupmetrics_partitionloadtimems_sum") >= 0
    # every fetch that acquired records recorded its ratio (100: the one partition requested) and acquire time
    ratio_count = value(samples, "kafka_server_sharegroupmetrics_requesttopicpartitionsfetchratio_count", group="smg")
    assert ratio_count >= 2
    assert (
        value(samples, "kafka_server_sharegroupmetrics_requesttopicpartitionsfetchratio", group="smg", quantile="0.999")
        == 100
    )
    assert value(samples, "kafka_server_sharegroupmetrics_topicpartitionsacquiretimems_count", group="smg") >= 2
    # KIP-1103 BrokerTopicMetrics: one per topic per request; nothing failed
    base = "kafka_server_brokertopicmetrics_"
    fetches = value(samples, base + "totalsharefetchrequests_total", topic="sm")
    assert fetches >= ratio_count
    assert value(samples, base + "totalsharefetchrequests_total") == fetches  # all topics: only "sm" was fetched
    acks = value(samples, base + "totalshareacknowledgementrequests_total", topic="sm")
    assert acks >= 2  # two commit_sync's, each one request naming "sm"
    assert value(samples, base + "totalshareacknowledgementrequests_total") == acks
    assert value(samples, base + "failedsharefetchrequests_total", topic="sm") == 0
    assert value(samples, base + "failedshareacknowledgementrequests_total", topic="sm") == 0
