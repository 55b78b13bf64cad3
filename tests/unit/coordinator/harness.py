"""A GroupCoordinator over a real GroupMetadataManager whose ``__consumer_offsets`` writes succeed at
once in memory (a fake ReplicaManager/LogManager), and synchronous wrappers of the callback APIs. The
manager loads partitions on a MockScheduler: the harness elects and loads every partition at start;
``elect(partition, epoch)`` / ``load()`` drive later elections."""

from __future__ import annotations

import struct

from pykbroker.coordinator.group.group_coordinator import GroupCoordinator
from pykbroker.coordinator.group.group_metadata_manager import GroupMetadataManager
from pykbroker.coordinator.group.group_results import JoinGroupResult, SyncGroupResult
from pykbroker.server.append_result import ProducePartitionResult
from pykbroker.utils.scheduler import MockScheduler
from pykbroker.utils.time import MockTime

CONFIG = {
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1800000,
    "group.initial.rebalance.delay.ms": 0,
    "group.max.size": 100,
    "offset.metadata.max.bytes": 4096,
}


class _Log:
    log_start_offset = 0
    high_watermark = 0
    log_end_offset = 0


class FakeLogManager:
    def get_log(self, topic, partition):
        return _Log()


class FakeReplicaManager:
    def __init__(self):
        self.appended: list = []

    def get_partition(self, topic, partition):
        return object()

    def append_records(self, timeout, acks, internal, entries, callback, **kw):
        self.appended.append(entries)
        callback({tp: ProducePartitionResult(0) for tp in entries})

    def maybe_start_transaction_verification_for_partition(self, tp, tid, pid, epoch, callback, abortable=False):
        callback(0, None)  # verification disabled


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, user data (null)."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


class Harness:
    def __init__(self, **config):
        self.time = MockTime()
        self.replica_manager = FakeReplicaManager()
        self.scheduler = MockScheduler(self.time)
        self.manager = GroupMetadataManager(
            self.replica_manager, FakeLogManager(), 5, self.time, 7 * 24 * 3600 * 1000, scheduler=self.scheduler
        )
        self.coordinator = GroupCoordinator(1, dict(CONFIG, **config), self.manager, self.time)
        for p in range(5):
            self.coordinator.on_election(p, 0)
        self.load()

    def load(self) -> int:
        """Run the scheduled partition loads; returns how many ran."""
        return self.scheduler.tick()

    def close(self):
        self.coordinator.shutdown()

    def join(
        self,
        group,
        member_id="",
        instance_id=None,
        protocols=None,
        session_ms=10000,
        rebalance_ms=30000,
        version=9,
        client_id="c",
    ):
        """Send a JoinGroup; returns the list its response lands in (empty while it waits)."""
        out: list[JoinGroupResult] = []
        self.coordinator.handle_join_group(
            group,
            member_id,
            instance_id,
            client_id,
            "/127.0.0.1",
            rebalance_ms,
            session_ms,
            "consumer",
            protocols or [("range", subscription("t"))],
            version,
            out.append,
        )
        return out

    def join_new(self, group, **kw) -> JoinGroupResult:
        """KIP-394 two-step first join (v4+) for a dynamic member; returns the MEMBER_ID_REQUIRED response."""
        first = self.join(group, **kw)
        assert first and first[0].error_code == 79, first
        return first[0]

    def sync(self, group, generation, member_id, assignments=None, instance_id=None):
        out: list[SyncGroupResult] = []
        self.coordinator.handle_sync_group(
            group, generation, member_id, instance_id, "consumer", None, assignments or {}, out.append
        )
        return out

    def commit(self, group, offsets, member_id="", generation=-1, instance_id=None):
        out: list[dict] = []
        self.coordinator.handle_commit_offsets(group, member_id, instance_id, generation, offsets, out.append)
        assert out, "OffsetCommit got no answer"
        return out[0]
