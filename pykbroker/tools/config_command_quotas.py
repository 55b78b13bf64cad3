"""kafka-configs for client quotas (KIP-546): ``--entity-type users|clients|ips`` (Kafka's ``ConfigCommand``
``describeQuotaConfigs`` / ``alterQuotaConfigs``).

Entities are lists of (entity type, name) where the name ``""`` stands for ``--entity-default`` (the default
entity, null on the wire) and None for "any entity of that type" (describe without a name). Describe sends
DescribeClientQuotas v1 with ``strict`` (Kafka's ``ClientQuotaFilter.containsOnly``) and prints, per entity,
``Quota configs for user-principal 'alice', the default client-id are producer_byte_rate=1048576.0`` (values as
Java prints a double). Alter reads the current values first (a deleted key must exist: "Invalid config(s): k"),
then sends one AlterClientQuotas v1 entry; the broker forwards it to the controller.
"""

from __future__ import annotations

from decimal import Decimal

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys

#: kafka-configs entity type -> ClientQuotaEntity type
QUOTA_ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
_TYPE_LABELS = (("user", "user-principal"), ("client-id", "client-id"), ("ip", "ip"))
USER_CLIENT_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
IP_KEYS = ("connection_creation_rate",)


class QuotaCommandError(Exception):
    pass


def java_double(value: float) -> str:
    """``Double.toString``: ``1048576.0``, ``0.5``, ``1.0E7``, ``1.5E-4``."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(float(value))
        if "e" in text or "E" in text:
            text = format(Decimal(text), "f")
        return text if "." in text else text + ".0"
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    assert isinstance(exponent, int)
    ds = "".join(map(str, digits))
    exp10 = exponent + len(ds) - 1
    mantissa = ds[0] + "." + (ds[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{exp10}"


def _components(entities: list[tuple[str, str | None]]) -> list[dict]:
    out = []
    for etype, name in entities:
        if name is None:
            out.append({"entity_type": etype, "match_type": 2, "match": None})
        elif name == "":
            out.append({"entity_type": etype, "match_type": 1, "match": None})
        else:
            out.append({"entity_type": etype, "match_type": 0, "match": name})
    return out


def describe_entities(conn: BrokerConnection, entities: list[tuple[str, str | None]]) -> list[dict]:
    """DescribeClientQuotas (strict) -> the response's entries; an error raises its KafkaError."""
    r = conn.request(ApiKeys.DESCRIBE_CLIENT_QUOTAS, 1, {"components": _components(entities), "strict": True})
    if r["error_code"] != errors.NONE:
        raise errors.for_code(r["error_code"])(r.get("error_message") or "")
    return r["entries"] or []


def describe_quotas(conn: BrokerConnection, entities: list[tuple[str, str | None]], out) -> None:
    for entry in describe_entities(conn, entities):
        names = {e["entity_type"]: e["entity_name"] for e in entry["entity"]}
        parts = [
            f"{label} '{names[t]}'" if names[t] is not None else f"the default {label}"
            for t, label in _TYPE_LABELS
            if t in names
        ]
        values = ", ".join(f"{v['key']}={java_double(v['value'])}" for v in entry["values"])
        print(f"Quota configs for {', '.join(parts)} are {values}", file=out)


def alter_quotas(
    conn: BrokerConnection, entities: list[tuple[str, str | None]], add: dict[str, str], delete: list[str]
) -> None:
    """One AlterClientQuotas entry for the entity; per-entity errors raise their KafkaError."""
    if any(name is None for _, name in entities):
        raise QuotaCommandError("Exactly one entity name must be specified for every entity type")
    current = describe_entities(conn, entities)
    old = {v["key"] for v in current[0]["values"]} if current else set()
    invalid = [k for k in delete if k not in old]
    if invalid:
        raise QuotaCommandError(f"Invalid config(s): {','.join(invalid)}")
    ops = []
    for key, value in add.items():
        try:
            number = float(value)
        except ValueError:
            raise QuotaCommandError(f"Cannot parse quota configuration value for {key}: {value}") from None
        ops.append({"key": key, "value": number, "remove": False})
    ops += [{"key": k, "value": 0.0, "remove": True} for k in delete]
    entity = [{"entity_type": t, "entity_name": n or None} for t, n in entities]
    r = conn.request(
        ApiKeys.ALTER_CLIENT_QUOTAS, 1, {"entries": [{"entity": entity, "ops": ops}], "validate_only": False}
    )
    for e in r["entries"]:
        if e["error_code"] != errors.NONE:
            raise errors.for_code(e["error_code"])(
                e.get("error_message") or errors.for_code(e["error_code"]).default_message
            )
