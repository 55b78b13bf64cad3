"""A transactional producer speaking the raw protocol at transaction version 1 or 2 (KIP-890 part 2), for tests and
bench/ (the clients do not speak version 2 yet; speaking both with the same code measures the protocol alone).

``RawTxnProducer(bootstrap, transactional_id, version)`` finds the transaction coordinator (FindCoordinator v4),
gets a producer id (InitProducerId v5) and opens a connection per partition leader (Metadata v12):

* version 1: :meth:`send` adds the transaction's new partitions with AddPartitionsToTxn v3 (the clients' version;
  v4+ is the brokers' batched form, which needs CLUSTER_ACTION), then writes Produce v11; :meth:`end` is EndTxn v4
  and keeps the producer id and epoch;
* version 2: :meth:`send` writes Produce v12, whose leader adds the partitions (AddPartitionsToTxn v5 to the
  coordinator); :meth:`end` is EndTxn v5, whose answer carries the bumped epoch (or a new producer id) the next
  transaction uses.

Retriable answers (CONCURRENT_TRANSACTIONS while the previous transaction's markers are written, NOT_ENOUGH_REPLICAS
that a v2 produce gets for the same reason, NOT_COORDINATOR, loading, leader changes) are retried after ``backoff``
seconds within ``timeout`` seconds, as Kafka's clients do, and counted in :attr:`retries`; any other error raises
:class:`RawTxnError` (its ``code``: Kafka's error code). Not thread-safe: one thread uses an instance.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder

ZERO_UUID = b"\x00" * 16
RETRIABLE = {
    errors.CONCURRENT_TRANSACTIONS,
    errors.NOT_ENOUGH_REPLICAS,
    errors.NOT_COORDINATOR,
    errors.COORDINATOR_NOT_AVAILABLE,
    errors.COORDINATOR_LOAD_IN_PROGRESS,
    errors.NOT_LEADER_OR_FOLLOWER,
    errors.UNKNOWN_TOPIC_OR_PARTITION,
}
#: (request version) per transaction version: AddPartitionsToTxn (None: not sent), Produce, EndTxn
VERSIONS = {1: (3, 11, 4), 2: (None, 12, 5)}


class RawTxnError(Exception):
    def __init__(self, what: str, code: int):
        super().__init__(f"{what}: {errors.name_of(code)} ({code})")
        self.code = code


class RawTxnProducer:
    def __init__(
        self,
        bootstrap: str,
        transactional_id: str,
        version: int = 2,
        timeout: float = 15.0,
        backoff: float = 0.005,
        transaction_timeout_ms: int = 60000,
    ):
        self.tid, self.version, self.timeout, self.backoff = transactional_id, version, timeout, backoff
        self.add_version, self.produce_version, self.end_version = VERSIONS[version]
        self.bootstrap = BrokerConnection.to(bootstrap)
        self.conns: dict[int, BrokerConnection] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leaders: dict[tuple[str, int], int] = {}
        self.retries = 0
        self.coordinator = self._find_coordinator()
        init = self._retry(
            "InitProducerId",
            lambda: self._coordinator_call(
                ApiKeys.INIT_PRODUCER_ID,
                5,
                {
                    "transactional_id": transactional_id,
                    "transaction_timeout_ms": transaction_timeout_ms,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
            ),
        )
        self.pid, self.epoch = init["producer_id"], init["producer_epoch"]
        self.seq: dict[tuple[str, int], int] = {}
        self.added: set[tuple[str, int]] = set()

    def close(self) -> None:
        for c in {id(c): c for c in [self.bootstrap, *self.conns.values()]}.values():
            c.close()

    def __enter__(self) -> RawTxnProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- connections ---------------------------------------------------------------------------------------

    def _conn(self, node: int) -> BrokerConnection:
        if node not in self.conns:
            self.conns[node] = BrokerConnection(*self.brokers[node])
        return self.conns[node]

    def _find_coordinator(self) -> BrokerConnection:
        def find() -> dict:
            r = self.bootstrap.request(ApiKeys.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [self.tid]})
            return r["coordinators"][0]

        c = self._retry("FindCoordinator", find)
        self.brokers[c["node_id"]] = (c["host"], c["port"])
        return self._conn(c["node_id"])

    def _coordinator_call(self, api: int, version: int, body: dict) -> dict:
        r = self.coordinator.request(api, version, body)
        if r["error_code"] in (errors.NOT_COORDINATOR, errors.COORDINATOR_NOT_AVAILABLE):
            self.coordinator = self._find_coordinator()
        return r

    def _leader(self, tp: tuple[str, int]) -> BrokerConnection:
        if tp not in self.leaders:
            md = self.bootstrap.request(
                ApiKeys.METADATA,
                12,
                {"topics": [{"topic_id": ZERO_UUID, "name": tp[0]}], "allow_auto_topic_creation": False},
            )
            self.brokers.update({b["node_id"]: (b["host"], b["port"]) for b in md["brokers"]})
            for p in md["topics"][0]["partitions"]:
                if p["error_code"] == errors.NONE and p["leader_id"] >= 0:
                    self.leaders[(tp[0], p["partition_index"])] = p["leader_id"]
            if tp not in self.leaders:
                raise RawTxnError(f"no leader for {tp}", errors.LEADER_NOT_AVAILABLE)
        return self._conn(self.leaders[tp])

    def _retry(self, what: str, call: Callable[[], dict]) -> dict:
        deadline = time.monotonic() + self.timeout
        while True:
            r = call()
            if r["error_code"] == errors.NONE:
                return r
            if r["error_code"] not in RETRIABLE or time.monotonic() > deadline:
                raise RawTxnError(what, r["error_code"])
            self.retries += 1
            time.sleep(self.backoff)

    # -- a transaction -------------------------------------------------------------------------------------

    def send(self, batches: dict[tuple[str, int], list[bytes]]) -> None:
        """Write one transactional batch of values per (topic, partition), in the open transaction (begun by the
        first write). Raises RawTxnError when a partition cannot be written."""
        new = [tp for tp in batches if tp not in self.added]
        if new and self.add_version is not None:
            self._add_partitions(new)
        self.added.update(new)
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for tp in batches:
            self._leader(tp)
            by_leader.setdefault(self.leaders[tp], []).append(tp)
        for node, tps in by_leader.items():
            pending = list(tps)
            deadline = time.monotonic() + self.timeout
            while pending:
                codes = self._produce(node, {tp: batches[tp] for tp in pending})
                failed = [tp for tp in pending if codes[tp] != errors.NONE]
                for tp in failed:
                    if codes[tp] not in RETRIABLE or time.monotonic() > deadline:
                        raise RawTxnError(f"Produce v{self.produce_version} {tp}", codes[tp])
                if failed:
                    self.retries += 1
                    time.sleep(self.backoff)
                pending = failed

    def _add_partitions(self, tps: list[tuple[str, int]]) -> None:
        topics: dict[str, list[int]] = {}
        for topic, partition in tps:
            topics.setdefault(topic, []).append(partition)

        def add() -> dict:
            r = self._coordinator_call(
                ApiKeys.ADD_PARTITIONS_TO_TXN,
                3,
                {
                    "v3_and_below_transactional_id": self.tid,
                    "v3_and_below_producer_id": self.pid,
                    "v3_and_below_producer_epoch": self.epoch,
                    "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                },
            )
            codes = [
                p["partition_error_code"] for t in r["results_by_topic_v3_and_below"] for p in t["results_by_partition"]
            ]
            # the first real error (OPERATION_NOT_ATTEMPTED marks the others of a failed request)
            real = [c for c in codes if c not in (errors.NONE, errors.OPERATION_NOT_ATTEMPTED)]
            return {"error_code": real[0] if real else errors.NONE}

        self._retry("AddPartitionsToTxn v3", add)

    def _produce(self, node: int, batches: dict[tuple[str, int], list[bytes]]) -> dict[tuple[str, int], int]:
        topics: dict[str, list[dict]] = {}
        now = int(time.time() * 1000)
        for (topic, partition), values in batches.items():
            b = MemoryRecordsBuilder(is_transactional=True)
            b.set_producer_state(self.pid, self.epoch, self.seq.get((topic, partition), 0), True)
            for v in values:
                b.append(now, None, v)
            topics.setdefault(topic, []).append({"index": partition, "records": b.build()})
        r = self._conn(node).request(
            ApiKeys.PRODUCE,
            self.produce_version,
            {
                "transactional_id": self.tid,
                "acks": -1,
                "timeout_ms": int(self.timeout * 1000),
                "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()],
            },
        )
        codes = {}
        for t in r["responses"]:
            for p in t["partition_responses"]:
                tp = (t["name"], p["index"])
                codes[tp] = p["error_code"]
                if p["error_code"] == errors.NONE:
                    self.seq[tp] = self.seq.get(tp, 0) + len(batches[tp])
                elif p["error_code"] == errors.NOT_LEADER_OR_FOLLOWER:
                    self.leaders.pop(tp, None)
        return codes

    def end(self, commit: bool = True) -> dict:
        """EndTxn (v4 or v5); returns its answer. At version 2 the next transaction uses the producer id and epoch
        it returns. Raises RawTxnError for a non-retriable error."""
        r = self._retry(
            f"EndTxn v{self.end_version}",
            lambda: self._coordinator_call(
                ApiKeys.END_TXN,
                self.end_version,
                {
                    "transactional_id": self.tid,
                    "producer_id": self.pid,
                    "producer_epoch": self.epoch,
                    "committed": commit,
                },
            ),
        )
        if self.version >= 2:
            self.pid, self.epoch = r["producer_id"], r["producer_epoch"]
            self.seq.clear()
        self.added.clear()
        return r
