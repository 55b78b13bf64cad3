"""InitProducerId (key 22) for idempotent producers, with Kafka's broker-side ProducerIdManager.

Mirrors ``RPCProducerIdManager``: producer ids come from blocks of 1000 allocated by the controller
(AllocateProducerIds -> ProducerIdsRecord in the metadata log); the next block is requested when 90%
of the current one is used, so a request waits (asynchronously, no handler thread blocked) only when
a block runs out. Requests with a transactional id go to the TransactionCoordinator (epoch bumps,
fencing, KIP-360 recovery with the producer id and epoch of v3+).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future

from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server import error_responses


class ProducerIdManager:
    """Thread-safe: ``_lock`` guards the current block and the pending block request."""

    def __init__(self, node_id: int, controller, broker_epoch_fn):
        self.node_id = node_id
        self.controller = controller
        self.broker_epoch_fn = broker_epoch_fn
        self._lock = threading.Lock()
        self._next = 0
        self._end = 0  # exclusive
        self._prefetched: tuple[int, int] | None = None
        self._pending: Future | None = None  # Future of an AllocateProducerIds in flight
        self._waiters: list = []

    def generate_producer_id(self, callback) -> None:
        """``callback(error_code, producer_id)``, now or when a new block arrives."""
        with self._lock:
            if self._next >= self._end and self._prefetched is not None:
                self._next, self._end = self._prefetched
                self._prefetched = None
            if self._next < self._end:
                pid = self._next
                self._next += 1
                size = 1000
                if self._end - self._next < size // 10 and self._prefetched is None:
                    self._request_block_locked()
                ready = True
            else:
                self._waiters.append(callback)
                self._request_block_locked()
                ready = False
        if ready:
            callback(errors.NONE, pid)

    def _request_block_locked(self) -> None:
        if self._pending is not None:
            return
        pending = self._pending = self.controller.allocate_producer_ids(
            {"broker_id": self.node_id, "broker_epoch": self.broker_epoch_fn()}
        )
        pending.add_done_callback(self._on_block)

    def _on_block(self, future) -> None:
        try:
            result = future.result()
            code = result["error_code"]
        except Exception as e:  # noqa: BLE001 - any failure of the block request is its error code
            result, code = None, errors.for_exception(e)
        with self._lock:
            self._pending = None
            if code == errors.NONE:
                block = (result["producer_id_start"], result["producer_id_start"] + result["producer_id_len"])
                if self._next >= self._end:
                    self._next, self._end = block
                else:
                    self._prefetched = block
            waiters, self._waiters = self._waiters, []
        for cb in waiters:
            if code == errors.NONE:
                self.generate_producer_id(cb)
            else:
                cb(errors.COORDINATOR_LOAD_IN_PROGRESS, -1)


class InitProducerIdHandler:
    def __init__(self, helper, producer_id_manager: ProducerIdManager, txn_coordinator=None):
        self.helper = helper
        self.manager = producer_id_manager
        self.txn_coordinator = txn_coordinator

    def handlers(self) -> dict:
        return {ApiKeys.INIT_PRODUCER_ID: self.handle_init_producer_id_request}

    def handle_init_producer_id_request(self, request) -> None:
        body = request.body
        if body.get("transactional_id") is not None:
            if self.txn_coordinator is None:
                self.helper.send_response(request, _response(errors.COORDINATOR_NOT_AVAILABLE))
                return
            pid, epoch = body.get("producer_id", -1), body.get("producer_epoch", -1)
            if (pid == -1) != (epoch == -1):
                self.helper.send_response(request, _response(errors.INVALID_REQUEST))
                return
            self.txn_coordinator.handle_init_producer_id(
                body["transactional_id"],
                body["transaction_timeout_ms"],
                None if pid == -1 else (pid, epoch),
                lambda code, p, e: self.helper.send_response(request, _response(code, p, e)),
            )
            return
        self.manager.generate_producer_id(
            lambda code, pid: self.helper.send_response(request, _response(code, pid, 0 if code == errors.NONE else -1))
        )


def _response(code: int, producer_id: int = -1, producer_epoch: int = -1) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": producer_id, "producer_epoch": producer_epoch}


@error_responses.register(ApiKeys.INIT_PRODUCER_ID)
def _init_pid_error(version, body, code, message):
    return _response(code)
