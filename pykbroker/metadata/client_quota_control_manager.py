"""ClientQuotaControlManager: client quotas in the metadata log (Kafka's ``ClientQuotaControlManager``, KIP-546).

AlterClientQuotas carries entries ``{entity: [{entity_type, entity_name}], ops: [{key, value, remove}]}``; each
valid entity's changed keys become ``ClientQuotaRecord`` s (``remove`` true to delete a key; setting a key to
its current value writes nothing). Per-entity errors, all INVALID_REQUEST with Kafka's messages:

* an empty entity, a type other than ``user``/``client-id``/``ip``, a type twice, an empty (non-null) name;
* ``ip`` combined with ``user`` or ``client-id``; an ``ip`` name that is not an IP address or resolvable host;
* a key not valid for the entity (``connection_creation_rate`` only for ``ip``, the four others only for
  ``user``/``client-id``), a value <= 0, a fractional or too large value for a LONG/INT key;
* a key twice in one entry; an entity twice in one request ("Ignoring duplicate entity ...").

Not thread-safe: used on the controller's event thread.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

from pykbroker.metadata.client_quotas import (
    CLIENT_ID,
    ENTITY_TYPES,
    IP,
    IP_KEYS,
    USER,
    USER_CLIENT_KEYS,
    QuotaEntity,
    entity_data,
    entity_of,
    entity_str,
)
from pykbroker.metadata.controller_result import ControllerResult
from pykbroker.metadata.records import CLIENT_QUOTA_RECORD, ApiMessageAndVersion, client_quota_record
from pykbroker.protocol import errors

_LIMITS = {"int": (2**31 - 1, "an INT"), "long": (2**63 - 1, "a LONG")}


def valid_ip_entity(name: str | None) -> bool:
    """Kafka's ``isValidIpEntity`` (``InetAddress.getByName``): an address literal or a resolvable host."""
    if name is None:
        return True
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(name, None)
        return True
    except (OSError, UnicodeError):
        return False


def validate_entity(pairs: list[dict]) -> tuple[QuotaEntity | None, str | None, dict[str, str]]:
    """-> (entity, None, valid keys {key: type}) or (None, error message, {}) (Kafka's ``validateEntity`` and
    ``configKeysForEntityType``)."""
    if not pairs:
        return None, "Invalid empty client quota entity", {}
    seen: dict[str, str | None] = {}
    for p in pairs:
        etype, name = p["entity_type"], p.get("entity_name")
        if etype in seen:
            return None, f"Invalid client quota entity, duplicate entity entry {etype}", {}
        if etype not in ENTITY_TYPES:
            return None, f"Unhandled client quota entity type: {etype}", {}
        seen[etype] = name
        if name is not None and name == "":
            return None, f"Empty {etype} not supported", {}
    entity = entity_of(seen.items())
    if IP in seen:
        if USER in seen or CLIENT_ID in seen:
            return None, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId", {}
        if not valid_ip_entity(seen[IP]):
            return None, f"{seen[IP]} is not a valid IP or resolvable host.", {}
        return entity, None, IP_KEYS
    return entity, None, USER_CLIENT_KEYS


def validate_value(keys: dict[str, str], key: str, value: float) -> str | None:
    """Kafka's ``validateQuotaKeyValue``: the error message, or None."""
    ktype = keys.get(key)
    if ktype is None:
        return f"Invalid configuration key {key}"
    if value <= 0.0:
        return f"Quota {key} must be greater than 0"
    if ktype in _LIMITS:
        limit, name = _LIMITS[ktype]
        if value > limit:
            return f"Proposed value for {key} is too large for {name}."
        if abs(value % 1.0) > 1e-6:
            return f"{key} cannot be a fractional value."
    return None


class ClientQuotaControlManager:
    def __init__(self) -> None:
        #: entity -> {key: value}
        self.quotas: dict[QuotaEntity, dict[str, float]] = {}

    def replay(self, record: ApiMessageAndVersion) -> None:
        if record.name != CLIENT_QUOTA_RECORD:
            return
        d = record.data
        entity = entity_of(d["entity"])
        if d["remove"]:
            values = self.quotas.get(entity)
            if values is not None:
                values.pop(d["key"], None)
                if not values:
                    del self.quotas[entity]
        else:
            self.quotas.setdefault(entity, {})[d["key"]] = d["value"]

    def alter_client_quotas(self, request: dict[str, Any]) -> ControllerResult[dict]:
        """AlterClientQuotas ``{entries, validate_only}`` -> ``{throttle_time_ms, entries: [{error_code,
        error_message, entity}]}``; records only for the valid entities, none with ``validate_only``."""
        records: list[ApiMessageAndVersion] = []
        results: dict[QuotaEntity, tuple[list[dict], int, str | None]] = {}
        for entry in request.get("entries") or []:
            pairs = entry.get("entity") or []
            key_entity = entity_of(pairs)
            ops: dict[str, float | None] = {}
            error: str | None = None
            for op in entry.get("ops") or []:
                if op["key"] in ops:
                    error = (
                        f"Duplicate quota key {op['key']} not updating quota for this entity {entity_str(key_entity)}"
                    )
                else:
                    ops[op["key"]] = None if op["remove"] else op["value"]
            if key_entity in results:
                results[key_entity] = (
                    entity_data(key_entity),
                    errors.INVALID_REQUEST,
                    f"Ignoring duplicate entity {entity_str(key_entity)}",
                )
                continue
            if error is None:
                error = self._alter_entity(pairs, ops, records)
            code = errors.NONE if error is None else errors.INVALID_REQUEST
            results[key_entity] = (pairs, code, error)
        if request.get("validate_only"):
            records = []
        response = {
            "throttle_time_ms": 0,
            "entries": [
                {"error_code": code, "error_message": message, "entity": [dict(p) for p in pairs]}
                for pairs, code, message in results.values()
            ],
        }
        return ControllerResult(records, response)

    def _alter_entity(
        self, pairs: list[dict], ops: dict[str, float | None], out: list[ApiMessageAndVersion]
    ) -> str | None:
        entity, error, keys = validate_entity(pairs)
        if entity is None:
            return error
        current = self.quotas.get(entity, {})
        new: list[ApiMessageAndVersion] = []
        for key, value in ops.items():
            if value is None:
                if key in current:
                    new.append(client_quota_record(entity, key, None))
                continue
            error = validate_value(keys, key, value)
            if error is not None:
                return error
            if current.get(key) != value:
                new.append(client_quota_record(entity, key, value))
        out.extend(new)
        return None
