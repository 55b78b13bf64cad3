"""Share groups end to end (KIP-932) with confluent-kafka's ShareConsumer (librdkafka 2.16: ShareGroupHeartbeat,
ShareFetch and ShareAcknowledge v1) against a real broker: two and three consumers on one partition receive every
record exactly once; a released record is redelivered with its delivery count + 1; a consumer that stops holding
records has them redelivered after the acquisition lock; a rejected record is never delivered again; a read_committed
share group never sees aborted transactions. Short lock durations and session timeouts are set by config."""

from __future__ import annotations

import threading
import time

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

FAST = {
    "group.share.min.session.timeout.ms": "1000",
    "group.share.session.timeout.ms": "6000",
    "group.share.min.heartbeat.interval.ms": "200",
    "group.share.heartbeat.interval.ms": "500",
    "group.share.min.record.lock.duration.ms": "1000",
}


@pytest.fixture
def sbroker(broker_factory):
    return broker_factory(**FAST)


def set_group_configs(bootstrap, group, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs SET of share.* group configs (config resource type GROUP, 32)."""
    with BrokerConnection.to(bootstrap) as c:
        r = c.request(
            ApiKeys.INCREMENTAL_ALTER_CONFIGS,
            1,
            {
                "resources": [
                    {
                        "resource_type": 32,
                        "resource_name": group,
                        "configs": [{"name": k, "config_operation": 0, "value": v} for k, v in configs.items()],
                    }
                ],
                "validate_only": False,
            },
        )
    assert r["responses"][0]["error_code"] == errors.NONE, r

    def visible():
        with BrokerConnection.to(bootstrap) as c:
            r = c.request(
                ApiKeys.DESCRIBE_CONFIGS,
                4,
                {
                    "resources": [{"resource_type": 32, "resource_name": group, "configuration_keys": None}],
                    "include_synonyms": False,
                    "include_documentation": False,
                },
            )
        have = {x["name"]: x["value"] for x in r["results"][0]["configs"]}
        return all(have.get(k) == v for k, v in configs.items())

    wait_until(visible, 10, message="group configs visible")


def produce(bootstrap, topic, values, batch=10000):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": batch})
    for v in values:
        p.produce(topic, v, partition=0)
    assert p.flush(30) == 0


def share_consumer(bootstrap, group, topic, explicit=False, **extra):
    from confluent_kafka import ShareConsumer

    conf = {"bootstrap.servers": bootstrap, "group.id": group, **extra}
    if explicit:
        conf["share.acknowledgement.mode"] = "explicit"
    c = ShareConsumer(conf)
    c.subscribe([topic])
    return c


def poll_records(consumer, timeout=1.0):
    return [m for m in consumer.poll(timeout) or [] if m.error() is None]


def _members_holding(bootstrap, group, topic) -> int:
    """How many members of share group ``group`` are assigned a partition of ``topic`` (ShareGroupDescribe)."""
    with BrokerConnection.to(bootstrap) as c:
        r = c.request(ApiKeys.SHARE_GROUP_DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})
    return sum(
        1
        for m in r["groups"][0]["members"]
        if any(tp["topic_name"] == topic and tp["partitions"] for tp in m["assignment"]["topic_partitions"])
    )


def consume_together(bootstrap, group, topic, consumers_count, n, produce_records) -> list[tuple[str, bytes]]:
    """``consumers_count`` ShareConsumers (implicit acknowledgement) poll ``topic`` on their own threads; once every
    one of them is a member holding the partition (ShareGroupDescribe), ``produce_records()`` writes the ``n``
    records, and the consumers poll until all arrived, and a little longer; ``[(consumer name, value)]``. (Records
    produced before the others join would all be acquired by the first member: nothing left to share.)"""
    received: list[tuple[str, bytes]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def work(name):
        c = share_consumer(bootstrap, group, topic, **{"max.poll.records": 20})
        try:
            while not stop.is_set():
                for m in poll_records(c, 0.5):
                    with lock:
                        received.append((name, m.value()))
                    time.sleep(0.001)  # a little work per record: the consumers interleave
        finally:
            c.close()  # implicit mode: the last poll's records are accepted

    threads = [threading.Thread(target=work, args=(f"c{i}",)) for i in range(consumers_count)]
    for t in threads:
        t.start()
    try:
        wait_until(
            lambda: _members_holding(bootstrap, group, topic) >= consumers_count,
            30,
            message=f"{consumers_count} members assigned {topic}",
        )
        produce_records()
        wait_until(lambda: len(received) >= n, 60, message=f"{n} records received by {consumers_count}")
        time.sleep(1.5)  # nothing more may arrive (no redelivery of accepted records)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    return received


@pytest.mark.parametrize("consumers_count", [2, 3])
def test_consumers_on_one_partition_receive_every_record_exactly_once(sbroker, consumers_count):
    bootstrap = sbroker.bootstrap
    create_topic(bootstrap, "work", partitions=1)
    set_group_configs(bootstrap, "workers", {"share.auto.offset.reset": "earliest"})
    n = 600
    received = consume_together(
        bootstrap,
        "workers",
        "work",
        consumers_count,
        n,
        lambda: produce(bootstrap, "work", [b"%d" % i for i in range(n)], batch=10),  # small batches
    )
    values = sorted(int(v) for _, v in received)
    assert values == list(range(n)), f"{len(values)} received, duplicates or gaps"
    assert len({name for name, _ in received}) >= 2, "the records were shared"


def test_release_redelivers_with_delivery_count_plus_one_and_reject_is_final(sbroker):
    from confluent_kafka import AcknowledgeType

    bootstrap = sbroker.bootstrap
    create_topic(bootstrap, "rel", partitions=1)
    set_group_configs(bootstrap, "rg", {"share.auto.offset.reset": "earliest"})
    produce(bootstrap, "rel", [b"a", b"b", b"c"])
    c = share_consumer(bootstrap, "rg", "rel", explicit=True)
    try:
        got: list = []
        wait_until(lambda: got.extend(poll_records(c)) or len(got) >= 3, 30, message="3 records")
        assert [(m.value(), m.delivery_count()) for m in got] == [(b"a", 1), (b"b", 1), (b"c", 1)]
        c.acknowledge(got[0], AcknowledgeType.ACCEPT)
        c.acknowledge(got[1], AcknowledgeType.RELEASE)
        c.acknowledge(got[2], AcknowledgeType.REJECT)
        c.commit_sync(30)
        again: list = []
        wait_until(lambda: again.extend(poll_records(c)) or again, 30, message="the released record again")
        assert [(m.value(), m.offset(), m.delivery_count()) for m in again] == [(b"b", 1, 2)]
        c.acknowledge(again[0], AcknowledgeType.ACCEPT)
        c.commit_sync(30)
        produce(bootstrap, "rel", [b"d"])
        later: list = []
        wait_until(lambda: later.extend(poll_records(c)) or later, 30, message="the next record")
        assert [m.value() for m in later] == [b"d"]  # the rejected c is never delivered again
        c.acknowledge(later[0], AcknowledgeType.ACCEPT)
        c.commit_sync(30)
    finally:
        c.close()


def test_records_of_a_consumer_that_stops_are_redelivered_after_the_lock(sbroker):
    bootstrap = sbroker.bootstrap
    create_topic(bootstrap, "dies", partitions=1)
    set_group_configs(bootstrap, "dg", {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "2000"})
    produce(bootstrap, "dies", [b"x%d" % i for i in range(5)])
    a = share_consumer(bootstrap, "dg", "dies", explicit=True)
    held: list = []
    wait_until(lambda: held.extend(poll_records(a)) or len(held) >= 5, 30, message="a holds the records")
    # a stops polling and never acknowledges; b gets the records once a's locks expired
    t0 = time.monotonic()
    b = share_consumer(bootstrap, "dg", "dies")
    try:
        got: list = []
        wait_until(lambda: got.extend(poll_records(b)) or len(got) >= 5, 30, message="redelivered to b")
        assert sorted((m.value(), m.delivery_count()) for m in got) == [(b"x%d" % i, 2) for i in range(5)]
        assert time.monotonic() - t0 >= 1.0
    finally:
        b.close()
        a.close()


def test_read_committed_share_group_never_sees_aborted_transactions(sbroker):
    from confluent_kafka import Producer

    bootstrap = sbroker.bootstrap
    create_topic(bootstrap, "txq", partitions=1)
    set_group_configs(
        bootstrap, "tg", {"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"}
    )
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "share-tx"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce("txq", b"aborted-%d" % i, partition=0)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(3):
        p.produce("txq", b"committed-%d" % i, partition=0)
    p.commit_transaction(30)
    produce(bootstrap, "txq", [b"plain"])
    c = share_consumer(bootstrap, "tg", "txq")
    try:
        got: list = []
        wait_until(lambda: got.extend(poll_records(c)) or len(got) >= 4, 30, message="committed records")
        time.sleep(1)
        got.extend(poll_records(c, 0.5))
        assert [m.value() for m in got] == [b"committed-0", b"committed-1", b"committed-2", b"plain"]
    finally:
        c.close()


def test_commit_async_and_commit_sync_acknowledgements(sbroker):
    """Explicit acknowledgement committed with commit_async (the callback reports each acknowledged offset, no error)
    and commit_sync; with a short lock nothing is redelivered afterwards, and the commit of an acknowledgement whose
    lock expired fails with INVALID_RECORD_STATE."""
    from confluent_kafka import AcknowledgeType

    bootstrap = sbroker.bootstrap
    create_topic(bootstrap, "acks", partitions=1)
    set_group_configs(bootstrap, "ag", {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "2000"})
    produce(bootstrap, "acks", [b"r%d" % i for i in range(4)])
    c = share_consumer(bootstrap, "ag", "acks", explicit=True)
    results: list = []
    c.set_acknowledgement_commit_callback(lambda offsets, exc: results.append((offsets, exc)))
    try:
        got: list = []
        wait_until(lambda: got.extend(poll_records(c)) or len(got) >= 4, 30, message="4 records")
        for m in got[:2]:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_async()
        for m in got[2:]:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        done = c.commit_sync(30)
        wait_until(lambda: sum(len(o) for r in results for o in r[0].values()) >= 4, 10, message="callbacks")
        assert all(exc is None for _, exc in results), results
        assert sorted(o for r in results for offs in r[0].values() for o in offs) == [0, 1, 2, 3]
        assert done is not None
        time.sleep(2.5)  # past the lock: accepted records stay accepted
        assert poll_records(c, 1.0) == []
        produce(bootstrap, "acks", [b"late"])
        late: list = []
        wait_until(lambda: late.extend(poll_records(c)) or late, 30, message="a new record")
        time.sleep(2.5)  # its lock expires before the acknowledgement
        c.acknowledge(late[0], AcknowledgeType.ACCEPT)
        results.clear()
        c.commit_sync(30)
        wait_until(lambda: results, 10, message="the late acknowledgement's result")
        [(_, exc)] = results
        assert exc is not None and exc.args[0].code() == errors.INVALID_RECORD_STATE, exc
    finally:
        c.close()
