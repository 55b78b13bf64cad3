"""Idempotent-producer state: producer id and epoch, per-partition sequence numbers, in-flight batches.

Mirrors the idempotence half of ``org.apache.kafka.clients.producer.internals.TransactionManager``
(the transactional half, driven from the application thread, is
:class:`~pykbroker.clients.producer.transactions.TransactionalClient`): the producer id/epoch come from
InitProducerId (the Sender's, or ``init_transactions`` for a transactional id); each drained batch takes the
partition's next sequence (``base_sequence``, advanced by the record count, wrapping at 2^31); the
base sequences of batches in flight are tracked per partition so a retried batch is only re-sent
once nothing earlier is in flight (ordering with up to 5 in-flight requests per connection).

Threading: used by the Sender thread only.
"""

from __future__ import annotations

from pykbroker.clients.producer.producer_batch import ProducerBatch

_SEQ_MOD = 2**31


class TransactionManager:
    def __init__(self, transactional_id: str | None = None):
        self.transactional_id = transactional_id
        self.is_transactional = transactional_id is not None
        self.producer_id = -1
        self.producer_epoch = -1
        self.next_sequence: dict[tuple[str, int], int] = {}
        self.in_flight: dict[tuple[str, int], set[int]] = {}
        #: the first error of a batch in the current transaction (the transaction can only be aborted)
        self.abortable_error: BaseException | None = None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    def set_producer_id_and_epoch(self, producer_id: int, epoch: int) -> None:
        self.producer_id, self.producer_epoch = producer_id, epoch
        self.next_sequence.clear()

    def assign_sequence(self, batch: ProducerBatch) -> None:
        tp = batch.tp
        seq = self.next_sequence.get(tp, 0)
        batch.base_sequence = seq
        self.next_sequence[tp] = (seq + batch.record_count) % _SEQ_MOD
        batch.set_producer_state(self.producer_id, self.producer_epoch, seq, self.is_transactional)

    def add_in_flight(self, batch: ProducerBatch) -> None:
        self.in_flight.setdefault(batch.tp, set()).add(batch.base_sequence)

    def remove_in_flight(self, batch: ProducerBatch) -> None:
        seqs = self.in_flight.get(batch.tp)
        if seqs is not None:
            seqs.discard(batch.base_sequence)
            if not seqs:
                del self.in_flight[batch.tp]
