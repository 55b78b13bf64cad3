"""MetadataImage: an immutable snapshot of the committed cluster metadata (Kafka's ``MetadataImage`` and
its parts ``FeaturesImage``, ``ClusterImage``, ``TopicsImage``/``TopicImage``, ``ConfigurationsImage``,
``ProducerIdsImage``).

Images are built only by :meth:`pykbroker.metadata.delta.MetadataDelta.apply` and never change after; any
thread may read one without locks and keep it as long as it likes. Mappings are read-only views. An image
can write itself back out as records (:meth:`MetadataImage.to_records`), which is how a newly installed
publisher is brought up to date (and what a snapshot writer will use).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from pykbroker.metadata.delegation_token_control_manager import TokenInformation
from pykbroker.metadata.features import METADATA_VERSION, register_broker_record_version
from pykbroker.metadata.partition_registration import PartitionRegistration
from pykbroker.metadata.records import (
    REGISTER_BROKER_RECORD,
    ApiMessageAndVersion,
    access_control_entry_record,
    client_quota_record,
    config_record,
    feature_level_record,
    producer_ids_record,
    topic_record,
    user_scram_credential_record,
)

_EMPTY: Mapping = MappingProxyType({})


def frozen(d: dict) -> Mapping:
    return MappingProxyType(d)


class MetadataProvenance(NamedTuple):
    """Where an image comes from: the last committed ``offset`` and ``epoch`` it includes."""

    offset: int
    epoch: int
    last_contained_log_time_ms: int = -1


EMPTY_PROVENANCE = MetadataProvenance(-1, -1, -1)


class Endpoint(NamedTuple):
    name: str
    host: str
    port: int
    security_protocol: int  # 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL


@dataclass(frozen=True)
class BrokerRegistration:
    id: int
    epoch: int
    incarnation_id: uuid.UUID
    listeners: Mapping[str, Endpoint] = field(default_factory=lambda: _EMPTY)
    supported_features: Mapping[str, tuple[int, int]] = field(default_factory=lambda: _EMPTY)
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    log_dirs: tuple[uuid.UUID, ...] = ()

    @classmethod
    def from_record(cls, d: dict) -> BrokerRegistration:
        listeners = {
            e["name"]: Endpoint(e["name"], e["host"], int(e["port"]), int(e.get("security_protocol", 0)))
            for e in d.get("end_points") or []
        }
        features = {
            f["name"]: (int(f["min_supported_version"]), int(f["max_supported_version"]))
            for f in d.get("features") or []
        }
        return cls(
            d["broker_id"],
            d["broker_epoch"],
            d["incarnation_id"],
            frozen(listeners),
            frozen(features),
            d.get("rack"),
            bool(d.get("fenced", True)),
            bool(d.get("in_controlled_shutdown", False)),
            tuple(d.get("log_dirs") or ()),
        )

    def to_record(self, version: int = 3) -> ApiMessageAndVersion:
        """The RegisterBrokerRecord at ``version`` (what the image's ``metadata.version`` allows)."""
        return ApiMessageAndVersion(
            REGISTER_BROKER_RECORD,
            version,
            {
                "broker_id": self.id,
                "is_migrating_zk_broker": False,
                "incarnation_id": self.incarnation_id,
                "broker_epoch": self.epoch,
                "end_points": [e._asdict() for e in self.listeners.values()],
                "features": [
                    {"name": n, "min_supported_version": lo, "max_supported_version": hi}
                    for n, (lo, hi) in self.supported_features.items()
                ],
                "rack": self.rack,
                "fenced": self.fenced,
                "in_controlled_shutdown": self.in_controlled_shutdown,
                "log_dirs": list(self.log_dirs),
            },
        )


@dataclass(frozen=True)
class TopicImage:
    name: str
    id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True)
class TopicsImage:
    by_id: Mapping[uuid.UUID, TopicImage] = field(default_factory=lambda: _EMPTY)
    by_name: Mapping[str, TopicImage] = field(default_factory=lambda: _EMPTY)

    def get_topic(self, name_or_id: str | uuid.UUID) -> TopicImage | None:
        if isinstance(name_or_id, uuid.UUID):
            return self.by_id.get(name_or_id)
        return self.by_name.get(name_or_id)

    def get_partition(self, topic_id: uuid.UUID, partition: int) -> PartitionRegistration | None:
        topic = self.by_id.get(topic_id)
        return topic.partitions.get(partition) if topic is not None else None


@dataclass(frozen=True)
class MetadataImage:
    provenance: MetadataProvenance = EMPTY_PROVENANCE
    cluster_id: str | None = None
    features: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: _EMPTY)
    topics: TopicsImage = field(default_factory=TopicsImage)
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    next_producer_id: int = 0
    #: SCRAM credentials: (user, mechanism type 1|2) -> (salt, stored key, server key, iterations)
    scram: Mapping[tuple[str, int], tuple[bytes, bytes, bytes, int]] = field(default_factory=lambda: _EMPTY)
    #: ACLs: id (uuid) -> (resource type, name, pattern type, principal, host, operation, permission type)
    acls: Mapping[Any, tuple] = field(default_factory=lambda: _EMPTY)
    #: client quotas (KIP-546): entity ``((type, name | None), ...)`` sorted by type -> {key: value}
    #: (Kafka's ``ClientQuotasImage``; see :mod:`pykbroker.metadata.client_quotas`)
    client_quotas: Mapping[tuple, Mapping[str, float]] = field(default_factory=lambda: _EMPTY)
    #: delegation tokens (KIP-48; Kafka's ``DelegationTokenImage``): token id -> TokenInformation
    delegation_tokens: Mapping[str, TokenInformation] = field(default_factory=lambda: _EMPTY)

    @property
    def offset(self) -> int:
        return self.provenance.offset

    @property
    def metadata_version(self) -> int | None:
        return self.features.get(METADATA_VERSION)

    def is_empty(self) -> bool:
        return not (
            self.features
            or self.brokers
            or self.topics.by_id
            or self.configs
            or self.next_producer_id
            or self.scram
            or self.acls
            or self.client_quotas
            or self.delegation_tokens
        )

    def topic_configs(self, topic: str) -> Mapping[str, str]:
        return self.configs.get((2, topic), _EMPTY)

    def to_records(self) -> list[ApiMessageAndVersion]:
        """This image as records that rebuild it when replayed into a delta of the empty image."""
        out = [feature_level_record(n, lvl) for n, lvl in sorted(self.features.items())]
        version = register_broker_record_version(self.metadata_version)
        out += [b.to_record(version) for _, b in sorted(self.brokers.items())]
        for topic in self.topics.by_id.values():
            out.append(topic_record(topic.name, topic.id))
            out += [p.to_record(topic.id, i) for i, p in sorted(topic.partitions.items())]
        for (rtype, rname), values in self.configs.items():
            out += [config_record(rtype, rname, k, v) for k, v in sorted(values.items())]
        if self.next_producer_id:
            out.append(producer_ids_record(-1, -1, self.next_producer_id))
        for (user, mechanism), (salt, stored, server, iterations) in sorted(self.scram.items()):
            out.append(user_scram_credential_record(user, mechanism, salt, stored, server, iterations))
        for acl_id, binding in self.acls.items():
            out.append(access_control_entry_record(acl_id, binding))
        for entity, quotas in self.client_quotas.items():
            out += [client_quota_record(entity, k, v) for k, v in sorted(quotas.items())]
        out += [token.to_record() for _, token in sorted(self.delegation_tokens.items())]
        return out


EMPTY_IMAGE = MetadataImage()
