"""Metadata records as the controller produces them: ``ApiMessageAndVersion(name, version, data)``.

Mirrors ``org.apache.kafka.server.common.ApiMessageAndVersion``: ``name`` is the record's schema name
(``"TopicRecord"``), ``version`` the record version written, ``data`` a dict with snake_case keys as in
Kafka's JSON field names (``TopicRecord {name, topic_id}``). The helpers below build the records this
package writes, at the versions it writes them, so field spelling lives in one place.

:class:`MetadataRecordSerde` is the Raft seam: it turns records into record values with
``pykbroker.protocol.metadata_records`` (frame version 1, api key, version, flexible message bytes).
"""

from __future__ import annotations

import uuid
from types import ModuleType
from typing import Any, NamedTuple

TOPIC_RECORD = "TopicRecord"
PARTITION_RECORD = "PartitionRecord"
CONFIG_RECORD = "ConfigRecord"
REMOVE_TOPIC_RECORD = "RemoveTopicRecord"
PARTITION_CHANGE_RECORD = "PartitionChangeRecord"
REGISTER_BROKER_RECORD = "RegisterBrokerRecord"
UNREGISTER_BROKER_RECORD = "UnregisterBrokerRecord"
FENCE_BROKER_RECORD = "FenceBrokerRecord"
UNFENCE_BROKER_RECORD = "UnfenceBrokerRecord"
BROKER_REGISTRATION_CHANGE_RECORD = "BrokerRegistrationChangeRecord"
FEATURE_LEVEL_RECORD = "FeatureLevelRecord"
PRODUCER_IDS_RECORD = "ProducerIdsRecord"
NO_OP_RECORD = "NoOpRecord"
USER_SCRAM_CREDENTIAL_RECORD = "UserScramCredentialRecord"
ACCESS_CONTROL_ENTRY_RECORD = "AccessControlEntryRecord"
REMOVE_ACCESS_CONTROL_ENTRY_RECORD = "RemoveAccessControlEntryRecord"
REMOVE_USER_SCRAM_CREDENTIAL_RECORD = "RemoveUserScramCredentialRecord"
CLIENT_QUOTA_RECORD = "ClientQuotaRecord"
DELEGATION_TOKEN_RECORD = "DelegationTokenRecord"
REMOVE_DELEGATION_TOKEN_RECORD = "RemoveDelegationTokenRecord"


NO_LEADER = -1
NO_LEADER_CHANGE = -2  # PartitionChangeRecord.leader default
LEADER_RECOVERED = 0


class ApiMessageAndVersion(NamedTuple):
    name: str
    version: int
    data: dict[str, Any]


def topic_record(name: str, topic_id: uuid.UUID) -> ApiMessageAndVersion:
    return ApiMessageAndVersion(TOPIC_RECORD, 0, {"name": name, "topic_id": topic_id})


def partition_record(
    topic_id: uuid.UUID,
    partition_id: int,
    replicas: list[int],
    isr: list[int],
    leader: int,
    leader_epoch: int = 0,
    partition_epoch: int = 0,
    removing_replicas: list[int] | tuple[int, ...] = (),
    adding_replicas: list[int] | tuple[int, ...] = (),
    elr: list[int] | tuple[int, ...] = (),
    last_known_elr: list[int] | tuple[int, ...] = (),
    directories: list[uuid.UUID] | tuple[uuid.UUID, ...] = (),
) -> ApiMessageAndVersion:
    """Version 0 without directories (every replica's directory MIGRATING, all zeros). ``removing_replicas`` /
    ``adding_replicas``: an ongoing reassignment's (KIP-455), so a snapshot keeps it. ``directories`` (KIP-858,
    parallel to ``replicas``; empty or all MIGRATING = none): version 1. With eligible leader replicas or a last
    known ELR (KIP-966) version 2, its directories MIGRATING when none are given."""
    data: dict[str, Any] = {
        "partition_id": partition_id,
        "topic_id": topic_id,
        "replicas": list(replicas),
        "isr": list(isr),
        "removing_replicas": list(removing_replicas),
        "adding_replicas": list(adding_replicas),
        "leader": leader,
        "leader_recovery_state": LEADER_RECOVERED,
        "leader_epoch": leader_epoch,
        "partition_epoch": partition_epoch,
    }
    has_directories = len(directories) == len(replicas) and any(d.int != 0 for d in directories)
    if not elr and not last_known_elr:
        if not has_directories:
            return ApiMessageAndVersion(PARTITION_RECORD, 0, data)
        data["directories"] = list(directories)
        return ApiMessageAndVersion(PARTITION_RECORD, 1, data)
    data["directories"] = list(directories) if has_directories else [uuid.UUID(int=0)] * len(replicas)
    data["eligible_leader_replicas"] = list(elr)
    data["last_known_elr"] = list(last_known_elr)
    return ApiMessageAndVersion(PARTITION_RECORD, 2, data)


def config_record(resource_type: int, resource_name: str, name: str, value: str | None) -> ApiMessageAndVersion:
    """``value`` None deletes the config."""
    return ApiMessageAndVersion(
        CONFIG_RECORD, 0, {"resource_type": resource_type, "resource_name": resource_name, "name": name, "value": value}
    )


def remove_topic_record(topic_id: uuid.UUID) -> ApiMessageAndVersion:
    return ApiMessageAndVersion(REMOVE_TOPIC_RECORD, 0, {"topic_id": topic_id})


def feature_level_record(name: str, level: int) -> ApiMessageAndVersion:
    return ApiMessageAndVersion(FEATURE_LEVEL_RECORD, 0, {"name": name, "feature_level": level})


def producer_ids_record(broker_id: int, broker_epoch: int, next_producer_id: int) -> ApiMessageAndVersion:
    return ApiMessageAndVersion(
        PRODUCER_IDS_RECORD,
        0,
        {"broker_id": broker_id, "broker_epoch": broker_epoch, "next_producer_id": next_producer_id},
    )


def delegation_token_record(
    token_id: str,
    owner: str,
    requester: str,
    renewers: list[str],
    issue_timestamp: int,
    max_timestamp: int,
    expiration_timestamp: int,
) -> ApiMessageAndVersion:
    """DelegationTokenRecord v0 (KIP-48): principals as ``"User:alice"``, timestamps in ms since the epoch."""
    return ApiMessageAndVersion(
        DELEGATION_TOKEN_RECORD,
        0,
        {
            "owner": owner,
            "requester": requester,
            "renewers": list(renewers),
            "issue_timestamp": issue_timestamp,
            "max_timestamp": max_timestamp,
            "expiration_timestamp": expiration_timestamp,
            "token_id": token_id,
        },
    )


def remove_delegation_token_record(token_id: str) -> ApiMessageAndVersion:
    return ApiMessageAndVersion(REMOVE_DELEGATION_TOKEN_RECORD, 0, {"token_id": token_id})


def user_scram_credential_record(
    name: str, mechanism: int, salt: bytes, stored_key: bytes, server_key: bytes, iterations: int
) -> ApiMessageAndVersion:
    return ApiMessageAndVersion(
        USER_SCRAM_CREDENTIAL_RECORD,
        0,
        {
            "name": name,
            "mechanism": mechanism,
            "salt": salt,
            "stored_key": stored_key,
            "server_key": server_key,
            "iterations": iterations,
        },
    )


def remove_user_scram_credential_record(name: str, mechanism: int) -> ApiMessageAndVersion:
    return ApiMessageAndVersion(REMOVE_USER_SCRAM_CREDENTIAL_RECORD, 0, {"name": name, "mechanism": mechanism})


def client_quota_record(
    entity: tuple[tuple[str, str | None], ...], key: str, value: float | None
) -> ApiMessageAndVersion:
    """``entity``: ``((type, name | None), ...)``; ``value`` None removes the key (``remove`` true)."""
    return ApiMessageAndVersion(
        CLIENT_QUOTA_RECORD,
        0,
        {
            "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
            "key": key,
            "value": 0.0 if value is None else float(value),
            "remove": value is None,
        },
    )


def access_control_entry_record(acl_id: uuid.UUID, binding: tuple) -> ApiMessageAndVersion:
    """``binding``: (resource type, resource name, pattern type, principal, host, operation, permission type)."""
    rtype, name, pattern, principal, host, operation, permission = binding
    return ApiMessageAndVersion(
        ACCESS_CONTROL_ENTRY_RECORD,
        0,
        {
            "id": acl_id,
            "resource_type": rtype,
            "resource_name": name,
            "pattern_type": pattern,
            "principal": principal,
            "host": host,
            "operation": operation,
            "permission_type": permission,
        },
    )


def remove_access_control_entry_record(acl_id: uuid.UUID) -> ApiMessageAndVersion:
    return ApiMessageAndVersion(REMOVE_ACCESS_CONTROL_ENTRY_RECORD, 0, {"id": acl_id})


def no_op_record() -> ApiMessageAndVersion:
    return ApiMessageAndVersion(NO_OP_RECORD, 0, {})


class MetadataRecordSerde:
    """``RecordSerde[ApiMessageAndVersion]`` over ``pykbroker.protocol.metadata_records`` (imported on
    first use, so this module loads without the codec). Thread-safe (stateless)."""

    def __init__(self) -> None:
        self._codec: ModuleType | None = None

    def _load(self) -> ModuleType:
        if self._codec is None:
            from pykbroker.protocol import metadata_records

            self._codec = metadata_records
        return self._codec

    def write(self, record: ApiMessageAndVersion) -> bytes:
        return self._load().encode_metadata_record(record.name, record.version, record.data)

    def read(self, value: bytes) -> ApiMessageAndVersion:
        name, version, data = self._load().decode_metadata_record(value)
        return ApiMessageAndVersion(name, version, data)
