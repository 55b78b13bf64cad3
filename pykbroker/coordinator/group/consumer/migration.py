"""Online migration between classic and consumer groups (KIP-848; Kafka's ``GroupMetadataManager``:
``convertToConsumerGroup``, ``classicGroupJoinToConsumerGroup``, ``classicGroup{Sync,Heartbeat,Leave}ToConsumerGroup``,
``convertToClassicGroup``; ``group.consumer.migration.policy`` = bidirectional | upgrade | downgrade | disabled).

- **Upgrade**: a consumer-protocol member joining (ConsumerGroupHeartbeat, epoch 0) a non-empty classic group whose
  protocol type is ``consumer`` converts it when the policy allows upgrades and its size is within
  ``group.consumer.max.size``, else GROUP_ID_NOT_FOUND. Pending JoinGroup/SyncGroup responses get
  REBALANCE_IN_PROGRESS; each classic member becomes a member of the consumer group that still speaks the classic
  protocol (:class:`~.member.ClassicMemberMetadata`): epoch = the classic generation, subscription and rack decoded
  from its JoinGroup metadata (ConsumerProtocolSubscription of the group's protocol), assignment and target from its
  SyncGroup assignment (ConsumerProtocolAssignment), session timeout its classic one. The classic group's record is
  tombstoned and the consumer group's records written; the joining member bumps the group epoch, so a rebalance
  towards a new target starts.
- **Classic members of a consumer group** are served through the classic APIs: JoinGroup answers at once with the
  member's epoch as generation (no leader: the member syncs as a follower) after reconciling it (owned partitions
  from its subscription: partitions it still reports are revoked first); SyncGroup returns its assigned partitions
  as a ConsumerProtocolAssignment; Heartbeat answers REBALANCE_IN_PROGRESS when the group epoch is ahead of the
  member's, the member must revoke, or partitions it waits for were released (it must then send its JoinGroup, and
  after a JoinGroup its SyncGroup, within its rebalance timeout, else it is fenced: Kafka's join and sync timeouts);
  LeaveGroup removes it. Errors as
  Kafka's: UNKNOWN_MEMBER_ID (unknown, or a consumer-protocol member), FENCED_INSTANCE_ID, ILLEGAL_GENERATION (a
  generation other than the member epoch), INCONSISTENT_GROUP_PROTOCOL (protocol type not ``consumer``, or no
  protocol every classic member supports), GROUP_MAX_SIZE_REACHED, MEMBER_ID_REQUIRED (JoinGroup v4+).
- **Downgrade**: when the last consumer-protocol member leaves or is fenced and classic members remain (at least
  one, at most ``group.max.size``) and the policy allows downgrades, the group becomes a classic group in Stable
  at generation = group epoch whose members' assignments are their target assignments; the consumer group's
  records are tombstoned, the classic record written, and a classic rebalance starts.

Mixed into :class:`~.heartbeat.ConsumerGroupHeartbeatHandler`; every method runs under the group's lock
(``GroupMetadata.lock``), responses through the caller's ``respond`` callbacks.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import TYPE_CHECKING, Any

from pykbroker.coordinator.group.consumer import consumer_protocol as cp
from pykbroker.coordinator.group.consumer import record_codec
from pykbroker.coordinator.group.consumer import target_assignment_builder as tab
from pykbroker.coordinator.group.consumer.group import ConsumerGroup
from pykbroker.coordinator.group.consumer.member import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
    TopicPartitions,
)
from pykbroker.coordinator.group.consumer.member_timer import ConsumerMemberTimer
from pykbroker.coordinator.group.group_metadata import GroupMetadata, GroupState, MemberMetadata
from pykbroker.coordinator.group.group_results import JoinGroupResult, SyncGroupResult
from pykbroker.protocol import errors

#: ``group.consumer.migration.policy`` -> (upgrade enabled, downgrade enabled), Kafka's ConsumerGroupMigrationPolicy
POLICIES = {
    "disabled": (False, False),
    "upgrade": (True, False),
    "downgrade": (False, True),
    "bidirectional": (True, True),
}


class ClassicMigration:
    """The migration half of the consumer-protocol handler (see module doc). Needs from the handler: ``manager``,
    ``coordinator``, ``max_size``, ``upgrade_enabled``, ``downgrade_enabled``, ``classic_max_size``, ``log`` and
    its ``_topics``/``_topic_names_by_id``/``_update_member``/``_fence``/``persist``/timer methods."""

    manager: Any
    coordinator: Any
    purgatory: Any
    time: Any
    log: Any
    max_size: int
    classic_max_size: int
    upgrade_enabled: bool
    downgrade_enabled: bool

    #: ``(kind, group id, member id)`` -> the token of the member's pending join or sync deadline (see
    #: :meth:`_schedule_classic_deadline`); accessed under the member's group lock
    _classic_deadlines: dict[tuple[str, str, str], object]

    if TYPE_CHECKING:  # provided by ConsumerGroupHeartbeatHandler

        def _topics(self) -> dict[str, tuple[uuid.UUID, int]]: ...
        def _topic_names_by_id(self) -> dict[uuid.UUID, str]: ...
        def _schedule_session_timeout(self, holder: GroupMetadata, member: ConsumerGroupMember) -> None: ...
        def _fence(self, holder: GroupMetadata, group: ConsumerGroup, member_id: str) -> None: ...
        def _fence_or_downgrade(self, holder: GroupMetadata, group: ConsumerGroup, member_id: str) -> None: ...
        def persist(self, holder: GroupMetadata, group: ConsumerGroup | None, callback=None) -> None: ...
        def _update_member(
            self,
            holder: GroupMetadata,
            group: ConsumerGroup,
            member: ConsumerGroupMember,
            updated: ConsumerGroupMember,
            new: bool,
            owned: TopicPartitions | None,
        ) -> ConsumerGroupMember: ...

    # -- upgrade --------------------------------------------------------------------------------------------
    def can_upgrade(self, holder: GroupMetadata) -> bool:
        """Kafka's ``validateOnlineUpgrade`` for a non-empty classic group."""
        if not self.upgrade_enabled:
            self.log.info(f"Cannot upgrade classic group {holder.group_id}: the online upgrade is disabled")
            return False
        if holder.protocol_type != cp.PROTOCOL_TYPE:
            self.log.info(f"Cannot upgrade classic group {holder.group_id}: it does not use the consumer protocol")
            return False
        if len(holder.members) > self.max_size:
            self.log.info(f"Cannot upgrade classic group {holder.group_id}: it has more members than allowed")
            return False
        return True

    def convert_to_consumer_group(self, holder: GroupMetadata) -> ConsumerGroup:
        """Kafka's ``convertToConsumerGroup`` (group lock held): the classic members become classic-protocol members
        of a new consumer group at epoch = generation. GroupIdNotFoundError when a member's embedded protocol is
        malformed (the group stays classic)."""
        topics = self._topics()
        group = ConsumerGroup(holder.group_id)
        group.group_epoch = group.assignment_epoch = holder.generation_id
        members: list[ConsumerGroupMember] = []
        for m in holder.members.values():
            try:
                protocol = holder.protocol_name or m.protocol_names[0]
                sub = cp.decode_subscription(m.metadata_for(protocol))
                assigned = self._to_ids(cp.decode_assignment(m.assignment), topics)
            except (cp.MalformedConsumerProtocol, KeyError, IndexError) as e:
                raise errors.GroupIdNotFoundError(
                    f"Cannot upgrade the classic group {holder.group_id} to consumer group because the embedded "
                    f"consumer protocol is malformed: {e}"
                ) from None
            members.append(
                ConsumerGroupMember(
                    m.member_id,
                    member_epoch=holder.generation_id,
                    previous_member_epoch=holder.generation_id,
                    state=MemberState.STABLE,
                    instance_id=m.group_instance_id,
                    rack_id=sub.rack_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    subscribed_topic_names=tuple(sub.topics),
                    assigned=assigned,
                    classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
                )
            )
        for member in members:
            taken = {(t, p) for t, ps in member.assigned.items() for p in ps if group.partition_epoch(t, p) != -1}
            if taken:  # two classic members claimed a partition (an inconsistent leader): the first keeps it
                member = dataclasses.replace(
                    member,
                    assigned={t: {p for p in ps if (t, p) not in taken} for t, ps in member.assigned.items()},
                )
            group.target[member.member_id] = {t: set(ps) for t, ps in member.assigned.items() if ps}
            group.update_member(member)
        group.subscription_metadata = tab.subscription_metadata(group.members.values(), topics)
        self.log.info(
            f"[GroupId {holder.group_id}] Converting the classic group to a consumer group at epoch "
            f"{group.group_epoch} with {len(group.members)} classic members"
        )
        self._drop_classic_state(holder)
        holder.consumer_group = group
        group.persisted = {}
        self.manager.append(holder.group_id, [(self.manager.group_record(holder)[0], None)], lambda code: None)
        for member in group.members.values():
            self._schedule_session_timeout(holder, member)
        return group

    def _drop_classic_state(self, holder: GroupMetadata) -> None:
        """Answer the classic group's waiting JoinGroup/SyncGroup REBALANCE_IN_PROGRESS and empty it (its classic
        state becomes Empty; its members' timers and delayed joins/syncs find nothing to do)."""
        for m in list(holder.members.values()):
            if m.awaiting_join is not None:
                join_cb, m.awaiting_join = m.awaiting_join, None
                join_cb(JoinGroupResult.error(errors.REBALANCE_IN_PROGRESS, m.member_id))
            if m.awaiting_sync is not None:
                sync_cb, m.awaiting_sync = m.awaiting_sync, None
                sync_cb(SyncGroupResult.error(errors.REBALANCE_IN_PROGRESS))
            m.heartbeat_generation += 1
        ids = list(holder.members) + list(holder.pending_members)
        holder.members.clear()
        holder.static_members.clear()
        holder.pending_members.clear()
        holder.pending_sync_members.clear()
        holder.leader_id = None
        holder.protocol_type = holder.protocol_name = None
        holder.state = GroupState.EMPTY
        holder.state_timestamp = self.time.milliseconds()
        purgatory = self.coordinator.join_purgatory
        purgatory.check_and_complete(("join", holder.group_id))
        purgatory.check_and_complete(("sync", holder.group_id))
        for member_id in ids:
            self.coordinator.heartbeat_purgatory.check_and_complete(("hb", holder.group_id, member_id))

    @staticmethod
    def _to_ids(partitions: dict[str, set[int]], topics) -> TopicPartitions:
        """``{topic name: partitions}`` as ``{topic id: partitions}``; topics or partitions that do not exist are
        left out."""
        out: TopicPartitions = {}
        for name, parts in partitions.items():
            if name in topics:
                tid, n = topics[name]
                kept = {p for p in parts if 0 <= p < n}
                if kept:
                    out[tid] = kept
        return out

    # -- classic members of a consumer group -------------------------------------------------------------------
    @staticmethod
    def supports_classic_protocols(group: ConsumerGroup, protocol_type: str, names: list[str]) -> bool:
        """Kafka's ``ConsumerGroup.supportsClassicProtocols``: type ``consumer`` and a protocol that every classic
        member supports (any, when the group has no classic member)."""
        if protocol_type != cp.PROTOCOL_TYPE or not names:
            return False
        classic = [m.classic for m in group.members.values() if m.classic is not None]
        return any(all(n in [p for p, _ in c.protocols] for c in classic) for n in names)

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        """Kafka's ``validateConsumerGroupMember`` + ``throwIfMemberDoesNotUseClassicProtocol``."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise errors.UnknownMemberIdError(f"Member {member_id} is not a member of group {group.group_id}.")
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise errors.UnknownMemberIdError(f"Member with instance id {instance_id} is not a member.")
            if member.member_id != member_id:
                raise errors.FencedInstanceIdError(f"Static member {member_id} ({instance_id}) was fenced.")
        if member.classic is None:
            raise errors.UnknownMemberIdError(f"Member {member.member_id} does not use the classic protocol.")
        return member

    def classic_join(
        self,
        holder: GroupMetadata,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        version: int,
        respond,
    ) -> None:
        """A JoinGroup to a non-empty consumer group (Kafka's ``classicGroupJoinToConsumerGroup``); ``respond`` once
        the group's records are appended (their error mapped as Kafka's) or at once with an error."""
        group = holder.consumer_group
        assert group is not None
        unknown = not member_id
        if unknown:
            member_id = str(uuid.uuid4())
        if member_id not in group.members and len(group.members) >= self.max_size:
            return respond(JoinGroupResult.error(errors.GROUP_MAX_SIZE_REACHED, member_id))
        if not self.supports_classic_protocols(group, protocol_type, [p for p, _ in protocols]):
            return respond(JoinGroupResult.error(errors.INCONSISTENT_GROUP_PROTOCOL, member_id))
        if unknown and instance_id is None and version >= 4:
            return respond(JoinGroupResult.error(errors.MEMBER_ID_REQUIRED, member_id))
        try:
            sub = cp.decode_subscription(protocols[0][1])
        except cp.MalformedConsumerProtocol:
            return respond(JoinGroupResult.error(errors.UNKNOWN_SERVER_ERROR, member_id))
        topics = self._topics()
        member = group.members.get(member_id)
        if instance_id is not None:
            static = group.static_member(instance_id)
            if static is not None and static.member_id != member_id:
                if not unknown:
                    return respond(JoinGroupResult.error(errors.FENCED_INSTANCE_ID, member_id))
                self.log.info(
                    f"[GroupId {group.group_id}] Static member with instance id {instance_id} re-joins the consumer "
                    f"group with the classic protocol, replacing {static.member_id} by {member_id}."
                )
                member = dataclasses.replace(static, member_id=member_id, pending_revocation={})
                group.replace_static_member(static, member)
        new = member is None
        if member is None:
            self.log.info(f"[GroupId {group.group_id}] Member {member_id} joins the consumer group (classic protocol)")
            member = ConsumerGroupMember(member_id)
        updated = dataclasses.replace(
            member,
            instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=sub.rack_id if sub.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms if rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
            subscribed_topic_names=tuple(sub.topics),
            subscribed_topic_regex=None,
            client_id=client_id,
            client_host=client_host,
            classic=ClassicMemberMetadata(session_timeout_ms, tuple(protocols)),
        )
        owned = self._to_ids(sub.owned_partitions, topics)
        reconciled = self._update_member(holder, group, member, updated, new, owned)
        protocol_name = protocols[0][0]

        def appended(code: int) -> None:
            if code != errors.NONE:
                return respond(JoinGroupResult.error(code, member_id))
            with holder.lock:
                if holder.consumer_group is group and member_id in group.members:
                    self._cancel_classic_deadline(holder, member_id, "join")
                    self._schedule_classic_deadline(holder, member_id, "sync", rebalance_timeout_ms)
            return respond(
                JoinGroupResult(
                    errors.NONE, reconciled.member_epoch, cp.PROTOCOL_TYPE, protocol_name, "", member_id, False, ()
                )
            )

        self.persist(holder, group, appended)
        return None

    def classic_sync(
        self,
        holder: GroupMetadata,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        respond,
    ) -> None:
        """A SyncGroup to a consumer group (Kafka's ``classicGroupSyncToConsumerGroup``): the member's assigned
        partitions as a ConsumerProtocolAssignment of its subscription's version."""

        def error(code: int) -> None:
            respond(SyncGroupResult.error(code))

        group = holder.consumer_group
        assert group is not None
        try:
            member = self._classic_member(group, member_id, instance_id)
        except errors.KafkaError as e:
            return error(e.code)
        assert member.classic is not None
        if generation_id != member.member_epoch:
            return error(errors.ILLEGAL_GENERATION)
        name = member.classic.protocols[0][0]
        if (protocol_type is not None and protocol_type != cp.PROTOCOL_TYPE) or (
            protocol_name is not None and protocol_name != name
        ):
            return error(errors.INCONSISTENT_GROUP_PROTOCOL)
        if self._must_rejoin(group, member, strict=False):
            self._schedule_classic_deadline(holder, member.member_id, "join", member.rebalance_timeout_ms, True)
            return error(errors.REBALANCE_IN_PROGRESS)
        self._cancel_classic_deadline(holder, member.member_id, "sync")
        self._schedule_session_timeout(holder, member)
        names = self._topic_names_by_id()
        partitions = {names[t]: ps for t, ps in member.assigned.items() if t in names}
        version = cp.decode_version(member.classic.protocols[0][1])
        return respond(SyncGroupResult(errors.NONE, cp.PROTOCOL_TYPE, name, cp.encode_assignment(partitions, version)))

    @staticmethod
    def _must_rejoin(group: ConsumerGroup, member: ConsumerGroupMember, strict: bool) -> bool:
        """Kafka's ``throwIfRebalanceInProgress`` (``strict`` False, SyncGroup) / the Heartbeat's rejoin condition
        (``strict`` True): the group epoch is ahead of the member's (and, for SyncGroup, it is not revoking), or
        (Heartbeat) it must revoke, or the partitions it waits for were released."""
        if not strict:
            return group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS
        if member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS:
            return True
        if member.state is MemberState.UNRELEASED_PARTITIONS:
            target = group.target.get(member.member_id, {})
            pending = [(t, p) for t, ps in target.items() for p in ps - member.assigned.get(t, set())]
            waiting = any(group.partition_epoch(t, p) != -1 for t, p in pending)
            return not waiting
        return False

    def classic_heartbeat(self, holder: GroupMetadata, member_id: str, instance_id: str | None, generation_id: int):
        """A Heartbeat to a consumer group (Kafka's ``classicGroupHeartbeatToConsumerGroup``): the error code."""
        group = holder.consumer_group
        assert group is not None
        try:
            member = self._classic_member(group, member_id, instance_id)
        except errors.KafkaError as e:
            return e.code
        if generation_id != member.member_epoch:
            return errors.ILLEGAL_GENERATION
        self._schedule_session_timeout(holder, member)
        if self._must_rejoin(group, member, strict=True):
            self._schedule_classic_deadline(holder, member_id, "join", member.rebalance_timeout_ms, True)
            return errors.REBALANCE_IN_PROGRESS
        return errors.NONE

    def classic_leave(self, holder: GroupMetadata, members: list[tuple[str, str | None]]) -> list[int]:
        """A LeaveGroup to a consumer group (Kafka's ``classicGroupLeaveToConsumerGroup``): per-member error codes;
        each classic member named leaves (an empty member id with an instance id: administrative removal)."""
        group = holder.consumer_group
        assert group is not None
        codes = []
        for member_id, instance_id in members:
            try:
                if instance_id is not None:
                    member = group.static_member(instance_id)
                    if member is None:
                        raise errors.UnknownMemberIdError(f"Instance id {instance_id} is unknown.")
                    if member_id and member.member_id != member_id:
                        raise errors.FencedInstanceIdError(f"Static member {member_id} ({instance_id}) was fenced.")
                    if member.classic is None:
                        raise errors.UnknownMemberIdError(f"Member {member.member_id} does not use classic protocol.")
                else:
                    member = self._classic_member(group, member_id, None)
            except errors.KafkaError as e:
                codes.append(e.code)
                continue
            self.log.info(f"[GroupId {group.group_id}] Member {member.member_id} has left group through LeaveGroup")
            self._fence(holder, group, member.member_id)
            codes.append(errors.NONE)
        self.persist(holder, group)
        return codes

    def _schedule_classic_deadline(
        self, holder: GroupMetadata, member_id: str, kind: str, timeout_ms: int, if_absent: bool = False
    ) -> None:
        """Kafka's ``scheduleConsumerGroupJoinTimeoutIfAbsent`` (``kind`` ``join``: a classic member told to rejoin
        must send its JoinGroup within its rebalance timeout) and ``scheduleConsumerGroupSyncTimeout`` (``sync``:
        its SyncGroup after a JoinGroup): past ``timeout_ms`` the member is fenced (maybe downgrading the group)."""
        key = (kind, holder.group_id, member_id)
        if if_absent and key in self._classic_deadlines:
            return
        token = object()
        self._classic_deadlines[key] = token

        def superseded() -> bool:
            group = holder.consumer_group
            return self._classic_deadlines.get(key) is not token or group is None or member_id not in group.members

        def expire() -> None:
            if holder.state is GroupState.DEAD or superseded():
                return
            self._classic_deadlines.pop(key, None)
            self.log.info(
                f"[GroupId {holder.group_id}] Member {member_id} fenced from the group because the classic member "
                f"failed to {kind} within {timeout_ms} ms."
            )
            group = holder.consumer_group
            assert group is not None  # not superseded
            self._fence_or_downgrade(holder, group, member_id)

        self.purgatory.try_complete_else_watch(
            ConsumerMemberTimer(holder, max(timeout_ms, 0), superseded, expire), [key]
        )

    def _cancel_classic_deadline(self, holder: GroupMetadata, member_id: str, kind: str) -> None:
        key = (kind, holder.group_id, member_id)
        if self._classic_deadlines.pop(key, None) is not None:
            self.purgatory.check_and_complete(key)

    def _drop_classic_deadlines(self, holder: GroupMetadata, member_id: str) -> None:
        """The member left or was fenced: its join/sync deadlines go."""
        for kind in ("join", "sync"):
            self._cancel_classic_deadline(holder, member_id, kind)

    # -- downgrade ------------------------------------------------------------------------------------------
    def maybe_downgrade(self, holder: GroupMetadata, group: ConsumerGroup, leaving_member_id: str) -> bool:
        """Kafka's ``validateOnlineDowngradeWithFencedMember`` then ``convertToClassicGroup`` (group lock held): when
        ``leaving_member_id`` is the last consumer-protocol member, classic members remain and the policy allows it,
        the group becomes classic (see module doc) and True is returned (the member is then gone)."""
        leaving = group.members.get(leaving_member_id)
        others = [m for m in group.members.values() if m.member_id != leaving_member_id]
        if leaving is None or leaving.classic is not None or not others or any(m.classic is None for m in others):
            return False
        if not self.downgrade_enabled:
            self.log.info(f"Cannot downgrade consumer group {group.group_id}: the online downgrade is disabled")
            return False
        if len(others) > self.classic_max_size:
            self.log.info(f"Cannot downgrade consumer group {group.group_id}: more members than group.max.size")
            return False
        self.log.info(f"[GroupId {group.group_id}] Downgrading the consumer group to a classic group")
        names = self._topic_names_by_id()
        tombstones = record_codec.tombstones(group)
        group.dead = True
        for m in group.members.values():
            m.heartbeat_generation += 1
            self._drop_classic_deadlines(holder, m.member_id)
            for kind in ("session", "rebalance"):
                self.purgatory.check_and_complete((kind, holder.group_id, m.member_id))
        holder.consumer_group = None
        holder.protocol_type = cp.PROTOCOL_TYPE
        for m in others:
            assert m.classic is not None
            member = MemberMetadata(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.classic.session_timeout_ms,
                cp.PROTOCOL_TYPE,
                list(m.classic.protocols),
            )
            target = group.target.get(m.member_id, {})
            version = cp.decode_version(m.classic.protocols[0][1])
            member.assignment = cp.encode_assignment({names[t]: ps for t, ps in target.items() if t in names}, version)
            holder.add(member)
        holder.generation_id = group.group_epoch
        holder.protocol_name = holder.select_protocol()
        holder.state = GroupState.STABLE
        holder.state_timestamp = self.time.milliseconds()
        self.manager.append(holder.group_id, [*tombstones, self.manager.group_record(holder)], lambda code: None)
        for member in holder.members.values():
            self.coordinator._heartbeat(holder, member)
        self.coordinator._prepare_rebalance(holder, f"Downgrade group {holder.group_id} from consumer to classic.")
        return True
