"""KafkaProducer: the pykbroker producer client (``org.apache.kafka.clients.producer.KafkaProducer``).

    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:9092", "linger.ms": 5})
    future = producer.send("topic", b"value", key=b"key")      # returns at once
    metadata = future.get(timeout=10)                          # RecordMetadata(topic, partition, offset, ...)
    producer.flush(); producer.close()

``send`` serializes key and value (``key.serializer`` / ``value.serializer`` callables
``(topic, data) -> bytes``; bytes pass through), waits for the topic's metadata (up to
``max.block.ms``), picks the partition (explicit, else murmur2 of the key, else the sticky
partition), appends to the RecordAccumulator (blocking up to ``max.block.ms`` while ``buffer.memory``
is exhausted) and wakes the Sender when a batch is ready. ``callback(metadata, exception)`` runs on
the Sender thread when the record's batch completes, as Java's Callback does.

Errors raised by ``send``: TimeoutError (metadata or buffer memory not available within
``max.block.ms``), RecordTooLargeError (a record above ``max.request.size`` or ``buffer.memory``),
RuntimeError after ``close``. Delivery errors arrive through the future / callback.

Transactions (``transactional.id``): ``init_transactions``, ``begin_transaction``, ``send``...,
``send_offsets_to_transaction``, ``commit_transaction`` / ``abort_transaction``, as in Java.

Thread-safety: ``send``, ``flush`` and ``partitions_for`` may be called from any thread.
"""

from __future__ import annotations

from pykbroker.clients.metadata import ClusterMetadata
from pykbroker.clients.producer.partitioner import BuiltInPartitioner, partition_for_key
from pykbroker.clients.producer.producer_batch import FutureRecordMetadata
from pykbroker.clients.producer.producer_config import ProducerConfig
from pykbroker.clients.producer.record_accumulator import RecordAccumulator
from pykbroker.clients.producer.sender import Sender
from pykbroker.clients.producer.transactions import IllegalStateError, TransactionalClient
from pykbroker.protocol import errors
from pykbroker.record.default_record import size_in_bytes
from pykbroker.record.default_record_batch import RECORD_BATCH_OVERHEAD
from pykbroker.utils.time import SYSTEM, Time

_client_ids = iter(range(1, 1 << 30))


def _serializer(fn):
    if fn is None:
        return None
    if callable(fn):
        return fn
    raise TypeError(f"serializer must be callable, not {fn!r}")


class KafkaProducer:
    def __init__(self, configs: dict | None = None, time: Time = SYSTEM, **kwargs):
        configs = dict(configs or {})
        configs.update({k.replace("_", "."): v for k, v in kwargs.items()})
        self.config = ProducerConfig(configs)
        self.client_id = self.config["client.id"] or f"producer-{next(_client_ids)}"
        self._key_serializer = _serializer(self.config["key.serializer"])
        self._value_serializer = _serializer(self.config["value.serializer"])
        self._max_block_s = self.config["max.block.ms"] / 1000.0
        self._max_request_size = self.config["max.request.size"]
        # up to this many key + value bytes (+16) a record without headers fits max.request.size surely
        self._max_plain_size = self._max_request_size - RECORD_BATCH_OVERHEAD - 64
        self._ignore_keys = self.config["partitioner.ignore.keys"]
        self._time = time
        self.metadata = ClusterMetadata(self.config["bootstrap.servers"], self.config["metadata.max.age.ms"], time)
        self.accumulator = RecordAccumulator(
            self.config["batch.size"],
            self.config["buffer.memory"],
            self.config["compression.type"],
            self.config["linger.ms"],
            self.config["retry.backoff.ms"],
            self.config["delivery.timeout.ms"],
            self.config.idempotent,
            time,
        )
        self.partitioner = BuiltInPartitioner(self.config["batch.size"])
        self._sticky = self.partitioner.sticky_state
        self._sticky_batch_size = self.partitioner.batch_size
        self._linger_s = self.config["linger.ms"] / 1000.0
        self.sender = Sender(self.config, self.metadata, self.accumulator, self.client_id, time)
        self._transactions: TransactionalClient | None = None
        if self.config["transactional.id"] is not None:
            self._transactions = TransactionalClient(self.config, self.metadata, self.sender.txn, self.client_id)
        self.sender.start()
        self._closed = False

    # -- sending -------------------------------------------------------------------------------------
    def send(
        self,
        topic: str,
        value=None,
        key=None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers=None,
        callback=None,
    ) -> FutureRecordMetadata:
        """Queue one record; returns its future at once. ``headers``: sequence of ``(str, bytes | None)``."""
        if self._closed:
            raise RuntimeError("Cannot perform operation after producer has been closed")
        sender = self.sender
        if sender.fatal_error is not None:
            raise sender.fatal_error
        if key is not None and self._key_serializer is not None:
            key = self._key_serializer(topic, key)
        if value is not None and self._value_serializer is not None:
            value = self._value_serializer(topic, value)
        metadata = self.metadata
        num_partitions = metadata.num_partitions.get(topic)
        if not num_partitions:
            num_partitions = metadata.await_topic(topic, self._max_block_s, sender.wakeup)
        size = (len(key) if key is not None else 0) + (len(value) if value is not None else 0) + 16
        if headers or size > self._max_plain_size:
            size = RECORD_BATCH_OVERHEAD + size_in_bytes(0, 0, key, value, headers)
            if size > self._max_request_size:
                raise errors.RecordTooLargeError(
                    f"The message is {size} bytes when serialized which is larger than {self._max_request_size}, "
                    "which is the value of the max.request.size configuration."
                )
        sticky = None
        if partition is None:
            if key is not None and not self._ignore_keys:
                partition = partition_for_key(key, num_partitions)
            else:
                sticky = self._sticky.get(topic)  # [partition, bytes produced to it]
                if sticky is None or sticky[0] >= num_partitions:
                    self.partitioner.partition(topic, metadata.available.get(topic, []), num_partitions)
                    sticky = self._sticky[topic]
                partition = sticky[0]
        elif not 0 <= partition < num_partitions:
            raise errors.UnknownTopicOrPartitionError(
                f"Partition {partition} of topic {topic} with partition count {num_partitions} is not present in "
                "metadata."
            )
        if self._transactions is not None:
            self._transactions.maybe_add_partition((topic, partition))
        if timestamp_ms is None:
            timestamp_ms = self._time.milliseconds()
        future, full, new_batch = self.accumulator.append(
            topic, partition, timestamp_ms, key, value, headers, callback, self._max_block_s
        )
        if sticky is not None:
            sticky[1] += size
            if sticky[1] >= self._sticky_batch_size:  # switch partitions (BuiltInPartitioner.updatePartitionInfo)
                self.partitioner.update_partition_info(topic, 0, metadata.available.get(topic, []), num_partitions)
        if full or new_batch:
            # Wake the Sender only when it would otherwise sleep past the moment the batch becomes
            # sendable: now for a full batch, linger.ms from now for a new one (the Sender never
            # sleeps longer than linger.ms while batches linger). A wakeup is a syscall and a GIL handoff.
            sleep = sender.sleep_timeout
            if sleep > 0.002 and (full or sleep > self._linger_s):
                sender.wakeup()
        return future

    def flush(self, timeout: float | None = None) -> None:
        """Make every buffered record sendable now and wait until all complete (Kafka's flush).
        Raises TimeoutError if ``timeout`` seconds pass first."""
        self.accumulator.begin_flush()
        self.sender.wakeup()
        if not self.accumulator.await_flush_completion(timeout):
            raise TimeoutError(f"Flush did not complete within {timeout} s")

    # -- transactions (KIP-98; see pykbroker.clients.producer.transactions) ---------------------------
    def _txn(self) -> TransactionalClient:
        if self._transactions is None:
            raise IllegalStateError("Cannot use transactional methods without enabling transactions by setting the "
                                    "transactional.id configuration property")  # fmt: skip
        return self._transactions

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register the ``transactional.id`` with its coordinator: fences older producers with the same id
        and completes (commits or aborts) their unfinished transaction. Raises ProducerFencedError,
        TimeoutError (``max.block.ms`` or ``timeout`` seconds)."""
        self._txn().init_transactions(timeout)

    def begin_transaction(self) -> None:
        self._txn().begin_transaction()

    def send_offsets_to_transaction(self, offsets: dict, group, timeout: float | None = None) -> None:
        """Commit consumer ``offsets`` (``{(topic, partition): next offset}``) as part of the transaction;
        ``group``: the group id or the consumer's group metadata."""
        self._txn().send_offsets_to_transaction(offsets, group, timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush, then commit. Raises TransactionAbortableError if a record failed (then abort)."""
        self._txn().end_transaction(True, self._flush_for_transaction, timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Flush what was sent, then abort: read_committed consumers never see the transaction's records."""
        self._txn().end_transaction(False, self._flush_for_transaction, timeout)

    def _flush_for_transaction(self, timeout: float) -> None:
        self.flush(timeout)

    def partitions_for(self, topic: str) -> list[int]:
        n = self.metadata.await_topic(topic, self._max_block_s, self.sender.wakeup)
        return list(range(n))

    def close(self, timeout: float | None = None) -> None:
        """Send what is buffered and stop (waits up to ``timeout`` seconds, then drops the rest)."""
        if self._closed:
            return
        self._closed = True
        if self._transactions is not None:
            self._transactions.close()
        self.sender.initiate_close()
        self.sender.join(timeout)
        if self.sender.is_alive():
            self.sender.force_close = True
            self.sender.wakeup()
            self.sender.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
