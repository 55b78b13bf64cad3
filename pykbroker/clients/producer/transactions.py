"""The transactional half of the producer (KIP-98): ``init_transactions``, ``begin_transaction``,
``send_offsets_to_transaction``, ``commit_transaction``, ``abort_transaction``.

Mirrors the transactional state machine of ``org.apache.kafka.clients.producer.internals.TransactionManager``::

    UNINITIALIZED --init_transactions--> READY --begin_transaction--> IN_TRANSACTION
    IN_TRANSACTION --commit_transaction--> READY          (EndTxn commit after every record completed)
    IN_TRANSACTION | ABORTABLE_ERROR --abort_transaction--> READY
    IN_TRANSACTION --a record failed--> ABORTABLE_ERROR   (commit raises; abort is the way out)
    any --PRODUCER_FENCED / INVALID_PRODUCER_EPOCH--> FATAL_ERROR (every call raises ProducerFencedError)

The coordinator RPCs are blocking calls on the application thread (Java queues them to the Sender and
waits on a TransactionalRequestResult, which is the same to the caller): FindCoordinator (key type 1),
InitProducerId with the transactional id (its producer id and epoch go to the Sender's
TransactionManager, so batches carry them with the transactional bit), AddPartitionsToTxn the first time
a transaction sends to a partition (before the record is appended, so no batch of the partition is sent
before the coordinator knows it), AddOffsetsToTxn then TxnOffsetCommit to the group coordinator, and
EndTxn once ``flush`` saw every record of the transaction complete. NOT_COORDINATOR /
COORDINATOR_NOT_AVAILABLE look the coordinator up again; COORDINATOR_LOAD_IN_PROGRESS and
CONCURRENT_TRANSACTIONS are retried after ``retry.backoff.ms``; everything is bounded by the call's
timeout (``max.block.ms`` by default), then TimeoutError.

Threading: calls are serialized by ``_lock``; ``maybe_add_partition`` runs on the thread calling ``send``.
"""

from __future__ import annotations

import enum
import threading
import time as _time

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys

_RETRY_SAME = frozenset({errors.COORDINATOR_LOAD_IN_PROGRESS, errors.CONCURRENT_TRANSACTIONS})
_FIND_AGAIN = frozenset({errors.NOT_COORDINATOR, errors.COORDINATOR_NOT_AVAILABLE})
_FATAL = frozenset(
    {
        errors.PRODUCER_FENCED,
        errors.INVALID_PRODUCER_EPOCH,
        errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        errors.INVALID_PRODUCER_ID_MAPPING,
    }
)


class TxnState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


class IllegalStateError(RuntimeError):
    """A transactional call in the wrong state (Java's IllegalStateException / KafkaException)."""


class TransactionalClient:
    def __init__(self, config, metadata, txn_manager, client_id: str):
        self.transactional_id = config["transactional.id"]
        self.txn_timeout_ms = config["transaction.timeout.ms"]
        self.default_timeout = config["max.block.ms"] / 1000.0
        self.backoff = max(config["retry.backoff.ms"], 10) / 1000.0
        self.metadata = metadata
        self.txn = txn_manager
        self.client_id = client_id
        self.state = TxnState.UNINITIALIZED
        self._partitions: set[tuple[str, int]] = set()
        self._coordinator: BrokerConnection | None = None
        self._fatal: BaseException | None = None
        self._lock = threading.RLock()

    # -- state ----------------------------------------------------------------------------------
    def _require(self, *states: TxnState, what: str) -> None:
        if self.state is TxnState.FATAL_ERROR:
            raise self._fatal or IllegalStateError("The producer is in a fatal error state")
        if self.state not in states:
            raise IllegalStateError(f"Cannot {what} in state {self.state.value}")

    def _fail_fatal(self, code: int, what: str) -> None:
        self.state = TxnState.FATAL_ERROR
        exc = errors.for_code(code)(f"{what}: {errors.name_of(code)}")
        if code in (errors.INVALID_PRODUCER_EPOCH, errors.PRODUCER_FENCED):
            exc = errors.ProducerFencedError(
                f"There is a newer producer with the same transactionalId {self.transactional_id} ({what})"
            )
        self._fatal = exc
        raise exc

    # -- connections ----------------------------------------------------------------------------
    def _addresses(self) -> list[tuple[str, int]]:
        return list(self.metadata.brokers.values()) + list(self.metadata.bootstrap)

    def _any_connection(self) -> BrokerConnection:
        last: Exception | None = None
        for host, port in self._addresses():
            try:
                return BrokerConnection(host, port, client_id=self.client_id, timeout=30)
            except OSError as e:
                last = e
        raise errors.NetworkError(f"No broker reachable: {last}")

    def _find_coordinator(self, key: str, key_type: int, deadline: float) -> tuple[str, int]:
        while True:
            try:
                with self._any_connection() as conn:
                    r = conn.request(ApiKeys.FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": [key]})
                c = r["coordinators"][0]
                if c["error_code"] == errors.NONE:
                    return c["host"], c["port"]
                if c["error_code"] in _FATAL:
                    self._fail_fatal(c["error_code"], "FindCoordinator")
                if not errors.for_code(c["error_code"]).retriable:
                    raise errors.for_code(c["error_code"])(f"FindCoordinator for {key}")
            except (OSError, errors.NetworkError):
                pass
            if _time.monotonic() + self.backoff > deadline:
                raise TimeoutError(f"Timeout expired while finding the coordinator of {key}")
            _time.sleep(self.backoff)

    def _request(self, api_key: int, version: int, body: dict, code_of, deadline: float, group: str | None = None):
        """Send to the transaction coordinator (or ``group``'s coordinator); retry what Kafka retries."""
        conn = None if group is not None else self._coordinator
        try:
            while True:
                try:
                    if conn is None:
                        key, key_type = (group, 0) if group is not None else (self.transactional_id, 1)
                        conn = BrokerConnection(
                            *self._find_coordinator(key, key_type, deadline), client_id=self.client_id, timeout=30
                        )
                        if group is None:
                            self._coordinator = conn
                    response = conn.request(api_key, version, body)
                except (OSError, EOFError, ConnectionError):
                    if conn is not None:
                        conn.close()
                    conn = None
                    if group is None:
                        self._coordinator = None
                    response = None
                    code = errors.COORDINATOR_NOT_AVAILABLE
                else:
                    code = code_of(response)
                if code in _FIND_AGAIN:
                    if conn is not None:
                        conn.close()
                    conn = None
                    if group is None:
                        self._coordinator = None
                elif code not in _RETRY_SAME:
                    return response, code
                if _time.monotonic() + self.backoff > deadline:
                    raise TimeoutError(f"Timeout expired after waiting for {ApiKeys(api_key).name}")
                _time.sleep(self.backoff)
        finally:
            if group is not None and conn is not None:
                conn.close()

    def _deadline(self, timeout: float | None) -> float:
        return _time.monotonic() + (self.default_timeout if timeout is None else timeout)

    # -- API ------------------------------------------------------------------------------------
    def init_transactions(self, timeout: float | None = None) -> None:
        with self._lock:
            self._require(TxnState.UNINITIALIZED, what="initialize transactions")
            response, code = self._request(
                ApiKeys.INIT_PRODUCER_ID,
                4,
                {
                    "transactional_id": self.transactional_id,
                    "transaction_timeout_ms": self.txn_timeout_ms,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
                lambda r: r["error_code"],
                self._deadline(timeout),
            )
            if code in _FATAL:
                self._fail_fatal(code, "InitProducerId")
            if code != errors.NONE:
                raise errors.for_code(code)(f"InitProducerId for {self.transactional_id}")
            self.txn.set_producer_id_and_epoch(response["producer_id"], response["producer_epoch"])
            self.state = TxnState.READY

    def begin_transaction(self) -> None:
        with self._lock:
            self._require(TxnState.READY, what="begin a transaction")
            self._partitions.clear()
            self.txn.abortable_error = None
            self.state = TxnState.IN_TRANSACTION

    def maybe_add_partition(self, tp: tuple[str, int]) -> None:
        """Before the first record of the transaction to ``tp``: AddPartitionsToTxn."""
        if tp in self._partitions and self.state is TxnState.IN_TRANSACTION:
            return
        with self._lock:
            self._require(TxnState.IN_TRANSACTION, what="send")
            if tp in self._partitions:
                return
            self._add_partitions({tp}, self._deadline(None))

    def _add_partitions(self, tps: set[tuple[str, int]], deadline: float) -> None:
        topics: dict[str, list[int]] = {}
        for t, p in sorted(tps):
            topics.setdefault(t, []).append(p)
        body = {
            "v3_and_below_transactional_id": self.transactional_id,
            "v3_and_below_producer_id": self.txn.producer_id,
            "v3_and_below_producer_epoch": self.txn.producer_epoch,
            "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }

        def code_of(r: dict) -> int:
            codes = [
                p["partition_error_code"] for t in r["results_by_topic_v3_and_below"] for p in t["results_by_partition"]
            ]
            return next((c for c in codes if c != errors.NONE), errors.NONE)

        _, code = self._request(ApiKeys.ADD_PARTITIONS_TO_TXN, 3, body, code_of, deadline)
        if code in _FATAL:
            self._fail_fatal(code, "AddPartitionsToTxn")
        if code != errors.NONE:
            self.state = TxnState.ABORTABLE_ERROR
            raise errors.for_code(code)(f"AddPartitionsToTxn {sorted(tps)}")
        self._partitions |= tps

    def send_offsets_to_transaction(self, offsets: dict, group, timeout: float | None = None) -> None:
        """``offsets``: ``{(topic, partition): offset or (offset, metadata)}`` (the next offsets to read);
        ``group``: a group id or an object/dict with ``group_id`` and optionally ``generation_id``,
        ``member_id``, ``group_instance_id`` (KIP-447)."""
        with self._lock:
            self._require(TxnState.IN_TRANSACTION, what="send offsets to a transaction")
            deadline = self._deadline(timeout)
            info = _group_info(group)
            _, code = self._request(
                ApiKeys.ADD_OFFSETS_TO_TXN,
                3,
                {
                    "transactional_id": self.transactional_id,
                    "producer_id": self.txn.producer_id,
                    "producer_epoch": self.txn.producer_epoch,
                    "group_id": info["group_id"],
                },
                lambda r: r["error_code"],
                deadline,
            )
            if code in _FATAL:
                self._fail_fatal(code, "AddOffsetsToTxn")
            if code != errors.NONE:
                self.state = TxnState.ABORTABLE_ERROR
                raise errors.for_code(code)("AddOffsetsToTxn")
            topics: dict[str, list[dict]] = {}
            for (t, p), value in sorted(offsets.items()):
                offset, meta = value if isinstance(value, tuple) else (value, "")
                topics.setdefault(t, []).append(
                    {
                        "partition_index": p,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": meta,
                    }
                )
            body = {
                "transactional_id": self.transactional_id,
                "group_id": info["group_id"],
                "producer_id": self.txn.producer_id,
                "producer_epoch": self.txn.producer_epoch,
                "generation_id": info["generation_id"],
                "member_id": info["member_id"],
                "group_instance_id": info["group_instance_id"],
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            }

            def code_of(r: dict) -> int:
                codes = [p["error_code"] for t in r["topics"] for p in t["partitions"]]
                return next((c for c in codes if c != errors.NONE), errors.NONE)

            _, code = self._request(ApiKeys.TXN_OFFSET_COMMIT, 3, body, code_of, deadline, group=info["group_id"])
            if code in _FATAL:
                self._fail_fatal(code, "TxnOffsetCommit")
            if code != errors.NONE:
                self.state = TxnState.ABORTABLE_ERROR
                raise errors.for_code(code)("TxnOffsetCommit")

    def end_transaction(self, commit: bool, flush, timeout: float | None = None) -> None:
        """Commit (every record completed first) or abort the current transaction."""
        with self._lock:
            if commit:
                self._require(TxnState.IN_TRANSACTION, what="commit a transaction")
            else:
                self._require(TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR, what="abort a transaction")
            deadline = self._deadline(timeout)
            flush(max(0.0, deadline - _time.monotonic()))
            failed = self.txn.abortable_error
            if failed is not None and isinstance(
                failed, (errors.InvalidProducerEpochError, errors.ProducerFencedError)
            ):
                self._fail_fatal(errors.PRODUCER_FENCED, "Produce")
            if commit and failed is not None:
                self.state = TxnState.ABORTABLE_ERROR
                raise errors.TransactionAbortableError(
                    f"Cannot commit: a record of the transaction failed ({failed!r}); abort the transaction"
                )
            if self._partitions:
                _, code = self._request(
                    ApiKeys.END_TXN,
                    3,
                    {
                        "transactional_id": self.transactional_id,
                        "producer_id": self.txn.producer_id,
                        "producer_epoch": self.txn.producer_epoch,
                        "committed": commit,
                    },
                    lambda r: r["error_code"],
                    deadline,
                )
                if code in _FATAL:
                    self._fail_fatal(code, "EndTxn")
                if code != errors.NONE:
                    raise errors.for_code(code)(f"EndTxn {'commit' if commit else 'abort'}")
            self._partitions.clear()
            self.txn.abortable_error = None
            self.state = TxnState.READY

    def close(self) -> None:
        if self._coordinator is not None:
            self._coordinator.close()
            self._coordinator = None


def _group_info(group) -> dict:
    if isinstance(group, str):
        return {"group_id": group, "generation_id": -1, "member_id": "", "group_instance_id": None}
    get = group.get if isinstance(group, dict) else lambda k, d=None: getattr(group, k, d)
    return {
        "group_id": get("group_id"),
        "generation_id": get("generation_id", -1),
        "member_id": get("member_id", "") or "",
        "group_instance_id": get("group_instance_id", None),
    }
