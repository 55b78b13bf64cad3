"""Config resource types: Kafka's ``org.apache.kafka.common.config.ConfigResource.Type``, the
``resource_type`` of DescribeConfigs, AlterConfigs, IncrementalAlterConfigs and of ``ConfigRecord``.

The one definition of these codes in pykbroker. They are not the ACL resource types (GROUP is 32 here and 3
there): those are :class:`pykbroker.protocol.resource.ResourceType`.
"""

from __future__ import annotations

from enum import IntEnum


class ConfigResourceType(IntEnum):
    """Kafka's ``ConfigResource.Type`` codes (``ConfigResourceType.BROKER == 4``)."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32
