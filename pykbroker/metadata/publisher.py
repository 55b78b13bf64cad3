"""MetadataPublisher: what receives each new committed image (Kafka's ``MetadataPublisher``).

The broker implements one (``BrokerMetadataPublisher``: updates the MetadataCache, creates and deletes
logs from ``delta.topics.local_changes(node_id)``). Publishers are called on the metadata loader's thread,
one at a time, in commit order; a newly installed publisher first receives the whole current image as a
delta from the empty image.
"""

from __future__ import annotations

from pykbroker.metadata.delta import MetadataDelta
from pykbroker.metadata.image import MetadataImage
from pykbroker.raft.raft_client import LeaderAndEpoch


class MetadataPublisher:
    def name(self) -> str:
        return type(self).__name__

    def on_metadata_update(self, delta: MetadataDelta, new_image: MetadataImage) -> None:
        """Publish ``new_image``; ``delta`` holds what changed since the previous image this publisher saw
        (``delta.image``)."""
        raise NotImplementedError

    def on_controller_change(self, leader: LeaderAndEpoch) -> None:
        """The Raft leader (the active controller) changed."""

    def close(self) -> None:
        pass
