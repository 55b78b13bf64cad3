"""Share group state APIs, spoken by share partition leaders to the share coordinator (KIP-932):
InitializeShareGroupState 83, ReadShareGroupState 84, WriteShareGroupState 85, DeleteShareGroupState 86,
ReadShareGroupStateSummary 87 (``KafkaApis.handle*ShareGroupState*Request``).

The sender needs CLUSTER_ACTION on the cluster (brokers only): otherwise every partition answers
CLUSTER_AUTHORIZATION_FAILED. Each partition of the request goes to the
:class:`~pykbroker.coordinator.share.share_coordinator.ShareCoordinator` on its own (NOT_COORDINATOR when this
broker does not lead its ``__share_group_state`` partition, COORDINATOR_LOAD_IN_PROGRESS while it loads); the
response is sent once every partition answered, topics in request order. Without a share coordinator (None) every
partition answers COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from pykbroker.coordinator.share.persister import PersisterStateBatch, ReadStateResult, ReadSummaryResult
from pykbroker.protocol import errors
from pykbroker.protocol.acl import AclOperation
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.resource import CLUSTER_NAME, ResourceType
from pykbroker.server import error_responses


def _batches_out(batches) -> list[dict]:
    return [
        {
            "first_offset": b.first_offset,
            "last_offset": b.last_offset,
            "delivery_state": b.delivery_state,
            "delivery_count": b.delivery_count,
        }
        for b in batches
    ]


def _code_result(code: int) -> dict:
    return {"error_code": code, "error_message": None if code == errors.NONE else errors.name_of(code)}


def _read_result(r: ReadStateResult) -> dict:
    return dict(
        _code_result(r.error_code),
        state_epoch=r.state_epoch,
        start_offset=r.start_offset,
        state_batches=_batches_out(r.state_batches),
    )


def _summary_result(r: ReadSummaryResult) -> dict:
    return dict(
        _code_result(r.error_code),
        state_epoch=r.state_epoch,
        leader_epoch=r.leader_epoch,
        start_offset=r.start_offset,
        delivery_complete_count=r.delivery_complete_count,
    )


_ERROR_RESULTS: dict[int, Callable[[int], dict]] = {
    ApiKeys.INITIALIZE_SHARE_GROUP_STATE: _code_result,
    ApiKeys.WRITE_SHARE_GROUP_STATE: _code_result,
    ApiKeys.DELETE_SHARE_GROUP_STATE: _code_result,
    ApiKeys.READ_SHARE_GROUP_STATE: lambda code: _read_result(ReadStateResult(code, -1, -1)),
    ApiKeys.READ_SHARE_GROUP_STATE_SUMMARY: lambda code: _summary_result(ReadSummaryResult(code, -1, -1)),
}


def _error_response(api_key: int):
    """Kafka's ``*ShareGroupStateRequest.getErrorResponse``: every partition of the request gets the error."""

    def build(version: int, body: dict, error_code: int, message: str | None) -> dict:
        def result() -> dict:
            r = _ERROR_RESULTS[api_key](error_code)
            return dict(r, error_message=message if message is not None else r["error_message"])

        return {
            "results": [
                {
                    "topic_id": t["topic_id"],
                    "partitions": [dict(result(), partition=p["partition"]) for p in t["partitions"]],
                }
                for t in body.get("topics", [])
            ]
        }

    return build


for _key in _ERROR_RESULTS:
    error_responses.register(_key)(_error_response(_key))


class ShareStateHandlers:
    def __init__(self, helper, share_coordinator):
        self.helper = helper
        #: the ShareCoordinator (None: every partition answers COORDINATOR_NOT_AVAILABLE)
        self.coordinator = share_coordinator

    def handlers(self) -> dict:
        return {
            ApiKeys.INITIALIZE_SHARE_GROUP_STATE: self.handle_initialize_share_group_state_request,
            ApiKeys.READ_SHARE_GROUP_STATE: self.handle_read_share_group_state_request,
            ApiKeys.WRITE_SHARE_GROUP_STATE: self.handle_write_share_group_state_request,
            ApiKeys.DELETE_SHARE_GROUP_STATE: self.handle_delete_share_group_state_request,
            ApiKeys.READ_SHARE_GROUP_STATE_SUMMARY: self.handle_read_share_group_state_summary_request,
        }

    def _each_partition(self, request, api_key: int, run: Callable[[str, dict, dict, Callable], None]) -> None:
        """``run(group_id, topic, partition, done)`` per partition, ``done(result dict)`` once each; responds once
        all answered."""
        body = request.body
        topics = body["topics"]
        slots: list[list[dict | None]] = [[None] * len(t["partitions"]) for t in topics]
        remaining = [sum(len(s) for s in slots)]
        lock = threading.Lock()

        def respond() -> None:
            results = [
                {
                    "topic_id": t["topic_id"],
                    "partitions": [
                        dict(r or {}, partition=p["partition"]) for p, r in zip(t["partitions"], s, strict=True)
                    ],
                }
                for t, s in zip(topics, slots, strict=True)
            ]
            self.helper.send_response(request, {"results": results})

        if remaining[0] == 0:
            respond()
            return
        error = None
        if not self.helper.authorize(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            error = errors.CLUSTER_AUTHORIZATION_FAILED
        elif self.coordinator is None:
            error = errors.COORDINATOR_NOT_AVAILABLE
        for ti, t in enumerate(topics):
            for pi, p in enumerate(t["partitions"]):

                def done(result: dict, ti: int = ti, pi: int = pi) -> None:
                    with lock:
                        slots[ti][pi] = result
                        remaining[0] -= 1
                        last = remaining[0] == 0
                    if last:
                        respond()

                if error is not None:
                    done(_ERROR_RESULTS[api_key](error))
                else:
                    run(body["group_id"], t, p, done)

    def handle_initialize_share_group_state_request(self, request) -> None:
        def run(group_id, t, p, done) -> None:
            self.coordinator.initialize_state(
                group_id,
                t["topic_id"],
                p["partition"],
                p["state_epoch"],
                p["start_offset"],
                lambda code: done(_code_result(code)),
            )

        self._each_partition(request, ApiKeys.INITIALIZE_SHARE_GROUP_STATE, run)

    def handle_read_share_group_state_request(self, request) -> None:
        def run(group_id, t, p, done) -> None:
            self.coordinator.read_state(
                group_id, t["topic_id"], p["partition"], p["leader_epoch"], lambda r: done(_read_result(r))
            )

        self._each_partition(request, ApiKeys.READ_SHARE_GROUP_STATE, run)

    def handle_write_share_group_state_request(self, request) -> None:
        def run(group_id, t, p, done) -> None:
            batches = tuple(
                PersisterStateBatch(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
                for b in p["state_batches"]
            )
            self.coordinator.write_state(
                group_id,
                t["topic_id"],
                p["partition"],
                p["state_epoch"],
                p["leader_epoch"],
                p["start_offset"],
                batches,
                lambda code: done(_code_result(code)),
                p.get("delivery_complete_count", -1),
            )

        self._each_partition(request, ApiKeys.WRITE_SHARE_GROUP_STATE, run)

    def handle_delete_share_group_state_request(self, request) -> None:
        def run(group_id, t, p, done) -> None:
            self.coordinator.delete_state(
                group_id, t["topic_id"], p["partition"], lambda code: done(_code_result(code))
            )

        self._each_partition(request, ApiKeys.DELETE_SHARE_GROUP_STATE, run)

    def handle_read_share_group_state_summary_request(self, request) -> None:
        def run(group_id, t, p, done) -> None:
            self.coordinator.read_summary(group_id, t["topic_id"], p["partition"], lambda r: done(_summary_result(r)))

        self._each_partition(request, ApiKeys.READ_SHARE_GROUP_STATE_SUMMARY, run)
