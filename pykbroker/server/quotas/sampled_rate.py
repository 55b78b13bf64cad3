"""SampledRate: Kafka's ``Rate`` over a ``SampledStat``; it lives in :mod:`pykbroker.utils.windowed_stats` (the
network layer's connection quotas use it too) and is re-exported here for the client quota managers."""

from pykbroker.utils.windowed_stats import SampledRate

__all__ = ["SampledRate"]
