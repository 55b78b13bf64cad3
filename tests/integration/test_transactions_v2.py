"""Transaction protocol version 2 (KIP-890 part 2) against a real broker, with a raw-protocol client (the clients
do not speak it yet): Produce v12 adds the partitions to the transaction without AddPartitionsToTxn, EndTxn v5
returns the bumped epoch, TxnOffsetCommit v5 needs no AddOffsetsToTxn, a late write of a finished transaction
is fenced; a version 1 client (confluent-kafka) keeps working on the same broker."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until
from tests.integration.test_transactions import TXN_CONFIG, _list_offset, _read_all

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from tests.helpers.broker import BrokerProcess

    b = BrokerProcess(tmp_path_factory.mktemp("txn-v2-broker"), **TXN_CONFIG).start()
    yield b
    b.stop()


class RawV2Producer:
    """A transactional producer speaking transaction version 2 on one connection (the broker is the
    coordinator and the leader of everything in a single-broker cluster)."""

    def __init__(self, conn: BrokerConnection, tid: str):
        self.c, self.tid = conn, tid
        wait_until(lambda: self._find_coordinator(1, tid) == errors.NONE, 15, message="transaction coordinator")
        init = {}

        def initialized() -> bool:
            init.update(
                conn.request(
                    ApiKeys.INIT_PRODUCER_ID,
                    5,
                    {"transactional_id": tid, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1},
                )
            )
            return init["error_code"] == errors.NONE

        wait_until(initialized, 15, message="InitProducerId")
        self.pid, self.epoch = init["producer_id"], init["producer_epoch"]
        self.seq: dict[tuple[str, int], int] = {}

    def _find_coordinator(self, key_type: int, key: str) -> int:
        r = self.c.request(ApiKeys.FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": [key]})
        return r["coordinators"][0]["error_code"]

    def produce(self, topic: str, partition: int, values: list[bytes], epoch: int | None = None) -> int:
        """Produce v12 of ``values`` in one transactional batch; the partition's error code. Retried, as clients
        do, while the coordinator cannot add the partition yet (NOT_ENOUGH_REPLICAS: the previous
        transaction's markers are still being written)."""
        deadline = time.monotonic() + 15
        while True:
            code = self._produce_once(topic, partition, values, epoch)
            if code != errors.NOT_ENOUGH_REPLICAS or time.monotonic() > deadline:
                return code
            time.sleep(0.05)

    def _produce_once(self, topic: str, partition: int, values: list[bytes], epoch: int | None) -> int:
        tp = (topic, partition)
        b = MemoryRecordsBuilder(is_transactional=True)
        b.set_producer_state(self.pid, self.epoch if epoch is None else epoch, self.seq.get(tp, 0), True)
        for v in values:
            b.append(int(time.time() * 1000), None, v)
        r = self.c.request(
            ApiKeys.PRODUCE,
            12,
            {
                "transactional_id": self.tid,
                "acks": -1,
                "timeout_ms": 10000,
                "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": b.build()}]}],
            },
        )
        code = r["responses"][0]["partition_responses"][0]["error_code"]
        if code == errors.NONE:
            self.seq[tp] = self.seq.get(tp, 0) + len(values)
        return code

    def end(self, commit: bool, epoch: int | None = None) -> dict:
        """EndTxn v5; on success the next transaction uses the returned producer id and epoch (sequences
        restart at 0)."""
        r = self.c.request(
            ApiKeys.END_TXN,
            5,
            {
                "transactional_id": self.tid,
                "producer_id": self.pid,
                "producer_epoch": self.epoch if epoch is None else epoch,
                "committed": commit,
            },
        )
        if r["error_code"] == errors.NONE:
            self.pid, self.epoch = r["producer_id"], r["producer_epoch"]
            self.seq.clear()
        return r

    def txn_offset_commit(self, group: str, topic: str, partition: int, offset: int) -> int:
        wait_until(lambda: self._find_coordinator(0, group) == errors.NONE, 15, message="group coordinator")
        r = self.c.request(
            ApiKeys.TXN_OFFSET_COMMIT,
            5,
            {
                "transactional_id": self.tid,
                "group_id": group,
                "producer_id": self.pid,
                "producer_epoch": self.epoch,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": partition, "committed_offset": offset, "committed_metadata": ""}
                        ],
                    }
                ],
            },
        )
        return r["topics"][0]["partitions"][0]["error_code"]


def _stable(bs: str, topic: str, partition: int) -> bool:
    """No open transaction holds the partition back (LSO == high watermark)."""
    return _list_offset(bs, topic, partition, 1) == _list_offset(bs, topic, partition, 0)


def _committed_offset(bs: str, group: str, topic: str, partition: int) -> int:
    with BrokerConnection.to(bs) as c:
        r = c.request(
            ApiKeys.OFFSET_FETCH,
            7,
            {"group_id": group, "topics": [{"name": topic, "partition_indexes": [partition]}], "require_stable": True},
        )
    p = r["topics"][0]["partitions"][0]
    return p["committed_offset"] if p["error_code"] == errors.NONE else -2


def test_v2_commit_and_abort_bump_the_epoch_without_add_partitions(broker):
    bs = broker.bootstrap
    create_topic(bs, "txv2", 2)
    with BrokerConnection.to(bs) as conn:
        p = RawV2Producer(conn, "tx-v2")
        pid, epoch = p.pid, p.epoch
        # transaction 1: two partitions and an offset commit, none added by the client; committed
        assert p.produce("txv2", 0, [b"a1", b"a2"]) == errors.NONE
        assert p.produce("txv2", 1, [b"b1"]) == errors.NONE
        assert p.produce("txv2", 0, [b"a3"]) == errors.NONE  # the partition is in the transaction already
        assert not _stable(bs, "txv2", 0)
        assert p.txn_offset_commit("g-v2", "txv2", 0, 42) == errors.NONE
        r = p.end(True)
        assert (r["error_code"], r["producer_id"], r["producer_epoch"]) == (errors.NONE, pid, epoch + 1)
        wait_until(lambda: _stable(bs, "txv2", 0) and _stable(bs, "txv2", 1), 15, message="commit markers")
        wait_until(lambda: _committed_offset(bs, "g-v2", "txv2", 0) == 42, 15, message="transactional offset")
        # transaction 2, at the bumped epoch: aborted
        assert p.produce("txv2", 0, [b"x1"]) == errors.NONE
        assert p.produce("txv2", 1, [b"x2"]) == errors.NONE
        r = p.end(False)
        assert (r["error_code"], r["producer_id"], r["producer_epoch"]) == (errors.NONE, pid, epoch + 2)
        wait_until(lambda: _stable(bs, "txv2", 0) and _stable(bs, "txv2", 1), 15, message="abort markers")
        # the aborted transaction's epoch can neither write nor end a transaction any more
        end_before = _list_offset(bs, "txv2", 0, 0)
        assert p.produce("txv2", 0, [b"late"], epoch=epoch + 1) == errors.INVALID_PRODUCER_EPOCH
        assert p.end(True, epoch=epoch)["error_code"] == errors.PRODUCER_FENCED
        # EndTxn retried with the previous epoch: the same answer, or Kafka's INVALID_TXN_STATE for the other result
        assert p.end(True, epoch=epoch + 1)["error_code"] == errors.INVALID_TXN_STATE
        r = p.end(False, epoch=epoch + 1)
        assert (r["error_code"], r["producer_id"], r["producer_epoch"]) == (errors.NONE, pid, epoch + 2)
        assert _list_offset(bs, "txv2", 0, 0) == end_before and _stable(bs, "txv2", 0)
        # transaction 3 commits normally at epoch + 2
        assert p.produce("txv2", 0, [b"c1"]) == errors.NONE
        assert p.end(True)["producer_epoch"] == epoch + 3
    got = _read_all(bs, "txv2", 2, "read_committed", expected=5)
    assert got == {0: [b"a1", b"a2", b"a3", b"c1"], 1: [b"b1"]}
    uncommitted = _read_all(bs, "txv2", 2, "read_uncommitted", expected=7)
    assert uncommitted == {0: [b"a1", b"a2", b"a3", b"x1", b"c1"], 1: [b"b1", b"x2"]}


def test_late_write_of_a_finished_transaction_is_fenced(broker):
    """The hanging-transaction bug v2 closes: a write of the finished transaction (its epoch, its next
    sequence) that reaches the partition after the marker must not open a transaction nobody will end."""
    bs = broker.bootstrap
    create_topic(bs, "txv2-late", 1)
    with BrokerConnection.to(bs) as conn:
        p = RawV2Producer(conn, "tx-v2-late")
        old = p.epoch
        assert p.produce("txv2-late", 0, [b"v"]) == errors.NONE
        assert p.end(True)["error_code"] == errors.NONE
        wait_until(lambda: _stable(bs, "txv2-late", 0), 15, message="markers")
        p.seq[("txv2-late", 0)] = 1
        assert p.produce("txv2-late", 0, [b"zombie"], epoch=old) == errors.INVALID_PRODUCER_EPOCH
        assert _stable(bs, "txv2-late", 0)
        assert _list_offset(bs, "txv2-late", 0, 0) == 2  # the record and the marker, nothing else
    assert _read_all(bs, "txv2-late", 1, "read_committed", expected=1) == {0: [b"v"]}


def test_a_version_1_client_keeps_working_beside_version_2(broker):
    bs = broker.bootstrap
    create_topic(bs, "txv1v2", 1)
    producer = Producer({"bootstrap.servers": bs, "transactional.id": "tx-v1-beside", "linger.ms": 5})
    producer.init_transactions(30)
    with BrokerConnection.to(bs) as conn:
        v2 = RawV2Producer(conn, "tx-v2-beside")
        for i in range(3):
            producer.begin_transaction()
            producer.produce("txv1v2", f"v1-{i}".encode(), partition=0)
            assert v2.produce("txv1v2", 0, [f"v2-{i}".encode()]) == errors.NONE
            producer.commit_transaction(30)
            assert v2.end(i != 1)["error_code"] == errors.NONE
    got = _read_all(bs, "txv1v2", 1, "read_committed", expected=5)
    assert sorted(got[0]) == [b"v1-0", b"v1-1", b"v1-2", b"v2-0", b"v2-2"]
