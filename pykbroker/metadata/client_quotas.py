"""Client quota entities and keys (KIP-546), and DescribeClientQuotas over the metadata image.

Mirrors Kafka's ``ClientQuotaEntity``, ``QuotaConfig`` (the quota keys and their types) and
``ClientQuotasImage.describe``.

* An **entity** is a mapping of entity type (``user``, ``client-id``, ``ip``) to a name, where a ``None`` name is
  that type's *default* entity. Here an entity is a :data:`QuotaEntity`: a tuple of ``(type, name)`` pairs
  sorted by type, so it can key a dict (``(("client-id", "c1"), ("user", None))`` = client ``c1`` of the
  default user).
* **Keys** of ``user``/``client-id`` entities: ``producer_byte_rate``, ``consumer_byte_rate`` (LONG, bytes/s),
  ``request_percentage``, ``controller_mutation_rate`` (DOUBLE); of ``ip`` entities: ``connection_creation_rate``
  (INT, connections/s). Values travel as float64.

:func:`describe_client_quotas` answers a DescribeClientQuotas request from ``MetadataImage.client_quotas``;
a bad filter raises :class:`~pykbroker.protocol.errors.InvalidRequestError` (INVALID_REQUEST) or, for an
unknown entity type, :class:`~pykbroker.protocol.errors.UnsupportedVersionError` (UNSUPPORTED_VERSION), as Kafka.
Pure functions: any thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pykbroker.protocol import errors

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
IP_CONNECTION_RATE = "connection_creation_rate"

#: QuotaConfig.userAndClientQuotaConfigs: key -> ConfigDef type
USER_CLIENT_KEYS = {
    PRODUCER_BYTE_RATE: "long",
    CONSUMER_BYTE_RATE: "long",
    REQUEST_PERCENTAGE: "double",
    CONTROLLER_MUTATION_RATE: "double",
}
#: QuotaConfig.ipConfigs
IP_KEYS = {IP_CONNECTION_RATE: "int"}

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

QuotaEntity = tuple[tuple[str, str | None], ...]


def entity_of(pairs: Iterable[Mapping[str, Any] | tuple[str, str | None]]) -> QuotaEntity:
    """``[{entity_type, entity_name}]`` (or ``(type, name)`` pairs) -> the sorted :data:`QuotaEntity`; a type named
    twice keeps its last name (callers that must refuse duplicates check first)."""
    d: dict[str, str | None] = {}
    for p in pairs:
        if isinstance(p, Mapping):
            d[p["entity_type"]] = p.get("entity_name")
        else:
            d[p[0]] = p[1]
    return tuple(sorted(d.items()))


def entity_data(entity: QuotaEntity) -> list[dict]:
    """The protocol's ``[{entity_type, entity_name}]`` of an entity."""
    return [{"entity_type": t, "entity_name": n} for t, n in entity]


def entity_str(entity: QuotaEntity) -> str:
    """Kafka's ``ClientQuotaEntity.toString``: ``ClientQuotaEntity(entries={user=alice, client-id=null})``."""
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={n if n is not None else 'null'}" for t, n in entity) + "})"


def _parse_filter(components: list[dict[str, Any]] | None) -> tuple[dict[str, str | None], set[str]]:
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for c in components or []:
        etype, match_type, match = c["entity_type"], c["match_type"], c.get("match")
        if not etype:
            raise errors.InvalidRequestError("Invalid empty entity type.")
        if etype in exact or etype in typed:
            raise errors.InvalidRequestError(f"Entity type {etype} cannot appear more than once in the filter.")
        if etype not in ENTITY_TYPES:
            raise errors.UnsupportedVersionError(f"Unsupported entity type {etype}")
        if match_type == MATCH_EXACT:
            if match is None:
                raise errors.InvalidRequestError("Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[etype] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise errors.InvalidRequestError(
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                )
            exact[etype] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise errors.InvalidRequestError(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                )
            typed.add(etype)
        else:
            raise errors.InvalidRequestError(f"Unknown match type {match_type}")
    if (IP in exact or IP in typed) and (USER in exact or USER in typed or CLIENT_ID in exact or CLIENT_ID in typed):
        raise errors.InvalidRequestError(
            "Invalid entity filter component combination. IP filter component should not be used with "
            "user or clientId filter component."
        )
    return exact, typed


def describe_client_quotas(quotas: Mapping[QuotaEntity, Mapping[str, float]], request: dict) -> dict:
    """DescribeClientQuotas ``{components: [{entity_type, match_type, match}], strict}`` -> the response body
    ``{throttle_time_ms, error_code, error_message, entries: [{entity, values: [{key, value}]}]}``.

    A component matches an exact name (0), the default entity (1) or any entity of that type (2, the default
    included, as Kafka's ``ClientQuotasImage``); ``strict`` keeps only entities with no other types. Raises
    InvalidRequestError / UnsupportedVersionError for a bad filter."""
    exact, typed = _parse_filter(request.get("components"))
    wanted = len(exact) + len(typed)
    entries = []
    for entity, values in sorted(quotas.items(), key=lambda kv: [(t, n or "") for t, n in kv[0]]):
        names = dict(entity)
        if request.get("strict") and len(names) != wanted:
            continue
        if any(t not in names or names[t] != n for t, n in exact.items()):
            continue
        if any(t not in names for t in typed):
            continue
        entries.append(
            {
                "entity": entity_data(entity),
                "values": [{"key": k, "value": float(v)} for k, v in sorted(values.items())],
            }
        )
    return {"throttle_time_ms": 0, "error_code": errors.NONE, "error_message": None, "entries": entries}
