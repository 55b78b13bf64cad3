"""ClientQuotaManager: Kafka's quota precedence (DefaultQuotaCallback), sharing keys, throttle times
(QuotaUtils.throttleTime over a SampledStat Rate) and the no-quota fast path."""

from __future__ import annotations

import threading

from pykbroker.server.quotas.client_quota_manager import ClientQuotaManager, ThrottledChannelReaper, user_of
from pykbroker.server.quotas.sampled_rate import SampledRate


class FakeTime:
    def __init__(self, ms: int = 1_000_000):
        self.ms = ms

    def milliseconds(self) -> int:
        return self.ms


def _manager(quotas: dict, samples: int = 11, window_s: int = 1, time=None) -> ClientQuotaManager:
    m = ClientQuotaManager("Produce", "producer_byte_rate", samples, window_s, time or FakeTime())
    m.update_quotas({tuple(sorted(e)): {"producer_byte_rate": v} for e, v in quotas.items()})
    return m


def test_no_quota_is_free():
    m = _manager({})
    assert not m.quotas_enabled
    assert m.record_and_get_throttle_time_ms("u", "c", 10**9) == 0
    assert m.max_value_in_quota_window("u", "c") == float("inf")
    # a quota of another kind (consumer_byte_rate) does not enable the produce manager
    m.update_quotas({(("user", "u"),): {"consumer_byte_rate": 1.0}})
    assert not m.quotas_enabled


def test_precedence_most_specific_first():
    quotas = {
        (("user", "u"), ("client-id", "c")): 1.0,
        (("user", "u"), ("client-id", None)): 2.0,
        (("user", "u"),): 3.0,
        (("user", None), ("client-id", "c")): 4.0,
        (("user", None), ("client-id", None)): 5.0,
        (("user", None),): 6.0,
        (("client-id", "c"),): 7.0,
        (("client-id", None),): 8.0,
    }
    m = _manager(quotas)
    assert m._resolve("u", "c") == (("u", "c"), 1.0)
    assert m._resolve("u", "other") == (("u", "other"), 2.0)
    assert m._resolve("v", "c") == (("v", "c"), 4.0)
    assert m._resolve("v", "d") == (("v", "d"), 5.0)
    del quotas[(("user", "u"), ("client-id", None))]
    m = _manager(quotas)
    assert m._resolve("u", "other") == (("u", ""), 3.0)  # a user quota is shared by the user's clients
    m = _manager({(("client-id", "c"),): 7.0, (("client-id", None),): 8.0})
    assert m._resolve("anyone", "c") == (("", "c"), 7.0)
    assert m._resolve("anyone", "d") == (("", "d"), 8.0)
    m = _manager({(("user", "u"),): 3.0})
    assert m._resolve("v", "c") is None


def test_throttle_time_as_kafka():
    t = FakeTime()
    m = _manager({(("client-id", "c"),): 1000.0}, samples=11, window_s=1, time=t)
    # 10 full windows count at least: 10,000 bytes at once are within 1000 B/s
    assert m.record_and_get_throttle_time_ms("u", "c", 10_000) == 0
    # 11,000 / 10 s = 1100 B/s: (1100 - 1000) / 1000 * 10,000 ms = 1000 ms
    assert m.record_and_get_throttle_time_ms("u", "c", 1_000) == 1000
    assert m.max_value_in_quota_window("u", "c") == 10_000.0
    # another client id is not affected
    assert m.record_and_get_throttle_time_ms("u", "d", 10**6) == 0


def test_rate_windows_slide_and_expire():
    r = SampledRate(3, 1000, now_ms=0)
    r.record(3000, 0)
    assert r.measure(0) == 1500.0  # (samples - 1) windows at least
    r.record(1000, 1500)
    assert r.measure(1500) == 1600.0  # 1500 ms elapsed + 1 missing full window
    # every window older than samples * window_ms is reset
    assert r.measure(10_000) == 0.0


def test_update_changes_limits_and_keeps_rates():
    t = FakeTime()
    m = _manager({(("user", "u"),): 100.0}, samples=2, window_s=1, time=t)
    assert m.record_and_get_throttle_time_ms("u", "c", 150) > 0
    m.update_quotas({(("user", "u"),): {"producer_byte_rate": 1e9}})
    assert m.record_and_get_throttle_time_ms("u", "c", 1) == 0
    m.update_quotas({})
    assert not m.quotas_enabled


def test_quotas_enabled_follows_the_configured_quotas():
    # a plain attribute since issue 31 (read per produce and fetch request): kept with every update
    m = ClientQuotaManager("Produce", "producer_byte_rate", 11, 1, FakeTime())
    assert m.quotas_enabled is False
    m.update_quotas({(("user", "u"),): {"consumer_byte_rate": 10.0}})  # another type's quota only
    assert m.quotas_enabled is False
    m.update_quotas({(("client-id", None),): {"producer_byte_rate": 10.0}})
    assert m.quotas_enabled is True
    m.update_quotas({})
    assert m.quotas_enabled is False


def test_user_of_principal():
    assert user_of("User:alice") == "alice"
    assert user_of("User:ANONYMOUS") == "ANONYMOUS"
    assert user_of(None) == "ANONYMOUS"


def test_reaper_ends_throttles_in_time_order():
    reaper = ThrottledChannelReaper("test")
    reaper.start()
    ended: list[str] = []
    done = threading.Event()
    try:
        reaper.add(60, lambda: ended.append("late") or done.set())
        reaper.add(10, lambda: ended.append("early"))
        assert done.wait(5)
        assert ended == ["early", "late"]
    finally:
        reaper.shutdown()
