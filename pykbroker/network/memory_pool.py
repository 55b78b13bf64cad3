"""Memory pools bounding the bytes of requests held in memory (``queued.max.request.bytes``).

Mirrors ``org.apache.kafka.common.memory.{MemoryPool,SimpleMemoryPool}`` as the SocketServer uses them:
one non-strict pool of ``queued.max.request.bytes`` shared by the data-plane Processors (the control
plane is unbounded). A Processor asks for a frame's bytes once its 4-byte size is read; while the
pool is out of memory the channel mutes itself and its KSelector stops reading from it, until
request handlers release the memory of the requests they finished (``Request.release_buffer``).

Non-strict (Kafka's choice for the SocketServer): any allocation succeeds while some memory is
available, even if it takes the pool below zero, so one large request can never be starved.

Threading: ``try_allocate`` runs on Processor threads, ``release`` on request handler threads; a
lock guards the counter. Reads of ``available`` for metrics are unlocked.
"""

from __future__ import annotations

import threading


class MemoryPool:
    """The unbounded pool (Kafka's ``MemoryPool.NONE``): every allocation succeeds, nothing is counted."""

    size_bytes = -1

    def try_allocate(self, size_bytes: int) -> bool:
        return True

    def release(self, size_bytes: int) -> None:
        pass

    @property
    def is_out_of_memory(self) -> bool:
        return False

    @property
    def available_memory(self) -> int:
        return 2**63 - 1

    @property
    def used_memory(self) -> int:
        return 0


NONE = MemoryPool()


class SimpleMemoryPool(MemoryPool):
    """A pool of ``size_bytes``; ``max_single_allocation_bytes`` bounds one request (a larger one is a
    programming error: frames above ``socket.request.max.bytes`` are rejected before allocation).

    :raises ValueError: for non-positive sizes, or an allocation above the single-allocation limit.
    """

    def __init__(self, size_bytes: int, max_single_allocation_bytes: int, strict: bool = False):
        if size_bytes <= 0 or max_single_allocation_bytes <= 0:
            raise ValueError(
                f"pool size ({size_bytes}) and max single allocation ({max_single_allocation_bytes}) must be positive"
            )
        self.size_bytes = size_bytes
        self.max_single_allocation_bytes = max_single_allocation_bytes
        self.strict = strict
        self._available = size_bytes
        self._lock = threading.Lock()

    def try_allocate(self, size_bytes: int) -> bool:
        """Reserve ``size_bytes``; False (nothing reserved) when the pool cannot give them now."""
        if size_bytes < 1 or size_bytes > self.max_single_allocation_bytes:
            raise ValueError(f"requested size {size_bytes} is outside [1, {self.max_single_allocation_bytes}]")
        with self._lock:
            threshold = size_bytes if self.strict else 1
            if self._available < threshold:
                return False
            self._available -= size_bytes
            return True

    def release(self, size_bytes: int) -> None:
        with self._lock:
            self._available += size_bytes

    @property
    def is_out_of_memory(self) -> bool:
        return self._available <= 0

    @property
    def available_memory(self) -> int:
        return self._available

    @property
    def used_memory(self) -> int:
        return self.size_bytes - self._available

    def __repr__(self) -> str:
        return f"SimpleMemoryPool(size={self.size_bytes}, available={self._available}, strict={self.strict})"
