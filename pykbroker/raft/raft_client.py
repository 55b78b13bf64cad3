"""What users of the Raft client see: committed batches, leader changes, the listener and serde seams.

Mirrors ``org.apache.kafka.raft.{RaftClient.Listener, Batch, LeaderAndEpoch}`` and
``org.apache.kafka.server.common.serialization.RecordSerde``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, NamedTuple, Protocol, TypeVar

from pykbroker.raft.quorum_state_store import NO_ID

if TYPE_CHECKING:
    from pykbroker.raft.records_snapshot import RecordsSnapshotReader

T = TypeVar("T")


class RaftInvariantError(RuntimeError):
    """A Raft safety rule would be broken (Kafka throws IllegalStateException): e.g. truncating
    committed records."""


class LeaderAndEpoch(NamedTuple):
    """The known leader (``-1`` when unknown) of ``epoch``."""

    leader_id: int
    epoch: int

    def is_leader(self, node_id: int) -> bool:
        return self.leader_id != NO_ID and self.leader_id == node_id


UNKNOWN_LEADER = LeaderAndEpoch(NO_ID, 0)


@dataclass(frozen=True)
class Batch(Generic[T]):
    """A committed batch: offsets ``base_offset..last_offset`` written by the leader of ``epoch``.
    ``records`` are the decoded data records (empty for control batches, whose raw ``(type, value)``
    pairs are in ``control_records``). ``append_time_ms`` is wall-clock ms; ``size_in_bytes`` the
    serialised size of the values."""

    base_offset: int
    epoch: int
    last_offset: int
    records: list[T] = field(default_factory=list)
    control_records: list[tuple[int, bytes]] = field(default_factory=list)
    append_time_ms: int = -1
    size_in_bytes: int = 0

    @property
    def is_control(self) -> bool:
        return bool(self.control_records)


class RecordSerde(Protocol[T]):
    """Turns records of type ``T`` into record values and back (no framing)."""

    def write(self, record: T) -> bytes: ...

    def read(self, value: bytes) -> T: ...


class RaftClientListener(Generic[T]):
    """Callbacks from the Raft IO thread, in log order. Implementations must be quick (hand work to
    their own thread if needed) and must not call back into the client synchronously except for the
    thread-safe append methods.

    - ``handle_commit(batch)``: every committed batch exactly once per registration, from offset 0 on
      registration (that is how a restarting node replays the metadata log), control batches included -
      or, when the log has a snapshot, from the snapshot's end offset after ``handle_load_snapshot``.
    - ``handle_load_snapshot(reader)``: replace the state with the snapshot's (Kafka's
      ``handleLoadSnapshot``): the first thing a new registration gets when there is a snapshot, and what
      a listener gets when the log moved past its position (a follower installed the leader's snapshot).
      The batches that follow start at ``reader.snapshot_id.end_offset``. The reader holds the bytes in
      memory and may be kept and iterated on another thread.
    - ``handle_leader_change(leader_and_epoch)``: a new leader or epoch. When the local node becomes
      leader this fires only after the listener has seen every batch below the epoch start offset.
    - ``begin_shutdown()``: the client is closing.
    """

    def handle_commit(self, batch: Batch[T]) -> None:
        raise NotImplementedError

    def handle_load_snapshot(self, reader: RecordsSnapshotReader[T]) -> None:  # optional
        pass

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        pass

    def begin_shutdown(self) -> None:
        pass
