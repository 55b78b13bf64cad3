"""ShareFetch (78) / ShareAcknowledge (79) against a real broker, sent with pykbroker's own client codec (KIP-932):
share sessions and their errors, acquisition of records by one member at a time, acknowledgement (accept, release,
reject), redelivery with the delivery count + 1, acquisition lock expiry, the long poll woken by a produce, and
UNKNOWN_TOPIC_ID. A short lock duration is set by broker config."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.types import ZERO_UUID
from pykbroker.record.file_records import iter_batch_headers
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

LOCK_MS = 1500
FAST = {
    "group.share.record.lock.duration.ms": LOCK_MS,
    "group.share.min.record.lock.duration.ms": 1000,
    "group.share.delivery.count.limit": 3,
}
ACCEPT, RELEASE, REJECT = 1, 2, 3


@pytest.fixture
def sbroker(broker_factory):
    return broker_factory(**FAST)


def produce(bootstrap, topic, n, start=0):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(start, start + n):
        p.produce(topic, b"%d" % i, partition=0)
        p.flush(10)  # one batch per record: acknowledgements split batches
    assert p.flush(30) == 0


def topic_id(conn, name):
    body = {"topics": [{"name": name, "topic_id": ZERO_UUID}], "allow_auto_topic_creation": False}
    tid = conn.request(ApiKeys.METADATA, 12, body)["topics"][0]["topic_id"]
    assert tid != ZERO_UUID
    return tid


class Member:
    """One share consumer's session on the broker, over its own connection."""

    def __init__(self, bootstrap, tid, member_id, group="sg"):
        self.conn = BrokerConnection.to(bootstrap)
        self.tid, self.member_id, self.group = tid, member_id, group
        self.epoch = 0

    def fetch(self, acks=(), max_wait_ms=0, epoch=None, partitions=(0,), tid=None):
        tid = self.tid if tid is None else tid
        body = {
            "group_id": self.group,
            "member_id": self.member_id,
            "share_session_epoch": self.epoch if epoch is None else epoch,
            "max_wait_ms": max_wait_ms,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "max_records": 500,
            "batch_size": 500,
            "topics": [
                {
                    "topic_id": tid,
                    "partitions": [
                        {"partition_index": p, "acknowledgement_batches": _acks(acks) if p == 0 else []}
                        for p in partitions
                    ],
                }
            ],
            "forgotten_topics_data": [],
        }
        r = self.conn.request(ApiKeys.SHARE_FETCH, 1, body)
        if epoch is None and r["error_code"] == errors.NONE:
            self.epoch += 1
        return r

    def acknowledge(self, acks, epoch=None):
        body = {
            "group_id": self.group,
            "member_id": self.member_id,
            "share_session_epoch": self.epoch if epoch is None else epoch,
            "topics": [
                {"topic_id": self.tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": _acks(acks)}]}
            ],
        }
        r = self.conn.request(ApiKeys.SHARE_ACKNOWLEDGE, 1, body)
        if epoch is None and r["error_code"] == errors.NONE:
            self.epoch += 1
        return r


def _acks(acks):
    return [{"first_offset": a, "last_offset": b, "acknowledge_types": [t]} for a, b, t in acks]


def partition_of(r, partition=0):
    assert r["error_code"] == errors.NONE, r
    for t in r["responses"]:
        for p in t["partitions"]:
            if p["partition_index"] == partition:
                return p
    return None


def acquired(r):
    p = partition_of(r)
    if p is None:
        return []
    assert p["error_code"] == errors.NONE, p
    return [(a["first_offset"], a["last_offset"], a["delivery_count"]) for a in p["acquired_records"]]


def batch_offsets(p):
    data = bytes(p["records"] or b"")
    return [(h.base_offset, h.last_offset) for h in iter_batch_headers(data)]


def test_share_fetch_acquire_acknowledge_redeliver(sbroker):
    bootstrap = sbroker.bootstrap
    create_topic(bootstrap, "q", partitions=1)
    with BrokerConnection.to(bootstrap) as c:
        versions = {
            a["api_key"]: (a["min_version"], a["max_version"])
            for a in c.request(ApiKeys.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})[
                "api_keys"
            ]
        }
        assert versions[ApiKeys.SHARE_FETCH] == (1, 1) and versions[ApiKeys.SHARE_ACKNOWLEDGE] == (1, 1)
        tid = topic_id(c, "q")
    produce(bootstrap, "q", 3)
    a, b = Member(bootstrap, tid, "a"), Member(bootstrap, tid, "b")
    # share.auto.offset.reset latest: the records produced before the share partition existed are not delivered
    assert acquired(a.fetch()) == []
    produce(bootstrap, "q", 6, start=3)
    r = a.fetch()
    assert acquired(r) == [(3, 8, 1)]
    assert r["acquisition_lock_timeout_ms"] == LOCK_MS
    assert batch_offsets(partition_of(r)) == [(i, i) for i in range(3, 9)]
    # held by a: b gets nothing (after its long poll times out)
    t0 = time.monotonic()
    assert acquired(b.fetch(max_wait_ms=300)) == []
    assert time.monotonic() - t0 >= 0.25
    # a accepts 3-4, releases 5-6, rejects 7 (piggy-backed on a fetch), keeps 8
    r = a.fetch(acks=[(3, 4, ACCEPT), (5, 6, RELEASE), (7, 7, REJECT)])
    assert partition_of(r)["acknowledge_error_code"] == errors.NONE
    assert acquired(r) == [(5, 6, 2)]  # a released them and is the next to fetch: redelivered, count + 1
    # b cannot acknowledge what a holds; nothing changes
    r = b.acknowledge([(5, 6, ACCEPT)])
    assert partition_of(r)["error_code"] == errors.INVALID_RECORD_STATE
    # a dies holding 5-6 and 8: after the lock duration b gets them, count + 1
    got: list = []  # 8's lock (a's first fetch) expires before 5-6's (its second)

    def redelivered():
        got.extend(acquired(b.fetch(max_wait_ms=500)))
        return sorted(got) == [(5, 6, 3), (8, 8, 2)]

    wait_until(redelivered, timeout=10, message="redelivery after lock expiry")
    assert partition_of(b.acknowledge([(5, 6, ACCEPT), (8, 8, ACCEPT)]))["error_code"] == errors.NONE
    # a's late acknowledgement is refused; the rejected record 7 is never delivered again
    assert partition_of(a.acknowledge([(8, 8, ACCEPT)]))["error_code"] == errors.INVALID_RECORD_STATE
    produce(bootstrap, "q", 1, start=9)
    assert acquired(b.fetch()) == [(9, 9, 1)]


def test_share_fetch_long_poll_is_woken_by_a_produce(sbroker):
    bootstrap = sbroker.bootstrap
    create_topic(bootstrap, "lp", partitions=1)
    with BrokerConnection.to(bootstrap) as c:
        tid = topic_id(c, "lp")
    m = Member(bootstrap, tid, "m")
    assert acquired(m.fetch()) == []
    out = {}

    def poll():
        t0 = time.monotonic()
        out["r"] = m.fetch(max_wait_ms=10000)
        out["s"] = time.monotonic() - t0

    th = threading.Thread(target=poll)
    th.start()
    time.sleep(0.5)
    produce(bootstrap, "lp", 1)
    th.join(15)
    assert acquired(out["r"]) == [(0, 0, 1)]
    assert out["s"] < 8


def test_share_session_errors_and_unknown_topic_id(sbroker):
    bootstrap = sbroker.bootstrap
    create_topic(bootstrap, "se", partitions=1)
    with BrokerConnection.to(bootstrap) as c:
        tid = topic_id(c, "se")
    m = Member(bootstrap, tid, "m")
    assert m.fetch(epoch=1)["error_code"] == errors.SHARE_SESSION_NOT_FOUND
    assert m.acknowledge([], epoch=1)["error_code"] == errors.SHARE_SESSION_NOT_FOUND
    assert m.fetch(acks=[(0, 0, ACCEPT)])["error_code"] == errors.INVALID_REQUEST  # acknowledgements at epoch 0
    assert m.fetch()["error_code"] == errors.NONE
    assert m.fetch(epoch=5)["error_code"] == errors.INVALID_SHARE_SESSION_EPOCH
    assert m.acknowledge([], epoch=0)["error_code"] == errors.INVALID_SHARE_SESSION_EPOCH
    assert m.fetch()["error_code"] == errors.NONE  # a refused epoch does not move the session
    r = m.fetch(tid=uuid.uuid4())
    codes = {p["partition_index"]: p["error_code"] for t in r["responses"] for p in t["partitions"]}
    assert codes == {0: errors.UNKNOWN_TOPIC_ID}
    assert m.acknowledge([], epoch=-1)["error_code"] == errors.NONE  # closes the session
    assert m.fetch(epoch=3)["error_code"] == errors.SHARE_SESSION_NOT_FOUND


def test_closing_the_connection_releases_the_members_records_at_once(broker_factory):
    """The lock is 30 s (the default): the records come back at once because a's connection closed (its share
    session ends with it, as Kafka's ShareSessionCache disconnect listener does)."""
    bootstrap = broker_factory().bootstrap
    create_topic(bootstrap, "cc", partitions=1)
    with BrokerConnection.to(bootstrap) as c:
        tid = topic_id(c, "cc")
    a, b = Member(bootstrap, tid, "a"), Member(bootstrap, tid, "b")
    assert acquired(a.fetch()) == []
    produce(bootstrap, "cc", 3)
    assert acquired(a.fetch()) == [(0, 2, 1)]
    assert acquired(b.fetch()) == []
    t0 = time.monotonic()
    a.conn.close()
    got: list = []
    wait_until(lambda: got.extend(acquired(b.fetch(max_wait_ms=200))) or got, timeout=10, message="released")
    assert got == [(0, 2, 2)]
    assert time.monotonic() - t0 < 10
