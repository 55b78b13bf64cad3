"""DescribeQuorum (key 55): the metadata quorum's leader, epoch, high watermark and replica progress
(``KafkaRaftClient.handleDescribeQuorumRequest``, answered by ``ControllerApis`` on controllers and, in
Kafka, forwarded there by brokers).

A request for exactly one topic, ``__cluster_metadata``, with exactly one partition, 0, is answered with
the partition entry ``describe()`` returns (:func:`pykbroker.raft.describe_quorum.describe_quorum` on the
node's Raft client, or a forwarding callable; it raises a KafkaError for a top-level error). Any other
request gets UNKNOWN_TOPIC_OR_PARTITION in each requested partition (Kafka's
``DescribeQuorumRequest.getPartitionLevelErrorResponse``). From v2 the response lists each voter's
endpoints (``nodes``) from ``voter_endpoints()``: ``{node_id: [(listener_name, host, port), ...]}``,
empty on errors as in Kafka. An unexpected exception answers a top-level error with no topics
(``DescribeQuorumRequest.getErrorResponse``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.raft.describe_quorum import METADATA_PARTITION, METADATA_TOPIC, partition_error
from pykbroker.server import error_responses

VoterEndpoints = Mapping[int, Sequence[tuple[str, str, int]]]

if TYPE_CHECKING:  # start-up time (issue 31): a generated message type, for the type checker only
    from pykbroker.raft.describe_quorum import PartitionData


class DescribeQuorumHandler:
    """Stateless; ``describe`` and ``voter_endpoints`` must be safe from the request handler threads."""

    def __init__(
        self,
        helper,
        describe: Callable[[], PartitionData],
        voter_endpoints: Callable[[], VoterEndpoints] = dict,
    ):
        self.helper = helper
        self.describe = describe
        self.voter_endpoints = voter_endpoints

    def handlers(self) -> dict:
        return {ApiKeys.DESCRIBE_QUORUM: self.handle_describe_quorum_request}

    def handle_describe_quorum_request(self, request) -> None:
        version = request.context.header.api_version
        topics = request.body["topics"]
        if not _is_metadata_partition(topics):
            body = {
                "error_code": errors.NONE,
                "error_message": None,
                "topics": [
                    {
                        "topic_name": t["topic_name"],
                        "partitions": [
                            partition_error(p["partition_index"], errors.UNKNOWN_TOPIC_OR_PARTITION)
                            for p in t["partitions"]
                        ],
                    }
                    for t in topics
                ],
                "nodes": [],
            }
            self.helper.send_response(request, body)
            return
        partition = self.describe()
        nodes = []
        if version >= 2 and partition["error_code"] == errors.NONE:
            endpoints = self.voter_endpoints()
            nodes = [
                {
                    "node_id": voter["replica_id"],
                    "listeners": [
                        {"name": name, "host": host, "port": port}
                        for name, host, port in endpoints.get(voter["replica_id"], ())
                    ],
                }
                for voter in partition["current_voters"]
            ]
        body = {
            "error_code": errors.NONE,
            "error_message": None,
            "topics": [{"topic_name": METADATA_TOPIC, "partitions": [partition]}],
            "nodes": nodes,
        }
        self.helper.send_response(request, body)


def _is_metadata_partition(topics: list[dict]) -> bool:
    """Kafka's ``RaftUtil.hasValidTopicPartition``: one topic, the metadata topic, one partition, 0."""
    return (
        len(topics) == 1
        and topics[0]["topic_name"] == METADATA_TOPIC
        and len(topics[0]["partitions"]) == 1
        and topics[0]["partitions"][0]["partition_index"] == METADATA_PARTITION
    )


@error_responses.register(ApiKeys.DESCRIBE_QUORUM)
def _describe_quorum_error(version, body, code, message):
    return {"error_code": code, "error_message": None, "topics": [], "nodes": []}  # getTopLevelErrorResponse
