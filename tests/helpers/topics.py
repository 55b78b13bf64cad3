"""Topic set-up and raw requests against a running broker, shared by the integration and Spark tests."""

from __future__ import annotations

import time

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from tests.helpers.wait import wait_until

BASE_TS = (int(time.time()) - 3600) * 1000  # recent: older timestamps would fall to retention.ms


def create_topic(bootstrap, name, partitions=6, config=None):
    """Create ``name`` through the AdminClient and wait until its metadata shows it and every partition's leader
    serves it (:func:`wait_logs_ready`); returns the client."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(30)
    wait_until(lambda: name in admin.list_topics(timeout=5).topics, 10, message="topic visible")
    wait_logs_ready(bootstrap, name)
    return admin


def _logs_ready(bootstrap, topic) -> bool:
    with BrokerConnection.to(bootstrap) as c:
        meta = c.request(ApiKeys.METADATA, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    (t,) = meta["topics"]
    if t["error_code"] or not t["partitions"] or any(p["leader_id"] < 0 for p in t["partitions"]):
        return False
    addresses = {b["node_id"]: f"{b['host']}:{b['port']}" for b in meta["brokers"]}
    for p in t["partitions"]:
        with BrokerConnection.to(addresses[p["leader_id"]]) as c:
            r = c.request(
                ApiKeys.LIST_OFFSETS,
                7,
                {
                    "replica_id": -1,
                    "isolation_level": 0,
                    "topics": [
                        {
                            "name": topic,
                            "partitions": [
                                {"partition_index": p["partition_index"], "current_leader_epoch": -1, "timestamp": -1}
                            ],
                        }
                    ],
                },
            )
        if r["topics"][0]["partitions"][0]["error_code"]:
            return False
    return True


def wait_logs_ready(bootstrap, topic, timeout=30.0) -> None:
    """Wait until every partition of ``topic`` has a leader that answers ListOffsets for it without error: its
    log exists there (Metadata shows a new topic from the metadata image before its logs exist, as in Kafka)."""
    wait_until(lambda: _logs_ready(bootstrap, topic), timeout, message=f"the logs of {topic} ready on their leaders")


def list_offset(bootstrap, topic, partition, timestamp):
    """ListOffsets v7 for one partition (-1 latest, -2 earliest, or a timestamp); asserts no error."""
    with BrokerConnection.to(bootstrap) as c:
        r = c.request(
            ApiKeys.LIST_OFFSETS,
            7,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": partition, "current_leader_epoch": -1, "timestamp": timestamp}
                        ],
                    }
                ],
            },
        )
    p = r["topics"][0]["partitions"][0]
    assert p["error_code"] == 0, p
    return p["offset"]


def produce_raw(bootstrap, topic, records: bytes, acks=1, version=9):
    """One Produce request of ``records`` to partition 0; returns its partition response."""
    with BrokerConnection.to(bootstrap) as c:
        r = c.request(
            ApiKeys.PRODUCE,
            version,
            {
                "transactional_id": None,
                "acks": acks,
                "timeout_ms": 5000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
            },
        )
    return r["responses"][0]["partition_responses"][0]


def record_batch(n=10, ts=None):
    """A batch of ``n`` records ``k<i>``/``v<i>`` stamped ``ts`` (default now)."""
    b = MemoryRecordsBuilder()
    now = int(time.time() * 1000) if ts is None else ts
    for i in range(n):
        b.append(now, b"k%d" % i, b"v%d" % i)
    return bytearray(b.build())


def produce_numbered(bootstrap, topic, n, partitions, headers=True):
    """Produce records 0..n-1 round-robin over ``partitions`` with librdkafka: key ``k<i>``, value
    ``%010d`` of i ten times, timestamp ``BASE_TS + i``, header ``i`` (unless ``headers`` is False)."""
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": 1000000,
        }
    )
    for i in range(n):
        kwargs = {"partition": i % partitions, "timestamp": BASE_TS + i}
        if headers:
            kwargs["headers"] = [("i", b"%d" % i)]
        while True:
            try:
                p.produce(topic, (b"%010d" % i) * 10, b"k%d" % i, **kwargs)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0
