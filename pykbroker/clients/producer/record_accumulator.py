"""RecordAccumulator: per-partition deques of open batches between ``send`` and the Sender.

Mirrors ``org.apache.kafka.clients.producer.internals.RecordAccumulator`` (+ the byte accounting of
``BufferPool``): ``append`` adds a record to the partition's last open batch or starts a new one
(reserving ``batch.size`` bytes, or the record's size if larger, from ``buffer.memory``; a full pool
blocks ``send`` for up to ``max.block.ms``, then TimeoutError). ``ready`` tells the Sender which
leader nodes have sendable data (a full batch, ``linger.ms`` elapsed, a flush or close in progress)
and how long to sleep otherwise; ``drain`` takes at most one batch per partition per node, up to
``max.request.size`` bytes per request, rotating the starting partition for fairness; with
idempotence a retried batch waits until its partition has nothing in flight, so batches reach the
log in sequence order. ``reenqueue`` puts a retried batch back at the front in sequence order.

Thread-safety: one lock guards the deques (application threads append, the Sender drains and
re-enqueues); ``_free`` is a condition on the same lock for buffer memory.
"""

from __future__ import annotations

import collections
import threading

from pykbroker.clients.producer.producer_batch import FutureRecordMetadata, ProducerBatch
from pykbroker.record.default_record import size_in_bytes
from pykbroker.record.default_record_batch import RECORD_BATCH_OVERHEAD
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from pykbroker.utils.time import SYSTEM, Time

_new_tuple = tuple.__new__


class RecordAccumulator:
    def __init__(
        self,
        batch_size: int,
        buffer_memory: int,
        compression: str,
        linger_ms: int,
        retry_backoff_ms: int,
        delivery_timeout_ms: int,
        idempotent: bool,
        time: Time = SYSTEM,
    ):
        self.time = time
        self.batch_size = batch_size
        self.total_memory = buffer_memory
        self.compression = compression
        self.linger = linger_ms / 1000.0
        self.retry_backoff = retry_backoff_ms / 1000.0
        self.delivery_timeout = delivery_timeout_ms / 1000.0
        self.idempotent = idempotent
        self._lock = threading.Lock()
        self._free = threading.Condition(self._lock)
        self._acquire, self._release = self._lock.acquire, self._lock.release
        self._used = 0
        self._waiters = 0  # threads blocked in _allocate (deallocate notifies only when there are some)
        self.batches: dict[tuple[str, int], collections.deque[ProducerBatch]] = {}
        self.incomplete: set[ProducerBatch] = set()
        self._drain_index = 0
        self.flushes_in_progress = 0
        self.closed = False

    # -- application threads ------------------------------------------------------------------------
    def append(self, topic: str, partition: int, timestamp: int, key, value, headers, callback, max_block_s: float):
        """Returns ``(future, batch_is_full, new_batch_created)``. Raises TimeoutError when
        ``buffer.memory`` stays exhausted for ``max_block_s``.

        ``batch_is_full`` stays True while a full batch waits in the partition's deque, so ``send``
        wakes a sleeping Sender on every such append. Measured: reporting only the moment a batch
        fills cut the wakeups ~100x but *lowered* throughput and raised latency (the wakeup's
        syscall is also where the application thread lets the Sender have the GIL; one 3-round A/B)."""
        tp = (topic, partition)
        self._acquire()  # not ``with``: half the cost on this per-record path
        try:
            dq = self.batches.get(tp)
            if dq:
                # ProducerBatch.try_append inlined (the per-record hot path)
                last = dq[-1]
                builder = last.builder
                n = builder.try_append(timestamp, key, value, headers)
                if n >= 0:
                    key_size = -1 if key is None else len(key)
                    value_size = -1 if value is None else len(value)
                    last.record_count = n + 1
                    if callback is not None:
                        last.callbacks += (callback, n, timestamp, key_size, value_size)
                    future = _new_tuple(
                        FutureRecordMetadata, (last.result, n, topic, partition, timestamp, key_size, value_size)
                    )
                    return future, len(dq) > 1 or builder.full_after_append(), False
                last.close()
            elif dq is None:
                dq = self.batches[tp] = collections.deque()
            now = self.time.nanoseconds() / 1e9
            size = max(self.batch_size, RECORD_BATCH_OVERHEAD + size_in_bytes(0, 0, key, value, headers))
            self._allocate(size, max_block_s)
            builder = MemoryRecordsBuilder(compression=self.compression, write_limit=size)
            batch = ProducerBatch(topic, partition, builder, now)
            batch.size_hint = size
            new_future = batch.try_append(timestamp, key, value, headers, callback)
            assert new_future is not None  # a new batch sized for the record has room for it
            dq.append(batch)
            self.incomplete.add(batch)
            return new_future, len(dq) > 1 or batch.is_full(), True
        finally:
            self._release()

    def _allocate(self, size: int, max_block_s: float) -> None:
        if size > self.total_memory:
            raise ValueError(
                f"Attempt to allocate {size} bytes, but there is a hard limit of "
                f"{self.total_memory} on memory allocations."
            )
        deadline = self.time.nanoseconds() / 1e9 + max_block_s
        while self._used + size > self.total_memory:
            remaining = deadline - self.time.nanoseconds() / 1e9
            if remaining <= 0:
                raise TimeoutError(
                    f"Failed to allocate {size} bytes within the configured max blocking time "
                    f"{int(max_block_s * 1000)} ms. Total memory: {self.total_memory} bytes. "
                    f"Available memory: {self.total_memory - self._used} bytes."
                )
            self._waiters += 1
            try:
                self._free.wait(remaining)
            finally:
                self._waiters -= 1
        self._used += size

    def deallocate(self, batch: ProducerBatch) -> None:
        with self._lock:
            self.incomplete.discard(batch)
            self._used -= batch.size_hint
            batch.size_hint = 0
            if self._waiters:
                self._free.notify_all()

    # -- Sender thread -----------------------------------------------------------------------------
    def ready(self, leader_for, now: float):
        """``(ready nodes, seconds until the next check, topics whose leaders are unknown)``."""
        ready_nodes: set[int] = set()
        next_check = self.linger if self.linger > 0 else 0.1
        unknown: set[str] = set()
        exhausted = self._free_waiters_exist()
        with self._lock:
            for tp, dq in self.batches.items():
                if not dq:
                    continue
                batch = dq[0]
                leader = leader_for(tp[0], tp[1])
                if leader is None:
                    unknown.add(tp[0])
                    continue
                if leader in ready_nodes:
                    continue
                backing_off = batch.in_retry and now - batch.last_attempt < self.retry_backoff
                wait = self.retry_backoff if backing_off else self.linger
                waited = now - (batch.last_attempt if backing_off else batch.created)
                full = len(dq) > 1 or batch.is_full()
                sendable = full or waited >= wait or exhausted or self.flushes_in_progress > 0 or self.closed
                if sendable and not backing_off:
                    ready_nodes.add(leader)
                else:
                    next_check = min(next_check, max(0.0, wait - waited))
        return ready_nodes, next_check, unknown

    def _free_waiters_exist(self) -> bool:
        return self._used > self.total_memory - self.batch_size

    def drain(self, leader_for, nodes, max_size: int, now: float, in_flight_tps: dict, assign_sequence) -> dict:
        """``{node: [batches]}`` to send now; closes and builds each drained batch."""
        out: dict[int, list[ProducerBatch]] = {}
        with self._lock:
            tps = [tp for tp, dq in self.batches.items() if dq]
            if not tps:
                return out
            start = self._drain_index % len(tps)
            self._drain_index += 1
            sizes: dict[int, int] = {}
            for i in range(len(tps)):
                tp = tps[(start + i) % len(tps)]
                leader = leader_for(tp[0], tp[1])
                if leader not in nodes:
                    continue
                dq = self.batches[tp]
                batch = dq[0]
                if batch.in_retry and now - batch.last_attempt < self.retry_backoff:
                    continue
                if self.idempotent and batch.in_retry and in_flight_tps.get(tp):
                    continue  # earlier batches of this partition are still in flight: keep the order
                size = sizes.get(leader, 0)
                batch_size = batch.estimated_size()
                if size and size + batch_size > max_size:
                    continue
                dq.popleft()
                batch.close()  # no more appends: the batch is built below, outside the lock
                if self.idempotent and batch.base_sequence < 0:
                    assign_sequence(batch)
                batch.drained = now
                sizes[leader] = size + batch_size
                out.setdefault(leader, []).append(batch)
        # Build (join + CRC) outside the lock: application threads append meanwhile. A drained batch
        # is out of its deque and closed, so only this thread touches it.
        for node_batches in out.values():
            for batch in node_batches:
                batch.records()
        return out

    def reenqueue(self, batch: ProducerBatch, now: float) -> None:
        """Put a batch back for retry, ahead of new batches and in base-sequence order."""
        batch.attempts += 1
        batch.last_attempt = now
        batch.in_retry = True
        with self._lock:
            dq = self.batches.setdefault(batch.tp, collections.deque())
            i = 0
            while i < len(dq) and dq[i].in_retry and 0 <= dq[i].base_sequence < batch.base_sequence:
                i += 1
            dq.insert(i, batch)

    def expired_batches(self, now: float) -> list[ProducerBatch]:
        """Batches waiting longer than ``delivery.timeout.ms`` since creation (removed from the deques)."""
        expired = []
        with self._lock:
            for dq in self.batches.values():
                while dq and now - dq[0].created >= self.delivery_timeout:
                    batch = dq.popleft()
                    batch.close()
                    expired.append(batch)
        return expired

    def has_undrained(self) -> bool:
        with self._lock:
            return any(self.batches.values())

    def abort_undrained(self, error: BaseException) -> list[ProducerBatch]:
        with self._lock:
            batches = [b for dq in self.batches.values() for b in dq]
            for dq in self.batches.values():
                dq.clear()
        return batches

    # -- flush --------------------------------------------------------------------------------------
    def begin_flush(self) -> None:
        with self._lock:
            self.flushes_in_progress += 1

    def await_flush_completion(self, timeout_s: float | None) -> bool:
        try:
            with self._lock:
                pending = list(self.incomplete)
            deadline = None if timeout_s is None else self.time.nanoseconds() / 1e9 + timeout_s
            for batch in pending:
                remaining = None if deadline is None else max(0.0, deadline - self.time.nanoseconds() / 1e9)
                if not batch.result.wait(remaining):
                    return False
            return True
        finally:
            with self._lock:
                self.flushes_in_progress -= 1
