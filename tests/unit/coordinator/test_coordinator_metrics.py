"""Kafka 4's GroupCoordinatorMetrics sensors and gauges on a real GroupCoordinator (harness): offsets committed,
expired by retention and deleted, classic completed rebalances, consumer group epoch bumps, group counts."""

from __future__ import annotations

from pykbroker.coordinator.group import coordinator_metrics as cm
from pykbroker.coordinator.group.group_metadata import OffsetAndMetadata
from pykbroker.utils.metrics import MetricsRegistry
from tests.unit.coordinator.harness import Harness
from tests.unit.coordinator.test_consumer_group import T1, _image, hb


def _gauge(registry, name: str) -> float:
    metric = registry.get(f"{cm.GROUP},name={name}")
    assert metric is not None, name
    return metric.value


def test_sensors_and_group_counts():
    h = Harness()
    try:
        h.topics = {"t": (T1, 6)}
        h.coordinator.consumer.image = lambda: _image(h.topics)
        registry = MetricsRegistry()
        h.manager.register_metrics(registry)
        offsets = {("t", p): OffsetAndMetadata(1, -1, "", h.time.milliseconds()) for p in range(3)}
        assert set(h.commit("simple", offsets).values()) == {0}
        assert _gauge(registry, "offset-commit-count") == 3 and _gauge(registry, "offset-commit-rate") > 0
        # a classic rebalance completes
        member = h.join_new("classic").member_id
        gen = h.join("classic", member_id=member)[0].generation_id
        h.sync("classic", gen, member, {member: b""})
        assert _gauge(registry, "group-completed-rebalance-count") == 1
        # a consumer group: its member's join bumps the epoch (counted); its leave bumps it too, but Kafka records the
        # sensor on the heartbeat path's bumps only
        a = hb(h, group="cg")
        assert _gauge(registry, "consumer-group-count,state=Stable") == 1
        assert _gauge(registry, "group-count,protocol=consumer") == 1
        assert _gauge(registry, "group-count,protocol=classic") == 2  # "simple" (offsets only) and "classic"
        hb(h, a["member_id"], -1, group="cg")
        assert _gauge(registry, "consumer-group-rebalance-count") == 1
        assert _gauge(registry, "consumer-group-count,state=Empty") == 1
        # admin deletion, then retention expiry
        out: list = []
        h.coordinator.handle_delete_offsets("simple", [("t", 0)], lambda code, result: out.append(code))
        assert out == [0] and _gauge(registry, "offset-deletion-count") == 1
        h.time.sleep(8 * 24 * 3600 * 1000)
        assert h.manager.cleanup_expired_offsets() == 2
        assert _gauge(registry, "offset-expiration-count") == 2
    finally:
        h.close()
