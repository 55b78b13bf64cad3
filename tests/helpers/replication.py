"""Helpers for replication tests on a KRaftCluster: partition state from Metadata, raw produce with a
chosen acks, the batches of a replica's log files, and waits on the ISR."""

from __future__ import annotations

import time
from pathlib import Path

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.errors import CorruptRecordError
from pykbroker.protocol.types import ZERO_UUID
from pykbroker.record.file_records import iter_batch_headers
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder

REPLICATION_TIMEOUTS = {
    "replica.lag.time.max.ms": "1500",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "100",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "offsets.commit.timeout.ms": "5000",
    "default.replication.factor": "3",
    "leader.imbalance.check.interval.seconds": "3600",
    "transaction.state.log.num.partitions": "3",
}


def partitions(bootstrap: str, topic: str) -> dict[int, dict]:
    """Metadata v12 for ``topic``: ``{partition: {leader_id, leader_epoch, replica_nodes, isr_nodes,
    offline_replicas, error_code}}`` (empty on a topic-level error)."""
    with BrokerConnection.to(bootstrap, timeout=10) as c:
        r = c.request(
            ApiKeys.METADATA,
            12,
            {"topics": [{"topic_id": ZERO_UUID, "name": topic}], "allow_auto_topic_creation": False},
        )
    t = r["topics"][0]
    if t["error_code"]:
        return {}
    return {p["partition_index"]: p for p in t["partitions"]}


def wait_for_full_isr(bootstrap_fn, topic: str, replicas: int = 3, timeout: float = 30.0) -> dict[int, dict]:
    """Wait (bounded) until every live broker (``bootstrap_fn()``: comma-separated addresses) reports
    every partition of ``topic`` with a leader and ``replicas`` in-sync replicas. A broker's metadata
    cache is updated after its partitions, so the leader then acts on that ISR too."""
    deadline = time.monotonic() + timeout
    last: dict = {}
    while time.monotonic() < deadline:
        try:
            views = [partitions(addr, topic) for addr in bootstrap_fn().split(",")]
        except OSError:
            views = [{}]
        last = views[0]
        if all(v and all(p["leader_id"] >= 0 and len(p["isr_nodes"]) == replicas for p in v.values()) for v in views):
            return last
        time.sleep(0.1)
    raise AssertionError(f"ISR of {topic} not full within {timeout}s: {last}")


def raw_produce(bootstrap: str, topic: str, partition: int, acks: int, values: list[bytes], timeout_ms: int = 3000):
    """Produce v9 of one batch with ``acks`` straight to ``bootstrap`` (the leader); returns the partition
    response ``{error_code, base_offset, ...}``."""
    builder = MemoryRecordsBuilder()
    now = int(time.time() * 1000)
    for v in values:
        builder.append(now, None, v)
    body = {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": timeout_ms,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": builder.build()}]}],
    }
    with BrokerConnection.to(bootstrap, timeout=timeout_ms / 1000 + 10) as c:
        r = c.request(ApiKeys.PRODUCE, 9, body)
    return r["responses"][0]["partition_responses"][0]


def log_batches(data_dir: Path, topic: str, partition: int) -> list[tuple[int, int, int, int]]:
    """``[(base offset, last offset, partition leader epoch, crc)]`` of every batch in a replica's segment
    files, in offset order (read straight from disk)."""
    out = []
    for seg in sorted((Path(data_dir) / "logs").glob(f"{topic}-{partition}/*.log")):
        data = memoryview(seg.read_bytes())
        try:
            for h in iter_batch_headers(data):
                out.append((h.base_offset, h.base_offset + h.last_offset_delta, h.partition_leader_epoch, h.crc))
        except CorruptRecordError:
            pass  # zeros after the last batch of a segment
    return out
