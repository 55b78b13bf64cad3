"""MetadataCache: the broker's read view of cluster metadata (brokers, topics, partitions, configs).

Mirrors ``kafka.server.metadata.KRaftMetadataCache``: it holds the current immutable
:class:`~pykbroker.metadata.image.MetadataImage`, swapped atomically by the BrokerMetadataPublisher
when committed metadata records are applied. Readers (handler threads) never lock: each call reads
``self.image`` once and works on that snapshot.
"""

from __future__ import annotations

import random
import uuid

from pykbroker.metadata.image import Endpoint, MetadataImage, TopicImage
from pykbroker.metadata.partition_registration import PartitionRegistration
from pykbroker.protocol.types import ZERO_UUID


class MetadataCache:
    def __init__(self, node_id: int, image: MetadataImage | None = None):
        self.node_id = node_id
        self.image = image or MetadataImage()

    def set_image(self, image: MetadataImage) -> None:
        self.image = image

    @property
    def cluster_id(self) -> str | None:
        return self.image.cluster_id

    def alive_brokers(self, listener: str) -> list[tuple[int, Endpoint, str | None]]:
        """``[(node id, endpoint with .host/.port, rack)]`` of unfenced brokers on ``listener``, by id."""
        out = []
        for node_id, b in sorted(self.image.brokers.items()):
            ep = b.listeners.get(listener)
            if ep is not None and not b.fenced:
                out.append((node_id, ep, b.rack))
        return out

    def alive_broker_rack(self, node_id: int, listener: str) -> tuple[str | None] | None:
        """``(rack,)`` of ``node_id`` if it is registered, unfenced and has ``listener``, else None (the
        replica endpoint Kafka's ``getPartitionReplicaEndpoints`` would give, KIP-392)."""
        b = self.image.brokers.get(node_id)
        if b is None or b.fenced or listener not in b.listeners:
            return None
        return (b.rack,)

    def has_alive_broker(self, node_id: int) -> bool:
        b = self.image.brokers.get(node_id)
        return b is not None and not b.fenced

    def is_broker_fenced(self, node_id: int) -> bool:
        """Registered and fenced (Kafka's ``isBrokerFenced``); an unknown broker is not fenced."""
        b = self.image.brokers.get(node_id)
        return b is not None and b.fenced

    def is_broker_shutting_down(self, node_id: int) -> bool:
        """Registered and in controlled shutdown (Kafka's ``isBrokerShuttingDown``)."""
        b = self.image.brokers.get(node_id)
        return b is not None and b.in_controlled_shutdown

    def get_alive_broker_epoch(self, node_id: int) -> int | None:
        """The broker epoch of ``node_id``'s registration if it is registered and not fenced, else None
        (Kafka's ``getAliveBrokerEpoch``)."""
        b = self.image.brokers.get(node_id)
        return b.epoch if b is not None and not b.fenced else None

    def random_alive_broker_id(self) -> int:
        """KRaft answers ``controller_id`` with a random alive broker (clients never talk to the controller)."""
        ids = [i for i, b in self.image.brokers.items() if not b.fenced]
        return random.choice(ids) if ids else -1

    def topic(self, name: str) -> TopicImage | None:
        return self.image.topics.by_name.get(name)

    def topic_id(self, name: str) -> uuid.UUID:
        t = self.image.topics.by_name.get(name)
        return t.id if t is not None else ZERO_UUID

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        t = self.image.topics.by_id.get(topic_id)
        return t.name if t is not None else None

    def topic_names(self) -> list[str]:
        return sorted(self.image.topics.by_name)

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        t = self.image.topics.by_name.get(topic)
        return t.partitions.get(partition) if t is not None else None

    def contains_topic(self, name: str) -> bool:
        return name in self.image.topics.by_name

    def topic_configs(self, topic: str):
        return self.image.topic_configs(topic)

    def current_leader(self, topic: str, partition: int) -> dict | None:
        """KIP-951 ``current_leader`` of a partition: ``{leader_id, leader_epoch}`` as this broker knows
        it, or None for an unknown partition."""
        reg = self.partition(topic, partition)
        return None if reg is None else {"leader_id": reg.leader, "leader_epoch": reg.leader_epoch}

    def node_endpoints(self, node_ids, listener: str) -> list[dict]:
        """KIP-951 ``node_endpoints``: ``[{node_id, host, port, rack}]`` of the given brokers on ``listener``."""
        out = []
        for node_id in sorted(set(node_ids)):
            b = self.image.brokers.get(node_id)
            if b is None:
                continue
            ep = b.listeners.get(listener)
            if ep is not None:
                out.append({"node_id": node_id, "host": ep.host, "port": ep.port, "rack": b.rack})
        return out
