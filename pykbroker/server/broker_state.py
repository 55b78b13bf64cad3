"""BrokerState: the state a node reports as ``kafka.server:type=KafkaServer,name=BrokerState``.

Mirrors ``org.apache.kafka.metadata.BrokerState`` (its values are Kafka's, so the gauge reads the same
numbers as a Kafka broker's). pykbroker's KafkaRaftServer moves NOT_RUNNING -> STARTING -> RUNNING ->
SHUTTING_DOWN; RECOVERY and PENDING_CONTROLLED_SHUTDOWN are Kafka's states of a broker that is
catching up with the metadata log or waiting for its controlled shutdown, listed for completeness.
"""

from __future__ import annotations

import enum


class BrokerState(enum.IntEnum):
    """Kafka's BrokerState values (an ``int``: the gauge exports ``state.value``)."""

    NOT_RUNNING = 0
    STARTING = 1
    RECOVERY = 2
    RUNNING = 3
    PENDING_CONTROLLED_SHUTDOWN = 6
    SHUTTING_DOWN = 7
    UNKNOWN = 127
