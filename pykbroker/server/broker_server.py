"""BrokerServer: the broker role of a node, its storage, replication, coordinators and data-plane
request handling.

Mirrors ``kafka.server.BrokerServer``. Start-up (called by KafkaRaftServer, in this order, between the
SharedServer's and the ControllerServer's steps):

1. :meth:`start_storage`: the scheduler, every partition log (recovered after an unclean shutdown), the
   log cleaner;
2. :meth:`start_metadata_cache`: MetadataCache, ReplicaManager and the BrokerMetadataPublisher (which the
   SharedServer's loader then installs);
3. :meth:`register`: the broker registration (with the controller of this process in the single-node
   mode, else with the active controller through BrokerLifecycleManager, heartbeating from then on),
   until the metadata loader has published it;
4. :meth:`start_apis`: client quotas, GroupCoordinator, AlterPartitionManager, ProducerIdManager,
   TransactionCoordinator and the transaction verifier, KafkaApis and the data-plane request handler pool,
   dynamic broker configs, SCRAM credentials.

:meth:`controlled_shutdown` (before the listeners stop) asks the controller to move this broker's
leaderships away; :meth:`shutdown` then stops the rest in the reverse order of start-up: data-plane
request handlers, group and transaction coordinators, transaction verifier, replica manager (stops
applying metadata: a backlog of topic creations is abandoned, no log is created from then on) and its
purgatories, the publisher (removed from the loader: no metadata reaches this broker's components from
then on), quota managers, lifecycle manager, log manager (checkpoints, clean-shutdown marker), scheduler.

Threading: started and stopped by the thread that starts/stops the KafkaRaftServer; each component runs
its own threads.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pykbroker.config.broker_configs.group_coordinator_configs import (
    OFFSETS_COMMIT_REQUIRED_ACKS_CONFIG,
    OFFSETS_COMMIT_TIMEOUT_MS_CONFIG,
    OFFSETS_RETENTION_CHECK_INTERVAL_MS_CONFIG,
    OFFSETS_RETENTION_MINUTES_CONFIG,
    OFFSETS_TOPIC_NUM_PARTITIONS_CONFIG,
)
from pykbroker.config.broker_configs.kraft_configs import (
    BROKER_HEARTBEAT_INTERVAL_MS_CONFIG,
    BROKER_SESSION_TIMEOUT_MS_CONFIG,
)
from pykbroker.config.broker_configs.quota_configs import QUOTA_WINDOW_NUM_CONFIG, QUOTA_WINDOW_SIZE_SECONDS_CONFIG
from pykbroker.config.broker_configs.server_configs import (
    BACKGROUND_THREADS_CONFIG,
    BROKER_RACK_CONFIG,
    MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS_CONFIG,
    MAX_REQUEST_PARTITION_SIZE_LIMIT_CONFIG,
    NUM_IO_THREADS_CONFIG,
    REQUEST_TIMEOUT_MS_CONFIG,
)
from pykbroker.config.broker_configs.server_log_configs import (
    AUTO_CREATE_TOPICS_ENABLE_CONFIG,
    LOG_CLEANER_BACKOFF_MS_CONFIG,
    LOG_CLEANER_ENABLE_CONFIG,
    LOG_DIR_FAILURE_TIMEOUT_MS_CONFIG,
)
from pykbroker.config.broker_configs.socket_server_configs import LISTENERS_CONFIG
from pykbroker.config.broker_configs.transaction_configs import TRANSACTION_PARTITION_VERIFICATION_ENABLE_CONFIG
from pykbroker.config.kafka_config import KafkaConfig
from pykbroker.coordinator.group.group_coordinator import GroupCoordinator
from pykbroker.coordinator.group.group_metadata_manager import GroupMetadataManager
from pykbroker.coordinator.share.default_state_persister import DefaultStatePersister
from pykbroker.coordinator.share.share_coordinator import ShareCoordinator
from pykbroker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from pykbroker.coordinator.transaction.transaction_marker_channel_manager import TransactionMarkerChannelManager
from pykbroker.coordinator.transaction.transaction_state_manager import TransactionStateManager
from pykbroker.log.log_cleaner import LogCleaner
from pykbroker.log.log_manager import LogManager
from pykbroker.metadata.features import TRANSACTION_VERSION, supported_features_request
from pykbroker.metadata.features_publisher import finalized_features_of, with_kraft_version
from pykbroker.metadata.quorum_controller import QuorumController
from pykbroker.metadata.topic_names import (
    GROUP_METADATA_TOPIC_NAME,
    SHARE_GROUP_STATE_TOPIC_NAME,
    TRANSACTION_STATE_TOPIC_NAME,
)
from pykbroker.network.socket_server import DATA_PLANE, SocketServer
from pykbroker.protocol import errors
from pykbroker.security.client_security import ClientSecurity
from pykbroker.security.credential_cache import ScramCredentialCache
from pykbroker.security.delegation_token_cache import DelegationTokenCache
from pykbroker.server.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from pykbroker.server.alter_partition_manager import AlterPartitionManager
from pykbroker.server.api_version_manager import ApiVersionManager
from pykbroker.server.assignments_manager import AssignmentsManager
from pykbroker.server.broker_lifecycle_manager import BrokerLifecycleManager, BrokerRegistrationError
from pykbroker.server.broker_metadata_publisher import BrokerMetadataPublisher
from pykbroker.server.dynamic_broker_config import DynamicBrokerConfig
from pykbroker.server.fetch_session import FetchManager, FetchSessionCache
from pykbroker.server.forwarding_manager import ForwardingManager
from pykbroker.server.handlers.admin import AdminHandler
from pykbroker.server.handlers.delegation_tokens import DelegationTokenHandlers
from pykbroker.server.handlers.delete_records import DeleteRecordsHandler
from pykbroker.server.handlers.describe_topic_partitions import DescribeTopicPartitionsHandler
from pykbroker.server.handlers.fetch import FetchHandler
from pykbroker.server.handlers.groups import GroupHandlers
from pykbroker.server.handlers.list_offsets import ListOffsetsHandler
from pykbroker.server.handlers.log_dirs import DescribeLogDirsHandler
from pykbroker.server.handlers.metadata import MetadataHandler
from pykbroker.server.handlers.produce import ProduceHandler
from pykbroker.server.handlers.producer_id import InitProducerIdHandler, ProducerIdManager
from pykbroker.server.handlers.raft_voters import BrokerRaftVoterHandlers, RaftVoterHandlers
from pykbroker.server.handlers.sasl import SaslHandlers
from pykbroker.server.handlers.share import ShareHandlers
from pykbroker.server.handlers.share_groups import ShareGroupHandlers
from pykbroker.server.handlers.share_state import ShareStateHandlers
from pykbroker.server.handlers.transactions import TransactionHandlers
from pykbroker.server.kafka_apis import KafkaApis
from pykbroker.server.kafka_request_handler import KafkaRequestHandlerPool
from pykbroker.server.meta_properties import log_directory_ids
from pykbroker.server.metadata_cache import MetadataCache
from pykbroker.server.quotas.client_quota_manager import QuotaManagers
from pykbroker.server.replica_manager import ReplicaManager
from pykbroker.server.request_helper import RequestHelper
from pykbroker.server.server_common import (
    ShutdownSteps,
    StartupError,
    StartupWaits,
    build_apis,
    create_authorizer,
    describe_quorum_handler,
)
from pykbroker.server.share.partition_metadata_client import PartitionMetadataClient
from pykbroker.server.share.share_partition_manager import SharePartitionManager
from pykbroker.server.shared_server import SharedServer
from pykbroker.utils.delayed_operation import DelayedOperationPurgatory
from pykbroker.utils.logging import get_logger
from pykbroker.utils.metrics import MetricsRegistry
from pykbroker.utils.scheduler import KafkaScheduler
from pykbroker.utils.time import Time

if TYPE_CHECKING:  # the single-node mode's controller; imported by controller nodes only (issue 31)
    from pykbroker.server.controller_server import ControllerServer

#: how long the shutdown waits for the metadata loader to drop the broker's publisher (the loader's
#: own close waits as long)
_PUBLISHER_REMOVAL_TIMEOUT_S = 10.0
_SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


class BrokerServer:
    """The broker of one node. ``controller_server``: this process's controller in the single-node mode
    (which registers with it and sends it controller-bound requests directly), else None; ``is_controller``:
    the node also has the controller role; ``channel_for(request)``:
    the request channel a response goes back on; ``advertised_endpoints()``: listener name -> advertised
    EndPoint with its bound port; ``voter_endpoints()``: the static voters' controller endpoints."""

    def __init__(
        self,
        config: KafkaConfig,
        time: Time,
        metrics: MetricsRegistry,
        shared: SharedServer,
        socket_server: SocketServer,
        scram_credentials: ScramCredentialCache,
        inter_broker_security: ClientSecurity,
        waits: StartupWaits,
        controller_server: ControllerServer | None,
        is_controller: bool,
        channel_for: Callable,
        advertised_endpoints: Callable[[], dict],
        voter_endpoints: Callable[[], dict[int, list[tuple[str, str, int]]]],
        delegation_tokens: DelegationTokenCache | None = None,
    ):
        self.config = config
        #: the delegation tokens (KIP-48) token logins and DescribeDelegationToken use, kept from the metadata log
        self.delegation_tokens = delegation_tokens or DelegationTokenCache(None)
        self.time = time
        self.metrics = metrics
        self.shared = shared
        self.socket_server = socket_server
        self.scram_credentials = scram_credentials
        self.inter_broker_security = inter_broker_security
        self.waits = waits
        self.controller_server = controller_server
        self._channel_for = channel_for
        self._advertised_endpoints = advertised_endpoints
        self._voter_endpoints = voter_endpoints
        self.node_id = config.node_id
        self.single_node = shared.single_node
        self.is_controller = is_controller
        self.log = get_logger("BrokerServer", id=self.node_id)
        #: this broker's epoch once registered (-1 before)
        self.broker_epoch = -1
        self.scheduler: KafkaScheduler | None = None
        self.log_manager: LogManager | None = None
        self.log_cleaner: LogCleaner | None = None
        self.metadata_cache: MetadataCache | None = None
        self.replica_manager: ReplicaManager | None = None
        #: share partitions, share sessions and delayed share fetches (KIP-932), beside the replica manager
        self.share_partition_manager: SharePartitionManager | None = None
        self.publisher: BrokerMetadataPublisher | None = None
        self.forwarding_manager: ForwardingManager | None = None
        self.lifecycle_manager: BrokerLifecycleManager | None = None
        self.assignments_manager: AssignmentsManager | None = None
        self.data_helper: RequestHelper | None = None
        self.quota_managers: QuotaManagers | None = None
        self.group_metadata_manager: GroupMetadataManager | None = None
        self.group_coordinator: GroupCoordinator | None = None
        #: where controller-bound requests go: the QuorumController (single node) or the ForwardingManager
        self.controller_handle: QuorumController | ForwardingManager | None = None
        self.producer_id_manager: ProducerIdManager | None = None
        self.txn_coordinator: TransactionCoordinator | None = None
        self.txn_verifier: AddPartitionsToTxnManager | None = None
        #: the share coordinator over __share_group_state (KIP-932), answering the share state APIs 83-87
        self.share_coordinator: ShareCoordinator | None = None
        #: the Persister share partitions (SharePartitionManager) and the group coordinator use: a
        #: DefaultStatePersister talking to the share coordinators of the cluster (started on first use)
        self.share_persister: DefaultStatePersister | None = None
        #: the partition leaders' latest offsets for DescribeShareGroupOffsets v1's lag (KIP-1226)
        self.partition_metadata_client: PartitionMetadataClient | None = None
        self.data_plane_apis: KafkaApis | None = None
        self.data_version_manager: ApiVersionManager | None = None
        self.data_plane_pool: KafkaRequestHandlerPool | None = None
        self.dynamic_config: DynamicBrokerConfig | None = None

    # -- start-up ------------------------------------------------------------------------------
    def start_storage(self) -> None:
        """The scheduler, then every partition log (recovered after an unclean shutdown)."""
        config = self.config
        self.scheduler = KafkaScheduler(config[BACKGROUND_THREADS_CONFIG], "kafka-scheduler-")
        self.scheduler.startup()
        self.log_manager = LogManager.from_broker_config(config.log_dirs, config.values, self.scheduler, self.time)
        self.log_manager.directory_ids = log_directory_ids(self.log_manager.log_dirs)
        self.log_manager.startup()
        self.log_cleaner = LogCleaner(
            self.log_manager, self.time, config[LOG_CLEANER_BACKOFF_MS_CONFIG], config[LOG_CLEANER_ENABLE_CONFIG]
        )
        self.log_cleaner.startup(self.scheduler)

    def start_metadata_cache(self) -> None:
        """MetadataCache, ReplicaManager and the BrokerMetadataPublisher. Needs :meth:`start_storage`."""
        config = self.config
        self.metadata_cache = MetadataCache(self.node_id)
        # Always there: Produce v12 / TxnOffsetCommit v5 (KIP-890 part 2) add partitions through it; the
        # verification of older versions follows transaction.partition.verification.enable. Started with
        # the transaction coordinator.
        self.txn_verifier = AddPartitionsToTxnManager(
            self.node_id,
            self.metadata_cache,
            config.inter_broker_listener_name,
            self.time,
            config[REQUEST_TIMEOUT_MS_CONFIG],
            security=self.inter_broker_security,
        )
        # A broker of a cluster halts when no log dir is left (Kafka's Exit.halt), so that its leaderships
        # move to replicas on other brokers; a single node has no other replica and keeps answering
        # KAFKA_STORAGE_ERROR instead.
        self.replica_manager = ReplicaManager(
            self.node_id,
            config,
            self.log_manager,
            self.metadata_cache,
            self.time,
            halt=None if self.single_node else os._exit,
            metrics=self.metrics,
            broker_epoch=lambda: self.broker_epoch,
            inter_broker_security=self.inter_broker_security,
            add_partitions_to_txn_manager=self.txn_verifier,
            transaction_verification_enabled=bool(config[TRANSACTION_PARTITION_VERIFICATION_ENABLE_CONFIG]),
        )
        self.replica_manager.startup(self.scheduler)
        cache = self.metadata_cache
        self.share_persister = self._create_share_persister()
        self.share_partition_manager = SharePartitionManager(
            self.replica_manager,
            config,
            self.time,
            image=lambda: cache.image if cache is not None else None,
            group_configs=self._share_group_configs,
            persister=self.share_persister,
        )
        self.replica_manager.share_fetch_purgatory = self.share_partition_manager.purgatory
        self.replica_manager.on_leadership_lost = self.share_partition_manager.on_partitions_moved
        self.publisher = BrokerMetadataPublisher(
            self.node_id, self.metadata_cache, self.replica_manager, self.log_manager
        )

    def _share_group_configs(self, group_id: str) -> dict | None:
        """The share partitions' query of a group's ``share.*`` configs: the group coordinator's answer (any broker
        can give it), None before the coordinator exists (the manager then reads the metadata image itself)."""
        coordinator = self.group_coordinator
        return None if coordinator is None else coordinator.share_group_configs(group_id)

    def register(self) -> None:
        """Register this broker (its listeners are bound: the ports are known) and wait until the
        registration is published; StartupError when refused or not done in time."""
        if self.single_node:
            self._register_broker()
        else:
            self._register_with_quorum()

    def _register_with_quorum(self) -> None:
        """A broker of a cluster: register with the active controller over the controller listener
        (BrokerLifecycleManager), heartbeat from then on, forward controller-bound requests to it."""
        config = self.config
        channel = self.shared.controller_channel
        cache = self.metadata_cache
        assert channel is not None and cache is not None
        self.forwarding_manager = ForwardingManager(channel)
        self.lifecycle_manager = BrokerLifecycleManager(
            self.node_id,
            channel,
            config[BROKER_HEARTBEAT_INTERVAL_MS_CONFIG],
            lambda: cache.image.offset,
            failure_timeout_ms=config[LOG_DIR_FAILURE_TIMEOUT_MS_CONFIG],
            on_fatal=lambda message: os._exit(1),
        )
        # KIP-858: failed log dirs go to the controller in the heartbeats, replicas' directories in
        # AssignReplicasToDirs
        self.assignments_manager = AssignmentsManager(self.node_id, channel, lambda: self.broker_epoch)
        rm = self.replica_manager
        assert rm is not None
        rm.on_directory_failure = self.lifecycle_manager.propagate_directory_failure
        rm.on_assignment = self.assignments_manager.on_assignment
        try:
            self.broker_epoch = self.waits.result(
                self.lifecycle_manager.start(self._registration_request()),
                "the controller quorum to accept this broker's registration",
            )
        except BrokerRegistrationError as e:
            raise StartupError(f"The controller refused to register broker {self.node_id}: {e}") from e
        self._await_published()

    def _register_broker(self) -> None:
        """The single-node mode: register with the controller of this process."""
        assert self.controller_server is not None and self.controller_server.controller is not None
        result = self.waits.result(
            self.controller_server.controller.register_broker(self._registration_request()),
            "the controller to answer this broker's registration",
        )
        if result["error_code"] != errors.NONE:
            raise RuntimeError(
                f"Broker registration failed: {errors.name_of(result['error_code'])} {result.get('error_message')}"
            )
        self.broker_epoch = result["broker_epoch"]
        self._await_published()

    def _await_published(self) -> None:
        cache = self.metadata_cache
        assert cache is not None
        timeout_ms = self.waits.timeout_ms
        deadline = self.time.hi_res_milliseconds() + timeout_ms
        while not cache.has_alive_broker(self.node_id):
            if self.time.hi_res_milliseconds() > deadline:
                raise StartupError(
                    f"Timed out after {int(timeout_ms)} ms waiting for this broker's registration "
                    "to be published by the metadata loader"
                )
            self.time.sleep(5)
        self.log.info(
            f"Registered broker {self.node_id} with broker epoch {self.broker_epoch}; metadata caught up "
            f"to offset {cache.image.offset}"
        )

    def _registration_request(self) -> dict:
        """BrokerRegistration fields: this broker's advertised listeners (real bound ports), rack."""
        listeners = [
            {
                "name": ep.listener_name,
                "host": ep.host,
                "port": ep.port,
                "security_protocol": _SECURITY_PROTOCOL_IDS[ep.security_protocol],
            }
            for ep in self._advertised_endpoints().values()
        ]
        return {
            "broker_id": self.node_id,
            "cluster_id": self.shared.cluster_id,
            "incarnation_id": uuid.uuid4(),
            LISTENERS_CONFIG: listeners,
            "features": supported_features_request(),
            "rack": self.config[BROKER_RACK_CONFIG],
            # KIP-858: the directory.id of every log dir still online
            "log_dirs": [
                self.log_manager.directory_ids[d]
                for d in (self.log_manager.live_log_dirs if self.log_manager else [])
                if d in self.log_manager.directory_ids
            ]
            if self.log_manager
            else [],
            # KIP-966's clean shutdown detection: the epoch this broker had when its logs were last closed cleanly
            "previous_broker_epoch": self.log_manager.broker_epoch_from_clean_shutdown() if self.log_manager else -1,
        }

    def start_apis(self) -> None:
        """Everything that serves clients, over the registered broker: quotas, coordinators, KafkaApis
        and the data-plane request handler pool, dynamic configs. Needs :meth:`register`."""
        config = self.config
        cache, rm, log_manager, scheduler = self.metadata_cache, self.replica_manager, self.log_manager, self.scheduler
        publisher = self.publisher
        assert cache is not None and rm is not None and log_manager is not None and scheduler is not None
        assert publisher is not None
        authorizer = create_authorizer(config, lambda: cache.image)
        # Client quotas (server/quotas): limits from the metadata image now and on every change.
        self.quota_managers = QuotaManagers(
            config[QUOTA_WINDOW_NUM_CONFIG], config[QUOTA_WINDOW_SIZE_SECONDS_CONFIG], self.time, self.metrics
        )
        publisher.quota_managers = self.quota_managers
        self.quota_managers.update_quotas(cache.image.client_quotas)
        publisher.connection_quotas = self.socket_server.connection_quotas  # ip connection_creation_rate
        self.socket_server.connection_quotas.update_ip_connection_rates(cache.image.client_quotas)
        self.quota_managers.start()
        self.quota_managers.request.register_metrics(self.metrics)
        self.quota_managers.controller_mutation.register_metrics(self.metrics)
        self.data_helper = RequestHelper(
            self._channel_for, authorizer=authorizer, quotas=self.quota_managers, topic_name=cache.topic_name
        )
        self.group_metadata_manager = GroupMetadataManager(
            rm,
            log_manager,
            config[OFFSETS_TOPIC_NUM_PARTITIONS_CONFIG],
            self.time,
            config[OFFSETS_RETENTION_MINUTES_CONFIG] * 60 * 1000,
            required_acks=config[OFFSETS_COMMIT_REQUIRED_ACKS_CONFIG],
            commit_timeout_ms=config[OFFSETS_COMMIT_TIMEOUT_MS_CONFIG],
        )
        self.group_coordinator = GroupCoordinator(
            self.node_id, config, self.group_metadata_manager, self.time, persister=self.share_persister
        )
        self.group_coordinator.set_image(lambda: cache.image)
        # KIP-1226: the share-partition lag of DescribeShareGroupOffsets v1 needs the partitions' latest offsets
        self.partition_metadata_client = PartitionMetadataClient(
            self.node_id,
            self.replica_manager,
            cache,
            config.inter_broker_listener_name,
            request_timeout_ms=config[REQUEST_TIMEOUT_MS_CONFIG],
            security=self.inter_broker_security,
            time=self.time,
        )
        self.group_coordinator.share_offsets.latest_offsets = self.partition_metadata_client.latest_offsets
        self.group_coordinator.startup()
        publisher.group_coordinator = self.group_coordinator
        # The __consumer_offsets partitions led already load now (the publisher reports later changes;
        # a stale epoch from this snapshot is ignored by the manager).
        for (topic, index), partition in list(rm.partitions_snapshot().items()):
            if topic == GROUP_METADATA_TOPIC_NAME and partition.is_leader:
                self.group_coordinator.on_election(index, partition.leader_epoch)
        self._register_metrics()
        scheduler.schedule(
            "delete-expired-group-metadata",
            self.group_metadata_manager.cleanup_expired_offsets,
            config[OFFSETS_RETENTION_CHECK_INTERVAL_MS_CONFIG],
            config[OFFSETS_RETENTION_CHECK_INTERVAL_MS_CONFIG],
        )
        if self.single_node:
            assert self.controller_server is not None
            self.controller_handle = self.controller_server.controller
        else:
            self.controller_handle = self.forwarding_manager
        rm.set_alter_partition_manager(
            AlterPartitionManager(self.node_id, lambda: self.controller_handle, lambda: self.broker_epoch, scheduler)
        )
        self.producer_id_manager = ProducerIdManager(self.node_id, self.controller_handle, lambda: self.broker_epoch)
        self._start_transaction_coordinator()
        self._start_share_coordinator()
        self.data_plane_apis, self.data_version_manager = build_apis(
            self.node_id, self.data_helper, self.time, self._broker_families(), self.finalized_features
        )
        self.data_plane_apis.after_handle.append(rm.try_complete_actions)
        if self.share_partition_manager is not None:  # share sessions end with their connection
            self.socket_server.data_plane_request_channel.disconnect_listeners.append(
                self.share_partition_manager.on_connection_closed
            )
        self.data_plane_pool = KafkaRequestHandlerPool(
            self.node_id,
            self.socket_server.data_plane_request_channel,
            self.data_plane_apis,
            config[NUM_IO_THREADS_CONFIG],
            DATA_PLANE,
            self.metrics,
            self.time,
        )
        # Dynamic broker configs: applied now (what the metadata log holds already) and on every change.
        self.dynamic_config = DynamicBrokerConfig(
            self.node_id,
            config,
            log_manager,
            self.data_plane_pool,
            self.socket_server.connection_quotas,
            socket_server=self.socket_server,
            replica_fetcher_manager=rm.replica_fetcher_manager,
        )
        self.dynamic_config.update(cache.image)
        publisher.dynamic_config = self.dynamic_config
        self.scram_credentials.update_from_image(cache.image)
        publisher.scram_credentials = self.scram_credentials
        self.delegation_tokens.update_from_image(cache.image)
        publisher.delegation_tokens = self.delegation_tokens

    def _start_transaction_coordinator(self) -> None:
        """The TransactionCoordinator: its state manager over ``__transaction_state``, the marker channel
        (to partition leaders over the inter-broker listener), and the partitions this broker leads
        already (the publisher reports later changes)."""
        config = self.config
        cache, rm, publisher = self.metadata_cache, self.replica_manager, self.publisher
        assert cache is not None and rm is not None and publisher is not None
        state_manager = TransactionStateManager(
            self.node_id,
            rm,
            self.log_manager,
            config,
            self.time,
            self.scheduler,
            transaction_version=lambda: cache.image.features.get(TRANSACTION_VERSION, 0),
        )
        channel = TransactionMarkerChannelManager(
            self.node_id,
            cache,
            config.inter_broker_listener_name,
            state_manager,
            self.time,
            config[REQUEST_TIMEOUT_MS_CONFIG],
            100,
            security=self.inter_broker_security,
        )
        self.txn_coordinator = TransactionCoordinator(
            self.node_id, config, state_manager, channel, self.producer_id_manager, self.scheduler, self.time
        )
        self.txn_coordinator.startup()
        assert self.txn_verifier is not None
        self.txn_verifier.start()
        publisher.txn_coordinator = self.txn_coordinator
        for (topic, index), partition in list(rm.partitions_snapshot().items()):
            if topic == TRANSACTION_STATE_TOPIC_NAME and partition.is_leader:
                self.txn_coordinator.on_election(index, partition.leader_epoch)

    def _create_share_persister(self) -> DefaultStatePersister:
        """The Persister of share partitions' state (KIP-932), shared by the SharePartitionManager and the group
        coordinator (the share group offsets admin APIs): a DefaultStatePersister finding the share coordinator of a
        share partition through the live brokers' inter-broker listener (its thread starts on first use)."""
        config, cache = self.config, self.metadata_cache
        assert cache is not None
        listener = config.inter_broker_listener_name

        def brokers() -> list[tuple[int, str, int]]:
            return [(n, ep.host, ep.port) for n, ep, _ in cache.alive_brokers(listener)]

        return DefaultStatePersister(
            self.node_id,
            brokers,
            timeout_ms=config[REQUEST_TIMEOUT_MS_CONFIG],
            security=self.inter_broker_security,
            time=self.time,
        )

    def _start_share_coordinator(self) -> None:
        """The ShareCoordinator over ``__share_group_state`` (the partitions this broker leads already load now, the
        publisher reports later changes)."""
        config = self.config
        cache, rm, publisher = self.metadata_cache, self.replica_manager, self.publisher
        assert cache is not None and rm is not None and publisher is not None

        def topic_exists(topic_id: uuid.UUID, partition: int) -> bool:
            return cache.image.topics.get_partition(topic_id, partition) is not None

        self.share_coordinator = ShareCoordinator(
            self.node_id, rm, self.log_manager, config, self.time, self.scheduler, topic_exists
        )
        publisher.share_coordinator = self.share_coordinator
        for (topic, index), partition in list(rm.partitions_snapshot().items()):
            if topic == SHARE_GROUP_STATE_TOPIC_NAME and partition.is_leader:
                self.share_coordinator.on_election(index, partition.leader_epoch)

    def _register_metrics(self) -> None:
        """Gauges of components that do not hold the registry: per-partition logs, the group metadata,
        and every purgatory (``kafka.server:type=DelayedOperationPurgatory,...,delayedOperation=<name>``,
        registered by Kafka's DelayedOperationPurgatory itself)."""
        rm, coordinator = self.replica_manager, self.group_coordinator
        assert self.log_manager is not None and self.group_metadata_manager is not None
        assert rm is not None and coordinator is not None
        self.log_manager.register_metrics(self.metrics)
        self.group_metadata_manager.register_metrics(self.metrics)

        def register(purgatory: DelayedOperationPurgatory[Any]) -> None:
            tag = f"delayedOperation={purgatory.purgatory_name}"
            prefix = "kafka.server:type=DelayedOperationPurgatory,name="
            self.metrics.gauge(f"{prefix}PurgatorySize,{tag}", lambda: purgatory.purgatory_size)
            self.metrics.gauge(f"{prefix}NumDelayedOperations,{tag}", lambda: purgatory.num_delayed)

        register(rm.produce_purgatory)
        register(rm.fetch_purgatory)
        register(coordinator.join_purgatory)
        register(coordinator.heartbeat_purgatory)

    def _broker_families(self) -> list:
        """The data plane's handler families (Kafka's KafkaApis handlers), over this broker's components."""
        helper, cache, rm = self.data_helper, self.metadata_cache, self.replica_manager
        assert helper is not None and self.log_manager is not None and self.producer_id_manager is not None
        assert self.share_partition_manager is not None
        groups = GroupHandlers(
            helper, self.group_coordinator, cache, self.controller_handle, self.config, self.time, self.txn_coordinator
        )
        groups.share_coordinator = self.share_coordinator
        return [
            MetadataHandler(
                helper, cache, self._auto_create_topics if self.config[AUTO_CREATE_TOPICS_ENABLE_CONFIG] else None
            ),
            DescribeTopicPartitionsHandler(helper, cache, self.config[MAX_REQUEST_PARTITION_SIZE_LIMIT_CONFIG]),
            ProduceHandler(helper, rm, cache),
            FetchHandler(
                helper,
                rm,
                cache,
                FetchManager(
                    FetchSessionCache(
                        self.config[MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS_CONFIG],
                        num_shards=8,
                        metrics=self.metrics,
                    ),
                    self.time,
                ),
            ),
            ListOffsetsHandler(helper, rm),
            ShareHandlers(helper, cache, self.share_partition_manager),
            DeleteRecordsHandler(helper, rm),
            DescribeLogDirsHandler(helper, self.log_manager),
            AdminHandler(
                helper,
                self.controller_handle,
                cache,
                self.config,
                self.log_manager.default_config,
                dynamic_config=lambda: self.dynamic_config,
            ),
            InitProducerIdHandler(helper, self.producer_id_manager, self.txn_coordinator),
            SaslHandlers(helper),
            DelegationTokenHandlers(helper, self.controller_handle, self.delegation_tokens),
            groups,
            ShareStateHandlers(helper, self.share_coordinator),
            ShareGroupHandlers(helper, self.group_coordinator),
            TransactionHandlers(
                helper, self.txn_coordinator, self.group_coordinator, rm, cache, self.config, self.time
            ),
            describe_quorum_handler(helper, self.shared, self.is_controller, self._voter_endpoints),
            BrokerRaftVoterHandlers(
                helper,
                self.controller_handle,
                RaftVoterHandlers(helper, lambda: self.shared.raft, self.shared.cluster_id),
            ),
        ]

    def _auto_create_topics(self, names: list[str]) -> dict[str, int]:
        """Metadata auto-creation: ask the controller to create the topics with the defaults, answer
        LEADER_NOT_AVAILABLE (retriable) now; invalid names get INVALID_TOPIC_EXCEPTION."""
        from pykbroker.metadata.topic_names import validate as validate_topic_name

        codes, valid = {}, []
        for n in names:
            try:
                validate_topic_name(n)
                valid.append(n)
                codes[n] = errors.LEADER_NOT_AVAILABLE
            except errors.KafkaError as e:
                codes[n] = e.code
        if valid:
            assert self.controller_handle is not None  # set before the data plane's handlers are built
            self.controller_handle.create_topics(
                {
                    "topics": [
                        {"name": n, "num_partitions": -1, "replication_factor": -1, "assignments": [], "configs": []}
                        for n in valid
                    ],
                    "timeout_ms": 30000,
                    "validate_only": False,
                }
            )
        return codes

    def finalized_features(self):
        """What ApiVersions reports as finalized: this broker's metadata image (epoch: its offset), Kafka's
        KRaftMetadataCache.features."""
        assert self.metadata_cache is not None
        raft = self.shared.raft
        features = finalized_features_of(self.metadata_cache.image)
        return with_kraft_version(features, raft.kraft_version() if raft is not None else 0)

    # -- shutdown ------------------------------------------------------------------------------
    def controlled_shutdown(self) -> None:
        """A broker of a cluster asks the controller to move its leaderships away (BrokerHeartbeat
        ``want_shut_down``) and waits for the answer, at most ``broker.session.timeout.ms``: a controller
        that cannot answer fences the broker after that long anyway. Nothing to do before registration
        (no lifecycle manager) or in the single-node mode."""
        lifecycle = self.lifecycle_manager
        if lifecycle is None:
            return
        self.log.info("Beginning controlled shutdown.")
        lifecycle.begin_controlled_shutdown()
        if not lifecycle.shutdown_ready.wait(self.config[BROKER_SESSION_TIMEOUT_MS_CONFIG] / 1000.0):
            self.log.warning("The controller did not answer the controlled shutdown in time; shutting down")

    def shutdown(self, log_error: Callable[[str, Exception], None]) -> None:
        """Stop what was started, in the reverse order of start-up (a part never started is skipped);
        ``log_error(what, error)`` reports a step that failed (the next steps still run). The listeners
        have stopped processing requests already."""
        steps = ShutdownSteps()
        steps.add("data-plane request handlers", self.data_plane_pool)
        steps.add("group coordinator", self.group_coordinator)
        steps.add("transaction coordinator", self.txn_coordinator)
        steps.add("transaction verifier", self.txn_verifier)
        steps.add("share state persister", self.share_persister, lambda persister: persister.stop())
        steps.add("partition metadata client", self.partition_metadata_client, lambda client: client.stop())
        steps.add("share coordinator", self.share_coordinator)
        steps.add("share partition manager", self.share_partition_manager)
        steps.add("replica manager", self.replica_manager)
        loader = self.shared.loader
        if loader is not None:
            # after the replica manager, which abandons a backlog of topic creations; the loader applies
            # nothing to this broker's components from then on
            remove = loader.remove_and_close_publisher
            steps.add("metadata publisher", self.publisher, lambda p: remove(p).result(_PUBLISHER_REMOVAL_TIMEOUT_S))
        steps.add("quota managers", self.quota_managers)
        steps.add("broker lifecycle manager", self.lifecycle_manager, lambda manager: manager.close())
        steps.add("assignments manager", self.assignments_manager, lambda manager: manager.close())
        steps.add("log manager", self.log_manager, lambda log_manager: log_manager.shutdown(self.broker_epoch))
        steps.add("scheduler", self.scheduler)
        steps.run(log_error)
