"""ACL resource types and pattern types: Kafka's ``org.apache.kafka.common.resource.ResourceType`` and
``PatternType``, with Kafka's codes (the ``resource_type`` / ``pattern_type`` fields of the ACL APIs and
of ``AccessControlEntryRecord``) and names, and ``Resource.CLUSTER_NAME``.

The one definition of these codes in pykbroker. They are not the config resource types of
DescribeConfigs/AlterConfigs (GROUP is 3 here and 32 there): those are
:class:`pykbroker.protocol.config_resource.ConfigResourceType`.
"""

from __future__ import annotations

from enum import IntEnum

#: The name of the one CLUSTER resource (Kafka's ``Resource.CLUSTER_NAME``).
CLUSTER_NAME = "kafka-cluster"


class ResourceType(IntEnum):
    """Kafka's ACL ``ResourceType`` codes (``ResourceType.TOPIC == 2``). UNKNOWN and ANY are filter values only."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    """Kafka's ``PatternType`` codes: how an ACL's resource name matches. A binding is LITERAL (the name, or
    ``*`` for every name) or PREFIXED; ANY and MATCH are filter values only (MATCH: the bindings that would
    apply to the filter's name)."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4
