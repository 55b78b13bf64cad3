"""MetadataDelta: committed records applied on top of an image (Kafka's ``MetadataDelta``, with
``TopicsDelta``/``TopicDelta`` and ``LocalReplicaChanges``).

``replay(record)`` records a change; ``apply(provenance)`` builds the next immutable
:class:`~pykbroker.metadata.image.MetadataImage`, sharing every unchanged part with the old one. A delta
also tells publishers *what* changed: ``topics.created_topic_ids``, ``topics.deleted_topics``,
``topics.changed_topics`` and, for a broker, ``topics.local_changes(broker_id)``.

Not thread-safe: a delta is built and applied by one thread (the metadata loader's).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from pykbroker.metadata.cluster_control_manager import apply_registration_change
from pykbroker.metadata.delegation_token_control_manager import TokenInformation
from pykbroker.metadata.features import KRAFT_VERSION
from pykbroker.metadata.image import (
    BrokerRegistration,
    MetadataImage,
    MetadataProvenance,
    TopicImage,
    TopicsImage,
    frozen,
)
from pykbroker.metadata.partition_registration import PartitionRegistration
from pykbroker.metadata.records import (
    ACCESS_CONTROL_ENTRY_RECORD,
    BROKER_REGISTRATION_CHANGE_RECORD,
    CLIENT_QUOTA_RECORD,
    CONFIG_RECORD,
    DELEGATION_TOKEN_RECORD,
    FEATURE_LEVEL_RECORD,
    FENCE_BROKER_RECORD,
    NO_OP_RECORD,
    PARTITION_CHANGE_RECORD,
    PARTITION_RECORD,
    PRODUCER_IDS_RECORD,
    REGISTER_BROKER_RECORD,
    REMOVE_ACCESS_CONTROL_ENTRY_RECORD,
    REMOVE_DELEGATION_TOKEN_RECORD,
    REMOVE_TOPIC_RECORD,
    REMOVE_USER_SCRAM_CREDENTIAL_RECORD,
    TOPIC_RECORD,
    UNFENCE_BROKER_RECORD,
    UNREGISTER_BROKER_RECORD,
    USER_SCRAM_CREDENTIAL_RECORD,
    ApiMessageAndVersion,
)
from pykbroker.protocol.config_resource import ConfigResourceType


@dataclass
class LocalReplicaChanges:
    """What one broker must do: ``deletes`` (topic, partition) to remove, and partitions it now leads or
    follows: ``(topic, partition) -> (topic_id, PartitionRegistration)``."""

    deletes: set[tuple[str, int]] = field(default_factory=set)
    leaders: dict[tuple[str, int], tuple[uuid.UUID, PartitionRegistration]] = field(default_factory=dict)
    followers: dict[tuple[str, int], tuple[uuid.UUID, PartitionRegistration]] = field(default_factory=dict)


class TopicDelta:
    def __init__(self, image: TopicImage):
        self.image = image
        self.partition_changes: dict[int, PartitionRegistration] = {}

    @property
    def name(self) -> str:
        return self.image.name

    @property
    def id(self) -> uuid.UUID:
        return self.image.id

    def partition(self, partition_id: int) -> PartitionRegistration | None:
        return self.partition_changes.get(partition_id) or self.image.partitions.get(partition_id)

    def new_partitions(self) -> list[int]:
        return sorted(p for p in self.partition_changes if p not in self.image.partitions)

    def apply(self) -> TopicImage:
        if not self.partition_changes:
            return self.image
        parts = dict(self.image.partitions)
        parts.update(self.partition_changes)
        return TopicImage(self.image.name, self.image.id, frozen(parts))


class TopicsDelta:
    def __init__(self, image: TopicsImage):
        self.image = image
        self.changed_topics: dict[uuid.UUID, TopicDelta] = {}
        self.created_topic_ids: set[uuid.UUID] = set()
        self.deleted_topics: dict[uuid.UUID, TopicImage] = {}

    def replay(self, record: ApiMessageAndVersion) -> str | None:
        """Returns the name of a removed topic (so configs can follow), else None."""
        d = record.data
        if record.name == TOPIC_RECORD:
            topic_id = d["topic_id"]
            existing = self.image.by_id.get(topic_id)
            if existing is not None and existing.name == d["name"]:  # a snapshot restating a known topic
                self.changed_topics.setdefault(topic_id, TopicDelta(existing))
            else:
                self.changed_topics[topic_id] = TopicDelta(TopicImage(d["name"], topic_id, frozen({})))
                self.created_topic_ids.add(topic_id)
        elif record.name == PARTITION_RECORD:
            self._topic(d["topic_id"]).partition_changes[d["partition_id"]] = PartitionRegistration.from_record(d)
        elif record.name == PARTITION_CHANGE_RECORD:
            delta = self._topic(d["topic_id"])
            current = delta.partition(d["partition_id"])
            if current is None:
                raise ValueError(f"PartitionChangeRecord for unknown partition {d['topic_id']}-{d['partition_id']}")
            delta.partition_changes[d["partition_id"]] = current.merge(d)
        elif record.name == REMOVE_TOPIC_RECORD:
            topic_id = d["topic_id"]
            removed = self.changed_topics.pop(topic_id, None)
            if topic_id in self.created_topic_ids:
                self.created_topic_ids.discard(topic_id)
                return removed.name if removed else None
            topic = self.image.by_id.get(topic_id)
            if topic is None:
                raise ValueError(f"RemoveTopicRecord for unknown topic id {topic_id}")
            self.deleted_topics[topic_id] = topic
            return topic.name
        return None

    def finish_snapshot(self) -> None:
        """Every topic of the image that the snapshot did not restate is deleted."""
        for topic_id, topic in self.image.by_id.items():
            if topic_id not in self.changed_topics:
                self.deleted_topics[topic_id] = topic

    def _topic(self, topic_id: uuid.UUID) -> TopicDelta:
        delta = self.changed_topics.get(topic_id)
        if delta is None:
            image = self.image.by_id.get(topic_id)
            if image is None:
                raise ValueError(f"Record for unknown topic id {topic_id}")
            delta = self.changed_topics[topic_id] = TopicDelta(image)
        return delta

    def apply(self) -> TopicsImage:
        if not self.changed_topics and not self.deleted_topics:
            return self.image
        by_id = dict(self.image.by_id)
        for topic_id in self.deleted_topics:
            by_id.pop(topic_id, None)
        for topic_id, delta in self.changed_topics.items():
            by_id[topic_id] = delta.apply()
        return TopicsImage(frozen(by_id), frozen({t.name: t for t in by_id.values()}))

    def local_changes(self, broker_id: int) -> LocalReplicaChanges:
        """Kafka's ``TopicsDelta.localChanges``: replicas this broker must delete, lead or follow."""
        changes = LocalReplicaChanges()
        for topic in self.deleted_topics.values():
            for p, reg in topic.partitions.items():
                if broker_id in reg.replicas:
                    changes.deletes.add((topic.name, p))
        for delta in self.changed_topics.values():
            for p, reg in delta.partition_changes.items():
                tp = (delta.name, p)
                if broker_id in reg.replicas:
                    (changes.leaders if reg.leader == broker_id else changes.followers)[tp] = (delta.id, reg)
                else:
                    previous = delta.image.partitions.get(p)
                    if previous is not None and broker_id in previous.replicas:
                        changes.deletes.add(tp)
        return changes


class MetadataDelta:
    def __init__(self, image: MetadataImage):
        self.image = image
        self.features_changes: dict[str, int | None] = {}
        self.broker_changes: dict[int, BrokerRegistration | None] = {}
        #: brokers a record of this delta fenced (registered fenced, FenceBroker, a fencing registration
        #: change), even if a later record unfenced them again
        self.fenced_brokers: set[int] = set()
        self.topics = TopicsDelta(image.topics)
        self.config_changes: dict[tuple[int, str], dict[str, str | None]] = {}
        self.deleted_config_resources: set[tuple[int, str]] = set()
        self.next_producer_id: int | None = None
        self.scram_changes: dict[tuple[str, int], tuple[bytes, bytes, bytes, int] | None] = {}
        self.acl_changes: dict[Any, tuple | None] = {}
        #: client quota entity -> {key: value, None = removed}
        self.client_quota_changes: dict[tuple, dict[str, float | None]] = {}
        #: delegation token id -> its TokenInformation (None: removed)
        self.delegation_token_changes: dict[str, TokenInformation | None] = {}

    def replay(self, record: ApiMessageAndVersion) -> None:
        name, d = record.name, record.data
        if name in (TOPIC_RECORD, PARTITION_RECORD, PARTITION_CHANGE_RECORD, REMOVE_TOPIC_RECORD):
            removed = self.topics.replay(record)
            if removed is not None:
                key = (ConfigResourceType.TOPIC, removed)
                self.config_changes.pop(key, None)
                self.deleted_config_resources.add(key)
        elif name == CONFIG_RECORD:
            key = (d["resource_type"], d["resource_name"])
            self.config_changes.setdefault(key, {})[d["name"]] = d.get("value")
        elif name == FEATURE_LEVEL_RECORD:
            if d["name"] != KRAFT_VERSION:  # KAFKA-18979: the Raft log's, never a FeatureLevelRecord's
                self.features_changes[d["name"]] = d["feature_level"] or None
        elif name == REGISTER_BROKER_RECORD:
            registration = BrokerRegistration.from_record(d)
            self.broker_changes[d["broker_id"]] = registration
            if registration.fenced:
                self.fenced_brokers.add(registration.id)
        elif name == UNREGISTER_BROKER_RECORD:
            self.broker_changes[d["broker_id"]] = None
        elif name in (FENCE_BROKER_RECORD, UNFENCE_BROKER_RECORD):
            current = self._broker(d["id"])
            if current is not None:
                self.broker_changes[d["id"]] = replace(current, fenced=name == FENCE_BROKER_RECORD)
                if name == FENCE_BROKER_RECORD:
                    self.fenced_brokers.add(d["id"])
        elif name == BROKER_REGISTRATION_CHANGE_RECORD:
            current = self._broker(d["broker_id"])
            if current is not None:
                fenced, shutdown = apply_registration_change(current.fenced, current.in_controlled_shutdown, d)
                log_dirs = tuple(d["log_dirs"]) if d.get("log_dirs") else current.log_dirs  # KIP-858
                self.broker_changes[d["broker_id"]] = replace(
                    current, fenced=fenced, in_controlled_shutdown=shutdown, log_dirs=log_dirs
                )
                if fenced and not current.fenced:
                    self.fenced_brokers.add(d["broker_id"])
        elif name == PRODUCER_IDS_RECORD:
            self.next_producer_id = d["next_producer_id"]
        elif name == USER_SCRAM_CREDENTIAL_RECORD:
            self.scram_changes[(d["name"], d["mechanism"])] = (
                bytes(d["salt"]),
                bytes(d["stored_key"]),
                bytes(d["server_key"]),
                d["iterations"],
            )
        elif name == REMOVE_USER_SCRAM_CREDENTIAL_RECORD:
            self.scram_changes[(d["name"], d["mechanism"])] = None
        elif name == DELEGATION_TOKEN_RECORD:
            self.delegation_token_changes[d["token_id"]] = TokenInformation.from_record(d)
        elif name == REMOVE_DELEGATION_TOKEN_RECORD:
            self.delegation_token_changes[d["token_id"]] = None
        elif name == ACCESS_CONTROL_ENTRY_RECORD:
            self.acl_changes[d["id"]] = (
                d["resource_type"],
                d["resource_name"],
                d["pattern_type"],
                d["principal"],
                d["host"],
                d["operation"],
                d["permission_type"],
            )
        elif name == REMOVE_ACCESS_CONTROL_ENTRY_RECORD:
            self.acl_changes[d["id"]] = None
        elif name == CLIENT_QUOTA_RECORD:
            entity = tuple(sorted((e["entity_type"], e["entity_name"]) for e in d["entity"]))
            self.client_quota_changes.setdefault(entity, {})[d["key"]] = None if d["remove"] else d["value"]
        elif name == NO_OP_RECORD:
            pass

    def finish_snapshot(self) -> None:
        """After replaying a whole snapshot into a delta of the current image: whatever the image has and the
        snapshot did not restate is gone (Kafka's ``MetadataDelta.finishSnapshot``), so applying the delta
        yields exactly the snapshot's state and the delta tells publishers what disappeared."""
        for name in self.image.features:
            self.features_changes.setdefault(name, None)
        for broker_id in self.image.brokers:
            self.broker_changes.setdefault(broker_id, None)
        self.topics.finish_snapshot()
        for key, values in self.image.configs.items():
            if key not in self.config_changes:
                self.deleted_config_resources.add(key)
                continue
            changes = self.config_changes[key]
            for name in values:
                changes.setdefault(name, None)
        if self.next_producer_id is None and self.image.next_producer_id:
            self.next_producer_id = 0
        for user_mechanism in self.image.scram:
            self.scram_changes.setdefault(user_mechanism, None)
        for acl_id in self.image.acls:
            self.acl_changes.setdefault(acl_id, None)
        for token_id in self.image.delegation_tokens:
            self.delegation_token_changes.setdefault(token_id, None)
        for entity, quotas in self.image.client_quotas.items():
            quota_changes = self.client_quota_changes.setdefault(entity, {})
            for quota_key in quotas:
                quota_changes.setdefault(quota_key, None)

    def replay_all(self, records: Iterable[ApiMessageAndVersion]) -> MetadataDelta:
        for r in records:
            self.replay(r)
        return self

    def _broker(self, broker_id: int) -> BrokerRegistration | None:
        if broker_id in self.broker_changes:
            return self.broker_changes[broker_id]
        return self.image.brokers.get(broker_id)

    def apply(self, provenance: MetadataProvenance | None = None) -> MetadataImage:
        image = self.image
        changes: dict[str, Any] = {"provenance": provenance or image.provenance}
        if self.features_changes:
            features = dict(image.features)
            for n, lvl in self.features_changes.items():
                if lvl is None:
                    features.pop(n, None)
                else:
                    features[n] = lvl
            changes["features"] = frozen(features)
        if self.broker_changes:
            brokers = dict(image.brokers)
            for b, reg in self.broker_changes.items():
                if reg is None:
                    brokers.pop(b, None)
                else:
                    brokers[b] = reg
            changes["brokers"] = frozen(brokers)
        changes["topics"] = self.topics.apply()
        if self.config_changes or self.deleted_config_resources:
            configs = {k: dict(v) for k, v in image.configs.items()}
            for key in self.deleted_config_resources:
                configs.pop(key, None)
            for key, values in self.config_changes.items():
                target = configs.setdefault(key, {})
                for k, v in values.items():
                    if v is None:
                        target.pop(k, None)
                    else:
                        target[k] = v
                if not target:
                    del configs[key]
            changes["configs"] = frozen({k: frozen(v) for k, v in configs.items()})
        if self.next_producer_id is not None:
            changes["next_producer_id"] = self.next_producer_id
        if self.scram_changes:
            scram = dict(image.scram)
            for user_mechanism, credential in self.scram_changes.items():
                if credential is None:
                    scram.pop(user_mechanism, None)
                else:
                    scram[user_mechanism] = credential
            changes["scram"] = frozen(scram)
        if self.delegation_token_changes:
            tokens = dict(image.delegation_tokens)
            for token_id, token in self.delegation_token_changes.items():
                if token is None:
                    tokens.pop(token_id, None)
                else:
                    tokens[token_id] = token
            changes["delegation_tokens"] = frozen(tokens)
        if self.acl_changes:
            acls = dict(image.acls)
            for acl_id, binding in self.acl_changes.items():
                if binding is None:
                    acls.pop(acl_id, None)
                else:
                    acls[acl_id] = binding
            changes["acls"] = frozen(acls)
        if self.client_quota_changes:
            quotas = dict(image.client_quotas)
            for entity, quota_values in self.client_quota_changes.items():
                merged = dict(quotas.get(entity, {}))
                for quota, value in quota_values.items():
                    if value is None:
                        merged.pop(quota, None)
                    else:
                        merged[quota] = value
                if merged:
                    quotas[entity] = frozen(merged)
                else:
                    quotas.pop(entity, None)
            changes["client_quotas"] = frozen(quotas)
        return replace(image, **changes)
