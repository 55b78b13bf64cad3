"""KafkaRaftServer: one process playing the broker and/or controller roles (``process.roles``), started
and stopped in order.

Mirrors ``kafka.server.KafkaRaftServer``: it owns the node's parts and starts them in this order:

- itself: bind every listener (a port in use stops start-up before any data directory is touched), the
  metric reporters -> lock ``.lock`` in every log dir and the metadata log dir (held until shutdown; a
  second broker on the same directories is refused) -> check/format storage (meta.properties);
- :class:`BrokerServer` (broker role): scheduler and LogManager (log recovery), then MetadataCache,
  ReplicaManager and the BrokerMetadataPublisher;
- :class:`SharedServer`: the ``__cluster_metadata`` Raft log and client (built before the broker's
  metadata cache), the MetadataLoader with the broker's publisher (or a controller's FeaturesPublisher);
- :class:`ControllerServer` (controller role): the QuorumController (replays the metadata log; becomes
  active), then the Raft IO thread starts; a controller of a cluster serves its listener now (the quorum
  needs it to elect a leader before brokers can register);
- BrokerServer: broker registration, wait until it is published -> KafkaApis, coordinators and the
  data-plane request handler pool; the single-node mode's controller listener;
- enable request processing (processors, then acceptors: network threads start last, so clients only
  connect to a ready broker). Every start-up wait is bounded by ``initial.broker.registration.timeout.ms``.

shutdown (Kafka's KafkaRaftServer: the broker, then the controller, then what they share): the broker's
controlled shutdown -> stop acceptors and processors -> BrokerServer (request handlers, coordinators,
replica manager, its publisher, logs, scheduler) -> ControllerServer (control-plane handlers,
controller) -> SharedServer (Raft, loader, metadata log) -> socket server, metric reporters, directory
locks. A part that was never started is skipped (each part's fields are None until then).
``shutdown`` is idempotent and safe from a signal handler thread.

Threading: :meth:`startup` runs on the caller's thread; :meth:`shutdown` on any thread (serialised by a
lock); a fatal error found on another thread shuts the server down on a thread of its own.
"""

from __future__ import annotations

import os
import socket
import threading
from typing import TYPE_CHECKING

from pykbroker.config.broker_configs.kraft_configs import (
    CONTROLLER_QUORUM_BOOTSTRAP_SERVERS_CONFIG,
    CONTROLLER_QUORUM_VOTERS_CONFIG,
    INITIAL_BROKER_REGISTRATION_TIMEOUT_MS_CONFIG,
    SASL_MECHANISM_CONTROLLER_PROTOCOL_CONFIG,
)
from pykbroker.config.broker_configs.security_configs import (
    DELEGATION_TOKEN_MASTER_KEY_CONFIG,
    DELEGATION_TOKEN_SECRET_KEY_CONFIG,
    SASL_MECHANISM_INTER_BROKER_PROTOCOL_CONFIG,
    SASL_SERVER_MAX_RECEIVE_SIZE_CONFIG,
)
from pykbroker.config.broker_configs.server_configs import METRIC_REPORTERS_CONFIG
from pykbroker.config.broker_configs.socket_server_configs import ADVERTISED_LISTENERS_CONFIG
from pykbroker.config.config_def import ConfigException
from pykbroker.config.endpoint import EndPoint, parse_listeners
from pykbroker.config.kafka_config import KafkaConfig
from pykbroker.log.log_config import LogConfig
from pykbroker.log.log_manager import LogDirLockError, lock_log_dirs
from pykbroker.metadata.bootstrap import write_bootstrap_records
from pykbroker.metadata.feature_control_manager import feature_level_bootstrap_records
from pykbroker.metadata.features import LATEST_PRODUCTION, bootstrap_levels
from pykbroker.metadata.publisher import MetadataPublisher
from pykbroker.metrics.reporter import MetricsReporter, create_reporters
from pykbroker.network.socket_server import CONTROL_PLANE, SocketServer, SocketServerConfig
from pykbroker.raft.control_records import VoterEndpoint
from pykbroker.raft.kafka_network_channel import parse_bootstrap_servers, parse_voters
from pykbroker.security.channel_builders import authenticator_factories, transport_factories
from pykbroker.security.client_security import PLAINTEXT, ClientSecurity, client_security
from pykbroker.security.credential_cache import ScramCredentialCache
from pykbroker.security.delegation_token_cache import DelegationTokenCache
from pykbroker.server.broker_state import BrokerState
from pykbroker.server.meta_properties import MetaPropertiesError, ensure_formatted
from pykbroker.server.quotas.client_quota_publisher import ClientQuotaPublisher
from pykbroker.server.server_common import StartupError, StartupWaits, run_steps
from pykbroker.server.shared_server import SharedServer
from pykbroker.utils.fault_handler import ProcessTerminatingFaultHandler
from pykbroker.utils.logging import get_logger
from pykbroker.utils.metrics import MetricsRegistry
from pykbroker.utils.time import SYSTEM, Time

if TYPE_CHECKING:  # imported where a node of that role builds it (start-up time, issue 31: see startup())
    from pykbroker.server.broker_server import BrokerServer
    from pykbroker.server.controller_server import ControllerServer

__all__ = ["KafkaRaftServer", "StartupError"]


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
        #: ``controller.quorum.voters`` as ``{id: (host, port)}`` (known once start-up checked it)
        self.voters: dict[int, tuple[str, int]] = {}
        #: ``controller.quorum.bootstrap.servers`` as ``{-2: (host, port), ...}`` (KIP-853: a dynamic quorum)
        self.bootstrap_servers: dict[int, tuple[str, int]] = {}
        #: broker and only voter in one process: no network between its parts
        self.single_node = False
        self.scram_credentials = ScramCredentialCache()
        secret = config[DELEGATION_TOKEN_SECRET_KEY_CONFIG] or config[DELEGATION_TOKEN_MASTER_KEY_CONFIG] or None
        #: delegation tokens (KIP-48) for token logins over SCRAM and DescribeDelegationToken
        self.delegation_tokens = DelegationTokenCache(secret)
        self.inter_broker_security: ClientSecurity = PLAINTEXT
        self.controller_security: ClientSecurity = PLAINTEXT
        self.socket_server: SocketServer | None = None
        self.metric_reporters: list[MetricsReporter] = []
        self._dir_locks: list = []
        #: the node's parts, built once its storage is formatted (None before, or without the role)
        self.shared: SharedServer | None = None
        self.broker: BrokerServer | None = None
        self.controller: ControllerServer | None = None
        self._shutdown_lock = threading.Lock()
        self._shutdown_done = threading.Event()
        self.started = False
        self.fatal_error: str | None = None
        self.broker_state = BrokerState.NOT_RUNNING
        self.metrics.gauge("kafka.server:type=KafkaServer,name=BrokerState", lambda: self.broker_state.value)

    # -- start-up ------------------------------------------------------------------------------
    def startup(self) -> None:
        """Start every part in order. Raises StartupError (one-line message: a listener cannot be
        bound, a data directory is locked by another broker, a start-up wait timed out, the controller
        refused the registration), the config and storage errors, or whatever a component raised."""
        config = self.config
        self.log.info("Starting broker" if self.is_broker else "Starting controller")
        self.broker_state = BrokerState.STARTING
        for key in config.unknown_keys:
            self.log.warning(f"The configuration '{key}' was supplied but isn't a known config.")
        self._check_voters()
        waits = StartupWaits(self.time, config[INITIAL_BROKER_REGISTRATION_TIMEOUT_MS_CONFIG], lambda: self.fatal_error)
        socket_server = self._start_listeners()
        self._lock_and_format()
        assert self.cluster_id is not None
        broker: BrokerServer | None = None
        controller: ControllerServer | None = None
        shared = self.shared = SharedServer(
            config,
            self.time,
            self.metrics,
            self.cluster_id,
            self.voters,
            self.single_node,
            self.bootstrap_servers,
            "broker" if self.is_broker else "controller",
            self.controller_security,
            self.fatal_fault_handler,
            self._on_fatal_error,
        )
        # Each role's server is imported by a node of that role only: a dedicated controller never loads the broker's
        # coordinators, replica manager and request handlers (start-up time, issue 31).
        if self.is_controller:
            from pykbroker.server.controller_server import ControllerServer

            controller = self.controller = ControllerServer(
                config,
                self.time,
                self.metrics,
                shared,
                socket_server,
                self.is_broker,
                self._channel_for,
                self._voter_endpoints,
            )
        if self.is_broker:
            from pykbroker.server.broker_server import BrokerServer

            broker = self.broker = BrokerServer(
                config,
                self.time,
                self.metrics,
                shared,
                socket_server,
                self.scram_credentials,
                self.inter_broker_security,
                waits,
                controller if self.single_node else None,
                self.is_controller,
                self._channel_for,
                self.advertised_endpoints,
                self._voter_endpoints,
                self.delegation_tokens,
            )

        if broker is not None:
            broker.start_storage()
        shared.start_raft(self._local_controller_endpoints() if self.is_controller else ())
        publishers: list[MetadataPublisher]
        if broker is not None:
            broker.start_metadata_cache()
            assert broker.publisher is not None  # built by start_metadata_cache
            publishers = [broker.publisher]
        else:
            assert self.socket_server is not None  # bound by _start_listeners
            publishers = [
                shared.features_publisher,
                ClientQuotaPublisher(
                    self.socket_server.connection_quotas, controller.quota_managers if controller is not None else None
                ),
            ]
        shared.start_loader(publishers, waits)
        if controller is not None:
            controller.startup(self.controller_log_defaults(), self._metadata_image)
        shared.start_driver()
        if self.single_node:
            assert controller is not None and controller.controller is not None
            if not controller.controller.wait_for_active(waits.timeout):
                raise StartupError(
                    f"Timed out after {config[INITIAL_BROKER_REGISTRATION_TIMEOUT_MS_CONFIG]} ms waiting for "
                    "the metadata quorum controller to become active"
                )

        if controller is not None and not self.single_node:
            # The quorum needs this listener to elect a leader, before the broker part can register.
            self._start_controller_apis()
            socket_server.enable_request_processing((CONTROL_PLANE,))
        if broker is not None:
            # Register this broker (its listeners are bound: the ports are known), wait until it is published.
            broker.register()
            broker.start_apis()
        if self.single_node:
            self._start_controller_apis()
        socket_server.enable_request_processing()
        self.started = True
        if self.fatal_error is not None:
            raise StartupError(self.fatal_error)
        self.broker_state = BrokerState.RUNNING
        self.log.info("Kafka Server started")

    @property
    def is_broker(self) -> bool:
        return "broker" in self.config.process_roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.config.process_roles

    def _start_listeners(self) -> SocketServer:
        """Bind every listener and the metric reporters (the Prometheus endpoint), before anything touches
        the data directories: a port in use stops start-up there (StartupError). ``metric.reporters``: an
        unknown class is a ConfigException before anything is bound."""
        config = self.config
        reporters = create_reporters(config[METRIC_REPORTERS_CONFIG], config.values)
        sconfig = SocketServerConfig.from_kafka_config(config)
        endpoints = [*config.data_plane_listeners, *filter(None, [config.control_plane_listener])]
        authenticators = authenticator_factories(
            endpoints, config.originals, self.scram_credentials.lookup, self.delegation_tokens.scram_credential
        )
        self.inter_broker_security, self.controller_security = self._client_securities()
        try:
            self.socket_server = SocketServer(
                sconfig,
                self.metrics,
                self._is_api_allowed,
                self.time,
                authenticator_factories=authenticators,
                transport_factories=transport_factories(endpoints, config.originals),
                sasl_max_receive_size=config[SASL_SERVER_MAX_RECEIVE_SIZE_CONFIG],
            )
            for acceptor in self.socket_server.acceptors:
                acceptor.open_server_socket()
        except OSError as e:  # "Socket server failed to bind to host:port: <reason>."
            raise StartupError(e.strerror if e.errno is not None and e.strerror else str(e)) from e
        # Metric reporters bind with the listeners (the Prometheus endpoint); they read the registry,
        # whose metrics appear as the components register them.
        for reporter in reporters:
            try:
                reporter.init(self.metrics)
            except OSError as e:
                raise StartupError(e.strerror if e.errno is not None and e.strerror else str(e)) from e
            self.metric_reporters.append(reporter)
        return self.socket_server

    def _lock_and_format(self) -> None:
        """Lock every data directory (and the metadata log's) for the process lifetime, then format/check
        them (``self.cluster_id``); a controller formatted now writes the bootstrap feature levels."""
        config = self.config
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
            self.voters = parse_voters(config[CONTROLLER_QUORUM_VOTERS_CONFIG])
        except ValueError as e:
            raise ConfigException(
                CONTROLLER_QUORUM_VOTERS_CONFIG, ",".join(config[CONTROLLER_QUORUM_VOTERS_CONFIG]), str(e)
            ) from None
        try:
            bootstrap = parse_bootstrap_servers(config[CONTROLLER_QUORUM_BOOTSTRAP_SERVERS_CONFIG])
        except ValueError as e:
            raise ConfigException(
                CONTROLLER_QUORUM_BOOTSTRAP_SERVERS_CONFIG,
                ",".join(config[CONTROLLER_QUORUM_BOOTSTRAP_SERVERS_CONFIG]),
                str(e),
            ) from None
        if not self.voters and bootstrap:
            # KIP-853: the voters come from the metadata log (a bootstrap snapshot or a VotersRecord)
            self.bootstrap_servers = bootstrap
            return
        if not self.voters:
            if not self.is_controller:
                raise ConfigException(
                    CONTROLLER_QUORUM_VOTERS_CONFIG,
                    "",
                    "a broker-only node needs the controllers in controller.quorum.voters or "
                    "controller.quorum.bootstrap.servers",
                )
            self.voters = {self.node_id: ("", 0)}
        if self.is_controller and self.node_id not in self.voters:
            raise ConfigException(
                CONTROLLER_QUORUM_VOTERS_CONFIG,
                ",".join(config[CONTROLLER_QUORUM_VOTERS_CONFIG]),
                f"If process.roles contains the 'controller' role, the node id {self.node_id} must be included "
                "in the set of voters",
            )
        if not self.is_controller and self.node_id in self.voters:
            raise ConfigException(
                CONTROLLER_QUORUM_VOTERS_CONFIG,
                ",".join(config[CONTROLLER_QUORUM_VOTERS_CONFIG]),
                f"If process.roles contains just the 'broker' role, the node id {self.node_id} must not be "
                "included in the set of voters",
            )
        self.single_node = self.is_broker and set(self.voters) == {self.node_id}

    def _start_controller_apis(self) -> None:
        """The controller listener's request handling (ControllerServer), with the broker's authorizer,
        metadata cache and finalized features on a combined node."""
        assert self.controller is not None
        broker = self.broker
        self.controller.start_apis(
            broker.data_helper if broker is not None else None,
            broker.metadata_cache if broker is not None else None,
            self.controller_log_defaults(),
            broker.finalized_features if broker is not None else None,
        )

    def controller_log_defaults(self) -> LogConfig:
        """Topic config defaults for the controller: the LogManager's on a broker, else from the config."""
        if self.broker is not None and self.broker.log_manager is not None:
            return self.broker.log_manager.default_config
        return LogConfig.from_broker_config(self.config.values)

    def _metadata_image(self):
        """The metadata image of this node: the broker's cache on a broker, else the loader's."""
        if self.broker is not None and self.broker.metadata_cache is not None:
            return self.broker.metadata_cache.image
        assert self.shared is not None and self.shared.loader is not None
        return self.shared.loader.image

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
                config.originals, listener, protocol_of(listener), SASL_MECHANISM_INTER_BROKER_PROTOCOL_CONFIG
            )
        controller = PLAINTEXT
        if config.controller_listener_names:
            listener = config.controller_listener_names[0]
            controller = client_security(
                config.originals, listener, protocol_of(listener), SASL_MECHANISM_CONTROLLER_PROTOCOL_CONFIG
            )
        return inter, controller

    def _local_controller_endpoints(self) -> list[VoterEndpoint]:
        """This controller's endpoints as a voter (Kafka's ``effectiveAdvertisedControllerListeners``): each
        controller listener from ``advertised.listeners`` else ``listeners``, its bound port when configured as
        0, ``localhost`` for a wildcard host (as ``kafka-metadata-quorum add-controller`` computes them)."""
        config = self.config
        by_name = {ep.listener_name: ep for ep in config.listeners}
        advertised = config.values.get(ADVERTISED_LISTENERS_CONFIG)
        if advertised:
            parsed = parse_listeners(advertised, config.protocol_map, ADVERTISED_LISTENERS_CONFIG)
            by_name.update({ep.listener_name: ep for ep in parsed})
        result = []
        for name in config.controller_listener_names:
            ep = by_name.get(name)
            if ep is not None:
                port = ep.port or self.bound_port(name)
                result.append(VoterEndpoint(name, ep.host or "localhost", port))
        return result

    def _voter_endpoints(self) -> dict[int, list[tuple[str, str, int]]]:
        """``controller.quorum.voters`` as ``{id: [(first controller listener, host, port)]}`` (Kafka's static
        voters' endpoints); this node's own entry with its bound port when configured as port 0."""
        names = self.config.controller_listener_names
        raft = self.shared.raft if self.shared is not None else None
        if self.bootstrap_servers and raft is not None:  # KIP-853: the voter set in the metadata log
            voter_set = raft.voter_set()
            if voter_set is None:
                return {}
            return {v.voter_id: [(e.name, e.host, e.port) for e in v.endpoints] for v in voter_set.voters.values()}
        if not names or not self.config[CONTROLLER_QUORUM_VOTERS_CONFIG]:
            return {}
        result = {}
        for node_id, (host, port) in self.voters.items():
            if node_id == self.node_id and port == 0:
                port = self.bound_port(names[0])
            result[node_id] = [(names[0], host, port)]
        return result

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

    def _channel_for(self, request):
        ss = self.socket_server
        assert ss is not None
        cp = self.config.control_plane_listener_name
        if cp and request.context.listener_name == cp:
            return ss.control_plane_request_channel
        return ss.data_plane_request_channel

    def _is_api_allowed(self, listener: str, api_key: int, version: int) -> bool:
        """Whether the plane of ``listener`` serves ``api_key`` at ``version`` (its ApiVersionManager; the
        listeners process requests only once their plane's KafkaApis exist)."""
        cp = self.config.control_plane_listener_name
        if cp and listener == cp:
            manager = self.controller.control_version_manager if self.controller is not None else None
        else:
            manager = self.broker.data_version_manager if self.broker is not None else None
        assert manager is not None
        return manager.is_api_allowed(listener, api_key, version)

    def advertised_endpoints(self) -> dict:
        """Listener name -> advertised EndPoint with the real bound port and a concrete host."""
        result = {}
        for ep in self.config.advertised_listeners:
            port = ep.port
            if port == 0:
                port = self.bound_port(ep.listener_name)
            host = ep.host or socket.gethostname()
            result[ep.listener_name] = EndPoint(ep.listener_name, ep.security_protocol, host, port)
        return result

    # -- shutdown ------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Kafka's order: the broker's controlled shutdown, stop the network, then the broker, the
        controller, what they share (Raft, loader), the socket server; parts never started are skipped."""
        with self._shutdown_lock:
            if self._shutdown_done.is_set():
                return
            self.log.info(f"[BrokerServer id={self.node_id}] shutting down")
            self.broker_state = BrokerState.SHUTTING_DOWN
            broker, controller, shared, socket_server = self.broker, self.controller, self.shared, self.socket_server
            steps: list = []
            if broker is not None and self.started:
                steps.append(("controlled shutdown", broker.controlled_shutdown))
            if socket_server is not None:
                steps.append(("socket server request processing", socket_server.stop_processing_requests))
            if broker is not None:
                steps.append(("broker", lambda: broker.shutdown(self._log_shutdown_error)))
            if controller is not None:
                steps.append(("controller", lambda: controller.shutdown(self._log_shutdown_error)))
            if shared is not None:
                steps.append(("shared server", lambda: shared.shutdown(self._log_shutdown_error)))
            if socket_server is not None:
                steps.append(("socket server", socket_server.shutdown))
            steps.append(("metric reporters", self._close_metric_reporters))
            steps.append(("log dir locks", self._release_dir_locks))
            run_steps(steps, self._log_shutdown_error)
            self._shutdown_done.set()
            self.log.info(f"[BrokerServer id={self.node_id}] shut down completed")

    def _log_shutdown_error(self, what: str, error: Exception) -> None:
        self.log.error(f"Error shutting down {what}", error=repr(error))

    def _close_metric_reporters(self) -> None:
        reporters, self.metric_reporters = self.metric_reporters, []
        for reporter in reporters:
            reporter.close()

    def _release_dir_locks(self) -> None:
        locks, self._dir_locks = self._dir_locks, []
        for lock in locks:
            lock.release()

    def await_shutdown(self, timeout: float | None = None) -> bool:
        return self._shutdown_done.wait(timeout)

    def bound_port(self, listener_name: str = "PLAINTEXT") -> int:
        """The port ``listener_name`` is bound to (start-up binds every listener first)."""
        assert self.socket_server is not None, "not started"
        return self.socket_server.bound_port(listener_name)
