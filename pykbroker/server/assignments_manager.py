"""AssignmentsManager: tells the controller which log directory holds each of this broker's replicas (KIP-858,
Kafka's ``org.apache.kafka.server.AssignmentsManager``).

A broker with several log dirs places a new replica's log itself (the controller registered its directory as
UNASSIGNED); the ReplicaManager reports ``(topic id, partition) -> directory id`` here whenever the metadata's
directory of a local replica differs from the directory its log is in. The manager batches what is pending into one
AssignReplicasToDirs (73) request at a time to the active controller; a request that fails (timeout, NOT_CONTROLLER
exhausted, a top-level error) is sent again after ``RETRY_BACKOFF_MS``, and a partition answered with an error is
dropped (its topic was deleted, or it moved away from this broker) with a log line. A newer assignment of the same
partition replaces an older one not sent yet.

Threading: ``on_assignment`` may be called from any thread (``_lock`` guards the pending map); requests are sent
and answered on the NodeToControllerChannelManager's send thread.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future

from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server.node_to_controller_channel_manager import NodeToControllerChannelManager
from pykbroker.utils.logging import get_logger

RETRY_BACKOFF_MS = 500
REQUEST_TIMEOUT_MS = 10_000

Assignment = tuple[uuid.UUID, int]


class AssignmentsManager:
    def __init__(self, node_id: int, channel: NodeToControllerChannelManager, broker_epoch: Callable[[], int]):
        """``broker_epoch()``: this broker's registered epoch (-1 until registered: nothing is sent before)."""
        self.node_id = node_id
        self.channel = channel
        self.broker_epoch = broker_epoch
        self._log = get_logger("AssignmentsManager", nodeId=node_id)
        self._lock = threading.Lock()
        self._pending: dict[Assignment, uuid.UUID] = {}
        self._in_flight: dict[Assignment, uuid.UUID] | None = None
        self._closed = False

    def on_assignment(self, topic_id: uuid.UUID, partition: int, directory: uuid.UUID, reason: str = "") -> None:
        """Queue ``topic_id``-``partition``'s replica as living in ``directory`` (Kafka's ``onAssignment``)."""
        with self._lock:
            if self._closed:
                return
            self._pending[(topic_id, partition)] = directory
            idle = self._in_flight is None
        self._log.debug("Queued a directory assignment", partition=partition, directory=str(directory), reason=reason)
        if idle:
            self.channel.send_thread.schedule(0, self._maybe_send)

    def close(self) -> None:
        with self._lock:
            self._closed = True

    # ---- send thread --------------------------------------------------------------------------
    def _maybe_send(self) -> None:
        with self._lock:
            if self._closed or self._in_flight is not None or not self._pending:
                return
            epoch = self.broker_epoch()
            if epoch < 0:
                retry = True
            else:
                retry = False
                batch, self._pending = self._pending, {}
                self._in_flight = batch
        if retry:
            self.channel.send_thread.schedule(RETRY_BACKOFF_MS, self._maybe_send)
            return
        by_dir: dict[uuid.UUID, dict[uuid.UUID, list[int]]] = {}
        for (topic_id, partition), directory in sorted(batch.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            by_dir.setdefault(directory, {}).setdefault(topic_id, []).append(partition)
        body = {
            "broker_id": self.node_id,
            "broker_epoch": epoch,
            "directories": [
                {
                    "id": directory,
                    "topics": [
                        {"topic_id": t, "partitions": [{"partition_index": p} for p in parts]}
                        for t, parts in topics.items()
                    ],
                }
                for directory, topics in by_dir.items()
            ],
        }
        future = self.channel.send_request(ApiKeys.ASSIGN_REPLICAS_TO_DIRS, 0, body, REQUEST_TIMEOUT_MS)
        future.add_done_callback(self._on_response)

    def _on_response(self, future: Future) -> None:
        with self._lock:
            batch, self._in_flight = self._in_flight or {}, None
        failed = False
        try:
            response = future.result()
            code = response.get("error_code", errors.NONE)
            if code != errors.NONE:
                raise errors.for_code(code)(f"AssignReplicasToDirs failed: {errors.name_of(code)}")
        except Exception as e:  # noqa: BLE001 - timeouts, errors: the batch is sent again
            self._log.info("Directory assignments not accepted; retrying", error=str(e))
            failed = True
        if failed:
            with self._lock:
                for key, directory in batch.items():
                    self._pending.setdefault(key, directory)
            self.channel.send_thread.schedule(RETRY_BACKOFF_MS, self._maybe_send)
            return
        for d in response.get("directories") or []:
            for t in d.get("topics") or []:
                for p in t.get("partitions") or []:
                    if p.get("error_code", errors.NONE) != errors.NONE:
                        self._log.warning(
                            f"Directory assignment of {t['topic_id']}-{p['partition_index']} to {d['id']} refused: "
                            f"{errors.name_of(p['error_code'])}"
                        )
        self._maybe_send()
