"""AddRaftVoter (80) and RemoveRaftVoter (81) on the controller listener (KIP-853).

Mirrors ``ControllerApis.handleAddRaftVoter`` / ``handleRemoveRaftVoter``, which hand the request to the Raft
client (``KafkaRaftClient.handleAddVoterRequest`` / ``handleRemoveVoterRequest``: only the leader changes the
voter set, see :meth:`pykbroker.raft.kafka_raft_client.KafkaRaftClient.add_voter`). The answer is sent from
the future's callback (the Raft IO thread): the request handler thread never waits. Errors are Kafka's:
INCONSISTENT_CLUSTER_ID for another cluster's id, NOT_LEADER_OR_FOLLOWER on a controller that does not lead,
DUPLICATE_VOTER / VOTER_NOT_FOUND, UNSUPPORTED_VERSION on a static quorum, REQUEST_TIMED_OUT. Authorization
(ALTER on the cluster) is done by the controller listener's KafkaApis before the handler runs.

:class:`BrokerRaftVoterHandlers` serves them on a broker's listener as Kafka's ``KafkaApis`` does
(``forwardToControllerOrFail``): forwarded in an Envelope to the active controller, which authorizes the client's
principal and answers; in the single-node mode (no forwarding) the node's own Raft client answers.

Threading: stateless; safe from the request handler threads.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future

from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.raft.control_records import Voter, VoterEndpoint
from pykbroker.server import error_responses

#: How long a RemoveRaftVoter may wait for its VotersRecord to commit (it has no timeout_ms field).
REMOVE_TIMEOUT_MS = 30_000


class RaftVoterHandlers:
    """``raft()`` returns the node's Raft client (``KafkaRaftClient``); ``cluster_id`` is this cluster's id."""

    def __init__(self, helper, raft: Callable[[], object], cluster_id: str | None):
        self.helper = helper
        self.raft = raft
        self.cluster_id = cluster_id

    def handlers(self) -> dict:
        return {
            ApiKeys.ADD_RAFT_VOTER: self.handle_add_raft_voter,
            ApiKeys.REMOVE_RAFT_VOTER: self.handle_remove_raft_voter,
        }

    def _error(self, request, code: int, message: str | None = None) -> None:
        self.helper.send_response(
            request,
            {
                "throttle_time_ms": 0,
                "error_code": code,
                "error_message": message or errors.for_code(code).default_message,
            },
        )

    def _answer_when_done(self, request, future: Future) -> None:
        def done(f: Future) -> None:
            code, message = f.result()
            self.helper.send_response(
                request, {"throttle_time_ms": 0, "error_code": code, "error_message": message if code else None}
            )

        future.add_done_callback(done)

    def _check_cluster(self, request) -> bool:
        cluster_id = request.body.get("cluster_id")
        if cluster_id is not None and self.cluster_id is not None and cluster_id != self.cluster_id:
            self._error(request, errors.INCONSISTENT_CLUSTER_ID)
            return False
        return True

    def handle_add_raft_voter(self, request) -> None:
        if not self._check_cluster(request):
            return
        body = request.body
        listeners = tuple(VoterEndpoint(e["name"], e["host"], e["port"]) for e in body.get("listeners") or [])
        if not listeners:
            self._error(request, errors.INVALID_REQUEST, "The new voter must have at least one listener")
            return
        voter = Voter(body["voter_id"], body["voter_directory_id"], listeners)
        raft = self.raft()
        self._answer_when_done(request, raft.add_voter(voter, max(0, body.get("timeout_ms") or 0)))  # type: ignore[attr-defined]

    def handle_remove_raft_voter(self, request) -> None:
        if not self._check_cluster(request):
            return
        body = request.body
        raft = self.raft()
        future = raft.remove_voter(body["voter_id"], body["voter_directory_id"], REMOVE_TIMEOUT_MS)  # type: ignore[attr-defined]
        self._answer_when_done(request, future)


class BrokerRaftVoterHandlers:
    """``controller``: the broker's ForwardingManager (``forwards_clients``) or, in the single-node mode, the local
    QuorumController, in which case ``local`` (the node's :class:`RaftVoterHandlers`) answers."""

    def __init__(self, helper, controller, local: RaftVoterHandlers):
        self.helper = helper
        self.controller = controller
        self.local = local

    def handlers(self) -> dict:
        return {
            ApiKeys.ADD_RAFT_VOTER: self.handle_add_raft_voter,
            ApiKeys.REMOVE_RAFT_VOTER: self.handle_remove_raft_voter,
        }

    def _forward(self, request, send: Callable[..., Future]) -> None:
        def done(f: Future) -> None:
            try:
                body = f.result()
            except Exception as e:  # noqa: BLE001 - NOT_CONTROLLER, timeouts: answered with the code
                code = errors.for_exception(e)
                body = {"throttle_time_ms": 0, "error_code": code, "error_message": str(e) or None}
            self.helper.send_response(request, body)

        send(request.body, client=request).add_done_callback(done)

    def handle_add_raft_voter(self, request) -> None:
        if getattr(self.controller, "forwards_clients", False):
            self._forward(request, self.controller.add_raft_voter)
        else:
            self.local.handle_add_raft_voter(request)

    def handle_remove_raft_voter(self, request) -> None:
        if getattr(self.controller, "forwards_clients", False):
            self._forward(request, self.controller.remove_raft_voter)
        else:
            self.local.handle_remove_raft_voter(request)


@error_responses.register(ApiKeys.ADD_RAFT_VOTER)
@error_responses.register(ApiKeys.REMOVE_RAFT_VOTER)
def _raft_voter_error(version, body, code, message):
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message}
