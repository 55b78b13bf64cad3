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
from pykbroker.log.log_cleaner import LogCleaner
from pykbroker.log.log_manager import LogDirLockError, LogManager, lock_log_dirs
from pykbroker.metadata.controller_metadata_metrics import ControllerMetadataMetrics
from pykbroker.metadata.log_config_schema import LogConfigSchema
from pykbroker.metadata.metadata_loader import MetadataLoader
from pykbroker.metadata.quorum_controller import QuorumController
from pykbroker.metadata.records import MetadataRecordSerde
from pykbroker.metrics.reporter import MetricsReporter, create_reporters
from pykbroker.network.socket_server import CONTROL_PLANE, DATA_PLANE, SocketServer, SocketServerConfig
from pykbroker.protocol import errors, request_schema
from pykbroker.raft.describe_quorum import describe_quorum
from pykbroker.raft.file_replicated_log import FileReplicatedLog
from pykbroker.raft.kafka_raft_client import KafkaRaftClient
from pykbroker.raft.kafka_raft_client_driver import KafkaRaftClientDriver
from pykbroker.raft.quorum_state_store import FileQuorumStateStore
from pykbroker.server.api_version_manager import ApiVersionManager
from pykbroker.server.broker_metadata_publisher import BrokerMetadataPublisher
from pykbroker.server.fetch_session import FetchManager, FetchSessionCache
from pykbroker.server.handlers.admin import AdminHandler
from pykbroker.server.handlers.api_versions import ApiVersionsHandler
from pykbroker.server.handlers.delete_records import DeleteRecordsHandler
from pykbroker.server.handlers.describe_quorum import DescribeQuorumHandler
from pykbroker.server.handlers.fetch import FetchHandler
from pykbroker.server.handlers.groups import GroupHandlers
from pykbroker.server.handlers.list_offsets import ListOffsetsHandler
from pykbroker.server.handlers.log_dirs import DescribeLogDirsHandler
from pykbroker.server.handlers.metadata import MetadataHandler
from pykbroker.server.handlers.produce import ProduceHandler
from pykbroker.server.handlers.producer_id import InitProducerIdHandler, ProducerIdManager
from pykbroker.server.kafka_apis import KafkaApis
from pykbroker.server.kafka_request_handler import KafkaRequestHandlerPool
from pykbroker.server.meta_properties import MetaPropertiesError, ensure_formatted
from pykbroker.server.metadata_cache import MetadataCache
from pykbroker.server.replica_manager import ReplicaManager
from pykbroker.server.request_helper import RequestHelper
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
    looked up per request."""
    return DescribeQuorumHandler(
        helper,
        lambda: describe_quorum(server.raft, server.time.milliseconds()),
        lambda: server._voter_endpoints(),
    )


def _schema_range(api_key: int) -> tuple[int, int]:
    schema = request_schema(api_key)
    return schema.valid_versions.lo, schema.valid_versions.hi


class KafkaRaftServer:
    def __init__(self, config: KafkaConfig, time: Time = SYSTEM):
        self.config = config
        self.time = time
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
        # Kafka's BrokerState values: NOT_RUNNING 0, STARTING 1, RUNNING 3, SHUTTING_DOWN 7.
        self.broker_state = 0
        self.metrics.gauge("kafka.server:type=KafkaServer,name=BrokerState", lambda: self.broker_state)

    # -- start-up ------------------------------------------------------------------------------
    def startup(self) -> None:
        """Start every component in order. Raises StartupError (one-line message: a listener cannot be
        bound, a data directory is locked by another broker, a start-up wait timed out), the config and
        storage errors, or whatever a component raised."""
        config = self.config
        self.log.info("Starting broker")
        self.broker_state = 1
        for key in config.unknown_keys:
            self.log.warning(f"The configuration '{key}' was supplied but isn't a known config.")
        timeout = config["initial.broker.registration.timeout.ms"] / 1000.0
        # metric.reporters: an unknown class is a ConfigException before anything is bound or touched.
        reporters = create_reporters(config["metric.reporters"], config.values)

        # Listeners first: a port in use stops start-up before anything touches the data directories.
        sconfig = SocketServerConfig.from_kafka_config(config)
        try:
            self.socket_server = SocketServer(sconfig, self.metrics, self._is_api_allowed, self.time)
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
        dirs = list(dict.fromkeys(config.log_dirs + [config.metadata_log_dir]))
        try:
            self._dir_locks = lock_log_dirs(dirs)
        except LogDirLockError as e:
            raise StartupError(str(e)) from e
        try:
            self.cluster_id, _ = ensure_formatted(
                dirs, self.node_id, self.log, allow_auto_format=self._is_single_node_default()
            )
        except MetaPropertiesError as e:
            raise StartupError(str(e)) from e
        self._check_single_voter()

        # Storage: the scheduler, then every partition log (recovered after an unclean shutdown).
        self.scheduler = KafkaScheduler(config["background.threads"], "kafka-scheduler-")
        self.scheduler.startup()
        self.log_manager = LogManager.from_broker_config(config.log_dirs, config.values, self.scheduler, self.time)
        self.log_manager.startup()
        self.log_cleaner = LogCleaner(
            self.log_manager, self.time, config["log.cleaner.backoff.ms"], config["log.cleaner.enable"]
        )
        self.log_cleaner.startup(self.scheduler)

        # KRaft: the __cluster_metadata log, the Raft client, the loader and its publishers, the controller.
        self.metadata_log = FileReplicatedLog.open(
            config.metadata_log_dir, self.time, segment_bytes=config["metadata.log.segment.bytes"]
        )
        self.raft = KafkaRaftClient(
            self.node_id,
            [self.node_id],
            self.metadata_log,
            FileQuorumStateStore(os.path.join(config.metadata_log_dir, "__cluster_metadata-0")),
            MetadataRecordSerde(),
            self.time,
            append_linger_ms=config["controller.quorum.append.linger.ms"],
        )
        self.metadata_cache = MetadataCache(self.node_id)
        # No halt on the loss of every log dir: a single node has no other replica to hand leadership to.
        self.replica_manager = ReplicaManager(
            self.node_id, config, self.log_manager, self.metadata_cache, self.time, metrics=self.metrics
        )
        self.replica_manager.startup()
        self.publisher = BrokerMetadataPublisher(
            self.node_id, self.metadata_cache, self.replica_manager, self.log_manager
        )
        self.loader = MetadataLoader(self.node_id, self.cluster_id, self.raft.high_watermark)
        self._await(
            self.loader.install_publishers([self.publisher]),
            timeout,
            "the metadata loader to install the broker's publishers",
        )
        self.raft.register(self.loader)
        self.controller = QuorumController(
            self.node_id,
            self.raft,
            self.cluster_id,
            self.time,
            default_num_partitions=config["num.partitions"],
            default_replication_factor=config["default.replication.factor"],
            config_schema=LogConfigSchema(
                self.log_manager.default_config, GroupConfigDefaults.from_broker_config(config)
            ),
            delete_topic_enable=config["delete.topic.enable"],
        )
        ControllerMetadataMetrics(self.metrics, self.controller, lambda: self.metadata_cache.image)
        self.raft_driver = KafkaRaftClientDriver(self.raft)
        self.raft_driver.start()
        if not self.controller.wait_for_active(timeout):
            raise StartupError(
                f"Timed out after {config['initial.broker.registration.timeout.ms']} ms waiting for "
                "the metadata quorum controller to become active"
            )

        # Register this broker (its listeners are bound: the ports are known), wait until it is published.
        self._register_broker(timeout)

        cp_name = config.control_plane_listener_name
        self.data_helper = RequestHelper(self._channel_for)
        self.group_metadata_manager = GroupMetadataManager(
            self.replica_manager,
            self.log_manager,
            config["offsets.topic.num.partitions"],
            self.time,
            config["offsets.retention.minutes"] * 60 * 1000,
        )
        self.group_coordinator = GroupCoordinator(self.node_id, config, self.group_metadata_manager, self.time)
        self._register_metrics()
        self.scheduler.schedule(
            "delete-expired-group-metadata",
            self.group_metadata_manager.cleanup_expired_offsets,
            config["offsets.retention.check.interval.ms"],
            config["offsets.retention.check.interval.ms"],
        )
        self.producer_id_manager = ProducerIdManager(self.node_id, self.controller, lambda: self.broker_epoch)
        self.data_plane_apis, self.data_version_manager = self._build_apis(self.data_helper, self._broker_families())
        self.data_plane_apis.after_handle.append(self.replica_manager.try_complete_actions)
        if cp_name:
            self.control_plane_apis, self.control_version_manager = self._build_apis(
                self.data_helper,
                [
                    MetadataHandler(self.data_helper, self.metadata_cache),
                    _describe_quorum_handler(self, self.data_helper),
                ],
            )

        self.data_plane_pool = KafkaRequestHandlerPool(
            self.node_id,
            self.socket_server.data_plane_request_channel,
            self.data_plane_apis,
            config["num.io.threads"],
            DATA_PLANE,
            self.metrics,
            self.time,
        )
        if cp_name:
            self.control_plane_pool = KafkaRequestHandlerPool(
                self.node_id,
                self.socket_server.control_plane_request_channel,
                self.control_plane_apis,
                1,
                CONTROL_PLANE,
                self.metrics,
                self.time,
            )
        self.socket_server.enable_request_processing()
        self.started = True
        self.broker_state = 3
        self.log.info("Kafka Server started")

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

    def _is_single_node_default(self) -> bool:
        """A combined node (process.roles=broker,controller) that is its quorum's only voter: the one setup
        whose empty storage is formatted on first start; every other node needs ``kafka-storage format``."""
        voters = self.config["controller.quorum.voters"] or []
        ids = {int(v.split("@", 1)[0]) for v in voters if v}
        return set(self.config.process_roles) == {"broker", "controller"} and ids <= {self.node_id}

    def _check_single_voter(self) -> None:
        voters = self.config["controller.quorum.voters"] or []
        ids = {int(v.split("@", 1)[0]) for v in voters if v}
        if ids and ids != {self.node_id}:
            raise ConfigException(
                "controller.quorum.voters",
                ",".join(voters),
                f"only a single voter (this node, {self.node_id}) is supported",
            )

    def _broker_families(self) -> list:
        helper, cache, rm = self.data_helper, self.metadata_cache, self.replica_manager
        return [
            MetadataHandler(
                helper, cache, self._auto_create_topics if self.config["auto.create.topics.enable"] else None
            ),
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
            AdminHandler(helper, self.controller, cache, self.config, self.log_manager.default_config),
            InitProducerIdHandler(helper, self.producer_id_manager),
            GroupHandlers(helper, self.group_coordinator, cache, self.controller, self.config, self.time),
            _describe_quorum_handler(self, helper),
        ]

    def _voter_endpoints(self) -> dict[int, list[tuple[str, str, int]]]:
        """``controller.quorum.voters`` as ``{id: [(first controller listener, host, port)]}`` (Kafka's static
        voters' endpoints); this node's own entry with its bound port when configured as port 0."""
        names = self.config.controller_listener_names
        if not names:
            return {}
        result = {}
        for voter in self.config["controller.quorum.voters"] or []:
            node, _, address = voter.partition("@")
            host, _, port = address.rpartition(":")
            node_id, port_number = int(node), int(port)
            if node_id == self.node_id and port_number == 0:
                port_number = self.socket_server.bound_port(names[0])
            result[node_id] = [(names[0], host.strip("[]"), port_number)]
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
            self.controller.create_topics(
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

    def _register_broker(self, timeout: float) -> None:
        listeners = [
            {
                "name": ep.listener_name,
                "host": ep.host,
                "port": ep.port,
                "security_protocol": _SECURITY_PROTOCOL_IDS[ep.security_protocol],
            }
            for ep in self.advertised_endpoints().values()
        ]
        result = self._await(
            self.controller.register_broker(
                {
                    "broker_id": self.node_id,
                    "cluster_id": self.cluster_id,
                    "incarnation_id": uuid.uuid4(),
                    "listeners": listeners,
                    "features": [],
                    "rack": self.config["broker.rack"],
                    "log_dirs": [],
                }
            ),
            timeout,
            "the controller to answer this broker's registration",
        )
        if result["error_code"] != errors.NONE:
            raise RuntimeError(
                f"Broker registration failed: {errors.name_of(result['error_code'])} {result.get('error_message')}"
            )
        self.broker_epoch = result["broker_epoch"]
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

    @staticmethod
    def _await(future, timeout: float, what: str):
        """``future.result(timeout)``; StartupError naming ``what`` when it does not complete in time."""
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError as e:
            raise StartupError(f"Timed out after {int(timeout * 1000)} ms waiting for {what}") from e

    def _build_apis(self, helper: RequestHelper, families: list) -> tuple[KafkaApis, ApiVersionManager]:
        """KafkaApis with the given handler families plus ApiVersions, which advertises what they implement."""
        apis = KafkaApis(self.node_id, helper, self.time)
        for family in families:
            apis.register(family.handlers())
        api_versions = ApiVersionsHandler(helper)
        apis.register(api_versions.handlers())
        api_versions.manager = ApiVersionManager(apis.implemented_apis, _schema_range)
        return apis, api_versions.manager

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
                ("socket server request processing", lambda: self.socket_server.stop_processing_requests()),
                ("data-plane request handlers", lambda: self.data_plane_pool.shutdown()),
                ("control-plane request handlers", lambda: self.control_plane_pool.shutdown()),
                ("group coordinator", lambda: self.group_coordinator.shutdown()),
                ("replica manager", lambda: self.replica_manager.shutdown()),
                ("controller", lambda: self.controller.close()),
                ("raft client", lambda: self.raft_driver.shutdown()),
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
                except Exception as e:
                    self.log.error(f"Error shutting down {what}", error=repr(e))
            self._shutdown_done.set()
            self.log.info(f"[BrokerServer id={self.node_id}] shut down completed")

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
