"""What the consumer-group (KIP-848) and share-group (KIP-932) heartbeat handlers share, as Kafka's
``GroupMetadataManager`` shares it between ``consumerGroupHeartbeat`` and ``shareGroupHeartbeat`` (the "modern"
groups of ``org.apache.kafka.coordinator.group.modern``): the group configs and topics from the metadata image, the
heartbeat's error response once an append failed, the write of a group's changed records to ``__consumer_offsets``
and the not-found answer of a describe.

Threading: as the handlers': each group's state is guarded by ``GroupMetadata.lock``; :meth:`persist` is called with
it held and its callback may run on the thread that completes the append.
"""

from __future__ import annotations

import uuid
from types import ModuleType
from typing import Any

from pykbroker.config import group_config
from pykbroker.coordinator.group.consumer.member import TopicPartitions
from pykbroker.coordinator.group.group_metadata import GroupMetadata
from pykbroker.protocol import errors
from pykbroker.protocol.config_resource import ConfigResourceType
from pykbroker.utils.logging import get_logger

#: append errors as Kafka's ``CoordinatorOperationExceptionHelper.handleOperationException`` answers them (the
#: manager's append already maps the replication errors to COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR)
SIZE_ERRORS = frozenset((errors.INVALID_COMMIT_OFFSET_SIZE, errors.MESSAGE_TOO_LARGE, errors.RECORD_LIST_TOO_LARGE))


def config_value(config, key: str, default):
    """``config[key]``, or ``default`` when the broker config does not have it."""
    try:
        return config[key]
    except KeyError:
        return default


def partitions_list(tps: TopicPartitions, names: dict | None = None) -> list[dict]:
    """A heartbeat's or describe's ``topic_partitions``: ``[{"topic_id", "partitions" (sorted)[, "topic_name"]}]``,
    topics in id order; ``names`` (topic id -> name) adds the names (empty for an unknown id)."""
    out = []
    for topic_id in sorted(tps, key=str):
        entry: dict = {"topic_id": topic_id, "partitions": sorted(tps[topic_id])}
        if names is not None:
            entry["topic_name"] = names.get(topic_id, "")
        out.append(entry)
    return out


def heartbeat_error_response(code: int) -> dict:
    """The fields of a Consumer/ShareGroupHeartbeat response carrying only the error ``code``."""
    return {
        "error_code": code,
        "error_message": None,
        "member_id": None,
        "member_epoch": 0,
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }


def after_append(response: dict, respond):
    """The append callback of a heartbeat: ``respond(response)`` when the records were written, else the append's
    error (UNKNOWN_SERVER_ERROR for the size errors, Kafka's ``CoordinatorOperationExceptionHelper``)."""

    def done(code: int) -> None:
        if code == errors.NONE:
            return respond(response)
        return respond(heartbeat_error_response(errors.UNKNOWN_SERVER_ERROR if code in SIZE_ERRORS else code))

    return done


def describe_not_found(group_id: str, message: str) -> dict:
    """A Consumer/ShareGroupDescribe group answered GROUP_ID_NOT_FOUND with ``message``."""
    return {
        "error_code": errors.GROUP_ID_NOT_FOUND,
        "error_message": message,
        "group_id": group_id,
        "group_state": "",
        "members": [],
    }


class ModernGroupHandler:
    """The base of the consumer- and share-group heartbeat handlers. ``image``: a callable returning the current
    MetadataImage (or None): topics for assignments, group config overrides. Subclasses set ``record_codec`` (the
    module with ``records_of(group)`` and ``order(changes)``) and ``group_kind`` ("consumer", "share": log text)."""

    record_codec: ModuleType
    group_kind: str

    def __init__(self, coordinator, config, time, image=lambda: None):
        self.coordinator = coordinator
        self.manager = coordinator.manager
        self.time = time
        self.image = image
        self.purgatory = coordinator.heartbeat_purgatory
        self.defaults = group_config.GroupConfigDefaults.from_broker_config(config)
        self.log = get_logger("GroupCoordinator", id=coordinator.node_id)

    # -- configuration and metadata --------------------------------------------------------------------
    def _group_overrides(self, group_id: str) -> dict[str, Any]:
        image = self.image()
        return dict(image.configs.get((ConfigResourceType.GROUP, group_id), {})) if image is not None else {}

    def group_configs(self, group_id: str) -> dict:
        """The group's effective configs (its overrides of resource type GROUP, else the broker defaults; the
        defaults alone when the overrides are invalid)."""
        try:
            return group_config.effective(self._group_overrides(group_id), self.defaults)
        except errors.KafkaError:
            return group_config.effective({}, self.defaults)

    def _topics(self) -> dict[str, tuple[uuid.UUID, int]]:
        """Topic name -> (topic id, partition count) of the metadata image."""
        image = self.image()
        if image is None:
            return {}
        return {name: (t.id, len(t.partitions)) for name, t in image.topics.by_name.items()}

    def _topic_names_by_id(self) -> dict[uuid.UUID, str]:
        image = self.image()
        return {} if image is None else {tid: t.name for tid, t in image.topics.by_id.items()}

    # -- durability ----------------------------------------------------------------------------------------
    def persist(self, holder: GroupMetadata, group, callback=None) -> None:
        """Write what changed in ``group`` since its last write to ``__consumer_offsets`` (Kafka's coordinator
        records, ``record_codec``; tombstones for members gone), through the partition leader's append
        (``offsets.commit.required.acks``). Nothing is written when nothing changed (a plain heartbeat). Group lock
        held, so the group's appends reach the log in the order of its changes. A failed append makes the next change
        write the whole group again (the in-memory state is not rolled back, unlike Kafka's timeline snapshots).
        ``callback(error code)``, when given, is called once the append completed (at once with NONE when nothing is
        written, or the group is None or dead): on this thread under the group's lock when the append completes at
        once, else on the thread that completes it (a DelayedProduce's, acks=all) without it."""
        if group is None or group.dead:
            if callback is not None:
                callback(errors.NONE)
            return
        codec = self.record_codec
        current = codec.records_of(group)
        previous = group.persisted
        changes: dict[bytes, bytes | None]
        if previous is None:
            changes = dict(current)
        else:
            changes = {k: v for k, v in current.items() if previous.get(k) != v}
            changes.update({k: None for k in previous if k not in current})
        if not changes:
            if callback is not None:
                callback(errors.NONE)
            return
        group.persisted = current

        def done(code: int) -> None:
            if code != errors.NONE:
                self.log.warning(
                    f"[GroupId {group.group_id}] Writing the {self.group_kind} group's records failed",
                    error=errors.name_of(code),
                )
                with holder.lock:
                    group.persisted = None
            if callback is not None:
                callback(code)

        self.manager.append(group.group_id, codec.order(changes), done)
