"""KafkaConfig: the broker's typed configuration, built from ``server.properties`` plus ``--override``s.

Mirrors ``kafka.server.KafkaConfig``: values are read through :meth:`get` with Kafka's key names;
derived views (listeners, planes, log dirs, retention in ms) are properties. Construction validates
everything and raises :class:`ConfigException` with one clear message naming the key and value.
Unknown keys are kept in :attr:`unknown_keys` for a start-up warning (Kafka logs them too).
Immutable after construction; safe to share between threads. Derived views are computed once
(``cached_property``): they sit on per-request paths such as the API-allowed check.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from pykbroker.config.broker_configs.kraft_configs import (
    CONTROLLER_LISTENER_NAMES_CONFIG,
    METADATA_LOG_DIR_CONFIG,
    NODE_ID_CONFIG,
    PROCESS_ROLES_CONFIG,
)
from pykbroker.config.broker_configs.replication_configs import (
    INTER_BROKER_LISTENER_NAME_CONFIG,
    SECURITY_INTER_BROKER_PROTOCOL_CONFIG,
)
from pykbroker.config.broker_configs.server_configs import BROKER_ID_CONFIG, MESSAGE_MAX_BYTES_CONFIG
from pykbroker.config.broker_configs.server_log_configs import (
    LOG_DIR_CONFIG,
    LOG_DIRS_CONFIG,
    LOG_RETENTION_HOURS_CONFIG,
    LOG_RETENTION_MINUTES_CONFIG,
    LOG_RETENTION_MS_CONFIG,
)
from pykbroker.config.broker_configs.socket_server_configs import (
    ADVERTISED_LISTENERS_CONFIG,
    CONTROL_PLANE_LISTENER_NAME_CONFIG,
    LISTENER_SECURITY_PROTOCOL_MAP_CONFIG,
    LISTENERS_CONFIG,
    MAX_CONNECTIONS_PER_IP_OVERRIDES_CONFIG,
    QUEUED_MAX_REQUEST_BYTES_CONFIG,
    SOCKET_REQUEST_MAX_BYTES_CONFIG,
)
from pykbroker.config.config_def import ConfigException
from pykbroker.config.endpoint import EndPoint, parse_listeners, parse_security_protocol_map
from pykbroker.config.kafka_config_def import BROKER_CONFIG_DEF, KNOWN_PREFIXES


class KafkaConfig:
    def __init__(self, props: dict[str, Any]):
        self.originals = dict(props)
        self.values = BROKER_CONFIG_DEF.parse(props)
        self.unknown_keys = [k for k in BROKER_CONFIG_DEF.unknown(props) if not k.startswith(KNOWN_PREFIXES)]
        self._validate()

    # -- access ---------------------------------------------------------------------------------
    def get(self, key: str) -> Any:
        return self.values[key]

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    # -- derived --------------------------------------------------------------------------------
    @cached_property
    def node_id(self) -> int:
        return self.values[NODE_ID_CONFIG]

    @cached_property
    def process_roles(self) -> list[str]:
        return self.values[PROCESS_ROLES_CONFIG] or []

    @cached_property
    def protocol_map(self) -> dict[str, str]:
        return parse_security_protocol_map(self.values[LISTENER_SECURITY_PROTOCOL_MAP_CONFIG])

    @cached_property
    def listeners(self) -> list[EndPoint]:
        return parse_listeners(self.values[LISTENERS_CONFIG], self.protocol_map)

    @cached_property
    def controller_listener_names(self) -> list[str]:
        return [n.upper() for n in (self.values[CONTROLLER_LISTENER_NAMES_CONFIG] or [])]

    @cached_property
    def control_plane_listener_name(self) -> str | None:
        """The control-plane listener: ``control.plane.listener.name`` or, in KRaft mode, the first
        controller listener that this process binds (docs/ARCHITECTURE.md §2)."""
        name = self.values[CONTROL_PLANE_LISTENER_NAME_CONFIG]
        if name:
            return name.upper()
        bound = {e.listener_name for e in self.listeners}
        for n in self.controller_listener_names:
            if n in bound:
                return n
        return None

    @cached_property
    def control_plane_listener(self) -> EndPoint | None:
        name = self.control_plane_listener_name
        return next((e for e in self.listeners if e.listener_name == name), None)

    @cached_property
    def data_plane_listeners(self) -> list[EndPoint]:
        cp = self.control_plane_listener_name
        return [e for e in self.listeners if e.listener_name != cp]

    @cached_property
    def advertised_listeners(self) -> list[EndPoint]:
        """Endpoints given to clients (``advertised.listeners``, else ``listeners`` minus controller
        listeners); a wildcard host is replaced when the broker knows its bound address."""
        adv = self.values[ADVERTISED_LISTENERS_CONFIG]
        if adv:
            return parse_listeners(adv, self.protocol_map, ADVERTISED_LISTENERS_CONFIG)
        return self.data_plane_listeners

    @cached_property
    def inter_broker_listener_name(self) -> str:
        return (
            self.values[INTER_BROKER_LISTENER_NAME_CONFIG] or self.values[SECURITY_INTER_BROKER_PROTOCOL_CONFIG]
        ).upper()

    @cached_property
    def log_dirs(self) -> list[str]:
        return self.values[LOG_DIRS_CONFIG] or [self.values[LOG_DIR_CONFIG]]

    @cached_property
    def metadata_log_dir(self) -> str:
        return self.values[METADATA_LOG_DIR_CONFIG] or self.log_dirs[0]

    @cached_property
    def log_retention_ms(self) -> int:
        v = self.values
        if v[LOG_RETENTION_MS_CONFIG] is not None:
            return v[LOG_RETENTION_MS_CONFIG]
        if v[LOG_RETENTION_MINUTES_CONFIG] is not None:
            return v[LOG_RETENTION_MINUTES_CONFIG] * 60_000
        return v[LOG_RETENTION_HOURS_CONFIG] * 3_600_000

    @cached_property
    def max_connections_per_ip_overrides(self) -> dict[str, int]:
        raw = self.values[MAX_CONNECTIONS_PER_IP_OVERRIDES_CONFIG]
        result: dict[str, int] = {}
        for item in (s.strip() for s in raw.split(",")):
            if not item:
                continue
            host, sep, count = item.rpartition(":")
            try:
                result[host] = int(count)
                if not sep or not host or result[host] < 0:
                    raise ValueError
            except ValueError:
                raise ConfigException(
                    MAX_CONNECTIONS_PER_IP_OVERRIDES_CONFIG, raw, f"entry '{item}' is not host:count"
                ) from None
        return result

    @cached_property
    def listener_connection_creation_rates(self) -> dict[str, int]:
        """Listener name -> its ``listener.name.<l>.max.connection.creation.rate`` (listeners that set one; the
        others follow ``max.connection.creation.rate``, as Kafka's ``valuesWithPrefixOverride``)."""
        result: dict[str, int] = {}
        for endpoint in self.listeners:
            name = f"listener.name.{endpoint.listener_name.lower()}.max.connection.creation.rate"
            raw = self.originals.get(name)
            if raw is None:
                continue
            try:
                result[endpoint.listener_name] = int(str(raw).strip())
                if result[endpoint.listener_name] < 0:
                    raise ValueError
            except ValueError:
                raise ConfigException(name, raw, "Value must be at least 0") from None
        return result

    # -- validation (mirrors KafkaConfig.validateValues) ---------------------------------------
    def _validate(self) -> None:
        v = self.values
        if v[NODE_ID_CONFIG] < 0 and v[BROKER_ID_CONFIG] >= 0:
            v[NODE_ID_CONFIG] = v[BROKER_ID_CONFIG]
        roles = self.process_roles
        if not roles:
            raise ConfigException(
                PROCESS_ROLES_CONFIG,
                v[PROCESS_ROLES_CONFIG],
                "process.roles must be set (KRaft mode: broker, controller or broker,controller)",
            )
        if len(set(roles)) != len(roles):
            raise ConfigException(PROCESS_ROLES_CONFIG, ",".join(roles), "Duplicate role names found")
        if v[NODE_ID_CONFIG] < 0:
            raise ConfigException(
                NODE_ID_CONFIG,
                v[NODE_ID_CONFIG],
                "Missing configuration `node.id` which is required when process.roles is set",
            )
        endpoints = self.listeners  # validates syntax and protocol map
        names = {e.listener_name for e in endpoints}
        if "controller" in roles:
            if not self.controller_listener_names:
                raise ConfigException(
                    CONTROLLER_LISTENER_NAMES_CONFIG,
                    None,
                    "controller.listener.names must contain at least one value when running KRaft with the "
                    "controller role",
                )
            missing = [n for n in self.controller_listener_names if n not in names]
            if missing:
                raise ConfigException(
                    CONTROLLER_LISTENER_NAMES_CONFIG,
                    ",".join(self.controller_listener_names),
                    f"The listeners.names in controller.listener.names must be in listeners: {missing}",
                )
        if "broker" in roles:
            if not self.data_plane_listeners:
                raise ConfigException(
                    LISTENERS_CONFIG,
                    ",".join(v[LISTENERS_CONFIG]),
                    "There must be at least one broker (non-controller) listener",
                )
            ibl = self.inter_broker_listener_name
            if ibl not in names and ibl != "PLAINTEXT" and ibl not in self.protocol_map:
                raise ConfigException(
                    INTER_BROKER_LISTENER_NAME_CONFIG, ibl, "must be a listener name defined in listeners"
                )
        cp = v[CONTROL_PLANE_LISTENER_NAME_CONFIG]
        if cp and cp.upper() not in names:
            raise ConfigException(
                CONTROL_PLANE_LISTENER_NAME_CONFIG, cp, "must be a listener name defined in listeners"
            )
        ports = [e.port for e in endpoints if e.port != 0]
        if len(ports) != len(set((e.host, e.port) for e in endpoints if e.port != 0)):
            raise ConfigException(
                LISTENERS_CONFIG, ",".join(v[LISTENERS_CONFIG]), "Each listener must have a different port"
            )
        self.max_connections_per_ip_overrides  # noqa: B018 - validates the syntax
        if v[LOG_DIRS_CONFIG] is not None and not v[LOG_DIRS_CONFIG]:
            raise ConfigException(LOG_DIRS_CONFIG, "", "At least one log directory must be defined")
        qmb = v[QUEUED_MAX_REQUEST_BYTES_CONFIG]
        if qmb > 0 and qmb < v[SOCKET_REQUEST_MAX_BYTES_CONFIG]:
            raise ConfigException(
                QUEUED_MAX_REQUEST_BYTES_CONFIG,
                qmb,
                "queued.max.request.bytes must be larger or equal to socket.request.max.bytes",
            )
        if v[MESSAGE_MAX_BYTES_CONFIG] < 0:
            raise ConfigException(MESSAGE_MAX_BYTES_CONFIG, v[MESSAGE_MAX_BYTES_CONFIG], "must be >= 0")
