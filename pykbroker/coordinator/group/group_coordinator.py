"""GroupCoordinator: the classic consumer-group protocol (``kafka.coordinator.group.GroupCoordinator``).

Handles JoinGroup (KIP-394 member-id-required first join for v4+, static members with
``group.instance.id``), SyncGroup, Heartbeat, LeaveGroup, OffsetCommit/OffsetFetch/OffsetDelete,
DescribeGroups, ListGroups and DeleteGroups. Assignment stays on the clients: the leader's SyncGroup
carries every member's assignment and the coordinator relays it.

KIP-848 ``consumer`` groups share the group map, the offsets and the locks: ``self.consumer``
(:class:`~pykbroker.coordinator.group.consumer.heartbeat.ConsumerGroupHeartbeatHandler`) serves
ConsumerGroupHeartbeat/ConsumerGroupDescribe; here OffsetCommit/OffsetFetch check a consumer group's member epochs,
ListGroups reports group types, DescribeGroups answers a consumer group as not classic (GROUP_ID_NOT_FOUND from
v6), JoinGroup/SyncGroup/Heartbeat/LeaveGroup to a consumer group with members are served by its classic-protocol
members (KIP-848 online migration, :mod:`~pykbroker.coordinator.group.consumer.migration`; an empty consumer group
becomes classic), and DeleteGroups refuses a consumer group with members (NON_EMPTY_GROUP).

Nothing here blocks a handler thread: a JoinGroup that must wait for the other members parks its
response callback on the member and a :class:`DelayedJoin` in the join purgatory (completed when all
members have rejoined, or by the reaper after the rebalance timeout); once the join completes, a
:class:`DelayedSync` waits the rebalance timeout for every member's SyncGroup and removes those that sent
none, then rebalances (KIP-814's completion, Kafka's pending sync); session timeouts are
:class:`DelayedHeartbeat` operations in the heartbeat purgatory. ``respond(body)`` callbacks may thus
run on any handler thread, on a purgatory reaper thread, or (TxnOffsetCommit) on the transaction
verifier's thread.

Every request first checks the group's partition (Kafka's ``validateGroupStatus``): while it loads
COORDINATOR_LOAD_IN_PROGRESS (Heartbeat answers NONE and SyncGroup REBALANCE_IN_PROGRESS instead, as
Kafka), when this broker does not lead it NOT_COORDINATOR; the manager raises them as KafkaErrors that
the handlers answer.

Timeouts and limits (ms): ``group.min.session.timeout.ms`` / ``group.max.session.timeout.ms`` bound
session timeouts (else INVALID_SESSION_TIMEOUT); ``group.initial.rebalance.delay.ms`` delays the first
rebalance of an empty group; ``group.max.size`` (GROUP_MAX_SIZE_REACHED).

Threading: each group's state is guarded by its RLock, also used as the lock of its delayed operations.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from pykbroker.config.broker_configs.group_coordinator_configs import (
    GROUP_INITIAL_REBALANCE_DELAY_MS_CONFIG,
    GROUP_MAX_SESSION_TIMEOUT_MS_CONFIG,
    GROUP_MAX_SIZE_CONFIG,
    GROUP_MIN_SESSION_TIMEOUT_MS_CONFIG,
    OFFSET_METADATA_MAX_BYTES_CONFIG,
)
from pykbroker.coordinator.group import coordinator_metrics as cm
from pykbroker.coordinator.group.consumer import record_codec as ccodec
from pykbroker.coordinator.group.consumer.heartbeat import ConsumerGroupHeartbeatHandler
from pykbroker.coordinator.group.delayed_ops import DelayedHeartbeat, DelayedJoin, DelayedSync
from pykbroker.coordinator.group.group_metadata import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata
from pykbroker.coordinator.group.group_metadata_manager import GroupMetadataManager
from pykbroker.coordinator.group.group_results import (
    CommitCallback,
    FetchedOffsets,
    JoinCallback,
    JoinGroupMember,
    JoinGroupResult,
    LeaveGroupResult,
    PartitionErrors,
    SyncCallback,
    SyncGroupResult,
    TopicPartition,
)
from pykbroker.coordinator.group.share.heartbeat import ShareGroupHeartbeatHandler
from pykbroker.coordinator.group.share.member import ShareGroupMember
from pykbroker.coordinator.group.share.offsets import ShareGroupOffsets
from pykbroker.coordinator.share.persister import InMemoryPersister
from pykbroker.protocol import errors
from pykbroker.utils.delayed_operation import DelayedOperationPurgatory
from pykbroker.utils.logging import get_logger

_S = GroupState


class GroupCoordinator:
    def __init__(self, node_id: int, config, manager: GroupMetadataManager, time, persister=None):
        self.node_id = node_id
        self.manager = manager
        self.time = time
        self.min_session_ms = config[GROUP_MIN_SESSION_TIMEOUT_MS_CONFIG]
        self.max_session_ms = config[GROUP_MAX_SESSION_TIMEOUT_MS_CONFIG]
        self.initial_delay_ms = config[GROUP_INITIAL_REBALANCE_DELAY_MS_CONFIG]
        self.max_group_size = config[GROUP_MAX_SIZE_CONFIG]
        self.max_metadata_bytes = config[OFFSET_METADATA_MAX_BYTES_CONFIG]
        self.join_purgatory: DelayedOperationPurgatory[DelayedJoin | DelayedSync] = DelayedOperationPurgatory(
            "Rebalance", node_id, time=time
        )
        self.heartbeat_purgatory: DelayedOperationPurgatory[DelayedHeartbeat] = DelayedOperationPurgatory(
            "Heartbeat", node_id, time=time
        )
        self.log = get_logger("GroupCoordinator", id=node_id)
        #: the KIP-848 consumer protocol (ConsumerGroupHeartbeat/Describe); its ``image`` is set by the server
        self.consumer = ConsumerGroupHeartbeatHandler(self, config, time)
        #: the KIP-932 share groups (ShareGroupHeartbeat/Describe); its ``image`` is set by the server too
        self.share = ShareGroupHeartbeatHandler(self, config, time)
        #: the share partitions' durable state (Kafka's Persister; in memory unless the server gives another)
        self.persister = persister if persister is not None else InMemoryPersister()
        #: DescribeShareGroupOffsets / AlterShareGroupOffsets / DeleteShareGroupOffsets over the persister
        self.share_offsets = ShareGroupOffsets(self.share, self.persister)
        manager.on_loaded = self._on_groups_loaded

    def _on_groups_loaded(self, holders: list[GroupMetadata]) -> None:
        self.consumer.on_groups_loaded(holders)
        self.share.on_groups_loaded(holders)

    def set_image(self, image) -> None:
        """``image``: a callable returning the current MetadataImage (topics for assignments, group configs)."""
        self.consumer.image = image
        self.share.image = image

    # -- queries for the share partitions (server/share/) ------------------------------------------------
    def share_group_member(self, group_id: str, member_id: str) -> ShareGroupMember | None:
        """A copy of member ``member_id`` of share group ``group_id`` (its epoch and ``assigned`` partitions,
        ``{topic id: set of partitions}``), or None when this broker coordinates no such share group member.
        Thread-safe (takes the group's lock)."""
        return self.share.member(group_id, member_id)

    def share_group_configs(self, group_id: str) -> dict:
        """The ``share.*`` configs of group ``group_id`` (overrides, else the broker's ``group.share.*``
        defaults; see :func:`pykbroker.config.group_config.share_configs`). Any broker can answer."""
        return self.share.share_configs(group_id)

    def startup(self) -> None:
        """Start the manager's loader thread (Kafka's ``GroupCoordinator.startup``)."""
        self.manager.startup()

    def shutdown(self) -> None:
        self.manager.shutdown()
        self.join_purgatory.shutdown()
        self.heartbeat_purgatory.shutdown()

    # -- leadership of __consumer_offsets partitions (BrokerMetadataPublisher thread) -----------------
    def on_election(self, partition: int, leader_epoch: int) -> None:
        """This broker now leads ``__consumer_offsets-<partition>`` (Kafka's ``onElection``): its groups
        load in the background from now on."""
        self.manager.on_election(partition, leader_epoch)

    def on_resignation(self, partition: int, leader_epoch: int | None) -> None:
        """This broker no longer leads ``__consumer_offsets-<partition>`` (Kafka's ``onResignation``):
        its groups are unloaded and their waiting members answered NOT_COORDINATOR."""
        self.manager.on_resignation(partition, leader_epoch, self._on_group_unloaded)

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        """Kafka's ``onGroupUnloaded``: the group is Dead here; pending joins and syncs get NOT_COORDINATOR
        (the clients find the new coordinator and rejoin there)."""
        with group.lock:
            previous = group.state
            group.transition_to(_S.DEAD, self.time.milliseconds())
            if group.consumer_group is not None:
                group.consumer_group.dead = True
            if group.share_group is not None:
                group.share_group.dead = True
            for m in group.members.values():
                if previous is _S.PREPARING_REBALANCE and m.awaiting_join is not None:
                    join_cb, m.awaiting_join = m.awaiting_join, None
                    join_cb(JoinGroupResult.error(errors.NOT_COORDINATOR, m.member_id))
                if m.awaiting_sync is not None:
                    sync_cb, m.awaiting_sync = m.awaiting_sync, None
                    sync_cb(SyncGroupResult.error(errors.NOT_COORDINATOR))
        self.join_purgatory.check_and_complete(("join", group.group_id))
        self.join_purgatory.check_and_complete(("sync", group.group_id))

    # -- JoinGroup ------------------------------------------------------------------------------------
    def handle_join_group(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        version: int,
        respond: JoinCallback,
    ) -> None:
        """JoinGroup (``GroupCoordinator.handleJoinGroup``): ``respond(JoinGroupResult)`` exactly
        once, now or when the rebalance completes. Errors: INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT
        (outside ``group.min.session.timeout.ms``..``group.max.session.timeout.ms``), UNKNOWN_MEMBER_ID,
        FENCED_INSTANCE_ID, MEMBER_ID_REQUIRED (KIP-394), INCONSISTENT_GROUP_PROTOCOL,
        GROUP_MAX_SIZE_REACHED, COORDINATOR_NOT_AVAILABLE. The rebalance timeout is taken as given, as
        Kafka does (the handler passes the session timeout for v0): a negative one lets the join complete
        without waiting for members that have not rejoined."""

        def error(code: int, mid: str = member_id) -> None:
            respond(JoinGroupResult.error(code, mid))

        if not group_id:
            return error(errors.INVALID_GROUP_ID)
        self.manager.validate_group_status(group_id)
        if not self.min_session_ms <= session_timeout_ms <= self.max_session_ms:
            return error(errors.INVALID_SESSION_TIMEOUT)
        group = self.manager.get_group(group_id, create=not member_id)
        if group is None:
            return error(errors.UNKNOWN_MEMBER_ID)
        with group.lock:
            if group.state is _S.DEAD:
                return error(errors.COORDINATOR_NOT_AVAILABLE)
            if group.share_group is not None:  # a group id is of one type only
                return error(errors.INCONSISTENT_GROUP_PROTOCOL)
            if group.consumer_group is not None:
                if group.consumer_group.members:  # KIP-848 online migration: a classic member of a consumer group
                    self.consumer.classic_join(
                        group,
                        member_id,
                        instance_id,
                        client_id,
                        client_host,
                        rebalance_timeout_ms,
                        session_timeout_ms,
                        protocol_type,
                        protocols,
                        version,
                        respond,
                    )
                    return None
                self.log.info(f"Converting the empty consumer group {group_id} to a classic group")
                self.manager.append(group_id, ccodec.tombstones(group.consumer_group), lambda code: None)
                group.consumer_group = None
            if not group.supports_protocols(protocol_type, [p for p, _ in protocols]):
                return error(errors.INCONSISTENT_GROUP_PROTOCOL)
            if not member_id:
                new_id = f"{instance_id or client_id}-{uuid.uuid4()}"
                if instance_id and instance_id in group.static_members:
                    self._replace_static_member(
                        group,
                        instance_id,
                        new_id,
                        protocols,
                        rebalance_timeout_ms,
                        session_timeout_ms,
                        version >= 9,
                        respond,
                    )
                    return None
                if len(group.members) >= self.max_group_size:
                    return error(errors.GROUP_MAX_SIZE_REACHED)
                if version >= 4 and not instance_id:
                    group.pending_members.add(new_id)
                    self._schedule_heartbeat(group, new_id, 0, session_timeout_ms)
                    return error(errors.MEMBER_ID_REQUIRED, new_id)
                member_id = new_id
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
            else:
                code = self._validate_current_member(group, member_id, instance_id)
                if code is not None:
                    return error(code)
                member = group.members[member_id]
                unchanged = member.protocols == protocols
                if (group.state is _S.COMPLETING_REBALANCE and unchanged) or (
                    group.state is _S.STABLE and unchanged and member_id != group.leader_id
                ):
                    respond(self._join_response(group, member_id))  # e.g. a lost JoinGroup response
                    return None
                member.protocols, member.awaiting_join = protocols, respond
                member.rebalance_timeout_ms, member.session_timeout_ms = rebalance_timeout_ms, session_timeout_ms
                if group.state is _S.PREPARING_REBALANCE:
                    self.join_purgatory.check_and_complete(("join", group_id))
                else:
                    self._prepare_rebalance(
                        group, f"member {member_id} rejoined {'as leader' if unchanged else 'with new metadata'}"
                    )
                return None
            member = MemberMetadata(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
            )
            member.awaiting_join = respond
            if group.state is _S.PREPARING_REBALANCE and group.generation_id == 0:
                group.new_member_added = True  # lets the initial delay extend (InitialDelayedJoin)
            group.add(member)
            self._schedule_heartbeat(
                group, member_id, member.heartbeat_generation, max(session_timeout_ms, rebalance_timeout_ms)
            )
            if group.state in (_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY):
                self._prepare_rebalance(group, f"adding new member {member_id}")
            else:
                self.join_purgatory.check_and_complete(("join", group_id))
        return None

    @staticmethod
    def _validate_current_member(group: GroupMetadata, member_id: str, instance_id: str | None) -> int | None:
        """Kafka's ``validateCurrentMember``: FENCED_INSTANCE_ID when ``instance_id`` now belongs to another
        member id (checked first), UNKNOWN_MEMBER_ID when the instance or the member is unknown."""
        if instance_id:
            current = group.static_members.get(instance_id)
            if current is None:
                return errors.UNKNOWN_MEMBER_ID
            if current != member_id:
                return errors.FENCED_INSTANCE_ID
            return None
        return None if member_id in group.members else errors.UNKNOWN_MEMBER_ID

    def _replace_static_member(
        self,
        group: GroupMetadata,
        instance_id: str,
        new_id: str,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        skip_assignment_supported: bool,
        respond: JoinCallback,
    ) -> None:
        """A known static member rejoins with an empty member id (``updateStaticMemberAndRebalance``): the
        new member id replaces the old one (whose pending JoinGroup/SyncGroup get FENCED_INSTANCE_ID). In
        Stable, with the selected protocol unchanged, the group keeps its generation and assignments: the
        member gets the current generation (the leader, from JoinGroup v9, with the members and
        ``skip_assignment``; before v9 the old leader id so that it does not assign) and its old
        assignment on SyncGroup; nobody else rebalances. In CompletingRebalance, or when the protocol
        would change, the group rebalances; in PreparingRebalance the member just joins it."""
        old_id = group.static_members[instance_id]
        old_leader = group.leader_id
        member = group.members.pop(old_id)
        if member.awaiting_join is not None:
            join_cb, member.awaiting_join = member.awaiting_join, None
            join_cb(JoinGroupResult.error(errors.FENCED_INSTANCE_ID, old_id))
        if member.awaiting_sync is not None:
            sync_cb, member.awaiting_sync = member.awaiting_sync, None
            sync_cb(SyncGroupResult.error(errors.FENCED_INSTANCE_ID))
        member.member_id = new_id
        group.members[new_id] = member
        group.static_members[instance_id] = new_id
        if old_id in group.pending_sync_members:  # the new id owes the SyncGroup now
            group.pending_sync_members.discard(old_id)
            group.pending_sync_members.add(new_id)
        if old_leader == old_id:
            group.leader_id = new_id
        self.log.info(
            f"Static member with group.instance.id {instance_id} and unknown member id joins group "
            f"{group.group_id} in {group.state.value} state; replacing member {old_id} with {new_id}"
        )
        member.heartbeat_generation += 1
        self.heartbeat_purgatory.check_and_complete(("hb", group.group_id, old_id))  # the old id's expiry
        self._heartbeat(group, member)
        old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        member.protocols, member.awaiting_join = protocols, respond
        member.rebalance_timeout_ms, member.session_timeout_ms = rebalance_timeout_ms, session_timeout_ms
        if group.state is _S.PREPARING_REBALANCE:
            self.join_purgatory.check_and_complete(("join", group.group_id))
            return
        if group.state is _S.COMPLETING_REBALANCE or group.select_protocol() != group.protocol_name:
            self._prepare_rebalance(group, f"static member {new_id} with instance id {instance_id} rejoined")
            return
        generation = group.generation_id

        def stored(code: int) -> None:
            with group.lock:
                if member.awaiting_join is not respond:
                    return
                member.awaiting_join = None
                if code != errors.NONE:
                    if group.members.get(new_id) is member and group.generation_id == generation:
                        member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = old
                        del group.members[new_id]
                        member.member_id = old_id
                        group.members[old_id] = member
                        group.static_members[instance_id] = old_id
                        if group.leader_id == new_id:
                            group.leader_id = old_id
                        self._heartbeat(group, member)
                    respond(
                        JoinGroupResult(
                            code,
                            group.generation_id,
                            group.protocol_type,
                            group.protocol_name,
                            old_leader or "",
                            "",
                            False,
                            (),
                        )
                    )
                    return
                resp = self._join_response(group, new_id)
                if skip_assignment_supported:
                    resp = resp._replace(skip_assignment=new_id == group.leader_id)
                else:
                    resp = resp._replace(leader=old_leader or "", members=())
                respond(resp)

        self.manager.store_group(group, stored)

    def _join_response(self, group: GroupMetadata, member_id: str) -> JoinGroupResult:
        """The current generation as ``member_id`` sees it; the leader also gets every member's metadata."""
        leader = member_id == group.leader_id
        protocol = group.protocol_name
        if leader:  # a completed join has a leader only with members, whose generation selected a protocol
            assert protocol is not None
        members = (
            tuple(
                JoinGroupMember(m.member_id, m.group_instance_id, m.metadata_for(protocol))
                for m in group.members.values()
            )
            if leader and protocol is not None
            else ()
        )
        return JoinGroupResult(
            errors.NONE,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            member_id,
            False,
            members,
        )

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.state is _S.COMPLETING_REBALANCE:
            for m in group.members.values():
                m.assignment = b""
                if m.awaiting_sync is not None:
                    cb, m.awaiting_sync = m.awaiting_sync, None
                    cb(SyncGroupResult.error(errors.REBALANCE_IN_PROGRESS))
        was_empty = group.state is _S.EMPTY
        group.transition_to(_S.PREPARING_REBALANCE, self.time.milliseconds())
        group.pending_sync_members.clear()  # Kafka's removeSyncExpiration
        self.join_purgatory.check_and_complete(("sync", group.group_id))
        self.log.info(
            f"Preparing to rebalance group {group.group_id} in state PreparingRebalance with old "
            f"generation {group.generation_id} (reason: {reason})"
        )
        if was_empty and self.initial_delay_ms > 0:  # InitialDelayedJoin: the first members wait the delay
            op = DelayedJoin(
                self,
                group,
                self.initial_delay_ms,
                initial=True,
                remaining_ms=max(group.rebalance_timeout_ms() - self.initial_delay_ms, 0),
            )
        else:
            op = DelayedJoin(self, group, group.rebalance_timeout_ms())
        self.join_purgatory.try_complete_else_watch(op, [("join", group.group_id)])

    def on_complete_initial_join(self, op: DelayedJoin) -> None:
        """The initial delay passed: when members joined meanwhile, wait again (at most the configured
        delay, within the rebalance timeout), else complete the join (Kafka's ``InitialDelayedJoin``)."""
        group = op.group
        with group.lock:
            if group.state is _S.PREPARING_REBALANCE and group.new_member_added and op.remaining_ms != 0:
                group.new_member_added = False
                delay = min(self.initial_delay_ms, op.remaining_ms)
                nxt = DelayedJoin(self, group, delay, initial=True, remaining_ms=max(op.remaining_ms - op.delay_ms, 0))
                self.join_purgatory.try_complete_else_watch(nxt, [("join", group.group_id)])
                return
        self.on_complete_join(group)

    def try_complete_join(self, group: GroupMetadata, force_complete) -> bool:
        with group.lock:
            if group.all_members_joined() and group.members:
                return force_complete()
            return False

    def on_complete_join(self, group: GroupMetadata) -> None:
        with group.lock:
            if group.state is not _S.PREPARING_REBALANCE:
                return
            # dynamic members that did not rejoin are dropped; static ones keep their place (KIP-345)
            for m in [m for m in group.members.values() if m.awaiting_join is None and not m.group_instance_id]:
                self._remove_member(group, m.member_id, rebalance=False)
            group.pending_members.clear()
            joined = [m.member_id for m in group.members.values() if m.awaiting_join is not None]
            if group.members and not joined:
                self.log.error(f"Group {group.group_id} could not complete rebalance because no members rejoined")
                op = DelayedJoin(self, group, group.rebalance_timeout_ms())
                self.join_purgatory.try_complete_else_watch(op, [("join", group.group_id)])
                return
            if group.leader_id not in joined and joined:
                group.leader_id = joined[0]  # maybeElectNewJoinedLeader
            group.new_member_added = False
            group.init_next_generation(self.time.milliseconds())
            if group.state is _S.EMPTY:
                self.manager.store_group(group, lambda code: None)
                return
            self.log.info(
                f"Stabilized group {group.group_id} generation {group.generation_id} with {len(group.members)} members"
            )
            for m in group.members.values():
                cb, m.awaiting_join = m.awaiting_join, None
                if cb is not None:
                    cb(self._join_response(group, m.member_id))
                self._heartbeat(group, m)
                group.pending_sync_members.add(m.member_id)
            sync = DelayedSync(self, group, group.generation_id, group.rebalance_timeout_ms())
            self.join_purgatory.try_complete_else_watch(sync, [("sync", group.group_id)])

    def try_complete_pending_sync(self, group: GroupMetadata, generation_id: int, force_complete) -> bool:
        """DelayedSync's check (Kafka's ``tryCompletePendingSync``): done once every member synced, or the
        group left that generation or the CompletingRebalance/Stable states."""
        with group.lock:
            if generation_id != group.generation_id or group.state not in (_S.COMPLETING_REBALANCE, _S.STABLE):
                return force_complete()
            if not group.pending_sync_members:
                return force_complete()
            return False

    def on_expire_pending_sync(self, group: GroupMetadata, generation_id: int) -> None:
        """The rebalance timeout passed after the join (Kafka's ``onExpirePendingSync``): members of that
        generation that sent no SyncGroup are removed and the group rebalances."""
        with group.lock:
            if generation_id != group.generation_id or group.state not in (_S.COMPLETING_REBALANCE, _S.STABLE):
                return
            pending = sorted(group.pending_sync_members)
            if not pending:
                return
            for member_id in pending:
                member = group.remove(member_id)
                if member is not None:
                    member.heartbeat_generation += 1
                    self.heartbeat_purgatory.check_and_complete(("hb", group.group_id, member_id))
            self.log.info(f"Group {group.group_id} removed members who haven't sent their sync request: {pending}")
            self._prepare_rebalance(group, f"Removing {pending} on pending sync request expiration")

    # -- SyncGroup -------------------------------------------------------------------------------------
    def handle_sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        respond: SyncCallback,
    ) -> None:
        """SyncGroup (``GroupCoordinator.handleSyncGroup``): ``respond(SyncGroupResult)`` once.
        Errors: COORDINATOR_NOT_AVAILABLE, FENCED_INSTANCE_ID (checked before) UNKNOWN_MEMBER_ID,
        ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL, REBALANCE_IN_PROGRESS."""

        def error(code: int) -> None:
            respond(SyncGroupResult.error(code))

        try:
            group = self.manager.get_group(group_id)
        except errors.CoordinatorLoadInProgressError:
            # The rebalance's state was lost with the previous coordinator: the member rejoins, without
            # looking the coordinator up again (Kafka; older clients do not expect the loading error).
            return error(errors.REBALANCE_IN_PROGRESS)
        if group is None:
            return error(errors.UNKNOWN_MEMBER_ID)
        with group.lock:
            if group.state is _S.DEAD:
                return error(errors.COORDINATOR_NOT_AVAILABLE)
            if group.share_group is not None:
                return error(errors.INCONSISTENT_GROUP_PROTOCOL)
            if group.consumer_group is not None:
                self.consumer.classic_sync(
                    group, generation_id, member_id, instance_id, protocol_type, protocol_name, respond
                )
                return None
            code = self._validate_current_member(group, member_id, instance_id)
            if code is not None:
                return error(code)
            member = group.members[member_id]
            if generation_id != group.generation_id:
                return error(errors.ILLEGAL_GENERATION)
            if (protocol_type and protocol_type != group.protocol_type) or (
                protocol_name and protocol_name != group.protocol_name
            ):
                return error(errors.INCONSISTENT_GROUP_PROTOCOL)
            if group.state is _S.EMPTY:
                return error(errors.UNKNOWN_MEMBER_ID)
            if group.state is _S.PREPARING_REBALANCE:
                return error(errors.REBALANCE_IN_PROGRESS)
            self._heartbeat(group, member)
            group.pending_sync_members.discard(member_id)
            self.join_purgatory.check_and_complete(("sync", group_id))
            if group.state is _S.STABLE:
                respond(self._sync_response(group, member))
                return None
            member.awaiting_sync = respond
            if member_id == group.leader_id:
                for m in group.members.values():
                    m.assignment = assignments.get(m.member_id, b"")
                generation = group.generation_id

                def stored(code: int) -> None:
                    with group.lock:
                        if group.state is not _S.COMPLETING_REBALANCE or group.generation_id != generation:
                            return
                        if code != errors.NONE:
                            self._prepare_rebalance(group, f"storing the group failed: {errors.name_of(code)}")
                            return
                        group.transition_to(_S.STABLE, self.time.milliseconds())
                        self.manager.coordinator_metrics.record(cm.CLASSIC_REBALANCES)
                        for m in group.members.values():
                            if m.awaiting_sync is not None:
                                cb, m.awaiting_sync = m.awaiting_sync, None
                                cb(self._sync_response(group, m))

                self.manager.store_group(group, stored)
        return None

    @staticmethod
    def _sync_response(group: GroupMetadata, member: MemberMetadata) -> SyncGroupResult:
        return SyncGroupResult(errors.NONE, group.protocol_type, group.protocol_name, member.assignment)

    # -- Heartbeat / LeaveGroup / expiry -----------------------------------------------------------------
    def handle_heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int) -> int:
        """Heartbeat (``GroupCoordinator.handleHeartbeat``): the error code. Errors: COORDINATOR_NOT_AVAILABLE,
        FENCED_INSTANCE_ID (checked before) UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS,
        NOT_COORDINATOR; NONE while the group's partition loads (Kafka answers "blindly")."""
        try:
            group = self.manager.get_group(group_id)
        except errors.CoordinatorLoadInProgressError:
            return errors.NONE
        if group is None:
            return errors.UNKNOWN_MEMBER_ID
        with group.lock:
            if group.state is _S.DEAD:
                return errors.COORDINATOR_NOT_AVAILABLE
            if group.share_group is not None:
                return errors.INCONSISTENT_GROUP_PROTOCOL
            if group.consumer_group is not None:
                return self.consumer.classic_heartbeat(group, member_id, instance_id, generation_id)
            code = self._validate_current_member(group, member_id, instance_id)
            if code is not None:
                return code
            if generation_id != group.generation_id:
                return errors.ILLEGAL_GENERATION
            if group.state is _S.EMPTY:
                return errors.UNKNOWN_MEMBER_ID
            self._heartbeat(group, group.members[member_id])
            return errors.REBALANCE_IN_PROGRESS if group.state is _S.PREPARING_REBALANCE else errors.NONE

    def handle_leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> LeaveGroupResult:
        """LeaveGroup (``GroupCoordinator.handleLeaveGroup``): the top-level error and the per-member errors for
        ``[(member id, group instance id)]``; an empty member id removes the static member of that instance
        id. Errors: COORDINATOR_NOT_AVAILABLE (top level), FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID."""
        group = self.manager.get_group(group_id)
        if group is None:
            return LeaveGroupResult(errors.NONE, [errors.UNKNOWN_MEMBER_ID] * len(members))
        codes = []
        with group.lock:
            if group.state is _S.DEAD:
                return LeaveGroupResult(
                    errors.COORDINATOR_NOT_AVAILABLE, [errors.COORDINATOR_NOT_AVAILABLE] * len(members)
                )
            if group.share_group is not None:
                return LeaveGroupResult(errors.NONE, [errors.UNKNOWN_MEMBER_ID] * len(members))
            if group.consumer_group is not None:
                return LeaveGroupResult(errors.NONE, self.consumer.classic_leave(group, members))
            for member_id, instance_id in members:
                if not member_id:  # administrative removal by group.instance.id
                    member_id = group.static_members.get(instance_id or "", "")
                    code = errors.NONE if member_id else errors.UNKNOWN_MEMBER_ID
                elif member_id in group.pending_members:
                    group.pending_members.discard(member_id)
                    self.heartbeat_purgatory.check_and_complete(("hb", group_id, member_id))
                    if group.state is _S.PREPARING_REBALANCE:
                        self.join_purgatory.check_and_complete(("join", group_id))
                    codes.append(errors.NONE)
                    continue
                else:
                    invalid = self._validate_current_member(group, member_id, instance_id)
                    code = errors.NONE if invalid is None else invalid
                if code == errors.NONE:
                    self.log.info(f"Member {member_id} has left group {group_id} through explicit LeaveGroup")
                    self._remove_member(group, member_id)
                codes.append(code)
        return LeaveGroupResult(errors.NONE, codes)

    def _remove_member(self, group: GroupMetadata, member_id: str, rebalance: bool = True) -> None:
        member = group.remove(member_id)
        if member is None:
            return
        member.heartbeat_generation += 1
        self.heartbeat_purgatory.check_and_complete(("hb", group.group_id, member_id))
        if member.awaiting_join is not None:
            cb, member.awaiting_join = member.awaiting_join, None
            cb(JoinGroupResult.error(errors.UNKNOWN_MEMBER_ID, member_id))
        if not rebalance:
            return
        if group.state in (_S.STABLE, _S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"removing member {member_id}")
        elif group.state is _S.PREPARING_REBALANCE:
            self.join_purgatory.check_and_complete(("join", group.group_id))

    def _heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_generation += 1
        self.heartbeat_purgatory.check_and_complete(("hb", group.group_id, member.member_id))
        self._schedule_heartbeat(group, member.member_id, member.heartbeat_generation, member.session_timeout_ms)

    def _schedule_heartbeat(self, group, member_id: str, heartbeat_generation: int, timeout_ms: int) -> None:
        op = DelayedHeartbeat(self, group, member_id, heartbeat_generation, timeout_ms)
        self.heartbeat_purgatory.try_complete_else_watch(op, [("hb", group.group_id, member_id)])

    def heartbeat_superseded(self, group: GroupMetadata, member_id: str, heartbeat_generation: int) -> bool:
        with group.lock:
            member = group.members.get(member_id)
            if member is None:
                return member_id not in group.pending_members
            return member.heartbeat_generation != heartbeat_generation

    def on_expire_heartbeat(self, group: GroupMetadata, member_id: str, heartbeat_generation: int) -> None:
        with group.lock:
            if group.state is _S.DEAD:
                return  # unloaded or deleted: nothing to expire here
            if member_id in group.pending_members and member_id not in group.members:
                group.pending_members.discard(member_id)
                self.join_purgatory.check_and_complete(("join", group.group_id))
                return
            member = group.members.get(member_id)
            if member is None or member.heartbeat_generation != heartbeat_generation:
                return
            if member.awaiting_join is not None and group.state is _S.PREPARING_REBALANCE:
                return  # waiting in a join: the rebalance timeout governs it
            self.log.info(f"Member {member_id} in group {group.group_id} has failed, removing it from the group")
            self._remove_member(group, member_id)

    # -- offsets ----------------------------------------------------------------------------------------
    def _split_oversized_metadata(self, offsets: dict) -> tuple[dict, dict]:
        """(offsets to store, {tp: OFFSET_METADATA_TOO_LARGE}): metadata longer than ``offset.metadata.max.bytes``
        (UTF-8 bytes) is refused per partition, as Kafka's ``validateOffsetMetadataLength``."""
        too_large = {tp for tp, o in offsets.items() if len((o.metadata or "").encode()) > self.max_metadata_bytes}
        valid = {tp: o for tp, o in offsets.items() if tp not in too_large}
        return valid, {tp: errors.OFFSET_METADATA_TOO_LARGE for tp in too_large}

    def handle_commit_offsets(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        respond: CommitCallback,
        api_version: int | None = None,
    ) -> None:
        """OffsetCommit (``GroupCoordinator.handleCommitOffsets``): ``respond({(topic, partition): error})``.
        Errors: INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE, FENCED_INSTANCE_ID (checked before)
        UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, OFFSET_METADATA_TOO_LARGE. For a consumer
        (KIP-848) group ``generation_id`` is the member epoch: UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH,
        UNSUPPORTED_VERSION (``api_version`` < 9 from a member), see
        :meth:`ConsumerGroupHeartbeatHandler.validate_offset_commit`."""

        def all_error(code: int) -> None:
            respond({tp: code for tp in offsets})

        if not group_id:
            return all_error(errors.INVALID_GROUP_ID)
        group = self.manager.get_group(group_id, create=generation_id < 0 and not member_id)
        if group is None:
            return all_error(errors.ILLEGAL_GENERATION if generation_id >= 0 else errors.UNKNOWN_MEMBER_ID)
        with group.lock:
            if group.state is _S.DEAD:
                return all_error(errors.COORDINATOR_NOT_AVAILABLE)
            if group.share_group is not None:  # a share group's progress is its share partitions' state
                return all_error(errors.GROUP_ID_NOT_FOUND)
            if group.consumer_group is not None:
                code = self.consumer.validate_offset_commit(group.consumer_group, member_id, generation_id, api_version)
                if code is not None:
                    return all_error(code)
            elif generation_id < 0 and group.state is _S.EMPTY:
                pass  # a simple consumer or the admin client: commits are accepted while the group is Empty
            elif generation_id < 0 and not member_id and not instance_id:
                return all_error(errors.UNKNOWN_MEMBER_ID)  # only members commit to a non-empty group
            else:
                code = self._validate_current_member(group, member_id, instance_id)
                if code is not None:
                    return all_error(code)
                if generation_id != group.generation_id:
                    return all_error(errors.ILLEGAL_GENERATION)
                if group.state is _S.COMPLETING_REBALANCE:
                    return all_error(errors.REBALANCE_IN_PROGRESS)
                self._heartbeat(group, group.members[member_id])
        valid, result = self._split_oversized_metadata(offsets)
        if not valid:
            return respond(result)

        def stored(code: int) -> None:
            if code == errors.NONE:
                self.manager.coordinator_metrics.record(cm.OFFSET_COMMITS, len(valid))
            result.update({tp: code for tp in valid})
            respond(result)

        self.manager.store_offsets(group, valid, stored)
        return None

    def handle_txn_commit_offsets(
        self,
        group_id: str,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        respond: CommitCallback,
        transaction_abortable_supported: bool = False,
    ) -> None:
        """TxnOffsetCommit (``GroupCoordinator.handleTxnCommitOffsets``): the offsets are written in the
        producer's transaction and applied by its COMMIT marker. ``respond({(topic, partition): error})``
        once, maybe on the transaction verifier's thread. Kafka's order: INVALID_GROUP_ID; the partition's
        status (raised: COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR); the transaction's verification
        when the producer has none open on the group's partition yet (KIP-890 part 1; see
        :meth:`GroupMetadataManager.maybe_start_transaction_verification`: an unknown producer id or
        transactional id is INVALID_PRODUCER_ID_MAPPING, a partition not added by AddOffsetsToTxn
        INVALID_TXN_STATE, or TRANSACTION_ABORTABLE with ``transaction_abortable_supported`` (v4+));
        then the member (KIP-447, :meth:`_validate_txn_offset_commit`); OFFSET_METADATA_TOO_LARGE per
        partition; the append's errors (INVALID_PRODUCER_EPOCH, ...)."""

        def all_error(code: int) -> None:
            respond({tp: code for tp in offsets})

        if not group_id:
            return all_error(errors.INVALID_GROUP_ID)
        self.manager.validate_group_status(group_id)

        def verified(code: int, guard) -> None:
            if code != errors.NONE:
                return all_error(code)
            try:
                group = self.manager.get_group(group_id, create=True)  # resigned meanwhile: raises
            except errors.KafkaError as e:
                return all_error(e.code)
            if group is None:
                return all_error(errors.COORDINATOR_NOT_AVAILABLE)
            with group.lock:
                invalid = self._validate_txn_offset_commit(group, generation_id, member_id, instance_id)
            if invalid is not None:
                return all_error(invalid)
            valid, result = self._split_oversized_metadata(offsets)
            if not valid:
                return respond(result)

            def stored(code: int) -> None:
                result.update({tp: code for tp in valid})
                respond(result)

            self.manager.store_transactional_offsets(group, producer_id, producer_epoch, valid, stored, guard)
            return None

        self.manager.maybe_start_transaction_verification(
            group_id, transactional_id, producer_id, producer_epoch, verified, transaction_abortable_supported
        )
        return None

    def _validate_txn_offset_commit(
        self, group: GroupMetadata, generation_id: int, member_id: str, instance_id: str | None
    ) -> int | None:
        """Kafka's ``validateOffsetCommit`` for a transactional commit (group lock held): COORDINATOR_NOT_AVAILABLE
        for a Dead group; an Empty group takes commits of generation -1; a request that names a member
        (generation >= 0, a member id or a group instance id) must be the current member (FENCED_INSTANCE_ID,
        UNKNOWN_MEMBER_ID) of the current generation (ILLEGAL_GENERATION); one that names none is accepted
        (TxnOffsetCommit before v3 carries no member)."""
        if group.state is _S.DEAD:
            return errors.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.state is _S.EMPTY:
            return None
        if generation_id >= 0 or member_id or instance_id is not None:
            if instance_id is not None:
                current = group.static_members.get(instance_id)
                if current is None:
                    return errors.UNKNOWN_MEMBER_ID
                if current != member_id:
                    return errors.FENCED_INSTANCE_ID
            elif member_id not in group.members:
                return errors.UNKNOWN_MEMBER_ID
            if generation_id != group.generation_id:
                return errors.ILLEGAL_GENERATION
        return None

    def schedule_handle_txn_completion(self, producer_id: int, partitions: set[int], commit: bool) -> None:
        """Markers of ``producer_id`` reached these ``__consumer_offsets`` partitions."""
        self.manager.handle_txn_completion(producer_id, partitions, commit)

    def handle_fetch_offsets(
        self, group_id: str, tps: list[TopicPartition] | None, member_id: str | None = None, member_epoch: int = -1
    ) -> FetchedOffsets:
        """The committed offset of each of ``tps`` (None where there is none); ``tps`` None = every committed
        offset. For a consumer (KIP-848) group, OffsetFetch v9+'s member id and epoch are checked: raises
        UnknownMemberIdError or StaleMemberEpochError (Kafka's ``ConsumerGroup.validateOffsetFetch``)."""
        group = self.manager.get_group(group_id)
        if group is None:
            return {} if tps is None else {tp: None for tp in tps}
        with group.lock:
            if group.share_group is not None:
                raise errors.GroupIdNotFoundError(f"Group {group_id} is not a consumer group.")
            if group.consumer_group is not None:
                code = self.consumer.validate_offset_fetch(group.consumer_group, member_id, member_epoch)
                if code is not None:
                    raise errors.for_code(code)()
            if tps is None:
                return dict(group.offsets)
            return {tp: group.offsets.get(tp) for tp in tps}

    def unstable_partitions(self, group_id: str, tps) -> set[tuple[str, int]]:
        """The partitions of ``tps`` for which an open transaction holds an offset: OffsetFetch with
        ``require_stable`` answers them UNSTABLE_OFFSET_COMMIT (KIP-447; the client retries)."""
        group = self.manager.get_group(group_id)
        if group is None:
            return set()
        with group.lock:
            if not group.pending_transactional_offsets:
                return set()
            return {tp for tp in tps if group.has_pending_offset_commits(tp)}

    def handle_delete_offsets(
        self, group_id: str, tps: list[TopicPartition], respond: Callable[[int, PartitionErrors], None]
    ) -> None:
        """OffsetDelete (``GroupCoordinator.handleDeleteOffsets``): ``respond(group error, {(topic,
        partition): error})``. Group errors: GROUP_ID_NOT_FOUND (no such group, or Dead), NON_EMPTY_GROUP
        (an active group whose protocol type is not ``consumer``). Partition errors:
        GROUP_SUBSCRIBED_TO_TOPIC while an active consumer group subscribes to the topic."""
        group = self.manager.get_group(group_id)
        if group is None:
            return respond(errors.GROUP_ID_NOT_FOUND, {})
        with group.lock:
            if group.state is _S.DEAD or group.share_group is not None:
                return respond(errors.GROUP_ID_NOT_FOUND, {})
            if group.consumer_group is not None:
                subscribed = set(group.consumer_group.subscription_metadata)
            elif group.state is _S.EMPTY:
                subscribed = set()
            elif group.protocol_type == "consumer":
                subscribed = self._subscribed_topics(group)
            else:
                return respond(errors.NON_EMPTY_GROUP, {})
        result = {tp: errors.GROUP_SUBSCRIBED_TO_TOPIC for tp in tps if tp[0] in subscribed}
        deletable = [tp for tp in tps if tp not in result]

        def deleted(code: int) -> None:
            if code == errors.NONE:
                self.manager.coordinator_metrics.record(cm.OFFSET_DELETIONS, len(deletable))
            result.update({tp: code for tp in deletable})
            respond(errors.NONE, result)

        self.manager.delete_offsets(group, deletable, deleted)
        return None

    @staticmethod
    def _subscribed_topics(group: GroupMetadata) -> set[str]:
        """Topics in the members' ConsumerProtocolSubscription (version int16, topics [string])."""
        import struct

        topics: set[str] = set()
        if group.protocol_type != "consumer" or not group.protocol_name:
            return {t for t, _ in group.offsets}  # unknown protocol: treat every committed topic as in use
        for m in group.members.values():
            try:
                data = m.metadata_for(group.protocol_name)
                pos = 2
                (n,) = struct.unpack_from(">i", data, pos)
                pos += 4
                for _ in range(n):
                    (length,) = struct.unpack_from(">h", data, pos)
                    topics.add(data[pos + 2 : pos + 2 + length].decode())
                    pos += 2 + length
            except (KeyError, struct.error, UnicodeDecodeError):
                continue
        return topics

    # -- admin ------------------------------------------------------------------------------------------
    def describe_group(self, group_id: str) -> dict:
        group = self.manager.get_group(group_id)
        if group is None:
            return {
                "error_code": errors.NONE,
                "group_id": group_id,
                "group_state": "Dead",
                "protocol_type": "",
                "protocol_data": "",
                "members": [],
            }
        with group.lock:
            if group.consumer_group is not None or group.share_group is not None:
                # Kafka 4: DescribeGroups describes classic groups only
                return {
                    "error_code": errors.NONE,
                    "error_message": f"Group {group_id} is not a classic group.",
                    "group_id": group_id,
                    "group_state": "Dead",
                    "protocol_type": "",
                    "protocol_data": "",
                    "members": [],
                }
            stable = group.state is _S.STABLE
            protocol = group.protocol_name  # set in every generation with members, so whenever STABLE
            members = [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata_for(protocol) if stable and protocol is not None else b"",
                    "member_assignment": m.assignment if stable else b"",
                }
                for m in group.members.values()
            ]
            return {
                "error_code": errors.NONE,
                "group_id": group_id,
                "group_state": group.state.value,
                "protocol_type": group.protocol_type or "",
                "protocol_data": group.protocol_name if stable else "",
                "members": members,
            }

    def list_groups(self, states: list[str]) -> tuple[int, list[dict]]:
        """ListGroups (``GroupCoordinator.handleListGroups``): ``(error code, groups)`` of the partitions
        loaded here, filtered by state (case-insensitive); COORDINATOR_LOAD_IN_PROGRESS while a partition
        loads (with the groups loaded so far)."""
        code = errors.COORDINATOR_LOAD_IN_PROGRESS if self.manager.is_loading else errors.NONE
        wanted = {s.lower() for s in states}
        out = []
        for g in self.manager.all_groups():
            with g.lock:
                if g.state is _S.DEAD:
                    continue
                if g.share_group is not None:
                    if g.share_group.dead:
                        continue
                    state, protocol_type = g.share_group.state, "share"
                elif g.consumer_group is not None:
                    state, protocol_type = g.consumer_group.state, "consumer"
                else:
                    state, protocol_type = g.state.value, g.protocol_type or ""
                if wanted and state.lower() not in wanted:
                    continue
                out.append(
                    {
                        "group_id": g.group_id,
                        "protocol_type": protocol_type,
                        "group_state": state,
                        "group_type": g.group_type,
                    }
                )
        return code, out

    def delete_group(self, group_id: str, respond) -> None:
        group = self.manager.get_group(group_id)
        if group is None:
            return respond(errors.GROUP_ID_NOT_FOUND)
        with group.lock:
            if group.share_group is not None and group.share_group.dead:
                return respond(errors.GROUP_ID_NOT_FOUND)
            if group.share_group is not None and not group.share_group.members and group.state is _S.EMPTY:
                group.share_group.dead = True
                self.share_offsets.delete_group_state(group_id, dict(group.share_group.state_topics))
            elif group.state not in (_S.EMPTY, _S.DEAD) or group.is_in_use():
                return respond(errors.NON_EMPTY_GROUP)
            group.transition_to(_S.DEAD, self.time.milliseconds())
            if group.consumer_group is not None:
                group.consumer_group.dead = True
        self.manager.delete_group(group, respond)
        return None
