"""Metadata (key 3) and DescribeCluster (key 60): brokers, cluster id, controller id, topics.

Mirrors ``KafkaApis.handleTopicMetadataRequest`` / ``handleDescribeCluster`` in KRaft mode:
brokers are the alive brokers' endpoints **for the listener the request arrived on**;
``controller_id`` is a random alive broker (clients never talk to the KRaft controller); topics come
from the MetadataCache. Unknown topics get UNKNOWN_TOPIC_OR_PARTITION, or are auto-created
(``auto.create.topics.enable`` and the request's ``allow_auto_topic_creation``) and reported as
LEADER_NOT_AVAILABLE while creation completes. Topics may be named by id from v12 on (unknown ids get
UNKNOWN_TOPIC_ID); before v12 a topic without a name, or with an id, gets INVALID_REQUEST. The top-level
``error_code`` of v13 (KIP-1102) is always NONE: Kafka's broker never sets it (REBOOTSTRAP_REQUIRED is for
proxies and later use; a Kafka 4 client rebootstraps on it).

DescribeCluster v2 (KIP-1073): ``include_fenced_brokers`` adds the registered but fenced brokers that have
the request's listener, each answered with ``is_fenced`` (unfenced brokers only otherwise, as before v2).
"""

from __future__ import annotations

from pykbroker.metadata.topic_names import INTERNAL_TOPICS
from pykbroker.protocol import errors, response_schema
from pykbroker.protocol.acl import AclOperation
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.codec import EncodedStruct, encode_struct_element
from pykbroker.protocol.resource import CLUSTER_NAME, ResourceType
from pykbroker.protocol.types import ZERO_UUID
from pykbroker.server import error_responses
from pykbroker.server.auth_helper import AUTHORIZED_OPERATIONS_OMITTED, authorized_operations

#: cached encodings kept beyond the topics of the image before the cache of a (version, listener) is pruned
_PRUNE_SLACK = 64


class MetadataHandler:
    """Metadata and DescribeCluster. Threading: called on request handler threads concurrently; the encoded-topic
    cache is a dict per (version, listener) whose entries are replaced whole (a race only encodes twice)."""

    def __init__(self, helper, metadata_cache, auto_create_topics=None):
        """``auto_create_topics(names) -> None`` starts creation of missing topics (or None to disable)."""
        self.helper = helper
        self.cache = metadata_cache
        self.auto_create_topics = auto_create_topics
        #: (version, listener) -> topic name -> (TopicImage, brokers map, its encoded Metadata topic entry): the
        #: entry is reused while the image holds the same TopicImage and brokers objects (a delta replaces the
        #: TopicImage of every topic it changes and the brokers map when a registration changes)
        self._encoded: dict[tuple[int, str], dict[str, tuple[object, object, EncodedStruct]]] = {}
        self._schema = response_schema(ApiKeys.METADATA)

    def handlers(self) -> dict:
        return {
            ApiKeys.METADATA: self.handle_topic_metadata_request,
            ApiKeys.DESCRIBE_CLUSTER: self.handle_describe_cluster_request,
        }

    def _brokers(self, listener: str) -> list[dict]:
        return [
            {"node_id": node_id, "host": ep.host, "port": ep.port, "rack": rack}
            for node_id, ep, rack in self.cache.alive_brokers(listener)
        ]

    def _cluster_brokers(self, listener: str, include_fenced: bool) -> list[dict]:
        """DescribeCluster's brokers (``KafkaApis.handleDescribeCluster``): every registered broker with an
        endpoint on ``listener``, by id, the fenced ones only when ``include_fenced``."""
        out = []
        for node_id, b in sorted(self.cache.image.brokers.items()):
            ep = b.listeners.get(listener)
            if ep is None or (b.fenced and not include_fenced):
                continue
            out.append({"broker_id": node_id, "host": ep.host, "port": ep.port, "rack": b.rack, "is_fenced": b.fenced})
        return out

    def handle_topic_metadata_request(self, request) -> None:
        body = request.body
        version = request.context.api_version
        requested = body.get("topics")
        all_topics = requested is None or (version == 0 and not requested)
        topics_out: list[dict | EncodedStruct] = []
        include_topic_ops = version >= 8 and body.get("include_topic_authorized_operations", False)
        authorize = self.helper.authorize
        image = self.cache.image  # one image for the whole answer
        listener = request.context.listener_name
        brokers = image.brokers
        encoded = None if include_topic_ops else self._encoded_topics(version, listener)

        def topic_entry(info) -> dict | EncodedStruct:
            if encoded is None:  # per-principal authorized operations: built for this request
                return self._topic_metadata(info, listener, brokers)
            return self._encoded_topic(encoded, info, version, listener, brokers)

        if all_topics:
            by_name = image.topics.by_name
            for name in sorted(by_name):
                if not authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                    continue  # Kafka hides the topics a principal may not describe
                topics_out.append(topic_entry(by_name[name]))
            if encoded is not None and len(encoded) > len(by_name) + _PRUNE_SLACK:
                self._encoded[(version, listener)] = {n: e for n, e in encoded.items() if n in by_name}
        elif version < 12 and any(
            t.get("name") is None or (t.get("topic_id") or ZERO_UUID) != ZERO_UUID for t in requested
        ):
            # Topic ids in Metadata requests arrive with v12 (KIP-516); before that a topic needs a name.
            # Kafka fails the request with INVALID_REQUEST, answered per requested topic.
            topics_out = [self._error_topic(t.get("name") or "", errors.INVALID_REQUEST) for t in requested]
        else:
            missing: list[str] = []
            for t in requested:
                name, topic_id = t.get("name"), t.get("topic_id") or ZERO_UUID
                if name is None and topic_id != ZERO_UUID:
                    info = image.topics.by_id.get(topic_id)
                    if info is None:
                        topics_out.append(self._error_topic(None, errors.UNKNOWN_TOPIC_ID, topic_id))
                    else:
                        topics_out.append(topic_entry(info))
                    continue
                if not authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                    topics_out.append(self._error_topic(name, errors.TOPIC_AUTHORIZATION_FAILED))
                    continue
                info = image.topics.by_name.get(name)
                if info is not None:
                    topics_out.append(topic_entry(info))
                elif authorize(request, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME) or authorize(
                    request, AclOperation.CREATE, ResourceType.TOPIC, name
                ):
                    missing.append(name)
                else:
                    topics_out.append(self._error_topic(name, errors.UNKNOWN_TOPIC_OR_PARTITION))
            allow_auto = body.get("allow_auto_topic_creation", True) if version >= 4 else True
            if missing and allow_auto and self.auto_create_topics is not None:
                codes = self.auto_create_topics(missing)
                for name in missing:
                    topics_out.append(self._error_topic(name, codes.get(name, errors.LEADER_NOT_AVAILABLE)))
            else:
                for name in missing:
                    topics_out.append(self._error_topic(name, errors.UNKNOWN_TOPIC_OR_PARTITION))
        self.helper.send_response(
            request,
            {
                "throttle_time_ms": 0,
                "brokers": self._brokers(request.context.listener_name),
                "cluster_id": self.cache.cluster_id,
                "controller_id": self.cache.random_alive_broker_id(),
                "topics": [self._with_topic_operations(t, include_topic_ops, request) for t in topics_out],
                "cluster_authorized_operations": authorized_operations(
                    "CLUSTER",
                    8 <= version <= 10 and body.get("include_cluster_authorized_operations", False),
                    self.helper,
                    request,
                ),
                "error_code": errors.NONE,
            },
        )

    def _with_topic_operations(self, t: dict | EncodedStruct, include_topic_ops: bool, request) -> dict | EncodedStruct:
        """A described topic's entry with its ``topic_authorized_operations`` (pre-encoded entries have them
        omitted already; error entries keep theirs omitted)."""
        if isinstance(t, EncodedStruct) or t["error_code"] != errors.NONE:
            return t
        ops = authorized_operations("TOPIC", include_topic_ops, self.helper, request, t["name"])
        return {**t, "topic_authorized_operations": ops}

    @staticmethod
    def _error_topic(name, code, topic_id=ZERO_UUID) -> dict:
        return {
            "error_code": code,
            "name": name,
            "topic_id": topic_id,
            "is_internal": False,
            "partitions": [],
            "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
        }

    def _encoded_topics(self, version: int, listener: str) -> dict:
        encoded = self._encoded.get((version, listener))
        if encoded is None:
            encoded = self._encoded[(version, listener)] = {}
        return encoded

    def _encoded_topic(self, encoded: dict, info, version: int, listener: str, brokers) -> EncodedStruct:
        """The topic's Metadata entry at ``version``, encoded, with ``topic_authorized_operations`` omitted: from
        the cache while ``info`` and ``brokers`` are the objects it was encoded from, else encoded now and
        cached."""
        hit = encoded.get(info.name)
        if hit is not None and hit[0] is info and hit[1] is brokers:
            return hit[2]
        entry = encode_struct_element(self._schema, version, ("topics",), self._topic_metadata(info, listener, brokers))
        encoded[info.name] = (info, brokers, entry)
        return entry

    def _topic_metadata(self, info, listener: str, brokers) -> dict:
        """One topic's partitions (Kafka's ``KRaftMetadataCache.partitionMetadata``): offline replicas are
        those whose broker is not registered or is fenced (``listener``: the request's, kept for the
        endpoint checks of a multi-listener setup; ``brokers``: the image's registrations)."""
        partitions = []
        for index, p in sorted(info.partitions.items()):
            offline = [
                r for r in p.replicas if (b := brokers.get(r)) is None or b.fenced or listener not in b.listeners
            ]
            partitions.append(
                {
                    "error_code": errors.NONE if p.leader >= 0 else errors.LEADER_NOT_AVAILABLE,
                    "partition_index": index,
                    "leader_id": p.leader,
                    "leader_epoch": p.leader_epoch,
                    "replica_nodes": list(p.replicas),
                    "isr_nodes": list(p.isr),
                    "offline_replicas": offline,
                }
            )
        return {
            "error_code": errors.NONE,
            "name": info.name,
            "topic_id": info.id,
            "is_internal": info.name in INTERNAL_TOPICS,
            "partitions": partitions,
            "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
        }

    def handle_describe_cluster_request(self, request) -> None:
        body = request.body
        endpoint_type = body.get("endpoint_type", 1)
        if endpoint_type not in (1,):  # 1 = brokers; 2 = controllers (not served on a broker listener)
            self.helper.send_response(
                request,
                {
                    "throttle_time_ms": 0,
                    "error_code": errors.MISMATCHED_ENDPOINT_TYPE,
                    "error_message": "The request was sent to an endpoint of type BROKER, but we wanted an "
                    "endpoint of type CONTROLLER",
                    "endpoint_type": endpoint_type,
                    "cluster_id": self.cache.cluster_id or "",
                    "controller_id": -1,
                    "brokers": [],
                    "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
                },
            )
            return
        brokers = self._cluster_brokers(request.context.listener_name, body.get("include_fenced_brokers", False))
        self.helper.send_response(
            request,
            {
                "throttle_time_ms": 0,
                "error_code": errors.NONE,
                "error_message": None,
                "endpoint_type": 1,
                "cluster_id": self.cache.cluster_id or "",
                "controller_id": self.cache.random_alive_broker_id(),
                "brokers": brokers,
                "cluster_authorized_operations": authorized_operations(
                    "CLUSTER", body.get("include_cluster_authorized_operations", False), self.helper, request
                ),
            },
        )


@error_responses.register(ApiKeys.METADATA)
def _metadata_error(version, body, code, message):
    topics = body.get("topics") or []
    return {
        "throttle_time_ms": 0,
        "brokers": [],
        "cluster_id": None,
        "controller_id": -1,
        "topics": [
            MetadataHandler._error_topic(
                "" if t.get("name") is None else t["name"], code, t.get("topic_id") or ZERO_UUID
            )
            for t in topics
        ],
    }


@error_responses.register(ApiKeys.DESCRIBE_CLUSTER)
def _describe_cluster_error(version, body, code, message):
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "error_message": message,
        "cluster_id": "",
        "controller_id": -1,
        "brokers": [],
    }
