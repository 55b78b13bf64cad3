"""IncrementalAlterConfigs of one BROKER resource over a raw connection, for the dynamic-config tests."""

from __future__ import annotations

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.config_resource import ConfigResourceType


def alter_broker_configs(
    bootstrap: str, name: str, *ops: tuple[str, int, str | None], conn: BrokerConnection | None = None
) -> tuple[int, str | None]:
    """``ops``: ``(key, operation, value)`` (operation 0 SET, 1 DELETE); ``name``: the broker id, or "" for the
    cluster default. Sent on ``conn`` if given, else on a new connection. Returns (error code, error message)."""
    if conn is None:
        with BrokerConnection.to(bootstrap, client_id="t") as new:
            return alter_broker_configs(bootstrap, name, *ops, conn=new)
    response = conn.request(
        ApiKeys.INCREMENTAL_ALTER_CONFIGS,
        1,
        {
            "resources": [
                {
                    "resource_type": ConfigResourceType.BROKER,
                    "resource_name": name,
                    "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops],
                }
            ],
            "validate_only": False,
        },
    )
    [r] = response["responses"]
    return r["error_code"], r["error_message"]
