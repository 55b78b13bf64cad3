"""The purgatory: operations that wait (without blocking a thread) for a condition or a timeout.

Mirrors ``kafka.server.DelayedOperation`` / ``DelayedOperationPurgatory`` (docs/ARCHITECTURE.md §6).

Theory of operation. A request handler that cannot answer yet (acks=all produce waiting for the high
watermark, fetch waiting for ``min_bytes``, a join waiting for members) builds a :class:`DelayedOperation`
and calls :meth:`DelayedOperationPurgatory.try_complete_else_watch` with the keys whose changes might let
it finish (usually ``TopicPartitionOperationKey``). The call never blocks: it completes the operation now
or parks it on each key's watcher list and in the timeout timer, and the handler thread moves on. Later,
whoever changes the state behind a key (an append, a follower fetch, a group change) calls
:meth:`~DelayedOperationPurgatory.check_and_complete`, which retries the parked operations. The
``ExpirationReaper-<brokerId>-<name>`` thread expires the ones whose time ran out (``force_complete`` then
``on_expiration``) and purges completed operations still sitting in watcher lists.

``on_complete`` runs exactly once, on whichever thread wins ``force_complete``: a request handler (from
``try_complete``) or the reaper (expiry). Callers should not hold exclusive locks while calling
``check_and_complete`` (see Kafka's deadlock note on ``tryCompleteElseWatch``).
"""

from __future__ import annotations

import threading
from abc import ABCMeta, abstractmethod
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, NamedTuple, TypeVar

from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import SYSTEM, Time
from pykbroker.utils.timer import Timer, TimerTask

SHARDS = 512
REAPER_POLL_MS = 200


class TopicPartitionOperationKey(NamedTuple):
    """The usual watch key: one topic partition (Kafka's ``TopicPartitionOperationKey``)."""

    topic: str
    partition: int


class DelayedOperation(TimerTask, metaclass=ABCMeta):
    """An operation that completes when ``try_complete`` says so, or after ``delay_ms`` (ms) at the latest.

    Subclasses implement ``try_complete`` (check the condition; if met, return ``self.force_complete()``),
    ``on_complete`` (build and send the response; called exactly once) and ``on_expiration`` (metrics).

    Threading: thread-safe. ``force_complete`` is a compare-and-set on ``_completed`` (guarded by
    ``_completed_lock``), so concurrent completion and expiry call ``on_complete`` once. ``lock`` (an
    ``RLock``, or one shared with related operations, as Kafka's ``lockOpt``) serialises
    ``try_complete`` calls made through the purgatory.
    """

    def __init__(self, delay_ms: int, lock: threading.RLock | threading.Lock | None = None):
        super().__init__(delay_ms)
        self._completed = False
        self._completed_lock = threading.Lock()
        self.lock = lock if lock is not None else threading.RLock()

    # ---- to implement -----------------------------------------------------------------------
    @abstractmethod
    def try_complete(self) -> bool:
        """Complete now if possible: return ``self.force_complete()`` when the condition holds, else
        False. Called with ``self.lock`` held."""

    @abstractmethod
    def on_complete(self) -> None:
        """The completion logic (send the response). Called exactly once, by ``force_complete``."""

    @abstractmethod
    def on_expiration(self) -> None:
        """Called after ``on_complete`` when the operation completed by timing out."""

    # ---- completion -------------------------------------------------------------------------
    def force_complete(self) -> bool:
        """Complete if nobody has yet: cancel the timeout, call ``on_complete``; True iff this
        caller won."""
        with self._completed_lock:
            if self._completed:
                return False
            self._completed = True
        self.cancel()
        self.on_complete()
        return True

    @property
    def is_completed(self) -> bool:
        return self._completed

    def safe_try_complete_or_else(self, f: Callable[[], None]) -> bool:
        """Under ``lock``: ``try_complete()``; if False run ``f`` (register watchers) and try once
        more. Returns the last ``try_complete`` result."""
        with self.lock:
            if self.try_complete():
                return True
            f()
            return self.try_complete()

    def safe_try_complete(self) -> bool:
        with self.lock:
            return self.try_complete()

    def run(self) -> None:
        """Timer expiry (reaper thread): complete and report the expiration."""
        if self.force_complete():
            self.on_expiration()


T = TypeVar("T", bound=DelayedOperation)


class _Watchers:
    """Operations watching one key, in insertion order. Guarded by the owning shard's lock."""

    __slots__ = ("key", "ops")

    def __init__(self, key: Hashable):
        self.key = key
        self.ops: dict[int, DelayedOperation] = {}


class _WatcherList:
    """One of the 512 shards: key -> watchers, and the lock guarding both the map and the lists."""

    __slots__ = ("lock", "watchers_by_key")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.watchers_by_key: dict[Hashable, _Watchers] = {}


class DelayedOperationPurgatory(Generic[T]):
    """Book-keeping for delayed operations with a timeout (Kafka's ``DelayedOperationPurgatory``).

    Threading: every public method is thread-safe and non-blocking apart from the operations' own
    ``try_complete``/``on_complete``. Watch keys are sharded over 512 watcher lists by ``hash(key)``, each
    with its own lock; operation callbacks are never invoked while a shard lock is held. A daemon reaper
    thread ``ExpirationReaper-<broker_id>-<name>`` (when ``reaper_enabled``) calls :meth:`advance_clock`
    every 200 ms; expired operations complete on that thread. With ``reaper_enabled=False`` (tests) the
    caller drives :meth:`advance_clock`.

    Gauges (Kafka names ``PurgatorySize`` and ``NumDelayedOperations``, tag ``delayedOperation=name``):
    :attr:`purgatory_size` and :attr:`num_delayed`.
    """

    def __init__(
        self,
        purgatory_name: str,
        broker_id: int = 0,
        purge_interval: int = 1000,
        reaper_enabled: bool = True,
        timer_enabled: bool = True,
        time: Time = SYSTEM,
        timer: Timer | None = None,
    ):
        self.purgatory_name = purgatory_name
        self.broker_id = broker_id
        self.purge_interval = purge_interval
        self.timer_enabled = timer_enabled
        self._timer = timer if timer is not None else Timer(purgatory_name, time)
        self._shards = [_WatcherList() for _ in range(SHARDS)]
        self._estimated_lock = threading.Lock()
        self._estimated_total = 0  # guarded by _estimated_lock
        self._log = get_logger("DelayedOperationPurgatory", name=purgatory_name, brokerId=broker_id)
        self._running = threading.Event()
        self._reaper: threading.Thread | None = None
        if reaper_enabled:
            self._running.set()
            self._reaper = threading.Thread(
                target=self._reap, name=f"ExpirationReaper-{broker_id}-{purgatory_name}", daemon=True
            )
            self._reaper.start()

    def _shard(self, key: Hashable) -> _WatcherList:
        return self._shards[hash(key) % SHARDS]

    # ---- the two entry points ------------------------------------------------------------------
    def try_complete_else_watch(self, operation: T, watch_keys: Iterable[Hashable]) -> bool:
        """Complete ``operation`` now if it can; otherwise watch it under every key and start its
        timeout. True iff it completed in this call (then the caller answers at once).

        Raises ValueError on an empty key list."""
        keys = list(watch_keys)
        if not keys:
            raise ValueError("The watch key list can't be empty")

        def watch_all() -> None:
            for key in keys:
                self._watch_for_operation(key, operation)
            with self._estimated_lock:
                self._estimated_total += 1

        if operation.safe_try_complete_or_else(watch_all):
            return True
        if not operation.is_completed:
            if self.timer_enabled:
                self._timer.add(operation)
            if operation.is_completed:
                operation.cancel()  # completed by another thread meanwhile: drop the timeout
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Retry the operations watching ``key``; returns how many this call completed."""
        shard = self._shards[hash(key) % SHARDS]  # self._shard inlined: twice per produce request
        # A key nobody watches (the usual case, twice per produce request) answers without the shard lock: the
        # lookup is one atomic dict read, and an operation starting to watch ``key`` concurrently tries to
        # complete again after its watchers are in (try_complete_else_watch), so it sees the change that led
        # here, as it would had this call taken the lock before it.
        if key not in shard.watchers_by_key:
            return 0
        with shard.lock:
            watchers = shard.watchers_by_key.get(key)
            if watchers is None:
                return 0
            ops = list(watchers.ops.values())
        completed = 0
        done: list[DelayedOperation] = []
        for op in ops:
            if op.is_completed:
                done.append(op)
            elif op.safe_try_complete():
                done.append(op)
                completed += 1
        self._forget(shard, watchers, done)
        if completed:
            self._log.debug("Request key unblocked operations", key=key, completed=completed)
        return completed

    def cancel_for_key(self, key: Hashable) -> list[T]:
        """Stop watching ``key``: its operations are removed and their timeouts cancelled, without
        completing them. Returns the removed operations."""
        shard = self._shard(key)
        with shard.lock:
            watchers = shard.watchers_by_key.pop(key, None)
            ops = list(watchers.ops.values()) if watchers is not None else []
            if watchers is not None:
                watchers.ops.clear()
        for op in ops:
            op.cancel()
        return ops  # type: ignore[return-value]

    # ---- watcher lists -------------------------------------------------------------------------
    def _watch_for_operation(self, key: Hashable, operation: DelayedOperation) -> None:
        shard = self._shard(key)
        with shard.lock:
            watchers = shard.watchers_by_key.get(key)
            if watchers is None:
                watchers = shard.watchers_by_key[key] = _Watchers(key)
            watchers.ops[id(operation)] = operation

    def _forget(self, shard: _WatcherList, watchers: _Watchers, done: list[DelayedOperation]) -> int:
        """Remove ``done`` from ``watchers``; drop the key when its list is empty and still current."""
        with shard.lock:
            removed = 0
            for op in done:
                if watchers.ops.pop(id(op), None) is not None:
                    removed += 1
            if not watchers.ops and shard.watchers_by_key.get(watchers.key) is watchers:
                del shard.watchers_by_key[watchers.key]
            return removed

    def _purge_completed(self) -> int:
        purged = 0
        for shard in self._shards:
            with shard.lock:
                all_watchers = list(shard.watchers_by_key.values())
            for watchers in all_watchers:
                with shard.lock:
                    done = [op for op in watchers.ops.values() if op.is_completed]
                purged += self._forget(shard, watchers, done)
        return purged

    # ---- gauges --------------------------------------------------------------------------------
    @property
    def purgatory_size(self) -> int:
        """Watched entries over all keys (an operation counts once per key; completed operations not
        yet purged still count) - Kafka's ``PurgatorySize``."""
        total = 0
        for shard in self._shards:
            with shard.lock:
                total += sum(len(w.ops) for w in shard.watchers_by_key.values())
        return total

    watched = purgatory_size

    @property
    def num_delayed(self) -> int:
        """Operations waiting in the timeout timer - Kafka's ``NumDelayedOperations``."""
        return self._timer.size

    # ---- expiry --------------------------------------------------------------------------------
    def advance_clock(self, timeout_ms: int) -> None:
        """Expire due operations (waiting up to ``timeout_ms`` real ms for the next one), then purge
        completed operations from watcher lists when more than ``purge_interval`` accumulated."""
        self._timer.advance_clock(timeout_ms)
        num_delayed = self.num_delayed
        with self._estimated_lock:
            should_purge = self._estimated_total - num_delayed > self.purge_interval
            if should_purge:
                self._estimated_total = num_delayed
        if should_purge:
            purged = self._purge_completed()
            self._log.debug("Purged elements from watch lists", purged=purged)

    def _reap(self) -> None:
        while self._running.is_set():
            try:
                self.advance_clock(REAPER_POLL_MS)
            except Exception:  # noqa: BLE001 - keep reaping
                self._log.exception("Error in expiration reaper")

    def shutdown(self) -> None:
        """Stop the reaper (waking it at once) and drop pending timeouts. Idempotent."""
        self._running.clear()
        self._timer.wakeup()
        if self._reaper is not None and self._reaper is not threading.current_thread():
            self._reaper.join()
        self._timer.shutdown()
