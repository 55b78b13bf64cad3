"""The Persister: where share partitions keep their durable state (KIP-932).

Mirrors Kafka's ``org.apache.kafka.server.share.persister.Persister``. A share partition (on the partition leader)
reads its state once when it is first used (``read_state``), writes every change of its start offset or of its
in-flight batches' states (``write_state``), and the group coordinator initializes and deletes a group's state
(``initialize_state`` / ``delete_state``). ``read_summary`` answers the admin's offsets question without the batches.

Every call returns a :class:`concurrent.futures.Future` completed from another thread (the implementation's own):
callers on request-handler threads must not block on it while holding their locks; they chain
``add_done_callback``. Results carry a Kafka error code (0 = NONE); a future only fails with an exception for a
programming error. Error codes as Kafka's share coordinator answers them: COORDINATOR_NOT_AVAILABLE /
NOT_COORDINATOR (retriable, the implementation retries them itself within its timeout), FENCED_STATE_EPOCH (a newer
state epoch was written), FENCED_LEADER_EPOCH (a write from an older partition leader), UNKNOWN_TOPIC_OR_PARTITION
(no state for that share partition, or deleted), INVALID_REQUEST.

Implementations: :class:`InMemoryPersister` (state lives in this process; tests and the single-process fallback);
the default persister sends the share coordinator's RPCs (InitializeShareGroupState 83, ReadShareGroupState 84,
WriteShareGroupState 85, DeleteShareGroupState 86, ReadShareGroupStateSummary 87).
"""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import Future
from typing import TYPE_CHECKING, NamedTuple, Protocol

# The error codes the persister answers with (re-exported for its callers).
from pykbroker.protocol.errors import FENCED_LEADER_EPOCH as FENCED_LEADER_EPOCH
from pykbroker.protocol.errors import FENCED_STATE_EPOCH as FENCED_STATE_EPOCH
from pykbroker.protocol.errors import NONE as NONE
from pykbroker.protocol.errors import UNKNOWN_TOPIC_OR_PARTITION as UNKNOWN_TOPIC_OR_PARTITION

# Delivery states of a persisted state batch (Kafka's RecordState ids as written to __share_group_state).
AVAILABLE = 0
ACQUIRED = 1
ACKNOWLEDGED = 2
ARCHIVED = 4


class PersisterStateBatch(NamedTuple):
    """One range of offsets in the same delivery state (Kafka's PersisterStateBatch).

    ``first_offset``..``last_offset`` inclusive; ``delivery_state`` one of AVAILABLE / ACKNOWLEDGED / ARCHIVED
    (ACQUIRED is written as AVAILABLE: acquisition locks do not survive a leader change); ``delivery_count`` how many
    times the records were handed out (int16)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


class ReadStateResult(NamedTuple):
    """The answer of ``read_state``: ``start_offset`` -1 when the state was initialized without one."""

    error_code: int
    state_epoch: int
    start_offset: int
    state_batches: tuple[PersisterStateBatch, ...] = ()
    error_message: str | None = None


class ReadSummaryResult(NamedTuple):
    """The answer of ``read_summary`` (no batches): ``leader_epoch`` the last partition leader's (-1 unknown),
    ``delivery_complete_count`` the offsets at or above the start offset whose delivery is complete (acknowledged
    or archived; KIP-1226, -1 when unknown: never written by a Kafka 4.2 writer, or no start offset yet)."""

    error_code: int
    state_epoch: int
    start_offset: int
    error_message: str | None = None
    leader_epoch: int = -1
    delivery_complete_count: int = -1


class Persister(Protocol):
    """Durable state of share partitions, keyed by (group id, topic id, partition)."""

    def initialize_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, start_offset: int
    ) -> Future[int]:
        """Create (or reset, for a larger ``state_epoch``) the state; start offset -1 = let the share partition
        choose (``share.auto.offset.reset``). Future of an error code."""
        ...

    def read_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> Future[ReadStateResult]:
        """Read the state; UNKNOWN_TOPIC_OR_PARTITION when never initialized (the caller initializes it)."""
        ...

    def write_state(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        state_batches: tuple[PersisterStateBatch, ...],
        delivery_complete_count: int = -1,
    ) -> Future[int]:
        """Record a new start offset (-1 = unchanged) and the batches that changed (they replace the same offsets of
        the stored state; batches below the start offset are dropped), and the delivery complete count (KIP-1226,
        -1 unknown). Future of an error code."""
        ...

    def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> Future[int]:
        """Forget the state (DeleteShareGroupState). Future of an error code."""
        ...

    def read_summary(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> Future[ReadSummaryResult]:
        """The state epoch, start offset, leader epoch and delivery complete count (ReadShareGroupStateSummary)."""
        ...

    def stop(self) -> None:
        """Release threads and connections; later calls fail their futures."""
        ...


def merge_batches(
    stored: tuple[PersisterStateBatch, ...], updates: tuple[PersisterStateBatch, ...], start_offset: int
) -> tuple[PersisterStateBatch, ...]:
    """The stored batches with ``updates`` laid over them (an update wins over the offsets it covers), batches below
    ``start_offset`` dropped and cut at it; sorted by first offset, adjacent equal batches joined. Mirrors what
    Kafka's share coordinator does when it folds a ShareUpdate into its ShareSnapshot."""
    points: list[PersisterStateBatch] = []
    for b in stored:
        pieces = [b]
        for u in updates:
            nxt = []
            for p in pieces:
                if u.last_offset < p.first_offset or u.first_offset > p.last_offset:
                    nxt.append(p)
                    continue
                if p.first_offset < u.first_offset:
                    nxt.append(p._replace(last_offset=u.first_offset - 1))
                if p.last_offset > u.last_offset:
                    nxt.append(p._replace(first_offset=u.last_offset + 1))
            pieces = nxt
        points.extend(pieces)
    points.extend(updates)
    out: list[PersisterStateBatch] = []
    for b in sorted(points):
        if b.last_offset < start_offset:
            continue
        if b.first_offset < start_offset:
            b = b._replace(first_offset=start_offset)
        if (
            out
            and out[-1].last_offset + 1 == b.first_offset
            and out[-1].delivery_state == b.delivery_state
            and out[-1].delivery_count == b.delivery_count
        ):
            out[-1] = out[-1]._replace(last_offset=b.last_offset)
        else:
            out.append(b)
    return tuple(out)


def _done(value: object) -> Future:
    f: Future = Future()
    f.set_result(value)
    return f


class _State:
    __slots__ = ("state_epoch", "leader_epoch", "start_offset", "batches", "delivery_complete_count")

    def __init__(self, state_epoch: int, start_offset: int) -> None:
        self.state_epoch = state_epoch
        self.leader_epoch = -1
        self.start_offset = start_offset
        self.delivery_complete_count = -1 if start_offset < 0 else 0
        self.batches: tuple[PersisterStateBatch, ...] = ()


class InMemoryPersister:
    """A :class:`Persister` keeping state in this process's memory (lost on restart).

    Threading: any thread; one lock guards the table and futures are completed before the call returns.
    Fencing as the share coordinator: a write with a smaller state epoch gets FENCED_STATE_EPOCH, one with a smaller
    leader epoch than the last write FENCED_LEADER_EPOCH."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._states: dict[tuple[str, uuid.UUID, int], _State] = {}

    def initialize_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, start_offset: int
    ) -> Future[int]:
        key = (group_id, topic_id, partition)
        with self._lock:
            cur = self._states.get(key)
            if cur is not None and state_epoch < cur.state_epoch:
                return _done(FENCED_STATE_EPOCH)
            self._states[key] = _State(state_epoch, start_offset)
        return _done(NONE)

    def read_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> Future[ReadStateResult]:
        with self._lock:
            cur = self._states.get((group_id, topic_id, partition))
            if cur is None:
                return _done(ReadStateResult(UNKNOWN_TOPIC_OR_PARTITION, -1, -1))
            if leader_epoch < cur.leader_epoch:
                return _done(ReadStateResult(FENCED_LEADER_EPOCH, -1, -1))
            cur.leader_epoch = max(cur.leader_epoch, leader_epoch)
            return _done(ReadStateResult(NONE, cur.state_epoch, cur.start_offset, cur.batches))

    def write_state(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        state_batches: tuple[PersisterStateBatch, ...],
        delivery_complete_count: int = -1,
    ) -> Future[int]:
        key = (group_id, topic_id, partition)
        with self._lock:
            cur = self._states.get(key)
            if cur is None:
                cur = self._states[key] = _State(state_epoch, start_offset)
            if state_epoch < cur.state_epoch:
                return _done(FENCED_STATE_EPOCH)
            if leader_epoch < cur.leader_epoch:
                return _done(FENCED_LEADER_EPOCH)
            cur.state_epoch, cur.leader_epoch = state_epoch, leader_epoch
            if start_offset >= 0:
                cur.start_offset = start_offset
            cur.batches = merge_batches(cur.batches, tuple(state_batches), max(cur.start_offset, 0))
            cur.delivery_complete_count = delivery_complete_count
        return _done(NONE)

    def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> Future[int]:
        with self._lock:
            self._states.pop((group_id, topic_id, partition), None)
        return _done(NONE)

    def read_summary(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> Future[ReadSummaryResult]:
        with self._lock:
            cur = self._states.get((group_id, topic_id, partition))
            if cur is None:
                return _done(ReadSummaryResult(UNKNOWN_TOPIC_OR_PARTITION, -1, -1))
            return _done(
                ReadSummaryResult(
                    NONE, cur.state_epoch, cur.start_offset, None, cur.leader_epoch, cur.delivery_complete_count
                )
            )

    def stop(self) -> None:
        with self._lock:
            self._states.clear()


if TYPE_CHECKING:
    _conforms: Persister = InMemoryPersister()  # mypy checks that InMemoryPersister satisfies the protocol
