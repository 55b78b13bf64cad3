"""Sender: the producer's I/O thread (``org.apache.kafka.clients.producer.internals.Sender``).

Each loop: obtain a producer id first when idempotent (InitProducerId), refresh metadata when needed
(unknown leaders, NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION answers, ``metadata.max.age.ms``),
ask the accumulator which leaders have sendable batches, drain them into one ProduceRequest per node
(``max.request.size``), fail batches older than ``delivery.timeout.ms``, then poll the network.

Responses: success completes the batch (its futures and callbacks); DUPLICATE_SEQUENCE_NUMBER is a
success (the broker already has the batch); retriable errors (disconnects, timeouts,
NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, ..., and OUT_OF_ORDER_SEQUENCE_NUMBER while an earlier
batch of the partition is being retried) re-enqueue the batch after ``retry.backoff.ms`` while
``retries`` and ``delivery.timeout.ms`` allow; anything else fails it with the KafkaError.

Threading: one daemon thread; talks to application threads through the accumulator, the metadata
and ``wakeup``.
"""

from __future__ import annotations

import threading
import uuid

from pykbroker.clients.network_client import DisconnectError, NetworkClient, RequestTimeoutError
from pykbroker.clients.producer.producer_batch import ProducerBatch
from pykbroker.clients.producer.record_accumulator import RecordAccumulator
from pykbroker.clients.producer.transaction_manager import TransactionManager
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import SYSTEM, Time

PRODUCE_VERSION = 9
METADATA_VERSION = 12
INIT_PRODUCER_ID_VERSION = 4
_REFRESH_METADATA = {
    errors.NOT_LEADER_OR_FOLLOWER,
    errors.UNKNOWN_TOPIC_OR_PARTITION,
    errors.LEADER_NOT_AVAILABLE,
    errors.KAFKA_STORAGE_ERROR,
    errors.FENCED_LEADER_EPOCH,
    errors.UNKNOWN_LEADER_EPOCH,
}


class Sender(threading.Thread):
    def __init__(self, config, metadata, accumulator: RecordAccumulator, client_id: str, time: Time = SYSTEM):
        super().__init__(name=f"kafka-producer-network-thread | {client_id}", daemon=True)
        self.config = config
        self.metadata = metadata
        self.accumulator = accumulator
        self.acks = config.acks
        self.retries = config["retries"]
        self.request_timeout_ms = config["request.timeout.ms"]
        self.max_request_size = config["max.request.size"]
        self.client = NetworkClient(
            client_id,
            config["request.timeout.ms"],
            config["reconnect.backoff.ms"],
            config["reconnect.backoff.max.ms"],
            config["max.in.flight.requests.per.connection"],
            config["send.buffer.bytes"],
            config["receive.buffer.bytes"],
            get_logger("Producer", clientId=client_id),
            time,
        )
        for i, address in enumerate(metadata.bootstrap):
            self.client.set_address(-1 - i, address)
        self.txn = TransactionManager(config["transactional.id"]) if config.idempotent else None
        self.running = True
        self.force_close = False
        self.metadata_in_flight = False
        self.init_pid_in_flight = False
        self.log = get_logger("Producer", clientId=client_id)
        self.fatal_error: BaseException | None = None
        self.sleep_timeout = 0.0  # seconds of the poll in progress (0 when not polling): see KafkaProducer.send

    # -- cross-thread --------------------------------------------------------------------------------
    def wakeup(self) -> None:
        self.client.wakeup()

    def initiate_close(self) -> None:
        self.accumulator.closed = True
        self.running = False
        self.wakeup()

    # -- loop ----------------------------------------------------------------------------------------
    def run(self) -> None:
        try:
            while self.running:
                self.run_once()
            while not self.force_close and (self.accumulator.has_undrained() or self.client.in_flight_count() > 0):
                self.run_once()
            if self.force_close:
                error = RuntimeError("Producer is closed forcefully.")
                for batch in self.accumulator.abort_undrained(error):
                    self._fail(batch, error)
        except Exception as e:  # record it; send() then raises it
            self.fatal_error = e
            self.log.error("Uncaught error in kafka producer I/O thread", error=repr(e), exc_info=True)
        finally:
            self.client.close_all()

    def _any_node(self, now: float) -> int | None:
        """A node to ask for metadata / producer ids: a ready one, else start connecting."""
        nodes = list(self.metadata.brokers) or [-1 - i for i in range(len(self.metadata.bootstrap))]
        best = None
        for node in nodes:
            if self.client.is_ready(node, now) and (
                best is None or self.client.in_flight_count(node) < self.client.in_flight_count(best)
            ):
                best = node
        return best

    def run_once(self) -> None:
        now = self.client.now()
        self._sync_addresses()
        if self.metadata.update_due(now) and not self.metadata_in_flight:
            self._send_metadata_request(now)
        if self.txn is not None and not self.txn.has_producer_id:
            if not self.init_pid_in_flight and not self.txn.is_transactional:  # else init_transactions sets it
                self._send_init_producer_id(now)
            self.client.poll(0.05)
            return
        ready, next_check, unknown = self.accumulator.ready(self.metadata.leader_for, now)
        if unknown:
            self.metadata.request_update()
        sendable = {node for node in ready if self.client.is_ready(node, now)}
        batches = self.accumulator.drain(
            self.metadata.leader_for,
            sendable,
            self.max_request_size,
            now,
            self.txn.in_flight if self.txn else {},
            self.txn.assign_sequence if self.txn else None,
        )
        for batch in self.accumulator.expired_batches(now):
            self._fail(
                batch,
                TimeoutError(
                    f"Expiring {batch.record_count} record(s) for {batch.topic}-{batch.partition}: "
                    f"{int((now - batch.created) * 1000)} ms has passed since batch creation"
                ),
            )
        for node, node_batches in batches.items():
            self._send_produce_request(node, node_batches)
        timeout = 0.0 if batches or (sendable and self.accumulator.has_undrained()) else next_check
        if ready and not sendable:
            timeout = min(timeout, 0.05)
        timeout = min(timeout, 0.1)
        # Application threads wake us only when we would sleep past a short tick (see KafkaProducer.send).
        self.sleep_timeout = timeout
        self.client.poll(timeout)
        self.sleep_timeout = 0.0

    def _sync_addresses(self) -> None:
        for node, address in self.metadata.brokers.items():
            if self.client.addresses.get(node) != address:
                self.client.set_address(node, address)

    # -- metadata / producer id ----------------------------------------------------------------------
    def _send_metadata_request(self, now: float) -> None:
        node = self._any_node(now)
        if node is None:
            return
        topics = [{"name": t, "topic_id": uuid.UUID(int=0)} for t in sorted(self.metadata.topics)]
        version = self.client.version_for(node, ApiKeys.METADATA, METADATA_VERSION)
        self.metadata_in_flight = True
        self.client.send(
            node,
            ApiKeys.METADATA,
            version,
            {"topics": topics, "allow_auto_topic_creation": True, "include_topic_authorized_operations": False},
            self._on_metadata,
        )

    def _on_metadata(self, response, error) -> None:
        self.metadata_in_flight = False
        if error is None:
            self.metadata.update(response, self.client.now())

    def _send_init_producer_id(self, now: float) -> None:
        node = self._any_node(now)
        if node is None:
            return
        version = self.client.version_for(node, ApiKeys.INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSION)
        self.init_pid_in_flight = True
        self.client.send(
            node,
            ApiKeys.INIT_PRODUCER_ID,
            version,
            {
                "transactional_id": None,
                "transaction_timeout_ms": self.config["transaction.timeout.ms"],
                "producer_id": -1,
                "producer_epoch": -1,
            },
            self._on_init_producer_id,
        )

    def _on_init_producer_id(self, response, error) -> None:
        self.init_pid_in_flight = False
        if error is not None:
            return
        if response["error_code"] == errors.NONE:
            assert self.txn is not None  # InitProducerId is sent for an idempotent producer, which has one
            self.txn.set_producer_id_and_epoch(response["producer_id"], response["producer_epoch"])
            self.log.info("ProducerId set", producer_id=response["producer_id"], epoch=response["producer_epoch"])
        elif not errors.for_code(response["error_code"]).retriable:
            self.fatal_error = errors.for_code(response["error_code"])()

    # -- produce --------------------------------------------------------------------------------------
    def _send_produce_request(self, node: int, batches: list[ProducerBatch]) -> None:
        topics: dict[str, list] = {}
        by_tp = {}
        for batch in batches:
            topics.setdefault(batch.topic, []).append({"index": batch.partition, "records": batch.records()})
            by_tp[batch.tp] = batch
            if self.txn is not None:
                self.txn.add_in_flight(batch)
        body = {
            "transactional_id": self.txn.transactional_id if self.txn is not None else None,
            "acks": self.acks,
            "timeout_ms": self.request_timeout_ms,
            "topic_data": [{"name": t, "partition_data": parts} for t, parts in topics.items()],
        }
        version = self.client.version_for(node, ApiKeys.PRODUCE, PRODUCE_VERSION)
        if self.acks == 0:
            self.client.send(node, ApiKeys.PRODUCE, version, body, None, expect_response=False)
            for batch in batches:
                self._complete(batch, -1, -1)
            return
        self.client.send(
            node, ApiKeys.PRODUCE, version, body, lambda resp, err: self._on_produce_response(by_tp, resp, err)
        )

    def _on_produce_response(self, by_tp: dict, response, error) -> None:
        now = self.client.now()
        if error is not None:
            self.metadata.request_update()
            for batch in by_tp.values():
                self._retry_or_fail(batch, errors.NetworkError(str(error)), now)
            return
        seen = set()
        for t in response["responses"]:
            for p in t["partition_responses"]:
                batch = by_tp.get((t["name"], p["index"]))
                if batch is None:
                    continue
                seen.add(batch.tp)
                code = p["error_code"]
                if code == errors.NONE or code == errors.DUPLICATE_SEQUENCE_NUMBER:
                    self._complete(batch, p["base_offset"], p["log_append_time_ms"])
                    continue
                if code in _REFRESH_METADATA:
                    self.metadata.request_update()
                exc = errors.for_code(code)(p.get("error_message") or None)
                self._retry_or_fail(batch, exc, now)
        for tp, batch in by_tp.items():
            if tp not in seen:
                self._retry_or_fail(batch, errors.UnknownServerError(f"no response for {tp}"), now)

    def _can_retry(self, batch: ProducerBatch, exc: BaseException, now: float) -> bool:
        if batch.attempts >= self.retries or now - batch.created >= self.accumulator.delivery_timeout:
            return False
        if isinstance(exc, errors.OutOfOrderSequenceError):
            return True  # an earlier batch of the partition failed and is being retried
        return isinstance(exc, (DisconnectError, RequestTimeoutError)) or getattr(exc, "retriable", False)

    def _retry_or_fail(self, batch: ProducerBatch, exc: BaseException, now: float) -> None:
        if self.txn is not None:
            self.txn.remove_in_flight(batch)
        if self._can_retry(batch, exc, now):
            self.accumulator.reenqueue(batch, now)
        else:
            self._fail(batch, exc)

    def _complete(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        if self.txn is not None:
            self.txn.remove_in_flight(batch)
        batch.complete(base_offset, log_append_time, None)
        self.accumulator.deallocate(batch)

    def _fail(self, batch: ProducerBatch, exc: BaseException) -> None:
        if self.txn is not None:
            self.txn.remove_in_flight(batch)
            if self.txn.is_transactional and self.txn.abortable_error is None:
                self.txn.abortable_error = exc  # the transaction can only be aborted now
        batch.complete(-1, -1, exc)
        self.accumulator.deallocate(batch)
