"""DeleteRecords (key 21): move partitions' log start offsets forward (``KafkaApis.handleDeleteRecordsRequest``).

Per partition: ``offset`` -1 deletes up to the high watermark; the answer carries the low watermark (the
smallest log start offset of the leader and its live followers) once it reaches the requested offset, waiting
up to ``timeout_ms`` for the followers (``ReplicaManager.delete_records``, Kafka's DelayedDeleteRecords;
REQUEST_TIMED_OUT and -1 when they do not follow in time), or -1 with UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR, OFFSET_OUT_OF_RANGE (negative or above the high watermark),
POLICY_VIOLATION (``cleanup.policy`` without ``delete``) or INVALID_TOPIC_EXCEPTION (internal topics).
Whole segments below the new log start offset are removed by the next retention check
(``log.retention.check.interval.ms``), as in Kafka; fetches below it get OFFSET_OUT_OF_RANGE at once.
"""

from __future__ import annotations

from pykbroker.protocol.api_keys import ApiKeys


class DeleteRecordsHandler:
    def __init__(self, helper, replica_manager):
        self.helper = helper
        self.replica_manager = replica_manager

    def handlers(self) -> dict:
        return {ApiKeys.DELETE_RECORDS: self.handle_delete_records_request}

    def handle_delete_records_request(self, request) -> None:
        offsets: dict[tuple[str, int], int] = {}
        order: list[tuple[str, list[int]]] = []
        for t in request.body["topics"]:
            indexes = []
            for p in t["partitions"]:
                offsets[(t["name"], p["partition_index"])] = p["offset"]
                indexes.append(p["partition_index"])
            order.append((t["name"], indexes))

        def respond(results: dict[tuple[str, int], tuple[int, int]]) -> None:
            topics = [
                {
                    "name": name,
                    "partitions": [
                        {
                            "partition_index": i,
                            "low_watermark": results[(name, i)][0],
                            "error_code": results[(name, i)][1],
                        }
                        for i in indexes
                    ],
                }
                for name, indexes in order
            ]
            self.helper.send_response(request, {"throttle_time_ms": 0, "topics": topics})

        self.replica_manager.delete_records(int(request.body.get("timeout_ms", 0)), offsets, respond)
