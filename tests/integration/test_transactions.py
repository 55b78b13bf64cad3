"""Transactions (KIP-98) end to end with real clients: commit/abort visibility for read_committed and
read_uncommitted consumers (confluent-kafka, kafka-python, aiokafka), the LSO holding consumers back,
zombie fencing, the coordinator's timeout abort, recovery of the LSO and the aborted index after kill -9,
and an exactly-once consume-transform-produce loop across a broker kill -9."""

from __future__ import annotations

import asyncio
import io
import socket
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

TXN_CONFIG = {
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory):
    from tests.helpers.broker import BrokerProcess

    broker = BrokerProcess(tmp_path_factory.mktemp("txn-broker"), **TXN_CONFIG).start()
    yield broker
    broker.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _producer(bootstrap: str, tid: str, **extra) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5, **extra})
    p.init_transactions(30)
    return p


def _read_all(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int, timeout: float = 20.0):
    """Values per partition in offset order, read by a confluent-kafka consumer until ``expected``
    records came and then 1 s more of nothing."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    deadline = time.time() + timeout
    quiet_until = None
    try:
        while time.time() < deadline:
            m = c.poll(0.2)
            if m is None:
                if sum(map(len, got.values())) >= expected:
                    quiet_until = quiet_until or time.time() + 1.0
                    if time.time() >= quiet_until:
                        break
                continue
            if m.error():
                continue
            got[m.partition()].append(m.value())
    finally:
        c.close()
    return got


def _list_offset(bootstrap: str, topic: str, partition: int, isolation: int) -> int:
    with BrokerConnection.to(bootstrap) as c:
        r = c.request(
            ApiKeys.LIST_OFFSETS,
            7,
            {
                "replica_id": -1,
                "isolation_level": isolation,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [{"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}],
                    }
                ],
            },
        )
    p = r["topics"][0]["partitions"][0]
    assert p["error_code"] == 0, p
    return p["offset"]


def _fetch_committed(bootstrap: str, topic: str, partition: int) -> dict:
    """A raw read_committed Fetch v11 of the partition from offset 0 (LSO and aborted transactions)."""
    with BrokerConnection.to(bootstrap) as c:
        r = c.request(
            ApiKeys.FETCH,
            11,
            {
                "replica_id": -1,
                "max_wait_ms": 0,
                "min_bytes": 0,
                "max_bytes": 1 << 20,
                "isolation_level": 1,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {
                                "partition": partition,
                                "current_leader_epoch": -1,
                                "fetch_offset": 0,
                                "log_start_offset": -1,
                                "partition_max_bytes": 1 << 20,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
        )
    p = r["responses"][0]["partitions"][0]
    assert p["error_code"] == 0, p
    return p


def _produce_30_transactions(bootstrap: str, topic: str):
    """30 transactions of 9 records over 3 partitions, every third aborted (after its records were
    written). Returns (committed, all) values per partition."""
    p = _producer(bootstrap, f"tx-{topic}")
    committed: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    everything: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    for i in range(30):
        p.begin_transaction()
        for j in range(9):
            value = f"{i}-{j}".encode()
            p.produce(topic, value, partition=j % 3)
            everything[j % 3].append(value)
            if i % 3 != 2:
                committed[j % 3].append(value)
        if i % 3 == 2:
            p.flush(30)
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    return committed, everything


def test_read_committed_sees_exactly_the_committed_records_with_three_clients(txn_broker):
    bs = txn_broker.bootstrap
    create_topic(bs, "txn-30", 3)
    committed, everything = _produce_30_transactions(bs, "txn-30")
    assert _read_all(bs, "txn-30", 3, "read_committed", 180) == committed
    assert _read_all(bs, "txn-30", 3, "read_uncommitted", 270) == everything
    # The broker tells read_committed fetchers which transactions were aborted.
    fetched = _fetch_committed(bs, "txn-30", 0)
    assert len(fetched["aborted_transactions"]) == 10
    assert fetched["last_stable_offset"] == fetched["high_watermark"]

    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    kc = KafkaConsumer(bootstrap_servers=bs, isolation_level="read_committed", enable_auto_commit=False)
    kc.assign([KTP("txn-30", p) for p in range(3)])
    kc.seek_to_beginning()
    got: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    deadline = time.time() + 20
    while time.time() < deadline and sum(map(len, got.values())) < 180:
        for tp, records in kc.poll(500).items():
            got[tp.partition].extend(r.value for r in records)
    extra = kc.poll(1000)
    kc.close()
    assert got == committed and not any(extra.values())

    async def aio() -> dict[int, list[bytes]]:
        from aiokafka import AIOKafkaConsumer
        from aiokafka import TopicPartition as ATP

        ac = AIOKafkaConsumer(bootstrap_servers=bs, isolation_level="read_committed", enable_auto_commit=False)
        await ac.start()
        try:
            ac.assign([ATP("txn-30", p) for p in range(3)])
            await ac.seek_to_beginning()
            out: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
            end = time.time() + 20
            while time.time() < end and sum(map(len, out.values())) < 180:
                for tp, records in (await ac.getmany(timeout_ms=500)).items():
                    out[tp.partition].extend(r.value for r in records)
            return out
        finally:
            await ac.stop()

    assert asyncio.run(aio()) == committed


def test_open_transaction_holds_read_committed_consumers_at_the_lso(txn_broker):
    bs = txn_broker.bootstrap
    create_topic(bs, "txn-lso", 1)
    p = _producer(bs, "tx-lso")
    p.begin_transaction()
    for i in range(5):
        p.produce("txn-lso", b"a%d" % i, partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(5):
        p.produce("txn-lso", b"b%d" % i, partition=0)
    p.flush(30)
    # 5 committed records + their marker; the open transaction starts at 6.
    assert _list_offset(bs, "txn-lso", 0, 0) == 11
    assert _list_offset(bs, "txn-lso", 0, 1) == 6
    assert _read_all(bs, "txn-lso", 1, "read_committed", 5, timeout=5) == {0: [b"a%d" % i for i in range(5)]}
    p.commit_transaction(30)
    wait_until(lambda: _list_offset(bs, "txn-lso", 0, 1) == 12, 10, message="LSO past the commit marker")
    got = _read_all(bs, "txn-lso", 1, "read_committed", 10)
    assert got == {0: [b"a%d" % i for i in range(5)] + [b"b%d" % i for i in range(5)]}


def test_zombie_producer_is_fenced_and_its_transaction_aborted(txn_broker):
    bs = txn_broker.bootstrap
    create_topic(bs, "txn-zombie", 1)
    old = _producer(bs, "tx-zombie")
    old.begin_transaction()
    old.produce("txn-zombie", b"zombie", partition=0)
    old.flush(30)
    new = _producer(bs, "tx-zombie")  # fences the old epoch and aborts its open transaction
    new.begin_transaction()
    new.produce("txn-zombie", b"fresh", partition=0)
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as raised:
        old.produce("txn-zombie", b"late", partition=0)
        old.commit_transaction(10)
    assert raised.value.args[0].fatal() or "fenced" in str(raised.value).lower()
    assert _read_all(bs, "txn-zombie", 1, "read_committed", 1) == {0: [b"fresh"]}
    assert _read_all(bs, "txn-zombie", 1, "read_uncommitted", 2) == {0: [b"zombie", b"fresh"]}


def test_transaction_open_past_its_timeout_is_aborted(txn_broker):
    bs = txn_broker.bootstrap
    create_topic(bs, "txn-timeout", 1)
    p = _producer(bs, "tx-timeout", **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    p.produce("txn-timeout", b"never committed", partition=0)
    p.flush(30)
    assert _list_offset(bs, "txn-timeout", 0, 1) == 0
    # The coordinator aborts it: an ABORT marker follows the record and the LSO reaches the log end.
    wait_until(lambda: _list_offset(bs, "txn-timeout", 0, 1) == 2, 15, message="timed-out transaction aborted")
    assert _list_offset(bs, "txn-timeout", 0, 0) == 2
    assert _fetch_committed(bs, "txn-timeout", 0)["aborted_transactions"][0]["first_offset"] == 0
    with pytest.raises(KafkaException):
        p.commit_transaction(10)


def _fixed_broker(broker_factory, name: str):
    port, cport = _free_port(), _free_port()
    return broker_factory(
        name,
        listeners=f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
        **{"controller.quorum.voters": f"1@127.0.0.1:{cport}"},
        **TXN_CONFIG,
    )


def test_kill_9_with_transactions_in_flight_keeps_lso_and_aborted_index(broker_factory, capsys):
    broker = _fixed_broker(broker_factory, "txn-recovery")
    bs = broker.bootstrap
    create_topic(bs, "txn-rec", 1)
    p = _producer(bs, "tx-rec")
    for i in range(6):
        p.begin_transaction()
        for j in range(4):
            p.produce("txn-rec", f"{i}-{j}".encode(), partition=0)
        if i % 2:
            p.flush(30)
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    p.begin_transaction()
    p.produce("txn-rec", b"in flight", partition=0)
    p.flush(30)
    before = _fetch_committed(bs, "txn-rec", 0)
    lso_before = _list_offset(bs, "txn-rec", 0, 1)
    assert lso_before == 30 and len(before["aborted_transactions"]) == 3
    broker.kill()
    broker.start()
    after = _fetch_committed(bs, "txn-rec", 0)
    assert _list_offset(bs, "txn-rec", 0, 1) == lso_before
    assert after["aborted_transactions"] == before["aborted_transactions"]
    assert after["last_stable_offset"] == before["last_stable_offset"]
    # kafka-dump-log reads the rebuilt .txnindex as Kafka's tool prints it.
    from pykbroker.tools import dump_log_segments

    index = broker.data_dir / "logs" / "txn-rec-0" / "00000000000000000000.txnindex"
    capsys.readouterr()
    assert dump_log_segments.main(["--files", str(index)]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    firsts = [a["first_offset"] for a in after["aborted_transactions"]]
    assert [int(line.split()[5]) for line in lines] == firsts
    assert all(line.startswith("version: 0 producerId: ") and "lastStableOffset: " in line for line in lines)
    del p


def test_consume_transform_produce_is_exactly_once_across_kill_9(broker_factory):
    broker = _fixed_broker(broker_factory, "txn-ctp")
    bs = broker.bootstrap
    create_topic(bs, "ctp-in", 3)
    create_topic(bs, "ctp-out", 3)
    total = 20_000
    src = Producer({"bootstrap.servers": bs, "linger.ms": 20, "enable.idempotence": True})
    for i in range(total):
        src.produce("ctp-in", str(i).encode(), partition=i % 3)
        if i % 5000 == 0:
            src.poll(0)
    assert src.flush(60) == 0

    def processor():
        consumer = Consumer(
            {
                "bootstrap.servers": bs,
                "group.id": "ctp",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe(["ctp-in"])
        producer = _producer(bs, "ctp-tx", **{"linger.ms": 20})
        return consumer, producer

    def copy_batch(consumer, producer, commit: bool = True) -> int:
        msgs = [m for m in consumer.consume(1000, 1.0) if not m.error()]
        if not msgs:
            return 0
        producer.begin_transaction()
        for m in msgs:
            producer.produce("ctp-out", m.value(), partition=m.partition())
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
        )
        if commit:
            producer.commit_transaction(30)
        else:
            producer.flush(30)
        return len(msgs)

    consumer, producer = processor()
    copied = 0
    deadline = time.time() + 60
    while copied < total // 3 and time.time() < deadline:
        copied += copy_batch(consumer, producer)
    assert copied >= total // 3
    copy_batch(consumer, producer, commit=False)  # a transaction in flight when the broker dies
    broker.kill()
    broker.start()
    consumer.close()
    consumer, producer = processor()  # same transactional.id: fences the old one, aborts its transaction
    deadline = time.time() + 120
    while time.time() < deadline:
        copy_batch(consumer, producer)
        lags = [
            _list_offset(bs, "ctp-in", p, 0) - (consumer.committed([TopicPartition("ctp-in", p)], 10)[0].offset)
            for p in range(3)
        ]
        if all(lag == 0 for lag in lags):
            break
    consumer.close()
    out = _read_all(bs, "ctp-out", 3, "read_committed", total, timeout=60)
    values = [int(v) for vs in out.values() for v in vs]
    assert len(values) == total and set(values) == set(range(total))
    for partition, vs in out.items():
        assert [int(v) for v in vs] == sorted(int(v) for v in vs)  # order kept per partition
        assert all(int(v) % 3 == partition for v in vs)


def test_kafka_transactions_list_and_describe(txn_broker):
    from pykbroker.tools import transactions_command

    bs = txn_broker.bootstrap
    create_topic(bs, "txn-tool", 2)
    p = _producer(bs, "tx-tool")
    p.begin_transaction()
    p.produce("txn-tool", b"x", partition=1)
    p.flush(30)
    out, err = io.StringIO(), io.StringIO()
    assert (
        transactions_command.main(["--bootstrap-server", bs, "describe", "--transactional-id", "tx-tool"], out, err)
        == 0
    )
    header, row = out.getvalue().splitlines()
    assert header.split() == transactions_command.DESCRIBE_HEADERS
    cells = [c.strip() for c in row.split("\t")]
    assert cells[1] == "tx-tool" and cells[4] == "Ongoing" and cells[8] == "txn-tool-1"
    out = io.StringIO()
    assert transactions_command.main(["--bootstrap-server", bs, "list"], out, err) == 0
    listed = {line.split()[0]: line.split() for line in out.getvalue().splitlines()[1:]}
    assert listed["tx-tool"][1:] == ["1", cells[2], "Ongoing"]
    p.commit_transaction(30)
    out, err = io.StringIO(), io.StringIO()
    assert (
        transactions_command.main(["--bootstrap-server", bs, "describe", "--transactional-id", "nope"], out, err) == 1
    )
    assert err.getvalue().startswith("Failed to describe transaction state of transactional-id `nope`: ")


def test_pykbroker_producer_and_consumer_transactions(txn_broker):
    from pykbroker.clients.consumer import KafkaConsumer
    from pykbroker.clients.producer import KafkaProducer

    bs = txn_broker.bootstrap
    create_topic(bs, "txn-own", 2)
    create_topic(bs, "txn-own-in", 1)
    producer = KafkaProducer({"bootstrap.servers": bs, "transactional.id": "tx-own", "linger.ms": 2})
    try:
        producer.init_transactions(30)
        expected: dict[int, list[bytes]] = {0: [], 1: []}
        for i in range(6):
            producer.begin_transaction()
            for j in range(10):
                producer.send("txn-own", f"{i}-{j}".encode(), partition=j % 2)
                if i % 2 == 0:
                    expected[j % 2].append(f"{i}-{j}".encode())
            if i == 4:
                producer.send_offsets_to_transaction({("txn-own-in", 0): 42}, "txn-own-group", 30)
            if i % 2:
                producer.abort_transaction(30)
            else:
                producer.commit_transaction(30)
        with pytest.raises(RuntimeError):
            producer.send("txn-own", b"outside a transaction", partition=0)
    finally:
        producer.close(10)
    # Other clients' view, then pykbroker's own consumer in both isolation levels.
    assert _read_all(bs, "txn-own", 2, "read_committed", 30) == expected
    for isolation, want in (("read_committed", 30), ("read_uncommitted", 60)):
        consumer = KafkaConsumer(
            {"bootstrap.servers": bs, "isolation.level": isolation, "auto.offset.reset": "earliest"}
        )
        consumer.assign([("txn-own", 0), ("txn-own", 1)])
        got: dict[int, list[bytes]] = {0: [], 1: []}
        deadline = time.time() + 15
        while time.time() < deadline and sum(map(len, got.values())) < want:
            for r in consumer.poll(500):
                got[r.partition].append(r.value)
        consumer.close()
        if isolation == "read_committed":
            assert got == expected
        else:
            assert sum(map(len, got.values())) == 60
    # The committed offset of the transaction's TxnOffsetCommit is the group's.
    c = Consumer({"bootstrap.servers": bs, "group.id": "txn-own-group", "isolation.level": "read_committed"})
    assert c.committed([TopicPartition("txn-own-in", 0)], 10)[0].offset == 42
    c.close()


def test_zombie_pykbroker_producer_is_fenced(txn_broker):
    from pykbroker.clients.producer import KafkaProducer
    from pykbroker.protocol.errors import ProducerFencedError

    bs = txn_broker.bootstrap
    create_topic(bs, "txn-own-zombie", 1)
    old = KafkaProducer({"bootstrap.servers": bs, "transactional.id": "tx-own-zombie"})
    new = KafkaProducer({"bootstrap.servers": bs, "transactional.id": "tx-own-zombie"})
    try:
        old.init_transactions(30)
        old.begin_transaction()
        old.send("txn-own-zombie", b"zombie", partition=0)
        old.flush(10)
        new.init_transactions(30)
        with pytest.raises(ProducerFencedError):
            old.commit_transaction(10)
        new.begin_transaction()
        new.send("txn-own-zombie", b"fresh", partition=0)
        new.commit_transaction(30)
    finally:
        old.close(5)
        new.close(5)
    assert _read_all(bs, "txn-own-zombie", 1, "read_committed", 1) == {0: [b"fresh"]}


def test_producer_perf_test_with_transactions(txn_broker):
    from tests.helpers.tools import run_tool

    bs = txn_broker.bootstrap
    create_topic(bs, "txn-perf", 1)
    r = run_tool(
        "producer_performance",
        "--topic",
        "txn-perf",
        "--num-records",
        "3000",
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--bootstrap-server",
        bs,
        "--transactional-id",
        "perf-tx",
        "--transaction-duration-ms",
        "50",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1].startswith("3000 records sent, ")
    # Every record is committed; the transactions' markers sit between them.
    got = _read_all(bs, "txn-perf", 1, "read_committed", 3000)
    assert len(got[0]) == 3000
    assert _list_offset(bs, "txn-perf", 0, 1) == _list_offset(bs, "txn-perf", 0, 0) > 3000
    bad = run_tool(
        "producer_performance",
        *("--topic", "txn-perf", "--num-records", "1", "--record-size", "1", "--throughput", "-1"),
        *("--bootstrap-server", bs, "--transaction-duration-ms", "0"),
    )
    assert bad.returncode != 0 and "--transaction-duration-ms should be greater than zero" in bad.stderr


def test_kafka_transactions_describe_producers_and_abort_a_hanging_transaction(txn_broker):
    from pykbroker.tools import transactions_command

    bs = txn_broker.bootstrap
    create_topic(bs, "txn-hang", 1)
    p = _producer(bs, "tx-hang")
    p.begin_transaction()
    for i in range(3):
        p.produce("txn-hang", b"h%d" % i, partition=0)
    p.flush(30)
    assert _list_offset(bs, "txn-hang", 0, 1) == 0
    out, err = io.StringIO(), io.StringIO()
    args = ["--bootstrap-server", bs, "describe-producers", "--topic", "txn-hang", "--partition", "0"]
    assert transactions_command.main(args, out, err) == 0, err.getvalue()
    header, row = out.getvalue().splitlines()
    assert header.split() == transactions_command.PRODUCER_HEADERS
    assert row.split()[5] == "0"  # CurrentTransactionStartOffset
    out, err = io.StringIO(), io.StringIO()
    missing = ["--bootstrap-server", bs, "abort", "--topic", "txn-hang", "--partition", "0", "--start-offset", "7"]
    assert transactions_command.main(missing, out, err) == 1
    assert "Could not find any open transactions starting at offset 7 on partition txn-hang-0" in err.getvalue()
    abort = ["--bootstrap-server", bs, "abort", "--topic", "txn-hang", "--partition", "0", "--start-offset", "0"]
    assert transactions_command.main(abort, io.StringIO(), err) == 0, err.getvalue()
    assert _list_offset(bs, "txn-hang", 0, 1) == _list_offset(bs, "txn-hang", 0, 0) == 4
    assert _fetch_committed(bs, "txn-hang", 0)["aborted_transactions"][0]["first_offset"] == 0
    del p


def test_partition_leader_verifies_the_partition_is_in_the_transaction(txn_broker):
    """KIP-890 part 1: a transactional write to a partition the coordinator does not have in the producer's
    transaction is refused with INVALID_TXN_STATE and leaves no open transaction behind."""
    from pykbroker.record.memory_records_builder import MemoryRecordsBuilder

    bs = txn_broker.bootstrap
    create_topic(bs, "txn-verify", 1)
    with BrokerConnection.to(bs) as c:
        wait_until(
            lambda: (
                c.request(ApiKeys.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["tx-verify"]})[
                    "coordinators"
                ][0]["error_code"]
                == 0
            ),
            15,
            message="transaction coordinator",
        )

        def init():
            return c.request(
                ApiKeys.INIT_PRODUCER_ID,
                4,
                {
                    "transactional_id": "tx-verify",
                    "transaction_timeout_ms": 60000,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
            )

        wait_until(lambda: init()["error_code"] == 0, 15, message="InitProducerId")
        r = init()
        pid, epoch = r["producer_id"], r["producer_epoch"]

        def produce(seq: int) -> int:
            b = MemoryRecordsBuilder(is_transactional=True)
            b.set_producer_state(pid, epoch, seq, True)
            b.append(int(time.time() * 1000), None, b"v")
            resp = c.request(
                ApiKeys.PRODUCE,
                9,
                {
                    "transactional_id": "tx-verify",
                    "acks": -1,
                    "timeout_ms": 5000,
                    "topic_data": [{"name": "txn-verify", "partition_data": [{"index": 0, "records": b.build()}]}],
                },
            )
            return resp["responses"][0]["partition_responses"][0]["error_code"]

        assert produce(0) == 48  # INVALID_TXN_STATE: never added to the transaction
        assert _list_offset(bs, "txn-verify", 0, 1) == 0 and _list_offset(bs, "txn-verify", 0, 0) == 0
        added = c.request(
            ApiKeys.ADD_PARTITIONS_TO_TXN,
            3,
            {
                "v3_and_below_transactional_id": "tx-verify",
                "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": "txn-verify", "partitions": [0]}],
            },
        )
        assert added["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"] == 0
        assert produce(0) == 0
        assert _list_offset(bs, "txn-verify", 0, 1) == 0 and _list_offset(bs, "txn-verify", 0, 0) == 1


def test_find_hanging_lists_a_transaction_its_coordinator_does_not_know(broker_factory):
    """Without partition verification a producer can open a transaction the coordinator never heard of:
    kafka-transactions find-hanging lists it and abort closes it. Transactional records without a
    transactional id are refused (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), as Kafka does."""
    from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
    from pykbroker.tools import transactions_command

    broker = broker_factory("txn-hanging", **{**TXN_CONFIG, "transaction.partition.verification.enable": "false"})
    bs = broker.bootstrap
    create_topic(bs, "hang", 1)
    proper = _producer(bs, "tx-proper")  # an open transaction its coordinator knows: not hanging
    proper.begin_transaction()
    proper.produce("hang", b"proper", partition=0)
    proper.flush(30)
    with BrokerConnection.to(bs) as c:
        r = c.request(
            ApiKeys.INIT_PRODUCER_ID,
            4,
            {"transactional_id": "tx-rogue", "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1},
        )
        assert r["error_code"] == 0
        b = MemoryRecordsBuilder(is_transactional=True)
        b.set_producer_state(r["producer_id"], r["producer_epoch"], 0, True)
        b.append(int(time.time() * 1000) - 120_000, None, b"rogue")

        def produce(tid):
            body = {
                "transactional_id": tid,
                "acks": -1,
                "timeout_ms": 5000,
                "topic_data": [{"name": "hang", "partition_data": [{"index": 0, "records": b.build()}]}],
            }
            return c.request(ApiKeys.PRODUCE, 9, body)["responses"][0]["partition_responses"][0]["error_code"]

        assert produce(None) == 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert produce("tx-rogue") == 0  # never added to its transaction: hanging
    out, err = io.StringIO(), io.StringIO()
    args = ["--bootstrap-server", bs, "find-hanging", "--topic", "hang", "--max-transaction-timeout", "0"]
    assert transactions_command.main(args, out, err) == 0, err.getvalue()
    lines = out.getvalue().splitlines()
    assert lines[0].split() == transactions_command.HANGING_HEADERS
    assert len(lines) == 2 and lines[1].split()[:3] == ["hang", "0", str(r["producer_id"])]
    start = lines[1].split()[5]
    abort = ["--bootstrap-server", bs, "abort", "--topic", "hang", "--partition", "0", "--start-offset", start]
    assert transactions_command.main(abort, io.StringIO(), err) == 0, err.getvalue()
    out = io.StringIO()
    assert transactions_command.main(args, out, err) == 0
    assert len(out.getvalue().splitlines()) == 1
    proper.commit_transaction(30)
    assert _read_all(bs, "hang", 1, "read_committed", 1) == {0: [b"proper"]}
