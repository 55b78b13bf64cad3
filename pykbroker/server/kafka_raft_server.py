"""KafkaRaftServer: one process playing the broker (and controller) roles, started and stopped in order.

Mirrors ``kafka.server.KafkaRaftServer`` + ``BrokerServer.startup``/``shutdown``:

start-up: check/format storage (meta.properties) -> metrics -> SocketServer (binds ephemeral ports)
-> metadata cache -> KafkaApis and its handlers -> request handler pools -> enable request processing
(processors, then acceptors: network threads start last, so clients only connect to a ready broker).

shutdown: stop acceptors and processors -> drain and stop handler pools -> close the rest.
``shutdown`` is idempotent and safe from a signal handler thread.
"""
from __future__ import annotations

import socket
import threading

from pykbroker.config.endpoint import EndPoint
from pykbroker.config.kafka_config import KafkaConfig
from pykbroker.network.socket_server import SocketServer, SocketServerConfig
from pykbroker.protocol import request_schema
from pykbroker.server.api_version_manager import ApiVersionManager
from pykbroker.server.handlers.api_versions import ApiVersionsHandler
from pykbroker.server.handlers.metadata import MetadataHandler
from pykbroker.server.kafka_apis import KafkaApis
from pykbroker.server.kafka_request_handler import KafkaRequestHandlerPool
from pykbroker.server.meta_properties import ensure_formatted
from pykbroker.server.metadata_cache import BrokerInfo, CacheImage, MetadataCache
from pykbroker.server.request_helper import RequestHelper
from pykbroker.utils.logging import get_logger
from pykbroker.utils.metrics import MetricsRegistry
from pykbroker.utils.time import SYSTEM, Time


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
        self._shutdown_lock = threading.Lock()
        self._shutdown_done = threading.Event()
        self.started = False

    # -- start-up ------------------------------------------------------------------------------
    def startup(self) -> None:
        config = self.config
        self.log.info("Starting broker")
        for key in config.unknown_keys:
            self.log.warning(f"The configuration '{key}' was supplied but isn't a known config.")
        self.cluster_id, _ = ensure_formatted(config.log_dirs, self.node_id, self.log)

        sconfig = SocketServerConfig.from_kafka_config(config)
        self.socket_server = SocketServer(sconfig, self.metrics, self._is_api_allowed, self.time)
        self.metadata_cache = MetadataCache(self.node_id)
        self._register_self()

        cp_name = config.control_plane_listener_name
        self.data_helper = RequestHelper(self._channel_for)
        self.data_plane_apis, self.data_version_manager = self._build_apis(self.data_helper, [
            MetadataHandler(self.data_helper, self.metadata_cache),
        ])
        if cp_name:
            self.control_plane_apis, self.control_version_manager = self._build_apis(self.data_helper, [
                MetadataHandler(self.data_helper, self.metadata_cache),
            ])

        self.data_plane_pool = KafkaRequestHandlerPool(
            self.node_id, self.socket_server.data_plane_request_channel, self.data_plane_apis,
            config["num.io.threads"], "data-plane", self.metrics, self.time)
        if cp_name:
            self.control_plane_pool = KafkaRequestHandlerPool(
                self.node_id, self.socket_server.control_plane_request_channel, self.control_plane_apis, 1,
                "control-plane", self.metrics, self.time)
        self.socket_server.enable_request_processing()
        self.started = True
        self.log.info(f"[KafkaRaftServer nodeId={self.node_id}] Kafka Server started")

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

    def _register_self(self) -> None:
        me = BrokerInfo(self.node_id, self.advertised_endpoints(), self.config["broker.rack"])
        self.metadata_cache.set_image(CacheImage(cluster_id=self.cluster_id, controller_id=self.node_id,
                                                 brokers={self.node_id: me}))

    # -- shutdown ------------------------------------------------------------------------------
    def shutdown(self) -> None:
        with self._shutdown_lock:
            if self._shutdown_done.is_set():
                return
            self.log.info(f"[BrokerServer id={self.node_id}] shutting down")
            if self.socket_server is not None:
                self.socket_server.stop_processing_requests()
            if self.data_plane_pool is not None:
                self.data_plane_pool.shutdown()
            if self.control_plane_pool is not None:
                self.control_plane_pool.shutdown()
            if self.socket_server is not None:
                self.socket_server.shutdown()
            self._shutdown_done.set()
            self.log.info(f"[BrokerServer id={self.node_id}] shut down completed")

    def await_shutdown(self, timeout: float | None = None) -> bool:
        return self._shutdown_done.wait(timeout)

    def bound_port(self, listener_name: str = "PLAINTEXT") -> int:
        return self.socket_server.bound_port(listener_name)
