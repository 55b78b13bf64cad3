"""A group coordinator harness with two topics for the share group tests, and a synchronous ShareGroupHeartbeat."""

from __future__ import annotations

import uuid

from tests.unit.coordinator.harness import Harness
from tests.unit.coordinator.test_consumer_group import _image

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def share_harness() -> Harness:
    """Topics ``t`` (4 partitions) and ``u`` (2); ``group.share.max.size`` 3."""
    harness = Harness(**{"group.share.session.timeout.ms": 45000, "group.share.max.size": 3})
    harness.topics = {"t": (T1, 4), "u": (T2, 2)}
    harness.coordinator.set_image(lambda: _image(harness.topics))
    return harness


def hb(h, member_id: str, epoch: int = 0, topics=("t",), group: str = "sg", **kw) -> dict:
    """One ShareGroupHeartbeat; its response (answered at once: the harness's appends complete at once)."""
    req = {
        "group_id": group,
        "member_id": member_id,
        "member_epoch": epoch,
        "rack_id": None,
        "subscribed_topic_names": list(topics) if topics is not None else None,
    }
    req.update(kw)
    out: list[dict] = []
    h.coordinator.share.heartbeat(req, "client", "/127.0.0.1", out.append)
    assert len(out) == 1
    return out[0]
