"""BrokerMetadataPublisher: applies committed metadata to this broker's cache, logs and partitions.

Mirrors ``kafka.server.metadata.BrokerMetadataPublisher``: called by the MetadataLoader thread with each
published (delta, image): applies topic config changes to the logs, tells the ReplicaManager which
brokers' registrations changed (its fetchers reconnect to a leader that came back), hands it the local
replica changes (deletes, leaders, followers), tells the group coordinator which ``__consumer_offsets``
partitions it now leads (they start loading) or no longer leads; the transaction coordinator is told last.
The MetadataCache image is swapped, as in Kafka, *before* the replica changes are applied: the image, not the
log directory, decides what Metadata shows, so a large topic creation is visible at once while its logs are
created (a produce to a partition whose log does not exist yet waits up to ``CREATION_WAIT_S`` for it, then
gets NOT_LEADER_OR_FOLLOWER, retriable). The replica changes are applied by the ReplicaManager's applier thread in
metadata order (Kafka applies them on its publisher thread; here a delta's many log creations would hold back
the next delta's image): the publisher waits for them only on the first publish (start-up) and for a partition
of ``__consumer_offsets``, ``__transaction_state`` or ``__share_group_state``, whose coordinator reads the log
next. Exception: a delta changing ``__consumer_offsets`` or
``__transaction_state`` partitions here is published after them, so clients find this broker as a group's or
transaction's coordinator only once that partition answers COORDINATOR_LOAD_IN_PROGRESS or better (never
NOT_COORDINATOR). Once the ReplicaManager is shut down no replica
change is applied any more (no log is created during broker shutdown). Runs only on the loader's thread.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from pykbroker.metadata.publisher import MetadataPublisher
from pykbroker.metadata.topic_names import (
    GROUP_METADATA_TOPIC_NAME,
    SHARE_GROUP_STATE_TOPIC_NAME,
    TRANSACTION_STATE_TOPIC_NAME,
)
from pykbroker.protocol.config_resource import ConfigResourceType
from pykbroker.utils.logging import get_logger

if TYPE_CHECKING:
    from pykbroker.coordinator.group.group_coordinator import GroupCoordinator
    from pykbroker.coordinator.share.share_coordinator import ShareCoordinator
    from pykbroker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
    from pykbroker.network.connection_quotas import ConnectionQuotas
    from pykbroker.security.credential_cache import ScramCredentialCache
    from pykbroker.security.delegation_token_cache import DelegationTokenCache
    from pykbroker.server.dynamic_broker_config import DynamicBrokerConfig
    from pykbroker.server.quotas.client_quota_manager import QuotaManagers


class BrokerMetadataPublisher(MetadataPublisher):
    def __init__(self, node_id: int, metadata_cache, replica_manager, log_manager):
        self.node_id = node_id
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager
        self.log_manager = log_manager
        self.log = get_logger("BrokerMetadataPublisher", id=node_id)
        self.first_publish = threading.Event()
        #: the GroupCoordinator, set by the server once it exists (which elects it for what it leads already)
        self.group_coordinator: GroupCoordinator | None = None
        #: the TransactionCoordinator, set by the server (which elects it for what it leads already)
        self.txn_coordinator: TransactionCoordinator | None = None
        #: the ShareCoordinator, set by the server (which elects it for what it leads already)
        self.share_coordinator: ShareCoordinator | None = None
        #: the DynamicBrokerConfig, set by the server once the broker's parts exist
        self.dynamic_config: DynamicBrokerConfig | None = None
        #: the broker's ScramCredentialCache (set by the server), refreshed when credentials change
        self.scram_credentials: ScramCredentialCache | None = None
        #: the broker's DelegationTokenCache (set by the server), refreshed when tokens change
        self.delegation_tokens: DelegationTokenCache | None = None
        #: the broker's QuotaManagers (set by the server), given the client quotas when they change
        self.quota_managers: QuotaManagers | None = None
        #: the SocketServer's ConnectionQuotas (set by the server), given the IP connection rates when they change
        self.connection_quotas: ConnectionQuotas | None = None

    def name(self) -> str:
        return "BrokerMetadataPublisher"

    def on_metadata_update(self, delta, new_image) -> None:
        changed_configs = {
            name
            for (rtype, name) in list(delta.config_changes) + list(delta.deleted_config_resources)
            if rtype == ConfigResourceType.TOPIC
        }
        if not self.first_publish.is_set():
            # Start-up: every topic's overrides, before partitions open their logs.
            changed_configs |= {name for (rtype, name) in new_image.configs if rtype == ConfigResourceType.TOPIC}
        for topic in sorted(changed_configs):
            overrides = dict(new_image.topic_configs(topic))
            self.replica_manager.update_topic_config(topic, overrides)
        changes = delta.topics.local_changes(self.node_id)
        # The replica changes are applied by the ReplicaManager's applier thread in metadata order; the publisher
        # waits for them only at start-up and for a coordinator's internal topic (its coordinator loads the log).
        wait = not self.first_publish.is_set() or _touches_internal_topics(changes, _WAITED_TOPICS)
        if getattr(delta, "broker_changes", None):
            self.replica_manager.apply_broker_changes(delta, new_image, wait=wait)
        if not _touches_internal_topics(changes, _COORDINATOR_TOPICS):
            # Kafka's order: the image decides what Metadata shows, before the logs of new partitions exist
            # (a produce meanwhile waits a little, then gets NOT_LEADER_OR_FOLLOWER, retriable).
            self.metadata_cache.set_image(new_image)
        if changes.deletes or changes.leaders or changes.followers:
            self.replica_manager.apply_delta(changes, new_image, wait=wait)
        if self.scram_credentials is not None and (delta.scram_changes or not self.first_publish.is_set()):
            self.scram_credentials.update_from_image(new_image)
        if self.delegation_tokens is not None and (delta.delegation_token_changes or not self.first_publish.is_set()):
            self.delegation_tokens.update_from_image(new_image)
        if self.quota_managers is not None and delta.client_quota_changes:
            self.quota_managers.update_quotas(new_image.client_quotas)
        if self.connection_quotas is not None and delta.client_quota_changes:
            self.connection_quotas.update_ip_connection_rates(new_image.client_quotas)
        dynamic = self.dynamic_config
        changed_resources = list(delta.config_changes) + list(delta.deleted_config_resources)
        if dynamic is not None and any(rtype == ConfigResourceType.BROKER for (rtype, _) in changed_resources):
            dynamic.update(new_image)
        self._update_group_coordinator(changes)
        # A change of __consumer_offsets / __transaction_state partitions is published only now, so that
        # FindCoordinator names this broker only once the coordinator has the partition (never NOT_COORDINATOR).
        self.metadata_cache.set_image(new_image)
        self._update_txn_coordinator(changes)
        self._update_share_coordinator(changes)
        self.first_publish.set()

    def _update_txn_coordinator(self, changes) -> None:
        """The transaction coordinator follows the leadership of ``__transaction_state`` partitions
        (Kafka's ``onElection`` / ``onResignation`` from the local changes)."""
        txn = self.txn_coordinator
        if txn is not None:
            for (topic, index), (_, reg) in changes.leaders.items():
                if topic == TRANSACTION_STATE_TOPIC_NAME:
                    txn.on_election(index, reg.leader_epoch)
            for (topic, index), (_, reg) in changes.followers.items():
                if topic == TRANSACTION_STATE_TOPIC_NAME:
                    txn.on_resignation(index, reg.leader_epoch)
            for topic, index in changes.deletes:
                if topic == TRANSACTION_STATE_TOPIC_NAME:
                    txn.on_resignation(index, None)

    def _update_share_coordinator(self, changes) -> None:
        """The share coordinator follows the leadership of ``__share_group_state`` partitions (Kafka's
        ``ShareCoordinator.onElection`` / ``onResignation`` from the local changes)."""
        share = self.share_coordinator
        if share is None:
            return
        for (topic, index), (_, reg) in changes.leaders.items():
            if topic == SHARE_GROUP_STATE_TOPIC_NAME:
                share.on_election(index, reg.leader_epoch)
        for (topic, index), (_, reg) in changes.followers.items():
            if topic == SHARE_GROUP_STATE_TOPIC_NAME:
                share.on_resignation(index, reg.leader_epoch)
        for topic, index in changes.deletes:
            if topic == SHARE_GROUP_STATE_TOPIC_NAME:
                share.on_resignation(index, None)

    def _update_group_coordinator(self, changes) -> None:
        """The group coordinator follows the leadership of ``__consumer_offsets`` partitions (Kafka's
        ``onElection`` / ``onResignation`` from the local changes)."""
        coordinator = self.group_coordinator
        if coordinator is None:
            return
        for (topic, index), (_, reg) in changes.leaders.items():
            if topic == GROUP_METADATA_TOPIC_NAME:
                coordinator.on_election(index, reg.leader_epoch)
        for (topic, index), (_, reg) in changes.followers.items():
            if topic == GROUP_METADATA_TOPIC_NAME:
                coordinator.on_resignation(index, reg.leader_epoch)
        for topic, index in changes.deletes:
            if topic == GROUP_METADATA_TOPIC_NAME:
                coordinator.on_resignation(index, None)


_COORDINATOR_TOPICS = frozenset({GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME})
#: the topics whose local changes the publisher waits for (their coordinators load the partition's log)
_WAITED_TOPICS = _COORDINATOR_TOPICS | {SHARE_GROUP_STATE_TOPIC_NAME}


def _touches_internal_topics(changes, topics: frozenset[str]) -> bool:
    """Whether the local changes of a delta include a partition of one of ``topics``."""
    return any(
        topic in topics for entries in (changes.deletes, changes.leaders, changes.followers) for topic, _ in entries
    )
