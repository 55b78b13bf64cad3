"""The client quota managers' metrics (Kafka's per-client ``byte-rate`` and ``throttle-time`` quota sensors) as
the Prometheus endpoint shows them: ``kafka_server_quota_<attribute>{resource, user, clientId}``."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pykbroker.metrics.prometheus import KafkaCollector
from pykbroker.server.quotas.client_quota_manager import QuotaManagers
from pykbroker.utils.metrics import MetricsRegistry
from pykbroker.utils.time import MockTime

CLIENT_C1 = ((("client-id", "c1"),), {"producer_byte_rate": 1000.0})
USER_BOB = ((("user", "bob"),), {"consumer_byte_rate": 1000.0})


def _scrape(registry: MetricsRegistry) -> dict[str, dict[tuple, float]]:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(KafkaCollector(registry))
    page = generate_latest(reg).decode()
    return {
        f.name: {tuple(sorted(s.labels.items())): s.value for s in f.samples}
        for f in text_string_to_metric_families(page)
    }


def test_byte_rate_and_throttle_time_per_sharing_key():
    time = MockTime()
    registry = MetricsRegistry()
    managers = QuotaManagers(2, 1, time, registry)
    managers.update_quotas(dict([CLIENT_C1, USER_BOB]))
    assert managers.produce.record_and_get_throttle_time_ms("ANONYMOUS", "c1", 500) == 0
    throttle = managers.produce.record_and_get_throttle_time_ms("ANONYMOUS", "c1", 1500)
    assert throttle == 1000  # 2000 B in a 1 s window against 1000 B/s
    managers.fetch.record_and_get_throttle_time_ms("bob", "any", 10)
    managers.produce.record_and_get_throttle_time_ms("ANONYMOUS", "unlimited", 10**9)  # no quota: no series

    pages = _scrape(registry)
    produce = (("clientId", "c1"), ("resource", "Produce"), ("user", ""))
    fetch = (("clientId", ""), ("resource", "Fetch"), ("user", "bob"))  # a user-level quota: shared by its clients
    assert pages["kafka_server_quota_byte_rate"] == {produce: pytest.approx(2000.0), fetch: pytest.approx(10.0)}
    throttle_times = pages["kafka_server_quota_throttle_time"]
    assert throttle_times[produce] == 1000.0
    assert math.isnan(throttle_times[fetch])  # never throttled (Kafka's Avg without samples)


def test_no_series_without_quotas():
    registry = MetricsRegistry()
    managers = QuotaManagers(11, 1, MockTime(), registry)
    managers.produce.record_and_get_throttle_time_ms("ANONYMOUS", "c1", 10**9)
    assert not _scrape(registry).get("kafka_server_quota_byte_rate")
