"""AlterPartitionManager: partition leaders' ISR changes, batched to the active controller.

Mirrors ``kafka.server.DefaultAlterPartitionManager`` (KIP-497): a leader ``submit``s the ISR it wants
for one partition (leader epoch, partition epoch, new ISR with each member's broker epoch, KIP-903:
the Partition takes them from the members' Fetches). Items are keyed by partition, at most one per
partition, and every item not answered yet goes into the next AlterPartition request (version 3: topic
ids, ``new_isr_with_epochs``), with at most one request in flight: items submitted while one is in
flight are batched into the next. Each partition's callback runs exactly once with
``(error code, result)``, where ``result`` is ``{leader_id, leader_epoch, isr, partition_epoch}`` on
success. An item stays queued until the controller answers for it: a top-level error (NOT_CONTROLLER,
STALE_BROKER_EPOCH, a timeout or a lost connection) or a partition missing from the answer re-sends
the queued items after 50 ms, as Kafka does for top-level errors. A second submit for a partition whose
item is still queued or in flight is refused (returns False; Kafka's OperationNotAttempted);
``is_pending`` lets a Partition avoid that.

The controller is reached through ``controller_supplier()``: the in-process QuorumController on a
single node, else the ForwardingManager; both return a Future of the response body.

Threading: thread-safe; ``_lock`` guards the queue and the in-flight flag. Callbacks run outside the
lock on the thread that completes the controller's Future (the controller channel's thread, or the
QuorumController's event thread on a single node).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from pykbroker.protocol import errors
from pykbroker.utils.logging import get_logger

RETRY_BACKOFF_MS = 50


class _Item:
    __slots__ = ("topic_id", "partition", "leader_epoch", "new_isr_with_epochs", "partition_epoch", "callback")

    def __init__(self, topic_id, partition, leader_epoch, new_isr_with_epochs, partition_epoch, callback):
        self.topic_id = topic_id
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.new_isr_with_epochs = new_isr_with_epochs
        self.partition_epoch = partition_epoch
        self.callback = callback


class AlterPartitionManager:
    def __init__(
        self,
        node_id: int,
        controller_supplier: Callable[[], Any],
        broker_epoch_supplier: Callable[[], int],
        scheduler,
    ):
        """``broker_epoch_supplier()``: this broker's epoch, sent as the request's ``broker_epoch``.
        ``scheduler``: runs the retries."""
        self.node_id = node_id
        self.controller_supplier = controller_supplier
        self.broker_epoch_supplier = broker_epoch_supplier
        self.scheduler = scheduler
        self._lock = threading.Lock()
        self._unsent: dict[tuple[uuid.UUID, int], _Item] = {}
        self._in_flight = False
        self._closed = False
        self.log = get_logger("AlterPartitionManager", broker=node_id)

    def submit(
        self,
        topic_id: uuid.UUID,
        partition: int,
        leader_epoch: int,
        new_isr_with_epochs: Sequence[tuple[int, int]],
        partition_epoch: int,
        callback: Callable[[int, dict | None], None],
    ) -> bool:
        """Queue an ISR change, ``new_isr_with_epochs`` as ``[(broker id, broker epoch or -1)]``; False
        (and the callback gets OPERATION_NOT_ATTEMPTED) when one for this partition is still queued or
        in flight, or the manager is closed."""
        key = (topic_id, partition)
        with self._lock:
            refused = key in self._unsent or self._closed
            if not refused:
                self._unsent[key] = _Item(
                    topic_id, partition, leader_epoch, tuple(new_isr_with_epochs), partition_epoch, callback
                )
        if refused:
            callback(errors.OPERATION_NOT_ATTEMPTED, None)
            return False
        self._maybe_propagate()
        return True

    def is_pending(self, topic_id: uuid.UUID, partition: int) -> bool:
        """True while a change for this partition is queued or in flight (a submit would be refused)."""
        with self._lock:
            return (topic_id, partition) in self._unsent

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._unsent.clear()

    def _maybe_propagate(self) -> None:
        with self._lock:
            if self._in_flight or not self._unsent or self._closed:
                return
            self._in_flight = True
            items = list(self._unsent.values())
        request = self._build_request(items)
        try:
            future = self.controller_supplier().alter_partition(request)
        except Exception as e:  # noqa: BLE001 - no controller handle yet: retry later
            self._on_failure(f"cannot send AlterPartition: {e!r}")
            return
        future.add_done_callback(lambda f: self._on_complete(items, f))

    def _build_request(self, items: list[_Item]) -> dict:
        topics: dict[uuid.UUID, list[dict]] = {}
        for item in items:
            topics.setdefault(item.topic_id, []).append(
                {
                    "partition_index": item.partition,
                    "leader_epoch": item.leader_epoch,
                    "new_isr": [b for b, _ in item.new_isr_with_epochs],
                    "new_isr_with_epochs": [
                        {"broker_id": b, "broker_epoch": epoch} for b, epoch in item.new_isr_with_epochs
                    ],
                    "leader_recovery_state": 0,
                    "partition_epoch": item.partition_epoch,
                }
            )
        return {
            "broker_id": self.node_id,
            "broker_epoch": self.broker_epoch_supplier(),
            "topics": [{"topic_name": "", "topic_id": t, "partitions": ps} for t, ps in topics.items()],
        }

    def _on_failure(self, why: str) -> None:
        with self._lock:
            self._in_flight = True  # held until the retry runs, so submits only queue meanwhile
            closed = self._closed
        if not closed:
            self.log.warning(f"AlterPartition will be retried in {RETRY_BACKOFF_MS} ms: {why}")
            self._schedule_retry()

    def _schedule_retry(self) -> None:
        def retry() -> None:
            with self._lock:
                self._in_flight = False
            self._maybe_propagate()

        self.scheduler.schedule("send-alter-partition", retry, RETRY_BACKOFF_MS)

    def _on_complete(self, items: list[_Item], future) -> None:
        try:
            response = future.result()
        except Exception as e:  # noqa: BLE001 - timeout, lost connection, no controller: retry
            self._on_failure(repr(e))
            return
        code = response.get("error_code", errors.NONE)
        if code != errors.NONE:
            self._on_failure(f"the controller answered {errors.for_code(code).name}")
            return
        results: dict[tuple[uuid.UUID, int], tuple[int, dict | None]] = {}
        for t in response.get("topics") or []:
            for p in t.get("partitions") or []:
                pcode = p["error_code"]
                result = (
                    None
                    if pcode != errors.NONE
                    else {
                        "leader_id": p["leader_id"],
                        "leader_epoch": p["leader_epoch"],
                        "isr": list(p["isr"]),
                        "partition_epoch": p["partition_epoch"],
                    }
                )
                results[(t["topic_id"], p["partition_index"])] = (pcode, result)
        done = []
        with self._lock:
            for item in items:
                key = (item.topic_id, item.partition)
                if key in results and self._unsent.get(key) is item:
                    del self._unsent[key]  # answered: a new change may be submitted from the callback
                    done.append((item, results[key]))
                elif key not in results:
                    self.log.warning(f"Partition {key} was sent but not included in the response")
            retry = len(done) < len(items)
            self._in_flight = retry
        for item, (pcode, result) in done:
            try:
                item.callback(pcode, result)
            except Exception as e:  # noqa: BLE001 - one partition's failure must not stop the others
                self.log.error(f"AlterPartition callback failed for {item.topic_id}-{item.partition}", error=repr(e))
        if retry:
            self._schedule_retry()
        else:
            self._maybe_propagate()
