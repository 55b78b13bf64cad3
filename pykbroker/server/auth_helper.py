"""Authorized operations reported in Metadata, DescribeCluster and DescribeGroups responses.

Mirrors ``kafka.server.AuthHelper.authorizedOperations`` and ``AclEntry.supportedOperations``: a
response carries a bit field with bit ``1 << op`` set for every ACL operation (Kafka's ``AclOperation``
codes) the principal may perform on the resource, or ``AUTHORIZED_OPERATIONS_OMITTED``
(-2147483648) when the request did not ask for it. With no authorizer configured every operation the
resource type supports is allowed; with the StandardAuthorizer, what the request's principal may do.
"""

from __future__ import annotations

from pykbroker.protocol.acl import AclOperation
from pykbroker.protocol.resource import ResourceType

_O = AclOperation
#: Operations each resource type supports (Kafka's ``AclEntry.supportedOperations``).
SUPPORTED_OPERATIONS: dict[str, frozenset[AclOperation]] = {
    "TOPIC": frozenset(
        {_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}
    ),
    "GROUP": frozenset({_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    "CLUSTER": frozenset(
        {
            _O.CREATE,
            _O.CLUSTER_ACTION,
            _O.DESCRIBE_CONFIGS,
            _O.ALTER_CONFIGS,
            _O.IDEMPOTENT_WRITE,
            _O.ALTER,
            _O.DESCRIBE,
        }
    ),
}
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


def to_bit_field(operations) -> int:
    """``{AclOperation}`` -> the int32 bit field of the protocol (bit ``1 << code`` per operation)."""
    bits = 0
    for op in operations:
        bits |= 1 << int(op)
    return bits


def authorized_operations(
    resource_type: str, requested: bool, helper=None, request=None, name: str = "kafka-cluster"
) -> int:
    """The bit field for a resource of ``resource_type`` ("TOPIC", "GROUP", "CLUSTER") named ``name``, or
    ``AUTHORIZED_OPERATIONS_OMITTED`` when the request did not ask for it (``requested`` False). With an
    authorizer (``helper.authorizer``) only the operations the request's principal may perform are set."""
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    operations = SUPPORTED_OPERATIONS[resource_type]
    if helper is not None and request is not None and helper.authorizer is not None:
        rtype = ResourceType[resource_type]
        operations = frozenset(op for op in operations if helper.authorize(request, op, rtype, name))
    return to_bit_field(operations)
