"""DelayedShareFetch: a ShareFetch that found nothing to acquire, waiting up to ``max_wait_ms`` (KIP-932).

Mirrors Kafka's ``kafka.server.share.DelayedShareFetch`` in the share-fetch purgatory, watched under each fetched
partition's :class:`~pykbroker.utils.delayed_operation.TopicPartitionOperationKey`: an append that moves a high
watermark (ReplicaManager pokes the key), or records of the partition becoming AVAILABLE again (a release, a lock
expiry), re-checks it; it completes as soon as some partition has something to acquire, or at the timeout, and then
reads, acquires and answers through ``complete_fn`` (possibly with nothing acquired). Handler threads never wait.
"""

from __future__ import annotations

from collections.abc import Callable

from pykbroker.utils.delayed_operation import DelayedOperation


class DelayedShareFetch(DelayedOperation):
    """``can_acquire()``: whether any fetched share partition has records to acquire now; ``complete_fn()``: read,
    acquire and respond (called exactly once, on the completing thread)."""

    def __init__(self, delay_ms: int, can_acquire: Callable[[], bool], complete_fn: Callable[[], None]):
        super().__init__(delay_ms)
        self.can_acquire = can_acquire
        self.complete_fn = complete_fn

    def try_complete(self) -> bool:
        if self.can_acquire():
            return self.force_complete()
        return False

    def on_expiration(self) -> None:
        pass

    def on_complete(self) -> None:
        self.complete_fn()
