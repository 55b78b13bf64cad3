"""ListenerDelivery: committed batches, snapshots and leader changes to the Raft client's listeners.

Mirrors the ``ListenerContext`` handling of Kafka's ``KafkaRaftClient`` (``pollListeners``,
``updateListenersProgress``, ``maybeFireLeaderChange``). Each registered listener has a cursor. A new
listener, or one whose cursor fell below the log start offset, first gets the latest snapshot
(``handle_load_snapshot``). It then gets every committed batch below the high watermark, in order
(``handle_commit``, one decoded Batch shared by the listeners of one poll). Last comes
``handle_leader_change``. When this node leads, that is fired only once the listener has seen everything
below the epoch's start offset, so an active controller starts from the complete committed state. A
listener that raises is logged and does not stop the others or the IO thread.

Threading: ``register``/``unregister`` are thread-safe (applied at the next ``apply_registrations``);
everything else runs on the Raft IO thread.
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

from pykbroker.raft.control_records import parse_control_type
from pykbroker.raft.quorum_state_store import NO_ID
from pykbroker.raft.raft_client import Batch, LeaderAndEpoch, RaftClientListener, RecordSerde
from pykbroker.raft.records_snapshot import RecordsSnapshotReader
from pykbroker.raft.replicated_log import LogBatch, ReplicatedLog

T = TypeVar("T")

STARTING_NEXT_OFFSET = -1
"""A new listener's cursor (Kafka's ``ListenerContext.nextOffset`` is empty until the first delivery)."""


class ListenerInvariantError(RuntimeError):
    """A listener is below the log start offset and there is no snapshot to give it."""


class _ListenerContext:
    """Delivery cursor of one registered listener. IO thread only."""

    __slots__ = ("listener", "next_offset", "last_fired")

    def __init__(self, listener: RaftClientListener):
        self.listener = listener
        self.next_offset = STARTING_NEXT_OFFSET
        self.last_fired: LeaderAndEpoch | None = None


class ListenerDelivery(Generic[T]):
    def __init__(self, node_id: int, log: ReplicatedLog, serde: RecordSerde[T], logger):
        self.node_id = node_id
        self.log = log
        self.serde = serde
        self._log = logger
        self._reg_lock = threading.Lock()
        self._pending: list[tuple[bool, RaftClientListener]] = []  # (register?, listener); guarded by _reg_lock
        self._contexts: list[_ListenerContext] = []

    def register(self, listener: RaftClientListener[T]) -> None:
        with self._reg_lock:
            self._pending.append((True, listener))

    def unregister(self, listener: RaftClientListener[T]) -> None:
        with self._reg_lock:
            self._pending.append((False, listener))

    def apply_registrations(self) -> None:
        with self._reg_lock:
            pending, self._pending = self._pending, []
        for register, listener in pending:
            if register:
                self._contexts.append(_ListenerContext(listener))
            else:
                self._contexts = [c for c in self._contexts if c.listener is not listener]

    def poll(self, hw: int | None, current: LeaderAndEpoch, leader_epoch_start: int | None) -> None:
        """Deliver up to the high watermark ``hw``, then the leader change to ``current``.
        ``leader_epoch_start``: this node's epoch start offset when it leads, else None."""
        decoded: dict[int, Batch[T]] = {}
        for ctx in list(self._contexts):
            if hw is not None:
                self._maybe_load_snapshot(ctx, hw)
            if hw is not None and ctx.next_offset < hw:
                for log_batch in self.log.read(ctx.next_offset, hw):
                    batch = decoded.get(log_batch.base_offset)
                    if batch is None:
                        batch = decoded[log_batch.base_offset] = self._to_batch(log_batch)
                    self._call(ctx.listener.handle_commit, batch)
                    ctx.next_offset = log_batch.next_offset
            self._maybe_fire_leader_change(ctx, current, leader_epoch_start)

    def begin_shutdown(self) -> None:
        for ctx in self._contexts:
            self._call(lambda _, ctx=ctx: ctx.listener.begin_shutdown(), None)

    def _maybe_load_snapshot(self, ctx: _ListenerContext, hw: int) -> None:
        """Kafka's ``updateListenersProgress``: a new listener, or one below the log start offset, first
        gets the latest snapshot."""
        start = self.log.start_offset()
        if ctx.next_offset < hw and (ctx.next_offset == STARTING_NEXT_OFFSET or ctx.next_offset < start):
            raw = self.log.latest_snapshot()
            if raw is not None and raw.snapshot_id.end_offset > 0:  # not the bootstrap snapshot (KIP-853)
                ctx.next_offset = raw.snapshot_id.end_offset
                self._call(ctx.listener.handle_load_snapshot, RecordsSnapshotReader(raw, self.serde))
                return
        if ctx.next_offset == STARTING_NEXT_OFFSET:
            ctx.next_offset = 0
        elif ctx.next_offset < start:
            raise ListenerInvariantError(f"Listener at {ctx.next_offset} below the log start {start} and no snapshot")

    def _maybe_fire_leader_change(
        self, ctx: _ListenerContext, current: LeaderAndEpoch, leader_epoch_start: int | None
    ) -> None:
        if ctx.last_fired == current or (current.epoch == 0 and current.leader_id == NO_ID):
            return
        if current.is_leader(self.node_id) and leader_epoch_start is not None and ctx.next_offset < leader_epoch_start:
            return  # the listener must see everything before our epoch before it may act as leader
        ctx.last_fired = current
        self._call(ctx.listener.handle_leader_change, current)

    def _to_batch(self, log_batch: LogBatch) -> Batch[T]:
        size = sum(len(r.value or b"") for r in log_batch.records)
        if log_batch.control:
            control = [(parse_control_type(r.key), r.value or b"") for r in log_batch.records]
            return Batch(
                log_batch.base_offset,
                log_batch.epoch,
                log_batch.last_offset,
                [],
                control,
                log_batch.append_time_ms,
                size,
            )
        records = [self.serde.read(r.value or b"") for r in log_batch.records]
        return Batch(
            log_batch.base_offset, log_batch.epoch, log_batch.last_offset, records, [], log_batch.append_time_ms, size
        )

    def _call(self, fn, arg) -> None:
        try:
            fn(arg)
        except Exception:  # noqa: BLE001 - a listener must not stop the IO thread
            self._log.exception("Listener callback failed", callback=getattr(fn, "__qualname__", fn))
