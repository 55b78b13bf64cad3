"""Fetch (key 1): consumer (and follower) reads, zero-copy from the segment files.

Mirrors ``KafkaApis.handleFetchRequest``: resolve topic ids (v13+; unknown id -> UNKNOWN_TOPIC_ID),
build the fetch-session context (KIP-227), read through ``ReplicaManager.fetch_messages`` (which may
park a DelayedFetch for ``max_wait_ms``), and answer with each partition's records as a file region:
the response send is header bytes followed by ``os.sendfile`` regions, as Kafka's FileRecords transfer.
"""
from __future__ import annotations

import uuid

from pykbroker.log.fetch_data_info import FetchIsolation
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.record.file_records import EMPTY_RECORDS
from pykbroker.server import error_responses
from pykbroker.server.replica_manager import FetchParams, PartitionFetch

ZERO_UUID = uuid.UUID(int=0)


class FetchHandler:
    def __init__(self, helper, replica_manager, metadata_cache, fetch_manager=None):
        self.helper = helper
        self.replica_manager = replica_manager
        self.cache = metadata_cache
        self.fetch_manager = fetch_manager

    def handlers(self) -> dict:
        return {ApiKeys.FETCH: self.handle_fetch_request}

    def handle_fetch_request(self, request) -> None:
        body = request.body
        version = request.context.api_version
        replica_id = body["replica_id"] if version < 15 else body["replica_state"]["replica_id"]
        if replica_id >= 0:
            isolation = FetchIsolation.LOG_END
        elif body["isolation_level"] == 1:
            isolation = FetchIsolation.TXN_COMMITTED
        else:
            isolation = FetchIsolation.HIGH_WATERMARK
        use_ids = version >= 13
        # Partitions in request order; unknown topic ids are answered without a read.
        order: list[tuple[object, str | None, int]] = []
        fetches: list[PartitionFetch] = []
        for t in body["topics"]:
            topic_id = t["topic_id"] if use_ids else ZERO_UUID
            name = self.cache.topic_name(topic_id) if use_ids else t["topic"]
            for p in t["partitions"]:
                order.append((topic_id if use_ids else name, name, p["partition"]))
                if name is not None:
                    fetches.append(PartitionFetch(name, p["partition"], p["fetch_offset"], p["partition_max_bytes"],
                                                  p["current_leader_epoch"]))
        params = FetchParams(replica_id, body["max_wait_ms"], body["min_bytes"], body["max_bytes"], isolation)

        def respond(results) -> None:
            by_tp = {(f.topic, f.partition): r for f, r in results}
            topics: list[dict] = []
            index: dict[object, dict] = {}
            for key, name, partition in order:
                entry = index.get(key)
                if entry is None:
                    entry = {"topic": name, "topic_id": key if use_ids else ZERO_UUID, "partitions": []}
                    index[key] = entry
                    topics.append(entry)
                r = by_tp.get((name, partition)) if name is not None else None
                if r is None:
                    entry["partitions"].append(_partition_error(partition, errors.UNKNOWN_TOPIC_ID if use_ids
                                                                else errors.UNKNOWN_TOPIC_OR_PARTITION))
                else:
                    entry["partitions"].append({
                        "partition_index": partition, "error_code": r.error_code, "high_watermark": r.high_watermark,
                        "last_stable_offset": r.last_stable_offset, "log_start_offset": r.log_start_offset,
                        "aborted_transactions": None if r.error_code else [], "preferred_read_replica": -1,
                        "records": r.records})
            self.helper.send_response(request, {"throttle_time_ms": 0, "error_code": errors.NONE, "session_id": 0,
                                                "responses": topics})

        self.replica_manager.fetch_messages(params, fetches, respond)


def _partition_error(partition: int, code: int) -> dict:
    return {"partition_index": partition, "error_code": code, "high_watermark": -1, "last_stable_offset": -1,
            "log_start_offset": -1, "aborted_transactions": None, "preferred_read_replica": -1,
            "records": EMPTY_RECORDS}


@error_responses.register(ApiKeys.FETCH)
def _fetch_error(version, body, code, message):
    return {"throttle_time_ms": 0, "error_code": code, "session_id": 0, "responses": []}
