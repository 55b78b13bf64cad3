"""TransactionMarkerChannelManager: writes a transaction's COMMIT/ABORT markers to the leaders of its
partitions, then records the transaction as complete.

Mirrors ``kafka.coordinator.transaction.TransactionMarkerChannelManager`` and
``TransactionMarkerRequestCompletionHandler``: an InterBrokerSendThread (``TxnMarkerSenderThread-<id>``)
sends WriteTxnMarkers requests to the broker leading each partition, this broker included (through its
own inter-broker listener, as Kafka does). Per partition answer:

* NONE: the partition leaves the transaction's pending set;
* NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
  REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, a dropped connection: retried after ``retry_backoff_ms`` with
  the leader looked up again; a partition whose topic is gone is skipped;
* INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: a newer coordinator or producer epoch owns
  the transaction now; this coordinator stops sending its markers.

When no partition is left the transition to CompleteCommit/CompleteAbort is appended to
``__transaction_state`` (retried while COORDINATOR_NOT_AVAILABLE). Transactions of a partition this
broker stops leading (or leads again at a new epoch) are dropped from the channel.

Threading: ``add_txn_markers_to_send`` is called from request handler threads and the loader; responses
and retries run on the sender thread; ``_lock`` guards the pending map.
"""

from __future__ import annotations

import functools
import threading

from pykbroker.clients.inter_broker_send_thread import InterBrokerSendThread
from pykbroker.coordinator.transaction.transaction_metadata import (
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.security.client_security import PLAINTEXT, ClientSecurity
from pykbroker.utils.logging import get_logger

_log = get_logger("TransactionMarkerChannelManager")

_RETRIABLE = frozenset(
    {
        errors.NOT_LEADER_OR_FOLLOWER,
        errors.UNKNOWN_TOPIC_OR_PARTITION,
        errors.NOT_ENOUGH_REPLICAS,
        errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        errors.REQUEST_TIMED_OUT,
        errors.KAFKA_STORAGE_ERROR,
        errors.UNKNOWN_SERVER_ERROR,
        errors.COORDINATOR_LOAD_IN_PROGRESS,
    }
)
_PREPARED = frozenset({TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT})
_FENCED = frozenset({errors.INVALID_PRODUCER_EPOCH, errors.TRANSACTION_COORDINATOR_FENCED})


class _PendingCompletion:
    """Markers of one transaction still to be written."""

    __slots__ = ("commit", "coordinator_epoch", "metadata", "partition", "remaining", "transit")

    def __init__(self, coordinator_epoch: int, commit: bool, metadata: TransactionMetadata, transit, partition: int):
        self.coordinator_epoch = coordinator_epoch
        self.commit = commit
        self.metadata = metadata
        self.transit: TxnTransitMetadata = transit
        self.remaining: set[tuple[str, int]] = set(transit.topic_partitions)
        self.partition = partition


class TransactionMarkerChannelManager:
    def __init__(
        self,
        node_id: int,
        metadata_cache,
        listener_name: str,
        state_manager,
        time,
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        security: ClientSecurity = PLAINTEXT,
    ):
        self.node_id = node_id
        self.cache = metadata_cache
        self.listener_name = listener_name
        self.state_manager = state_manager
        self.time = time
        self.retry_backoff_ms = retry_backoff_ms
        self.send_thread = InterBrokerSendThread(
            f"TxnMarkerSenderThread-{node_id}",
            f"broker-{node_id}-txn-marker-sender",
            request_timeout_ms,
            time=time,
            security=security,
        )
        self._lock = threading.Lock()
        self._pending: dict[str, _PendingCompletion] = {}  # transactional id -> markers in flight

    def start(self) -> None:
        self.send_thread.start()

    def shutdown(self) -> None:
        self.send_thread.shutdown()

    # -- entry points ---------------------------------------------------------------------------
    def add_txn_markers_to_send(
        self, coordinator_epoch: int, commit: bool, metadata: TransactionMetadata, transit: TxnTransitMetadata
    ) -> None:
        """Write ``commit`` markers for every partition of ``transit`` (a PrepareCommit/PrepareAbort)."""
        pending = _PendingCompletion(
            coordinator_epoch, commit, metadata, transit, self.state_manager.partition_for(metadata.transactional_id)
        )
        with self._lock:
            self._pending[metadata.transactional_id] = pending
        self.send_thread.schedule(0, lambda: self._send(pending, set(pending.remaining)))

    def remove_markers_for_txn_topic_partition(self, partition: int) -> None:
        with self._lock:
            for tid in [t for t, p in self._pending.items() if p.partition == partition]:
                del self._pending[tid]

    # -- sender thread --------------------------------------------------------------------------
    def _active(self, pending: _PendingCompletion) -> bool:
        with self._lock:
            if self._pending.get(pending.metadata.transactional_id) is not pending:
                return False
        return self.state_manager.coordinator_epoch_of(pending.partition) == pending.coordinator_epoch

    def _send(self, pending: _PendingCompletion, partitions: set[tuple[str, int]]) -> None:
        if not self._active(pending):
            return
        by_leader: dict[int, list[tuple[str, int]]] = {}
        retry: list[tuple[str, int]] = []
        for tp in sorted(partitions):
            if self.cache.topic(tp[0]) is None or self.cache.partition(*tp) is None:
                _log.info("Skipping the marker of a partition that no longer exists", partition=f"{tp[0]}-{tp[1]}")
                self._partition_done(pending, tp)
                continue
            leader = self.cache.partition(*tp).leader
            broker = self.cache.image.brokers.get(leader) if leader >= 0 else None
            endpoint = broker.listeners.get(self.listener_name) if broker is not None and not broker.fenced else None
            if endpoint is None:
                retry.append(tp)
                continue
            self.send_thread.set_address(leader, endpoint.host, endpoint.port)
            by_leader.setdefault(leader, []).append(tp)
        if retry:
            self._retry(pending, retry)
        m = pending.metadata
        for leader, tps in by_leader.items():
            topics: dict[str, list[int]] = {}
            for t, p in tps:
                topics.setdefault(t, []).append(p)
            body = {
                "markers": [
                    {
                        "producer_id": pending.transit.producer_id,
                        "producer_epoch": pending.transit.producer_epoch,
                        "transaction_result": pending.commit,
                        "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
                        "coordinator_epoch": pending.coordinator_epoch,
                    }
                ]
            }
            _log.debug(
                "Sending transaction markers", transactional_id=m.transactional_id, leader=leader, partitions=tps
            )
            self.send_thread.send(
                leader,
                ApiKeys.WRITE_TXN_MARKERS,
                1,
                body,
                functools.partial(self._on_response, pending, tps),
            )
        self._maybe_complete(pending)

    def _retry(self, pending: _PendingCompletion, tps) -> None:
        self.send_thread.schedule(self.retry_backoff_ms, lambda: self._send(pending, set(tps)))

    def _on_response(self, pending: _PendingCompletion, tps: list[tuple[str, int]], resp, err) -> None:
        if err is not None or resp is None:
            _log.info("WriteTxnMarkers failed; retrying", error=str(err), partitions=tps)
            self._retry(pending, tps)
            return
        codes: dict[tuple[str, int], int] = {}
        for marker in resp.get("markers", []):
            for topic in marker["topics"]:
                for p in topic["partitions"]:
                    codes[(topic["name"], p["partition_index"])] = p["error_code"]
        retry = []
        for tp in tps:
            code = codes.get(tp, errors.UNKNOWN_SERVER_ERROR)
            if code == errors.NONE:
                self._partition_done(pending, tp)
            elif code in _FENCED:
                _log.info(
                    "Stopping the markers of a fenced transaction",
                    transactional_id=pending.metadata.transactional_id,
                    error=errors.name_of(code),
                )
                with self._lock:
                    if self._pending.get(pending.metadata.transactional_id) is pending:
                        del self._pending[pending.metadata.transactional_id]
                return
            else:
                if code not in _RETRIABLE:
                    _log.warning("Unexpected WriteTxnMarkers error; retrying", error=errors.name_of(code), partition=tp)
                retry.append(tp)
        if retry:
            self._retry(pending, retry)
        self._maybe_complete(pending)

    def _partition_done(self, pending: _PendingCompletion, tp: tuple[str, int]) -> None:
        pending.remaining.discard(tp)
        m = pending.metadata
        with m.lock:
            if tp in m.topic_partitions and m.state in _PREPARED and m.pending_state is None:
                m.remove_partition(tp)

    def _maybe_complete(self, pending: _PendingCompletion) -> None:
        if pending.remaining or not self._active(pending):
            return
        with self._lock:
            if self._pending.get(pending.metadata.transactional_id) is not pending:
                return
            del self._pending[pending.metadata.transactional_id]
        self._write_complete(pending)

    def _write_complete(self, pending: _PendingCompletion) -> None:
        m = pending.metadata
        if self.state_manager.coordinator_epoch_of(pending.partition) != pending.coordinator_epoch:
            return
        with m.lock:
            if m.pending_state is not None:
                transit = None  # a retry of the completion still in flight
            else:
                transit = m.prepare_complete(self.time.milliseconds())
        if transit is None:
            return

        def appended(code: int) -> None:
            if code == errors.NONE:
                _log.debug("Completed transaction", transactional_id=m.transactional_id, state=transit.txn_state.name)
            elif code == errors.COORDINATOR_NOT_AVAILABLE:
                self.send_thread.schedule(self.retry_backoff_ms, lambda: self._write_complete(pending))
            else:
                _log.info(
                    "Could not write the completion of a transaction",
                    transactional_id=m.transactional_id,
                    error=errors.name_of(code),
                )

        self.state_manager.append_transaction_to_log(m.transactional_id, pending.coordinator_epoch, transit, appended)
