"""Kafka's errors: one code, NAME, retriability and default message per error, each declared once.

Mirrors ``org.apache.kafka.common.protocol.Errors``. Every error but NONE is one exception class, a subclass of
:class:`KafkaError` whose class body declares its ``code``, ``name`` (Kafka's NAME), ``retriable`` (when True)
and ``default_message``; right after it, the module constant of its code (``errors.CORRUPT_MESSAGE == 2``) is
read from the class, so that type checkers and editors see every ``errors.X``. The classes are named as Kafka's
exception classes with "Exception" replaced by "Error" (``KafkaStorageException`` -> ``KafkaStorageError``,
``OffsetMetadataTooLarge`` -> ``OffsetMetadataTooLargeError``); the one exception is ``TimeoutException`` ->
``KafkaTimeoutError``, so as not to shadow Python's ``TimeoutError``. The code table (:func:`for_code`,
:func:`name_of`) is derived from the classes at import, which also checks that each code and NAME is declared
once and that each constant names its class's code. :func:`for_code` and :func:`for_exception` convert between
codes and exceptions at the one boundary where it matters (``KafkaApis`` turning exceptions into error responses).

This module imports nothing of pykbroker's: every layer may raise these errors.
"""

from __future__ import annotations


class KafkaError(Exception):
    """Base of every Kafka protocol error. Each subclass declares ``code``/``name``/``retriable``/
    ``default_message``; a bare KafkaError is UNKNOWN_SERVER_ERROR."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False
    default_message: str = ""

    def __init__(self, message: str | None = None):
        super().__init__(message if message is not None else self.default_message)

    @property
    def message(self) -> str:
        return str(self)


# The code of no error; it has no exception class.
NONE = 0


# One class per error code but NONE, in code order, each followed by its code constant.


class UnknownServerError(KafkaError):
    code = -1
    name = "UNKNOWN_SERVER_ERROR"
    default_message = "The server experienced an unexpected error when processing the request."


UNKNOWN_SERVER_ERROR = UnknownServerError.code


class OffsetOutOfRangeError(KafkaError):
    code = 1
    name = "OFFSET_OUT_OF_RANGE"
    default_message = "The requested offset is not within the range of offsets maintained by the server."


OFFSET_OUT_OF_RANGE = OffsetOutOfRangeError.code


class CorruptRecordError(KafkaError):
    code = 2
    name = "CORRUPT_MESSAGE"
    retriable = True
    default_message = "This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt."


CORRUPT_MESSAGE = CorruptRecordError.code


class UnknownTopicOrPartitionError(KafkaError):
    code = 3
    name = "UNKNOWN_TOPIC_OR_PARTITION"
    retriable = True
    default_message = "This server does not host this topic-partition."


UNKNOWN_TOPIC_OR_PARTITION = UnknownTopicOrPartitionError.code


class InvalidFetchSizeError(KafkaError):
    code = 4
    name = "INVALID_FETCH_SIZE"
    default_message = "The requested fetch size is invalid."


INVALID_FETCH_SIZE = InvalidFetchSizeError.code


class LeaderNotAvailableError(KafkaError):
    code = 5
    name = "LEADER_NOT_AVAILABLE"
    retriable = True
    default_message = "There is no leader for this topic-partition as we are in the middle of a leadership election."


LEADER_NOT_AVAILABLE = LeaderNotAvailableError.code


class NotLeaderOrFollowerError(KafkaError):
    code = 6
    name = "NOT_LEADER_OR_FOLLOWER"
    retriable = True
    default_message = (
        "For requests intended only for the leader, this error indicates that the broker is not the current leader."
    )


NOT_LEADER_OR_FOLLOWER = NotLeaderOrFollowerError.code


class KafkaTimeoutError(KafkaError):
    code = 7
    name = "REQUEST_TIMED_OUT"
    retriable = True
    default_message = "The request timed out."


REQUEST_TIMED_OUT = KafkaTimeoutError.code


class BrokerNotAvailableError(KafkaError):
    code = 8
    name = "BROKER_NOT_AVAILABLE"
    default_message = "The broker is not available."


BROKER_NOT_AVAILABLE = BrokerNotAvailableError.code


class ReplicaNotAvailableError(KafkaError):
    code = 9
    name = "REPLICA_NOT_AVAILABLE"
    retriable = True
    default_message = "The replica is not available for the requested topic-partition."


REPLICA_NOT_AVAILABLE = ReplicaNotAvailableError.code


class RecordTooLargeError(KafkaError):
    code = 10
    name = "MESSAGE_TOO_LARGE"
    default_message = "The request included a message larger than the max message size the server will accept."


MESSAGE_TOO_LARGE = RecordTooLargeError.code


class ControllerMovedError(KafkaError):
    code = 11
    name = "STALE_CONTROLLER_EPOCH"
    default_message = "The controller moved to another broker."


STALE_CONTROLLER_EPOCH = ControllerMovedError.code


class OffsetMetadataTooLargeError(KafkaError):
    code = 12
    name = "OFFSET_METADATA_TOO_LARGE"
    default_message = "The metadata field of the offset request was too large."


OFFSET_METADATA_TOO_LARGE = OffsetMetadataTooLargeError.code


class NetworkError(KafkaError):
    code = 13
    name = "NETWORK_EXCEPTION"
    retriable = True
    default_message = "The server disconnected before a response was received."


NETWORK_EXCEPTION = NetworkError.code


class CoordinatorLoadInProgressError(KafkaError):
    code = 14
    name = "COORDINATOR_LOAD_IN_PROGRESS"
    retriable = True
    default_message = "The coordinator is loading and hence can't process requests."


COORDINATOR_LOAD_IN_PROGRESS = CoordinatorLoadInProgressError.code


class CoordinatorNotAvailableError(KafkaError):
    code = 15
    name = "COORDINATOR_NOT_AVAILABLE"
    retriable = True
    default_message = "The coordinator is not available."


COORDINATOR_NOT_AVAILABLE = CoordinatorNotAvailableError.code


class NotCoordinatorError(KafkaError):
    code = 16
    name = "NOT_COORDINATOR"
    retriable = True
    default_message = "This is not the correct coordinator."


NOT_COORDINATOR = NotCoordinatorError.code


class InvalidTopicError(KafkaError):
    code = 17
    name = "INVALID_TOPIC_EXCEPTION"
    default_message = "The request attempted to perform an operation on an invalid topic."


INVALID_TOPIC_EXCEPTION = InvalidTopicError.code


class RecordBatchTooLargeError(KafkaError):
    code = 18
    name = "RECORD_LIST_TOO_LARGE"
    default_message = "The request included message batch larger than the configured segment size on the server."


RECORD_LIST_TOO_LARGE = RecordBatchTooLargeError.code


class NotEnoughReplicasError(KafkaError):
    code = 19
    name = "NOT_ENOUGH_REPLICAS"
    retriable = True
    default_message = "Messages are rejected since there are fewer in-sync replicas than required."


NOT_ENOUGH_REPLICAS = NotEnoughReplicasError.code


class NotEnoughReplicasAfterAppendError(KafkaError):
    code = 20
    name = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    retriable = True
    default_message = "Messages are written to the log, but to fewer in-sync replicas than required."


NOT_ENOUGH_REPLICAS_AFTER_APPEND = NotEnoughReplicasAfterAppendError.code


class InvalidRequiredAcksError(KafkaError):
    code = 21
    name = "INVALID_REQUIRED_ACKS"
    default_message = "Produce request specified an invalid value for required acks."


INVALID_REQUIRED_ACKS = InvalidRequiredAcksError.code


class IllegalGenerationError(KafkaError):
    code = 22
    name = "ILLEGAL_GENERATION"
    default_message = "Specified group generation id is not valid."


ILLEGAL_GENERATION = IllegalGenerationError.code


class InconsistentGroupProtocolError(KafkaError):
    code = 23
    name = "INCONSISTENT_GROUP_PROTOCOL"
    default_message = "The group member's supported protocols are incompatible with those of existing members or first group member tried to join with empty protocol type or empty protocol list."


INCONSISTENT_GROUP_PROTOCOL = InconsistentGroupProtocolError.code


class InvalidGroupIdError(KafkaError):
    code = 24
    name = "INVALID_GROUP_ID"
    default_message = "The configured groupId is invalid."


INVALID_GROUP_ID = InvalidGroupIdError.code


class UnknownMemberIdError(KafkaError):
    code = 25
    name = "UNKNOWN_MEMBER_ID"
    default_message = "The coordinator is not aware of this member."


UNKNOWN_MEMBER_ID = UnknownMemberIdError.code


class InvalidSessionTimeoutError(KafkaError):
    code = 26
    name = "INVALID_SESSION_TIMEOUT"
    default_message = "The session timeout is not within the range allowed by the broker (as configured by group.min.session.timeout.ms and group.max.session.timeout.ms)."


INVALID_SESSION_TIMEOUT = InvalidSessionTimeoutError.code


class RebalanceInProgressError(KafkaError):
    code = 27
    name = "REBALANCE_IN_PROGRESS"
    default_message = "The group is rebalancing, so a rejoin is needed."


REBALANCE_IN_PROGRESS = RebalanceInProgressError.code


class InvalidCommitOffsetSizeError(KafkaError):
    code = 28
    name = "INVALID_COMMIT_OFFSET_SIZE"
    default_message = "The committing offset data size is not valid."


INVALID_COMMIT_OFFSET_SIZE = InvalidCommitOffsetSizeError.code


class TopicAuthorizationError(KafkaError):
    code = 29
    name = "TOPIC_AUTHORIZATION_FAILED"
    default_message = "Topic authorization failed."


TOPIC_AUTHORIZATION_FAILED = TopicAuthorizationError.code


class GroupAuthorizationError(KafkaError):
    code = 30
    name = "GROUP_AUTHORIZATION_FAILED"
    default_message = "Group authorization failed."


GROUP_AUTHORIZATION_FAILED = GroupAuthorizationError.code


class ClusterAuthorizationError(KafkaError):
    code = 31
    name = "CLUSTER_AUTHORIZATION_FAILED"
    default_message = "Cluster authorization failed."


CLUSTER_AUTHORIZATION_FAILED = ClusterAuthorizationError.code


class InvalidTimestampError(KafkaError):
    code = 32
    name = "INVALID_TIMESTAMP"
    default_message = "The timestamp of the message is out of acceptable range."


INVALID_TIMESTAMP = InvalidTimestampError.code


class UnsupportedSaslMechanismError(KafkaError):
    code = 33
    name = "UNSUPPORTED_SASL_MECHANISM"
    default_message = "The broker does not support the requested SASL mechanism."


UNSUPPORTED_SASL_MECHANISM = UnsupportedSaslMechanismError.code


class IllegalSaslStateError(KafkaError):
    code = 34
    name = "ILLEGAL_SASL_STATE"
    default_message = "Request is not valid given the current SASL state."


ILLEGAL_SASL_STATE = IllegalSaslStateError.code


class UnsupportedVersionError(KafkaError):
    code = 35
    name = "UNSUPPORTED_VERSION"
    default_message = "The version of API is not supported."


UNSUPPORTED_VERSION = UnsupportedVersionError.code


class TopicExistsError(KafkaError):
    code = 36
    name = "TOPIC_ALREADY_EXISTS"
    default_message = "Topic with this name already exists."


TOPIC_ALREADY_EXISTS = TopicExistsError.code


class InvalidPartitionsError(KafkaError):
    code = 37
    name = "INVALID_PARTITIONS"
    default_message = "Number of partitions is below 1."


INVALID_PARTITIONS = InvalidPartitionsError.code


class InvalidReplicationFactorError(KafkaError):
    code = 38
    name = "INVALID_REPLICATION_FACTOR"
    default_message = "Replication factor is below 1 or larger than the number of available brokers."


INVALID_REPLICATION_FACTOR = InvalidReplicationFactorError.code


class InvalidReplicaAssignmentError(KafkaError):
    code = 39
    name = "INVALID_REPLICA_ASSIGNMENT"
    default_message = "Replica assignment is invalid."


INVALID_REPLICA_ASSIGNMENT = InvalidReplicaAssignmentError.code


class InvalidConfigurationError(KafkaError):
    code = 40
    name = "INVALID_CONFIG"
    default_message = "Configuration is invalid."


INVALID_CONFIG = InvalidConfigurationError.code


class NotControllerError(KafkaError):
    code = 41
    name = "NOT_CONTROLLER"
    retriable = True
    default_message = "This is not the correct controller for this cluster."


NOT_CONTROLLER = NotControllerError.code


class InvalidRequestError(KafkaError):
    code = 42
    name = "INVALID_REQUEST"
    default_message = "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details."


INVALID_REQUEST = InvalidRequestError.code


class UnsupportedForMessageFormatError(KafkaError):
    code = 43
    name = "UNSUPPORTED_FOR_MESSAGE_FORMAT"
    default_message = "The message format version on the broker does not support the request."


UNSUPPORTED_FOR_MESSAGE_FORMAT = UnsupportedForMessageFormatError.code


class PolicyViolationError(KafkaError):
    code = 44
    name = "POLICY_VIOLATION"
    default_message = "Request parameters do not satisfy the configured policy."


POLICY_VIOLATION = PolicyViolationError.code


class OutOfOrderSequenceError(KafkaError):
    code = 45
    name = "OUT_OF_ORDER_SEQUENCE_NUMBER"
    default_message = "The broker received an out of order sequence number."


OUT_OF_ORDER_SEQUENCE_NUMBER = OutOfOrderSequenceError.code


class DuplicateSequenceError(KafkaError):
    code = 46
    name = "DUPLICATE_SEQUENCE_NUMBER"
    default_message = "The broker received a duplicate sequence number."


DUPLICATE_SEQUENCE_NUMBER = DuplicateSequenceError.code


class InvalidProducerEpochError(KafkaError):
    code = 47
    name = "INVALID_PRODUCER_EPOCH"
    default_message = "Producer attempted to produce with an old epoch."


INVALID_PRODUCER_EPOCH = InvalidProducerEpochError.code


class InvalidTxnStateError(KafkaError):
    code = 48
    name = "INVALID_TXN_STATE"
    default_message = "The producer attempted a transactional operation in an invalid state."


INVALID_TXN_STATE = InvalidTxnStateError.code


class InvalidPidMappingError(KafkaError):
    code = 49
    name = "INVALID_PRODUCER_ID_MAPPING"
    default_message = (
        "The producer attempted to use a producer id which is not currently assigned to its transactional id."
    )


INVALID_PRODUCER_ID_MAPPING = InvalidPidMappingError.code


class InvalidTxnTimeoutError(KafkaError):
    code = 50
    name = "INVALID_TRANSACTION_TIMEOUT"
    default_message = "The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms)."


INVALID_TRANSACTION_TIMEOUT = InvalidTxnTimeoutError.code


class ConcurrentTransactionsError(KafkaError):
    code = 51
    name = "CONCURRENT_TRANSACTIONS"
    retriable = True
    default_message = "The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing."


CONCURRENT_TRANSACTIONS = ConcurrentTransactionsError.code


class TransactionCoordinatorFencedError(KafkaError):
    code = 52
    name = "TRANSACTION_COORDINATOR_FENCED"
    default_message = "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer."


TRANSACTION_COORDINATOR_FENCED = TransactionCoordinatorFencedError.code


class TransactionalIdAuthorizationError(KafkaError):
    code = 53
    name = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    default_message = "Transactional Id authorization failed."


TRANSACTIONAL_ID_AUTHORIZATION_FAILED = TransactionalIdAuthorizationError.code


class SecurityDisabledError(KafkaError):
    code = 54
    name = "SECURITY_DISABLED"
    default_message = "Security features are disabled."


SECURITY_DISABLED = SecurityDisabledError.code


class OperationNotAttemptedError(KafkaError):
    code = 55
    name = "OPERATION_NOT_ATTEMPTED"
    default_message = "The broker did not attempt to execute this operation."


OPERATION_NOT_ATTEMPTED = OperationNotAttemptedError.code


class KafkaStorageError(KafkaError):
    code = 56
    name = "KAFKA_STORAGE_ERROR"
    retriable = True
    default_message = "Disk error when trying to access log file on the disk."


KAFKA_STORAGE_ERROR = KafkaStorageError.code


class LogDirNotFoundError(KafkaError):
    code = 57
    name = "LOG_DIR_NOT_FOUND"
    default_message = "The user-specified log directory is not found in the broker config."


LOG_DIR_NOT_FOUND = LogDirNotFoundError.code


class SaslAuthenticationError(KafkaError):
    code = 58
    name = "SASL_AUTHENTICATION_FAILED"
    default_message = "SASL Authentication failed."


SASL_AUTHENTICATION_FAILED = SaslAuthenticationError.code


class UnknownProducerIdError(KafkaError):
    code = 59
    name = "UNKNOWN_PRODUCER_ID"
    default_message = "This exception is raised by the broker if it could not locate the producer metadata associated with the producerId in question."


UNKNOWN_PRODUCER_ID = UnknownProducerIdError.code


class ReassignmentInProgressError(KafkaError):
    code = 60
    name = "REASSIGNMENT_IN_PROGRESS"
    default_message = "A partition reassignment is in progress."


REASSIGNMENT_IN_PROGRESS = ReassignmentInProgressError.code


class DelegationTokenDisabledError(KafkaError):
    code = 61
    name = "DELEGATION_TOKEN_AUTH_DISABLED"
    default_message = "Delegation Token feature is not enabled."


DELEGATION_TOKEN_AUTH_DISABLED = DelegationTokenDisabledError.code


class DelegationTokenNotFoundError(KafkaError):
    code = 62
    name = "DELEGATION_TOKEN_NOT_FOUND"
    default_message = "Delegation Token is not found on server."


DELEGATION_TOKEN_NOT_FOUND = DelegationTokenNotFoundError.code


class DelegationTokenOwnerMismatchError(KafkaError):
    code = 63
    name = "DELEGATION_TOKEN_OWNER_MISMATCH"
    default_message = "Specified Principal is not valid Owner/Renewer."


DELEGATION_TOKEN_OWNER_MISMATCH = DelegationTokenOwnerMismatchError.code


class UnsupportedByAuthenticationError(KafkaError):
    code = 64
    name = "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"
    default_message = "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels."


DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = UnsupportedByAuthenticationError.code


class DelegationTokenAuthorizationError(KafkaError):
    code = 65
    name = "DELEGATION_TOKEN_AUTHORIZATION_FAILED"
    default_message = "Delegation Token authorization failed."


DELEGATION_TOKEN_AUTHORIZATION_FAILED = DelegationTokenAuthorizationError.code


class DelegationTokenExpiredError(KafkaError):
    code = 66
    name = "DELEGATION_TOKEN_EXPIRED"
    default_message = "Delegation Token is expired."


DELEGATION_TOKEN_EXPIRED = DelegationTokenExpiredError.code


class InvalidPrincipalTypeError(KafkaError):
    code = 67
    name = "INVALID_PRINCIPAL_TYPE"
    default_message = "Supplied principalType is not supported."


INVALID_PRINCIPAL_TYPE = InvalidPrincipalTypeError.code


class GroupNotEmptyError(KafkaError):
    code = 68
    name = "NON_EMPTY_GROUP"
    default_message = "The group is not empty."


NON_EMPTY_GROUP = GroupNotEmptyError.code


class GroupIdNotFoundError(KafkaError):
    code = 69
    name = "GROUP_ID_NOT_FOUND"
    default_message = "The group id does not exist."


GROUP_ID_NOT_FOUND = GroupIdNotFoundError.code


class FetchSessionIdNotFoundError(KafkaError):
    code = 70
    name = "FETCH_SESSION_ID_NOT_FOUND"
    retriable = True
    default_message = "The fetch session ID was not found."


FETCH_SESSION_ID_NOT_FOUND = FetchSessionIdNotFoundError.code


class InvalidFetchSessionEpochError(KafkaError):
    code = 71
    name = "INVALID_FETCH_SESSION_EPOCH"
    retriable = True
    default_message = "The fetch session epoch is invalid."


INVALID_FETCH_SESSION_EPOCH = InvalidFetchSessionEpochError.code


class ListenerNotFoundError(KafkaError):
    code = 72
    name = "LISTENER_NOT_FOUND"
    retriable = True
    default_message = (
        "There is no listener on the leader broker that matches the listener on which metadata request was processed."
    )


LISTENER_NOT_FOUND = ListenerNotFoundError.code


class TopicDeletionDisabledError(KafkaError):
    code = 73
    name = "TOPIC_DELETION_DISABLED"
    default_message = "Topic deletion is disabled."


TOPIC_DELETION_DISABLED = TopicDeletionDisabledError.code


class FencedLeaderEpochError(KafkaError):
    code = 74
    name = "FENCED_LEADER_EPOCH"
    retriable = True
    default_message = "The leader epoch in the request is older than the epoch on the broker."


FENCED_LEADER_EPOCH = FencedLeaderEpochError.code


class UnknownLeaderEpochError(KafkaError):
    code = 75
    name = "UNKNOWN_LEADER_EPOCH"
    retriable = True
    default_message = "The leader epoch in the request is newer than the epoch on the broker."


UNKNOWN_LEADER_EPOCH = UnknownLeaderEpochError.code


class UnsupportedCompressionTypeError(KafkaError):
    code = 76
    name = "UNSUPPORTED_COMPRESSION_TYPE"
    default_message = "The requesting client does not support the compression type of given partition."


UNSUPPORTED_COMPRESSION_TYPE = UnsupportedCompressionTypeError.code


class StaleBrokerEpochError(KafkaError):
    code = 77
    name = "STALE_BROKER_EPOCH"
    default_message = "Broker epoch has changed."


STALE_BROKER_EPOCH = StaleBrokerEpochError.code


class OffsetNotAvailableError(KafkaError):
    code = 78
    name = "OFFSET_NOT_AVAILABLE"
    retriable = True
    default_message = "The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing."


OFFSET_NOT_AVAILABLE = OffsetNotAvailableError.code


class MemberIdRequiredError(KafkaError):
    code = 79
    name = "MEMBER_ID_REQUIRED"
    default_message = "The group member needs to have a valid member id before actually entering a consumer group."


MEMBER_ID_REQUIRED = MemberIdRequiredError.code


class PreferredLeaderNotAvailableError(KafkaError):
    code = 80
    name = "PREFERRED_LEADER_NOT_AVAILABLE"
    retriable = True
    default_message = "The preferred leader was not available."


PREFERRED_LEADER_NOT_AVAILABLE = PreferredLeaderNotAvailableError.code


class GroupMaxSizeReachedError(KafkaError):
    code = 81
    name = "GROUP_MAX_SIZE_REACHED"
    default_message = "The consumer group has reached its max size."


GROUP_MAX_SIZE_REACHED = GroupMaxSizeReachedError.code


class FencedInstanceIdError(KafkaError):
    code = 82
    name = "FENCED_INSTANCE_ID"
    default_message = "The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id."


FENCED_INSTANCE_ID = FencedInstanceIdError.code


class EligibleLeadersNotAvailableError(KafkaError):
    code = 83
    name = "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    retriable = True
    default_message = "Eligible topic partition leaders are not available."


ELIGIBLE_LEADERS_NOT_AVAILABLE = EligibleLeadersNotAvailableError.code


class ElectionNotNeededError(KafkaError):
    code = 84
    name = "ELECTION_NOT_NEEDED"
    retriable = True
    default_message = "Leader election not needed for topic partition."


ELECTION_NOT_NEEDED = ElectionNotNeededError.code


class NoReassignmentInProgressError(KafkaError):
    code = 85
    name = "NO_REASSIGNMENT_IN_PROGRESS"
    default_message = "No partition reassignment is in progress."


NO_REASSIGNMENT_IN_PROGRESS = NoReassignmentInProgressError.code


class GroupSubscribedToTopicError(KafkaError):
    code = 86
    name = "GROUP_SUBSCRIBED_TO_TOPIC"
    default_message = "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it."


GROUP_SUBSCRIBED_TO_TOPIC = GroupSubscribedToTopicError.code


class InvalidRecordError(KafkaError):
    code = 87
    name = "INVALID_RECORD"
    default_message = "This record has failed the validation on broker and hence will be rejected."


INVALID_RECORD = InvalidRecordError.code


class UnstableOffsetCommitError(KafkaError):
    code = 88
    name = "UNSTABLE_OFFSET_COMMIT"
    retriable = True
    default_message = "There are unstable offsets that need to be cleared."


UNSTABLE_OFFSET_COMMIT = UnstableOffsetCommitError.code


class ThrottlingQuotaExceededError(KafkaError):
    code = 89
    name = "THROTTLING_QUOTA_EXCEEDED"
    retriable = True
    default_message = "The throttling quota has been exceeded."


THROTTLING_QUOTA_EXCEEDED = ThrottlingQuotaExceededError.code


class ProducerFencedError(KafkaError):
    code = 90
    name = "PRODUCER_FENCED"
    default_message = "There is a newer producer with the same transactionalId which fences the current one."


PRODUCER_FENCED = ProducerFencedError.code


class ResourceNotFoundError(KafkaError):
    code = 91
    name = "RESOURCE_NOT_FOUND"
    default_message = "A request illegally referred to a resource that does not exist."


RESOURCE_NOT_FOUND = ResourceNotFoundError.code


class DuplicateResourceError(KafkaError):
    code = 92
    name = "DUPLICATE_RESOURCE"
    default_message = "A request illegally referred to the same resource twice."


DUPLICATE_RESOURCE = DuplicateResourceError.code


class UnacceptableCredentialError(KafkaError):
    code = 93
    name = "UNACCEPTABLE_CREDENTIAL"
    default_message = "Requested credential would not meet criteria for acceptability."


UNACCEPTABLE_CREDENTIAL = UnacceptableCredentialError.code


class InconsistentVoterSetError(KafkaError):
    code = 94
    name = "INCONSISTENT_VOTER_SET"
    default_message = (
        "Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters."
    )


INCONSISTENT_VOTER_SET = InconsistentVoterSetError.code


class InvalidUpdateVersionError(KafkaError):
    code = 95
    name = "INVALID_UPDATE_VERSION"
    default_message = "The given update version was invalid."


INVALID_UPDATE_VERSION = InvalidUpdateVersionError.code


class FeatureUpdateFailedError(KafkaError):
    code = 96
    name = "FEATURE_UPDATE_FAILED"
    default_message = "Unable to update finalized features due to an unexpected server error."


FEATURE_UPDATE_FAILED = FeatureUpdateFailedError.code


class PrincipalDeserializationError(KafkaError):
    code = 97
    name = "PRINCIPAL_DESERIALIZATION_FAILURE"
    default_message = "Request principal deserialization failed during forwarding."


PRINCIPAL_DESERIALIZATION_FAILURE = PrincipalDeserializationError.code


class SnapshotNotFoundError(KafkaError):
    code = 98
    name = "SNAPSHOT_NOT_FOUND"
    default_message = "Requested snapshot was not found."


SNAPSHOT_NOT_FOUND = SnapshotNotFoundError.code


class PositionOutOfRangeError(KafkaError):
    code = 99
    name = "POSITION_OUT_OF_RANGE"
    default_message = "Requested position is not greater than or equal to zero, and less than the size of the snapshot."


POSITION_OUT_OF_RANGE = PositionOutOfRangeError.code


class UnknownTopicIdError(KafkaError):
    code = 100
    name = "UNKNOWN_TOPIC_ID"
    retriable = True
    default_message = "This server does not host this topic ID."


UNKNOWN_TOPIC_ID = UnknownTopicIdError.code


class DuplicateBrokerRegistrationError(KafkaError):
    code = 101
    name = "DUPLICATE_BROKER_REGISTRATION"
    default_message = "This broker ID is already in use."


DUPLICATE_BROKER_REGISTRATION = DuplicateBrokerRegistrationError.code


class BrokerIdNotRegisteredError(KafkaError):
    code = 102
    name = "BROKER_ID_NOT_REGISTERED"
    default_message = "The given broker ID was not registered."


BROKER_ID_NOT_REGISTERED = BrokerIdNotRegisteredError.code


class InconsistentTopicIdError(KafkaError):
    code = 103
    name = "INCONSISTENT_TOPIC_ID"
    retriable = True
    default_message = "The log's topic ID did not match the topic ID in the request."


INCONSISTENT_TOPIC_ID = InconsistentTopicIdError.code


class InconsistentClusterIdError(KafkaError):
    code = 104
    name = "INCONSISTENT_CLUSTER_ID"
    default_message = "The clusterId in the request does not match that found on the server."


INCONSISTENT_CLUSTER_ID = InconsistentClusterIdError.code


class TransactionalIdNotFoundError(KafkaError):
    code = 105
    name = "TRANSACTIONAL_ID_NOT_FOUND"
    default_message = "The transactionalId could not be found."


TRANSACTIONAL_ID_NOT_FOUND = TransactionalIdNotFoundError.code


class FetchSessionTopicIdError(KafkaError):
    code = 106
    name = "FETCH_SESSION_TOPIC_ID_ERROR"
    retriable = True
    default_message = "The fetch session encountered inconsistent topic ID usage."


FETCH_SESSION_TOPIC_ID_ERROR = FetchSessionTopicIdError.code


class IneligibleReplicaError(KafkaError):
    code = 107
    name = "INELIGIBLE_REPLICA"
    default_message = "The new ISR contains at least one ineligible replica."


INELIGIBLE_REPLICA = IneligibleReplicaError.code


class NewLeaderElectedError(KafkaError):
    code = 108
    name = "NEW_LEADER_ELECTED"
    default_message = "The AlterPartition request successfully updated the partition state but the leader has changed."


NEW_LEADER_ELECTED = NewLeaderElectedError.code


class OffsetMovedToTieredStorageError(KafkaError):
    code = 109
    name = "OFFSET_MOVED_TO_TIERED_STORAGE"
    default_message = "The requested offset is moved to tiered storage."


OFFSET_MOVED_TO_TIERED_STORAGE = OffsetMovedToTieredStorageError.code


class FencedMemberEpochError(KafkaError):
    code = 110
    name = "FENCED_MEMBER_EPOCH"
    default_message = (
        "The member epoch is fenced by the group coordinator. The member must abandon all its partitions and rejoin."
    )


FENCED_MEMBER_EPOCH = FencedMemberEpochError.code


class UnreleasedInstanceIdError(KafkaError):
    code = 111
    name = "UNRELEASED_INSTANCE_ID"
    default_message = (
        "The instance ID is still used by another member in the consumer group. That member must leave first."
    )


UNRELEASED_INSTANCE_ID = UnreleasedInstanceIdError.code


class UnsupportedAssignorError(KafkaError):
    code = 112
    name = "UNSUPPORTED_ASSIGNOR"
    default_message = "The assignor or its version range is not supported by the consumer group."


UNSUPPORTED_ASSIGNOR = UnsupportedAssignorError.code


class StaleMemberEpochError(KafkaError):
    code = 113
    name = "STALE_MEMBER_EPOCH"
    default_message = "The member epoch is stale. The member must retry after receiving its updated member epoch via the ConsumerGroupHeartbeat API."


STALE_MEMBER_EPOCH = StaleMemberEpochError.code


class MismatchedEndpointTypeError(KafkaError):
    code = 114
    name = "MISMATCHED_ENDPOINT_TYPE"
    default_message = "The request was sent to an endpoint of the wrong type."


MISMATCHED_ENDPOINT_TYPE = MismatchedEndpointTypeError.code


class UnsupportedEndpointTypeError(KafkaError):
    code = 115
    name = "UNSUPPORTED_ENDPOINT_TYPE"
    default_message = "This endpoint type is not supported yet."


UNSUPPORTED_ENDPOINT_TYPE = UnsupportedEndpointTypeError.code


class UnknownControllerIdError(KafkaError):
    code = 116
    name = "UNKNOWN_CONTROLLER_ID"
    default_message = "This controller ID is not known."


UNKNOWN_CONTROLLER_ID = UnknownControllerIdError.code


class UnknownSubscriptionIdError(KafkaError):
    code = 117
    name = "UNKNOWN_SUBSCRIPTION_ID"
    default_message = "Client sent a push telemetry request with an invalid or outdated subscription ID."


UNKNOWN_SUBSCRIPTION_ID = UnknownSubscriptionIdError.code


class TelemetryTooLargeError(KafkaError):
    code = 118
    name = "TELEMETRY_TOO_LARGE"
    default_message = "Client sent a push telemetry request larger than the maximum size the broker will accept."


TELEMETRY_TOO_LARGE = TelemetryTooLargeError.code


class InvalidRegistrationError(KafkaError):
    code = 119
    name = "INVALID_REGISTRATION"
    default_message = "The controller has considered the broker registration to be invalid."


INVALID_REGISTRATION = InvalidRegistrationError.code


class TransactionAbortableError(KafkaError):
    code = 120
    name = "TRANSACTION_ABORTABLE"
    default_message = "The server encountered an error with the transaction. The client can abort the transaction to continue using this transactional ID."


TRANSACTION_ABORTABLE = TransactionAbortableError.code


class InvalidRecordStateError(KafkaError):
    code = 121
    name = "INVALID_RECORD_STATE"
    default_message = "The record state is invalid. The acknowledgement of delivery could not be completed."


INVALID_RECORD_STATE = InvalidRecordStateError.code


class ShareSessionNotFoundError(KafkaError):
    code = 122
    name = "SHARE_SESSION_NOT_FOUND"
    retriable = True
    default_message = "The share session was not found."


SHARE_SESSION_NOT_FOUND = ShareSessionNotFoundError.code


class InvalidShareSessionEpochError(KafkaError):
    code = 123
    name = "INVALID_SHARE_SESSION_EPOCH"
    retriable = True
    default_message = "The share session epoch is invalid."


INVALID_SHARE_SESSION_EPOCH = InvalidShareSessionEpochError.code


class FencedStateEpochError(KafkaError):
    code = 124
    name = "FENCED_STATE_EPOCH"
    default_message = "The share coordinator rejected the request because the share-group state epoch did not match."


FENCED_STATE_EPOCH = FencedStateEpochError.code


class InvalidVoterKeyError(KafkaError):
    code = 125
    name = "INVALID_VOTER_KEY"
    default_message = "The voter key doesn't match the receiving replica's key."


INVALID_VOTER_KEY = InvalidVoterKeyError.code


class DuplicateVoterError(KafkaError):
    code = 126
    name = "DUPLICATE_VOTER"
    default_message = "The voter is already part of the set of voters."


DUPLICATE_VOTER = DuplicateVoterError.code


class VoterNotFoundError(KafkaError):
    code = 127
    name = "VOTER_NOT_FOUND"
    default_message = "The voter is not part of the set of voters."


VOTER_NOT_FOUND = VoterNotFoundError.code


class InvalidRegularExpressionError(KafkaError):
    code = 128
    name = "INVALID_REGULAR_EXPRESSION"
    default_message = "The regular expression is not valid."


INVALID_REGULAR_EXPRESSION = InvalidRegularExpressionError.code


class RebootstrapRequiredError(KafkaError):
    code = 129
    name = "REBOOTSTRAP_REQUIRED"
    default_message = "Client metadata is stale. The client should rebootstrap to obtain new metadata."


REBOOTSTRAP_REQUIRED = RebootstrapRequiredError.code


class ShareSessionLimitReachedError(KafkaError):
    code = 133
    name = "SHARE_SESSION_LIMIT_REACHED"
    default_message = "The limit of share sessions has been reached."


SHARE_SESSION_LIMIT_REACHED = ShareSessionLimitReachedError.code


_BY_CODE: dict[int, type[KafkaError]] = {}
_NAMES: dict[int, str] = {NONE: "NONE"}


def _register() -> None:
    """Derive the code table from the classes: each code and NAME declared once, NONE (0) by no class, and the
    module constant of each NAME equal to its class's code; give each class its docstring."""
    for cls in KafkaError.__subclasses__():
        if cls.__module__ != __name__:
            continue
        if cls.code in _BY_CODE or cls.code == NONE or cls.name in _NAMES.values():
            raise AssertionError(f"{cls.__name__}: code {cls.code} / {cls.name} is declared twice")
        if globals().get(cls.name) != cls.code:
            raise AssertionError(f"{cls.__name__}: the constant {cls.name} is not its code {cls.code}")
        cls.__doc__ = (
            f"Kafka error {cls.code} {cls.name}{' (retriable)' if cls.retriable else ''}: {cls.default_message}"
        )
        _BY_CODE[cls.code] = cls
        _NAMES[cls.code] = cls.name


_register()


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
