"""The batch source's fast path (issue 31): Fetch v4 from the leader, record batches decoded into Arrow
columns in bulk (pyspark_pykbroker.fastfetch), checked field by field against librdkafka's read."""

from __future__ import annotations

import pytest

from tests.helpers.topics import BASE_TS, create_topic

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _produce(bs: str, topic: str, first: int, n: int, **conf) -> None:
    """Records first..first+n-1: null keys, keys of 0..39 bytes (Arrow inlines <= 12), null and 0..299 byte
    values (compressible), headers on some (the fast path skips them), timestamps BASE_TS + i; a flush every 500."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, **conf})
    for i in range(first, first + n):
        key = None if i % 7 == 0 else b"k%d" % i * (i % 5)
        value = None if i % 11 == 0 else (b"v%d," % i * 60)[: i % 300]  # compressible: librdkafka compresses
        headers = [("h", b"x" * (i % 3))] if i % 5 == 0 else None
        p.produce(topic, value, key, partition=0, headers=headers, timestamp=BASE_TS + i)
        if i % 500 == 0:
            p.flush(30)
    assert p.flush(30) == 0


def _transactions(bs: str, topic: str) -> None:
    """One committed and one aborted transaction of 10 records each (control batches follow each)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bs, "transactional.id": f"{topic}-txn", "linger.ms": 5})
    p.init_transactions(30)
    for commit in (True, False):
        p.begin_transaction()
        for j in range(10):
            p.produce(topic, b"txn-%d" % j, partition=0)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)


def _read(bs: str, topic: str, start: int, end: int, fast: bool):
    import pyarrow as pa

    from pyspark_pykbroker.client import KafkaClient
    from pyspark_pykbroker.schema import arrow_schema

    batches = list(KafkaClient(bs, {}).read_range(topic, 0, start, end, True, False, fast_fetch=fast))
    return pa.Table.from_batches(batches, schema=arrow_schema(False))


def _fast_until(bs: str, topic: str, start: int, end: int) -> tuple[int, int]:
    """(rows the fast path yields, the offset it hands back to librdkafka) for [start, end)."""
    from pyspark_pykbroker import fastfetch
    from pyspark_pykbroker.client import KafkaClient

    client = KafkaClient(bs, {})
    host_port = client.leader(topic, 0)
    client.close()
    assert host_port is not None
    reader = fastfetch.read_fast(*host_port, topic, 0, start, end, 65536, 10.0)
    rows = 0
    while True:
        try:
            rows += next(reader).num_rows
        except StopIteration as stop:
            return rows, stop.value


@pytest.fixture(scope="module")
def mixed_topic(spark_broker):
    """Offsets 0-1999 plain, 2000-2999 gzip, then two transactions (2 x (10 + a marker)), 3022-3521 plain,
    3522-4021 zstd, 4022-4521 plain."""
    bs, topic = spark_broker.bootstrap, "sfast-mixed"
    create_topic(bs, topic, 1)
    _produce(bs, topic, 0, 2000)
    _produce(bs, topic, 2000, 1000, **{"compression.type": "gzip"})
    _transactions(bs, topic)
    _produce(bs, topic, 3022, 500)
    _produce(bs, topic, 3522, 500, **{"compression.type": "zstd"})
    _produce(bs, topic, 4022, 500)
    return bs, topic


def test_fast_path_reads_plain_gzip_and_transactional_batches_itself(mixed_topic):
    """Up to the first zstd batch the fast path reads everything itself (control batches skipped, aborted
    records kept: read_uncommitted); at zstd it hands the offset back."""
    bs, topic = mixed_topic
    assert _fast_until(bs, topic, 0, 3522) == (3520, 3522)
    rows, handed_back = _fast_until(bs, topic, 1234, 2345)  # both ends inside batches
    assert rows == 1111 and handed_back >= 2345
    assert _fast_until(bs, topic, 3000, 4522) == (520, 3522)


@pytest.mark.parametrize("start,end", [(0, 4522), (1, 2999), (1999, 2001), (2500, 3530), (3020, 3022), (3600, 4522)])
def test_fast_path_returns_what_librdkafka_returns(mixed_topic, start, end):
    """read_range with the fast path (handing over to librdkafka at zstd) equals librdkafka's read, every
    column: null and inlined/long keys, null values, offsets, timestamps, timestamp types."""
    bs, topic = mixed_topic
    fast = _read(bs, topic, start, end, True)
    slow = _read(bs, topic, start, end, False)
    assert slow.num_rows > 0
    assert fast.num_rows == slow.num_rows
    for name in slow.column_names:
        assert fast[name].equals(slow[name]), name


def test_fast_path_log_append_time(spark_broker):
    """A LogAppendTime topic: every record carries its batch's broker timestamp, timestampType 1."""
    bs, topic = spark_broker.bootstrap, "sfast-lat"
    create_topic(bs, topic, 1, config={"message.timestamp.type": "LogAppendTime"})
    _produce(bs, topic, 0, 700)
    assert _fast_until(bs, topic, 0, 700) == (700, 700)
    fast = _read(bs, topic, 0, 700, True)
    slow = _read(bs, topic, 0, 700, False)
    assert set(fast["timestampType"].to_pylist()) == {1}
    assert all(fast[name].equals(slow[name]) for name in slow.column_names)


def test_planned_leader_below_log_start_is_data_loss(spark_broker):
    """With the leader known from planning the fast path fetches before any watermark request; a start below
    the log start offset gets OFFSET_OUT_OF_RANGE there and then Spark's failOnDataLoss answer."""
    from confluent_kafka import TopicPartition

    from pyspark_pykbroker.client import DataLossError, KafkaClient

    bs, topic = spark_broker.bootstrap, "sfast-loss"
    admin = create_topic(bs, topic, 1)
    _produce(bs, topic, 0, 100)
    (future,) = admin.delete_records([TopicPartition(topic, 0, 40)]).values()
    assert future.result(10).low_watermark == 40
    client = KafkaClient(bs, {})
    leader = client.leader(topic, 0)
    client.close()
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        list(KafkaClient(bs, {}).read_range(topic, 0, 10, 100, True, False, leader=leader))
    batches = list(KafkaClient(bs, {}).read_range(topic, 0, 10, 100, False, False, leader=leader))
    assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(40, 100))
    batches = list(KafkaClient(bs, {}).read_range(topic, 0, 50, 60, True, False, leader=leader))
    assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(50, 60))


def test_usable_only_where_it_reads_what_librdkafka_would():
    from pyspark_pykbroker.fastfetch import usable

    assert usable({}, False)
    assert usable({"Isolation.Level": "READ_UNCOMMITTED", "security.protocol": "PLAINTEXT", "client.id": "x"}, False)
    assert not usable({}, True)  # includeHeaders
    assert not usable({"isolation.level": "read_committed"}, False)
    assert not usable({"security.protocol": "SASL_PLAINTEXT"}, False)
    assert not usable({"sasl.mechanism": "PLAIN"}, False)


def test_fast_path_large_records(spark_broker):
    """Records of 8 KiB and more (3-byte length varints) are decoded by the fast path too."""
    from confluent_kafka import Producer

    bs, topic = spark_broker.bootstrap, "sfast-large"
    create_topic(bs, topic, 1)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    for i in range(40):
        p.produce(topic, b"%05d" % i * (1000 + 500 * i), b"k%d" % i, partition=0, timestamp=BASE_TS + i)
    assert p.flush(30) == 0
    assert _fast_until(bs, topic, 0, 40) == (40, 40)
    fast, slow = _read(bs, topic, 0, 40, True), _read(bs, topic, 0, 40, False)
    assert all(fast[name].equals(slow[name]) for name in slow.column_names)
