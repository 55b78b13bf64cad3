"""DelayedProduce: an acks=all produce waiting until the high watermark passes what it appended.

Mirrors ``kafka.server.DelayedProduce``: each partition whose append succeeded waits for
``HW >= last offset + 1`` with a provisional REQUEST_TIMED_OUT (what the client gets on expiry);
failed partitions are already done. Completion calls ``response_callback({(topic, partition):
ProducePartitionResult})`` exactly once.
"""

from __future__ import annotations

from pykbroker.protocol import errors
from pykbroker.server.append_result import AppendCallback, ProducePartitionResult
from pykbroker.utils.delayed_operation import DelayedOperation


class ProducePartitionStatus:
    """Kafka's ``ProducePartitionStatus``: the offset the high watermark must reach and the partition's result
    so far (replaced, not mutated, when the acks outcome is known)."""

    __slots__ = ("required_offset", "result", "acks_pending")

    def __init__(self, required_offset: int, result: ProducePartitionResult):
        self.required_offset = required_offset
        self.result = result
        self.acks_pending = False


class DelayedProduce(DelayedOperation):
    def __init__(
        self,
        delay_ms: int,
        statuses: dict[tuple[str, int], ProducePartitionStatus],
        get_partition,
        response_callback: AppendCallback,
    ):
        super().__init__(delay_ms)
        self.statuses = statuses
        self.get_partition = get_partition
        self.response_callback = response_callback
        for status in statuses.values():
            if status.result.error_code == errors.NONE:
                status.acks_pending = True
                status.result = status.result.with_error(errors.REQUEST_TIMED_OUT)

    def try_complete(self) -> bool:
        for tp, status in self.statuses.items():
            if not status.acks_pending:
                continue
            partition = self.get_partition(*tp)
            if partition is None:
                done, code = True, errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                done, code = partition.check_enough_replicas_reach_offset(status.required_offset)
            if done:
                status.acks_pending = False
                status.result = status.result.with_error(code)
        if not any(s.acks_pending for s in self.statuses.values()):
            return self.force_complete()
        return False

    def on_expiration(self) -> None:
        pass

    def on_complete(self) -> None:
        self.response_callback({tp: s.result for tp, s in self.statuses.items()})
