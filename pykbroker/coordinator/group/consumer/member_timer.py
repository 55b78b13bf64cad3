"""A consumer group member's deadline in the coordinator's heartbeat purgatory (session, rebalance/revocation, and
the classic members' join and sync deadlines of online migration).

Threading: the operation runs its checks under the group's lock (``GroupMetadata.lock``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pykbroker.utils.delayed_operation import DelayedOperation

if TYPE_CHECKING:
    from pykbroker.coordinator.group.group_metadata import GroupMetadata


class ConsumerMemberTimer(DelayedOperation):
    """A member's deadline (ms: session, rebalance/revocation, classic join or sync): completes quietly once
    ``superseded()``; on expiration calls ``expire()``. Both run under the group's lock."""

    def __init__(self, group: GroupMetadata, timeout_ms: int, superseded, expire):
        super().__init__(timeout_ms, group.lock)
        self._superseded = superseded
        self._expire = expire

    def try_complete(self) -> bool:
        return self.force_complete() if self._superseded() else False

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self._expire()
