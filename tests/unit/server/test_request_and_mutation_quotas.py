"""ClientRequestQuotaManager (request_percentage, KIP-124) and ControllerMutationQuotaManager
(controller_mutation_rate, KIP-599): rates, bounded throttle times, strict vs permissive quotas, exemptions, the
request-throttle glue of RequestHelper, and the controller refusing throttled topics."""

from __future__ import annotations

import pytest

from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server.quotas import request_throttle
from pykbroker.server.quotas.client_quota_manager import QuotaManagers
from pykbroker.server.quotas.client_request_quota_manager import ClientRequestQuotaManager
from pykbroker.server.quotas.controller_mutation_quota_manager import (
    UNBOUNDED,
    ControllerMutationQuotaManager,
    PermissiveControllerMutationQuota,
    StrictControllerMutationQuota,
    ThrottlingQuotaExceeded,
)


class FakeTime:
    def __init__(self, ms: int = 1_000_000):
        self.ms = ms

    def milliseconds(self) -> int:
        return self.ms

    def nanoseconds(self) -> int:
        return self.ms * 1_000_000


def _quotas(key: str, entities: dict) -> dict:
    return {tuple(sorted(e)): {key: v} for e, v in entities.items()}


# -- request_percentage ----------------------------------------------------------------------------------------


def test_request_time_is_a_percentage_of_one_thread():
    t = FakeTime()
    m = ClientRequestQuotaManager(11, 1, t)
    m.update_quotas(_quotas("request_percentage", {(("client-id", "c"),): 10.0}))
    # 10 windows of 1 s count at least: 1 s of handler time = 100 percent-seconds / 10 s = 10 %: within quota
    assert m.record_request_time("u", "c", 1_000_000_000) == 0
    assert dict(m.request_times()) == {("", "c"): pytest.approx(10.0)}
    # 0.5 s more: 15 % of a thread against 10 %: (15 - 10) / 10 * 10 s = 5 s, bounded by one window (1 s)
    assert m.record_request_time("u", "c", 500_000_000) == 1000
    assert dict(m.throttle_times()) == {("", "c"): 1000.0}
    # another client id has no quota: never throttled, nothing recorded for it
    assert m.record_request_time("u", "other", 10**12) == 0
    assert ("", "other") not in dict(m.request_times())


def test_request_throttle_bounded_by_the_window_size():
    t = FakeTime()
    m = ClientRequestQuotaManager(2, 3, t)
    m.update_quotas(_quotas("request_percentage", {(("user", "u"),): 1.0}))
    assert m.record_request_time("u", "any", 10 * 10**9) == 3000  # way over: one 3 s window at most


def test_no_request_quota_is_free_and_exempt_time_is_recorded_only_with_quotas():
    t = FakeTime()
    m = ClientRequestQuotaManager(11, 1, t)
    assert not m.quotas_enabled
    assert m.record_request_time("u", "c", 10**12) == 0
    m.record_exempt(10**9)
    assert m.exempt_request_time() == 0.0
    m.update_quotas(_quotas("request_percentage", {(("client-id", None),): 50.0}))
    m.record_exempt(10**9)  # 100 percent-seconds over 10 s
    assert m.exempt_request_time() == pytest.approx(10.0)


class _Ctx:
    def __init__(self, api_key, client_id="c", principal="User:ANONYMOUS"):
        self.api_key = api_key
        self.client_id = client_id
        self.principal = principal


class _Req:
    def __init__(self, api_key, body=None, spent_ms=0, now_ms=1_000_000):
        self.context = _Ctx(api_key)
        self.body = body or {}
        self.request_dequeue_time_ns = (now_ms - spent_ms) * 1_000_000
        self.api_local_complete_time_ns = -1
        self.pending_throttle = None
        self.api_throttle_time_ms = 0
        self.record_network_thread_time = None


class _Channel:
    def __init__(self):
        self.events = []

    def start_throttling(self, request):
        self.events.append("start")

    def end_throttling(self, request):
        self.events.append("end")


def test_apply_throttles_once_with_the_larger_throttle_and_exempts_cluster_actions():
    t = FakeTime()
    q = QuotaManagers(2, 1, t)
    q.update_quotas(_quotas("request_percentage", {(("client-id", "c"),): 1.0}))
    channel = _Channel()
    # 100 ms of handler time: 10 percent-seconds / 1 s = 10 % against 1 %: (10 - 1) / 1 * 1 s, bounded to 1 s
    req = _Req(ApiKeys.METADATA, spent_ms=100)
    body = request_throttle.apply(q, req, {"throttle_time_ms": 0, "brokers": []}, channel)
    assert body["throttle_time_ms"] == 1000
    assert channel.events == ["start"] and q.request.reaper.size == 1
    # a byte-rate throttle larger than the request's wins and mutes the channel once, through its manager
    req = _Req(ApiKeys.PRODUCE, spent_ms=100)
    request_throttle.note(req, q.produce, 5000)
    body = request_throttle.apply(q, req, {"throttle_time_ms": 5000, "responses": []}, channel)
    assert body["throttle_time_ms"] == 5000
    assert channel.events == ["start", "start"] and q.produce.reaper.size == 1 and q.request.reaper.size == 1
    assert req.api_throttle_time_ms == 5000  # what RequestMetrics' ThrottleTimeMs records
    # cluster actions and follower fetches are exempt (recorded as exempt time), a no-op response too
    for req, body in (
        (_Req(ApiKeys.WRITE_TXN_MARKERS, spent_ms=100), {"markers": []}),
        (_Req(ApiKeys.FETCH, {"replica_id": 1}, spent_ms=100), {"throttle_time_ms": 0, "responses": []}),
        (_Req(ApiKeys.PRODUCE, spent_ms=100), None),
    ):
        assert request_throttle.apply(q, req, body, channel) == body
    assert channel.events == ["start", "start"]
    assert q.request.exempt_request_time() == pytest.approx(30.0)
    # ...but not a cluster action refused for the principal (Kafka's handleError)
    refused = {"error_code": errors.CLUSTER_AUTHORIZATION_FAILED, "markers": []}
    assert request_throttle.apply(q, _Req(ApiKeys.WRITE_TXN_MARKERS, spent_ms=100), refused, channel) == refused
    assert channel.events == ["start", "start", "start"]


def test_a_request_recorded_early_is_not_recorded_again():
    """The Fetch handler records the request quota before building its response (to answer it empty); sending
    the response does not record it a second time, and applies the throttle once."""
    t = FakeTime()
    q = QuotaManagers(2, 1, t)
    q.update_quotas(_quotas("request_percentage", {(("client-id", "c"),): 1.0}))
    channel = _Channel()
    req = _Req(ApiKeys.FETCH, {"replica_id": -1}, spent_ms=5)  # 0.5 % of a thread: within quota
    assert request_throttle.record(q, req, {}) == 0
    before = dict(q.request.request_times())
    assert request_throttle.apply(q, req, {"throttle_time_ms": 0}, channel) == {"throttle_time_ms": 0}
    assert dict(q.request.request_times()) == before and channel.events == []


def test_apply_without_request_quota_only_applies_the_pending_throttle():
    t = FakeTime()
    q = QuotaManagers(2, 1, t)
    channel = _Channel()
    req = _Req(ApiKeys.PRODUCE, spent_ms=10_000)
    request_throttle.note(req, q.produce, 700)
    body = request_throttle.apply(q, req, {"throttle_time_ms": 700}, channel)
    assert body == {"throttle_time_ms": 700} and channel.events == ["start"] and req.pending_throttle is None


# -- controller_mutation_rate --------------------------------------------------------------------------------


def _mutation_manager(rate: float, samples: int = 2, window_s: int = 1, t=None) -> ControllerMutationQuotaManager:
    m = ControllerMutationQuotaManager(samples, window_s, t or FakeTime())
    m.update_quotas(_quotas("controller_mutation_rate", {(("client-id", "c"),): rate}))
    return m


def test_quota_kinds_by_version():
    m = _mutation_manager(5.0)
    assert m.new_quota_for("u", "other", 6, 6) is UNBOUNDED
    assert isinstance(m.new_quota_for("u", "c", 6, 6), StrictControllerMutationQuota)
    assert isinstance(m.new_quota_for("u", "c", 5, 6), PermissiveControllerMutationQuota)
    assert ControllerMutationQuotaManager(2, 1, FakeTime()).new_quota_for("u", "c", 6, 6) is UNBOUNDED


def test_strict_quota_token_bucket():
    t = FakeTime()
    m = _mutation_manager(5.0, t=t)  # burst 5 * 2 * 1 s = 10 tokens, starting full
    q = m.new_quota_for("u", "c", 6, 6)
    q.record(8)  # 10 -> 2
    q.record(7)  # still >= 0 before: accepted, 2 -> -5
    assert q.throttle_time == 0 and not q.is_exceeded()
    with pytest.raises(ThrottlingQuotaExceeded) as e:
        q.record(1)  # below zero: refused, nothing recorded; refill to zero takes 5 / 5 per s = 1 s
    assert e.value.code == errors.THROTTLING_QUOTA_EXCEEDED
    assert str(e.value) == "The throttling quota has been exceeded."
    assert e.value.throttle_time_ms == 1000 and q.throttle_time == 1000 and q.is_exceeded()
    t.ms += 400
    assert q.throttle_time == 600  # what is left of it
    assert dict(m.tokens())[("", "c")] == pytest.approx(-3.0)
    t.ms += 600  # refilled to zero: accepted again
    m.new_quota_for("u", "c", 6, 6).record(1)
    assert dict(m.mutation_rates())[("", "c")] == pytest.approx(16.0)  # 16 partitions over the 1 s elapsed
    assert dict(m.throttle_times()) == {("", "c"): 1000.0}


def test_permissive_quota_accepts_and_throttles():
    t = FakeTime()
    m = _mutation_manager(5.0, t=t)
    q = m.new_quota_for("u", "c", 5, 6)
    q.record(10)  # 10 -> 0: not below zero
    assert q.throttle_time == 0
    q.record(5)  # accepted, -5: 1 s to refill
    assert q.throttle_time == 1000
    q.record(5)  # accepted still, -10: 2 s
    assert q.throttle_time == 2000 and not q.is_exceeded()


def test_replication_control_refuses_throttled_mutations():
    """The controller records each topic's partitions and refuses those a strict quota does not allow, with
    Kafka's code and message; the topics before are mutated. DeleteTopics and CreatePartitions alike."""
    from tests.unit.metadata.test_replication_control_manager import Ctx, t

    ctx = Ctx()
    m = _mutation_manager(1.0)  # burst 2 tokens
    quota = m.new_quota_for("u", "c", 7, 6)
    result = ctx.repl.create_topics({"topics": [t("a", p=3), t("b", p=3)]}, None, quota)
    ctx.replay(result.records)
    outcome = {r["name"]: (r["error_code"], r["error_message"]) for r in result.response["topics"]}
    assert outcome["a"] == (errors.NONE, None)
    assert outcome["b"] == (errors.THROTTLING_QUOTA_EXCEEDED, "The throttling quota has been exceeded.")
    assert {r.data["name"] for r in result.records if r.name == "TopicRecord"} == {"a"}
    assert quota.throttle_time == 1000  # -1 token at 1 per second

    result = ctx.repl.create_partitions({"topics": [{"name": "a", "count": 4, "assignments": None}]}, quota)
    assert result.response["results"][0]["error_code"] == errors.THROTTLING_QUOTA_EXCEEDED and not result.records
    result = ctx.repl.delete_topics({"topic_names": ["a"]}, quota)
    assert result.response["responses"][0]["error_code"] == errors.THROTTLING_QUOTA_EXCEEDED and not result.records
    # without a quota (or a permissive one) the same requests go through
    permissive = m.new_quota_for("u", "c", 0, 3)
    result = ctx.repl.create_partitions({"topics": [{"name": "a", "count": 4, "assignments": None}]}, permissive)
    assert result.response["results"][0]["error_code"] == errors.NONE and result.records
    assert permissive.throttle_time == 2000
    result = ctx.repl.delete_topics({"topic_names": ["a"]}, None)
    assert result.response["responses"][0]["error_code"] == errors.NONE


def test_network_thread_time_weighs_on_the_clients_next_requests():
    """Kafka's recordNetworkThreadTimeCallback: recording the request quota sets a callback on the request; the
    Processor calls it with the channel's read/write time once the response is written, which counts in the
    client's rate without a throttle of its own; an exempt request's goes to the exempt rate."""
    t = FakeTime()
    q = QuotaManagers(2, 1, t)
    q.update_quotas(_quotas("request_percentage", {(("client-id", "c"),): 50.0}))
    req = _Req(ApiKeys.METADATA, spent_ms=1)
    assert request_throttle.record(q, req, {}) == 0
    before = dict(q.request.request_times())[("", "c")]
    req.record_network_thread_time(400_000_000)  # 0.4 s of network thread time: 40 percent-seconds
    # 40 percent-seconds over the retained windows (at most 2 s): +20 or more
    assert dict(q.request.request_times())[("", "c")] >= before + 20.0
    # the next request of the client is throttled because of it
    assert request_throttle.record(q, _Req(ApiKeys.METADATA, spent_ms=200), {}) > 0
    exempt = _Req(ApiKeys.FETCH, {"replica_id": 1}, spent_ms=0)
    request_throttle.record(q, exempt, {})
    before = q.request.exempt_request_time()
    exempt.record_network_thread_time(10**9)  # 100 percent-seconds
    assert q.request.exempt_request_time() >= before + 50.0
