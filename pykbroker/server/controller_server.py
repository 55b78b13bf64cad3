"""ControllerServer: the controller role of a node, the QuorumController and the controller listener's
request handling.

Mirrors ``kafka.server.ControllerServer``. Start-up (called by KafkaRaftServer): :meth:`startup` (the
QuorumController over the SharedServer's Raft client, with the bootstrap records of ``kafka-storage
format``, and its metrics) -> :meth:`start_apis` (ControllerApis, the Raft RPCs, DescribeQuorum and the
control-plane request handler pool, once the listener may serve). :meth:`shutdown` stops them in the
reverse order: the control-plane handler pool, the controller-only node's quota managers, then the controller.

Threading: started and stopped by the thread that starts/stops the KafkaRaftServer; the controller runs
its own event thread, the handler pool its threads.
"""

from __future__ import annotations

from collections.abc import Callable

from pykbroker.config.broker_configs.kraft_configs import BROKER_SESSION_TIMEOUT_MS_CONFIG
from pykbroker.config.broker_configs.quota_configs import QUOTA_WINDOW_NUM_CONFIG, QUOTA_WINDOW_SIZE_SECONDS_CONFIG
from pykbroker.config.broker_configs.replication_configs import (
    AUTO_LEADER_REBALANCE_ENABLE_CONFIG,
    DEFAULT_REPLICATION_FACTOR_CONFIG,
    LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS_CONFIG,
)
from pykbroker.config.broker_configs.server_configs import DELETE_TOPIC_ENABLE_CONFIG
from pykbroker.config.broker_configs.server_log_configs import NUM_PARTITIONS_CONFIG
from pykbroker.config.group_config import GroupConfigDefaults
from pykbroker.config.kafka_config import KafkaConfig
from pykbroker.log.log_config import LogConfig
from pykbroker.metadata.bootstrap import read_bootstrap_records
from pykbroker.metadata.controller_metadata_metrics import ControllerMetadataMetrics
from pykbroker.metadata.delegation_token_control_manager import DelegationTokenSettings
from pykbroker.metadata.feature_control_manager import LATEST_PRODUCTION_METADATA_VERSION
from pykbroker.metadata.features import LEGACY_BOOTSTRAP_METADATA_VERSION, METADATA_VERSION
from pykbroker.metadata.features_publisher import with_kraft_version
from pykbroker.metadata.log_config_schema import LogConfigSchema
from pykbroker.metadata.quorum_controller import QuorumController
from pykbroker.network.socket_server import CONTROL_PLANE, SocketServer
from pykbroker.server.api_version_manager import ApiVersionManager
from pykbroker.server.handlers.controller_apis import ControllerApis
from pykbroker.server.handlers.metadata import MetadataHandler
from pykbroker.server.handlers.raft import RaftHandlers
from pykbroker.server.handlers.raft_voters import RaftVoterHandlers
from pykbroker.server.kafka_apis import KafkaApis
from pykbroker.server.kafka_request_handler import KafkaRequestHandlerPool
from pykbroker.server.quotas.client_quota_manager import QuotaManagers
from pykbroker.server.request_helper import RequestHelper
from pykbroker.server.server_common import ShutdownSteps, build_apis, create_authorizer, describe_quorum_handler
from pykbroker.server.shared_server import SharedServer
from pykbroker.utils.metrics import MetricsRegistry
from pykbroker.utils.time import Time


class ControllerServer:
    """The controller of one node. ``is_broker``: the node also has the broker role (combined mode);
    ``channel_for(request)``: the request channel a response goes back on; ``voter_endpoints()``: the
    static voters' controller endpoints (DescribeQuorum v2)."""

    def __init__(
        self,
        config: KafkaConfig,
        time: Time,
        metrics: MetricsRegistry,
        shared: SharedServer,
        socket_server: SocketServer,
        is_broker: bool,
        channel_for: Callable,
        voter_endpoints: Callable[[], dict[int, list[tuple[str, str, int]]]],
    ):
        self.config = config
        self.time = time
        self.metrics = metrics
        self.shared = shared
        self.socket_server = socket_server
        self.node_id = config.node_id
        self.is_broker = is_broker
        self._channel_for = channel_for
        self._voter_endpoints = voter_endpoints
        self.controller: QuorumController | None = None
        self.control_plane_apis: KafkaApis | None = None
        self.control_version_manager: ApiVersionManager | None = None
        self.control_plane_pool: KafkaRequestHandlerPool | None = None
        #: a controller-only node's quota managers: controller mutation quotas of the requests brokers forward in
        #: an Envelope (KIP-590, KIP-599), fed with the committed client quotas by the ClientQuotaPublisher (a
        #: combined node's controller listener uses the broker's managers); started by :meth:`startup`
        self.quota_managers: QuotaManagers | None = (
            None
            if is_broker
            else QuotaManagers(config[QUOTA_WINDOW_NUM_CONFIG], config[QUOTA_WINDOW_SIZE_SECONDS_CONFIG], time)
        )

    def startup(self, log_defaults: LogConfig, metadata_image: Callable) -> None:
        """The QuorumController: topic config defaults ``log_defaults``, ``metadata_image()`` the image its
        metadata metrics read (the broker's cache on a combined node, else the loader's)."""
        config = self.config
        shared = self.shared
        records = read_bootstrap_records(config.metadata_log_dir)
        legacy = not any(r.name == "FeatureLevelRecord" and r.data["name"] == METADATA_VERSION for r in records)
        assert shared.raft is not None, "SharedServer.start_raft first"
        self.controller = QuorumController(
            self.node_id,
            shared.raft,
            shared.cluster_id,
            self.time,
            default_num_partitions=config[NUM_PARTITIONS_CONFIG],
            default_replication_factor=config[DEFAULT_REPLICATION_FACTOR_CONFIG],
            config_schema=LogConfigSchema(log_defaults, GroupConfigDefaults.from_broker_config(config)),
            # formatted before pykbroker had feature versions (meta.properties alone, or SCRAM records only):
            # the levels that pykbroker wrote then
            bootstrap_metadata_version=LEGACY_BOOTSTRAP_METADATA_VERSION
            if legacy
            else LATEST_PRODUCTION_METADATA_VERSION,
            bootstrap_features={} if legacy else None,
            bootstrap_records=records,
            delete_topic_enable=config[DELETE_TOPIC_ENABLE_CONFIG],
            # The single-node mode has no heartbeats: its broker is unfenced at registration.
            unfence_on_register=shared.single_node,
            session_timeout_ms=config[BROKER_SESSION_TIMEOUT_MS_CONFIG],
            leader_imbalance_check_interval_ms=(
                config[LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS_CONFIG] * 1000
                if config[AUTO_LEADER_REBALANCE_ENABLE_CONFIG]
                else None
            ),
            delegation_tokens=DelegationTokenSettings.from_config(config),
        )
        ControllerMetadataMetrics(self.metrics, self.controller, metadata_image)
        if self.quota_managers is not None:
            self.quota_managers.start()

    def start_apis(
        self,
        broker_helper: RequestHelper | None,
        broker_metadata_cache,
        log_defaults: LogConfig,
        finalized_features: Callable | None = None,
    ) -> None:
        """The controller listener: the Raft RPCs (when there are other voters), ControllerApis, and on
        a combined node Metadata (kept from the single-node mode, where tools may ask the controller);
        ``broker_helper`` / ``broker_metadata_cache``: the broker's on a combined node (its authorizer and
        cache), else None; ``finalized_features()``: what ApiVersions reports as finalized (None: this
        controller's, :meth:`finalized_features`)."""
        config = self.config
        if not config.control_plane_listener_name:
            return
        controller = self.controller
        assert controller is not None, "startup first"
        shared = self.shared
        helper = broker_helper
        if helper is None:
            # The controller listener of a controller-only node authorizes with the committed ACLs of the metadata
            # loader's image, as Kafka's controller whose StandardAuthorizer is fed by the AclPublisher (not with
            # ACL records the active controller wrote but the quorum has not committed yet), and applies controller
            # mutation quotas (client quotas of that image) to forwarded requests.
            loader = shared.loader
            assert loader is not None, "the metadata loader starts before the controller listener"
            helper = RequestHelper(
                self._channel_for,
                authorizer=create_authorizer(config, lambda: loader.image),
                quotas=self.quota_managers,
            )
        cluster_info = None
        if not self.is_broker:
            raft = shared.raft
            assert raft is not None, "SharedServer.start_raft first"
            raft_channel = shared.raft_channel

            def cluster_info():
                # a dynamic quorum's controllers (KIP-853): the voter set in the log, the leaders learnt
                controllers = shared.voters or (raft_channel.controller_addresses() if raft_channel else {})
                return shared.cluster_id, raft.leader_and_epoch.leader_id, controllers

        controller_apis = ControllerApis(helper, controller, config, log_defaults, cluster_info)
        families: list = [controller_apis]
        if shared.raft_channel is not None:
            families.append(RaftHandlers(helper, shared.raft_channel))
            families.append(RaftVoterHandlers(helper, lambda: shared.raft, shared.cluster_id))
        if self.is_broker:
            families.append(MetadataHandler(helper, broker_metadata_cache))
        families.append(describe_quorum_handler(helper, shared, True, self._voter_endpoints))
        self.control_plane_apis, self.control_version_manager = build_apis(
            self.node_id, helper, self.time, families, finalized_features or self.finalized_features, True
        )
        controller_apis.dispatch = self.control_plane_apis.handle  # the inner request of an Envelope
        channel = self.socket_server.control_plane_request_channel
        assert channel is not None  # a control plane listener is configured (checked above)
        self.control_plane_pool = KafkaRequestHandlerPool(
            self.node_id,
            channel,
            self.control_plane_apis,
            1,
            CONTROL_PLANE,
            self.metrics,
            self.time,
        )

    def finalized_features(self):
        """What a controller-only node's ApiVersions reports as finalized: its last features change
        (Kafka's FeaturesPublisher); a combined node's broker answers from its metadata image instead."""
        raft = self.shared.raft
        features = self.shared.features_publisher.features
        return with_kraft_version(features, raft.kraft_version() if raft is not None else 0)

    def shutdown(self, log_error: Callable[[str, Exception], None]) -> None:
        """Stop what was started, in the reverse order (a part never started is skipped)."""
        steps = ShutdownSteps()
        steps.add("control-plane request handlers", self.control_plane_pool)
        steps.add("controller quota managers", self.quota_managers)
        steps.add("controller", self.controller, lambda controller: controller.close())
        steps.run(log_error)
