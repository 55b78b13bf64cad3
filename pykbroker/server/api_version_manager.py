"""ApiVersionManager: which (api key, version) ranges this broker advertises and accepts per listener.

Mirrors ``kafka.server.ApiVersionManager``. Only APIs that KafkaApis has a handler for are advertised
("advertise only what is implemented"); ranges start at the floor that magic-v2-only record batches and
Kafka 4.0 (KIP-896) dictate and end at the newest version our schemas implement.
Controller-only APIs are accepted on the controller (control-plane) listener only.

One exception to "advertise what is served", as Kafka 4.0 makes it (KAFKA-18659): Produce is advertised from
version 0 although only v3+ are served (a v0-v2 request is refused like any disabled version, closing its
connection). librdkafka releases before 2.10 compress a batch only when the broker advertises Produce v0-v2
(librdkafka issue 4956: a Kafka 4 broker otherwise receives every batch of, e.g., Debian's kcat 1.7.1
uncompressed); clients pick the highest common version, so none sends v0-v2.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from pykbroker.protocol.api_keys import ApiKeys

# api key -> (min, max) that the broker implements.
BROKER_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKeys.PRODUCE: (3, 12),
    ApiKeys.FETCH: (4, 18),
    ApiKeys.LIST_OFFSETS: (1, 10),
    ApiKeys.METADATA: (0, 13),
    ApiKeys.OFFSET_COMMIT: (2, 10),
    ApiKeys.OFFSET_FETCH: (1, 10),
    ApiKeys.FIND_COORDINATOR: (0, 6),
    ApiKeys.JOIN_GROUP: (0, 9),
    ApiKeys.HEARTBEAT: (0, 4),
    ApiKeys.LEAVE_GROUP: (0, 5),
    ApiKeys.SYNC_GROUP: (0, 5),
    ApiKeys.DESCRIBE_GROUPS: (0, 6),
    ApiKeys.LIST_GROUPS: (0, 5),
    ApiKeys.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKeys.CONSUMER_GROUP_DESCRIBE: (0, 1),
    ApiKeys.SHARE_FETCH: (1, 1),
    ApiKeys.SHARE_ACKNOWLEDGE: (1, 1),
    ApiKeys.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKeys.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKeys.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    ApiKeys.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKeys.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKeys.API_VERSIONS: (0, 4),
    ApiKeys.SASL_HANDSHAKE: (0, 1),
    ApiKeys.SASL_AUTHENTICATE: (0, 2),
    ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKeys.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKeys.DESCRIBE_ACLS: (1, 3),
    ApiKeys.CREATE_ACLS: (1, 3),
    ApiKeys.DELETE_ACLS: (1, 3),
    ApiKeys.CREATE_TOPICS: (2, 7),
    ApiKeys.DELETE_TOPICS: (1, 6),
    ApiKeys.DELETE_RECORDS: (0, 2),
    ApiKeys.DESCRIBE_LOG_DIRS: (1, 4),
    ApiKeys.INIT_PRODUCER_ID: (0, 5),
    ApiKeys.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKeys.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKeys.END_TXN: (0, 5),
    ApiKeys.WRITE_TXN_MARKERS: (1, 1),
    ApiKeys.TXN_OFFSET_COMMIT: (0, 5),
    ApiKeys.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKeys.LIST_TRANSACTIONS: (0, 2),
    ApiKeys.DESCRIBE_PRODUCERS: (0, 0),
    ApiKeys.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKeys.DESCRIBE_CONFIGS: (1, 4),
    ApiKeys.ALTER_CONFIGS: (0, 2),
    ApiKeys.CREATE_PARTITIONS: (0, 3),
    ApiKeys.DELETE_GROUPS: (0, 2),
    ApiKeys.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKeys.OFFSET_DELETE: (0, 0),
    ApiKeys.DESCRIBE_CLUSTER: (0, 2),
    ApiKeys.DESCRIBE_QUORUM: (0, 2),
    ApiKeys.ELECT_LEADERS: (0, 2),
    ApiKeys.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKeys.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKeys.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    ApiKeys.UPDATE_FEATURES: (0, 2),
    ApiKeys.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKeys.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKeys.CREATE_DELEGATION_TOKEN: (1, 3),
    ApiKeys.RENEW_DELEGATION_TOKEN: (1, 2),
    ApiKeys.EXPIRE_DELEGATION_TOKEN: (1, 2),
    ApiKeys.DESCRIBE_DELEGATION_TOKEN: (1, 3),
    ApiKeys.INITIALIZE_SHARE_GROUP_STATE: (0, 0),
    ApiKeys.READ_SHARE_GROUP_STATE: (0, 0),
    ApiKeys.WRITE_SHARE_GROUP_STATE: (0, 1),
    ApiKeys.DELETE_SHARE_GROUP_STATE: (0, 0),
    ApiKeys.READ_SHARE_GROUP_STATE_SUMMARY: (0, 1),
    ApiKeys.ADD_RAFT_VOTER: (0, 0),
    ApiKeys.REMOVE_RAFT_VOTER: (0, 0),
}

# api key -> the min version the ApiVersions response advertises below the served range (KAFKA-18659).
ADVERTISED_MIN_VERSIONS: dict[int, int] = {ApiKeys.PRODUCE: 0}

# api key -> (min, max) of the APIs only the controller listener serves (ControllerApis, the Raft RPCs).
CONTROLLER_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKeys.VOTE: (0, 2),
    ApiKeys.BEGIN_QUORUM_EPOCH: (0, 1),
    ApiKeys.END_QUORUM_EPOCH: (0, 1),
    ApiKeys.DESCRIBE_QUORUM: (0, 2),
    ApiKeys.FETCH_SNAPSHOT: (0, 1),
    ApiKeys.BROKER_REGISTRATION: (0, 4),
    ApiKeys.BROKER_HEARTBEAT: (0, 1),
    ApiKeys.UNREGISTER_BROKER: (0, 0),
    ApiKeys.ALLOCATE_PRODUCER_IDS: (0, 0),
    ApiKeys.ASSIGN_REPLICAS_TO_DIRS: (0, 0),
    ApiKeys.ALTER_PARTITION: (2, 3),
    ApiKeys.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKeys.CREATE_ACLS: (1, 3),
    ApiKeys.DELETE_ACLS: (1, 3),
    ApiKeys.UPDATE_FEATURES: (0, 2),
    ApiKeys.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKeys.CREATE_DELEGATION_TOKEN: (1, 3),
    ApiKeys.RENEW_DELEGATION_TOKEN: (1, 2),
    ApiKeys.EXPIRE_DELEGATION_TOKEN: (1, 2),
    ApiKeys.ENVELOPE: (0, 0),
    ApiKeys.ADD_RAFT_VOTER: (0, 0),
    ApiKeys.REMOVE_RAFT_VOTER: (0, 0),
    ApiKeys.UPDATE_RAFT_VOTER: (0, 0),
}


class ApiVersionManager:
    """Thread-safe after construction (read-only)."""

    def __init__(self, implemented: set[int], schema_range, controller_listeners: AbstractSet[str] = frozenset()):
        self.controller_listeners = {n.upper() for n in controller_listeners}
        self.versions: dict[int, tuple[int, int]] = {}
        for key in sorted(implemented):
            lo, hi = BROKER_VERSIONS.get(key) or CONTROLLER_VERSIONS.get(key) or (None, None)
            if lo is None:
                continue
            s_lo, s_hi = schema_range(key)
            lo, hi = max(lo, s_lo), min(hi, s_hi)
            if lo <= hi:
                self.versions[int(key)] = (lo, hi)

    def api_versions(self) -> list[dict]:
        """The ApiVersions response's ``api_keys`` list: the served ranges, with Produce's advertised from v0
        (``ADVERTISED_MIN_VERSIONS``, KAFKA-18659)."""
        return [
            {"api_key": k, "min_version": min(lo, ADVERTISED_MIN_VERSIONS.get(k, lo)), "max_version": hi}
            for k, (lo, hi) in sorted(self.versions.items())
        ]

    def is_api_allowed(self, listener: str, api_key: int, version: int) -> bool:
        rng = self.versions.get(api_key)
        return rng is not None and rng[0] <= version <= rng[1]
