"""The Raft RPCs on the controller listener: Vote (52), BeginQuorumEpoch (53), EndQuorumEpoch (54), Fetch (1)
of ``__cluster_metadata-0``, FetchSnapshot (59) and UpdateRaftVoter (82, KIP-853).

Mirrors ``ControllerApis.handleVote`` and the other Raft handlers, which pass the request to the Raft
manager (``KafkaRaftManager.handleRequest``) and answer from its future. Here the
:class:`~pykbroker.raft.kafka_network_channel.KafkaNetworkChannel` takes the decoded request and calls
back with the response body, from the Raft IO thread. The request handler thread never waits. A body
that does not address ``__cluster_metadata-0`` gets Kafka's answer for it: UNKNOWN_TOPIC_OR_PARTITION for
Fetch, INVALID_REQUEST otherwise.
"""

from __future__ import annotations

from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.raft.raft_messages import (
    BeginQuorumEpochRequestData,
    EndQuorumEpochRequestData,
    FetchRequestData,
    FetchSnapshotRequestData,
    UpdateRaftVoterRequestData,
    VoteRequestData,
)
from pykbroker.raft.raft_wire import RaftWireError, request_from_wire
from pykbroker.server import error_responses


class RaftHandlers:
    def __init__(self, helper, channel):
        self.helper = helper
        self.channel = channel

    def handlers(self) -> dict:
        return {
            ApiKeys.VOTE: self.handle_raft_request,
            ApiKeys.BEGIN_QUORUM_EPOCH: self.handle_raft_request,
            ApiKeys.END_QUORUM_EPOCH: self.handle_raft_request,
            ApiKeys.FETCH: self.handle_raft_request,
            ApiKeys.FETCH_SNAPSHOT: self.handle_raft_request,
            ApiKeys.UPDATE_RAFT_VOTER: self.handle_raft_request,
        }

    def handle_raft_request(self, request) -> None:
        api_key = request.context.api_key
        try:
            data = request_from_wire(api_key, request.body)
        except (RaftWireError, KeyError, TypeError) as e:
            code = errors.UNKNOWN_TOPIC_OR_PARTITION if api_key == ApiKeys.FETCH else errors.INVALID_REQUEST
            body = error_responses.build_error_response(
                api_key, request.context.api_version, request.body, code, str(e)
            )
            if body is None:
                self.helper.close_connection(request)
            else:
                self.helper.send_response(request, body)
            return
        self.channel.handle_inbound(_source_id(data), data, lambda body: self.helper.send_response(request, body))


def _source_id(data) -> int:
    if isinstance(data, VoteRequestData):
        return data.candidate_id
    if isinstance(data, (BeginQuorumEpochRequestData, EndQuorumEpochRequestData)):
        return data.leader_id
    if isinstance(data, UpdateRaftVoterRequestData):
        return data.voter_id
    assert isinstance(data, (FetchRequestData, FetchSnapshotRequestData))
    return data.replica_id
