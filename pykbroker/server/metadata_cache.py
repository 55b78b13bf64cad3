"""MetadataCache: the broker's read view of cluster metadata (brokers, topics, partitions, configs).

Mirrors ``kafka.server.metadata.KRaftMetadataCache``: it holds an immutable image that the
BrokerMetadataPublisher swaps in atomically when committed metadata records are applied, so readers
(handler threads) never lock: they read ``self.image`` once and use that snapshot.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pykbroker.config.endpoint import EndPoint


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    endpoints: dict[str, EndPoint]  # listener name -> advertised endpoint
    rack: str | None = None
    fenced: bool = False


@dataclass(frozen=True)
class PartitionInfo:
    partition_id: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    partition_epoch: int = 0


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: object  # uuid.UUID
    partitions: dict[int, PartitionInfo]
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CacheImage:
    cluster_id: str | None = None
    controller_id: int = -1
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)

    @property
    def topics_by_id(self) -> dict:
        return {t.topic_id: t for t in self.topics.values()}


INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


class MetadataCache:
    def __init__(self, node_id: int):
        self.node_id = node_id
        self.image = CacheImage()

    def set_image(self, image: CacheImage) -> None:
        self.image = image

    # -- reads ---------------------------------------------------------------------------------
    @property
    def cluster_id(self) -> str | None:
        return self.image.cluster_id

    def alive_brokers(self, listener: str) -> list[tuple[int, EndPoint, str | None]]:
        out = []
        for b in sorted(self.image.brokers.values(), key=lambda b: b.node_id):
            ep = b.endpoints.get(listener)
            if ep is not None and not b.fenced:
                out.append((b.node_id, ep, b.rack))
        return out

    def random_alive_broker_id(self) -> int:
        """KRaft returns a random alive broker as ``controller_id`` (clients never talk to the controller)."""
        ids = sorted(b.node_id for b in self.image.brokers.values() if not b.fenced)
        return ids[0] if ids else -1

    def topic(self, name: str) -> TopicInfo | None:
        return self.image.topics.get(name)

    def topic_by_id(self, topic_id) -> TopicInfo | None:
        return self.image.topics_by_id.get(topic_id)

    def topic_names(self) -> list[str]:
        return sorted(self.image.topics)

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        t = self.image.topics.get(topic)
        return t.partitions.get(partition) if t else None

    def contains_topic(self, name: str) -> bool:
        return name in self.image.topics
