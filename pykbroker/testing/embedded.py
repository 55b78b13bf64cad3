"""EmbeddedKafka: a single-node pykbroker (KRaft, broker + controller) inside the calling process.

    with EmbeddedKafka() as kafka:
        kafka.create_topic("orders", partitions=3)
        producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap_servers})

In-process, for a fast start (a few tens of milliseconds once pykbroker is imported; a subprocess would pay
an interpreter and the imports on every start). Ports are ephemeral (``127.0.0.1:0``) unless given; the
data live in a temporary directory removed by :meth:`close` (the end of the ``with``) unless ``data_dir``
is given. :meth:`stop` and :meth:`restart` keep the data and, on restart, the ports, so clients reconnect
to the same ``bootstrap_servers``. The broker's log lines go to the caller's standard :mod:`logging`
(loggers ``pykbroker.<module>``, e.g. ``pykbroker.network.socket_server``; their levels are read at each
start). Every thread of the broker ends with :meth:`stop`; a broker still running when the interpreter
exits (a test run interrupted before its teardown) is stopped then, before the interpreter waits for
the threads.

Configuration is Kafka's ``server.properties`` keys: ``EmbeddedKafka(config={"num.partitions": "3"})``.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Callable

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.config.broker_configs.group_coordinator_configs import (
    GROUP_INITIAL_REBALANCE_DELAY_MS_CONFIG,
    OFFSETS_TOPIC_NUM_PARTITIONS_CONFIG,
    OFFSETS_TOPIC_REPLICATION_FACTOR_CONFIG,
)
from pykbroker.config.broker_configs.kraft_configs import (
    CONTROLLER_LISTENER_NAMES_CONFIG,
    CONTROLLER_QUORUM_VOTERS_CONFIG,
    NODE_ID_CONFIG,
    PROCESS_ROLES_CONFIG,
)
from pykbroker.config.broker_configs.replication_configs import INTER_BROKER_LISTENER_NAME_CONFIG
from pykbroker.config.broker_configs.server_configs import NUM_IO_THREADS_CONFIG
from pykbroker.config.broker_configs.server_log_configs import LOG_DIRS_CONFIG, NUM_PARTITIONS_CONFIG
from pykbroker.config.broker_configs.socket_server_configs import (
    LISTENER_SECURITY_PROTOCOL_MAP_CONFIG,
    LISTENERS_CONFIG,
    NUM_NETWORK_THREADS_CONFIG,
)
from pykbroker.config.broker_configs.transaction_configs import (
    TRANSACTION_STATE_LOG_MIN_ISR_CONFIG,
    TRANSACTION_STATE_LOG_REPLICATION_FACTOR_CONFIG,
)
from pykbroker.config.kafka_config import KafkaConfig
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server.kafka_raft_server import KafkaRaftServer
from pykbroker.utils import logging as plog

HOST = "127.0.0.1"

# A single node, quick to start and to stop: few threads, no waiting on an initial rebalance.
DEFAULT_CONFIG = {
    PROCESS_ROLES_CONFIG: "broker,controller",
    NODE_ID_CONFIG: "1",
    CONTROLLER_LISTENER_NAMES_CONFIG: "CONTROLLER",
    INTER_BROKER_LISTENER_NAME_CONFIG: "PLAINTEXT",
    LISTENER_SECURITY_PROTOCOL_MAP_CONFIG: "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    NUM_NETWORK_THREADS_CONFIG: "1",
    NUM_IO_THREADS_CONFIG: "2",
    NUM_PARTITIONS_CONFIG: "1",
    OFFSETS_TOPIC_REPLICATION_FACTOR_CONFIG: "1",
    OFFSETS_TOPIC_NUM_PARTITIONS_CONFIG: "1",
    TRANSACTION_STATE_LOG_REPLICATION_FACTOR_CONFIG: "1",
    TRANSACTION_STATE_LOG_MIN_ISR_CONFIG: "1",
    GROUP_INITIAL_REBALANCE_DELAY_MS_CONFIG: "0",
}

_logging_lock = threading.Lock()
_logging_users = 0
_saved_logging: dict | None = None


def _acquire_logging() -> None:
    """The first running EmbeddedKafka sends pykbroker's logging to the standard library's; the last one
    stopped puts back what was there."""
    global _logging_users, _saved_logging
    with _logging_lock:
        if _logging_users == 0:
            _saved_logging = plog.saved_config()
            plog.configure(stdlib=True)
        else:
            plog.refresh()
        _logging_users += 1


def _release_logging() -> None:
    global _logging_users, _saved_logging
    with _logging_lock:
        _logging_users -= 1
        if _logging_users == 0 and _saved_logging is not None:
            plog.restore(_saved_logging)
            _saved_logging = None


def _stop_if_alive(kafka: EmbeddedKafka | None) -> None:
    if kafka is not None:
        kafka.stop()


def _register_exit_hook(callback: Callable[[], object]) -> None:
    # threading's exit hooks run before the interpreter joins the remaining non-daemon threads (the
    # broker's network threads are such threads); atexit would run after, i.e. never.
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        try:
            register(callback)
            return
        except RuntimeError:  # the interpreter is already shutting down
            pass
    import atexit

    atexit.register(callback)


class EmbeddedKafka:
    """A single-node broker in this process (see the module docstring). Not thread-safe: one owner
    starts, stops and restarts it."""

    def __init__(self, data_dir: str | None = None, config: dict[str, str] | None = None, port: int = 0):
        self._own_dir = data_dir is None
        self.data_dir = tempfile.mkdtemp(prefix="pykbroker-") if data_dir is None else str(data_dir)
        self._ports = {"PLAINTEXT": port, "CONTROLLER": 0}
        self._overrides = {k: str(v) for k, v in (config or {}).items()}
        self._server: KafkaRaftServer | None = None
        self._closed = False
        ref = weakref.ref(self)
        _register_exit_hook(lambda: _stop_if_alive(ref()))

    # -- life cycle ----------------------------------------------------------------------------------
    def _config(self) -> KafkaConfig:
        node_id = self._overrides.get(NODE_ID_CONFIG, DEFAULT_CONFIG[NODE_ID_CONFIG])
        props = dict(DEFAULT_CONFIG)
        props.update(
            {
                LISTENERS_CONFIG: f"PLAINTEXT://{HOST}:{self._ports['PLAINTEXT']},CONTROLLER://{HOST}:{self._ports['CONTROLLER']}",
                CONTROLLER_QUORUM_VOTERS_CONFIG: f"{node_id}@{HOST}:{self._ports['CONTROLLER']}",
                LOG_DIRS_CONFIG: self.data_dir,
            }
        )
        props.update(self._overrides)
        return KafkaConfig(props)

    def start(self) -> EmbeddedKafka:
        """Start the broker (no-op when running); returns once it serves requests."""
        if self._closed:
            raise RuntimeError("EmbeddedKafka is closed")
        if self._server is not None:
            return self
        config = self._config()
        _acquire_logging()
        server = KafkaRaftServer(config, halt_on_fatal_fault=False)
        try:
            server.startup()
        except BaseException:
            server.shutdown()
            _release_logging()
            raise
        self._server = server
        self._ports = {"PLAINTEXT": server.bound_port("PLAINTEXT"), "CONTROLLER": server.bound_port("CONTROLLER")}
        return self

    def stop(self) -> None:
        """Orderly shutdown; the data stay (:meth:`start` or :meth:`restart` serves them again)."""
        server, self._server = self._server, None
        if server is None:
            return
        try:
            server.shutdown()
        finally:
            _release_logging()

    def restart(self) -> EmbeddedKafka:
        """Stop, then start on the same ports and data."""
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stop and remove the data directory when it is the temporary one."""
        self.stop()
        self._closed = True
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedKafka:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def port(self) -> int:
        return self._ports["PLAINTEXT"]

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:<port>`` for ``bootstrap.servers`` (the port is known once started)."""
        if not self._ports["PLAINTEXT"]:
            raise RuntimeError("EmbeddedKafka is not started")
        return f"{HOST}:{self._ports['PLAINTEXT']}"

    # -- topics --------------------------------------------------------------------------------------
    def create_topic(
        self, name: str, partitions: int = 1, config: dict[str, str] | None = None, timeout: float = 30.0
    ) -> str:
        """CreateTopics (replication factor 1); returns once every partition has its leader in the
        broker's metadata, so a client produces at once. Raises the protocol error (e.g.
        ``TopicAlreadyExistsError``) on failure."""
        with BrokerConnection.to(self.bootstrap_servers, client_id="embedded-kafka", timeout=timeout) as conn:
            response = conn.request(
                ApiKeys.CREATE_TOPICS,
                7,
                {
                    "topics": [
                        {
                            "name": name,
                            "num_partitions": partitions,
                            "replication_factor": 1,
                            "assignments": [],
                            "configs": [{"name": k, "value": str(v)} for k, v in (config or {}).items()],
                        }
                    ],
                    "timeout_ms": int(timeout * 1000),
                    "validate_only": False,
                },
            )
            (result,) = response["topics"]
            if result["error_code"] != errors.NONE:
                raise errors.for_code(result["error_code"])(result.get("error_message") or None)
            self._await_leaders(conn, name, partitions, timeout)
        return name

    def delete_topic(self, name: str, timeout: float = 30.0) -> None:
        """DeleteTopics; raises the protocol error on failure."""
        with BrokerConnection.to(self.bootstrap_servers, client_id="embedded-kafka", timeout=timeout) as conn:
            response = conn.request(
                ApiKeys.DELETE_TOPICS,
                6,
                {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}], "timeout_ms": int(timeout * 1000)},
            )
        (result,) = response["responses"]
        if result["error_code"] != errors.NONE:
            raise errors.for_code(result["error_code"])(result.get("error_message") or None)

    @staticmethod
    def _await_leaders(conn: BrokerConnection, name: str, partitions: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            metadata = conn.request(
                ApiKeys.METADATA,
                12,
                {
                    "topics": [{"topic_id": uuid.UUID(int=0), "name": name}],
                    "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False,
                },
            )
            (topic,) = metadata["topics"]
            leaders = [p["leader_id"] for p in topic["partitions"] if p["error_code"] == errors.NONE]
            if topic["error_code"] == errors.NONE and len(leaders) == partitions and min(leaders) >= 0:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name}: no leader for every partition within {timeout}s")
            time.sleep(0.01)
