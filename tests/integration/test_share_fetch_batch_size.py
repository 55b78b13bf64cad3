"""ShareFetch ``batch_size`` and ``max_records`` (KIP-932, Kafka 4.2's SharePartition.acquire in batch-optimized mode)
with raw requests against a real broker: the acquired records come back as ``acquired_records`` ranges of at most
``batch_size`` records, split only at log batch boundaries (a log batch larger than ``batch_size`` stays whole), and
a fetch acquires whole log batches until ``max_records`` are acquired."""

from __future__ import annotations

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from tests.helpers.topics import create_topic
from tests.integration.test_share_fetch import FAST, RELEASE, Member, partition_of, produce, topic_id

pytestmark = pytest.mark.integration


class SizedMember(Member):
    """A Member whose fetches carry the given ``max_records`` and ``batch_size``."""

    def sized_fetch(self, max_records: int, batch_size: int):
        original = self.conn.request

        def request(api_key, version, body):
            return original(api_key, version, dict(body, max_records=max_records, batch_size=batch_size))

        self.conn.request = request  # type: ignore[method-assign]
        try:
            return self.fetch()
        finally:
            self.conn.request = original  # type: ignore[method-assign]


def ranges(r) -> list[tuple[int, int, int]]:
    p = partition_of(r)
    return (
        [] if p is None else [(a["first_offset"], a["last_offset"], a["delivery_count"]) for a in p["acquired_records"]]
    )


def test_acquired_records_are_split_by_batch_size_at_log_batch_boundaries(broker_factory):
    from confluent_kafka import Producer

    broker = broker_factory(**{**FAST, "group.share.record.lock.duration.ms": 15000})  # no expiry mid-test
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "bs", partitions=1)
    produce(bootstrap, "bs", 10)  # offsets 0-9, one log batch each
    with BrokerConnection.to(bootstrap) as c:
        tid = topic_id(c, "bs")
    m = SizedMember(bootstrap, tid, "m1", group="bsg")
    try:
        m.fetch(epoch=0)  # opens the session; the share partition starts at the log end (latest): nothing acquired
        produce(bootstrap, "bs", 10, start=10)  # offsets 10-19, one log batch each
        assert ranges(m.sized_fetch(500, 3)) == [(10, 12, 1), (13, 15, 1), (16, 18, 1), (19, 19, 1)]
        # one log batch of 5 records (20-24) then one of 1 (25): the big batch is not split
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 100})
        for i in range(5):
            p.produce("bs", b"b%d" % i, partition=0)
        assert p.flush(30) == 0
        produce(bootstrap, "bs", 1, start=25)
        assert ranges(m.sized_fetch(500, 3)) == [(20, 24, 1), (25, 25, 1)]
        # released records come again (delivery count 2): max_records 4 of them in ranges of at most 2
        released = m.acknowledge([(10, 19, RELEASE)])
        assert released["responses"][0]["partitions"][0]["error_code"] == 0, released
        assert ranges(m.sized_fetch(4, 2)) == [(10, 11, 2), (12, 13, 2)]
        # batch_size 0 (no limit): the rest of the released records in one range
        assert ranges(m.sized_fetch(500, 0)) == [(14, 19, 2)]
    finally:
        m.conn.close()
