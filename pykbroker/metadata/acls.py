"""ACL bindings and filters (Kafka's ``AclBinding`` / ``AclBindingFilter`` / ``ResourcePattern`` and the
controller's ``AclControlManager``).

A binding is ``(resource type, resource name, pattern type, principal, host, operation, permission type)``
with Kafka's codes: :class:`~pykbroker.protocol.resource.ResourceType`,
:class:`~pykbroker.protocol.resource.PatternType`, :class:`~pykbroker.protocol.acl.AclOperation`,
:class:`~pykbroker.protocol.acl.AclPermissionType`. Pure functions.
"""

from __future__ import annotations

import uuid
from typing import Any

from pykbroker.metadata.controller_result import ControllerResult
from pykbroker.metadata.records import (
    ACCESS_CONTROL_ENTRY_RECORD,
    REMOVE_ACCESS_CONTROL_ENTRY_RECORD,
    ApiMessageAndVersion,
    access_control_entry_record,
    remove_access_control_entry_record,
)
from pykbroker.protocol import errors
from pykbroker.protocol.acl import AclOperation, AclPermissionType
from pykbroker.protocol.resource import CLUSTER_NAME, PatternType, ResourceType

WILDCARD = "*"
# The codes a binding (not a filter) may carry: Kafka's AclControlManager.validateNewAcl refuses UNKNOWN and ANY.
_BINDING_RESOURCE_TYPES = frozenset(ResourceType) - {ResourceType.UNKNOWN, ResourceType.ANY}
_BINDING_OPERATIONS = frozenset(AclOperation) - {AclOperation.UNKNOWN, AclOperation.ANY}
_BINDING_PERMISSIONS = frozenset({AclPermissionType.ALLOW, AclPermissionType.DENY})


def validate_binding(binding: tuple) -> str | None:
    """Kafka's AclControlManager.validateNewAcl: the problem (INVALID_REQUEST message) or None."""
    rtype, name, pattern, principal, host, operation, permission = binding
    if rtype not in _BINDING_RESOURCE_TYPES:
        return "Invalid resourceType " + str(rtype)
    if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "Invalid patternType " + str(pattern)
    if operation not in _BINDING_OPERATIONS:
        return "Invalid operation " + str(operation)
    if permission not in _BINDING_PERMISSIONS:
        return "Invalid permissionType " + str(permission)
    if not name:
        return "Resource name should not be empty"
    if rtype == ResourceType.CLUSTER and name != CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is " + CLUSTER_NAME
    if not principal or ":" not in principal:
        return f"Could not parse principal from `{principal}` (no colon is present separating the principal type)"
    if host is None:
        return "Invalid null host"
    return None


def filter_of(d: dict) -> tuple:
    """A DescribeAcls / DeleteAcls filter as a tuple like a binding (None = match anything)."""
    return (
        d["resource_type_filter"],
        d.get("resource_name_filter"),
        d.get("pattern_type_filter", PatternType.LITERAL),
        d.get("principal_filter"),
        d.get("host_filter"),
        d["operation"],
        d["permission_type"],
    )


def validate_filter(f: tuple) -> str | None:
    rtype, _, pattern, _, _, operation, permission = f
    if (
        rtype == ResourceType.UNKNOWN
        or pattern == PatternType.UNKNOWN
        or operation == AclOperation.UNKNOWN
        or permission == AclPermissionType.UNKNOWN
    ):
        return "Filter contain UNKNOWN elements"
    return None


def matches(f: tuple, binding: tuple) -> bool:
    """Kafka's AclBindingFilter.matches."""
    frtype, fname, fpattern, fprincipal, fhost, foperation, fpermission = f
    rtype, name, pattern, principal, host, operation, permission = binding
    if frtype != ResourceType.ANY and frtype != rtype:
        return False
    if fpattern == PatternType.MATCH:
        if fname is not None:
            if pattern == PatternType.LITERAL and name not in (fname, WILDCARD):
                return False
            if pattern == PatternType.PREFIXED and not fname.startswith(name):
                return False
    else:
        if fpattern != PatternType.ANY and fpattern != pattern:
            return False
        if fname is not None and fname != name:
            return False
    if fprincipal is not None and fprincipal != principal:
        return False
    if fhost is not None and fhost != host:
        return False
    if foperation != AclOperation.ANY and foperation != operation:
        return False
    return fpermission in (AclPermissionType.ANY, permission)


class AclControlManager:
    """The controller's ACLs (id -> binding). Written by the controller's event thread only; ``acls`` is
    replaced (copy on write), never changed in place, so another thread (the controller's authorizer) may
    read the current dict at any time."""

    def __init__(self) -> None:
        self.acls: dict[Any, tuple] = {}

    def replay(self, record: ApiMessageAndVersion) -> None:
        d = record.data
        if record.name == ACCESS_CONTROL_ENTRY_RECORD:
            self.acls = {
                **self.acls,
                d["id"]: (
                    d["resource_type"],
                    d["resource_name"],
                    d["pattern_type"],
                    d["principal"],
                    d["host"],
                    d["operation"],
                    d["permission_type"],
                ),
            }
        elif record.name == REMOVE_ACCESS_CONTROL_ENTRY_RECORD and d["id"] in self.acls:
            self.acls = {k: v for k, v in self.acls.items() if k != d["id"]}

    def create_acls(self, request: dict) -> ControllerResult[dict]:
        existing = set(self.acls.values())
        records, results = [], []
        for c in request["creations"]:
            binding = (
                c["resource_type"],
                c["resource_name"],
                c.get("resource_pattern_type", PatternType.LITERAL),
                c["principal"],
                c["host"],
                c["operation"],
                c["permission_type"],
            )
            problem = validate_binding(binding)
            if problem is not None:
                results.append({"error_code": errors.INVALID_REQUEST, "error_message": problem})
                continue
            if binding not in existing:
                existing.add(binding)
                records.append(access_control_entry_record(uuid.uuid4(), binding))
            results.append({"error_code": errors.NONE, "error_message": None})
        return ControllerResult(records, {"throttle_time_ms": 0, "results": results}, atomic=False)

    def delete_acls(self, request: dict) -> ControllerResult[dict]:
        records, results = [], []
        deleted: set = set()
        for d in request["filters"]:
            f = filter_of(d)
            problem = validate_filter(f)
            if problem is not None:
                results.append({"error_code": errors.INVALID_REQUEST, "error_message": problem, "matching_acls": []})
                continue
            matching = []
            for acl_id, binding in self.acls.items():
                if acl_id in deleted or not matches(f, binding):
                    continue
                deleted.add(acl_id)
                records.append(remove_access_control_entry_record(acl_id))
                rtype, name, pattern, principal, host, operation, permission = binding
                matching.append(
                    {
                        "error_code": errors.NONE,
                        "error_message": None,
                        "resource_type": rtype,
                        "resource_name": name,
                        "pattern_type": pattern,
                        "principal": principal,
                        "host": host,
                        "operation": operation,
                        "permission_type": permission,
                    }
                )
            results.append({"error_code": errors.NONE, "error_message": None, "matching_acls": matching})
        return ControllerResult(records, {"throttle_time_ms": 0, "filter_results": results}, atomic=False)


def describe_acls(acls: dict, d: dict) -> dict:
    """The DescribeAcls response body over the image's ACLs."""
    f = filter_of(d)
    problem = validate_filter(f)
    if problem is not None:
        return {"throttle_time_ms": 0, "error_code": errors.INVALID_REQUEST, "error_message": problem, "resources": []}
    by_resource: dict[tuple, list[dict]] = {}
    for binding in acls.values():
        if not matches(f, binding):
            continue
        rtype, name, pattern, principal, host, operation, permission = binding
        by_resource.setdefault((rtype, name, pattern), []).append(
            {"principal": principal, "host": host, "operation": operation, "permission_type": permission}
        )
    return {
        "throttle_time_ms": 0,
        "error_code": errors.NONE,
        "error_message": None,
        "resources": [
            {
                "resource_type": r,
                "resource_name": n,
                "pattern_type": p,
                "acls": sorted(a, key=lambda x: tuple(x.values())),
            }
            for (r, n, p), a in sorted(by_resource.items())
        ],
    }
