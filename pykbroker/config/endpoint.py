"""Listener endpoints: ``NAME://host:port`` parsing, as Kafka's ``EndPoint`` / ``Endpoint``.

An empty host means all interfaces (bind ``0.0.0.0``); port 0 means an ephemeral port chosen at bind.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pykbroker.config.broker_configs.socket_server_configs import (
    LISTENER_SECURITY_PROTOCOL_MAP_CONFIG,
    LISTENERS_CONFIG,
)
from pykbroker.config.config_def import ConfigException

_URI = re.compile(r"^([a-zA-Z_][a-zA-Z0-9_]*)://\[?([0-9a-zA-Z\-%._:]*?)\]?:(-?[0-9]+)$")


@dataclass(frozen=True)
class EndPoint:
    """One listener: ``listener_name`` (e.g. PLAINTEXT), ``security_protocol``, ``host`` ('' = any), ``port``."""

    listener_name: str
    security_protocol: str
    host: str
    port: int


def parse_security_protocol_map(value: str, key: str = LISTENER_SECURITY_PROTOCOL_MAP_CONFIG) -> dict[str, str]:
    """``"PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"`` -> ``{listener: protocol}``."""
    result: dict[str, str] = {}
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        name, sep, proto = item.partition(":")
        if not sep or not name or proto.upper() not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ConfigException(key, value, f"map entry '{item}' is not LISTENER:SECURITY_PROTOCOL")
        result[name.strip().upper()] = proto.strip().upper()
    return result


def parse_listeners(items: list[str], protocol_map: dict[str, str], key: str = LISTENERS_CONFIG) -> list[EndPoint]:
    """Parse listener URIs; names must be unique and mapped to a security protocol (else ConfigException)."""
    endpoints: list[EndPoint] = []
    seen: set[str] = set()
    for item in items:
        m = _URI.match(item.strip())
        if not m:
            raise ConfigException(key, ",".join(items), f"Unable to parse {item} to a broker endpoint")
        name, host, port = m.group(1).upper(), m.group(2), int(m.group(3))
        if not 0 <= port <= 65535:
            raise ConfigException(key, ",".join(items), f"port {port} is out of range")
        if name not in protocol_map:
            raise ConfigException(key, ",".join(items), f"No security protocol defined for listener {name}")
        if name in seen:
            raise ConfigException(key, ",".join(items), f"Each listener must have a different name, {name} is repeated")
        seen.add(name)
        endpoints.append(EndPoint(name, protocol_map[name], host, port))
    return endpoints
