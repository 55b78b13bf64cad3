"""DelayedFetch: a fetch waiting for ``min_bytes`` of new data or ``max_wait_ms``.

Mirrors ``kafka.server.DelayedFetch``: it completes early when a partition is no longer led here
(for a fetch that reads leaders only; a consumer's Fetch v11+ may wait on a follower, KIP-392),
is unknown, its fetch offset is past the end (truncation) or its segment rolled, or when the bytes
accumulated since each partition's fetch position reach ``min_bytes``. On completion it re-reads the
logs and answers through ``response_callback``. Handler threads never wait on it.
"""

from __future__ import annotations

from typing import NamedTuple

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
        session=None,
        wake=None,
    ):
        """``is_throttled(topic, partition)``: a follower fetch's partitions held back by the leader's replication
        throttle, whose new bytes do not count (Kafka's DelayedFetch with ``shouldLeaderThrottle``).
        ``session`` (with ``wake``): the follower's fetch session when some of its partitions are parked and so
        not among ``statuses`` (issue 31); a change of one of them completes the fetch too, as Kafka's
        DelayedFetch completes on an append to any partition of the request (the changed partition itself is
        then read by the next fetch)."""
        super().__init__(delay_ms)
        self.session = session
        self.wake = wake
        self.min_bytes = min_bytes
        self.statuses = statuses
        self.get_partition = get_partition
        self.end_offset_metadata = end_offset_metadata  # (log) -> LogOffsetMetadata per isolation
        self.complete_fn = complete_fn  # () -> None: re-read and respond
        # False for a consumer's Fetch v11+ that may read a follower (KIP-392): losing leadership does not end it
        self.fetch_only_leader = fetch_only_leader
        self.is_throttled = is_throttled

    def try_complete(self) -> bool:
        session = self.session
        if session is not None and not session.set_waiter(self.wake):
            return self.force_complete()  # a parked partition of the session changed
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
        if self.session is not None:
            self.session.set_waiter(None)
        self.complete_fn()


class FetchSessionOperationKey(NamedTuple):
    """The watch key of a :class:`DelayedSessionFetch`: the fetch session's id."""

    session_id: int


class DelayedSessionFetch(DelayedOperation):
    """A follower's incremental session fetch with nothing to read (every partition of its KIP-227 session is
    parked: caught up and unchanged, issue 31) waiting ``delay_ms`` (its ``max_wait_ms``) for one of them to
    change. It watches one key, the session's (:class:`FetchSessionOperationKey`), instead of every partition's,
    and reads nothing until it completes: ``complete_fn()`` then reads only the partitions that changed.

    ``session`` is the :class:`~pykbroker.server.fetch_session.FetchSession`; ``wake()`` is what a change calls
    (it queues a ``check_and_complete`` of the session key). Kafka's DelayedFetch has no such variant: there,
    every fetch reads and watches each partition; the answer (records, offsets) is the same.
    Threading: as any DelayedOperation; ``try_complete`` only touches the session's change set under its lock.
    """

    def __init__(self, delay_ms: int, session, wake, complete_fn):
        super().__init__(delay_ms)
        self.session = session
        self.wake = wake
        self.complete_fn = complete_fn

    def try_complete(self) -> bool:
        if self.session.set_waiter(self.wake):
            return False
        return self.force_complete()  # a partition changed

    def on_expiration(self) -> None:
        pass

    def on_complete(self) -> None:
        self.session.set_waiter(None)
        self.complete_fn()
