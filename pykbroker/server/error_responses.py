"""Error responses built from a request: every topic/partition/group gets the same error code.

Mirrors each ``AbstractRequest.getErrorResponse``. ``build_error_response(api_key, version, body,
error_code, message)`` returns the response body, or None where the protocol has no way to carry an
error (the connection is then closed, as Kafka does for acks=0 produce).

Handlers register builders for their APIs with :func:`register` (JoinGroup's in ``handlers/groups.py``,
beside the conversion of the coordinator's result it shares); the other group APIs and DeleteRecords have
theirs below. An API with no registered builder gets :func:`schema_error_response`, built from its
response schema, so no API ever answers an unexpected exception by closing the connection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.schema import Field
from pykbroker.protocol.schemas import RESPONSES

_BUILDERS: dict[int, Callable[[int, dict, int, str | None], dict | None]] = {}

# Kafka's sentinels for "no value" in error responses.
INVALID_OFFSET = -1  # OffsetFetchResponse.INVALID_OFFSET, DeleteRecordsResponse.INVALID_LOW_WATERMARK
NO_METADATA = ""  # OffsetFetchResponse.NO_METADATA
UNKNOWN_MEMBER_ID = ""  # JoinGroupRequest.UNKNOWN_MEMBER_ID
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


def register(*api_keys: int):
    """Register the decorated ``fn(version, body, code, message) -> dict`` as the error-response builder of each
    of ``api_keys`` (requests whose error responses have the same shape share one builder)."""

    def deco(fn):
        for api_key in api_keys:
            _BUILDERS[int(api_key)] = fn
        return fn

    return deco


def build_error_response(
    api_key: int, version: int, body: dict | None, error_code: int, message: str | None = None
) -> dict | None:
    if body is None:
        return None
    builder = _BUILDERS.get(int(api_key))
    if builder is None:
        if int(api_key) not in RESPONSES:
            return None
        return schema_error_response(api_key, version, body, error_code, message)
    return builder(version, body, error_code, message)


# ------------------------------------------------------------------------------------------ generic builder


def schema_error_response(
    api_key: int,
    version: int,
    body: dict,
    error_code: int,
    message: str | None = None,
    overrides: dict[str, Any] | None = None,
) -> dict:
    """The response of ``api_key`` at ``version`` with every ``error_code`` set, built from its schema.

    The generated ``getErrorResponse`` shape: ``error_code`` fields (top level and in every entry) carry
    ``error_code``, ``error_message`` fields ``message``, ``throttle_time_ms`` 0; an array of structs
    whose name the request has at the same place is mirrored entry by entry, each entry copying the
    request's same-named scalar fields (its keys: ``name``, ``partition_index``, ``group_id``...); every
    other field takes its schema default, or ``overrides[name]`` (any depth). A copied null that the
    response cannot carry at this version becomes the field's default (Kafka answers ``""``)."""
    schema = RESPONSES[int(api_key)]
    return _fill(schema.fields, version, body, error_code, message, overrides or {}, top=True)


def _fill(
    fields: tuple[Field, ...],
    version: int,
    request: dict | None,
    code: int,
    message: str | None,
    overrides: dict[str, Any],
    top: bool,
) -> dict:
    out: dict[str, Any] = {}
    for f in fields:
        if version not in f.versions:
            continue
        if f.name == "error_code":
            out[f.name] = code
        elif f.name == "error_message":
            out[f.name] = message
        elif f.name == "throttle_time_ms":
            out[f.name] = 0
        elif f.name in overrides:
            out[f.name] = overrides[f.name]
        elif f.type == "array" and f.element == "struct":
            entries = request.get(f.name) if request is not None else None
            out[f.name] = (
                [_fill(f.fields, version, e, code, message, overrides, top=False) for e in entries]
                if isinstance(entries, list) and all(isinstance(e, dict) for e in entries)
                else []
            )
        elif f.type == "struct":
            out[f.name] = _fill(f.fields, version, None, code, message, overrides, top=False)
        elif not top and request is not None and f.name in request and not isinstance(request[f.name], (list, dict)):
            value = request[f.name]
            out[f.name] = f.default_value() if value is None and version not in f.nullable_versions else value
        else:
            out[f.name] = f.default_value()
    return out


def register_schema_built(api_key: int, **overrides) -> None:
    """Register :func:`schema_error_response` (with ``overrides``) as ``api_key``'s builder."""
    register(api_key)(
        lambda version, body, code, message: schema_error_response(api_key, version, body, code, message, overrides)
    )


# ------------------------------------------------------------------------------------------ group APIs, DeleteRecords


def _no_node(code: int, message: str | None) -> dict:
    """FindCoordinatorResponse with ``Node.noNode()``."""
    return {"error_code": code, "error_message": message, "node_id": -1, "host": "", "port": -1}


@register(ApiKeys.FIND_COORDINATOR)
def _find_coordinator_error(version, body, code, message):
    """``FindCoordinatorRequest.getErrorResponse``: v4+ one coordinator per requested key."""
    if version >= 4:
        return {
            "throttle_time_ms": 0,
            "coordinators": [dict(_no_node(code, message), key=k) for k in body["coordinator_keys"]],
        }
    return dict(_no_node(code, message), throttle_time_ms=0)


@register(ApiKeys.LEAVE_GROUP)
def _leave_group_error(version, body, code, message):
    """``LeaveGroupRequest.getErrorResponse``: the top-level error only, no member results."""
    return {"throttle_time_ms": 0, "error_code": code, "members": []}


@register(ApiKeys.OFFSET_FETCH)
def _offset_fetch_error(version, body, code, message):
    """``OffsetFetchRequest.getErrorResponse``: v8+ the error on every requested group (no topics);
    v2-7 the top-level error; v0-1 (no top-level error code) the error on every requested partition."""
    if version >= 8:
        return {
            "throttle_time_ms": 0,
            "groups": [{"group_id": g["group_id"], "topics": [], "error_code": code} for g in body["groups"]],
        }
    topics = []
    if version < 2:
        topics = [
            {
                "name": t["name"],
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": INVALID_OFFSET,
                        "committed_leader_epoch": -1,
                        "metadata": NO_METADATA,
                        "error_code": code,
                    }
                    for p in t["partition_indexes"]
                ],
            }
            for t in body["topics"] or []
        ]
    return {"throttle_time_ms": 0, "topics": topics, "error_code": code}


@register(ApiKeys.OFFSET_DELETE)
def _offset_delete_error(version, body, code, message):
    """``OffsetDeleteRequest.getErrorResponse``: the top-level error only."""
    return {"error_code": code, "throttle_time_ms": 0, "topics": []}


@register(ApiKeys.DESCRIBE_GROUPS)
def _describe_groups_error(version, body, code, message):
    """``DescribeGroupsResponse.fromError``: every requested group with the error and no state."""
    return {
        "throttle_time_ms": 0,
        "groups": [
            {
                "error_code": code,
                "group_id": g,
                "group_state": "",
                "protocol_type": "",
                "protocol_data": "",
                "members": [],
                "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
            }
            for g in body["groups"]
        ],
    }


@register(ApiKeys.CONSUMER_GROUP_HEARTBEAT, ApiKeys.SHARE_GROUP_HEARTBEAT)
def _group_heartbeat_error(version, body, code, message):
    """``ConsumerGroupHeartbeatRequest`` / ``ShareGroupHeartbeatRequest.getErrorResponse``: the error code and its
    message only (no member, epoch 0, no assignment)."""
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "error_message": message,
        "member_id": None,
        "member_epoch": 0,
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }


@register(ApiKeys.CONSUMER_GROUP_DESCRIBE, ApiKeys.SHARE_GROUP_DESCRIBE)
def _group_describe_error(version, body, code, message):
    """``ConsumerGroupDescribeRequest`` / ``ShareGroupDescribeRequest.getErrorResponse``: every requested group with
    the error."""
    return {
        "throttle_time_ms": 0,
        "groups": [
            {"error_code": code, "error_message": None, "group_id": g, "group_state": "", "members": []}
            for g in body["group_ids"]
        ],
    }


@register(ApiKeys.DESCRIBE_SHARE_GROUP_OFFSETS)
def _describe_share_group_offsets_error(version, body, code, message):
    """``DescribeShareGroupOffsetsRequest.getErrorResponse``: every requested group with the error, no topics."""
    return {
        "throttle_time_ms": 0,
        "groups": [
            {"group_id": g["group_id"], "topics": [], "error_code": code, "error_message": None} for g in body["groups"]
        ],
    }


@register(ApiKeys.ALTER_SHARE_GROUP_OFFSETS)
@register(ApiKeys.DELETE_SHARE_GROUP_OFFSETS)
def _share_group_offsets_change_error(version, body, code, message):
    """``Alter/DeleteShareGroupOffsetsRequest.getErrorResponse``: the top-level error, no topics."""
    return {"throttle_time_ms": 0, "error_code": code, "error_message": None, "responses": []}


@register(ApiKeys.DELETE_GROUPS)
def _delete_groups_error(version, body, code, message):
    """``DeleteGroupsRequest.getErrorResponse``: the error for every requested group."""
    return {"throttle_time_ms": 0, "results": [{"group_id": g, "error_code": code} for g in body["groups_names"]]}


@register(ApiKeys.DESCRIBE_LOG_DIRS)
def _describe_log_dirs_error(version, body, code, message):
    """``DescribeLogDirsRequest.getErrorResponse``: the top-level error (v3+) and no results, so before
    v3 the error is not on the wire at all (as in Kafka)."""
    return {"throttle_time_ms": 0, "error_code": code, "results": []}


# Where the schema-built response is Kafka's: SyncGroup (no assignment, protocol null), Heartbeat,
# ListGroups (no groups), OffsetCommit (the error on every requested partition), DeleteRecords (the
# error and INVALID_LOW_WATERMARK on every requested partition).
register_schema_built(ApiKeys.SYNC_GROUP)
register_schema_built(ApiKeys.HEARTBEAT)
register_schema_built(ApiKeys.LIST_GROUPS)
register_schema_built(ApiKeys.OFFSET_COMMIT)
register_schema_built(ApiKeys.DELETE_RECORDS, low_watermark=INVALID_OFFSET)


@register(ApiKeys.UPDATE_FEATURES)
def _update_features_error(version, body, code, message):
    """``UpdateFeaturesResponse.createWithErrors``: the top-level error, no per-feature results."""
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "results": []}
