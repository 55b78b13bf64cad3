"""ACL operations and permission types: Kafka's ``org.apache.kafka.common.acl.AclOperation`` and
``AclPermissionType``, with Kafka's codes (the ``operation`` / ``permission_type`` fields of CreateAcls,
DescribeAcls, DeleteAcls and of ``AccessControlEntryRecord``) and names.

The one definition of these codes in pykbroker: the authorizer, the request handlers, the controller's ACL
manager and kafka-acls all import them from here. ``AclOperation`` is also the bit position in the
``*_authorized_operations`` bit fields of Metadata, DescribeCluster and DescribeGroups responses.
"""

from __future__ import annotations

from enum import IntEnum


class AclOperation(IntEnum):
    """Kafka's ``AclOperation`` codes (``AclOperation.READ == 3``). UNKNOWN and ANY are filter values only."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    """Kafka's ``AclPermissionType`` codes. UNKNOWN and ANY are filter values only."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3
