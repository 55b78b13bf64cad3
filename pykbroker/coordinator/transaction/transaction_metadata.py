"""Transaction state of one transactional id: the state machine and its pending transitions.

Mirrors ``kafka.coordinator.transaction.TransactionMetadata`` / ``TransactionState`` / ``TxnTransitMetadata``.
Each transition carries the client's transaction version (``client_transaction_version``, Kafka's
``ClientTransactionVersion``): at 0/1 the producer epoch is bumped by InitProducerId and by fencing only; at 2
(KIP-890 part 2) PrepareCommit/PrepareAbort also bump it (the markers carry the bumped epoch, so a late write of
the finished transaction is fenced), and when that bump reaches ``Short.MaxValue`` the transaction's
``next_producer_id`` (allocated by the coordinator) replaces the producer id at epoch 0 once the markers are
written (Complete*). Every change is two steps: ``prepare_*`` validates against :data:`VALID_PREVIOUS_STATES` and sets
``pending_state`` (so concurrent requests get CONCURRENT_TRANSACTIONS), the new state is appended to
``__transaction_state``, and :meth:`TransactionMetadata.complete_transition_to` applies it once the append
succeeded (:meth:`TransactionMetadata.abort_transition` drops it on failure).

Threading: not thread-safe; callers hold ``metadata.lock`` (a re-entrant lock), as Kafka's ``inLock``.
"""

from __future__ import annotations

import enum
import threading
from typing import NamedTuple

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 32767
#: the first transaction version whose transactions bump the epoch at every commit/abort (Kafka's TV_2)
TV_2 = 2


def supports_epoch_bump(transaction_version: int) -> bool:
    """Kafka's ``TransactionVersion.supportsEpochBump``: transaction version 2 or more (KIP-890 part 2)."""
    return transaction_version >= TV_2


class TransactionState(enum.IntEnum):
    """Kafka's transaction states with their ids (the ``TransactionStatus`` byte in the log)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        """Kafka's name (``"Ongoing"``), as DescribeTransactions / ListTransactions report it."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)

    @property
    def is_expiration_allowed(self) -> bool:
        return self in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)


_S = TransactionState
_NAMES = {
    _S.EMPTY: "Empty",
    _S.ONGOING: "Ongoing",
    _S.PREPARE_COMMIT: "PrepareCommit",
    _S.PREPARE_ABORT: "PrepareAbort",
    _S.COMPLETE_COMMIT: "CompleteCommit",
    _S.COMPLETE_ABORT: "CompleteAbort",
    _S.DEAD: "Dead",
    _S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {v: k for k, v in _NAMES.items()}

#: The transition table: target state -> the states it may be entered from (Kafka's validPreviousStates).
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


def is_epoch_exhausted(producer_epoch: int) -> bool:
    return producer_epoch >= SHORT_MAX - 1


class TxnTransitMetadata(NamedTuple):
    """The state a transition leads to, as written to the log."""

    producer_id: int
    prev_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[tuple[str, int]]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    #: the producer id that replaces ``producer_id`` when a version-2 transaction exhausted the epoch (-1: none)
    next_producer_id: int = NO_PRODUCER_ID
    #: the transaction version the client used (0, 1 or 2)
    client_transaction_version: int = 0


class IllegalTransitionError(RuntimeError):
    """A transition the state machine does not allow (a coordinator bug, never a client's doing)."""


class TransactionMetadata:
    """State of one transactional id (all timestamps in ms)."""

    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        previous_producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        last_producer_epoch: int = NO_PRODUCER_EPOCH,
        txn_timeout_ms: int = 60000,
        state: TransactionState = TransactionState.EMPTY,
        topic_partitions: set[tuple[str, int]] | None = None,
        txn_start_timestamp: int = -1,
        txn_last_update_timestamp: int = -1,
        next_producer_id: int = NO_PRODUCER_ID,
        client_transaction_version: int = 0,
    ):
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.previous_producer_id = previous_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.topic_partitions: set[tuple[str, int]] = set(topic_partitions or ())
        self.txn_start_timestamp = txn_start_timestamp
        self.txn_last_update_timestamp = txn_last_update_timestamp
        self.next_producer_id = next_producer_id
        self.client_transaction_version = client_transaction_version
        self.pending_state: TransactionState | None = None
        self.has_failed_epoch_fence = False
        self.lock = threading.RLock()

    # -- queries ------------------------------------------------------------------------------
    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def remove_partition(self, tp: tuple[str, int]) -> None:
        """A marker for ``tp`` was written (PrepareCommit/PrepareAbort only)."""
        if self.state not in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            raise IllegalTransitionError(
                f"Transaction metadata's current state is {self.state.state_name} while trying to remove partitions "
                "whose txn marker has been sent"
            )
        self.topic_partitions.discard(tp)

    # -- prepare ------------------------------------------------------------------------------
    def prepare_no_transit(self) -> TxnTransitMetadata:
        return self._transit(
            self.state,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            self.topic_partitions,
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Ongoing -> PrepareEpochFence with the epoch bumped (a zombie's transaction is then aborted)."""
        if self.producer_epoch == SHORT_MAX:
            raise IllegalTransitionError("Cannot fence producer with epoch equal to Short.MaxValue")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(
            _S.PREPARE_EPOCH_FENCE,
            self.producer_id,
            bumped,
            NO_PRODUCER_EPOCH,
            self.txn_timeout_ms,
            self.topic_partitions,
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )

    def prepare_increment_producer_epoch(
        self, new_timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransitMetadata | int:
        """InitProducerId on an idle id: the epoch + 1 (KIP-360: a retry with the previous epoch gets the
        current one again). Returns the transit or the error code PRODUCER_FENCED."""
        from pykbroker.protocol import errors

        if self.is_producer_epoch_exhausted:
            raise IllegalTransitionError(f"Cannot allocate any more producer epochs for producerId {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epochs = (bumped, NO_PRODUCER_EPOCH)
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epochs = (bumped, self.producer_epoch)
        elif expected_epoch == self.last_producer_epoch:
            epochs = (self.producer_epoch, self.last_producer_epoch)
        else:
            return errors.PRODUCER_FENCED
        return self._prepare(_S.EMPTY, self.producer_id, epochs[0], epochs[1], new_timeout_ms, (), -1, now_ms)

    def prepare_producer_id_rotation(
        self, new_producer_id: int, new_timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransitMetadata:
        """The epoch is exhausted: a new producer id at epoch 0."""
        if self.state in (_S.ONGOING, _S.PREPARE_ABORT, _S.PREPARE_COMMIT):
            raise IllegalTransitionError("Cannot rotate producer ids while a transaction is still pending")
        last = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(_S.EMPTY, new_producer_id, 0, last, new_timeout_ms, (), -1, now_ms)

    def prepare_add_partitions(
        self, added: set[tuple[str, int]], now_ms: int, client_transaction_version: int | None = None
    ) -> TxnTransitMetadata:
        """``client_transaction_version``: the version of the request that adds (None: unchanged)."""
        start = now_ms if self.state in (_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT) else self.txn_start_timestamp
        tv = self.client_transaction_version if client_transaction_version is None else client_transaction_version
        return self._prepare(
            _S.ONGOING,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            self.topic_partitions | set(added),
            start,
            now_ms,
            client_transaction_version=tv,
        )

    def prepare_abort_or_commit(
        self,
        new_state: TransactionState,
        now_ms: int,
        client_transaction_version: int | None = None,
        next_producer_id: int = NO_PRODUCER_ID,
    ) -> TxnTransitMetadata:
        """Ongoing -> PrepareCommit/PrepareAbort. At transaction version 2 the epoch is bumped (the previous one
        becomes ``last_producer_epoch``); ``next_producer_id``: the producer id allocated because the bumped
        epoch is the last one (Kafka's ``prepareAbortOrCommit``)."""
        tv = self.client_transaction_version if client_transaction_version is None else client_transaction_version
        if supports_epoch_bump(tv):  # the coordinator allocated next_producer_id before the last epoch
            epoch, last_epoch = min(self.producer_epoch + 1, SHORT_MAX), self.producer_epoch
        else:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        return self._prepare(
            new_state,
            self.producer_id,
            epoch,
            last_epoch,
            self.txn_timeout_ms,
            self.topic_partitions,
            self.txn_start_timestamp,
            now_ms,
            next_producer_id=next_producer_id,
            client_transaction_version=tv,
        )

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """PrepareCommit/PrepareAbort -> Complete* (the markers are written). A version-2 transaction that
        exhausted the epoch moves to its ``next_producer_id`` at epoch 0 here."""
        new_state = _S.COMPLETE_COMMIT if self.state is _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        if supports_epoch_bump(self.client_transaction_version) and self.next_producer_id != NO_PRODUCER_ID:
            producer_id, epoch = self.next_producer_id, 0
        else:
            producer_id, epoch = self.producer_id, self.producer_epoch
        return self._prepare(
            new_state,
            producer_id,
            epoch,
            self.producer_epoch,
            self.txn_timeout_ms,
            (),
            self.txn_start_timestamp,
            now_ms,
            next_producer_id=NO_PRODUCER_ID,
        )

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare(
            _S.DEAD,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            (),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )

    def _transit(
        self, state, producer_id, epoch, last_epoch, timeout_ms, tps, start, update, **extra
    ) -> TxnTransitMetadata:
        return TxnTransitMetadata(
            producer_id,
            self.producer_id,
            epoch,
            last_epoch,
            timeout_ms,
            state,
            frozenset(tps),
            start,
            update,
            extra.get("next_producer_id", self.next_producer_id),
            extra.get("client_transaction_version", self.client_transaction_version),
        )

    def _prepare(
        self, state, producer_id, epoch, last_epoch, timeout_ms, tps, start, update, **extra
    ) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransitionError(
                f"Preparing transaction state transition to {state.state_name} while it already has a pending state "
                f"{self.pending_state.state_name}"
            )
        if producer_id < 0:
            raise IllegalTransitionError(f"Illegal new producer id {producer_id}")
        if state is not _S.DEAD and epoch < 0:
            raise IllegalTransitionError(f"Illegal new producer epoch {epoch}")
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransitionError(
                f"Preparing transaction state transition to {state.state_name} failed since the target state is not "
                f"a valid next state of the current state {self.state.state_name}"
            )
        self.pending_state = state
        return self._transit(state, producer_id, epoch, last_epoch, timeout_ms, tps, start, update, **extra)

    # -- complete -----------------------------------------------------------------------------
    def abort_transition(self) -> None:
        """The append of the pending transition failed: forget it."""
        self.pending_state = None

    def complete_transition_to(self, t: TxnTransitMetadata) -> None:
        """Apply ``t`` after its record was appended (Kafka's completeTransitionTo and its checks)."""
        to = self.pending_state
        if to is None or to is not t.txn_state:
            raise IllegalTransitionError(
                f"TransactionalId {self.transactional_id} completing transition to {t.txn_state.state_name} while "
                f"its pending state is {to.state_name if to is not None else None}"
            )
        valid_epoch = self._valid_producer_epoch(t)
        v2 = supports_epoch_bump(t.client_transaction_version)
        if to is _S.EMPTY:
            if t.topic_partitions or t.txn_start_timestamp != -1:
                self._failure(t)
            self.txn_timeout_ms = t.txn_timeout_ms
            self.producer_epoch = t.producer_epoch
            self.last_producer_epoch = t.last_producer_epoch
            self.producer_id = t.producer_id
            self.previous_producer_id = t.prev_producer_id
        elif to is _S.ONGOING:
            if not valid_epoch or not self.topic_partitions <= t.topic_partitions:
                self._failure(t)
            self.txn_start_timestamp = t.txn_start_timestamp
            self.topic_partitions |= t.topic_partitions
        elif to in (_S.PREPARE_ABORT, _S.PREPARE_COMMIT):
            if not valid_epoch or self.topic_partitions != set(t.topic_partitions):
                self._failure(t)
            if v2:
                self.producer_epoch = t.producer_epoch
                self.last_producer_epoch = t.last_producer_epoch
                self.next_producer_id = t.next_producer_id
        elif to in (_S.COMPLETE_ABORT, _S.COMPLETE_COMMIT):
            if not valid_epoch or t.txn_start_timestamp == -1:
                self._failure(t)
            self.txn_start_timestamp = t.txn_start_timestamp
            self.topic_partitions.clear()
            if v2:
                self.producer_epoch = t.producer_epoch
                self.last_producer_epoch = t.last_producer_epoch
                self.previous_producer_id = t.prev_producer_id
                self.producer_id = t.producer_id
                self.next_producer_id = t.next_producer_id
        elif to is _S.DEAD:
            pass  # the caller removes the metadata from the cache
        else:  # PrepareEpochFence is never persisted: the abort that follows is
            self._failure(t)
        self.client_transaction_version = t.client_transaction_version
        self.txn_last_update_timestamp = t.txn_last_update_timestamp
        self.pending_state = None
        self.state = to

    def _valid_producer_epoch(self, t: TxnTransitMetadata) -> bool:
        """Whether ``t`` continues this producer id and epoch (Kafka's ``validProducerEpoch``): a version-2
        Prepare* carries the bumped epoch (its ``last_producer_epoch`` is the current one), a version-2
        Complete* at epoch 0 the next producer id (its ``prev_producer_id`` is the current one)."""
        v2 = supports_epoch_bump(t.client_transaction_version)
        completing = t.txn_state in (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)
        overflow_complete = v2 and completing and t.producer_epoch == 0 and t.producer_id != self.producer_id
        if overflow_complete or (v2 and t.txn_state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT)):
            epoch = t.last_producer_epoch
        else:
            epoch = t.producer_epoch
        producer_id = t.prev_producer_id if overflow_complete else t.producer_id
        return epoch == self.producer_epoch and producer_id == self.producer_id

    def _failure(self, t: TxnTransitMetadata) -> None:
        self.pending_state = None
        raise IllegalTransitionError(
            f"TransactionalId {self.transactional_id} failed transition to state {t} due to unexpected metadata"
        )

    def __repr__(self) -> str:
        return (
            f"TransactionMetadata(transactionalId={self.transactional_id}, producerId={self.producer_id}, "
            f"producerEpoch={self.producer_epoch}, txnTimeoutMs={self.txn_timeout_ms}, state={self.state.state_name}, "
            f"pendingState={self.pending_state.state_name if self.pending_state else None}, "
            f"topicPartitions={sorted(self.topic_partitions)})"
        )
