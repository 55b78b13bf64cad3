"""The finalized features a node reports in ApiVersions (Kafka's ``FinalizedFeatures`` and
``FeaturesPublisher``).

A broker reports its metadata image's levels with the image's offset as ``finalized_features_epoch``
(:func:`finalized_features_of`, Kafka's ``KRaftMetadataCache.features``); a controller-only node reports the
levels of the last image that changed them, with that image's offset (:class:`FeaturesPublisher`). Both add
``kraft.version`` from the Raft log (:func:`with_kraft_version`). Before
``metadata.version`` is known the epoch is -1 and nothing is finalized.

Threading: a ``FinalizedFeatures`` is immutable; the publisher's ``features`` is replaced by reference on the
metadata loader's thread and read from any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from pykbroker.metadata.delta import MetadataDelta
from pykbroker.metadata.features import KRAFT_VERSION
from pykbroker.metadata.image import MetadataImage
from pykbroker.metadata.publisher import MetadataPublisher


class FinalizedFeatures(NamedTuple):
    """``levels``: feature -> finalized level (``metadata.version`` included, no level 0); ``epoch``: the
    metadata offset they are as of (-1: unknown)."""

    levels: Mapping[str, int]
    epoch: int


UNKNOWN_FEATURES = FinalizedFeatures(MappingProxyType({}), -1)


def finalized_features_of(image: MetadataImage) -> FinalizedFeatures:
    """A broker's view: the image's levels, epoch = the image's offset."""
    if image.metadata_version is None:
        return UNKNOWN_FEATURES
    return FinalizedFeatures(image.features, image.offset)


def with_kraft_version(features: FinalizedFeatures, kraft_version: int) -> FinalizedFeatures:
    """``features`` plus ``kraft.version`` at ``kraft_version`` (the Raft log's KRaftVersionRecord, KIP-853), as
    Kafka's ``KRaftMetadataCache.features`` adds it; unknown features stay unknown."""
    if features.epoch < 0:
        return features
    return FinalizedFeatures(MappingProxyType({**features.levels, KRAFT_VERSION: kraft_version}), features.epoch)


class FeaturesPublisher(MetadataPublisher):
    """Keeps the finalized features of the latest image that changed them."""

    def __init__(self) -> None:
        self.features = UNKNOWN_FEATURES

    def on_metadata_update(self, delta: MetadataDelta, new_image: MetadataImage) -> None:
        if delta.features_changes:
            self.features = finalized_features_of(new_image)
