"""KafkaApis: the thin dispatcher from API key to handler.

Mirrors ``kafka.server.KafkaApis.handle``: look up the handler registered for the request's API key and
call it on the handler thread; any exception becomes that API's error response (error code from
``errors.for_exception``, UNKNOWN_SERVER_ERROR for unexpected ones; see
:mod:`pykbroker.server.error_responses`) or, where the API cannot carry an error (acks=0 produce) or
the error response cannot be built, closes the connection. Handlers live in
:mod:`pykbroker.server.handlers`, one module per API family, each registering
``{api_key: callable(request)}`` through :meth:`register`.
Thread-safe: called concurrently by all request handler threads; holds no mutable state of its own.
"""

from __future__ import annotations

from collections.abc import Callable

from pykbroker.network.request_channel import Request
from pykbroker.protocol import errors
from pykbroker.protocol.acl import AclOperation
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.config_resource import ConfigResourceType
from pykbroker.protocol.resource import CLUSTER_NAME, ResourceType
from pykbroker.server.error_responses import build_error_response
from pykbroker.server.request_helper import RequestHelper
from pykbroker.utils.logging import get_logger

# API -> (operation, resource type, body key of the resource name, error) of the checks Kafka makes on the
# request's one group, transactional id or the cluster before anything else (AuthHelper.authorize in each
# KafkaApis handler); per-topic checks are in the handlers (Produce, Fetch, Metadata, OffsetCommit...).
_RESOURCE_CHECKS: dict[int, tuple[int, int, str | None, type[errors.KafkaError]]] = {
    ApiKeys.JOIN_GROUP: (AclOperation.READ, ResourceType.GROUP, "group_id", errors.GroupAuthorizationError),
    ApiKeys.SYNC_GROUP: (AclOperation.READ, ResourceType.GROUP, "group_id", errors.GroupAuthorizationError),
    ApiKeys.HEARTBEAT: (AclOperation.READ, ResourceType.GROUP, "group_id", errors.GroupAuthorizationError),
    ApiKeys.LEAVE_GROUP: (AclOperation.READ, ResourceType.GROUP, "group_id", errors.GroupAuthorizationError),
    ApiKeys.OFFSET_COMMIT: (AclOperation.READ, ResourceType.GROUP, "group_id", errors.GroupAuthorizationError),
    ApiKeys.OFFSET_DELETE: (AclOperation.DELETE, ResourceType.GROUP, "group_id", errors.GroupAuthorizationError),
    ApiKeys.TXN_OFFSET_COMMIT: (AclOperation.READ, ResourceType.GROUP, "group_id", errors.GroupAuthorizationError),
    ApiKeys.ADD_OFFSETS_TO_TXN: (
        AclOperation.WRITE,
        ResourceType.TRANSACTIONAL_ID,
        "transactional_id",
        errors.TransactionalIdAuthorizationError,
    ),
    ApiKeys.END_TXN: (
        AclOperation.WRITE,
        ResourceType.TRANSACTIONAL_ID,
        "transactional_id",
        errors.TransactionalIdAuthorizationError,
    ),
    ApiKeys.CREATE_ACLS: (AclOperation.ALTER, ResourceType.CLUSTER, None, errors.ClusterAuthorizationError),
    ApiKeys.DELETE_ACLS: (AclOperation.ALTER, ResourceType.CLUSTER, None, errors.ClusterAuthorizationError),
    ApiKeys.DESCRIBE_ACLS: (AclOperation.DESCRIBE, ResourceType.CLUSTER, None, errors.ClusterAuthorizationError),
    ApiKeys.ALTER_USER_SCRAM_CREDENTIALS: (
        AclOperation.ALTER,
        ResourceType.CLUSTER,
        None,
        errors.ClusterAuthorizationError,
    ),
    ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS: (
        AclOperation.DESCRIBE,
        ResourceType.CLUSTER,
        None,
        errors.ClusterAuthorizationError,
    ),
    ApiKeys.ELECT_LEADERS: (AclOperation.ALTER, ResourceType.CLUSTER, None, errors.ClusterAuthorizationError),
    ApiKeys.ALTER_PARTITION_REASSIGNMENTS: (
        AclOperation.ALTER,
        ResourceType.CLUSTER,
        None,
        errors.ClusterAuthorizationError,
    ),
    ApiKeys.LIST_PARTITION_REASSIGNMENTS: (
        AclOperation.DESCRIBE,
        ResourceType.CLUSTER,
        None,
        errors.ClusterAuthorizationError,
    ),
    ApiKeys.UPDATE_FEATURES: (AclOperation.ALTER, ResourceType.CLUSTER, None, errors.ClusterAuthorizationError),
    ApiKeys.DESCRIBE_CLIENT_QUOTAS: (
        AclOperation.DESCRIBE_CONFIGS,
        ResourceType.CLUSTER,
        None,
        errors.ClusterAuthorizationError,
    ),
    ApiKeys.ALTER_CLIENT_QUOTAS: (
        AclOperation.ALTER_CONFIGS,
        ResourceType.CLUSTER,
        None,
        errors.ClusterAuthorizationError,
    ),
    ApiKeys.DESCRIBE_LOG_DIRS: (AclOperation.DESCRIBE, ResourceType.CLUSTER, None, errors.ClusterAuthorizationError),
    ApiKeys.WRITE_TXN_MARKERS: (
        AclOperation.CLUSTER_ACTION,
        ResourceType.CLUSTER,
        None,
        errors.ClusterAuthorizationError,
    ),
    ApiKeys.DESCRIBE_QUORUM: (AclOperation.DESCRIBE, ResourceType.CLUSTER, None, errors.ClusterAuthorizationError),
    ApiKeys.ADD_PARTITIONS_TO_TXN: (
        AclOperation.WRITE,
        ResourceType.TRANSACTIONAL_ID,
        "v3_and_below_transactional_id",
        errors.TransactionalIdAuthorizationError,
    ),
}
# The controller listener's APIs (Kafka's ControllerApis): node-to-node traffic needs CLUSTER_ACTION on the
# cluster (Fetch there is Raft's; Envelope: only brokers forward); UnregisterBroker and UpdateFeatures ALTER;
# DescribeQuorum DESCRIBE.
_CONTROLLER_CHECKS: dict[int, int] = {
    ApiKeys.VOTE: AclOperation.CLUSTER_ACTION,
    ApiKeys.BEGIN_QUORUM_EPOCH: AclOperation.CLUSTER_ACTION,
    ApiKeys.END_QUORUM_EPOCH: AclOperation.CLUSTER_ACTION,
    ApiKeys.FETCH: AclOperation.CLUSTER_ACTION,
    ApiKeys.FETCH_SNAPSHOT: AclOperation.CLUSTER_ACTION,
    ApiKeys.BROKER_REGISTRATION: AclOperation.CLUSTER_ACTION,
    ApiKeys.BROKER_HEARTBEAT: AclOperation.CLUSTER_ACTION,
    ApiKeys.ALLOCATE_PRODUCER_IDS: AclOperation.CLUSTER_ACTION,
    ApiKeys.ASSIGN_REPLICAS_TO_DIRS: AclOperation.CLUSTER_ACTION,
    ApiKeys.ALTER_PARTITION: AclOperation.CLUSTER_ACTION,
    ApiKeys.UNREGISTER_BROKER: AclOperation.ALTER,
    ApiKeys.UPDATE_FEATURES: AclOperation.ALTER,
    ApiKeys.DESCRIBE_QUORUM: AclOperation.DESCRIBE,
    ApiKeys.ENVELOPE: AclOperation.CLUSTER_ACTION,
    ApiKeys.ADD_RAFT_VOTER: AclOperation.ALTER,
    ApiKeys.REMOVE_RAFT_VOTER: AclOperation.ALTER,
    ApiKeys.UPDATE_RAFT_VOTER: AclOperation.CLUSTER_ACTION,
}
_CONFIG_RESOURCES = {
    ConfigResourceType.TOPIC: (ResourceType.TOPIC, errors.TopicAuthorizationError),
    ConfigResourceType.BROKER: (ResourceType.CLUSTER, errors.ClusterAuthorizationError),
}


def _body(request: Request) -> dict:
    """The decoded request body: None only for a too-new ApiVersions request, which no check here reads."""
    body = request.body
    assert body is not None
    return body


def _topic_names(helper: RequestHelper, request: Request) -> list[str]:
    """The topics a DeleteTopics, CreatePartitions or DeleteRecords request names."""
    key = request.context.api_key
    body = _body(request)
    if key == ApiKeys.DELETE_TOPICS:
        # A topic named by id only is checked under its name from the broker's metadata (an unknown id is left
        # to the handler, which answers UNKNOWN_TOPIC_ID as Kafka does).
        names = []
        for t in body.get("topics") or []:
            name = t.get("name")
            if name is None:  # a controller without the metadata cache checks under the id (wildcard ACLs)
                topic_id = t.get("topic_id")
                name = helper.topic_name(topic_id) if helper.topic_name is not None else str(topic_id)
            if name is not None:
                names.append(name)
        return names + list(body.get("topic_names") or [])
    return [t["name"] for t in body["topics"]]


_TOPIC_CHECKS: dict[int, int] = {
    ApiKeys.DELETE_TOPICS: AclOperation.DELETE,
    ApiKeys.CREATE_PARTITIONS: AclOperation.ALTER,
    ApiKeys.DELETE_RECORDS: AclOperation.DELETE,
}
_CONFIG_CHECKS: dict[int, int] = {
    ApiKeys.DESCRIBE_CONFIGS: AclOperation.DESCRIBE_CONFIGS,
    ApiKeys.ALTER_CONFIGS: AclOperation.ALTER_CONFIGS,
    ApiKeys.INCREMENTAL_ALTER_CONFIGS: AclOperation.ALTER_CONFIGS,
}


def check_resource_authorization(helper: RequestHelper, request: Request, controller_plane: bool = False) -> None:
    """Raise the API's authorization error when its principal may not act on the request's resource.
    ``controller_plane``: the request came in on the controller listener (ControllerApis' checks first)."""
    key = request.context.api_key
    if controller_plane and key in _CONTROLLER_CHECKS:
        if not helper.authorize(request, _CONTROLLER_CHECKS[key], ResourceType.CLUSTER, CLUSTER_NAME):
            raise errors.ClusterAuthorizationError("Cluster authorization failed.")
        return
    if key in _TOPIC_CHECKS:
        if not all(
            helper.authorize(request, _TOPIC_CHECKS[key], ResourceType.TOPIC, t) for t in _topic_names(helper, request)
        ):
            raise errors.TopicAuthorizationError("Topic authorization failed.")
        return
    if key in _CONFIG_CHECKS:
        for r in _body(request)["resources"]:
            rtype, error = _CONFIG_RESOURCES.get(
                r["resource_type"], (ResourceType.GROUP, errors.GroupAuthorizationError)
            )
            name = CLUSTER_NAME if rtype == ResourceType.CLUSTER else r["resource_name"]
            if not helper.authorize(request, _CONFIG_CHECKS[key], rtype, name):
                raise error(error.default_message)
        return
    if key == ApiKeys.ADD_PARTITIONS_TO_TXN and request.context.api_version >= 4:
        # the broker-to-broker (verification) form: CLUSTER_ACTION
        if not helper.authorize(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            raise errors.ClusterAuthorizationError("Cluster authorization failed.")
        return
    check = _RESOURCE_CHECKS.get(key)
    if check is None:
        if request.context.api_key == ApiKeys.FIND_COORDINATOR:
            _check_find_coordinator(helper, request)
        elif request.context.api_key == ApiKeys.INIT_PRODUCER_ID:
            tid = _body(request).get("transactional_id")
            if tid is not None and not helper.authorize(
                request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid
            ):
                raise errors.TransactionalIdAuthorizationError("Transactional Id authorization failed.")
            if tid is None and not (
                helper.authorize(request, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME)
                or helper.authorizer.authorize_any(
                    request.context.principal, request.context.client_address, AclOperation.WRITE, ResourceType.TOPIC
                )
            ):
                # KIP-679: an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
                raise errors.ClusterAuthorizationError("Cluster authorization failed.")
        elif request.context.api_key == ApiKeys.CREATE_TOPICS:
            names = [t["name"] for t in _body(request)["topics"]]
            if not helper.authorize(request, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME) and not all(
                helper.authorize(request, AclOperation.CREATE, ResourceType.TOPIC, n) for n in names
            ):
                raise errors.TopicAuthorizationError("Topic authorization failed.")
        return
    operation, resource_type, field, error = check
    name = CLUSTER_NAME if field is None else _body(request).get(field)
    if name is not None and not helper.authorize(request, operation, resource_type, name):
        raise error(error.default_message)


def _check_find_coordinator(helper: RequestHelper, request: Request) -> None:
    body = _body(request)
    key_type = body.get("key_type", 0)
    keys = body["coordinator_keys"] if request.context.api_version >= 4 else [body["key"]]
    resource_type = ResourceType.TRANSACTIONAL_ID if key_type == 1 else ResourceType.GROUP
    for key in keys:
        if not helper.authorize(request, AclOperation.DESCRIBE, resource_type, key):
            if key_type == 1:
                raise errors.TransactionalIdAuthorizationError("Transactional Id authorization failed.")
            raise errors.GroupAuthorizationError("Group authorization failed.")


class KafkaApis:
    def __init__(self, node_id: int, request_helper: RequestHelper, time, controller_plane: bool = False):
        """``controller_plane``: this instance serves the controller listener (ControllerApis' checks)."""
        self.node_id = node_id
        self.controller_plane = controller_plane
        self.helper = request_helper
        self.time = time
        self.handlers: dict[int, Callable[[Request], None]] = {}
        self.after_handle: list[Callable[[], None]] = []  # e.g. ReplicaManager.try_complete_actions
        self.log = get_logger("KafkaApi", nodeId=node_id)

    def register(self, handlers: dict[int, Callable[[Request], None]]) -> None:
        for key, fn in handlers.items():
            self.handlers[int(key)] = fn

    @property
    def implemented_apis(self) -> set[int]:
        return set(self.handlers)

    def handle(self, request: Request) -> None:
        try:
            handler = self.handlers.get(request.context.header.api_key)
            if handler is None:
                raise errors.InvalidRequestError(f"Unhandled request API key {request.context.api_key}")
            if self.helper.authorizer is not None:
                check_resource_authorization(self.helper, request, self.controller_plane)
            handler(request)
        except Exception as e:  # noqa: BLE001 - every failure is answered with its Kafka error code
            self.handle_error(request, e)
        finally:
            for action in self.after_handle:
                try:
                    action()
                except Exception as e:  # noqa: BLE001 - one failing action must not skip the others
                    self.log.error("Error in post-handle action", error=repr(e))
            if request.api_local_complete_time_ns < 0:
                request.api_local_complete_time_ns = self.time.nanoseconds()

    def handle_error(self, request: Request, exc: BaseException) -> None:
        code = errors.for_exception(exc)
        if code == errors.UNKNOWN_SERVER_ERROR:
            self.log.error(f"Unexpected error handling request {request!r}", error=repr(exc), exc_info=exc)
        else:
            self.log.info(f"Error handling request {request!r}: {errors.name_of(code)}: {exc}")
        h = request.context.header
        try:
            body = build_error_response(h.api_key, h.api_version, request.body, code, str(exc) or None)
            if body is not None:
                self.helper.send_response(request, body)
                return
        except Exception as e:  # a response we cannot build or encode: the client must not wait forever
            self.log.error(
                f"Cannot build the error response to {request!r}; closing the connection", error=repr(e), exc_info=e
            )
        self.helper.close_connection(request)
