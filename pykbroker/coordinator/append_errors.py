"""How a coordinator answers a failed append to its internal topic (``__consumer_offsets``,
``__transaction_state``, ``__share_group_state``): Kafka's coordinators map the append's error before answering.

The partition is not ready or its ISR too small -> COORDINATOR_NOT_AVAILABLE (the client retries later); it moved
or its log dir is offline -> NOT_COORDINATOR (the client finds the coordinator again); a record too large ->
UNKNOWN_SERVER_ERROR (Kafka's TransactionStateManager.appendTransactionToLog and share coordinator). The group
coordinator answers the size errors with INVALID_COMMIT_OFFSET_SIZE instead (GroupMetadataManager.storeOffsets).
"""

from __future__ import annotations

from pykbroker.protocol import errors

#: append error code -> the code a coordinator answers (codes not listed pass through)
COORDINATOR_APPEND_ERRORS: dict[int, int] = {
    errors.UNKNOWN_TOPIC_OR_PARTITION: errors.COORDINATOR_NOT_AVAILABLE,
    errors.NOT_ENOUGH_REPLICAS: errors.COORDINATOR_NOT_AVAILABLE,
    errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: errors.COORDINATOR_NOT_AVAILABLE,
    errors.REQUEST_TIMED_OUT: errors.COORDINATOR_NOT_AVAILABLE,
    errors.NOT_LEADER_OR_FOLLOWER: errors.NOT_COORDINATOR,
    errors.KAFKA_STORAGE_ERROR: errors.NOT_COORDINATOR,
    errors.MESSAGE_TOO_LARGE: errors.UNKNOWN_SERVER_ERROR,
    errors.RECORD_LIST_TOO_LARGE: errors.UNKNOWN_SERVER_ERROR,
}
