"""RequestMetrics of Fetch: besides ``request=Fetch``, a follower's fetch is counted as ``FetchFollower`` and a
consumer's as ``FetchConsumer`` (Kafka's RequestChannel.Metrics by FetchRequest.isFromFollower), including Fetch
v15+, where the follower's id is in ``replica_state`` (KIP-903) and ``replica_id`` is gone."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pykbroker.network.request_channel import RequestChannel
from pykbroker.utils.metrics import MetricsRegistry


def fetch(version: int, body: dict) -> SimpleNamespace:
    return SimpleNamespace(
        api_name="Fetch",
        body=body,
        context=SimpleNamespace(header=SimpleNamespace(api_version=version)),
        start_time_ns=0,
        request_dequeue_time_ns=1_000_000,
        api_local_complete_time_ns=2_000_000,
        response_complete_time_ns=3_000_000,
        response_dequeue_time_ns=4_000_000,
        api_throttle_time_ms=0,
    )


@pytest.mark.parametrize(
    ("version", "body", "kind"),
    [
        (15, {"replica_state": {"replica_id": 102, "replica_epoch": 7}}, "FetchFollower"),
        (16, {"replica_state": {"replica_id": -1, "replica_epoch": -1}}, "FetchConsumer"),
        (12, {"replica_id": 102}, "FetchFollower"),
        (12, {"replica_id": -1}, "FetchConsumer"),
    ],
)
def test_follower_and_consumer_fetches_are_told_apart(version, body, kind):
    channel = RequestChannel(10, metrics=MetricsRegistry())
    channel.update_request_metrics(fetch(version, body), 5_000_000)
    assert set(channel._request_metrics) == {"Fetch", kind}
