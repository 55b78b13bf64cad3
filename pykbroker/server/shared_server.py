"""SharedServer: what the broker and the controller of one node share, the ``__cluster_metadata`` Raft
log and client, the channels to the other voters, and the MetadataLoader.

Mirrors ``kafka.server.SharedServer``. Start-up (called by KafkaRaftServer, between the broker's and the
controller's own steps): :meth:`start_raft` (metadata log, Raft client and its metrics, the network channel
to the other voters and the channel to the active controller unless this is the single-node mode) ->
:meth:`start_loader` (snapshot generator, MetadataLoader with the given publishers, registered with the
Raft client) -> :meth:`start_driver` (the Raft IO thread). :meth:`shutdown` stops what was started in
the reverse order: controller channel, Raft IO thread, Raft network channel, loader, metadata log.

Threading: started and stopped by the thread that starts/stops the KafkaRaftServer; the Raft client runs
on the driver's IO thread, the loader on its own event thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from pykbroker.config.broker_configs.kraft_configs import (
    CONTROLLER_QUORUM_APPEND_LINGER_MS_CONFIG,
    CONTROLLER_QUORUM_ELECTION_BACKOFF_MAX_MS_CONFIG,
    CONTROLLER_QUORUM_ELECTION_TIMEOUT_MS_CONFIG,
    CONTROLLER_QUORUM_FETCH_TIMEOUT_MS_CONFIG,
    CONTROLLER_QUORUM_REQUEST_TIMEOUT_MS_CONFIG,
    CONTROLLER_QUORUM_RETRY_BACKOFF_MS_CONFIG,
    METADATA_LOG_MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS_CONFIG,
    METADATA_LOG_MAX_SNAPSHOT_INTERVAL_MS_CONFIG,
    METADATA_LOG_SEGMENT_BYTES_CONFIG,
)
from pykbroker.config.kafka_config import KafkaConfig
from pykbroker.metadata.features_publisher import FeaturesPublisher
from pykbroker.metadata.metadata_loader import MetadataLoader
from pykbroker.metadata.publisher import MetadataPublisher
from pykbroker.metadata.records import MetadataRecordSerde
from pykbroker.metadata.snapshot_generator import SnapshotGenerator
from pykbroker.raft.control_records import VoterEndpoint
from pykbroker.raft.file_replicated_log import FileReplicatedLog
from pykbroker.raft.kafka_network_channel import KafkaNetworkChannel
from pykbroker.raft.kafka_raft_client import KafkaRaftClient
from pykbroker.raft.kafka_raft_client_driver import KafkaRaftClientDriver
from pykbroker.raft.kafka_raft_metrics import KafkaRaftMetrics
from pykbroker.raft.quorum_state_store import FileQuorumStateStore
from pykbroker.security.client_security import ClientSecurity
from pykbroker.server.meta_properties import read_meta_properties, uuid_from_string
from pykbroker.server.node_to_controller_channel_manager import NodeToControllerChannelManager
from pykbroker.server.server_common import ShutdownSteps, StartupWaits
from pykbroker.utils.fault_handler import ProcessTerminatingFaultHandler
from pykbroker.utils.logging import get_logger
from pykbroker.utils.metrics import MetricsRegistry
from pykbroker.utils.time import Time


class SharedServer:
    """The Raft side of one node. ``voters``: ``{id: (host, port)}``; ``single_node``: broker and only
    voter in one process (no network between the parts); ``bootstrap_servers``: ``{-2: (host, port), ...}`` of
    ``controller.quorum.bootstrap.servers`` when the voters come from the metadata log (KIP-853); ``role``:
    "broker" when this node has the
    broker role, else "controller" (how it introduces itself to the active controller);
    ``on_inconsistent_cluster_id(message)``: the fatal error of a voter whose cluster id differs."""

    def __init__(
        self,
        config: KafkaConfig,
        time: Time,
        metrics: MetricsRegistry,
        cluster_id: str,
        voters: dict[int, tuple[str, int]],
        single_node: bool,
        bootstrap_servers: dict[int, tuple[str, int]],
        role: str,
        controller_security: ClientSecurity,
        fatal_fault_handler: ProcessTerminatingFaultHandler,
        on_inconsistent_cluster_id: Callable[[str], None],
    ):
        self.config = config
        self.time = time
        self.metrics = metrics
        self.node_id = config.node_id
        self.cluster_id = cluster_id
        self.voters = voters
        self.single_node = single_node
        self.bootstrap_servers = bootstrap_servers
        self._role = role
        self._controller_security = controller_security
        self.fatal_fault_handler = fatal_fault_handler
        self._on_inconsistent_cluster_id = on_inconsistent_cluster_id
        self.log = get_logger("SharedServer", nodeId=self.node_id)
        self.metadata_log: FileReplicatedLog | None = None
        self.raft: KafkaRaftClient | None = None
        self.raft_channel: KafkaNetworkChannel | None = None
        #: requests to the active controller (None in the single-node mode)
        self.controller_channel: NodeToControllerChannelManager | None = None
        self.raft_driver: KafkaRaftClientDriver | None = None
        self.snapshot_generator: SnapshotGenerator | None = None
        self.loader: MetadataLoader | None = None
        #: a controller-only node's view of the finalized features (what its ApiVersions reports)
        self.features_publisher = FeaturesPublisher()

    def start_raft(self, local_listeners: Sequence[VoterEndpoint] = ()) -> None:
        """The ``__cluster_metadata`` log and its Raft client (a voter, or an observer on a broker-only
        node), with the network channel to the other voters unless this is the single-node mode.
        ``local_listeners``: this controller's endpoints (bound ports), for UpdateRaftVoter (KIP-853)."""
        config = self.config
        meta = read_meta_properties(config.metadata_log_dir) or {}
        directory_id = uuid_from_string(meta["directory.id"]) if meta.get("directory.id") else None
        self.metadata_log = FileReplicatedLog.open(
            config.metadata_log_dir, self.time, segment_bytes=config[METADATA_LOG_SEGMENT_BYTES_CONFIG]
        )
        raft = self.raft = KafkaRaftClient(
            self.node_id,
            sorted(self.voters),
            self.metadata_log,
            FileQuorumStateStore(os.path.join(config.metadata_log_dir, "__cluster_metadata-0")),
            MetadataRecordSerde(),
            self.time,
            append_linger_ms=config[CONTROLLER_QUORUM_APPEND_LINGER_MS_CONFIG],
            election_timeout_ms=config[CONTROLLER_QUORUM_ELECTION_TIMEOUT_MS_CONFIG],
            fetch_timeout_ms=config[CONTROLLER_QUORUM_FETCH_TIMEOUT_MS_CONFIG],
            election_backoff_max_ms=config[CONTROLLER_QUORUM_ELECTION_BACKOFF_MAX_MS_CONFIG],
            request_timeout_ms=config[CONTROLLER_QUORUM_REQUEST_TIMEOUT_MS_CONFIG],
            retry_backoff_ms=config[CONTROLLER_QUORUM_RETRY_BACKOFF_MS_CONFIG],
            fetch_max_wait_ms=min(500, config[CONTROLLER_QUORUM_REQUEST_TIMEOUT_MS_CONFIG] // 2),
            cluster_id=self.cluster_id,
            bootstrap_servers=sorted(self.bootstrap_servers, reverse=True),
            directory_id=directory_id,
            local_listeners=local_listeners,
        )
        KafkaRaftMetrics(self.metrics, raft, self.time)  # kafka.server:type=raft-metrics
        if not self.single_node:
            self.raft_channel = KafkaNetworkChannel(
                self.node_id,
                self.voters,
                config[CONTROLLER_QUORUM_REQUEST_TIMEOUT_MS_CONFIG],
                self.time,
                on_inconsistent_cluster_id=self._on_inconsistent_cluster_id,
                security=self._controller_security,
                bootstrap=self.bootstrap_servers,
                listener=config.controller_listener_names[0] if config.controller_listener_names else None,
            )
            self.raft_channel.start(raft)
            channel = self.raft_channel
            # Requests to the active controller (the Raft leader): a broker's registration, heartbeats and
            # forwarded requests; DescribeQuorum from a node that is not the leader.
            self.controller_channel = NodeToControllerChannelManager(
                self.node_id,
                lambda: raft.leader_and_epoch.leader_id,
                self.voters if self.voters else channel.controller_addresses,
                self._role,
                request_timeout_ms=config[CONTROLLER_QUORUM_REQUEST_TIMEOUT_MS_CONFIG],
                retry_backoff_ms=config[CONTROLLER_QUORUM_RETRY_BACKOFF_MS_CONFIG],
                time=self.time,
                security=self._controller_security,
            )
            self.controller_channel.start()
        self.raft_driver = KafkaRaftClientDriver(
            raft, channel=self.raft_channel, fatal_fault_handler=self.fatal_fault_handler
        )

    def start_loader(self, publishers: list[MetadataPublisher], waits: StartupWaits) -> None:
        """MetadataLoader: committed metadata records -> image -> ``publishers`` (installed before the
        loader hears of any record), then registered with the Raft client. Needs :meth:`start_raft`."""
        config = self.config
        raft = self.raft
        assert raft is not None, "start_raft first"
        self.snapshot_generator = SnapshotGenerator(
            self.node_id,
            raft.create_snapshot,
            self.time,
            max_bytes_since_last_snapshot=config[METADATA_LOG_MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS_CONFIG],
            max_time_since_last_snapshot_ms=config[METADATA_LOG_MAX_SNAPSHOT_INTERVAL_MS_CONFIG],
        )
        self.loader = MetadataLoader(
            self.node_id, self.cluster_id, raft.high_watermark, snapshot_generator=self.snapshot_generator
        )
        waits.result(
            self.loader.install_publishers(publishers), "the metadata loader to install the broker's publishers"
        )
        raft.register(self.loader)

    def start_driver(self) -> None:
        """Start the Raft IO thread (the client polls from then on). Needs :meth:`start_raft`."""
        assert self.raft_driver is not None, "start_raft first"
        self.raft_driver.start()

    def shutdown(self, log_error: Callable[[str, Exception], None]) -> None:
        """Stop what was started, in the reverse order of start-up (a part never started is skipped);
        ``log_error(what, error)`` reports a step that failed (the next steps still run)."""
        steps = ShutdownSteps()
        steps.add("controller channel", self.controller_channel)
        steps.add("raft client", self.raft_driver)
        steps.add("raft network channel", self.raft_channel, lambda channel: channel.close(drain_ms=500))
        steps.add("metadata loader", self.loader, lambda loader: loader.close())
        steps.add("metadata log", self.metadata_log, lambda log: log.close())
        steps.run(log_error)
