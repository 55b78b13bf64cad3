"""Consumer group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, OffsetDelete, DescribeGroups, ListGroups, DeleteGroups (``KafkaApis.handle*`` for groups).

Translates requests to :class:`~pykbroker.coordinator.group.group_coordinator.GroupCoordinator` calls
and their results to responses of the request's version. FindCoordinator answers this broker for
group keys once ``__consumer_offsets`` exists, creating it through the controller on first use
(``offsets.topic.num.partitions``, ``offsets.topic.replication.factor`` capped at the live brokers,
``cleanup.policy=compact``) and answering COORDINATOR_NOT_AVAILABLE meanwhile, as Kafka does; transaction
keys likewise with ``__transaction_state`` (``transaction.state.log.*``), and share keys (key type 2,
``group:topicId:partition``, INVALID_REQUEST when malformed, CLUSTER_ACTION on the cluster required) with
``__share_group_state`` (``share.coordinator.state.topic.*``, ``cleanup.policy=delete``).
OffsetCommit and OffsetDelete answer UNKNOWN_TOPIC_OR_PARTITION for partitions the metadata cache does
not know, before the coordinator sees the rest (``KafkaApis``).

OffsetCommit v10 and OffsetFetch v10 (Kafka 4.2, KIP-848) name topics by id only: this layer resolves each id
to its name through the metadata cache before the coordinator (which keys offsets by name) sees the request,
and answers by id. An id the cache does not know gets UNKNOWN_TOPIC_ID on each of its partitions (committed
offset -1 in OffsetFetch); an OffsetFetch of all the group's offsets leaves out the topics that have no id
(deleted) in v10.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pykbroker.config.broker_configs.group_coordinator_configs import (
    GROUP_COORDINATOR_REBALANCE_PROTOCOLS_CONFIG,
    OFFSETS_TOPIC_NUM_PARTITIONS_CONFIG,
    OFFSETS_TOPIC_REPLICATION_FACTOR_CONFIG,
    OFFSETS_TOPIC_SEGMENT_BYTES_CONFIG,
)
from pykbroker.config.broker_configs.share_coordinator_configs import (
    SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR_CONFIG,
    SHARE_COORDINATOR_STATE_TOPIC_NUM_PARTITIONS_CONFIG,
    SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR_CONFIG,
    SHARE_COORDINATOR_STATE_TOPIC_SEGMENT_BYTES_CONFIG,
)
from pykbroker.config.broker_configs.transaction_configs import (
    TRANSACTION_STATE_LOG_MIN_ISR_CONFIG,
    TRANSACTION_STATE_LOG_NUM_PARTITIONS_CONFIG,
    TRANSACTION_STATE_LOG_REPLICATION_FACTOR_CONFIG,
    TRANSACTION_STATE_LOG_SEGMENT_BYTES_CONFIG,
)
from pykbroker.config.topic_config import (
    CLEANUP_POLICY_CONFIG,
    COMPRESSION_TYPE_CONFIG,
    MIN_INSYNC_REPLICAS_CONFIG,
    SEGMENT_BYTES_CONFIG,
    UNCLEAN_LEADER_ELECTION_ENABLE_CONFIG,
)
from pykbroker.coordinator.group.group_metadata import OffsetAndMetadata
from pykbroker.coordinator.group.group_results import (
    FetchedOffsets,
    JoinGroupResult,
    LeaveGroupResult,
    PartitionErrors,
    SyncGroupResult,
)
from pykbroker.coordinator.group.record_codec import partition_for as group_partition_for
from pykbroker.coordinator.share.share_coordinator_records import coordinator_key as share_coordinator_key
from pykbroker.coordinator.share.share_coordinator_records import partition_for as share_partition_for
from pykbroker.coordinator.transaction.transaction_log import partition_for as txn_partition_for
from pykbroker.metadata.features import GROUP_VERSION
from pykbroker.metadata.topic_names import (
    GROUP_METADATA_TOPIC_NAME,
    SHARE_GROUP_STATE_TOPIC_NAME,
    TRANSACTION_STATE_TOPIC_NAME,
)
from pykbroker.protocol import errors
from pykbroker.protocol.acl import AclOperation
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.resource import CLUSTER_NAME, ResourceType
from pykbroker.protocol.types import ZERO_UUID, uuid_from_base64
from pykbroker.server import error_responses
from pykbroker.server.auth_helper import authorized_operations

if TYPE_CHECKING:  # start-up time (issue 31): the generated message types are for the type checker only
    from pykbroker.protocol.messages.groups import JoinGroupResponse, SyncGroupResponse

GROUP_KEY, TXN_KEY, SHARE_KEY = 0, 1, 2


def share_key_partition(key: str, num_partitions: int) -> int | None:
    """The ``__share_group_state`` partition of a SHARE coordinator key ``group:topicId:partition`` (Kafka's
    ``SharePartitionKey.getInstance(key)`` then ``partitionFor``); None for a malformed key (INVALID_REQUEST)."""
    parts = key.split(":")
    if len(parts) != 3 or not parts[0]:
        return None
    try:
        topic_id = uuid_from_base64(parts[1])
        partition = int(parts[2])
    except ValueError:
        return None
    return share_partition_for(share_coordinator_key(parts[0], topic_id, partition), num_partitions)


class GroupHandlers:
    def __init__(self, helper, coordinator, metadata_cache, controller, config, time, txn_coordinator=None):
        self.helper = helper
        self.coordinator = coordinator
        self.cache = metadata_cache
        self.controller = controller
        self.config = config
        self.time = time
        self._creating: set[str] = set()
        #: the TransactionCoordinator (FindCoordinator for transactional ids; None: not found)
        self.txn_coordinator = txn_coordinator
        #: the ShareCoordinator (FindCoordinator for share partition keys; None: not found)
        self.share_coordinator = None

    def handlers(self) -> dict:
        return {
            ApiKeys.FIND_COORDINATOR: self.handle_find_coordinator_request,
            ApiKeys.JOIN_GROUP: self.handle_join_group_request,
            ApiKeys.SYNC_GROUP: self.handle_sync_group_request,
            ApiKeys.HEARTBEAT: self.handle_heartbeat_request,
            ApiKeys.LEAVE_GROUP: self.handle_leave_group_request,
            ApiKeys.OFFSET_COMMIT: self.handle_offset_commit_request,
            ApiKeys.OFFSET_FETCH: self.handle_offset_fetch_request,
            ApiKeys.OFFSET_DELETE: self.handle_offset_delete_request,
            ApiKeys.DESCRIBE_GROUPS: self.handle_describe_groups_request,
            ApiKeys.LIST_GROUPS: self.handle_list_groups_request,
            ApiKeys.DELETE_GROUPS: self.handle_delete_groups_request,
            **(
                {
                    ApiKeys.CONSUMER_GROUP_HEARTBEAT: self.handle_consumer_group_heartbeat_request,
                    ApiKeys.CONSUMER_GROUP_DESCRIBE: self.handle_consumer_group_describe_request,
                }
                if self.consumer_protocol_enabled
                else {}
            ),
        }

    @property
    def consumer_protocol_enabled(self) -> bool:
        """Whether ``group.coordinator.rebalance.protocols`` lists ``consumer`` (KIP-848): only then are
        ConsumerGroupHeartbeat and ConsumerGroupDescribe served and advertised."""
        try:
            protocols = self.config[GROUP_COORDINATOR_REBALANCE_PROTOCOLS_CONFIG]
        except KeyError:
            return True
        if isinstance(protocols, str):
            protocols = protocols.split(",")
        return "consumer" in {p.strip().lower() for p in protocols}

    def _group_version(self) -> int:
        """The finalized ``group.version`` of the metadata image (0 when not finalized): 1 or more enables the
        consumer rebalance protocol (Kafka's ``GroupVersion.isConsumerRebalanceProtocolSupported``)."""
        image = getattr(self.cache, "image", None)
        features = getattr(image, "features", None) or {}
        return features.get(GROUP_VERSION, 0)

    def _consumer_protocol_unsupported(self, request) -> bool:
        """Kafka's ``!isConsumerGroupProtocolEnabled()`` for the finalized feature: with ``group.version`` 0 the
        request is answered UNSUPPORTED_VERSION (its error response) and True is returned."""
        if self._group_version() >= 1:
            return False
        self.helper.send_error_response(request, errors.UNSUPPORTED_VERSION)
        return True

    # -- FindCoordinator ----------------------------------------------------------------------------
    def _internal_topic_ready(self, name: str) -> bool:
        """Whether ``__consumer_offsets`` / ``__transaction_state`` exists; if not, ask the controller to
        create it once (answered COORDINATOR_NOT_AVAILABLE meanwhile, as Kafka does). The replication
        factor is capped at the live brokers and ``min.insync.replicas`` at the replication factor."""
        if self.cache.topic(name) is not None:
            return True
        if name in self._creating:
            return False
        self._creating.add(name)
        brokers = max(
            1, len(self.cache.alive_brokers(self.config.listeners[0].listener_name)) if self.config.listeners else 1
        )
        if name == SHARE_GROUP_STATE_TOPIC_NAME:
            # Kafka's ShareCoordinatorService.shareGroupStateTopicConfigs (KIP-932: cleanup.policy=delete)
            rf = min(self.config[SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR_CONFIG], brokers)
            partitions = self.config[SHARE_COORDINATOR_STATE_TOPIC_NUM_PARTITIONS_CONFIG]
            configs = {
                CLEANUP_POLICY_CONFIG: "delete",
                COMPRESSION_TYPE_CONFIG: "producer",
                MIN_INSYNC_REPLICAS_CONFIG: str(min(self.config[SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR_CONFIG], rf)),
                SEGMENT_BYTES_CONFIG: str(self.config[SHARE_COORDINATOR_STATE_TOPIC_SEGMENT_BYTES_CONFIG]),
            }
        elif name == TRANSACTION_STATE_TOPIC_NAME:
            rf = min(self.config[TRANSACTION_STATE_LOG_REPLICATION_FACTOR_CONFIG], brokers)
            partitions = self.config[TRANSACTION_STATE_LOG_NUM_PARTITIONS_CONFIG]
            configs = {
                CLEANUP_POLICY_CONFIG: "compact",
                COMPRESSION_TYPE_CONFIG: "uncompressed",
                MIN_INSYNC_REPLICAS_CONFIG: str(min(self.config[TRANSACTION_STATE_LOG_MIN_ISR_CONFIG], rf)),
                SEGMENT_BYTES_CONFIG: str(self.config[TRANSACTION_STATE_LOG_SEGMENT_BYTES_CONFIG]),
                UNCLEAN_LEADER_ELECTION_ENABLE_CONFIG: "false",
            }
        else:
            rf = min(self.config[OFFSETS_TOPIC_REPLICATION_FACTOR_CONFIG], brokers)
            partitions = self.config[OFFSETS_TOPIC_NUM_PARTITIONS_CONFIG]
            configs = {
                CLEANUP_POLICY_CONFIG: "compact",
                COMPRESSION_TYPE_CONFIG: "producer",
                SEGMENT_BYTES_CONFIG: str(self.config[OFFSETS_TOPIC_SEGMENT_BYTES_CONFIG]),
            }

        def created(future) -> None:
            self._creating.discard(name)  # a failed creation is tried again by the next FindCoordinator

        future = self.controller.create_topics(
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": partitions,
                        "replication_factor": rf,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in configs.items()],
                    }
                ],
                "timeout_ms": 30000,
                "validate_only": False,
            }
        )
        if hasattr(future, "add_done_callback"):
            future.add_done_callback(created)
        return False

    def _coordinator_for(self, key: str, key_type: int, listener: str) -> dict:
        unavailable = {
            "error_code": errors.COORDINATOR_NOT_AVAILABLE,
            "error_message": None,
            "node_id": -1,
            "host": "",
            "port": -1,
        }
        if key_type not in (GROUP_KEY, TXN_KEY, SHARE_KEY):
            return {
                "error_code": errors.INVALID_REQUEST,
                "error_message": f"Unknown coordinator type {key_type}",
                "node_id": -1,
                "host": "",
                "port": -1,
            }
        if not key:
            return {"error_code": errors.INVALID_REQUEST, "error_message": None, "node_id": -1, "host": "", "port": -1}
        if key_type == SHARE_KEY:
            if share_key_partition(key, 1) is None:
                return {
                    "error_code": errors.INVALID_REQUEST,
                    "error_message": f"Invalid share coordinator key {key}",
                    "node_id": -1,
                    "host": "",
                    "port": -1,
                }
            if self.share_coordinator is None:
                return unavailable
        topic_name = {TXN_KEY: TRANSACTION_STATE_TOPIC_NAME, SHARE_KEY: SHARE_GROUP_STATE_TOPIC_NAME}.get(
            key_type, GROUP_METADATA_TOPIC_NAME
        )
        if key_type == TXN_KEY and self.txn_coordinator is None:
            return unavailable
        if not self._internal_topic_ready(topic_name):
            return unavailable
        # The coordinator is the leader of the key's partition of the internal topic (Kafka's
        # partitionFor + the partition's leader in the metadata cache).
        topic = self.cache.topic(topic_name)
        if key_type == TXN_KEY:
            index = txn_partition_for(key, len(topic.partitions))
        elif key_type == SHARE_KEY:
            index = share_key_partition(key, len(topic.partitions)) or 0
        else:
            index = group_partition_for(key, len(topic.partitions))
        registration = self.cache.partition(topic_name, index)
        leader = registration.leader if registration is not None else -1
        me = [(n, ep) for n, ep, _ in self.cache.alive_brokers(listener) if n == leader]
        if not me:
            return unavailable
        node, ep = me[0]
        return {"error_code": errors.NONE, "error_message": None, "node_id": node, "host": ep.host, "port": ep.port}

    def handle_find_coordinator_request(self, request) -> None:
        body, version = request.body, request.context.api_version
        listener = request.context.listener_name
        key_type = body.get("key_type", 0)
        if key_type == SHARE_KEY and not self.helper.authorize(
            request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME
        ):  # Kafka: only brokers look up share coordinators
            denied = {
                "error_code": errors.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": None,
                "node_id": -1,
                "host": "",
                "port": -1,
            }
            if version >= 4:
                coordinators = [dict(denied, key=k) for k in body["coordinator_keys"]]
                self.helper.send_response(request, {"throttle_time_ms": 0, "coordinators": coordinators})
            else:
                self.helper.send_response(request, dict(denied, throttle_time_ms=0))
            return
        if version >= 4:
            coordinators = [
                dict(self._coordinator_for(k, body["key_type"], listener), key=k) for k in body["coordinator_keys"]
            ]
            self.helper.send_response(request, {"throttle_time_ms": 0, "coordinators": coordinators})
        else:
            r = self._coordinator_for(body["key"], body.get("key_type", 0), listener)
            self.helper.send_response(request, dict(r, throttle_time_ms=0))

    # -- membership ----------------------------------------------------------------------------------
    def handle_join_group_request(self, request) -> None:
        body, ctx = request.body, request.context

        def respond(result: JoinGroupResult) -> None:
            self.helper.send_response(request, join_group_response(result, ctx.api_version))

        try:
            self.coordinator.handle_join_group(
                body["group_id"],
                body["member_id"],
                body.get("group_instance_id"),
                ctx.client_id or "",
                f"/{ctx.client_address}",
                body["session_timeout_ms"] if ctx.api_version == 0 else body["rebalance_timeout_ms"],
                body["session_timeout_ms"],
                body["protocol_type"],
                [(p["name"], bytes(p["metadata"])) for p in body["protocols"]],
                ctx.api_version,
                respond,
            )
        except errors.KafkaError as e:
            respond(JoinGroupResult.error(e.code, body["member_id"]))

    def handle_sync_group_request(self, request) -> None:
        body = request.body

        def respond(result: SyncGroupResult) -> None:
            self.helper.send_response(request, sync_group_response(result))

        try:
            self.coordinator.handle_sync_group(
                body["group_id"],
                body["generation_id"],
                body["member_id"],
                body.get("group_instance_id"),
                body.get("protocol_type"),
                body.get("protocol_name"),
                {a["member_id"]: bytes(a["assignment"]) for a in body["assignments"]},
                respond,
            )
        except errors.KafkaError as e:
            respond(SyncGroupResult.error(e.code))

    def handle_heartbeat_request(self, request) -> None:
        body = request.body
        try:
            code = self.coordinator.handle_heartbeat(
                body["group_id"], body["member_id"], body.get("group_instance_id"), body["generation_id"]
            )
        except errors.KafkaError as e:
            code = e.code
        self.helper.send_response(request, {"throttle_time_ms": 0, "error_code": code})

    def handle_leave_group_request(self, request) -> None:
        body, version = request.body, request.context.api_version
        members = (
            [(m["member_id"], m.get("group_instance_id")) for m in body["members"]]
            if version >= 3
            else [(body["member_id"], None)]
        )
        try:
            result = self.coordinator.handle_leave_group(body["group_id"], members)
        except errors.KafkaError as e:
            result = LeaveGroupResult(e.code, [e.code] * len(members))
        code, codes = result.error_code, result.member_errors
        if version < 3:
            code = codes[0] if code == errors.NONE else code
        self.helper.send_response(
            request,
            {
                "throttle_time_ms": 0,
                "error_code": code,
                "members": [
                    {"member_id": m, "group_instance_id": i, "error_code": c}
                    for (m, i), c in zip(members, codes, strict=True)
                ],
            },
        )

    # -- KIP-848 consumer groups ---------------------------------------------------------------------
    def handle_consumer_group_heartbeat_request(self, request) -> None:
        """ConsumerGroupHeartbeat (``KafkaApis.handleConsumerGroupHeartbeat``): UNSUPPORTED_VERSION while the
        finalized ``group.version`` is 0, then READ on the group (GROUP_AUTHORIZATION_FAILED), then the coordinator's
        answer; errors carry their message."""
        body, ctx = request.body, request.context
        if self._consumer_protocol_unsupported(request):
            return None

        def error(code: int, message: str | None = None) -> None:
            self.helper.send_error_response(request, code, message)

        if not self.helper.authorize(request, AclOperation.READ, ResourceType.GROUP, body["group_id"]):
            return error(errors.GROUP_AUTHORIZATION_FAILED)

        def respond(resp: dict) -> None:
            self.helper.send_response(request, dict(resp, throttle_time_ms=0))

        try:  # answered once the group's records are appended (maybe on the append's completing thread)
            self.coordinator.consumer.heartbeat(body, ctx.client_id or "", f"/{ctx.client_address}", respond)
        except errors.KafkaError as e:
            return error(e.code, str(e) or None)
        return None

    def handle_consumer_group_describe_request(self, request) -> None:
        """ConsumerGroupDescribe (``KafkaApis.handleConsumerGroupDescribe``): UNSUPPORTED_VERSION for every group
        while the finalized ``group.version`` is 0; else per group, DESCRIBE on it
        (GROUP_AUTHORIZATION_FAILED), then the coordinator's description (GROUP_ID_NOT_FOUND when missing or
        not a consumer group; NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS from the partition's status)."""
        if self._consumer_protocol_unsupported(request):
            return
        include = request.body.get("include_authorized_operations", False)
        groups = []
        for group_id in request.body["group_ids"]:
            blank = {"group_id": group_id, "group_state": "", "members": [], "error_message": None}
            if not self.helper.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
                groups.append(dict(blank, error_code=errors.GROUP_AUTHORIZATION_FAILED))
                continue
            try:
                described = self.coordinator.consumer.describe(group_id)
            except errors.KafkaError as e:
                groups.append(dict(blank, error_code=e.code))
                continue
            if described["error_code"] == errors.NONE:
                described["authorized_operations"] = authorized_operations(
                    "GROUP", include, self.helper, request, group_id
                )
            groups.append(described)
        self.helper.send_response(request, {"throttle_time_ms": 0, "groups": groups})

    # -- offsets -------------------------------------------------------------------------------------
    def handle_offset_commit_request(self, request) -> None:
        body = request.body
        by_id = request.context.api_version >= 10
        now = self.time.milliseconds()
        offsets = {}
        ids: dict[str, object] = {}  # v10: topic name -> the id the request named it by
        unknown_ids: list[dict] = []  # v10: response topics for ids the metadata cache does not know
        for t in body["topics"]:
            name = t.get("name", "")
            if by_id:
                name = self.cache.topic_name(t["topic_id"])
                if name is None:
                    code = errors.UNKNOWN_TOPIC_ID
                    partitions = [
                        {"partition_index": p["partition_index"], "error_code": code} for p in t["partitions"]
                    ]
                    unknown_ids.append({"name": "", "topic_id": t["topic_id"], "partitions": partitions})
                    continue
                ids[name] = t["topic_id"]
            for p in t["partitions"]:
                offsets[(name, p["partition_index"])] = OffsetAndMetadata(
                    p["committed_offset"], p.get("committed_leader_epoch", -1), p.get("committed_metadata") or "", now
                )

        unknown = self._unknown_partitions(offsets)
        if self.helper.authorizer is not None:  # Kafka: READ on each topic (after READ on the group)
            denied = {
                t for t, _ in offsets if not self.helper.authorize(request, AclOperation.READ, ResourceType.TOPIC, t)
            }
            unknown.update({tp: errors.TOPIC_AUTHORIZATION_FAILED for tp in offsets if tp[0] in denied})
        offsets = {tp: o for tp, o in offsets.items() if tp not in unknown}

        def respond(codes: PartitionErrors) -> None:
            topics: dict[str, list] = {}
            for (topic, partition), code in {**unknown, **codes}.items():
                topics.setdefault(topic, []).append({"partition_index": partition, "error_code": code})
            answered = [{"name": t, "topic_id": ids.get(t, ZERO_UUID), "partitions": ps} for t, ps in topics.items()]
            self.helper.send_response(request, {"throttle_time_ms": 0, "topics": unknown_ids + answered})

        if not offsets and (unknown or unknown_ids):
            return respond({})
        try:
            self.coordinator.handle_commit_offsets(
                body["group_id"],
                body.get("member_id", ""),
                body.get("group_instance_id"),
                body.get("generation_id_or_member_epoch", -1),
                offsets,
                respond,
                api_version=request.context.api_version,
            )
        except errors.KafkaError as e:
            respond({tp: e.code for tp in offsets})

    def _unknown_partitions(self, tps) -> dict[tuple[str, int], int]:
        """UNKNOWN_TOPIC_OR_PARTITION for each ``(topic, partition)`` the metadata cache does not know
        (``KafkaApis`` checks OffsetCommit and OffsetDelete partitions this way before the coordinator)."""
        return {(t, p): errors.UNKNOWN_TOPIC_OR_PARTITION for t, p in tps if self.cache.partition(t, p) is None}

    def _fetch_group(
        self,
        group_id: str,
        topics,
        require_stable: bool = False,
        request=None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[int, list[dict]]:
        if request is not None and not self.helper.authorize(
            request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id
        ):
            return errors.GROUP_AUTHORIZATION_FAILED, []
        tps = None if topics is None else [(t["name"], p) for t in topics for p in t["partition_indexes"]]
        try:
            found: FetchedOffsets = self.coordinator.handle_fetch_offsets(group_id, tps, member_id, member_epoch)
            unstable = self.coordinator.unstable_partitions(group_id, found) if require_stable else set()
        except errors.KafkaError as e:
            return e.code, []
        by_topic: dict[str, list] = {}
        denied: set[str] = set()
        if request is not None and self.helper.authorizer is not None:
            denied = {
                t for t, _ in found if not self.helper.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, t)
            }
        for (topic, partition), o in sorted(found.items()):
            if topic in denied:
                if tps is None:
                    continue  # listing all offsets: Kafka leaves out the topics the principal may not describe
                o, code = None, errors.TOPIC_AUTHORIZATION_FAILED
            elif (topic, partition) in unstable:
                o, code = None, errors.UNSTABLE_OFFSET_COMMIT
            else:
                code = errors.NONE
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "committed_offset": o.offset if o else -1,
                    "committed_leader_epoch": o.leader_epoch if o else -1,
                    "metadata": o.metadata if o else "",
                    "error_code": code,
                }
            )
        return errors.NONE, [{"name": t, "partitions": ps} for t, ps in by_topic.items()]

    def handle_offset_fetch_request(self, request) -> None:
        body, version = request.body, request.context.api_version
        if version >= 10:
            groups = [self._fetch_group_by_ids(g, body.get("require_stable", False), request) for g in body["groups"]]
            self.helper.send_response(request, {"throttle_time_ms": 0, "groups": groups})
            return
        if version >= 8:
            groups = []
            for g in body["groups"]:
                code, topics = self._fetch_group(
                    g["group_id"],
                    g["topics"],
                    body.get("require_stable", False),
                    request,
                    g.get("member_id"),
                    g.get("member_epoch", -1),
                )
                groups.append({"group_id": g["group_id"], "topics": topics, "error_code": code})
            self.helper.send_response(request, {"throttle_time_ms": 0, "groups": groups})
            return
        code, topics = self._fetch_group(body["group_id"], body["topics"], body.get("require_stable", False), request)
        if version < 2 and code != errors.NONE:
            topics = [
                {
                    "name": t["name"],
                    "partitions": [
                        {"partition_index": p, "committed_offset": -1, "metadata": "", "error_code": code}
                        for p in t["partition_indexes"]
                    ],
                }
                for t in body["topics"] or []
            ]
        self.helper.send_response(request, {"throttle_time_ms": 0, "topics": topics, "error_code": code})

    def _fetch_group_by_ids(self, group: dict, require_stable: bool, request) -> dict:
        """One group of an OffsetFetch v10: its topics named by id, resolved to names for the coordinator and
        answered by id (UNKNOWN_TOPIC_ID for an id the metadata cache does not know)."""
        requested, unresolved = group["topics"], []
        if requested is not None:
            named = []
            for t in requested:
                name = self.cache.topic_name(t["topic_id"])
                if name is None:
                    unresolved.append(t)
                else:
                    named.append({"name": name, "partition_indexes": t["partition_indexes"]})
            requested = named
        code, topics = self._fetch_group(
            group["group_id"], requested, require_stable, request, group.get("member_id"), group.get("member_epoch", -1)
        )
        if code != errors.NONE:
            return {"group_id": group["group_id"], "topics": [], "error_code": code}
        answered = [dict(t, topic_id=self.cache.topic_id(t["name"])) for t in topics]
        if requested is None:  # all the group's offsets: those of topics without an id (deleted) are left out
            answered = [t for t in answered if t["topic_id"] != ZERO_UUID]
        for t in unresolved:
            answered.append(
                {
                    "name": "",
                    "topic_id": t["topic_id"],
                    "partitions": [
                        {
                            "partition_index": p,
                            "committed_offset": -1,
                            "committed_leader_epoch": -1,
                            "metadata": "",
                            "error_code": errors.UNKNOWN_TOPIC_ID,
                        }
                        for p in t["partition_indexes"]
                    ],
                }
            )
        return {"group_id": group["group_id"], "topics": answered, "error_code": errors.NONE}

    def handle_offset_delete_request(self, request) -> None:
        body = request.body
        tps = [(t["name"], p["partition_index"]) for t in body["topics"] for p in t["partitions"]]
        unknown = self._unknown_partitions(tps)
        tps = [tp for tp in tps if tp not in unknown]

        def respond(code: int, codes: PartitionErrors) -> None:
            topics: dict[str, list] = {}
            for (topic, partition), c in ({**unknown, **codes} if code == errors.NONE else {}).items():
                topics.setdefault(topic, []).append({"partition_index": partition, "error_code": c})
            self.helper.send_response(
                request,
                {
                    "error_code": code,
                    "throttle_time_ms": 0,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                },
            )

        try:
            self.coordinator.handle_delete_offsets(body["group_id"], tps, respond)
        except errors.KafkaError as e:
            respond(e.code, {})

    # -- admin ---------------------------------------------------------------------------------------
    def handle_describe_groups_request(self, request) -> None:
        """A group the coordinator does not have is answered in state Dead with no error before v6, and
        GROUP_ID_NOT_FOUND with the message ``Group <id> not found.`` from v6 on (KIP-1043, Kafka 4.0's
        ``GroupMetadataManager.describeGroups``); other errors carry no message."""
        groups = []
        include = request.body.get("include_authorized_operations", False)
        version = request.context.api_version
        for group_id in request.body["groups"]:
            try:
                if not self.helper.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
                    raise errors.GroupAuthorizationError("Group authorization failed.")
                described = self.coordinator.describe_group(group_id)
                if version >= 6 and described["error_code"] == errors.NONE and described["group_state"] == "Dead":
                    message = described.get("error_message") or f"Group {group_id} not found."
                    groups.append(_described_group_error(group_id, errors.GROUP_ID_NOT_FOUND, message))
                    continue
                described = dict(described, error_message=None)
                ops = authorized_operations("GROUP", include, self.helper, request, group_id)
                groups.append({**described, "authorized_operations": ops})
            except errors.KafkaError as e:
                groups.append(_described_group_error(group_id, e.code))
        self.helper.send_response(request, {"throttle_time_ms": 0, "groups": groups})

    def handle_list_groups_request(self, request) -> None:
        code, groups = self.coordinator.list_groups(request.body.get("states_filter") or [])
        if self.helper.authorizer is not None and not self.helper.authorize(
            request, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME
        ):
            groups = [
                g
                for g in groups
                if self.helper.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, g["group_id"])
            ]
        types = {t.lower() for t in request.body.get("types_filter") or []}
        if types:
            groups = [g for g in groups if g["group_type"] in types]
        self.helper.send_response(request, {"throttle_time_ms": 0, "error_code": code, "groups": groups})

    def handle_delete_groups_request(self, request) -> None:
        """DeleteGroups (``KafkaApis.handleDeleteGroupsRequest``): one result per distinct group id (a name
        repeated in the request is answered once, as Kafka's ``distinct``)."""
        names = list(dict.fromkeys(request.body["groups_names"]))
        results: dict[str, int] = {}

        def done(name: str, code: int) -> None:
            results[name] = code
            if len(results) == len(names):
                self.helper.send_response(
                    request,
                    {"throttle_time_ms": 0, "results": [{"group_id": n, "error_code": results[n]} for n in names]},
                )

        if not names:
            self.helper.send_response(request, {"throttle_time_ms": 0, "results": []})
        for name in names:
            if not self.helper.authorize(request, AclOperation.DELETE, ResourceType.GROUP, name):
                done(name, errors.GROUP_AUTHORIZATION_FAILED)
                continue
            try:
                self.coordinator.delete_group(name, lambda code, n=name: done(n, code))
            except errors.KafkaError as e:
                done(name, e.code)


def _described_group_error(group_id: str, code: int, message: str | None = None) -> dict:
    """A DescribeGroups entry for a group answered with ``code`` (Kafka's ``DescribeGroupsResponse.groupError``):
    no state, protocol or members."""
    return {
        "error_code": code,
        "error_message": message,
        "group_id": group_id,
        "group_state": "",
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
    }


def join_group_response(result: JoinGroupResult, version: int) -> JoinGroupResponse:
    """The JoinGroup response body of ``version`` for the coordinator's result: a null protocol name is ""
    before v7 (nullable from v7 only)."""
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""
    return {
        "throttle_time_ms": 0,
        "error_code": result.error_code,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": protocol_name,
        "leader": result.leader,
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
            for m in result.members
        ],
    }


def sync_group_response(result: SyncGroupResult) -> SyncGroupResponse:
    """The SyncGroup response body for the coordinator's result (every version: fields a version lacks are
    not written)."""
    return {
        "throttle_time_ms": 0,
        "error_code": result.error_code,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "assignment": result.assignment,
    }


@error_responses.register(ApiKeys.JOIN_GROUP)
def _join_group_error(version: int, body: dict, code: int, message: str | None) -> JoinGroupResponse:
    """``JoinGroupRequest.getErrorResponse``: no generation, member or leader; protocol name null from v7."""
    return join_group_response(JoinGroupResult.error(code, error_responses.UNKNOWN_MEMBER_ID), version)
