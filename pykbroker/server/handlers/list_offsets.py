"""ListOffsets (key 2) and OffsetForLeaderEpoch (key 23).

Mirrors ``KafkaApis.handleListOffsetRequest`` / ``Partition.fetchOffsetForTimestamp``: timestamps -2
earliest (log start offset), -1 latest (high watermark for read_uncommitted, LSO for read_committed),
-3 the record with the largest timestamp (KIP-734), -4 earliest local, -5 latest tiered (none), >= 0
the first record whose timestamp is >= the target, found through the time index, then pinned to the
exact record by decoding that one batch. Offsets not yet below the high watermark are not returned.
OffsetForLeaderEpoch answers from the leader epoch cache.
"""

from __future__ import annotations

from pykbroker.protocol import errors
from pykbroker.protocol.acl import AclOperation
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.resource import CLUSTER_NAME, ResourceType
from pykbroker.record.default_record_batch import iter_batches
from pykbroker.record.file_records import TimestampAndOffset
from pykbroker.server import error_responses

LATEST, EARLIEST = -1, -2


def exact_record(data, target: int, start: int) -> TimestampAndOffset | None:
    """The first record with timestamp >= ``target`` and offset >= ``start`` in ``data`` (whole batches)."""
    for _, batch in iter_batches(memoryview(data)):
        epoch = batch.partition_leader_epoch
        for record in batch.records():
            if record.timestamp >= target and record.offset >= start:
                return TimestampAndOffset(record.timestamp, record.offset, epoch if epoch >= 0 else None)
    return None


class ListOffsetsHandler:
    def __init__(self, helper, replica_manager):
        self.helper = helper
        self.replica_manager = replica_manager

    def handlers(self) -> dict:
        return {
            ApiKeys.LIST_OFFSETS: self.handle_list_offset_request,
            ApiKeys.OFFSET_FOR_LEADER_EPOCH: self.handle_offset_for_leader_epoch_request,
        }

    def handle_list_offset_request(self, request) -> None:
        body = request.body
        read_committed = body.get("isolation_level", 0) == 1
        topics = []
        for t in body["topics"]:
            parts = []
            if not self.helper.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, t["name"]):
                topics.append(
                    {
                        "name": t["name"],
                        "partitions": [
                            _list_error(p["partition_index"], errors.TOPIC_AUTHORIZATION_FAILED)
                            for p in t["partitions"]
                        ],
                    }
                )
                continue
            for p in t["partitions"]:
                try:
                    parts.append(self._list_offset(t["name"], p, read_committed, body["replica_id"]))
                except errors.KafkaError as e:
                    parts.append(_list_error(p["partition_index"], e.code))
            topics.append({"name": t["name"], "partitions": parts})
        self.helper.send_response(request, {"throttle_time_ms": 0, "topics": topics})

    def _list_offset(self, topic: str, p: dict, read_committed: bool, replica_id: int) -> dict:
        partition = self.replica_manager.get_partition_or_error(topic, p["partition_index"])
        log = partition.leader_log_or_raise(p["current_leader_epoch"])
        ts = p["timestamp"]
        bound = (
            log.log_end_offset
            if replica_id >= 0
            else (log.last_stable_offset if read_committed else log.high_watermark)
        )
        if ts == LATEST:
            found = TimestampAndOffset(-1, bound, log.latest_epoch)
        else:
            found = log.fetch_offset_by_timestamp(ts, None if ts == EARLIEST else exact_record)
            if found is not None and ts != EARLIEST and found.offset >= bound:
                found = None
        if found is None:
            return {
                "partition_index": p["partition_index"],
                "error_code": errors.NONE,
                "timestamp": -1,
                "offset": -1,
                "leader_epoch": -1,
            }
        epoch = found.leader_epoch if found.leader_epoch is not None else -1
        return {
            "partition_index": p["partition_index"],
            "error_code": errors.NONE,
            "timestamp": found.timestamp,
            "offset": found.offset,
            "leader_epoch": epoch,
        }

    def handle_offset_for_leader_epoch_request(self, request) -> None:
        """Authorization as Kafka: CLUSTER_ACTION on the cluster covers every topic; else a follower's
        request (``replica_id`` >= 0) is CLUSTER_AUTHORIZATION_FAILED and a consumer's needs DESCRIBE on
        each topic (TOPIC_AUTHORIZATION_FAILED per partition)."""
        helper = self.helper
        cluster_action = helper.authorizer is None or helper.authorize(
            request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME
        )
        if not cluster_action and request.body.get("replica_id", -1) != -1:
            raise errors.ClusterAuthorizationError("Cluster authorization failed.")
        topics = []
        for t in request.body["topics"]:
            parts = []
            if not cluster_action and not helper.authorize(
                request, AclOperation.DESCRIBE, ResourceType.TOPIC, t["topic"]
            ):
                code = errors.TOPIC_AUTHORIZATION_FAILED
                parts = [
                    {"error_code": code, "partition": p["partition"], "leader_epoch": -1, "end_offset": -1}
                    for p in t["partitions"]
                ]
                topics.append({"topic": t["topic"], "partitions": parts})
                continue
            for p in t["partitions"]:
                index = p["partition"]
                try:
                    partition = self.replica_manager.get_partition_or_error(t["topic"], index)
                    log = partition.leader_log_or_raise(p["current_leader_epoch"])
                    found = log.end_offset_for_epoch(p["leader_epoch"])
                    end_offset, epoch = found if found is not None else (-1, -1)
                    parts.append(
                        {"error_code": errors.NONE, "partition": index, "leader_epoch": epoch, "end_offset": end_offset}
                    )
                except errors.KafkaError as e:
                    parts.append({"error_code": e.code, "partition": index, "leader_epoch": -1, "end_offset": -1})
            topics.append({"topic": t["topic"], "partitions": parts})
        self.helper.send_response(request, {"throttle_time_ms": 0, "topics": topics})


def _list_error(index: int, code: int) -> dict:
    return {"partition_index": index, "error_code": code, "timestamp": -1, "offset": -1, "leader_epoch": -1}


@error_responses.register(ApiKeys.LIST_OFFSETS)
def _list_offsets_error(version, body, code, message):
    return {
        "throttle_time_ms": 0,
        "topics": [
            {"name": t["name"], "partitions": [_list_error(p["partition_index"], code) for p in t["partitions"]]}
            for t in body["topics"]
        ],
    }


@error_responses.register(ApiKeys.OFFSET_FOR_LEADER_EPOCH)
def _ofle_error(version, body, code, message):
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "topic": t["topic"],
                "partitions": [
                    {"error_code": code, "partition": p["partition"], "leader_epoch": -1, "end_offset": -1}
                    for p in t["partitions"]
                ],
            }
            for t in body["topics"]
        ],
    }
