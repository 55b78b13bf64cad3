"""ConnectionQuotas' connection creation rates (KIP-612): broker-wide and per-listener rates delay the Acceptor,
an IP over its ``connection_creation_rate`` is refused with Kafka's throttle time and not counted."""

from __future__ import annotations

import math
import threading

import pytest

from pykbroker.network.connection_quotas import INT_MAX, ConnectionQuotas, ConnectionThrottledError
from pykbroker.utils.metrics import MetricsRegistry
from pykbroker.utils.time import MockTime

IP_ENTITY = (("ip", "127.0.0.1"),)
DEFAULT_IP = (("ip", None),)


def quotas(time, rate=INT_MAX, listener_rates=None, listeners=("PLAINTEXT",), protected=None, metrics=None):
    return ConnectionQuotas(
        INT_MAX,
        {},
        INT_MAX,
        protected,
        max_connection_creation_rate=rate,
        listener_connection_creation_rates=listener_rates,
        listeners=listeners,
        quota_window_num=2,
        quota_window_size_seconds=1,
        metrics=metrics,
        time=time,
    )


def test_ip_over_its_rate_is_throttled_with_kafkas_delay_and_not_counted():
    time = MockTime()
    metrics = MetricsRegistry()
    q = quotas(time, metrics=metrics)
    q.update_ip_connection_rates({IP_ENTITY: {"connection_creation_rate": 5.0}})
    for _ in range(5):  # 5 in the first (minimum 1 s) window: rate 5/s, within the quota
        q.inc("PLAINTEXT", "127.0.0.1")
    with pytest.raises(ConnectionThrottledError) as e:
        q.inc("PLAINTEXT", "127.0.0.1")
    # rate 6/s over 5/s: (6 - 5) / 5 * 1000 ms
    assert e.value.throttle_ms == 200
    assert q.get("127.0.0.1") == 5  # the refused connection is not counted
    # the refused one was taken back from the IP's rate: still refused, not more so
    with pytest.raises(ConnectionThrottledError) as e:
        q.inc("PLAINTEXT", "127.0.0.1")
    assert e.value.throttle_ms == 200
    q.inc("PLAINTEXT", "10.0.0.1")  # another IP has no quota
    assert q.get("10.0.0.1") == 1
    values = dict(metrics.get("kafka.server:type=socket-server-metrics,name=connection-accept-rate").values())
    assert values[("127.0.0.1",)] == pytest.approx(5.0)
    ip_throttle = metrics.get(
        "kafka.server:type=socket-server-metrics,name=ip-connection-accept-throttle-time,listener=PLAINTEXT"
    )
    assert ip_throttle.value == pytest.approx(200.0)
    listener_rate = metrics.get(
        "kafka.server:type=socket-server-metrics,name=connection-accept-rate,listener=PLAINTEXT"
    )
    assert listener_rate.value == pytest.approx(6.0)  # 5 + 10.0.0.1; the refused ones are taken back


def test_specific_ip_beats_default_ip_and_removal_lifts_the_quota():
    time = MockTime()
    q = quotas(time)
    q.update_ip_connection_rates(
        {DEFAULT_IP: {"connection_creation_rate": 1.0}, IP_ENTITY: {"connection_creation_rate": 3.0}}
    )
    assert q.connection_rate_for_ip("127.0.0.1") == 3
    assert q.connection_rate_for_ip("10.1.1.1") == 1
    for _ in range(3):
        q.inc("PLAINTEXT", "127.0.0.1")
    with pytest.raises(ConnectionThrottledError):
        q.inc("PLAINTEXT", "127.0.0.1")
    q.update_ip_connection_rates({DEFAULT_IP: {"connection_creation_rate": 1.0}})  # specific entity removed
    with pytest.raises(ConnectionThrottledError):  # now the default's 1/s
        q.inc("PLAINTEXT", "127.0.0.1")
    q.update_ip_connection_rates({})
    q.inc("PLAINTEXT", "127.0.0.1")
    assert q.get("127.0.0.1") == 4


def test_ip_rate_recovers_as_time_passes():
    time = MockTime()
    q = quotas(time)
    q.update_ip_connection_rates({IP_ENTITY: {"connection_creation_rate": 2.0}})
    q.inc("PLAINTEXT", "127.0.0.1")
    q.inc("PLAINTEXT", "127.0.0.1")
    with pytest.raises(ConnectionThrottledError):
        q.inc("PLAINTEXT", "127.0.0.1")
    time.sleep(2500)  # both windows expired
    q.inc("PLAINTEXT", "127.0.0.1")


def test_broker_rate_delays_the_acceptor_by_the_throttle_time():
    time = MockTime()
    q = quotas(time, rate=10)
    for _ in range(10):
        q.inc("PLAINTEXT", "127.0.0.1")
    done = threading.Event()

    def eleventh():
        q.inc("PLAINTEXT", "127.0.0.1")
        done.set()

    t = threading.Thread(target=eleventh, daemon=True)
    t.start()
    assert not done.wait(0.3)  # waits: 11/s over 10/s -> 100 ms of (mock) time
    time.sleep(99)
    assert not done.wait(0.6)
    time.sleep(1)
    assert done.wait(2.0)
    assert q.get("127.0.0.1") == 11
    t.join(1)


def test_protected_inter_broker_listener_skips_the_broker_rate_but_not_its_own():
    time = MockTime()
    q = quotas(
        time,
        rate=1,
        listener_rates={"REPLICATION": 100},
        listeners=("PLAINTEXT", "REPLICATION"),
        protected="REPLICATION",
    )
    for _ in range(50):  # the broker-wide 1/s does not apply to the protected listener
        q.inc("REPLICATION", "127.0.0.1")
    now = time.milliseconds()
    assert q._record_connection_and_get_throttle_ms("PLAINTEXT", now) == 0  # 1/s: within
    assert q._record_connection_and_get_throttle_ms("PLAINTEXT", now) == 1000  # 2/s over 1/s


def test_dynamic_rate_change_applies_to_the_next_connection():
    time = MockTime()
    metrics = MetricsRegistry()
    q = quotas(time, rate=2, metrics=metrics)
    q.inc("PLAINTEXT", "127.0.0.1")
    q.inc("PLAINTEXT", "127.0.0.1")
    q.update_connection_creation_rates(INT_MAX, {"PLAINTEXT": INT_MAX})
    for _ in range(20):
        q.inc("PLAINTEXT", "127.0.0.1")  # no wait any more
    q.update_connection_creation_rates(5, {"PLAINTEXT": 5})
    assert q._record_connection_and_get_throttle_ms("PLAINTEXT", time.milliseconds()) == 1000  # bounded by the window
    throttle = metrics.get(
        "kafka.server:type=socket-server-metrics,name=connection-accept-throttle-time,listener=PLAINTEXT"
    )
    assert throttle.value == pytest.approx(1000.0)
    broker = metrics.get("kafka.server:type=socket-server-metrics,name=broker-connection-accept-rate")
    assert broker.value == pytest.approx(23.0)


def test_throttle_time_metric_is_nan_without_throttles():
    metrics = MetricsRegistry()
    quotas(MockTime(), metrics=metrics)
    name = "kafka.server:type=socket-server-metrics,name=connection-accept-throttle-time,listener=PLAINTEXT"
    assert math.isnan(metrics.get(name).value)
