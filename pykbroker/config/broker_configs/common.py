"""Values and validators shared by the broker's per-area ConfigDefs (:mod:`pykbroker.config.broker_configs`)."""

from __future__ import annotations

from pykbroker.config.config_def import ConfigException

H, M, L = "high", "medium", "low"
INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


def host_port(key: str, value: str | None) -> None:
    """Validator of a ``host:port`` value (an empty host: every interface; port 0: ephemeral); ConfigException
    otherwise."""
    _host, sep, port = (value or "").rpartition(":")
    if value is not None and (not sep or not port.isdigit() or int(port) > 65535):
        raise ConfigException(key, value, "Expected host:port (an empty host: every interface; port 0: ephemeral)")


host_port.__doc__ = "host:port"
