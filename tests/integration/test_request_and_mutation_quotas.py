"""request_percentage (KIP-124) and controller_mutation_rate (KIP-599) enforced by a real broker: strict
CreateTopics v7 refused with THROTTLING_QUOTA_EXCEEDED (only the topics it was told were created exist), permissive
old versions (confluent-kafka's CreateTopics v4, a raw v5) accepted and throttled, and a raw client over its
request_percentage throttled and muted while a client without a quota is not."""

from __future__ import annotations

import io
import threading
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.types import ZERO_UUID
from pykbroker.tools import config_command
from tests.helpers.broker import BrokerProcess
from tests.helpers.wait import wait_until
from tests.integration.test_prometheus_metrics import metrics_url, scrape


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # quota.window.num=2 x 1 s windows: a controller_mutation_rate of 5 allows a burst of 10 partitions
    b = BrokerProcess(
        tmp_path_factory.mktemp("req-mut-quotas"),
        quota_window_num="2",
        metric_reporters="pykbroker.metrics.prometheus.PrometheusReporter",
        prometheus_metrics_listener="127.0.0.1:0",
    ).start()
    yield b
    b.stop()


def _set_client_quota(broker, client_id: str, config: str) -> None:
    out = io.StringIO()
    assert (
        config_command.main(
            ["--bootstrap-server", broker.bootstrap, "--alter", "--client", client_id, "--add-config", config], out=out
        )
        == 0
    ), out.getvalue()

    def described() -> bool:
        out = io.StringIO()
        config_command.main(["--bootstrap-server", broker.bootstrap, "--describe", "--client", client_id], out=out)
        return config.split("=")[0] in out.getvalue()

    wait_until(described, 10, message=f"quota {config} for {client_id}")


def _create_topic(conn: BrokerConnection, version: int, name: str, partitions: int = 1) -> dict:
    return conn.request(
        ApiKeys.CREATE_TOPICS,
        version,
        {
            "topics": [
                {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
            ],
            "timeout_ms": 10_000,
            "validate_only": False,
        },
    )


def _existing_topics(broker, names: list[str]) -> set[str]:
    with BrokerConnection.to(broker.bootstrap, client_id="checker") as conn:
        r = conn.request(
            ApiKeys.METADATA,
            12,
            {
                "topics": [{"name": n, "topic_id": ZERO_UUID} for n in names],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
    return {t["name"] for t in r["topics"] if t["error_code"] == errors.NONE}


def test_strict_create_topics_refuses_over_quota_and_what_it_created_exists(broker):
    _set_client_quota(broker, "mutator", "controller_mutation_rate=5")
    created, refused, throttles = [], [], []
    with BrokerConnection.to(broker.bootstrap, client_id="mutator") as conn:
        deadline = time.monotonic() + 20
        i = 0
        while len(refused) < 3 and time.monotonic() < deadline:
            name = f"strict-{i}"
            i += 1
            r = _create_topic(conn, 7, name)
            (topic,) = r["topics"]
            if topic["error_code"] == errors.NONE:
                created.append(name)
            else:
                assert topic["error_code"] == errors.THROTTLING_QUOTA_EXCEEDED, topic
                assert topic["error_message"] == "The throttling quota has been exceeded."
                assert r["throttle_time_ms"] > 0
                refused.append(name)
                throttles.append(r["throttle_time_ms"])
    assert len(refused) >= 3, (created, refused)
    assert len(created) >= 10  # the burst (5/s x 2 windows of 1 s) at least
    assert all(0 < t <= 2000 for t in throttles), throttles
    # every topic it was told was created exists (once the broker's metadata caught up), no refused one does
    wait_until(lambda: _existing_topics(broker, created) == set(created), 10, message="created topics in Metadata")
    assert _existing_topics(broker, refused) == set()
    # ControllerMutation metrics for the client (Kafka's mutation-rate, tokens, throttle-time)
    samples = scrape(metrics_url(broker))
    labels = (("clientId", "mutator"), ("resource", "ControllerMutation"), ("user", ""))
    assert samples[("kafka_server_quota_mutation_rate", labels)] > 0
    assert samples[("kafka_server_quota_throttle_time", labels)] > 0
    assert ("kafka_server_quota_tokens", labels) in samples


def test_permissive_versions_are_accepted_and_throttled(broker):
    """confluent-kafka (librdkafka) sends CreateTopics v4, below Kafka's strict v6: every topic is created, and
    the client is told to back off (its throttle callback fires); a raw v5 request alike."""
    _set_client_quota(broker, "old-admin", "controller_mutation_rate=5")
    throttled = []
    admin = AdminClient(
        {"bootstrap.servers": broker.bootstrap, "client.id": "old-admin", "throttle_cb": throttled.append}
    )
    names = [f"permissive-{i}" for i in range(15)]  # 15 partitions against a burst of 10: 1 s in debt
    for name, future in admin.create_topics([NewTopic(n, 1, 1) for n in names], request_timeout=15).items():
        assert future.result(15) is None, name
    wait_until(lambda: admin.poll(0.1) is not None and bool(throttled), 10, message="throttle callback")
    assert throttled[0].throttle_time > 0
    wait_until(lambda: _existing_topics(broker, names) == set(names), 10, message="created topics in Metadata")
    with BrokerConnection.to(broker.bootstrap, client_id="old-admin") as conn:
        r = _create_topic(conn, 5, "permissive-raw", partitions=3)
        assert r["topics"][0]["error_code"] == errors.NONE
        assert r["throttle_time_ms"] > 0
    wait_until(lambda: _existing_topics(broker, ["permissive-raw"]) == {"permissive-raw"}, 10, message="raw topic")


def _api_versions(conn: BrokerConnection) -> dict:
    return conn.request(ApiKeys.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})


def test_request_percentage_throttles_and_mutes_a_spamming_client(broker):
    _set_client_quota(broker, "spammer", "request_percentage=1")
    free_throttles: list[int] = []
    stop = threading.Event()

    def free_client() -> None:  # no quota: never throttled, on the same broker at the same time
        with BrokerConnection.to(broker.bootstrap, client_id="free-client") as conn:
            while not stop.is_set():
                free_throttles.append(_api_versions(conn)["throttle_time_ms"])

    other = threading.Thread(target=free_client, daemon=True)
    other.start()
    try:
        with BrokerConnection.to(broker.bootstrap, client_id="spammer") as conn:
            throttle_ms = 0
            sent = 0
            deadline = time.monotonic() + 15
            # The mute starts when the response is written, so the wait this client sees is the throttle less the
            # response's delivery: a throttle of a few ms cannot be told from that; spam on to a 10 ms one.
            while throttle_ms < 10 and time.monotonic() < deadline:
                throttle_ms = _api_versions(conn)["throttle_time_ms"]
                sent += 1
            # 1 % of a thread is 10 ms of handler time per second: a few hundred requests at most
            assert 0 < throttle_ms <= 1000, (throttle_ms, sent)
            # the channel stays muted: the next request is read only after the throttle time
            started = time.monotonic()
            assert _api_versions(conn)["error_code"] == errors.NONE
            waited_ms = (time.monotonic() - started) * 1000
            assert waited_ms >= throttle_ms * 0.8, (waited_ms, throttle_ms)
            # spamming on for 3 s, it is answered no faster than its throttles allow: each response's throttle
            # time passes before its next request is read
            started = time.monotonic()
            answered = []
            while time.monotonic() - started < 3:
                answered.append(_api_versions(conn)["throttle_time_ms"])
            elapsed_ms = (time.monotonic() - started) * 1000
            owed = sum(answered[:-1])
            assert owed > 0, answered
            assert elapsed_ms >= owed * 0.8, (elapsed_ms, owed, len(answered))
    finally:
        stop.set()
        other.join(10)
    assert free_throttles and not any(free_throttles), free_throttles[:20]
    # Request quota metrics: the limited client's request-time and throttle-time; the free client has no series
    samples = scrape(metrics_url(broker))
    labels = (("clientId", "spammer"), ("resource", "Request"), ("user", ""))
    assert samples[("kafka_server_quota_request_time", labels)] > 0
    assert samples[("kafka_server_quota_throttle_time", labels)] > 0
    free = (("clientId", "free-client"), ("resource", "Request"), ("user", ""))
    assert ("kafka_server_quota_request_time", free) not in samples
    assert ("kafka_server_quota_exempt_request_time", (("resource", "Request"),)) in samples


def test_fetch_over_request_quota_is_answered_empty(broker):
    """Kafka's handleFetchRequest: a consumer fetch over its request_percentage gets an empty response with
    throttle_time_ms (even without any byte-rate quota), and its channel is muted."""
    with BrokerConnection.to(broker.bootstrap, client_id="filler") as conn:
        r = _create_topic(conn, 7, "fetch-spam")
        assert r["topics"][0]["error_code"] == errors.NONE
        topic_id = r["topics"][0]["topic_id"]
    _set_client_quota(broker, "fetch-spammer", "request_percentage=1")
    with BrokerConnection.to(broker.bootstrap, client_id="fetch-spammer") as conn:

        def fetch() -> dict:
            return conn.request(
                ApiKeys.FETCH, 13,
                {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1_000_000, "isolation_level": 0,
                 "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
                 "topics": [{"topic_id": topic_id, "partitions": [
                     {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                      "log_start_offset": -1, "partition_max_bytes": 1_000_000}]}]},
            )  # fmt: skip

        wait_until(lambda: fetch()["responses"] != [], 10, message="the topic is fetchable")
        r = fetch()
        deadline = time.monotonic() + 15
        while r["throttle_time_ms"] == 0 and time.monotonic() < deadline:
            assert r["responses"] != []  # not throttled: answered in full
            r = fetch()
        assert r["throttle_time_ms"] > 0
        assert r["responses"] == []  # throttled: answered empty
