"""Purgatory operations of the group coordinator: DelayedJoin, DelayedSync and DelayedHeartbeat.

Mirrors ``kafka.coordinator.group.{DelayedJoin,DelayedSync,DelayedHeartbeat}``: all run their checks
under the group's lock (passed as the operation's lock) and call back into the coordinator.
"""

from __future__ import annotations

from pykbroker.utils.delayed_operation import DelayedOperation


class DelayedJoin(DelayedOperation):
    """Completes when every member has rejoined, or after the rebalance timeout (ms)."""

    def __init__(self, coordinator, group, rebalance_timeout_ms: int, initial: bool = False, remaining_ms: int = 0):
        super().__init__(rebalance_timeout_ms, group.lock)
        self.coordinator = coordinator
        self.group = group
        # InitialDelayedJoin: wait out the delay in full, then again while new members keep arriving,
        # for at most ``remaining_ms`` more (the rebalance timeout left)
        self.initial = initial
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        if self.initial:
            return False
        return self.coordinator.try_complete_join(self.group, self.force_complete)

    def on_complete(self) -> None:
        if self.initial:
            self.coordinator.on_complete_initial_join(self)
        else:
            self.coordinator.on_complete_join(self.group)

    def on_expiration(self) -> None:
        pass


class DelayedSync(DelayedOperation):
    """Waits, after a rebalance completed its JoinGroup phase at ``generation_id``, for every member's
    SyncGroup; after the rebalance timeout (ms) the members that sent none are removed and the group
    rebalances (Kafka's ``DelayedSync``). Completes early once all synced, or the generation or the state
    moved on."""

    def __init__(self, coordinator, group, generation_id: int, rebalance_timeout_ms: int):
        super().__init__(rebalance_timeout_ms, group.lock)
        self.coordinator = coordinator
        self.group = group
        self.generation_id = generation_id

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_pending_sync(self.group, self.generation_id, self.force_complete)

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.coordinator.on_expire_pending_sync(self.group, self.generation_id)


class DelayedHeartbeat(DelayedOperation):
    """Expires a member that sent no heartbeat for its session timeout (ms); a newer heartbeat or
    the member's removal completes it early."""

    def __init__(self, coordinator, group, member_id: str, heartbeat_generation: int, timeout_ms: int):
        super().__init__(timeout_ms, group.lock)
        self.coordinator = coordinator
        self.group = group
        self.member_id = member_id
        self.heartbeat_generation = heartbeat_generation

    def try_complete(self) -> bool:
        if self.coordinator.heartbeat_superseded(self.group, self.member_id, self.heartbeat_generation):
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.coordinator.on_expire_heartbeat(self.group, self.member_id, self.heartbeat_generation)
