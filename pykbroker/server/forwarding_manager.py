"""ForwardingManager: the broker's view of the controller when the active controller is another process.

Kafka's brokers forward the controller-bound client requests (CreateTopics, DeleteTopics,
CreatePartitions, IncrementalAlterConfigs, AlterConfigs, UpdateFeatures ...) to the active controller
(``ForwardingManager``, ``AutoTopicCreationManager``) and take producer id blocks from it (``RPCProducerIdManager``:
AllocateProducerIds). This class offers the same calls as the local
:class:`~pykbroker.metadata.quorum_controller.QuorumController` that the handlers use (each returns a
``concurrent.futures.Future`` of the response body). A handler therefore works the same whether the
controller is in this process (the single-node default) or on the controller quorum. Requests go
directly to the controller listener at the newest version both sides support; Kafka's Envelope
(principal forwarding, KIP-590) is not used, because pykbroker has no authorization yet.

The wait is bounded by the request's own ``timeout_ms`` (CreateTopics, DeleteTopics, CreatePartitions),
else by ``default_timeout_ms``. When it runs out the future fails with REQUEST_TIMED_OUT.

Threading: thread-safe (see NodeToControllerChannelManager).
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from pykbroker.protocol.api_keys import ApiKeys
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
    ApiKeys.ALTER_USER_SCRAM_CREDENTIALS: 0,
    ApiKeys.CREATE_ACLS: 3,
    ApiKeys.DELETE_ACLS: 3,
    ApiKeys.UPDATE_FEATURES: 2,
    ApiKeys.ALTER_CLIENT_QUOTAS: 1,
}


class ForwardingManager:
    def __init__(self, channel: NodeToControllerChannelManager, default_timeout_ms: int = 30000):
        self.channel = channel
        self.default_timeout_ms = default_timeout_ms

    def _forward(self, api_key: int, body: dict[str, Any]) -> Future:
        timeout = body.get("timeout_ms")
        if not isinstance(timeout, int) or timeout <= 0:
            timeout = self.default_timeout_ms
        return self.channel.send_request(api_key, VERSIONS[api_key], body, timeout)

    def create_topics(self, request: dict[str, Any], describable: set[str] | None = None, quota=None) -> Future:
        """CreateTopics; the controller's answer has every result (``describable`` is only honoured by a
        local controller). ``quota`` (here and in DeleteTopics/CreatePartitions) is not used: in KRaft the
        controller applies the controller mutation quota, and without Envelope forwarding it sees this
        broker's identity, not the client's (see docs/ARCHITECTURE.md, client quotas)."""
        return self._forward(ApiKeys.CREATE_TOPICS, request)

    def delete_topics(self, request: dict[str, Any], quota=None) -> Future:
        return self._forward(ApiKeys.DELETE_TOPICS, request)

    def create_partitions(self, request: dict[str, Any], quota=None) -> Future:
        return self._forward(ApiKeys.CREATE_PARTITIONS, request)

    def incremental_alter_configs(self, request: dict[str, Any]) -> Future:
        return self._forward(ApiKeys.INCREMENTAL_ALTER_CONFIGS, request)

    def create_acls(self, request: dict[str, Any]) -> Future:
        return self._forward(ApiKeys.CREATE_ACLS, request)

    def delete_acls(self, request: dict[str, Any]) -> Future:
        return self._forward(ApiKeys.DELETE_ACLS, request)

    def alter_user_scram_credentials(self, request: dict[str, Any]) -> Future:
        return self._forward(ApiKeys.ALTER_USER_SCRAM_CREDENTIALS, request)

    def update_features(self, request: dict[str, Any]) -> Future:
        """UpdateFeatures (v2: the top-level error only; the broker's handler adds v0-v1 results)."""
        return self._forward(ApiKeys.UPDATE_FEATURES, request)

    def alter_client_quotas(self, request: dict[str, Any]) -> Future:
        return self._forward(ApiKeys.ALTER_CLIENT_QUOTAS, request)

    def allocate_producer_ids(self, request: dict[str, Any]) -> Future:
        return self._forward(ApiKeys.ALLOCATE_PRODUCER_IDS, request)

    def elect_leaders(self, request: dict[str, Any]) -> Future:
        return self._forward(ApiKeys.ELECT_LEADERS, request)

    def alter_partition(self, request: dict[str, Any]) -> Future:
        """AlterPartition (v3) from this broker's partition leaders (AlterPartitionManager)."""
        return self._forward(ApiKeys.ALTER_PARTITION, request)
