"""DeleteRecords (key 21): move partitions' log start offsets forward (``KafkaApis.handleDeleteRecordsRequest``).

Per partition: ``offset`` -1 deletes up to the high watermark; the answer carries the new low
watermark, or -1 with UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE (negative
or above the high watermark), POLICY_VIOLATION (``cleanup.policy`` without ``delete``) or
INVALID_TOPIC_EXCEPTION (internal topics). Whole segments below the new log start offset are removed
by the next retention check (``log.retention.check.interval.ms``), as in Kafka; fetches below it get
OFFSET_OUT_OF_RANGE at once.
"""

from __future__ import annotations

from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys


class DeleteRecordsHandler:
    def __init__(self, helper, replica_manager):
        self.helper = helper
        self.replica_manager = replica_manager

    def handlers(self) -> dict:
        return {ApiKeys.DELETE_RECORDS: self.handle_delete_records_request}

    def handle_delete_records_request(self, request) -> None:
        topics = []
        for t in request.body["topics"]:
            partitions = []
            for p in t["partitions"]:
                index = p["partition_index"]
                try:
                    low = self.replica_manager.delete_records(t["name"], index, p["offset"])
                    partitions.append({"partition_index": index, "low_watermark": low, "error_code": errors.NONE})
                except errors.KafkaError as e:
                    partitions.append({"partition_index": index, "low_watermark": -1, "error_code": e.code})
            topics.append({"name": t["name"], "partitions": partitions})
        self.helper.send_response(request, {"throttle_time_ms": 0, "topics": topics})
