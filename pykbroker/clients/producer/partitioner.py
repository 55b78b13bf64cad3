"""Partitioning: Kafka's murmur2 for keyed records and the built-in sticky partitioner for the rest.

Mirrors ``org.apache.kafka.common.utils.Utils.murmur2/toPositive`` and
``org.apache.kafka.clients.producer.internals.BuiltInPartitioner`` (KIP-480 sticky partitioning, with
KIP-794's rule of switching after ``batch.size`` bytes). A keyed record goes to
``toPositive(murmur2(key)) % numPartitions``, so keys land where the Java producer and librdkafka's
``murmur2_random`` partitioner put them. Records without a key stick to one partition, chosen at
random among partitions with a leader, until ``batch.size`` bytes were produced to it.

Thread-safety: :class:`BuiltInPartitioner` is called from application threads under the producer's
accumulator lock (see RecordAccumulator); ``murmur2`` is a pure function.
"""

from __future__ import annotations

import random

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 of ``data`` as a signed Java int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length & ~3
    for i in range(0, n4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[n4 + 2] << 16
    if rest >= 2:
        h ^= data[n4 + 1] << 8
    if rest >= 1:
        h ^= data[n4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """``n & 0x7fffffff`` (Kafka's Utils.toPositive)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    return to_positive(murmur2(key)) % num_partitions


class BuiltInPartitioner:
    """Sticky partition per topic for records without a key (or with ``partitioner.ignore.keys``)."""

    def __init__(self, batch_size: int, rng: random.Random | None = None):
        self.batch_size = max(1, batch_size)
        self._rng = rng or random.Random()
        self._sticky: dict[str, list[int]] = {}  # topic -> [partition, bytes produced to it]
        self.sticky_state = self._sticky  # KafkaProducer.send reads and counts it inline (hot path)

    def partition(self, topic: str, available: list[int], num_partitions: int) -> int:
        """The topic's current sticky partition (choosing one if none)."""
        state = self._sticky.get(topic)
        if state is None or state[0] >= num_partitions:
            state = self._sticky[topic] = [self._choose(available, num_partitions, -1), 0]
        return state[0]

    def update_partition_info(self, topic: str, appended_bytes: int, available: list[int], num_partitions: int) -> None:
        """Count bytes produced to the sticky partition; switch once ``batch.size`` is reached."""
        state = self._sticky.get(topic)
        if state is None:
            return
        state[1] += appended_bytes
        if state[1] >= self.batch_size:
            state[0] = self._choose(available, num_partitions, state[0])
            state[1] = 0

    def _choose(self, available: list[int], num_partitions: int, previous: int) -> int:
        candidates = available if available else list(range(num_partitions))
        if len(candidates) == 1:
            return candidates[0]
        while True:
            p = candidates[self._rng.randrange(len(candidates))]
            if p != previous:
                return p
