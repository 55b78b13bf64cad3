"""KafkaRaftServer: one process playing the broker (and controller) roles, started and stopped in order.

Mirrors ``kafka.server.KafkaRaftServer`` + ``BrokerServer.startup``/``shutdown``:

start-up: bind every listener (a port in use stops start-up before any data directory is touched) ->
lock ``.lock`` in every log dir and the metadata log dir (held until shutdown; a second broker on the
same directories is refused) -> check/format storage (meta.properties) -> scheduler and LogManager (log
recovery) -> the ``__cluster_metadata`` Raft log and client, MetadataLoader with the
BrokerMetadataPublisher, QuorumController (replays the metadata log; becomes active) -> broker
registration, wait until it is published -> KafkaApis and its handlers -> request handler pools ->
enable request processing (processors, then acceptors: network threads start last, so clients only
connect to a ready broker). Every start-up wait is bounded by ``initial.broker.registration.timeout.ms``.

shutdown: stop acceptors and processors -> drain handler pools -> group coordinator -> replica manager
(stops applying metadata: a backlog of topic creations is abandoned, no log is created from then on)
and purgatories -> controller -> Raft -> loader -> logs (checkpoints, clean-shutdown marker) ->
scheduler -> release the directory locks.
``shutdown`` is idempotent and safe from a signal handler thread.
"""

from __future__ import annotations

import concurrent.futures
import os
import socket
import threading
import uuid

from pykbroker.config.config_def import ConfigException
from pykbroker.config.endpoint import EndPoint
from pykbroker.config.group_config import GroupConfigDefaults
from pykbroker.config.kafka_config import KafkaConfig
from pykbroker.coordinator.group.group_coordinator import GroupCoordinator
from pykbroker.coordinator.group.group_metadata_manager import GroupMetadataManager
from pykbroker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from pykbroker.coordinator.transaction.transaction_marker_channel_manager import TransactionMarkerChannelManager
from pykbroker.coordinator.transaction.transaction_state_manager import TransactionStateManager
from pykbroker.log.log_cleaner import LogCleaner
from pykbroker.log.log_config import LogConfig
from pykbroker.log.log_manager import LogDirLockError, LogManager, lock_log_dirs
from pykbroker.metadata.bootstrap import read_bootstrap_records, write_bootstrap_records
from pykbroker.metadata.controller_metadata_metrics import ControllerMetadataMetrics
from pykbroker.metadata.feature_control_manager import feature_level_bootstrap_records
from pykbroker.metadata.features import (
    LATEST_PRODUCTION,
    LEGACY_BOOTSTRAP_METADATA_VERSION,
    METADATA_VERSION,
    TRANSACTION_VERSION,
    bootstrap_levels,
    supported_features_request,
)
from pykbroker.metadata.features_publisher import FeaturesPublisher, finalized_features_of
from pykbroker.metadata.log_config_schema import LogConfigSchema
from pykbroker.metadata.metadata_loader import MetadataLoader
from pykbroker.metadata.quorum_controller import QuorumController
from pykbroker.metadata.records import MetadataRecordSerde
from pykbroker.metadata.snapshot_generator import SnapshotGenerator
from pykbroker.metadata.standard_authorizer import CLASS_NAMES as AUTHORIZER_CLASS_NAMES
from pykbroker.metadata.standard_authorizer import StandardAuthorizer
from pykbroker.metadata.topic_names import GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME
from pykbroker.metrics.reporter import MetricsReporter, create_reporters
from pykbroker.network.socket_server import CONTROL_PLANE, DATA_PLANE, SocketServer, SocketServerConfig
from pykbroker.protocol import errors, request_schema
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.raft.describe_quorum import describe_quorum
from pykbroker.raft.file_replicated_log import FileReplicatedLog
from pykbroker.raft.kafka_network_channel import KafkaNetworkChannel, parse_voters
from pykbroker.raft.kafka_raft_client import KafkaRaftClient
from pykbroker.raft.kafka_raft_client_driver import KafkaRaftClientDriver
from pykbroker.raft.kafka_raft_metrics import KafkaRaftMetrics
from pykbroker.raft.quorum_state_store import FileQuorumStateStore
from pykbroker.security.channel_builders import authenticator_factories, transport_factories
from pykbroker.security.client_security import PLAINTEXT, ClientSecurity, client_security
from pykbroker.security.credential_cache import ScramCredentialCache
from pykbroker.server.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from pykbroker.server.alter_partition_manager import AlterPartitionManager
from pykbroker.server.api_version_manager import ApiVersionManager
from pykbroker.server.broker_lifecycle_manager import BrokerLifecycleManager, BrokerRegistrationError
from pykbroker.server.broker_metadata_publisher import BrokerMetadataPublisher
from pykbroker.server.dynamic_broker_config import DynamicBrokerConfig
from pykbroker.server.fetch_session import FetchManager, FetchSessionCache
from pykbroker.server.forwarding_manager import ForwardingManager
from pykbroker.server.handlers.admin import AdminHandler
from pykbroker.server.handlers.api_versions import ApiVersionsHandler
from pykbroker.server.handlers.controller_apis import ControllerApis
from pykbroker.server.handlers.delete_records import DeleteRecordsHandler
from pykbroker.server.handlers.describe_quorum import DescribeQuorumHandler
from pykbroker.server.handlers.describe_topic_partitions import DescribeTopicPartitionsHandler
from pykbroker.server.handlers.fetch import FetchHandler
from pykbroker.server.handlers.groups import GroupHandlers
from pykbroker.server.handlers.list_offsets import ListOffsetsHandler
from pykbroker.server.handlers.log_dirs import DescribeLogDirsHandler
from pykbroker.server.handlers.metadata import MetadataHandler
from pykbroker.server.handlers.produce import ProduceHandler
from pykbroker.server.handlers.producer_id import InitProducerIdHandler, ProducerIdManager
from pykbroker.server.handlers.raft import RaftHandlers
from pykbroker.server.handlers.sasl import SaslHandlers
from pykbroker.server.handlers.transactions import TransactionHandlers
from pykbroker.server.kafka_apis import KafkaApis
from pykbroker.server.kafka_request_handler import KafkaRequestHandlerPool
from pykbroker.server.meta_properties import MetaPropertiesError, ensure_formatted
from pykbroker.server.metadata_cache import MetadataCache
from pykbroker.server.node_to_controller_channel_manager import NodeToControllerChannelManager
from pykbroker.server.quotas.client_quota_manager import QuotaManagers
from pykbroker.server.quotas.client_quota_publisher import ClientQuotaPublisher
from pykbroker.server.replica_manager import ReplicaManager
from pykbroker.server.request_helper import RequestHelper
from pykbroker.utils.fault_handler import ProcessTerminatingFaultHandler
from pykbroker.utils.logging import get_logger
from pykbroker.utils.metrics import MetricsRegistry
from pykbroker.utils.scheduler import KafkaScheduler
from pykbroker.utils.time import SYSTEM, Time

_SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


class StartupError(RuntimeError):
    """Start-up failed for a known reason that the message states completely (reported as one line,
    without a traceback): a listener could not be bound, a data directory is locked by another broker,
    a start-up wait timed out. Kafka throws ``KafkaException`` for these."""


def _describe_quorum_handler(server: KafkaRaftServer, helper: RequestHelper) -> DescribeQuorumHandler:
    """DescribeQuorum answered from ``server``'s Raft client (its voter endpoints for v2 ``nodes``); both are
    looked up per request. A controller answers from its own Raft client (NOT_LEADER_OR_FOLLOWER unless it
    leads); a broker of a cluster asks the active controller, as Kafka's brokers forward DescribeQuorum."""

    def describe() -> dict:
        partition = describe_quorum(server.raft, server.time.milliseconds())
        channel = getattr(server, "controller_channel", None)
        if partition["error_code"] != errors.NOT_LEADER_OR_FOLLOWER or channel is None or server.is_controller:
            return partition
        body = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
        # Blocks this handler thread for one round trip to the leader (an operator's request, not a hot path).
        response = channel.send_request(ApiKeys.DESCRIBE_QUORUM, 2, body, 5000).result(10)
        return response["topics"][0]["partitions"][0]

    return DescribeQuorumHandler(helper, describe, lambda: server._voter_endpoints())


def _schema_range(api_key: int) -> tuple[int, int]:
    schema = request_schema(api_key)
    return schema.valid_versions.lo, schema.valid_versions.hi


class KafkaRaftServer:
    def __init__(self, config: KafkaConfig, time: Time = SYSTEM, halt_on_fatal_fault: bool = True):
        """``halt_on_fatal_fault``: a fatal fault (the Raft IO thread failed, e.g. the metadata log dir is
        full) halts the process with exit code 1, as Kafka's ``ProcessTerminatingFaultHandler``; False (a
        broker embedded in another program) shuts this server down instead."""
        self.config = config
        self.time = time
        #: Kafka's fatal fault handler (SharedServer's ``fatalFaultHandler``): the Raft IO thread's failures
        self.fatal_fault_handler = ProcessTerminatingFaultHandler(
            halt=os._exit if halt_on_fatal_fault else self._stop_on_fatal_fault
        )
        self.node_id = config.node_id
        self.log = get_logger("KafkaRaftServer", nodeId=self.node_id)
        self.metrics = MetricsRegistry()
        self.cluster_id: str | None = None
        self.socket_server: SocketServer | None = None
        self.data_plane_pool: KafkaRequestHandlerPool | None = None
        self.control_plane_pool: KafkaRequestHandlerPool | None = None
        self.metric_reporters: list[MetricsReporter] = []
        self._shutdown_lock = threading.Lock()
        self._shutdown_done = threading.Event()
        self.started = False
        self.fatal_error: str | None = None
        # Kafka's BrokerState values: NOT_RUNNING 0, STARTING 1, RUNNING 3, SHUTTING_DOWN 7.
        self.broker_state = 0
        self.metrics.gauge("kafka.server:type=KafkaServer,name=BrokerState", lambda: self.broker_state)

    # -- start-up ------------------------------------------------------------------------------
    def startup(self) -> None:
        """Start every component in order. Raises StartupError (one-line message: a listener cannot be
        bound, a data directory is locked by another broker, a start-up wait timed out, the controller
        refused the registration), the config and storage errors, or whatever a component raised."""
        config = self.config
        self.log.info("Starting broker" if self.is_broker else "Starting controller")
        self.broker_state = 1
        for key in config.unknown_keys:
            self.log.warning(f"The configuration '{key}' was supplied but isn't a known config.")
        self._check_voters()
        timeout = config["initial.broker.registration.timeout.ms"] / 1000.0
        # metric.reporters: an unknown class is a ConfigException before anything is bound or touched.
        reporters = create_reporters(config["metric.reporters"], config.values)

        # Listeners first: a port in use stops start-up before anything touches the data directories.
        sconfig = SocketServerConfig.from_kafka_config(config)
        self.scram_credentials = ScramCredentialCache()
        endpoints = [*sconfig.data_plane_listeners, *filter(None, [sconfig.control_plane_listener])]
        authenticators = authenticator_factories(endpoints, config.originals, self.scram_credentials.lookup)
        self.inter_broker_security, self.controller_security = self._client_securities()
        try:
            self.socket_server = SocketServer(
                sconfig,
                self.metrics,
                self._is_api_allowed,
                self.time,
                authenticator_factories=authenticators,
                transport_factories=transport_factories(endpoints, config.originals),
                sasl_max_receive_size=config["sasl.server.max.receive.size"],
            )
            for acceptor in self.socket_server.acceptors:
                acceptor.open_server_socket()
        except OSError as e:  # "Socket server failed to bind to host:port: <reason>."
            raise StartupError(e.strerror if e.errno is not None and e.strerror else str(e)) from e
        # Metric reporters bind with the listeners (the Prometheus endpoint); they read the registry,
        # whose metrics appear as the components below register them.
        for reporter in reporters:
            try:
                reporter.init(self.metrics)
            except OSError as e:
                raise StartupError(e.strerror if e.errno is not None and e.strerror else str(e)) from e
            self.metric_reporters.append(reporter)

        # Lock every data directory (and the metadata log's) for the process lifetime, then format/check.
        dirs = self._data_dirs()
        try:
            self._dir_locks = lock_log_dirs(dirs)
        except LogDirLockError as e:
            raise StartupError(str(e)) from e
        try:
            self.cluster_id, formatted_now = ensure_formatted(
                dirs, self.node_id, self.log, allow_auto_format=self.single_node
            )
        except MetaPropertiesError as e:
            raise StartupError(str(e)) from e
        if formatted_now and self.is_controller:
            # as kafka-storage format does: the feature levels the cluster starts at (Kafka 4.0's latest)
            write_bootstrap_records(
                config.metadata_log_dir,
                feature_level_bootstrap_records(LATEST_PRODUCTION, bootstrap_levels(LATEST_PRODUCTION)),
            )

        if self.is_broker:
            self._start_storage()
        self._start_raft()
        if self.is_broker:
            self._start_metadata_cache()
        self._start_loader(timeout)
        if self.is_controller:
            self._start_controller()
        self.raft_driver.start()
        if self.single_node and not self.controller.wait_for_active(timeout):
            raise StartupError(
                f"Timed out after {config['initial.broker.registration.timeout.ms']} ms waiting for "
                "the metadata quorum controller to become active"
            )

        if self.is_controller and not self.single_node:
            # The quorum needs this listener to elect a leader, before the broker part can register.
            self._start_controller_apis()
            self.socket_server.enable_request_processing((CONTROL_PLANE,))
        if self.is_broker:
            # Register this broker (its listeners are bound: the ports are known), wait until it is published.
            if self.single_node:
                self._register_broker(timeout)
            else:
                self._register_with_quorum(timeout)
            self._start_broker_apis()
        if self.single_node:
            self._start_controller_apis()
        self.socket_server.enable_request_processing()
        self.started = True
        if self.fatal_error is not None:
            raise StartupError(self.fatal_error)
        self.broker_state = 3
        self.log.info("Kafka Server started")

    @property
    def is_broker(self) -> bool:
        return "broker" in self.config.process_roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.config.process_roles

    def _data_dirs(self) -> list[str]:
        """The directories this node locks and formats: the metadata log dir, plus the log dirs of a broker."""
        config = self.config
        if not self.is_broker:
            return [config.metadata_log_dir]
        return list(dict.fromkeys(config.log_dirs + [config.metadata_log_dir]))

    def _check_voters(self) -> None:
        """``controller.quorum.voters`` against the roles (Kafka's ``KafkaConfig.validateValues``). A node
        that is both broker and the only voter is the single-node mode: no network between its parts, and
        the one setup whose empty storage is formatted on first start (every other node needs
        ``kafka-storage format``)."""
        config = self.config
        try:
            self.voters = parse_voters(config["controller.quorum.voters"])
        except ValueError as e:
            raise ConfigException(
                "controller.quorum.voters", ",".join(config["controller.quorum.voters"]), str(e)
            ) from None
        if not self.voters:
            if not self.is_controller:
                raise ConfigException(
                    "controller.quorum.voters",
                    "",
                    "a broker-only node needs the controllers in controller.quorum.voters "
                    "(dynamic quorums, KIP-853, are not supported)",
                )
            self.voters = {self.node_id: ("", 0)}
        if self.is_controller and self.node_id not in self.voters:
            raise ConfigException(
                "controller.quorum.voters",
                ",".join(config["controller.quorum.voters"]),
                f"If process.roles contains the 'controller' role, the node id {self.node_id} must be included "
                "in the set of voters",
            )
        if not self.is_controller and self.node_id in self.voters:
            raise ConfigException(
                "controller.quorum.voters",
                ",".join(config["controller.quorum.voters"]),
                f"If process.roles contains just the 'broker' role, the node id {self.node_id} must not be "
                "included in the set of voters",
            )
        self.single_node = self.is_broker and set(self.voters) == {self.node_id}

    def _start_storage(self) -> None:
        """The scheduler, then every partition log (recovered after an unclean shutdown)."""
        config = self.config
        self.scheduler = KafkaScheduler(config["background.threads"], "kafka-scheduler-")
        self.scheduler.startup()
        self.log_manager = LogManager.from_broker_config(config.log_dirs, config.values, self.scheduler, self.time)
        self.log_manager.startup()
        self.log_cleaner = LogCleaner(
            self.log_manager, self.time, config["log.cleaner.backoff.ms"], config["log.cleaner.enable"]
        )
        self.log_cleaner.startup(self.scheduler)

    def _start_raft(self) -> None:
        """The ``__cluster_metadata`` log and its Raft client (a voter, or an observer on a broker-only
        node), with the network channel to the other voters unless this is the single-node mode."""
        config = self.config
        self.metadata_log = FileReplicatedLog.open(
            config.metadata_log_dir, self.time, segment_bytes=config["metadata.log.segment.bytes"]
        )
        self.raft = KafkaRaftClient(
            self.node_id,
            sorted(self.voters),
            self.metadata_log,
            FileQuorumStateStore(os.path.join(config.metadata_log_dir, "__cluster_metadata-0")),
            MetadataRecordSerde(),
            self.time,
            append_linger_ms=config["controller.quorum.append.linger.ms"],
            election_timeout_ms=config["controller.quorum.election.timeout.ms"],
            fetch_timeout_ms=config["controller.quorum.fetch.timeout.ms"],
            election_backoff_max_ms=config["controller.quorum.election.backoff.max.ms"],
            request_timeout_ms=config["controller.quorum.request.timeout.ms"],
            retry_backoff_ms=config["controller.quorum.retry.backoff.ms"],
            fetch_max_wait_ms=min(500, config["controller.quorum.request.timeout.ms"] // 2),
            cluster_id=self.cluster_id,
        )
        KafkaRaftMetrics(self.metrics, self.raft, self.time)  # kafka.server:type=raft-metrics
        self.raft_channel: KafkaNetworkChannel | None = None
        if not self.single_node:
            self.raft_channel = KafkaNetworkChannel(
                self.node_id,
                self.voters,
                config["controller.quorum.request.timeout.ms"],
                self.time,
                on_inconsistent_cluster_id=self._on_fatal_error,
                security=self.controller_security,
            )
            self.raft_channel.start(self.raft)
            # Requests to the active controller (the Raft leader): a broker's registration, heartbeats and
            # forwarded requests; DescribeQuorum from a node that is not the leader.
            self.controller_channel = NodeToControllerChannelManager(
                self.node_id,
                lambda: self.raft.leader_and_epoch.leader_id,
                self.voters,
                "broker" if self.is_broker else "controller",
                request_timeout_ms=config["controller.quorum.request.timeout.ms"],
                retry_backoff_ms=config["controller.quorum.retry.backoff.ms"],
                time=self.time,
                security=self.controller_security,
            )
            self.controller_channel.start()
        self.raft_driver = KafkaRaftClientDriver(
            self.raft, channel=self.raft_channel, fatal_fault_handler=self.fatal_fault_handler
        )

    def _start_metadata_cache(self) -> None:
        config = self.config
        self.metadata_cache = MetadataCache(self.node_id)
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
        )
        self.replica_manager.broker_epoch = lambda: getattr(self, "broker_epoch", -1)
        self.replica_manager.inter_broker_security = self.inter_broker_security
        self.replica_manager.startup(self.scheduler)
        self.publisher = BrokerMetadataPublisher(
            self.node_id, self.metadata_cache, self.replica_manager, self.log_manager
        )

    def _start_loader(self, timeout: float) -> None:
        """MetadataLoader: committed metadata records -> image -> publishers (the broker's, on a broker)."""
        config = self.config
        self.snapshot_generator = SnapshotGenerator(
            self.node_id,
            self.raft.create_snapshot,
            self.time,
            max_bytes_since_last_snapshot=config["metadata.log.max.record.bytes.between.snapshots"],
            max_time_since_last_snapshot_ms=config["metadata.log.max.snapshot.interval.ms"],
        )
        self.loader = MetadataLoader(
            self.node_id, self.cluster_id, self.raft.high_watermark, snapshot_generator=self.snapshot_generator
        )
        self.features_publisher = FeaturesPublisher()
        publishers = (
            [self.publisher]
            if self.is_broker
            else [self.features_publisher, ClientQuotaPublisher(self.socket_server.connection_quotas)]
        )
        self._await(
            self.loader.install_publishers(publishers),
            timeout,
            "the metadata loader to install the broker's publishers",
        )
        self.raft.register(self.loader)

    def _start_controller(self) -> None:
        config = self.config
        defaults = self.controller_log_defaults()
        self.controller = QuorumController(
            self.node_id,
            self.raft,
            self.cluster_id,
            self.time,
            default_num_partitions=config["num.partitions"],
            default_replication_factor=config["default.replication.factor"],
            config_schema=LogConfigSchema(defaults, GroupConfigDefaults.from_broker_config(config)),
            delete_topic_enable=config["delete.topic.enable"],
            # The single-node mode has no heartbeats: its broker is unfenced at registration.
            unfence_on_register=self.single_node,
            session_timeout_ms=config["broker.session.timeout.ms"],
            leader_imbalance_check_interval_ms=(
                config["leader.imbalance.check.interval.seconds"] * 1000
                if config["auto.leader.rebalance.enable"]
                else None
            ),
        )
        records = read_bootstrap_records(config.metadata_log_dir)
        self.controller.bootstrap_records = records
        if not any(r.name == "FeatureLevelRecord" and r.data["name"] == METADATA_VERSION for r in records):
            # formatted before pykbroker had feature versions (meta.properties alone, or SCRAM records only):
            # the levels that pykbroker wrote then
            self.controller.bootstrap_metadata_version = LEGACY_BOOTSTRAP_METADATA_VERSION
            self.controller.bootstrap_features = {}
        ControllerMetadataMetrics(
            self.metrics, self.controller, lambda: self.metadata_cache.image if self.is_broker else self.loader.image
        )

    def _register_with_quorum(self, timeout: float) -> None:
        """A broker of a cluster: register with the active controller over the controller listener
        (BrokerLifecycleManager), heartbeat from then on, forward controller-bound requests to it."""
        config = self.config
        self.forwarding_manager = ForwardingManager(self.controller_channel)
        self.lifecycle_manager = BrokerLifecycleManager(
            self.node_id,
            self.controller_channel,
            config["broker.heartbeat.interval.ms"],
            lambda: self.metadata_cache.image.offset,
        )
        try:
            self.broker_epoch = self._await(
                self.lifecycle_manager.start(self._registration_request()),
                timeout,
                "the controller quorum to accept this broker's registration",
            )
        except BrokerRegistrationError as e:
            raise StartupError(f"The controller refused to register broker {self.node_id}: {e}") from e
        self._await_published(timeout)

    def _await_published(self, timeout: float) -> None:
        deadline = self.time.hi_res_milliseconds() + timeout * 1000
        while not self.metadata_cache.has_alive_broker(self.node_id):
            if self.time.hi_res_milliseconds() > deadline:
                raise StartupError(
                    f"Timed out after {int(timeout * 1000)} ms waiting for this broker's registration "
                    "to be published by the metadata loader"
                )
            self.time.sleep(5)
        self.log.info(
            f"Registered broker {self.node_id} with broker epoch {self.broker_epoch}; metadata caught up "
            f"to offset {self.metadata_cache.image.offset}"
        )

    def _start_broker_apis(self) -> None:
        config = self.config
        self.data_helper = RequestHelper(self._channel_for)
        self.data_helper.authorizer = self._create_authorizer(lambda: self.metadata_cache.image)
        self.data_helper.topic_name = self.metadata_cache.topic_name
        # Client quotas (server/quotas): limits from the metadata image now and on every change.
        self.quota_managers = QuotaManagers(
            config["quota.window.num"], config["quota.window.size.seconds"], self.time, self.metrics
        )
        self.publisher.quota_managers = self.quota_managers
        self.quota_managers.update_quotas(self.metadata_cache.image.client_quotas)
        self.publisher.connection_quotas = self.socket_server.connection_quotas  # ip connection_creation_rate
        self.socket_server.connection_quotas.update_ip_connection_rates(self.metadata_cache.image.client_quotas)
        self.quota_managers.start()
        self.quota_managers.request.register_metrics(self.metrics)
        self.quota_managers.controller_mutation.register_metrics(self.metrics)
        self.data_helper.quotas = self.quota_managers
        self.group_metadata_manager = GroupMetadataManager(
            self.replica_manager,
            self.log_manager,
            config["offsets.topic.num.partitions"],
            self.time,
            config["offsets.retention.minutes"] * 60 * 1000,
            required_acks=config["offsets.commit.required.acks"],
            commit_timeout_ms=config["offsets.commit.timeout.ms"],
        )
        self.group_coordinator = GroupCoordinator(self.node_id, config, self.group_metadata_manager, self.time)
        self.group_coordinator.consumer.image = lambda: self.metadata_cache.image
        self.group_coordinator.startup()
        self.publisher.group_coordinator = self.group_coordinator
        # The __consumer_offsets partitions led already load now (the publisher reports later changes;
        # a stale epoch from this snapshot is ignored by the manager).
        for (topic, index), partition in list(self.replica_manager.partitions_snapshot().items()):
            if topic == GROUP_METADATA_TOPIC_NAME and partition.is_leader:
                self.group_coordinator.on_election(index, partition.leader_epoch)
        self._register_metrics()
        self.scheduler.schedule(
            "delete-expired-group-metadata",
            self.group_metadata_manager.cleanup_expired_offsets,
            config["offsets.retention.check.interval.ms"],
            config["offsets.retention.check.interval.ms"],
        )
        self.controller_handle = self.controller if self.single_node else self.forwarding_manager
        self.replica_manager.set_alter_partition_manager(
            AlterPartitionManager(
                self.node_id,
                lambda: self.controller_handle,
                lambda: getattr(self, "broker_epoch", -1),
                self.scheduler,
            )
        )
        self.producer_id_manager = ProducerIdManager(self.node_id, self.controller_handle, lambda: self.broker_epoch)
        self._start_transaction_coordinator()
        self.data_plane_apis, self.data_version_manager = self._build_apis(self.data_helper, self._broker_families())
        self.data_plane_apis.after_handle.append(self.replica_manager.try_complete_actions)
        self.data_plane_pool = KafkaRequestHandlerPool(
            self.node_id,
            self.socket_server.data_plane_request_channel,
            self.data_plane_apis,
            config["num.io.threads"],
            DATA_PLANE,
            self.metrics,
            self.time,
        )
        # Dynamic broker configs: applied now (what the metadata log holds already) and on every change.
        self.dynamic_config = DynamicBrokerConfig(
            self.node_id,
            config,
            self.log_manager,
            self.data_plane_pool,
            self.socket_server.connection_quotas,
            socket_server=self.socket_server,
            replica_fetcher_manager=self.replica_manager.replica_fetcher_manager,
        )
        self.dynamic_config.update(self.metadata_cache.image)
        self.publisher.dynamic_config = self.dynamic_config
        self.scram_credentials.update_from_image(self.metadata_cache.image)
        self.publisher.scram_credentials = self.scram_credentials

    def _start_transaction_coordinator(self) -> None:
        """The TransactionCoordinator: its state manager over ``__transaction_state``, the marker channel
        (to partition leaders over the inter-broker listener), and the partitions this broker leads
        already (the publisher reports later changes)."""
        config = self.config
        state_manager = TransactionStateManager(
            self.node_id, self.replica_manager, self.log_manager, config, self.time, self.scheduler
        )
        state_manager.transaction_version = lambda: self.metadata_cache.image.features.get(TRANSACTION_VERSION, 0)
        channel = TransactionMarkerChannelManager(
            self.node_id,
            self.metadata_cache,
            config.inter_broker_listener_name,
            state_manager,
            self.time,
            config["request.timeout.ms"],
            100,
            security=self.inter_broker_security,
        )
        self.txn_coordinator = TransactionCoordinator(
            self.node_id, config, state_manager, channel, self.producer_id_manager, self.scheduler, self.time
        )
        self.txn_coordinator.startup()
        # Always there: Produce v12 / TxnOffsetCommit v5 (KIP-890 part 2) add partitions through it; the
        # verification of older versions follows transaction.partition.verification.enable.
        verifier = AddPartitionsToTxnManager(
            self.node_id,
            self.metadata_cache,
            config.inter_broker_listener_name,
            self.time,
            config["request.timeout.ms"],
            security=self.inter_broker_security,
        )
        verifier.start()
        self.replica_manager.transaction_verification_enabled = bool(
            config["transaction.partition.verification.enable"]
        )
        self.replica_manager.add_partitions_to_txn_manager = verifier
        self.publisher.txn_coordinator = self.txn_coordinator
        for (topic, index), partition in list(self.replica_manager.partitions_snapshot().items()):
            if topic == TRANSACTION_STATE_TOPIC_NAME and partition.is_leader:
                self.txn_coordinator.on_election(index, partition.leader_epoch)

    def _create_authorizer(self, image_fn) -> StandardAuthorizer | None:
        """``authorizer.class.name``'s authorizer over ``image_fn()`` (an object with ``acls``), or None."""
        config = self.config
        authorizer_class = (config["authorizer.class.name"] or "").strip()
        if not authorizer_class:
            return None
        if authorizer_class not in AUTHORIZER_CLASS_NAMES:
            raise StartupError(
                f"authorizer.class.name {authorizer_class} is not supported: use "
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            )
        return StandardAuthorizer(image_fn, config["super.users"], config["allow.everyone.if.no.acl.found"])

    def _start_controller_apis(self) -> None:
        """The controller listener: the Raft RPCs (when there are other voters), ControllerApis, and on
        a combined node Metadata (kept from the single-node mode, where tools may ask the controller)."""
        config = self.config
        if not config.control_plane_listener_name:
            return
        helper = getattr(self, "data_helper", None)
        if helper is None:  # a controller-only node authorizes with the ACLs the controller replays
            helper = RequestHelper(self._channel_for)
            helper.authorizer = self._create_authorizer(lambda: self.controller.acl_view())
        cluster_info = None
        if not self.is_broker:
            cluster_info = lambda: (self.cluster_id, self.raft.leader_and_epoch.leader_id, self.voters)  # noqa: E731
        families: list = [ControllerApis(helper, self.controller, config, self.controller_log_defaults(), cluster_info)]
        if self.raft_channel is not None:
            families.append(RaftHandlers(helper, self.raft_channel))
        if self.is_broker:
            families.append(MetadataHandler(helper, self.metadata_cache))
        families.append(_describe_quorum_handler(self, helper))
        self.control_plane_apis, self.control_version_manager = self._build_apis(helper, families, True)
        self.control_plane_pool = KafkaRequestHandlerPool(
            self.node_id,
            self.socket_server.control_plane_request_channel,
            self.control_plane_apis,
            1,
            CONTROL_PLANE,
            self.metrics,
            self.time,
        )

    def controller_log_defaults(self) -> LogConfig:
        """Topic config defaults for the controller: the LogManager's on a broker, else from the config."""
        if self.is_broker:
            return self.log_manager.default_config
        return LogConfig.from_broker_config(self.config.values)

    def _register_metrics(self) -> None:
        """Gauges of components that do not hold the registry: per-partition logs, the group metadata,
        and every purgatory (``kafka.server:type=DelayedOperationPurgatory,...,delayedOperation=<name>``,
        registered by Kafka's DelayedOperationPurgatory itself)."""
        self.log_manager.register_metrics(self.metrics)
        self.group_metadata_manager.register_metrics(self.metrics)
        for purgatory in (
            self.replica_manager.produce_purgatory,
            self.replica_manager.fetch_purgatory,
            self.group_coordinator.join_purgatory,
            self.group_coordinator.heartbeat_purgatory,
        ):
            tag = f"delayedOperation={purgatory.purgatory_name}"
            prefix = "kafka.server:type=DelayedOperationPurgatory,name="
            self.metrics.gauge(f"{prefix}PurgatorySize,{tag}", lambda p=purgatory: p.purgatory_size)
            self.metrics.gauge(f"{prefix}NumDelayedOperations,{tag}", lambda p=purgatory: p.num_delayed)

    def _broker_families(self) -> list:
        helper, cache, rm = self.data_helper, self.metadata_cache, self.replica_manager
        groups = GroupHandlers(helper, self.group_coordinator, cache, self.controller_handle, self.config, self.time)
        groups.txn_coordinator = self.txn_coordinator
        return [
            MetadataHandler(
                helper, cache, self._auto_create_topics if self.config["auto.create.topics.enable"] else None
            ),
            DescribeTopicPartitionsHandler(helper, cache, self.config["max.request.partition.size.limit"]),
            ProduceHandler(helper, rm, cache),
            FetchHandler(
                helper,
                rm,
                cache,
                FetchManager(
                    FetchSessionCache(
                        self.config["max.incremental.fetch.session.cache.slots"], num_shards=8, metrics=self.metrics
                    ),
                    self.time,
                ),
            ),
            ListOffsetsHandler(helper, rm),
            DeleteRecordsHandler(helper, rm),
            DescribeLogDirsHandler(helper, self.log_manager),
            AdminHandler(
                helper,
                self.controller_handle,
                cache,
                self.config,
                self.log_manager.default_config,
                dynamic_config=lambda: getattr(self, "dynamic_config", None),
            ),
            InitProducerIdHandler(helper, self.producer_id_manager, self.txn_coordinator),
            SaslHandlers(helper),
            groups,
            TransactionHandlers(
                helper, self.txn_coordinator, self.group_coordinator, rm, cache, self.config, self.time
            ),
            _describe_quorum_handler(self, helper),
        ]

    def _client_securities(self) -> tuple[ClientSecurity, ClientSecurity]:
        """How this node connects to the other brokers' inter-broker listener and to the controllers'
        listener (TLS and SASL settings of those listeners; ConfigException when unsupported)."""
        config = self.config

        def protocol_of(listener: str) -> str:
            known = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
            return config.protocol_map.get(listener) or (listener if listener in known else "PLAINTEXT")

        inter = PLAINTEXT
        if self.is_broker:
            listener = config.inter_broker_listener_name
            inter = client_security(
                config.originals, listener, protocol_of(listener), "sasl.mechanism.inter.broker.protocol"
            )
        controller = PLAINTEXT
        if config.controller_listener_names:
            listener = config.controller_listener_names[0]
            controller = client_security(
                config.originals, listener, protocol_of(listener), "sasl.mechanism.controller.protocol"
            )
        return inter, controller

    def _voter_endpoints(self) -> dict[int, list[tuple[str, str, int]]]:
        """``controller.quorum.voters`` as ``{id: [(first controller listener, host, port)]}`` (Kafka's static
        voters' endpoints); this node's own entry with its bound port when configured as port 0."""
        names = self.config.controller_listener_names
        if not names or not self.config["controller.quorum.voters"]:
            return {}
        result = {}
        for node_id, (host, port) in self.voters.items():
            if node_id == self.node_id and port == 0:
                port = self.socket_server.bound_port(names[0])
            result[node_id] = [(names[0], host, port)]
        return result

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

    def _registration_request(self) -> dict:
        """BrokerRegistration fields: this broker's advertised listeners (real bound ports), rack."""
        listeners = [
            {
                "name": ep.listener_name,
                "host": ep.host,
                "port": ep.port,
                "security_protocol": _SECURITY_PROTOCOL_IDS[ep.security_protocol],
            }
            for ep in self.advertised_endpoints().values()
        ]
        return {
            "broker_id": self.node_id,
            "cluster_id": self.cluster_id,
            "incarnation_id": uuid.uuid4(),
            "listeners": listeners,
            "features": supported_features_request(),
            "rack": self.config["broker.rack"],
            "log_dirs": [],
        }

    def _register_broker(self, timeout: float) -> None:
        """The single-node mode: register with the controller of this process."""
        result = self._await(
            self.controller.register_broker(self._registration_request()),
            timeout,
            "the controller to answer this broker's registration",
        )
        if result["error_code"] != errors.NONE:
            raise RuntimeError(
                f"Broker registration failed: {errors.name_of(result['error_code'])} {result.get('error_message')}"
            )
        self.broker_epoch = result["broker_epoch"]
        self._await_published(timeout)

    def _await(self, future, timeout: float, what: str):
        """``future.result(timeout)``; StartupError naming ``what`` when it does not complete in time, or
        stating the fatal error (e.g. a cluster id mismatch) that stopped the wait."""
        deadline = self.time.hi_res_milliseconds() + timeout * 1000
        while True:
            if self.fatal_error is not None:
                raise StartupError(self.fatal_error)
            left = (deadline - self.time.hi_res_milliseconds()) / 1000.0
            try:
                return future.result(max(0.0, min(0.1, left)))
            except concurrent.futures.TimeoutError as e:
                if left <= 0.1:
                    raise StartupError(f"Timed out after {int(timeout * 1000)} ms waiting for {what}") from e

    def _stop_on_fatal_fault(self, exit_code: int) -> None:
        self._on_fatal_error(f"A fatal fault stopped the server (exit code {exit_code}); see the log")

    def _on_fatal_error(self, message: str) -> None:
        """A condition this node cannot recover from (its cluster id differs from the quorum's): fail
        start-up with ``message``, or shut down (the process then exits with status 1)."""
        if self.fatal_error is not None:
            return
        self.fatal_error = message
        if self.started:
            threading.Thread(target=self.shutdown, name="kafka-fatal-shutdown", daemon=True).start()

    def _build_apis(
        self, helper: RequestHelper, families: list, controller_plane: bool = False
    ) -> tuple[KafkaApis, ApiVersionManager]:
        """KafkaApis with the given handler families plus ApiVersions, which advertises what they implement."""
        apis = KafkaApis(self.node_id, helper, self.time, controller_plane)
        for family in families:
            apis.register(family.handlers())
        api_versions = ApiVersionsHandler(helper, features=self._finalized_features)
        apis.register(api_versions.handlers())
        api_versions.manager = ApiVersionManager(apis.implemented_apis, _schema_range)
        return apis, api_versions.manager

    def _finalized_features(self):
        """What ApiVersions reports as finalized: a broker's metadata image (epoch: its offset), a controller's
        last features change (Kafka's KRaftMetadataCache.features / FeaturesPublisher)."""
        if self.is_broker:
            return finalized_features_of(self.metadata_cache.image)
        return self.features_publisher.features

    def _channel_for(self, request):
        ss = self.socket_server
        cp = self.config.control_plane_listener_name
        if cp and request.context.listener_name == cp:
            return ss.control_plane_request_channel
        return ss.data_plane_request_channel

    def _is_api_allowed(self, listener: str, api_key: int, version: int) -> bool:
        cp = self.config.control_plane_listener_name
        manager = self.control_version_manager if (cp and listener == cp) else self.data_version_manager
        return manager.is_api_allowed(listener, api_key, version)

    def advertised_endpoints(self) -> dict:
        """Listener name -> advertised EndPoint with the real bound port and a concrete host."""
        result = {}
        for ep in self.config.advertised_listeners:
            port = ep.port
            if port == 0:
                port = self.socket_server.bound_port(ep.listener_name)
            host = ep.host or socket.gethostname()
            result[ep.listener_name] = EndPoint(ep.listener_name, ep.security_protocol, host, port)
        return result

    # -- shutdown ------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Kafka's order: stop the network, drain handlers, then purgatories, controller, Raft, logs."""
        with self._shutdown_lock:
            if self._shutdown_done.is_set():
                return
            self.log.info(f"[BrokerServer id={self.node_id}] shutting down")
            self.broker_state = 7
            steps = [
                ("controlled shutdown", self._controlled_shutdown),
                ("socket server request processing", lambda: self.socket_server.stop_processing_requests()),
                ("data-plane request handlers", lambda: self.data_plane_pool.shutdown()),
                ("control-plane request handlers", lambda: self.control_plane_pool.shutdown()),
                ("group coordinator", lambda: self.group_coordinator.shutdown()),
                ("transaction coordinator", lambda: self.txn_coordinator.shutdown()),
                ("transaction verifier", lambda: self.replica_manager.add_partitions_to_txn_manager.shutdown()),
                ("replica manager", lambda: self.replica_manager.shutdown()),
                ("quota managers", lambda: self.quota_managers.shutdown()),
                ("controller", lambda: self.controller.close()),
                ("broker lifecycle manager", lambda: self.lifecycle_manager.close()),
                ("controller channel", lambda: self.controller_channel.shutdown()),
                ("raft client", lambda: self.raft_driver.shutdown()),
                ("raft network channel", lambda: self.raft_channel.close(drain_ms=500)),
                ("metadata loader", lambda: self.loader.close()),
                ("log manager", lambda: self.log_manager.shutdown(getattr(self, "broker_epoch", -1))),
                ("metadata log", lambda: self.metadata_log.close()),
                ("scheduler", lambda: self.scheduler.shutdown()),
                ("socket server", lambda: self.socket_server.shutdown()),
                ("metric reporters", self._close_metric_reporters),
                ("log dir locks", self._release_dir_locks),
            ]
            for what, step in steps:
                try:
                    step()
                except AttributeError:
                    pass  # never started
                except Exception as e:  # noqa: BLE001 - shutdown goes on with the next step
                    self.log.error(f"Error shutting down {what}", error=repr(e))
            self._shutdown_done.set()
            self.log.info(f"[BrokerServer id={self.node_id}] shut down completed")

    def _controlled_shutdown(self) -> None:
        """A broker of a cluster asks the controller to move its leaderships away (BrokerHeartbeat
        ``want_shut_down``) and waits for the answer, at most ``broker.session.timeout.ms``: a controller
        that cannot answer fences the broker after that long anyway."""
        lifecycle = getattr(self, "lifecycle_manager", None)
        if lifecycle is None or not self.started:
            return
        self.log.info("Beginning controlled shutdown.")
        lifecycle.begin_controlled_shutdown()
        if not lifecycle.shutdown_ready.wait(self.config["broker.session.timeout.ms"] / 1000.0):
            self.log.warning("The controller did not answer the controlled shutdown in time; shutting down")

    def _close_metric_reporters(self) -> None:
        reporters, self.metric_reporters = self.metric_reporters, []
        for reporter in reporters:
            reporter.close()

    def _release_dir_locks(self) -> None:
        for lock in getattr(self, "_dir_locks", ()):
            lock.release()
        self._dir_locks = []

    def await_shutdown(self, timeout: float | None = None) -> bool:
        return self._shutdown_done.wait(timeout)

    def bound_port(self, listener_name: str = "PLAINTEXT") -> int:
        return self.socket_server.bound_port(listener_name)
