"""The KRaft controller's gauges under ``kafka.controller:type=KafkaController``.

Mirrors Kafka's ``QuorumControllerMetrics`` (ActiveControllerCount, LastCommittedRecordOffset) and
``ControllerMetadataMetrics`` as its ``ControllerMetadataMetricsPublisher`` computes them from the
metadata image (GlobalTopicCount, GlobalPartitionCount, OfflinePartitionsCount,
PreferredReplicaImbalanceCount, ActiveBrokerCount, FencedBrokerCount). Here the counts are computed
when a reporter reads them, once per image (images are immutable and swapped by reference), so
nothing runs on the controller or loader threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from pykbroker.metadata.image import MetadataImage

if TYPE_CHECKING:
    from pykbroker.metadata.quorum_controller import QuorumController
    from pykbroker.utils.metrics import MetricsRegistry

PREFIX = "kafka.controller:type=KafkaController,name="


class ControllerMetadataMetrics:
    def __init__(self, metrics: MetricsRegistry, controller: QuorumController, image: Callable[[], MetadataImage]):
        self._image_fn = image
        self._lock = threading.Lock()
        self._image: MetadataImage | None = None
        self._counts: dict[str, int] = {}
        metrics.gauge(PREFIX + "ActiveControllerCount", lambda: 1 if controller.is_active else 0)
        metrics.gauge(PREFIX + "LastCommittedRecordOffset", lambda: controller.last_committed_offset)

        def count_gauge(name: str) -> None:
            metrics.gauge(PREFIX + name, lambda: self.counts()[name])

        for name in (
            "GlobalTopicCount",
            "GlobalPartitionCount",
            "OfflinePartitionsCount",
            "PreferredReplicaImbalanceCount",
            "ActiveBrokerCount",
            "FencedBrokerCount",
        ):
            count_gauge(name)

    def counts(self) -> dict[str, int]:
        image = self._image_fn()
        with self._lock:
            if image is not self._image:
                self._counts = self.compute(image)
                self._image = image
            return self._counts

    @staticmethod
    def compute(image: MetadataImage) -> dict[str, int]:
        partitions = offline = imbalanced = 0
        for topic in image.topics.by_name.values():
            for reg in topic.partitions.values():
                partitions += 1
                if not reg.has_leader():
                    offline += 1
                if reg.leader != (reg.replicas[0] if reg.replicas else -1):
                    imbalanced += 1
        fenced = sum(1 for b in image.brokers.values() if b.fenced)
        return {
            "GlobalTopicCount": len(image.topics.by_name),
            "GlobalPartitionCount": partitions,
            "OfflinePartitionsCount": offline,
            "PreferredReplicaImbalanceCount": imbalanced,
            "ActiveBrokerCount": len(image.brokers) - fenced,
            "FencedBrokerCount": fenced,
        }
