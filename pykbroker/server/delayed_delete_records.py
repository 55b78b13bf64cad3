"""DelayedDeleteRecords: a DeleteRecords waiting until every live replica has deleted the records.

Mirrors ``kafka.server.DelayedDeleteRecords``: each partition whose local deletion succeeded with a low
watermark (the smallest log start offset of the leader and its live followers,
``Partition.low_watermark_if_leader``) still below the requested offset waits, with a provisional
REQUEST_TIMED_OUT and low watermark -1 (what the client gets when ``timeout_ms`` expires). A partition is done
when its low watermark reaches the requested offset (NONE, that low watermark), when this broker no longer
leads it (NOT_LEADER_OR_FOLLOWER), when it is gone (UNKNOWN_TOPIC_OR_PARTITION) or in an offline log directory
(KAFKA_STORAGE_ERROR). Completion calls ``response_callback({(topic, partition): (low_watermark,
error_code)})`` exactly once, with every partition of the request.

Threading: ``try_complete`` runs on request handler threads (the DeleteRecords request, and followers' Fetch
requests moving a follower's log start offset, through the purgatory's ``check_and_complete``); expiry on the
purgatory's reaper thread. The DelayedOperation lock serialises them.
"""

from __future__ import annotations

from collections.abc import Callable

from pykbroker.protocol import errors
from pykbroker.utils.delayed_operation import DelayedOperation

DeleteRecordsCallback = Callable[[dict[tuple[str, int], tuple[int, int]]], None]


class DeleteRecordsPartitionStatus:
    """Kafka's ``DeleteRecordsPartitionStatus``: the offset the low watermark must reach and the partition's
    ``(low watermark, error code)`` so far."""

    __slots__ = ("required_offset", "result", "pending")

    def __init__(self, required_offset: int, low_watermark: int, error_code: int):
        self.required_offset = required_offset
        self.result = (low_watermark, error_code)
        self.pending = error_code == errors.NONE and low_watermark < required_offset
        if self.pending:
            self.result = (-1, errors.REQUEST_TIMED_OUT)


class DelayedDeleteRecords(DelayedOperation):
    def __init__(
        self,
        delay_ms: int,
        statuses: dict[tuple[str, int], DeleteRecordsPartitionStatus],
        low_watermark: Callable[[str, int], int],
        response_callback: DeleteRecordsCallback,
    ):
        """``low_watermark(topic, partition)``: the partition's low watermark on this leader; raises the
        KafkaError of a partition this broker cannot answer for (not leader, unknown, offline)."""
        super().__init__(delay_ms)
        self.statuses = statuses
        self.low_watermark = low_watermark
        self.response_callback = response_callback

    def try_complete(self) -> bool:
        for (topic, partition), status in self.statuses.items():
            if not status.pending:
                continue
            try:
                low = self.low_watermark(topic, partition)
            except errors.KafkaError as e:
                status.pending, status.result = False, (-1, e.code)
                continue
            if low >= status.required_offset:
                status.pending, status.result = False, (low, errors.NONE)
        if not any(s.pending for s in self.statuses.values()):
            return self.force_complete()
        return False

    def on_expiration(self) -> None:
        pass

    def on_complete(self) -> None:
        self.response_callback({tp: s.result for tp, s in self.statuses.items()})
