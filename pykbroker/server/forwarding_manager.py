"""ForwardingManager: the broker's view of the controller when the active controller is another process.

Kafka's brokers forward the controller-bound client requests (CreateTopics, DeleteTopics,
CreatePartitions, IncrementalAlterConfigs, AlterConfigs, UpdateFeatures, Alter/ListPartitionReassignments ...)
to the active controller (``ForwardingManager``, ``AutoTopicCreationManager``) and take producer id blocks from it
(``RPCProducerIdManager``: AllocateProducerIds). This class offers the same calls as the local
:class:`~pykbroker.metadata.quorum_controller.QuorumController` that the handlers use (each returns a
``concurrent.futures.Future`` of the response body). A handler therefore works the same whether the
controller is in this process (the single-node default) or on the controller quorum.

A client's request (the handler passes it as ``client``) is forwarded in an Envelope (KIP-590, Kafka's
``ForwardingManager.forwardRequest``): the request with a header carrying the client's correlation id, client id
and, when the handler forwards the client's own body, its api version; the client's principal
(DefaultPrincipalData) and address. The controller authorizes that principal and applies the controller mutation
quota (KIP-599) to that user and client id; its answer comes back inside the EnvelopeResponse, with the quota's
``throttle_time_ms``, which the handler returns to its client (and mutes it for). A body the broker rewrote
(AlterConfigs as IncrementalAlterConfigs, UpdateFeatures) goes at the version of :data:`VERSIONS`. This broker's own
requests (AllocateProducerIds, AlterPartition, topics it creates itself) go without Envelope, under its own
principal. An envelope the controller refuses (CLUSTER_AUTHORIZATION_FAILED: this broker may not forward) fails
the future with that error.

The wait is bounded by the request's own ``timeout_ms`` (CreateTopics, DeleteTopics, CreatePartitions),
else by ``default_timeout_ms``. When it runs out the future fails with REQUEST_TIMED_OUT.

Threading: thread-safe (see NodeToControllerChannelManager).
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server.envelope import ENVELOPE_VERSION, build_envelope, unwrap_response
from pykbroker.server.node_to_controller_channel_manager import NodeToControllerChannelManager

#: Version of each forwarded request (the channel lowers it to what the controller supports).
VERSIONS = {
    ApiKeys.CREATE_TOPICS: 7,
    ApiKeys.DELETE_TOPICS: 6,
    ApiKeys.CREATE_PARTITIONS: 3,
    ApiKeys.INCREMENTAL_ALTER_CONFIGS: 1,
    ApiKeys.ALLOCATE_PRODUCER_IDS: 0,
    ApiKeys.ALTER_PARTITION: 3,
    ApiKeys.ELECT_LEADERS: 2,
    ApiKeys.ALTER_PARTITION_REASSIGNMENTS: 0,
    ApiKeys.LIST_PARTITION_REASSIGNMENTS: 0,
    ApiKeys.ALTER_USER_SCRAM_CREDENTIALS: 0,
    ApiKeys.CREATE_ACLS: 3,
    ApiKeys.DELETE_ACLS: 3,
    ApiKeys.UPDATE_FEATURES: 2,
    ApiKeys.ADD_RAFT_VOTER: 0,
    ApiKeys.REMOVE_RAFT_VOTER: 0,
    ApiKeys.ALTER_CLIENT_QUOTAS: 1,
    ApiKeys.CREATE_DELEGATION_TOKEN: 3,
    ApiKeys.RENEW_DELEGATION_TOKEN: 2,
    ApiKeys.EXPIRE_DELEGATION_TOKEN: 2,
}


class ForwardingManager:
    #: the handlers pass the client's request (``client=``) to have it forwarded in an Envelope
    forwards_clients = True

    def __init__(self, channel: NodeToControllerChannelManager, default_timeout_ms: int = 30000):
        self.channel = channel
        self.default_timeout_ms = default_timeout_ms

    def _forward(self, api_key: ApiKeys, body: dict[str, Any], client: Any = None) -> Future:
        """Send ``body`` to the controller; in an Envelope for ``client`` (a Request) when given."""
        timeout = body.get("timeout_ms")
        if not isinstance(timeout, int) or timeout <= 0:
            timeout = self.default_timeout_ms
        if client is None:
            return self.channel.send_request(api_key, VERSIONS[api_key], body, timeout)
        ctx = client.context
        version = ctx.api_version if (ctx.api_key == api_key and body is client.body) else VERSIONS[api_key]
        try:
            envelope = build_envelope(
                api_key, version, ctx.correlation_id, ctx.client_id, body, ctx.principal, ctx.client_address
            )
        except Exception as e:  # noqa: BLE001 - a body that cannot be encoded: answered with the API's error
            future: Future = Future()
            future.set_exception(errors.UnknownServerError(f"Cannot forward the request: {e}"))
            return future
        return self.channel.send_request(
            ApiKeys.ENVELOPE, ENVELOPE_VERSION, envelope, timeout, lambda r: unwrap_response(api_key, version, r)
        )

    def create_topics(
        self, request: dict[str, Any], describable: set[str] | None = None, quota=None, client=None
    ) -> Future:
        """CreateTopics; the controller's answer has every result (``describable`` is only honoured by a
        local controller). ``quota`` (here and in DeleteTopics/CreatePartitions) is not used: the controller
        applies the controller mutation quota to the ``client`` the request is forwarded for."""
        return self._forward(ApiKeys.CREATE_TOPICS, request, client)

    def delete_topics(self, request: dict[str, Any], quota=None, client=None) -> Future:
        return self._forward(ApiKeys.DELETE_TOPICS, request, client)

    def create_partitions(self, request: dict[str, Any], quota=None, client=None) -> Future:
        return self._forward(ApiKeys.CREATE_PARTITIONS, request, client)

    def incremental_alter_configs(self, request: dict[str, Any], client=None) -> Future:
        return self._forward(ApiKeys.INCREMENTAL_ALTER_CONFIGS, request, client)

    def create_acls(self, request: dict[str, Any], client=None) -> Future:
        return self._forward(ApiKeys.CREATE_ACLS, request, client)

    def delete_acls(self, request: dict[str, Any], client=None) -> Future:
        return self._forward(ApiKeys.DELETE_ACLS, request, client)

    def alter_user_scram_credentials(self, request: dict[str, Any], client=None) -> Future:
        return self._forward(ApiKeys.ALTER_USER_SCRAM_CREDENTIALS, request, client)

    def update_features(self, request: dict[str, Any], client=None) -> Future:
        """UpdateFeatures (v2: the top-level error only; the broker's handler adds v0-v1 results)."""
        return self._forward(ApiKeys.UPDATE_FEATURES, request, client)

    def add_raft_voter(self, request: dict[str, Any], client=None) -> Future:
        """AddRaftVoter (KIP-853), answered by the active controller's Raft client."""
        return self._forward(ApiKeys.ADD_RAFT_VOTER, request, client)

    def remove_raft_voter(self, request: dict[str, Any], client=None) -> Future:
        """RemoveRaftVoter (KIP-853); it has no ``timeout_ms``: the default timeout applies."""
        return self._forward(ApiKeys.REMOVE_RAFT_VOTER, request, client)

    def alter_client_quotas(self, request: dict[str, Any], client=None) -> Future:
        return self._forward(ApiKeys.ALTER_CLIENT_QUOTAS, request, client)

    def create_delegation_token(self, request: dict[str, Any], principal: str, client=None) -> Future:
        """CreateDelegationToken (KIP-48); the controller takes the requester from the Envelope's principal."""
        return self._forward(ApiKeys.CREATE_DELEGATION_TOKEN, request, client)

    def renew_delegation_token(self, request: dict[str, Any], principal: str, client=None) -> Future:
        return self._forward(ApiKeys.RENEW_DELEGATION_TOKEN, request, client)

    def expire_delegation_token(self, request: dict[str, Any], principal: str, client=None) -> Future:
        return self._forward(ApiKeys.EXPIRE_DELEGATION_TOKEN, request, client)

    def allocate_producer_ids(self, request: dict[str, Any]) -> Future:
        return self._forward(ApiKeys.ALLOCATE_PRODUCER_IDS, request)

    def elect_leaders(self, request: dict[str, Any], client=None) -> Future:
        return self._forward(ApiKeys.ELECT_LEADERS, request, client)

    def alter_partition_reassignments(self, request: dict[str, Any], client=None) -> Future:
        return self._forward(ApiKeys.ALTER_PARTITION_REASSIGNMENTS, request, client)

    def list_partition_reassignments(self, request: dict[str, Any], client=None) -> Future:
        return self._forward(ApiKeys.LIST_PARTITION_REASSIGNMENTS, request, client)

    def alter_partition(self, request: dict[str, Any]) -> Future:
        """AlterPartition (v3) from this broker's partition leaders (AlterPartitionManager)."""
        return self._forward(ApiKeys.ALTER_PARTITION, request)
