"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (Kafka's ``GroupMetadataManager.consumerGroupHeartbeat`` /
``consumerGroupDescribe``, KIP-848), and the consumer-group checks of OffsetCommit/OffsetFetch.

A heartbeat, under the group's lock: validates the request (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR,
INVALID_REGULAR_EXPRESSION); leaves (epoch -1; -2: a static member leaves for now, keeping its assignment) or
gets the group (created for epoch 0; GROUP_ID_NOT_FOUND when missing or when the id belongs to a classic group with
members that cannot be upgraded, see :mod:`.migration`; an Empty classic group is converted) and the member
(GROUP_MAX_SIZE_REACHED for a new member of a full group, ``group.consumer.max.size``; UNKNOWN_MEMBER_ID; static
members, ``instance_id``: UNRELEASED_INSTANCE_ID when
another member holds the instance id and has not left with epoch -2, else the new member id takes over the old
one's epoch-0 copy and assignment without a rebalance, FENCED_INSTANCE_ID for an old member id;
FENCED_MEMBER_EPOCH for an epoch other than the member's, or than its previous one with owned partitions within
its assignment); bumps the group epoch when the member is
new, its subscription or server assignor changed, or the subscribed topics' metadata changed; recomputes the
target assignment when the group epoch is ahead of it; reconciles the member one step
(:mod:`.current_assignment_builder`); re-arms the member's session timeout. A member revoking partitions must do
so within its rebalance timeout, else it is fenced; a member that sends no heartbeat for the session timeout
(``consumer.session.timeout.ms`` of the group, default ``group.consumer.session.timeout.ms``) is fenced: it
leaves, its partitions are free and the group epoch is bumped.

Threading: as the classic coordinator's: each group's state is guarded by ``GroupMetadata.lock``; timers are
DelayedOperations in the coordinator's heartbeat purgatory, run under that lock.
"""

from __future__ import annotations

import dataclasses
import re
import uuid

from pykbroker.config import group_config
from pykbroker.config.broker_configs.group_coordinator_configs import (
    GROUP_CONSUMER_ASSIGNORS_CONFIG,
    GROUP_CONSUMER_MAX_SIZE_CONFIG,
    GROUP_CONSUMER_MIGRATION_POLICY_CONFIG,
    GROUP_MAX_SIZE_CONFIG,
)
from pykbroker.coordinator.group.consumer import current_assignment_builder as cab
from pykbroker.coordinator.group.consumer import record_codec
from pykbroker.coordinator.group.consumer import target_assignment_builder as tab
from pykbroker.coordinator.group.consumer.assignors import assignor_names
from pykbroker.coordinator.group.consumer.group import ConsumerGroup
from pykbroker.coordinator.group.consumer.member import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    LEAVE_STATIC_EPOCH,
    ConsumerGroupMember,
    MemberState,
    TopicPartitions,
    from_request,
)
from pykbroker.coordinator.group.consumer.member_timer import ConsumerMemberTimer
from pykbroker.coordinator.group.consumer.migration import POLICIES, ClassicMigration
from pykbroker.coordinator.group.coordinator_metrics import CONSUMER_REBALANCES
from pykbroker.coordinator.group.group_metadata import GroupMetadata, GroupState
from pykbroker.coordinator.group.modern_heartbeat import (
    ModernGroupHandler,
    after_append,
    config_value,
    describe_not_found,
    partitions_list,
)
from pykbroker.protocol import errors


def _is_subset(owned: TopicPartitions | None, assigned: TopicPartitions) -> bool:
    if owned is None:
        return False
    return all(ps <= assigned.get(t, set()) for t, ps in owned.items() if ps)


class ConsumerGroupHeartbeatHandler(ModernGroupHandler, ClassicMigration):
    """The consumer-protocol half of the GroupCoordinator (see module doc), with the online migration between
    classic and consumer groups (:mod:`.migration`). ``image``: a callable returning the current MetadataImage (or
    None): topics for assignments, group config overrides."""

    record_codec = record_codec
    group_kind = "consumer"

    def __init__(self, coordinator, config, time, image=lambda: None):
        super().__init__(coordinator, config, time, image)
        self.max_size = config_value(config, GROUP_CONSUMER_MAX_SIZE_CONFIG, 2**31 - 1)
        assignors = config_value(config, GROUP_CONSUMER_ASSIGNORS_CONFIG, ["uniform", "range"])
        self.assignors = assignor_names([assignors] if isinstance(assignors, str) else list(assignors))
        policy = str(config_value(config, GROUP_CONSUMER_MIGRATION_POLICY_CONFIG, "bidirectional")).lower()
        self.upgrade_enabled, self.downgrade_enabled = POLICIES.get(policy, (True, True))
        self.classic_max_size = config_value(config, GROUP_MAX_SIZE_CONFIG, 2**31 - 1)
        self._classic_deadlines = {}
        self.manager.on_loaded = self.on_groups_loaded

    # -- ConsumerGroupHeartbeat ------------------------------------------------------------------------
    def _validate(self, req: dict) -> None:
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""
        if not req["group_id"]:
            raise errors.InvalidRequestError("GroupId can't be empty.")
        if req.get("instance_id") == "":
            raise errors.InvalidRequestError("InstanceId can't be empty.")
        if req.get("rack_id") == "":
            raise errors.InvalidRequestError("RackId can't be empty.")
        epoch = req["member_epoch"]
        if epoch > 0 or epoch == LEAVE_EPOCH:
            if not req["member_id"]:
                raise errors.InvalidRequestError("MemberId can't be empty.")
        elif epoch == JOIN_EPOCH:
            if req.get("rebalance_timeout_ms", -1) == -1:
                raise errors.InvalidRequestError("RebalanceTimeoutMs must be provided in first request.")
            if req.get("topic_partitions") is None or req["topic_partitions"]:
                raise errors.InvalidRequestError("TopicPartitions must be empty when (re-)joining.")
            if req.get("subscribed_topic_names") is None and req.get("subscribed_topic_regex") is None:
                raise errors.InvalidRequestError(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
                )
        elif epoch == LEAVE_STATIC_EPOCH:
            if not req["member_id"]:
                raise errors.InvalidRequestError("MemberId can't be empty.")
            if req.get("instance_id") is None:
                raise errors.InvalidRequestError("InstanceId can't be null.")
        else:
            raise errors.InvalidRequestError("MemberEpoch is invalid.")
        assignor = req.get("server_assignor")
        if assignor is not None and assignor not in self.assignors:
            raise errors.UnsupportedAssignorError(
                f"ServerAssignor {assignor} is not supported. Supported assignors: {', '.join(self.assignors)}."
            )
        regex = req.get("subscribed_topic_regex")
        if regex:
            try:
                re.compile(regex)
            except re.error as e:
                raise errors.InvalidRegularExpressionError(f"SubscribedTopicRegex {regex} is invalid: {e}") from None

    def heartbeat(self, req: dict, client_id: str, client_host: str, respond) -> None:
        """One ConsumerGroupHeartbeat (``req``: the request's fields): ``respond(the response's fields, no throttle
        time)`` once the records of the group's change are appended to ``__consumer_offsets`` (Kafka's coordinator
        runtime: write, then respond; at once when nothing changed), maybe on the thread that completes the append.
        A failed append is answered as Kafka's ``handleOperationException`` maps it (COORDINATOR_NOT_AVAILABLE,
        NOT_COORDINATOR, UNKNOWN_SERVER_ERROR; the group's next change then writes it whole). Errors found before any
        change are raised as KafkaErrors (see module doc); the partition's status as
        :meth:`GroupMetadataManager.validate_group_status` raises it."""
        self._validate(req)
        group_id, epoch = req["group_id"], req["member_epoch"]
        if epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
            return self._leave(group_id, req["member_id"], epoch, req.get("instance_id"), respond)
        holder = self.manager.get_group(group_id, create=epoch == JOIN_EPOCH)
        if holder is None:
            raise errors.GroupIdNotFoundError(f"Consumer group {group_id} not found.")
        with holder.lock:
            if holder.state is GroupState.DEAD:
                raise errors.CoordinatorNotAvailableError()
            group = self._consumer_group(holder, create=epoch == JOIN_EPOCH)
            return self._heartbeat(holder, group, req, client_id, client_host, respond)

    def _consumer_group(self, holder: GroupMetadata, create: bool) -> ConsumerGroup:
        if holder.consumer_group is not None:
            return holder.consumer_group
        if holder.share_group is not None:  # a group id is of one type only
            raise errors.GroupIdNotFoundError(f"Group {holder.group_id} is not a consumer group.")
        if create and holder.state is GroupState.EMPTY and not holder.members and not holder.pending_members:
            self.log.info(f"Converting the empty classic group {holder.group_id} to a consumer group")
            holder.consumer_group = ConsumerGroup(holder.group_id)
            holder.protocol_type, holder.protocol_name = None, None
            return holder.consumer_group
        if create and holder.state is not GroupState.DEAD and holder.members and self.can_upgrade(holder):
            return self.convert_to_consumer_group(holder)
        raise errors.GroupIdNotFoundError(f"Group {holder.group_id} is not a consumer group")

    def _heartbeat(self, holder: GroupMetadata, group: ConsumerGroup, req: dict, client_id, client_host, respond):
        epoch = req["member_epoch"]
        member_id = req["member_id"] or str(uuid.uuid4())
        owned = from_request(req.get("topic_partitions"))
        instance_id = req.get("instance_id")
        member = group.members.get(member_id)
        static = group.static_member(instance_id) if instance_id is not None else None
        if static is not None and epoch == JOIN_EPOCH and static.member_id != member_id:
            if static.member_epoch != LEAVE_STATIC_EPOCH:
                raise errors.UnreleasedInstanceIdError(
                    f"Static member {member_id} with instance id {instance_id} cannot join the group because the "
                    f"instance id is owned by {static.member_id} member."
                )
            # the static member comes back under a new member id: it takes over the assignment, no rebalance
            self.log.info(
                f"[GroupId {group.group_id}] Static member with instance id {instance_id} re-joins the consumer "
                f"group. Created a new member {member_id} to replace the existing member {static.member_id}."
            )
            member = dataclasses.replace(
                static, member_id=member_id, member_epoch=0, previous_member_epoch=0, pending_revocation={}
            )
            group.replace_static_member(static, member)
        elif instance_id is not None and epoch != JOIN_EPOCH:
            if static is None:
                raise errors.UnknownMemberIdError(f"Instance id {instance_id} is unknown.")
            if static.member_id != member_id:
                raise errors.FencedInstanceIdError(
                    f"Static member {member_id} with instance id {instance_id} was fenced by member {static.member_id}."
                )
        if member is not None and epoch == JOIN_EPOCH and self._epoch_fenced(member, epoch, owned):
            # KIP-1082: the client keeps its member id for life and, fenced, rejoins with epoch 0 having given up
            # its partitions: the old incarnation goes (its partitions are free) and the member joins afresh. (Epoch
            # 0 as the previous epoch is a retried first heartbeat whose response was lost: answered as is.)
            self.log.info(f"[GroupId {group.group_id}] Member {member_id} rejoins the consumer group with epoch 0")
            self._fence(holder, group, member_id)
            member = None
        if member is None:
            if epoch != JOIN_EPOCH:
                raise errors.UnknownMemberIdError(f"Member {member_id} is not a member of group {group.group_id}.")
            if len(group.members) >= self.max_size:
                raise errors.GroupMaxSizeReachedError(
                    f"The consumer group has reached its maximum capacity of {self.max_size} members."
                )
            self.log.info(f"[GroupId {group.group_id}] Member {member_id} joins the consumer group")
            member = ConsumerGroupMember(member_id)
            new = True
        else:
            new = False
            if self._epoch_fenced(member, epoch, owned):
                raise errors.FencedMemberEpochError(
                    f"The consumer group member has a {'greater' if epoch > member.member_epoch else 'smaller'} "
                    f"member epoch ({epoch}) than the one known by the group coordinator ({member.member_epoch}). "
                    "The member must abandon all its partitions and rejoin."
                )
        updated = dataclasses.replace(
            member,
            instance_id=req.get("instance_id") if req.get("instance_id") is not None else member.instance_id,
            rack_id=req.get("rack_id") if req.get("rack_id") is not None else member.rack_id,
            rebalance_timeout_ms=(
                req["rebalance_timeout_ms"]
                if req.get("rebalance_timeout_ms", -1) != -1
                else member.rebalance_timeout_ms
            ),
            server_assignor=req.get("server_assignor")
            if req.get("server_assignor") is not None
            else member.server_assignor,
            subscribed_topic_names=(
                tuple(req["subscribed_topic_names"])
                if req.get("subscribed_topic_names") is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                (req["subscribed_topic_regex"] or None)
                if req.get("subscribed_topic_regex") is not None
                else member.subscribed_topic_regex
            ),
            client_id=client_id,
            client_host=client_host,
            classic=None,
        )
        reconciled = self._update_member(holder, group, member, updated, new, owned)
        response = {
            "error_code": errors.NONE,
            "error_message": None,
            "member_id": member_id,
            "member_epoch": reconciled.member_epoch,
            "heartbeat_interval_ms": self.group_configs(group.group_id)[
                group_config.CONSUMER_HEARTBEAT_INTERVAL_MS_CONFIG
            ],
            "assignment": None,
        }
        full = epoch == JOIN_EPOCH or (
            req.get("rebalance_timeout_ms", -1) != -1
            and req.get("subscribed_topic_names") is not None
            and owned is not None
        )
        if full or reconciled.assigned != member.assigned or new:
            response["assignment"] = {"topic_partitions": partitions_list(reconciled.assigned)}
        self.persist(holder, group, after_append(response, respond))

    def _update_member(
        self,
        holder: GroupMetadata,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        updated: ConsumerGroupMember,
        new: bool,
        owned: TopicPartitions | None,
    ) -> ConsumerGroupMember:
        """Put ``updated`` (the member after the request, ``member`` before) in the group: bump the group epoch when
        it is new or its subscription changed or the subscribed topics' metadata changed, recompute the target when
        the group epoch is ahead of it, reconcile the member one step with ``owned`` (its reported partitions, None
        when not reported) and re-arm its timers. Returns the reconciled member. Group lock held."""
        bump = new or updated.subscription() != member.subscription()
        group.update_member(updated)
        metadata = tab.subscription_metadata(group.members.values(), self._topics())
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            group.group_epoch += 1
            self.manager.coordinator_metrics.record(CONSUMER_REBALANCES)
            self.log.info(f"[GroupId {group.group_id}] Bumped group epoch to {group.group_epoch}.")
        if group.group_epoch > group.assignment_epoch:
            self._update_target(group)
        reconciled = cab.reconcile(
            updated, group.assignment_epoch, group.target.get(updated.member_id, {}), group.partition_epoch, owned
        )
        if reconciled is not updated:
            group.update_member(reconciled)
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule_rebalance_timeout(holder, reconciled)
        self._schedule_session_timeout(holder, reconciled)
        return reconciled

    @staticmethod
    def _epoch_fenced(member: ConsumerGroupMember, epoch: int, owned: TopicPartitions | None) -> bool:
        """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``: an epoch above the member's, or below it unless it
        is the previous one and the owned partitions are within the assignment (the response was lost)."""
        if epoch > member.member_epoch:
            return True
        return epoch < member.member_epoch and (
            epoch != member.previous_member_epoch or not _is_subset(owned, member.assigned)
        )

    def _update_target(self, group: ConsumerGroup) -> None:
        assignor = group.preferred_assignor(self.assignors[0])
        group.target = tab.build_target(group.members, group.subscription_metadata, assignor, group.target)
        group.assignment_epoch = group.group_epoch
        self.log.info(
            f"[GroupId {group.group_id}] Computed a new target assignment for epoch {group.group_epoch} "
            f"with the {assignor} assignor"
        )

    def _leave(self, group_id: str, member_id: str, epoch: int, instance_id: str | None, respond) -> None:
        """Epoch -1: the member leaves (its partitions are free, the group epoch is bumped). Epoch -2 (a static
        member, ``instance_id`` given): it leaves for now, keeping its assignment until it rejoins under the same
        instance id or its session times out (Kafka's ``consumerGroupStaticMemberGroupLeave``)."""
        holder = self.manager.get_group(group_id)
        if holder is None or holder.consumer_group is None:
            raise errors.GroupIdNotFoundError(f"Consumer group {group_id} not found.")
        with holder.lock:
            group = holder.consumer_group
            if instance_id is not None:
                static = group.static_member(instance_id)
                if static is None:
                    raise errors.UnknownMemberIdError(f"Instance id {instance_id} is unknown.")
                if static.member_id != member_id:
                    raise errors.FencedInstanceIdError(
                        f"Static member {member_id} with instance id {instance_id} was fenced by member "
                        f"{static.member_id}."
                    )
            elif member_id not in group.members:
                raise errors.UnknownMemberIdError(f"Member {member_id} is not a member of group {group_id}.")
            if epoch == LEAVE_STATIC_EPOCH:
                self.log.info(
                    f"[GroupId {group_id}] Static member {member_id} with instance id {instance_id} temporarily "
                    "left the consumer group."
                )
                group.update_member(
                    dataclasses.replace(
                        group.members[member_id], member_epoch=LEAVE_STATIC_EPOCH, pending_revocation={}
                    )
                )
            else:
                self.log.info(f"[GroupId {group_id}] Member {member_id} left the consumer group.")
                if self.maybe_downgrade(holder, group, member_id):
                    group = None
                else:
                    self._fence(holder, group, member_id)
            response = {
                "error_code": errors.NONE,
                "error_message": None,
                "member_id": member_id,
                "member_epoch": epoch,
                "heartbeat_interval_ms": 0,
                "assignment": None,
            }
            self.persist(holder, group, after_append(response, respond))

    def _fence_or_downgrade(self, holder: GroupMetadata, group: ConsumerGroup, member_id: str) -> None:
        """The member is fenced (session or rebalance timeout): the group is downgraded to a classic group when it
        was its last consumer-protocol member (:meth:`maybe_downgrade`), else the member goes and the change is
        written. Group lock held."""
        if not self.maybe_downgrade(holder, group, member_id):
            self._fence(holder, group, member_id)
            self.persist(holder, group)

    def _fence(self, holder: GroupMetadata, group: ConsumerGroup, member_id: str) -> None:
        """Remove the member (its partitions become free) and bump the group epoch (Kafka's
        ``consumerGroupFenceMember``). Group lock held."""
        member = group.remove_member(member_id)
        if member is None:
            return
        group.subscription_metadata = tab.subscription_metadata(group.members.values(), self._topics())
        group.group_epoch += 1
        member.heartbeat_generation += 1  # its timers are superseded
        self._drop_classic_deadlines(holder, member_id)
        for kind in ("session", "rebalance"):
            self.purgatory.check_and_complete((kind, holder.group_id, member_id))

    def on_groups_loaded(self, holders: list[GroupMetadata]) -> None:
        """The groups of a partition this broker now coordinates were replayed: the consumer groups' members carry
        on with their epochs and assignments, their session timers (re)started from now (Kafka's
        ``onLoaded``), a member revoking partitions gets its rebalance timer too."""
        for holder in holders:
            with holder.lock:
                group = holder.consumer_group
                if group is None:
                    continue
                self.log.info(
                    f"[GroupId {group.group_id}] Loaded consumer group at epoch {group.group_epoch} with "
                    f"{len(group.members)} members"
                )
                for member in list(group.members.values()):
                    self._schedule_session_timeout(holder, member)
                    if member.state is MemberState.UNREVOKED_PARTITIONS:
                        self._schedule_rebalance_timeout(holder, member)

    # -- timers ------------------------------------------------------------------------------------------
    def _schedule_session_timeout(self, holder: GroupMetadata, member: ConsumerGroupMember) -> None:
        member.heartbeat_generation += 1
        generation = member.heartbeat_generation
        key = ("session", holder.group_id, member.member_id)
        self.purgatory.check_and_complete(key)
        if member.classic is not None:
            timeout = member.classic.session_timeout_ms  # the classic protocol's own session timeout
        else:
            timeout = self.group_configs(holder.group_id)[group_config.CONSUMER_SESSION_TIMEOUT_MS_CONFIG]

        def superseded() -> bool:
            current = self._member(holder, member.member_id)
            return current is None or current.heartbeat_generation != generation

        def expire() -> None:
            if holder.state is GroupState.DEAD or superseded():
                return
            self.log.info(
                f"[GroupId {holder.group_id}] Member {member.member_id} fenced from the group because "
                "its session expired."
            )
            group = holder.consumer_group
            assert group is not None  # not superseded: the member is still in the holder's consumer group
            self._fence_or_downgrade(holder, group, member.member_id)

        self.purgatory.try_complete_else_watch(ConsumerMemberTimer(holder, timeout, superseded, expire), [key])

    def _schedule_rebalance_timeout(self, holder: GroupMetadata, member: ConsumerGroupMember) -> None:
        epoch, key = member.member_epoch, ("rebalance", holder.group_id, member.member_id)
        timeout = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 else 0

        def superseded() -> bool:
            current = self._member(holder, member.member_id)
            return (
                current is None
                or current.member_epoch != epoch
                or current.state is not MemberState.UNREVOKED_PARTITIONS
            )

        def expire() -> None:
            if holder.state is GroupState.DEAD or superseded():
                return
            self.log.info(
                f"[GroupId {holder.group_id}] Member {member.member_id} fenced from the group because "
                f"it failed to revoke partitions within {timeout} ms."
            )
            group = holder.consumer_group
            assert group is not None  # not superseded: the member is still in the holder's consumer group
            self._fence_or_downgrade(holder, group, member.member_id)

        self.purgatory.try_complete_else_watch(ConsumerMemberTimer(holder, timeout, superseded, expire), [key])

    @staticmethod
    def _member(holder: GroupMetadata, member_id: str) -> ConsumerGroupMember | None:
        group = holder.consumer_group
        return None if group is None else group.members.get(member_id)

    # -- ConsumerGroupDescribe ----------------------------------------------------------------------------
    def describe(self, group_id: str) -> dict:
        """One ConsumerGroupDescribe group (without authorized operations). GROUP_ID_NOT_FOUND when the group
        does not exist or is not a consumer group; the partition's status is raised."""
        holder = self.manager.get_group(group_id)
        if holder is None:
            return describe_not_found(group_id, f"Group {group_id} not found.")
        with holder.lock:
            group = holder.consumer_group
            if holder.state is GroupState.DEAD or group is None:
                if group is None and holder.state is not GroupState.DEAD:
                    return describe_not_found(group_id, f"Group {group_id} is not a consumer group.")
                return describe_not_found(group_id, f"Group {group_id} not found.")
            names = self._topic_names_by_id()
            members = [
                {
                    "member_id": m.member_id,
                    "instance_id": m.instance_id,
                    "rack_id": m.rack_id,
                    "member_epoch": m.member_epoch,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": sorted(m.subscribed_topic_names),
                    "subscribed_topic_regex": m.subscribed_topic_regex,
                    "assignment": {"topic_partitions": partitions_list(m.assigned, names)},
                    "target_assignment": {
                        "topic_partitions": partitions_list(group.target.get(m.member_id, {}), names)
                    },
                    "member_type": 1 if m.classic is None else 0,
                }
                for m in group.members.values()
            ]
            return {
                "error_code": errors.NONE,
                "error_message": None,
                "group_id": group_id,
                "group_state": group.state,
                "group_epoch": group.group_epoch,
                "assignment_epoch": group.assignment_epoch,
                "assignor_name": group.preferred_assignor(self.assignors[0]),
                "members": members,
            }

    # -- offsets ------------------------------------------------------------------------------------------
    @staticmethod
    def validate_offset_commit(
        group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int | None
    ) -> int | None:
        """Kafka's ``ConsumerGroup.validateOffsetCommit`` (group lock held): None when accepted, else the error
        code: UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION (OffsetCommit before v9 from a consumer-protocol member),
        STALE_MEMBER_EPOCH (ILLEGAL_GENERATION for a classic-protocol member). An epoch < 0 commits to a group
        without members (admin client, manual assignment)."""
        if member_epoch < 0 and not group.members:
            return None
        member = group.members.get(member_id)
        if member is None:
            return errors.UNKNOWN_MEMBER_ID
        if member.classic is None and api_version is not None and api_version < 9:
            return errors.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return errors.STALE_MEMBER_EPOCH if member.classic is None else errors.ILLEGAL_GENERATION
        return None

    @staticmethod
    def validate_offset_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> int | None:
        """Kafka's ``ConsumerGroup.validateOffsetFetch``: no member id and an epoch < 0 (admin) are accepted;
        else UNKNOWN_MEMBER_ID or STALE_MEMBER_EPOCH (ILLEGAL_GENERATION for a classic-protocol member)."""
        if member_id is None and member_epoch < 0:
            return None
        member = group.members.get(member_id or "")
        if member is None:
            return errors.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return errors.STALE_MEMBER_EPOCH if member.classic is None else errors.ILLEGAL_GENERATION
        return None
