"""Per-producer idempotence state and the checks an append makes against it.

Mirrors Kafka's ``BatchMetadata``, ``ProducerStateEntry``, ``ProducerAppendInfo`` and ``AppendOrigin``.
For each producer id the log remembers the producer epoch and the metadata of its last
``NUM_BATCHES_TO_RETAIN`` (5) batches. Rules for a client append of a batch with a producer id:

* an older epoch than the known one -> InvalidProducerEpochError (warning only for replication);
* a newer epoch must start at sequence 0 (unless the producer is unknown) else
  OutOfOrderSequenceError;
* the same epoch needs ``first_seq == last_seq + 1`` (``0`` after ``2**31 - 1``) else
  OutOfOrderSequenceError;
* a batch whose (epoch, first_seq, last_seq) equals one of the retained batches is a duplicate: it is
  not written and the original offsets are returned (checked before the rules above).
"""

from __future__ import annotations

import enum
from collections import deque
from typing import NamedTuple

from pykbroker.protocol.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from pykbroker.record.control_record import ControlRecordType, EndTransactionMarker
from pykbroker.record.default_record_batch import iter_batches
from pykbroker.record.file_records import BatchHeader

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT_MAX = 0x7FFFFFFF


class AppendOrigin(enum.Enum):
    """Who is appending: a producing client (full checks), a coordinator writing its own records
    (epoch checks only), or replication/recovery (no rejections)."""

    CLIENT = "CLIENT"
    COORDINATOR = "COORDINATOR"
    REPLICATION = "REPLICATION"


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement`` wrapping below 0 to ``INT_MAX`` (Kafka's sequence arithmetic)."""
    if sequence < decrement:
        return INT_MAX - (decrement - sequence) + 1
    return sequence - decrement


class BatchMetadata(NamedTuple):
    """A retained batch: last sequence, last offset, ``offset_delta`` (= last - first offset, which is
    also last - first sequence) and its max timestamp."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerStateEntry:
    """State of one producer id. Guarded by the owning log's lock."""

    __slots__ = (
        "batch_metadata",
        "coordinator_epoch",
        "current_txn_first_offset",
        "last_timestamp",
        "producer_epoch",
        "producer_id",
    )

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        coordinator_epoch: int = -1,
        last_timestamp: int = -1,
        current_txn_first_offset: int | None = None,
        batch_metadata: list[BatchMetadata] | None = None,
    ):
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self.batch_metadata: deque[BatchMetadata] = deque(batch_metadata or (), maxlen=NUM_BATCHES_TO_RETAIN)

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    def copy_without_batches(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
        )

    def add_batch(
        self, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> None:
        if producer_epoch != self.producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = producer_epoch
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update(self, other: ProducerStateEntry) -> None:
        """Merge the result of an append (``other`` holds only the new batches)."""
        if self.producer_epoch != other.producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = other.producer_epoch
        self.batch_metadata.extend(other.batch_metadata)
        self.coordinator_epoch = other.coordinator_epoch
        self.current_txn_first_offset = other.current_txn_first_offset
        self.last_timestamp = other.last_timestamp

    def find_duplicate_batch(self, batch: BatchHeader) -> BatchMetadata | None:
        """The retained batch with the same epoch and sequence range as ``batch``, if any."""
        if batch.producer_epoch != self.producer_epoch:
            return None
        first, last = batch.base_sequence, batch.last_sequence
        for meta in self.batch_metadata:
            if meta.first_seq == first and meta.last_seq == last:
                return meta
        return None

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(producer_id={self.producer_id}, producer_epoch={self.producer_epoch}, "
            f"batches={list(self.batch_metadata)}, txn_first_offset={self.current_txn_first_offset})"
        )


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker at ``last_offset`` (``is_aborted``: an ABORT marker)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool = False


def read_end_txn_marker(batch_bytes) -> EndTransactionMarker:
    """The COMMIT/ABORT marker of a control batch (its one record). Raises InvalidRecordError for a
    control batch that holds no end-transaction marker."""
    for _, batch in iter_batches(memoryview(batch_bytes)):
        for record in batch.records():
            return EndTransactionMarker.deserialize(record.key, record.value)
    raise InvalidRecordError("Control batch without a record")


class ProducerAppendInfo:
    """The effect of one append on one producer, validated before anything is written and applied
    with ``ProducerStateManager.update`` after the write succeeds."""

    def __init__(
        self,
        topic_partition: tuple[str, int],
        producer_id: int,
        current: ProducerStateEntry | None,
        origin: AppendOrigin,
    ):
        self.topic_partition = topic_partition
        self.producer_id = producer_id
        self.current = current if current is not None else ProducerStateEntry(producer_id)
        self.origin = origin
        self.updated = self.current.copy_without_batches()
        self.started_txn_first_offsets: list[int] = []
        self.completed_txns: list[CompletedTxn] = []

    def _where(self, offset: int) -> str:
        return (
            f"producer {self.producer_id} at offset {offset} in partition {self.topic_partition[0]}-"
            f"{self.topic_partition[1]}"
        )

    def _check_producer_epoch(self, producer_epoch: int, offset: int) -> None:
        if producer_epoch < self.updated.producer_epoch:
            message = (
                f"Epoch of {self._where(offset)} is {producer_epoch}, which is smaller than the last seen "
                f"epoch {self.updated.producer_epoch}"
            )
            if self.origin is not AppendOrigin.REPLICATION:
                raise InvalidProducerEpochError(message)

    def _check_sequence(self, producer_epoch: int, first_seq: int, offset: int) -> None:
        updated, current = self.updated, self.current
        if producer_epoch != updated.producer_epoch:
            if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of {self._where(offset)}: {producer_epoch} (request "
                    f"epoch), {first_seq} (seq. number), {updated.producer_epoch} (current producer epoch)"
                )
            return
        if not updated.is_empty:
            current_last_seq = updated.last_seq
        elif producer_epoch == current.producer_epoch:
            current_last_seq = current.last_seq
        else:
            current_last_seq = NO_SEQUENCE
        in_sequence = first_seq == current_last_seq + 1 or (first_seq == 0 and current_last_seq == INT_MAX)
        if not (current.producer_epoch == NO_PRODUCER_EPOCH or in_sequence):
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for {self._where(offset)}: {first_seq} (incoming seq. number), "
                f"{current_last_seq} (current end sequence number)"
            )

    def append(self, batch: BatchHeader, marker: EndTransactionMarker | None = None) -> None:
        """Validate ``batch`` (offsets assigned) and record it; ``marker``: the end-transaction marker
        of a control batch (None for other control batches). Raises InvalidProducerEpochError,
        OutOfOrderSequenceError or InvalidTxnStateError for client appends, and
        TransactionCoordinatorFencedError for a marker of an older coordinator epoch."""
        if batch.is_control_batch:
            if marker is not None:
                self._append_end_txn_marker(batch, marker)
            return
        epoch, first_offset = batch.producer_epoch, batch.base_offset
        self._check_producer_epoch(epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(epoch, batch.base_sequence, first_offset)
        last_offset = batch.last_offset
        self.updated.add_batch(epoch, batch.last_sequence, last_offset, last_offset - first_offset, batch.max_timestamp)
        txn_first = self.updated.current_txn_first_offset
        if txn_first is not None and not batch.is_transactional:
            if self.origin is not AppendOrigin.REPLICATION:
                raise InvalidTxnStateError(f"Expected transactional write from {self._where(first_offset)}")
        elif txn_first is None and batch.is_transactional:
            self.updated.current_txn_first_offset = first_offset
            self.started_txn_first_offsets.append(first_offset)

    def _append_end_txn_marker(self, batch: BatchHeader, marker: EndTransactionMarker) -> None:
        """A COMMIT/ABORT marker ends the producer's ongoing transaction (Kafka's appendEndTxnMarker)."""
        self._check_producer_epoch(batch.producer_epoch, batch.base_offset)
        if self.updated.coordinator_epoch > marker.coordinator_epoch and self.origin is not AppendOrigin.REPLICATION:
            raise TransactionCoordinatorFencedError(
                f"Invalid coordinator epoch for {self._where(batch.base_offset)}: {marker.coordinator_epoch} "
                f"(zombie), {self.updated.coordinator_epoch} (current)"
            )
        if batch.producer_epoch > self.updated.producer_epoch:
            self.updated.batch_metadata.clear()
            self.updated.producer_epoch = batch.producer_epoch
        txn_first = self.updated.current_txn_first_offset
        if txn_first is not None:
            self.completed_txns.append(
                CompletedTxn(
                    self.producer_id, txn_first, batch.last_offset, marker.control_type is ControlRecordType.ABORT
                )
            )
        self.updated.current_txn_first_offset = None
        self.updated.coordinator_epoch = marker.coordinator_epoch
        self.updated.last_timestamp = batch.max_timestamp
