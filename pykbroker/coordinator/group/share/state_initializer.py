"""The group coordinator initializes the share-partition state of a share group's subscribed partitions before it
assigns them (Kafka 4.1+ ``GroupMetadataManager.maybeCreateInitializeShareGroupStateRequest`` /
``initializeShareGroupState`` and the share assignor's ``topicPartitionAllowedMap``, KIP-932).

A heartbeat that finds subscribed partitions neither initialized (:attr:`ShareGroup.state_topics`) nor being
initialized (:attr:`ShareGroup.initializing`) starts their initialization: the Persister's ReadShareGroupStateSummary
of each (a partition that has state already, e.g. set by AlterShareGroupOffsets, is only noted), then
InitializeShareGroupState (state epoch 0, start offset -1: the share partition leader picks the start offset with
``share.auto.offset.reset`` on its first fetch) of those without. When every call completed, the partitions that
succeeded join ``state_topics`` and the group epoch is bumped, so that the next heartbeat of each member computes a
target assignment that includes them (the member learns of them on that heartbeat, one heartbeat interval later, as
with Kafka: a new share group's first heartbeat answers an empty assignment). Failed ones are left out of
``initializing`` and retried by a later heartbeat.

Threading: :meth:`ShareStateInitializer.maybe_initialize` runs under the group's ``GroupMetadata.lock``; the
Persister's futures complete on its threads (or at once, on the caller's), and the completion takes that lock (an
RLock) again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from pykbroker.coordinator.group.group_metadata import GroupMetadata
from pykbroker.coordinator.group.share.group import ShareGroup
from pykbroker.coordinator.group.share.offsets import gather_futures
from pykbroker.coordinator.share.persister import Persister
from pykbroker.protocol import errors

#: the state epoch and start offset the group coordinator initializes a share partition's state with
INITIAL_STATE_EPOCH = 0
UNINITIALIZED_START_OFFSET = -1


class ShareStateInitializer:
    """Initializes the state of subscribed share partitions (see module doc). ``persister``: a callable returning
    the coordinator's Persister; ``on_initialized(holder, group)``: called under the group lock after new partitions
    joined ``state_topics`` and the group epoch was bumped (the handler writes the group's records)."""

    def __init__(
        self, persister: Callable[[], Persister], on_initialized: Callable[[GroupMetadata, ShareGroup], None], log
    ):
        self._persister = persister
        self._on_initialized = on_initialized
        self.log = log

    def pending(self, group: ShareGroup) -> list[tuple[uuid.UUID, str, int]]:
        """``[(topic id, topic name, partition)]`` subscribed (as of ``group.subscription_metadata``) but neither
        initialized nor being initialized."""
        out: list[tuple[uuid.UUID, str, int]] = []
        for name, (tid, count) in sorted(group.subscription_metadata.items()):
            done = group.initialized_partitions(tid)
            out.extend((tid, name, p) for p in range(count) if p not in done and (tid, p) not in group.initializing)
        return out

    def maybe_initialize(self, holder: GroupMetadata, group: ShareGroup) -> None:
        """Start initializing the pending partitions of ``group`` (none: nothing happens). Group lock held."""
        todo = self.pending(group)
        if not todo:
            return
        group.initializing.update((tid, p) for tid, _, p in todo)
        persister = self._persister()
        summaries = [persister.read_summary(group.group_id, tid, p, -1) for tid, _, p in todo]

        def summarized(results: list) -> None:
            missing = [
                t
                for t, r in zip(todo, results, strict=True)
                if r is not None and r.error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
            ]
            known = [t for t, r in zip(todo, results, strict=True) if r is not None and r.error_code == errors.NONE]
            inits = [
                persister.initialize_state(group.group_id, tid, p, INITIAL_STATE_EPOCH, UNINITIALIZED_START_OFFSET)
                for tid, _, p in missing
            ]
            gather_futures(
                inits,
                lambda codes: finished(known + [t for t, c in zip(missing, codes, strict=True) if c == errors.NONE]),
            )

        def finished(ok: list[tuple[uuid.UUID, str, int]]) -> None:
            with holder.lock:
                group.initializing.difference_update((tid, p) for tid, _, p in todo)
                if group.dead or not ok:
                    return
                for tid, name, p in ok:
                    group.add_state_partitions(tid, name, [p])
                group.group_epoch += 1
                self.log.info(
                    f"[GroupId {group.group_id}] Initialized the share-partition state of {len(ok)} partitions; "
                    f"bumped share group epoch to {group.group_epoch}."
                )
                self._on_initialized(holder, group)

        gather_futures(summaries, summarized)
