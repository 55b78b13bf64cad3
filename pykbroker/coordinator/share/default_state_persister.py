"""DefaultStatePersister: the :class:`~pykbroker.coordinator.share.persister.Persister` that keeps share partitions'
state with the share coordinator, over the network (KIP-932).

Mirrors Kafka's ``DefaultStatePersister`` and ``PersisterStateManager``: each call finds the coordinator of its
share partition with FindCoordinator (key type SHARE = 2, key ``group:topicId:partition``; asked of this broker
when it is alive in the metadata, else of another live broker), remembers it, and sends the state RPC
(InitializeShareGroupState 83, ReadShareGroupState 84, WriteShareGroupState 85, DeleteShareGroupState 86,
ReadShareGroupStateSummary 87) to it. COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS
(from either RPC) and lost connections are retried with an exponential back-off (``retry_backoff_ms`` doubling up
to ``retry_backoff_max_ms``, the coordinator looked up again) until ``timeout_ms`` after the call; then the future
completes with the last such error code (COORDINATOR_NOT_AVAILABLE for a lost connection). Any other code
completes the future at once.

``brokers()`` gives the live brokers as ``[(node id, host, port)]`` on the inter-broker listener (the server passes
a view of its metadata cache).

Threading: the calls are thread-safe and never block; the work and the completion of every future happen on the
persister's own send thread (``PersisterStateManager-<node id>``), so callbacks chained on the futures run there
and must be quick. After :meth:`stop` new calls fail their futures with RuntimeError, and calls still pending
complete with COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from pykbroker.clients.inter_broker_send_thread import InterBrokerSendThread
from pykbroker.coordinator.share.persister import (
    PersisterStateBatch,
    ReadStateResult,
    ReadSummaryResult,
)
from pykbroker.coordinator.share.share_coordinator_records import coordinator_key
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.security.client_security import PLAINTEXT, ClientSecurity
from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import SYSTEM, Time

_log = get_logger("DefaultStatePersister")

SHARE_KEY_TYPE = 2
_RETRIABLE = frozenset({errors.COORDINATOR_NOT_AVAILABLE, errors.NOT_COORDINATOR, errors.COORDINATOR_LOAD_IN_PROGRESS})
# Kafka 4.2's v1 (KIP-1226: delivery_complete_count); the others are v0
_VERSIONS: dict[int, int] = {ApiKeys.WRITE_SHARE_GROUP_STATE: 1, ApiKeys.READ_SHARE_GROUP_STATE_SUMMARY: 1}
# Codes after which the coordinator is looked up again (a loading coordinator is still the coordinator).
_REDISCOVER = frozenset({errors.COORDINATOR_NOT_AVAILABLE, errors.NOT_COORDINATOR})


class _Call:
    """One persister call until its future completes."""

    __slots__ = ("api_key", "attempts", "body", "deadline", "future", "key", "result_of")

    def __init__(self, api_key: int, key: str, body: dict, result_of: Callable[[dict | None, int], Any], deadline):
        self.api_key = api_key
        self.key = key
        self.body = body
        self.result_of = result_of  # (partition result or None, error code) -> the future's value
        self.deadline = deadline
        self.future: Future = Future()
        self.attempts = 0


def _batches(batches) -> list[dict]:
    return [
        {
            "first_offset": b.first_offset,
            "last_offset": b.last_offset,
            "delivery_state": b.delivery_state,
            "delivery_count": b.delivery_count,
        }
        for b in batches
    ]


def _code(p: dict | None, code: int) -> int:
    return code if p is None else p["error_code"]


def _read(p: dict | None, code: int) -> ReadStateResult:
    if p is None or p["error_code"] != errors.NONE:
        return ReadStateResult(_code(p, code), -1, -1, (), None if p is None else p.get("error_message"))
    batches = tuple(
        PersisterStateBatch(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
        for b in p["state_batches"]
    )
    return ReadStateResult(errors.NONE, p["state_epoch"], p["start_offset"], batches)


def _summary(p: dict | None, code: int) -> ReadSummaryResult:
    if p is None or p["error_code"] != errors.NONE:
        return ReadSummaryResult(_code(p, code), -1, -1, None if p is None else p.get("error_message"))
    return ReadSummaryResult(
        errors.NONE,
        p["state_epoch"],
        p["start_offset"],
        None,
        p.get("leader_epoch", -1),
        p.get("delivery_complete_count", -1),
    )


class DefaultStatePersister:
    def __init__(
        self,
        node_id: int,
        brokers: Callable[[], list[tuple[int, str, int]]],
        timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        security: ClientSecurity = PLAINTEXT,
        time: Time = SYSTEM,
    ):
        self.node_id = node_id
        self.brokers = brokers
        self.timeout_ms = timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.time = time
        self.send_thread = InterBrokerSendThread(
            f"PersisterStateManager-{node_id}",
            f"broker-{node_id}-share-persister",
            timeout_ms,
            time=time,
            security=security,
        )
        self._lock = threading.Lock()
        self._pending: set[_Call] = set()  # guarded by _lock
        self._coordinators: dict[str, int] = {}  # coordinator key -> node id; send thread only
        self._stopped = False
        self._started = False

    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
        self.send_thread.start()

    # -- Persister ------------------------------------------------------------------------------------
    def initialize_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, start_offset: int
    ) -> Future[int]:
        p = {"partition": partition, "state_epoch": state_epoch, "start_offset": start_offset}
        return self._call(ApiKeys.INITIALIZE_SHARE_GROUP_STATE, group_id, topic_id, p, _code)

    def read_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> Future[ReadStateResult]:
        p = {"partition": partition, "leader_epoch": leader_epoch}
        return self._call(ApiKeys.READ_SHARE_GROUP_STATE, group_id, topic_id, p, _read)

    def write_state(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        state_batches: tuple[PersisterStateBatch, ...],
        delivery_complete_count: int = -1,
    ) -> Future[int]:
        p = {
            "partition": partition,
            "state_epoch": state_epoch,
            "leader_epoch": leader_epoch,
            "start_offset": start_offset,
            "delivery_complete_count": delivery_complete_count,
            "state_batches": _batches(state_batches),
        }
        return self._call(ApiKeys.WRITE_SHARE_GROUP_STATE, group_id, topic_id, p, _code)

    def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> Future[int]:
        return self._call(ApiKeys.DELETE_SHARE_GROUP_STATE, group_id, topic_id, {"partition": partition}, _code)

    def read_summary(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> Future[ReadSummaryResult]:
        p = {"partition": partition, "leader_epoch": leader_epoch}
        return self._call(ApiKeys.READ_SHARE_GROUP_STATE_SUMMARY, group_id, topic_id, p, _summary)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            pending, self._pending = list(self._pending), set()
        if self._started:
            self.send_thread.shutdown()
        for call in pending:
            self._complete(call, None, errors.COORDINATOR_NOT_AVAILABLE)

    # -- the send thread ------------------------------------------------------------------------------
    def _call(self, api_key: int, group_id: str, topic_id: uuid.UUID, partition: dict, result_of) -> Future:
        body = {"group_id": group_id, "topics": [{"topic_id": topic_id, "partitions": [partition]}]}
        key = coordinator_key(group_id, topic_id, partition["partition"])
        call = _Call(api_key, key, body, result_of, self.time.milliseconds() + self.timeout_ms)
        with self._lock:
            if self._stopped:
                call.future.set_exception(RuntimeError("the persister is stopped"))
                return call.future
            self._pending.add(call)
        self.start()
        self.send_thread.schedule(0, lambda: self._attempt(call))
        return call.future

    def _complete(self, call: _Call, partition: dict | None, code: int) -> None:
        with self._lock:
            self._pending.discard(call)
        if call.future.done():
            return
        try:
            call.future.set_result(call.result_of(partition, code))
        except Exception as e:  # noqa: BLE001 - a malformed answer is a bug: the future carries it
            if not call.future.done():
                call.future.set_exception(e)

    def _retry(self, call: _Call, code: int) -> None:
        """Back off and try again, or complete with ``code`` once the call's time is up."""
        if code in _REDISCOVER:
            self._coordinators.pop(call.key, None)
        call.attempts += 1
        backoff = min(self.retry_backoff_max_ms, self.retry_backoff_ms * (2 ** min(call.attempts - 1, 16)))
        if self.time.milliseconds() + backoff >= call.deadline:
            _log.info("Giving up on a share state call", api_key=call.api_key, key=call.key, error=errors.name_of(code))
            self._complete(call, None, code)
            return
        self.send_thread.schedule(backoff, lambda: self._attempt(call))

    def _attempt(self, call: _Call) -> None:
        if call.future.done():
            return
        node = self._coordinators.get(call.key)
        if node is None:
            self._find_coordinator(call)
            return
        version = _VERSIONS.get(call.api_key, 0)  # at most the coordinator's newest (InterBrokerSendThread)
        self.send_thread.send(
            node, call.api_key, version, call.body, lambda resp, err: self._on_response(call, resp, err)
        )

    def _find_coordinator(self, call: _Call) -> None:
        brokers = self.brokers()
        if not brokers:
            self._retry(call, errors.COORDINATOR_NOT_AVAILABLE)
            return
        mine = [b for b in brokers if b[0] == self.node_id]
        node, host, port = (mine or brokers)[call.attempts % len(mine or brokers)]
        self.send_thread.set_address(node, host, port)
        body = {"key_type": SHARE_KEY_TYPE, "coordinator_keys": [call.key]}
        self.send_thread.send(
            node, ApiKeys.FIND_COORDINATOR, 6, body, lambda resp, err: self._on_coordinator(call, resp, err)
        )

    def _on_coordinator(self, call: _Call, resp: dict | None, err: Exception | None) -> None:
        if err is not None or resp is None:
            self._retry(call, errors.COORDINATOR_NOT_AVAILABLE)
            return
        found = resp["coordinators"][0] if resp.get("coordinators") else resp
        code = found["error_code"]
        if code != errors.NONE:
            if code in _RETRIABLE:
                self._retry(call, code)
            else:
                self._complete(call, None, code)
            return
        self._coordinators[call.key] = found["node_id"]
        self.send_thread.set_address(found["node_id"], found["host"], found["port"])
        self._attempt(call)

    def _on_response(self, call: _Call, resp: dict | None, err: Exception | None) -> None:
        if err is not None or resp is None:
            self._retry(call, errors.COORDINATOR_NOT_AVAILABLE)
            return
        try:
            partition = resp["results"][0]["partitions"][0]
        except (KeyError, IndexError):
            self._complete(call, None, errors.UNKNOWN_SERVER_ERROR)
            return
        code = partition["error_code"]
        if code in _RETRIABLE:
            self._retry(call, code)
        else:
            self._complete(call, partition, code)
