"""DelayedFetch: a fetch waiting for ``min_bytes`` of new data or ``max_wait_ms``.

Mirrors ``kafka.server.DelayedFetch``: it completes early when a partition is no longer led here
(for a fetch that reads leaders only; a consumer's Fetch v11+ may wait on a follower, KIP-392),
is unknown, its fetch offset is past the end (truncation) or its segment rolled, or when the bytes
accumulated since each partition's fetch position reach ``min_bytes``. On completion it re-reads the
logs and answers through ``response_callback``. Handler threads never wait on it.
"""

from __future__ import annotations

from pykbroker.utils.delayed_operation import DelayedOperation


class FetchPartitionStatus:
    __slots__ = ("topic", "partition", "start_offset_metadata", "partition_max_bytes")

    def __init__(self, topic: str, partition: int, start_offset_metadata, partition_max_bytes: int):
        self.topic, self.partition = topic, partition
        self.start_offset_metadata = start_offset_metadata
        self.partition_max_bytes = partition_max_bytes


class DelayedFetch(DelayedOperation):
    def __init__(
        self,
        delay_ms: int,
        min_bytes: int,
        statuses: list[FetchPartitionStatus],
        get_partition,
        end_offset_metadata,
        complete_fn,
        fetch_only_leader: bool = True,
        is_throttled=None,
    ):
        """``is_throttled(topic, partition)``: a follower fetch's partitions held back by the leader's replication
        throttle, whose new bytes do not count (Kafka's DelayedFetch with ``shouldLeaderThrottle``)."""
        super().__init__(delay_ms)
        self.min_bytes = min_bytes
        self.statuses = statuses
        self.get_partition = get_partition
        self.end_offset_metadata = end_offset_metadata  # (log) -> LogOffsetMetadata per isolation
        self.complete_fn = complete_fn  # () -> None: re-read and respond
        # False for a consumer's Fetch v11+ that may read a follower (KIP-392): losing leadership does not end it
        self.fetch_only_leader = fetch_only_leader
        self.is_throttled = is_throttled

    def try_complete(self) -> bool:
        accumulated = 0
        for st in self.statuses:
            start = st.start_offset_metadata
            if start is None:
                continue
            partition = self.get_partition(st.topic, st.partition)
            if partition is None or (self.fetch_only_leader and not partition.is_leader):
                return self.force_complete()
            end = self.end_offset_metadata(partition.log)
            if end.message_offset == start.message_offset:
                continue
            if end.message_offset < start.message_offset:
                return self.force_complete()  # truncation
            if end.message_offset_only or start.message_offset_only:
                return self.force_complete()
            if start.on_older_segment(end):
                return self.force_complete()  # the segment rolled: new data available
            if self.is_throttled is not None and self.is_throttled(st.topic, st.partition):
                continue
            accumulated += min(end.position_diff(start), st.partition_max_bytes)
        if accumulated >= self.min_bytes:
            return self.force_complete()
        return False

    def on_expiration(self) -> None:
        pass

    def on_complete(self) -> None:
        self.complete_fn()
