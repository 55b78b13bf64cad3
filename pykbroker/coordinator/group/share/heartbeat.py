"""ShareGroupHeartbeat and ShareGroupDescribe (Kafka's ``GroupMetadataManager.shareGroupHeartbeat`` /
``shareGroupDescribe``, KIP-932).

A heartbeat, under the group's lock: validates the request (INVALID_REQUEST); leaves (epoch -1: the member goes, the
group epoch is bumped) or gets the group (created for epoch 0; GROUP_ID_NOT_FOUND when missing, or when the id belongs
to a classic or consumer group: a group id is of one type only) and the member (GROUP_MAX_SIZE_REACHED for a new member
of a full group, ``group.share.max.size``; UNKNOWN_MEMBER_ID; FENCED_MEMBER_EPOCH for an epoch other than the member's
or its previous one; epoch 0 from a known member id: a retried join, answered with its assignment); bumps the group
epoch when the member is new or its subscription changed, or the subscribed topics' metadata changed; recomputes the
target assignment with the ``simple`` assignor (:mod:`.assignor`) when the group epoch is ahead of it, over the
partitions whose share-partition state is initialized only (subscribed partitions that are not are initialized by
:mod:`.state_initializer`, which bumps the group epoch when done); moves the member to the target at once (share
partitions are shared: nothing to revoke); re-arms the member's session timeout (``share.session.timeout.ms`` of the
group, default ``group.share.session.timeout.ms``): a member that sends no heartbeat for it is fenced (it leaves, the
group epoch is bumped). Changes are written to ``__consumer_offsets`` (:mod:`.record_codec`) before the response is
sent.

Threading: as the consumer-group handler's: each group's state is guarded by ``GroupMetadata.lock``; timers are
DelayedOperations in the coordinator's heartbeat purgatory, run under that lock.
"""

from __future__ import annotations

import dataclasses
import uuid

from pykbroker.config import group_config
from pykbroker.config.broker_configs.group_coordinator_configs import GROUP_SHARE_MAX_SIZE_CONFIG
from pykbroker.coordinator.group.consumer.member_timer import ConsumerMemberTimer
from pykbroker.coordinator.group.coordinator_metrics import SHARE_REBALANCES
from pykbroker.coordinator.group.group_metadata import GroupMetadata, GroupState
from pykbroker.coordinator.group.modern_heartbeat import (
    ModernGroupHandler,
    after_append,
    config_value,
    describe_not_found,
    partitions_list,
)
from pykbroker.coordinator.group.share import assignor, record_codec
from pykbroker.coordinator.group.share.group import ASSIGNOR_NAME, ShareGroup
from pykbroker.coordinator.group.share.member import JOIN_EPOCH, LEAVE_EPOCH, ShareGroupMember
from pykbroker.coordinator.group.share.state_initializer import ShareStateInitializer
from pykbroker.protocol import errors


class ShareGroupHeartbeatHandler(ModernGroupHandler):
    """The share-group half of the GroupCoordinator (see module doc). ``image``: a callable returning the current
    MetadataImage (or None): topics for assignments, group config overrides."""

    record_codec = record_codec
    group_kind = "share"

    def __init__(self, coordinator, config, time, image=lambda: None):
        super().__init__(coordinator, config, time, image)
        self.max_size = int(config_value(config, GROUP_SHARE_MAX_SIZE_CONFIG, 200))
        #: initializes the state of subscribed share partitions before they are assigned
        self.initializer = ShareStateInitializer(
            lambda: self.coordinator.persister, lambda holder, group: self.persist(holder, group), self.log
        )

    def share_configs(self, group_id: str) -> dict:
        """The group's ``share.*`` configs (:func:`pykbroker.config.group_config.share_configs`)."""
        return group_config.share_configs(self._group_overrides(group_id), self.defaults)

    # -- ShareGroupHeartbeat ------------------------------------------------------------------------------
    @staticmethod
    def _validate(req: dict) -> None:
        """Kafka's ``throwIfShareGroupHeartbeatRequestIsInvalid`` (INVALID_REQUEST)."""
        if not req["group_id"]:
            raise errors.InvalidRequestError("GroupId can't be empty.")
        if req.get("rack_id") == "":
            raise errors.InvalidRequestError("RackId can't be empty.")
        if not req["member_id"]:
            raise errors.InvalidRequestError("MemberId can't be empty.")
        epoch = req["member_epoch"]
        if epoch == JOIN_EPOCH:
            if not req.get("subscribed_topic_names"):
                raise errors.InvalidRequestError("SubscribedTopicNames must be set in first request.")
        elif epoch < LEAVE_EPOCH:
            raise errors.InvalidRequestError(f"MemberEpoch is {epoch}, but must be greater than or equal to -1.")

    def heartbeat(self, req: dict, client_id: str, client_host: str, respond) -> None:
        """One ShareGroupHeartbeat (``req``: the request's fields): ``respond(the response's fields, no throttle
        time)`` once the records of the group's change are appended to ``__consumer_offsets`` (at once when nothing
        changed), maybe on the thread that completes the append. Errors found before any change are raised as
        KafkaErrors (see module doc); the partition's status as :meth:`GroupMetadataManager.validate_group_status`
        raises it."""
        self._validate(req)
        group_id, epoch = req["group_id"], req["member_epoch"]
        if epoch == LEAVE_EPOCH:
            return self._leave(group_id, req["member_id"], respond)
        holder = self.manager.get_group(group_id, create=epoch == JOIN_EPOCH)
        if holder is None:
            raise errors.GroupIdNotFoundError(f"Group {group_id} not found.")
        with holder.lock:
            if holder.state is GroupState.DEAD:
                raise errors.CoordinatorNotAvailableError()
            group = self._share_group(holder, create=epoch == JOIN_EPOCH)
            return self._heartbeat(holder, group, req, client_id, client_host, respond)

    def _share_group(self, holder: GroupMetadata, create: bool) -> ShareGroup:
        if holder.share_group is not None:
            return holder.share_group
        fresh = (
            holder.consumer_group is None
            and holder.state is GroupState.EMPTY
            and not holder.members
            and not holder.pending_members
            and not holder.offsets
            and holder.protocol_type is None
            and holder.generation_id == 0
        )
        if create and fresh:
            holder.share_group = ShareGroup(holder.group_id)
            return holder.share_group
        if fresh:
            raise errors.GroupIdNotFoundError(f"Group {holder.group_id} not found.")
        raise errors.GroupIdNotFoundError(f"Group {holder.group_id} is not a share group.")

    def _heartbeat(self, holder: GroupMetadata, group: ShareGroup, req: dict, client_id, client_host, respond):
        epoch, member_id = req["member_epoch"], req["member_id"]
        member = group.members.get(member_id)
        if member is None:
            if epoch != JOIN_EPOCH:
                raise errors.UnknownMemberIdError(f"Member {member_id} is not a member of group {group.group_id}.")
            if len(group.members) >= self.max_size:
                raise errors.GroupMaxSizeReachedError(
                    f"The share group has reached its maximum capacity of {self.max_size} members."
                )
            self.log.info(f"[GroupId {group.group_id}] Member {member_id} joins the share group")
            member = ShareGroupMember(member_id)
        elif epoch != JOIN_EPOCH and epoch not in (member.member_epoch, member.previous_member_epoch):
            raise errors.FencedMemberEpochError(
                f"The share group member has a member epoch ({epoch}) which is not the current one "
                f"({member.member_epoch})."
            )
        updated = dataclasses.replace(
            member,
            client_id=client_id,
            client_host=client_host,
            rack_id=req.get("rack_id") if req.get("rack_id") is not None else member.rack_id,
            subscribed_topic_names=tuple(sorted(req["subscribed_topic_names"]))
            if req.get("subscribed_topic_names") is not None
            else member.subscribed_topic_names,
        )
        is_new = member_id not in group.members
        group.members[member_id] = updated
        metadata = self._subscription_metadata(group)
        bump = is_new or updated.subscribed_topic_names != member.subscribed_topic_names
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            group.group_epoch += 1
            self.manager.coordinator_metrics.record(SHARE_REBALANCES)
            self.log.info(f"[GroupId {group.group_id}] Bumped share group epoch to {group.group_epoch}.")
        if group.group_epoch > group.assignment_epoch:
            self._update_target(group)
        target = group.target.get(member_id, {})
        if updated.member_epoch != group.assignment_epoch or updated.assigned != target:
            updated = dataclasses.replace(
                updated,
                previous_member_epoch=updated.member_epoch,
                member_epoch=group.assignment_epoch,
                assigned={t: set(ps) for t, ps in target.items()},
            )
            group.members[member_id] = updated
        self._schedule_session_timeout(holder, updated)
        send_assignment = (
            epoch == JOIN_EPOCH
            or req.get("subscribed_topic_names") is not None
            or (updated.assigned != member.assigned)
        )
        response = {
            "error_code": errors.NONE,
            "error_message": None,
            "member_id": member_id,
            "member_epoch": updated.member_epoch,
            "heartbeat_interval_ms": self.group_configs(group.group_id)[
                group_config.SHARE_HEARTBEAT_INTERVAL_MS_CONFIG
            ],
            "assignment": {"topic_partitions": partitions_list(updated.assigned)} if send_assignment else None,
        }
        self.initializer.maybe_initialize(holder, group)
        self.persist(holder, group, after_append(response, respond))

    def _subscription_metadata(self, group: ShareGroup) -> dict[str, tuple[uuid.UUID, int]]:
        topics = self._topics()
        return {name: topics[name] for name in group.subscribed_topic_names() if name in topics}

    def _update_target(self, group: ShareGroup) -> None:
        subscriptions = {m.member_id: m.subscribed_topic_names for m in group.members.values()}
        target = assignor.assign(subscriptions, group.subscription_metadata, group.target)
        # only partitions whose share-partition state is initialized are assigned (Kafka's topicPartitionAllowedMap)
        group.target = {
            member_id: {
                tid: allowed for tid, parts in tps.items() if (allowed := parts & group.initialized_partitions(tid))
            }
            for member_id, tps in target.items()
        }
        group.assignment_epoch = group.group_epoch
        self.log.info(
            f"[GroupId {group.group_id}] Computed a new target assignment for epoch {group.group_epoch} "
            f"with the {ASSIGNOR_NAME} assignor"
        )

    def _leave(self, group_id: str, member_id: str, respond) -> None:
        """Epoch -1: the member leaves (Kafka's ``shareGroupLeave``): GROUP_ID_NOT_FOUND for no such share group,
        UNKNOWN_MEMBER_ID for no such member."""
        holder = self.manager.get_group(group_id)
        if holder is None or holder.share_group is None:
            raise errors.GroupIdNotFoundError(f"Group {group_id} not found.")
        with holder.lock:
            group = holder.share_group
            if member_id not in group.members:
                raise errors.UnknownMemberIdError(f"Member {member_id} is not a member of group {group_id}.")
            self.log.info(f"[GroupId {group_id}] Member {member_id} left the share group.")
            self._fence(holder, group, member_id)
            response = {
                "error_code": errors.NONE,
                "error_message": None,
                "member_id": member_id,
                "member_epoch": LEAVE_EPOCH,
                "heartbeat_interval_ms": 0,
                "assignment": None,
            }
            self.persist(holder, group, after_append(response, respond))

    def _fence(self, holder: GroupMetadata, group: ShareGroup, member_id: str) -> None:
        """Remove the member and bump the group epoch (the next heartbeat recomputes the target). Group lock held."""
        member = group.remove_member(member_id)
        if member is None:
            return
        group.subscription_metadata = self._subscription_metadata(group)
        group.group_epoch += 1
        if group.members:
            self._update_target(group)
        member.heartbeat_generation += 1
        self.purgatory.check_and_complete(("share-session", holder.group_id, member_id))

    def on_groups_loaded(self, holders: list[GroupMetadata]) -> None:
        """The share groups of a partition this broker now coordinates were replayed: their members carry on with
        their epochs and assignments, their session timers (re)started from now."""
        for holder in holders:
            with holder.lock:
                group = holder.share_group
                if group is None:
                    continue
                group.subscription_metadata = self._subscription_metadata(group)
                self.log.info(
                    f"[GroupId {group.group_id}] Loaded share group at epoch {group.group_epoch} with "
                    f"{len(group.members)} members"
                )
                for member in list(group.members.values()):
                    self._schedule_session_timeout(holder, member)

    # -- timers ------------------------------------------------------------------------------------------
    def _schedule_session_timeout(self, holder: GroupMetadata, member: ShareGroupMember) -> None:
        member.heartbeat_generation += 1
        generation = member.heartbeat_generation
        key = ("share-session", holder.group_id, member.member_id)
        self.purgatory.check_and_complete(key)
        timeout = self.group_configs(holder.group_id)[group_config.SHARE_SESSION_TIMEOUT_MS_CONFIG]

        def superseded() -> bool:
            group = holder.share_group
            current = None if group is None else group.members.get(member.member_id)
            return current is None or current.heartbeat_generation != generation

        def expire() -> None:
            if holder.state is GroupState.DEAD or superseded():
                return
            self.log.info(
                f"[GroupId {holder.group_id}] Member {member.member_id} fenced from the share group because "
                "its session expired."
            )
            group = holder.share_group
            assert group is not None  # not superseded: the member is still in the holder's share group
            self._fence(holder, group, member.member_id)
            self.persist(holder, group)

        self.purgatory.try_complete_else_watch(ConsumerMemberTimer(holder, timeout, superseded, expire), [key])

    # -- queries for the data path -----------------------------------------------------------------------------
    def member(self, group_id: str, member_id: str) -> ShareGroupMember | None:
        """A copy of the member ``member_id`` of share group ``group_id`` as this coordinator knows it, or None
        (no such share group or member, or the group's partition is not coordinated here)."""
        try:
            holder = self.manager.get_group(group_id)
        except errors.KafkaError:
            return None
        if holder is None:
            return None
        with holder.lock:
            group = holder.share_group
            member = None if group is None else group.members.get(member_id)
            if member is None:
                return None
            return dataclasses.replace(member, assigned={t: set(ps) for t, ps in member.assigned.items()})

    # -- ShareGroupDescribe ----------------------------------------------------------------------------
    def describe(self, group_id: str) -> dict:
        """One ShareGroupDescribe group (without authorized operations). GROUP_ID_NOT_FOUND when the group does not
        exist or is not a share group; the partition's status is raised."""
        holder = self.manager.get_group(group_id)
        if holder is None:
            return describe_not_found(group_id, f"Group {group_id} not found.")
        with holder.lock:
            group = holder.share_group
            if holder.state is GroupState.DEAD or group is None or group.dead:
                if group is None and holder.state is not GroupState.DEAD:
                    return describe_not_found(group_id, f"Group {group_id} is not a share group.")
                return describe_not_found(group_id, f"Group {group_id} not found.")
            names = self._topic_names_by_id()
            members = [
                {
                    "member_id": m.member_id,
                    "rack_id": m.rack_id,
                    "member_epoch": m.member_epoch,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": sorted(m.subscribed_topic_names),
                    "assignment": {"topic_partitions": partitions_list(m.assigned, names)},
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
                "assignor_name": ASSIGNOR_NAME,
                "members": members,
            }
