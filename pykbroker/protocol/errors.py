"""Kafka's error table: one code, name, retriability and default message per error.

Mirrors ``org.apache.kafka.common.protocol.Errors``. ``_TABLE`` is the single source of each
error's code, NAME, retriability and default message. Every error but NONE has one exception class,
a subclass of :class:`KafkaError`, named as Kafka's exception class with "Exception" replaced by
"Error" (``KafkaStorageException`` -> ``KafkaStorageError``, ``OffsetMetadataTooLarge`` ->
``OffsetMetadataTooLargeError``); the one exception is ``TimeoutException`` -> ``KafkaTimeoutError``,
so as not to shadow Python's ``TimeoutError``. A class declares only its ``code``; ``name``,
``retriable`` and ``default_message`` are filled in from the table. :func:`for_code` and
:func:`for_exception` convert between codes and exceptions at the one boundary where it matters
(``KafkaApis`` turning exceptions into error responses).

This module imports nothing of pykbroker's: every layer may raise these errors.
"""

from __future__ import annotations

# (code, NAME, retriable, default message). Codes and names are protocol facts.
_TABLE: tuple[tuple[int, str, bool, str], ...] = (
    (-1, "UNKNOWN_SERVER_ERROR", False, "The server experienced an unexpected error when processing the request."),
    (0, "NONE", False, ""),
    (
        1,
        "OFFSET_OUT_OF_RANGE",
        False,
        "The requested offset is not within the range of offsets maintained by the server.",
    ),
    (
        2,
        "CORRUPT_MESSAGE",
        True,
        "This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt.",
    ),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", True, "This server does not host this topic-partition."),
    (4, "INVALID_FETCH_SIZE", False, "The requested fetch size is invalid."),
    (
        5,
        "LEADER_NOT_AVAILABLE",
        True,
        "There is no leader for this topic-partition as we are in the middle of a leadership election.",
    ),
    (
        6,
        "NOT_LEADER_OR_FOLLOWER",
        True,
        "For requests intended only for the leader, this error indicates that the broker is not the current leader.",
    ),
    (7, "REQUEST_TIMED_OUT", True, "The request timed out."),
    (8, "BROKER_NOT_AVAILABLE", False, "The broker is not available."),
    (9, "REPLICA_NOT_AVAILABLE", True, "The replica is not available for the requested topic-partition."),
    (
        10,
        "MESSAGE_TOO_LARGE",
        False,
        "The request included a message larger than the max message size the server will accept.",
    ),
    (11, "STALE_CONTROLLER_EPOCH", False, "The controller moved to another broker."),
    (12, "OFFSET_METADATA_TOO_LARGE", False, "The metadata field of the offset request was too large."),
    (13, "NETWORK_EXCEPTION", True, "The server disconnected before a response was received."),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", True, "The coordinator is loading and hence can't process requests."),
    (15, "COORDINATOR_NOT_AVAILABLE", True, "The coordinator is not available."),
    (16, "NOT_COORDINATOR", True, "This is not the correct coordinator."),
    (17, "INVALID_TOPIC_EXCEPTION", False, "The request attempted to perform an operation on an invalid topic."),
    (
        18,
        "RECORD_LIST_TOO_LARGE",
        False,
        "The request included message batch larger than the configured segment size on the server.",
    ),
    (19, "NOT_ENOUGH_REPLICAS", True, "Messages are rejected since there are fewer in-sync replicas than required."),
    (
        20,
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        True,
        "Messages are written to the log, but to fewer in-sync replicas than required.",
    ),
    (21, "INVALID_REQUIRED_ACKS", False, "Produce request specified an invalid value for required acks."),
    (22, "ILLEGAL_GENERATION", False, "Specified group generation id is not valid."),
    (
        23,
        "INCONSISTENT_GROUP_PROTOCOL",
        False,
        "The group member's supported protocols are incompatible with those of existing members or first group member tried to join with empty protocol type or empty protocol list.",
    ),
    (24, "INVALID_GROUP_ID", False, "The configured groupId is invalid."),
    (25, "UNKNOWN_MEMBER_ID", False, "The coordinator is not aware of this member."),
    (
        26,
        "INVALID_SESSION_TIMEOUT",
        False,
        "The session timeout is not within the range allowed by the broker (as configured by group.min.session.timeout.ms and group.max.session.timeout.ms).",
    ),
    (27, "REBALANCE_IN_PROGRESS", False, "The group is rebalancing, so a rejoin is needed."),
    (28, "INVALID_COMMIT_OFFSET_SIZE", False, "The committing offset data size is not valid."),
    (29, "TOPIC_AUTHORIZATION_FAILED", False, "Topic authorization failed."),
    (30, "GROUP_AUTHORIZATION_FAILED", False, "Group authorization failed."),
    (31, "CLUSTER_AUTHORIZATION_FAILED", False, "Cluster authorization failed."),
    (32, "INVALID_TIMESTAMP", False, "The timestamp of the message is out of acceptable range."),
    (33, "UNSUPPORTED_SASL_MECHANISM", False, "The broker does not support the requested SASL mechanism."),
    (34, "ILLEGAL_SASL_STATE", False, "Request is not valid given the current SASL state."),
    (35, "UNSUPPORTED_VERSION", False, "The version of API is not supported."),
    (36, "TOPIC_ALREADY_EXISTS", False, "Topic with this name already exists."),
    (37, "INVALID_PARTITIONS", False, "Number of partitions is below 1."),
    (
        38,
        "INVALID_REPLICATION_FACTOR",
        False,
        "Replication factor is below 1 or larger than the number of available brokers.",
    ),
    (39, "INVALID_REPLICA_ASSIGNMENT", False, "Replica assignment is invalid."),
    (40, "INVALID_CONFIG", False, "Configuration is invalid."),
    (41, "NOT_CONTROLLER", True, "This is not the correct controller for this cluster."),
    (
        42,
        "INVALID_REQUEST",
        False,
        "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.",
    ),
    (
        43,
        "UNSUPPORTED_FOR_MESSAGE_FORMAT",
        False,
        "The message format version on the broker does not support the request.",
    ),
    (44, "POLICY_VIOLATION", False, "Request parameters do not satisfy the configured policy."),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False, "The broker received an out of order sequence number."),
    (46, "DUPLICATE_SEQUENCE_NUMBER", False, "The broker received a duplicate sequence number."),
    (47, "INVALID_PRODUCER_EPOCH", False, "Producer attempted to produce with an old epoch."),
    (48, "INVALID_TXN_STATE", False, "The producer attempted a transactional operation in an invalid state."),
    (
        49,
        "INVALID_PRODUCER_ID_MAPPING",
        False,
        "The producer attempted to use a producer id which is not currently assigned to its transactional id.",
    ),
    (
        50,
        "INVALID_TRANSACTION_TIMEOUT",
        False,
        "The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms).",
    ),
    (
        51,
        "CONCURRENT_TRANSACTIONS",
        True,
        "The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing.",
    ),
    (
        52,
        "TRANSACTION_COORDINATOR_FENCED",
        False,
        "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer.",
    ),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", False, "Transactional Id authorization failed."),
    (54, "SECURITY_DISABLED", False, "Security features are disabled."),
    (55, "OPERATION_NOT_ATTEMPTED", False, "The broker did not attempt to execute this operation."),
    (56, "KAFKA_STORAGE_ERROR", True, "Disk error when trying to access log file on the disk."),
    (57, "LOG_DIR_NOT_FOUND", False, "The user-specified log directory is not found in the broker config."),
    (58, "SASL_AUTHENTICATION_FAILED", False, "SASL Authentication failed."),
    (
        59,
        "UNKNOWN_PRODUCER_ID",
        False,
        "This exception is raised by the broker if it could not locate the producer metadata associated with the producerId in question.",
    ),
    (60, "REASSIGNMENT_IN_PROGRESS", False, "A partition reassignment is in progress."),
    (61, "DELEGATION_TOKEN_AUTH_DISABLED", False, "Delegation Token feature is not enabled."),
    (62, "DELEGATION_TOKEN_NOT_FOUND", False, "Delegation Token is not found on server."),
    (63, "DELEGATION_TOKEN_OWNER_MISMATCH", False, "Specified Principal is not valid Owner/Renewer."),
    (
        64,
        "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED",
        False,
        "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels.",
    ),
    (65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", False, "Delegation Token authorization failed."),
    (66, "DELEGATION_TOKEN_EXPIRED", False, "Delegation Token is expired."),
    (67, "INVALID_PRINCIPAL_TYPE", False, "Supplied principalType is not supported."),
    (68, "NON_EMPTY_GROUP", False, "The group is not empty."),
    (69, "GROUP_ID_NOT_FOUND", False, "The group id does not exist."),
    (70, "FETCH_SESSION_ID_NOT_FOUND", True, "The fetch session ID was not found."),
    (71, "INVALID_FETCH_SESSION_EPOCH", True, "The fetch session epoch is invalid."),
    (
        72,
        "LISTENER_NOT_FOUND",
        True,
        "There is no listener on the leader broker that matches the listener on which metadata request was processed.",
    ),
    (73, "TOPIC_DELETION_DISABLED", False, "Topic deletion is disabled."),
    (74, "FENCED_LEADER_EPOCH", True, "The leader epoch in the request is older than the epoch on the broker."),
    (75, "UNKNOWN_LEADER_EPOCH", True, "The leader epoch in the request is newer than the epoch on the broker."),
    (
        76,
        "UNSUPPORTED_COMPRESSION_TYPE",
        False,
        "The requesting client does not support the compression type of given partition.",
    ),
    (77, "STALE_BROKER_EPOCH", False, "Broker epoch has changed."),
    (
        78,
        "OFFSET_NOT_AVAILABLE",
        True,
        "The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing.",
    ),
    (
        79,
        "MEMBER_ID_REQUIRED",
        False,
        "The group member needs to have a valid member id before actually entering a consumer group.",
    ),
    (80, "PREFERRED_LEADER_NOT_AVAILABLE", True, "The preferred leader was not available."),
    (81, "GROUP_MAX_SIZE_REACHED", False, "The consumer group has reached its max size."),
    (
        82,
        "FENCED_INSTANCE_ID",
        False,
        "The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id.",
    ),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", True, "Eligible topic partition leaders are not available."),
    (84, "ELECTION_NOT_NEEDED", True, "Leader election not needed for topic partition."),
    (85, "NO_REASSIGNMENT_IN_PROGRESS", False, "No partition reassignment is in progress."),
    (
        86,
        "GROUP_SUBSCRIBED_TO_TOPIC",
        False,
        "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.",
    ),
    (87, "INVALID_RECORD", False, "This record has failed the validation on broker and hence will be rejected."),
    (88, "UNSTABLE_OFFSET_COMMIT", True, "There are unstable offsets that need to be cleared."),
    (89, "THROTTLING_QUOTA_EXCEEDED", True, "The throttling quota has been exceeded."),
    (
        90,
        "PRODUCER_FENCED",
        False,
        "There is a newer producer with the same transactionalId which fences the current one.",
    ),
    (91, "RESOURCE_NOT_FOUND", False, "A request illegally referred to a resource that does not exist."),
    (92, "DUPLICATE_RESOURCE", False, "A request illegally referred to the same resource twice."),
    (93, "UNACCEPTABLE_CREDENTIAL", False, "Requested credential would not meet criteria for acceptability."),
    (
        94,
        "INCONSISTENT_VOTER_SET",
        False,
        "Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters.",
    ),
    (95, "INVALID_UPDATE_VERSION", False, "The given update version was invalid."),
    (96, "FEATURE_UPDATE_FAILED", False, "Unable to update finalized features due to an unexpected server error."),
    (97, "PRINCIPAL_DESERIALIZATION_FAILURE", False, "Request principal deserialization failed during forwarding."),
    (98, "SNAPSHOT_NOT_FOUND", False, "Requested snapshot was not found."),
    (
        99,
        "POSITION_OUT_OF_RANGE",
        False,
        "Requested position is not greater than or equal to zero, and less than the size of the snapshot.",
    ),
    (100, "UNKNOWN_TOPIC_ID", True, "This server does not host this topic ID."),
    (101, "DUPLICATE_BROKER_REGISTRATION", False, "This broker ID is already in use."),
    (102, "BROKER_ID_NOT_REGISTERED", False, "The given broker ID was not registered."),
    (103, "INCONSISTENT_TOPIC_ID", True, "The log's topic ID did not match the topic ID in the request."),
    (104, "INCONSISTENT_CLUSTER_ID", False, "The clusterId in the request does not match that found on the server."),
    (105, "TRANSACTIONAL_ID_NOT_FOUND", False, "The transactionalId could not be found."),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR", True, "The fetch session encountered inconsistent topic ID usage."),
    (107, "INELIGIBLE_REPLICA", False, "The new ISR contains at least one ineligible replica."),
    (
        108,
        "NEW_LEADER_ELECTED",
        False,
        "The AlterPartition request successfully updated the partition state but the leader has changed.",
    ),
    (109, "OFFSET_MOVED_TO_TIERED_STORAGE", False, "The requested offset is moved to tiered storage."),
    (
        110,
        "FENCED_MEMBER_EPOCH",
        False,
        "The member epoch is fenced by the group coordinator. The member must abandon all its partitions and rejoin.",
    ),
    (
        111,
        "UNRELEASED_INSTANCE_ID",
        False,
        "The instance ID is still used by another member in the consumer group. That member must leave first.",
    ),
    (112, "UNSUPPORTED_ASSIGNOR", False, "The assignor or its version range is not supported by the consumer group."),
    (
        113,
        "STALE_MEMBER_EPOCH",
        False,
        "The member epoch is stale. The member must retry after receiving its updated member epoch via the ConsumerGroupHeartbeat API.",
    ),
    (114, "MISMATCHED_ENDPOINT_TYPE", False, "The request was sent to an endpoint of the wrong type."),
    (115, "UNSUPPORTED_ENDPOINT_TYPE", False, "This endpoint type is not supported yet."),
    (116, "UNKNOWN_CONTROLLER_ID", False, "This controller ID is not known."),
    (
        117,
        "UNKNOWN_SUBSCRIPTION_ID",
        False,
        "Client sent a push telemetry request with an invalid or outdated subscription ID.",
    ),
    (
        118,
        "TELEMETRY_TOO_LARGE",
        False,
        "Client sent a push telemetry request larger than the maximum size the broker will accept.",
    ),
    (119, "INVALID_REGISTRATION", False, "The controller has considered the broker registration to be invalid."),
    (
        120,
        "TRANSACTION_ABORTABLE",
        False,
        "The server encountered an error with the transaction. The client can abort the transaction to continue using this transactional ID.",
    ),
    (
        121,
        "INVALID_RECORD_STATE",
        False,
        "The record state is invalid. The acknowledgement of delivery could not be completed.",
    ),
    (122, "SHARE_SESSION_NOT_FOUND", True, "The share session was not found."),
    (123, "INVALID_SHARE_SESSION_EPOCH", True, "The share session epoch is invalid."),
    (
        124,
        "FENCED_STATE_EPOCH",
        False,
        "The share coordinator rejected the request because the share-group state epoch did not match.",
    ),
    (125, "INVALID_VOTER_KEY", False, "The voter key doesn't match the receiving replica's key."),
    (126, "DUPLICATE_VOTER", False, "The voter is already part of the set of voters."),
    (127, "VOTER_NOT_FOUND", False, "The voter is not part of the set of voters."),
    (128, "INVALID_REGULAR_EXPRESSION", False, "The regular expression is not valid."),
    (
        129,
        "REBOOTSTRAP_REQUIRED",
        False,
        "Client metadata is stale. The client should rebootstrap to obtain new metadata.",
    ),
)


class KafkaError(Exception):
    """Base of every Kafka protocol error. ``code``/``name``/``retriable``/``default_message``
    come from the table; a bare KafkaError is UNKNOWN_SERVER_ERROR."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False
    default_message: str = ""

    def __init__(self, message: str | None = None):
        super().__init__(message if message is not None else self.default_message)

    @property
    def message(self) -> str:
        return str(self)


# One class per error code but NONE, in code order.
class UnknownServerError(KafkaError):
    code = -1


class OffsetOutOfRangeError(KafkaError):
    code = 1


class CorruptRecordError(KafkaError):
    code = 2


class UnknownTopicOrPartitionError(KafkaError):
    code = 3


class InvalidFetchSizeError(KafkaError):
    code = 4


class LeaderNotAvailableError(KafkaError):
    code = 5


class NotLeaderOrFollowerError(KafkaError):
    code = 6


class KafkaTimeoutError(KafkaError):
    code = 7


class BrokerNotAvailableError(KafkaError):
    code = 8


class ReplicaNotAvailableError(KafkaError):
    code = 9


class RecordTooLargeError(KafkaError):
    code = 10


class ControllerMovedError(KafkaError):
    code = 11


class OffsetMetadataTooLargeError(KafkaError):
    code = 12


class NetworkError(KafkaError):
    code = 13


class CoordinatorLoadInProgressError(KafkaError):
    code = 14


class CoordinatorNotAvailableError(KafkaError):
    code = 15


class NotCoordinatorError(KafkaError):
    code = 16


class InvalidTopicError(KafkaError):
    code = 17


class RecordBatchTooLargeError(KafkaError):
    code = 18


class NotEnoughReplicasError(KafkaError):
    code = 19


class NotEnoughReplicasAfterAppendError(KafkaError):
    code = 20


class InvalidRequiredAcksError(KafkaError):
    code = 21


class IllegalGenerationError(KafkaError):
    code = 22


class InconsistentGroupProtocolError(KafkaError):
    code = 23


class InvalidGroupIdError(KafkaError):
    code = 24


class UnknownMemberIdError(KafkaError):
    code = 25


class InvalidSessionTimeoutError(KafkaError):
    code = 26


class RebalanceInProgressError(KafkaError):
    code = 27


class InvalidCommitOffsetSizeError(KafkaError):
    code = 28


class TopicAuthorizationError(KafkaError):
    code = 29


class GroupAuthorizationError(KafkaError):
    code = 30


class ClusterAuthorizationError(KafkaError):
    code = 31


class InvalidTimestampError(KafkaError):
    code = 32


class UnsupportedSaslMechanismError(KafkaError):
    code = 33


class IllegalSaslStateError(KafkaError):
    code = 34


class UnsupportedVersionError(KafkaError):
    code = 35


class TopicExistsError(KafkaError):
    code = 36


class InvalidPartitionsError(KafkaError):
    code = 37


class InvalidReplicationFactorError(KafkaError):
    code = 38


class InvalidReplicaAssignmentError(KafkaError):
    code = 39


class InvalidConfigurationError(KafkaError):
    code = 40


class NotControllerError(KafkaError):
    code = 41


class InvalidRequestError(KafkaError):
    code = 42


class UnsupportedForMessageFormatError(KafkaError):
    code = 43


class PolicyViolationError(KafkaError):
    code = 44


class OutOfOrderSequenceError(KafkaError):
    code = 45


class DuplicateSequenceError(KafkaError):
    code = 46


class InvalidProducerEpochError(KafkaError):
    code = 47


class InvalidTxnStateError(KafkaError):
    code = 48


class InvalidPidMappingError(KafkaError):
    code = 49


class InvalidTxnTimeoutError(KafkaError):
    code = 50


class ConcurrentTransactionsError(KafkaError):
    code = 51


class TransactionCoordinatorFencedError(KafkaError):
    code = 52


class TransactionalIdAuthorizationError(KafkaError):
    code = 53


class SecurityDisabledError(KafkaError):
    code = 54


class OperationNotAttemptedError(KafkaError):
    code = 55


class KafkaStorageError(KafkaError):
    code = 56


class LogDirNotFoundError(KafkaError):
    code = 57


class SaslAuthenticationError(KafkaError):
    code = 58


class UnknownProducerIdError(KafkaError):
    code = 59


class ReassignmentInProgressError(KafkaError):
    code = 60


class DelegationTokenDisabledError(KafkaError):
    code = 61


class DelegationTokenNotFoundError(KafkaError):
    code = 62


class DelegationTokenOwnerMismatchError(KafkaError):
    code = 63


class UnsupportedByAuthenticationError(KafkaError):
    code = 64


class DelegationTokenAuthorizationError(KafkaError):
    code = 65


class DelegationTokenExpiredError(KafkaError):
    code = 66


class InvalidPrincipalTypeError(KafkaError):
    code = 67


class GroupNotEmptyError(KafkaError):
    code = 68


class GroupIdNotFoundError(KafkaError):
    code = 69


class FetchSessionIdNotFoundError(KafkaError):
    code = 70


class InvalidFetchSessionEpochError(KafkaError):
    code = 71


class ListenerNotFoundError(KafkaError):
    code = 72


class TopicDeletionDisabledError(KafkaError):
    code = 73


class FencedLeaderEpochError(KafkaError):
    code = 74


class UnknownLeaderEpochError(KafkaError):
    code = 75


class UnsupportedCompressionTypeError(KafkaError):
    code = 76


class StaleBrokerEpochError(KafkaError):
    code = 77


class OffsetNotAvailableError(KafkaError):
    code = 78


class MemberIdRequiredError(KafkaError):
    code = 79


class PreferredLeaderNotAvailableError(KafkaError):
    code = 80


class GroupMaxSizeReachedError(KafkaError):
    code = 81


class FencedInstanceIdError(KafkaError):
    code = 82


class EligibleLeadersNotAvailableError(KafkaError):
    code = 83


class ElectionNotNeededError(KafkaError):
    code = 84


class NoReassignmentInProgressError(KafkaError):
    code = 85


class GroupSubscribedToTopicError(KafkaError):
    code = 86


class InvalidRecordError(KafkaError):
    code = 87


class UnstableOffsetCommitError(KafkaError):
    code = 88


class ThrottlingQuotaExceededError(KafkaError):
    code = 89


class ProducerFencedError(KafkaError):
    code = 90


class ResourceNotFoundError(KafkaError):
    code = 91


class DuplicateResourceError(KafkaError):
    code = 92


class UnacceptableCredentialError(KafkaError):
    code = 93


class InconsistentVoterSetError(KafkaError):
    code = 94


class InvalidUpdateVersionError(KafkaError):
    code = 95


class FeatureUpdateFailedError(KafkaError):
    code = 96


class PrincipalDeserializationError(KafkaError):
    code = 97


class SnapshotNotFoundError(KafkaError):
    code = 98


class PositionOutOfRangeError(KafkaError):
    code = 99


class UnknownTopicIdError(KafkaError):
    code = 100


class DuplicateBrokerRegistrationError(KafkaError):
    code = 101


class BrokerIdNotRegisteredError(KafkaError):
    code = 102


class InconsistentTopicIdError(KafkaError):
    code = 103


class InconsistentClusterIdError(KafkaError):
    code = 104


class TransactionalIdNotFoundError(KafkaError):
    code = 105


class FetchSessionTopicIdError(KafkaError):
    code = 106


class IneligibleReplicaError(KafkaError):
    code = 107


class NewLeaderElectedError(KafkaError):
    code = 108


class OffsetMovedToTieredStorageError(KafkaError):
    code = 109


class FencedMemberEpochError(KafkaError):
    code = 110


class UnreleasedInstanceIdError(KafkaError):
    code = 111


class UnsupportedAssignorError(KafkaError):
    code = 112


class StaleMemberEpochError(KafkaError):
    code = 113


class MismatchedEndpointTypeError(KafkaError):
    code = 114


class UnsupportedEndpointTypeError(KafkaError):
    code = 115


class UnknownControllerIdError(KafkaError):
    code = 116


class UnknownSubscriptionIdError(KafkaError):
    code = 117


class TelemetryTooLargeError(KafkaError):
    code = 118


class InvalidRegistrationError(KafkaError):
    code = 119


class TransactionAbortableError(KafkaError):
    code = 120


class InvalidRecordStateError(KafkaError):
    code = 121


class ShareSessionNotFoundError(KafkaError):
    code = 122


class InvalidShareSessionEpochError(KafkaError):
    code = 123


class FencedStateEpochError(KafkaError):
    code = 124


class InvalidVoterKeyError(KafkaError):
    code = 125


class DuplicateVoterError(KafkaError):
    code = 126


class VoterNotFoundError(KafkaError):
    code = 127


class InvalidRegularExpressionError(KafkaError):
    code = 128


class RebootstrapRequiredError(KafkaError):
    code = 129


_NAMES: dict[int, str] = {_code: _name for _code, _name, _r, _m in _TABLE}
_BY_CODE: dict[int, type[KafkaError]] = {}


def _register() -> None:
    """Fill each class's name, retriability and default message in from the table; every code of
    the table but NONE must have exactly one class."""
    rows = {code: (name, retriable, msg) for code, name, retriable, msg in _TABLE}
    for cls in KafkaError.__subclasses__():
        if cls.__module__ != __name__:
            continue
        if cls.code in _BY_CODE or cls.code not in rows or cls.code == 0:
            raise AssertionError(f"{cls.__name__}: code {cls.code} is not a new error code of the table")
        cls.name, cls.retriable, cls.default_message = rows[cls.code]
        cls.__doc__ = (
            f"Kafka error {cls.code} {cls.name}{' (retriable)' if cls.retriable else ''}: {cls.default_message}"
        )
        _BY_CODE[cls.code] = cls
    missing = set(rows) - set(_BY_CODE) - {0}
    if missing:
        raise AssertionError(f"error codes without an exception class: {sorted(missing)}")


_register()

# Codes as module constants, e.g. ``errors.NONE == 0``, ``errors.CORRUPT_MESSAGE == 2``.
for _code, _name, _retriable, _msg in _TABLE:
    globals()[_name] = _code


def for_code(code: int) -> type[KafkaError]:
    """The exception class of ``code`` (``Errors.forCode``); an unknown code maps to
    UnknownServerError. NONE (0) has no exception: asking for it is a bug."""
    if code == 0:
        raise ValueError("error code NONE (0) has no exception class")
    return _BY_CODE.get(code, UnknownServerError)


def name_of(code: int) -> str:
    """The NAME of ``code`` (``2 -> "CORRUPT_MESSAGE"``); an unknown code is UNKNOWN_SERVER_ERROR."""
    return _NAMES.get(code, "UNKNOWN_SERVER_ERROR")


def for_exception(exc: BaseException) -> int:
    """The error code a response carries for ``exc``: its own code if it is a KafkaError,
    else UNKNOWN_SERVER_ERROR (-1), as ``Errors.forException`` does."""
    if isinstance(exc, KafkaError):
        return exc.code
    return -1
