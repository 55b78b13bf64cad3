"""Transaction APIs (KIP-98): AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
WriteTxnMarkers, DescribeTransactions, ListTransactions (``KafkaApis.handle*`` for transactions).

Translates requests to :class:`~pykbroker.coordinator.transaction.transaction_coordinator.TransactionCoordinator`
and :class:`~pykbroker.coordinator.group.group_coordinator.GroupCoordinator` calls. WriteTxnMarkers is the
partition-leader side (sent by a transaction coordinator, this broker's included): each marker becomes a
control batch ``(producer id, epoch, COMMIT|ABORT, coordinator epoch)`` appended with acks=-1 and the
coordinator's origin; a marker that reaches ``__consumer_offsets`` also applies or drops the
transaction's pending offsets in the group coordinator (Kafka's ``handleWriteTxnMarkersRequest``).
"""

from __future__ import annotations

import re
import threading

from pykbroker.config.broker_configs.group_coordinator_configs import OFFSETS_TOPIC_NUM_PARTITIONS_CONFIG
from pykbroker.config.broker_configs.server_configs import REQUEST_TIMEOUT_MS_CONFIG
from pykbroker.coordinator.group.group_metadata import OffsetAndMetadata
from pykbroker.coordinator.group.record_codec import partition_for as group_partition_for
from pykbroker.log.producer_state_entry import AppendOrigin
from pykbroker.metadata.topic_names import GROUP_METADATA_TOPIC_NAME
from pykbroker.protocol import errors
from pykbroker.protocol.acl import AclOperation
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.resource import ResourceType
from pykbroker.record.control_record import ControlRecordType, EndTransactionMarker
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from pykbroker.server import error_responses
from pykbroker.server.append_result import AppendResults


def _by_topic(codes: dict[tuple[str, int], int], partitions_key: str = "results_by_partition") -> list[dict]:
    topics: dict[str, list[dict]] = {}
    for (topic, partition), code in sorted(codes.items()):
        topics.setdefault(topic, []).append({"partition_index": partition, "partition_error_code": code})
    return [{"name": t, partitions_key: ps} for t, ps in topics.items()]


class TransactionHandlers:
    def __init__(self, helper, txn_coordinator, group_coordinator, replica_manager, metadata_cache, config, time):
        self.helper = helper
        self.txn = txn_coordinator
        self.groups = group_coordinator
        self.replica_manager = replica_manager
        self.cache = metadata_cache
        self.config = config
        self.time = time

    def handlers(self) -> dict:
        return {
            ApiKeys.ADD_PARTITIONS_TO_TXN: self.handle_add_partitions_to_txn_request,
            ApiKeys.ADD_OFFSETS_TO_TXN: self.handle_add_offsets_to_txn_request,
            ApiKeys.END_TXN: self.handle_end_txn_request,
            ApiKeys.TXN_OFFSET_COMMIT: self.handle_txn_offset_commit_request,
            ApiKeys.WRITE_TXN_MARKERS: self.handle_write_txn_markers_request,
            ApiKeys.DESCRIBE_TRANSACTIONS: self.handle_describe_transactions_request,
            ApiKeys.LIST_TRANSACTIONS: self.handle_list_transactions_request,
            ApiKeys.DESCRIBE_PRODUCERS: self.handle_describe_producers_request,
        }

    # -- AddPartitionsToTxn -------------------------------------------------------------------
    def _add_partitions(
        self, tid: str, pid: int, epoch: int, topics: list[dict], verify_only: bool, respond, tv: int = 0
    ) -> None:
        """``respond({(topic, partition): error})`` for one transaction (Kafka's per-transaction path:
        unknown partitions UNKNOWN_TOPIC_OR_PARTITION and the rest OPERATION_NOT_ATTEMPTED). ``tv``: the
        transaction version of an add (2 for a partition leader's implicit add, AddPartitionsToTxn v5)."""
        tps = {(t["name"], p) for t in topics for p in t["partitions"]}
        unknown = {tp for tp in tps if self.cache.partition(*tp) is None}
        if unknown:
            codes = {
                tp: errors.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else errors.OPERATION_NOT_ATTEMPTED for tp in tps
            }
            respond(codes)
            return
        if verify_only:
            respond(self.txn.handle_verify_partitions_in_transaction(tid, pid, epoch, tps))
            return
        self.txn.handle_add_partitions_to_transaction(
            tid, pid, epoch, tps, lambda code: respond(dict.fromkeys(tps, code)), tv
        )

    def handle_add_partitions_to_txn_request(self, request) -> None:
        body, version = request.body, request.context.api_version
        if version < 4:
            topics = [{"name": t["name"], "partitions": t["partitions"]} for t in body["v3_and_below_topics"]]

            def respond(codes: dict) -> None:
                self.helper.send_response(
                    request, {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _by_topic(codes)}
                )

            self._add_partitions(
                body["v3_and_below_transactional_id"],
                body["v3_and_below_producer_id"],
                body["v3_and_below_producer_epoch"],
                topics,
                False,
                respond,
            )
            return
        transactions = body["transactions"]
        if not transactions:
            self.helper.send_response(
                request, {"throttle_time_ms": 0, "error_code": errors.NONE, "results_by_transaction": []}
            )
            return
        results: dict[str, list] = {}
        lock = threading.Lock()
        remaining = [len(transactions)]

        def one_done(tid: str, codes: dict) -> None:
            with lock:
                results[tid] = _by_topic(codes)
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                self.helper.send_response(
                    request,
                    {
                        "throttle_time_ms": 0,
                        "error_code": errors.NONE,
                        "results_by_transaction": [
                            {"transactional_id": t["transactional_id"], "topic_results": results[t["transactional_id"]]}
                            for t in transactions
                        ],
                    },
                )

        for t in transactions:
            topics = [{"name": x["name"], "partitions": x["partitions"]} for x in t["topics"]]
            self._add_partitions(
                t["transactional_id"],
                t["producer_id"],
                t["producer_epoch"],
                topics,
                t["verify_only"],
                lambda codes, tid=t["transactional_id"]: one_done(tid, codes),
                2 if version >= 5 else 0,
            )

    # -- AddOffsetsToTxn ----------------------------------------------------------------------
    def handle_add_offsets_to_txn_request(self, request) -> None:
        body = request.body
        # Kafka's groupCoordinator.partitionFor: from the topic's partition count, or the configured one
        # while __consumer_offsets does not exist yet (the client's FindCoordinator creates it next).
        offsets_topic = self.cache.topic(GROUP_METADATA_TOPIC_NAME)
        count = (
            len(offsets_topic.partitions)
            if offsets_topic is not None
            else self.config[OFFSETS_TOPIC_NUM_PARTITIONS_CONFIG]
        )
        tp = (GROUP_METADATA_TOPIC_NAME, group_partition_for(body["group_id"], count))
        self.txn.handle_add_partitions_to_transaction(
            body["transactional_id"],
            body["producer_id"],
            body["producer_epoch"],
            {tp},
            lambda code: self.helper.send_response(request, {"throttle_time_ms": 0, "error_code": code}),
        )

    # -- EndTxn -------------------------------------------------------------------------------
    def handle_end_txn_request(self, request) -> None:
        body = request.body

        def respond(code: int, pid: int, epoch: int) -> None:
            self.helper.send_response(
                request, {"throttle_time_ms": 0, "error_code": code, "producer_id": pid, "producer_epoch": epoch}
            )

        # EndTxn v5: a transaction version 2 client (KIP-890 part 2), answered with the bumped epoch
        self.txn.handle_end_transaction(
            body["transactional_id"],
            body["producer_id"],
            body["producer_epoch"],
            body["committed"],
            respond,
            2 if request.context.api_version >= 5 else 0,
        )

    # -- TxnOffsetCommit ----------------------------------------------------------------------
    def handle_txn_offset_commit_request(self, request) -> None:
        """TxnOffsetCommit (``KafkaApis.handleTxnOffsetCommitRequest``): partitions the metadata cache does
        not know answer UNKNOWN_TOPIC_OR_PARTITION, the others go to the group coordinator
        (:meth:`GroupCoordinator.handle_txn_commit_offsets`); COORDINATOR_LOAD_IN_PROGRESS is answered
        COORDINATOR_NOT_AVAILABLE before v2, as Kafka."""
        body, version = request.body, request.context.api_version
        now = self.time.milliseconds()
        offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        early: dict[tuple[str, int], int] = {}
        for t in body["topics"]:
            for p in t["partitions"]:
                tp = (t["name"], p["partition_index"])
                if self.cache.partition(*tp) is None:
                    early[tp] = errors.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    offsets[tp] = OffsetAndMetadata(
                        p["committed_offset"], p.get("committed_leader_epoch", -1), p["committed_metadata"] or "", now
                    )

        def respond(codes: dict) -> None:
            topics: dict[str, list] = {}
            for (topic, partition), code in sorted({**early, **codes}.items()):
                if version < 2 and code == errors.COORDINATOR_LOAD_IN_PROGRESS:
                    code = errors.COORDINATOR_NOT_AVAILABLE  # clients before 2.0 do not expect it (KAFKA-7296)
                topics.setdefault(topic, []).append({"partition_index": partition, "error_code": code})
            self.helper.send_response(
                request,
                {"throttle_time_ms": 0, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]},
            )

        if not offsets:
            respond({})
            return
        if request.context.api_version >= 5:
            # KIP-890 part 2: a transaction version 2 client sends no AddOffsetsToTxn; the group's
            # __consumer_offsets partition is added to the transaction here (Kafka's addPartition operation).
            self._add_offsets_partition_then(body, version, offsets, respond)
            return
        self._txn_commit_offsets(body, version, offsets, respond)

    def _add_offsets_partition_then(self, body: dict, version: int, offsets: dict, respond) -> None:
        manager = self.replica_manager.add_partitions_to_txn_manager
        if manager is None:  # transaction.partition.verification.enable=false: nothing to add with
            respond(dict.fromkeys(offsets, errors.UNSUPPORTED_VERSION))
            return
        offsets_topic = self.cache.topic(GROUP_METADATA_TOPIC_NAME)
        if offsets_topic is None:
            respond(dict.fromkeys(offsets, errors.COORDINATOR_NOT_AVAILABLE))
            return
        tp = (GROUP_METADATA_TOPIC_NAME, group_partition_for(body["group_id"], len(offsets_topic.partitions)))

        def added(codes: dict) -> None:
            code = codes.get(tp, errors.UNKNOWN_SERVER_ERROR)
            if code != errors.NONE:
                respond(dict.fromkeys(offsets, code))
            else:
                self._txn_commit_offsets(body, version, offsets, respond)

        manager.verify_transaction(
            body["transactional_id"],
            body["producer_id"],
            body["producer_epoch"],
            [tp],
            added,
            transaction_abortable_supported=version >= 4,
            add=True,
        )

    def _txn_commit_offsets(self, body: dict, version: int, offsets: dict, respond) -> None:
        try:
            self.groups.handle_txn_commit_offsets(
                body["group_id"],
                body["transactional_id"],
                body["producer_id"],
                body["producer_epoch"],
                body.get("member_id", ""),
                body.get("group_instance_id"),
                body.get("generation_id", -1),
                offsets,
                respond,
                transaction_abortable_supported=version >= 4,
            )
        except errors.KafkaError as e:
            respond(dict.fromkeys(offsets, e.code))

    # -- WriteTxnMarkers ----------------------------------------------------------------------
    def handle_write_txn_markers_request(self, request) -> None:
        markers = request.body["markers"]
        results: list[dict | None] = [None] * len(markers)
        lock = threading.Lock()
        remaining = [len(markers)]

        def marker_done(i: int, codes: dict) -> None:
            topics: dict[str, list] = {}
            for (topic, partition), code in sorted(codes.items()):
                topics.setdefault(topic, []).append({"partition_index": partition, "error_code": code})
            with lock:
                results[i] = {
                    "producer_id": markers[i]["producer_id"],
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                }
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                self.helper.send_response(request, {"markers": results})

        if not markers:
            self.helper.send_response(request, {"markers": []})
            return
        for i, marker in enumerate(markers):
            self._write_marker(marker, lambda codes, i=i: marker_done(i, codes))

    def _write_marker(self, marker: dict, done) -> None:
        """One marker of a WriteTxnMarkers request: ``done({(topic, partition): error})`` once. Per
        partition, as Kafka's ``handleWriteTxnMarkersRequest``: UNKNOWN_TOPIC_OR_PARTITION when this
        broker hosts no log of it, else the append's error (NOT_LEADER_OR_FOLLOWER on a follower,
        INVALID_PRODUCER_EPOCH for an older epoch than the partition's, ...). A negative producer id
        answers INVALID_PRODUCER_ID_MAPPING and a negative epoch INVALID_PRODUCER_EPOCH (no marker can
        carry them; Kafka fails the whole request with UNKNOWN_SERVER_ERROR there)."""
        pid, epoch, commit = marker["producer_id"], marker["producer_epoch"], marker["transaction_result"]
        control = EndTransactionMarker(
            ControlRecordType.COMMIT if commit else ControlRecordType.ABORT, marker["coordinator_epoch"]
        )
        invalid = (
            errors.INVALID_PRODUCER_ID_MAPPING if pid < 0 else errors.INVALID_PRODUCER_EPOCH if epoch < 0 else None
        )
        codes: dict[tuple[str, int], int] = {}
        entries: dict[tuple[str, int], memoryview] = {}
        for t in marker["topics"]:
            for p in t["partition_indexes"]:
                tp = (t["name"], p)
                if self.replica_manager.get_partition(*tp) is None:
                    codes[tp] = errors.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                if invalid is not None:
                    codes[tp] = invalid
                    continue
                builder = MemoryRecordsBuilder(is_transactional=True, is_control_batch=True)
                builder.set_producer_state(pid, epoch, -1, True)
                builder.append_end_txn_marker(self.time.milliseconds(), control)
                entries[tp] = memoryview(builder.build())
        if not entries:
            done(codes)
            return

        def appended(responses: AppendResults) -> None:
            offsets_partitions = set()
            for tp, r in responses.items():
                codes[tp] = r.error_code
                if r.error_code == errors.NONE and tp[0] == GROUP_METADATA_TOPIC_NAME:
                    offsets_partitions.add(tp[1])
            if offsets_partitions and self.groups is not None:
                self.groups.schedule_handle_txn_completion(pid, offsets_partitions, commit)
            done(codes)

        self.replica_manager.append_records(
            self.config[REQUEST_TIMEOUT_MS_CONFIG], -1, True, entries, appended, AppendOrigin.COORDINATOR
        )

    # -- DescribeProducers -------------------------------------------------------------------
    def handle_describe_producers_request(self, request) -> None:
        """The active producers of each partition this broker leads (Kafka's
        ``ReplicaManager.activeProducerState``): NOT_LEADER_OR_FOLLOWER on a follower,
        UNKNOWN_TOPIC_OR_PARTITION for a partition it does not host."""
        topics = []
        for t in request.body["topics"]:
            partitions = []
            for index in t["partition_indexes"]:
                entry = {
                    "partition_index": index,
                    "error_code": errors.NONE,
                    "error_message": None,
                    "active_producers": [],
                }
                partition = self.replica_manager.get_partition(t["name"], index)
                if not self.helper.authorize(request, AclOperation.READ, ResourceType.TOPIC, t["name"]):
                    entry["error_code"] = errors.TOPIC_AUTHORIZATION_FAILED
                elif partition is None:
                    entry["error_code"] = errors.UNKNOWN_TOPIC_OR_PARTITION
                elif not partition.is_leader:
                    entry["error_code"] = errors.NOT_LEADER_OR_FOLLOWER
                else:
                    entry["active_producers"] = [
                        {
                            "producer_id": e.producer_id,
                            "producer_epoch": e.producer_epoch,
                            "last_sequence": e.last_seq,
                            "last_timestamp": e.last_timestamp,
                            "coordinator_epoch": e.coordinator_epoch,
                            "current_txn_start_offset": (
                                -1 if e.current_txn_first_offset is None else e.current_txn_first_offset
                            ),
                        }
                        for e in partition.log.active_producers()
                    ]
                partitions.append(entry)
            topics.append({"name": t["name"], "partitions": partitions})
        self.helper.send_response(request, {"throttle_time_ms": 0, "topics": topics})

    # -- DescribeTransactions / ListTransactions ----------------------------------------------
    def handle_describe_transactions_request(self, request) -> None:
        states = []
        for tid in request.body["transactional_ids"]:
            if not self.helper.authorize(request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
                states.append(
                    _describe_transactions_error(
                        0, {"transactional_ids": [tid]}, errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
                    )["transaction_states"][0]
                )
            else:
                states.append(self.txn.handle_describe_transactions(tid))
        self.helper.send_response(request, {"throttle_time_ms": 0, "transaction_states": states})

    def handle_list_transactions_request(self, request) -> None:
        """v2 (KIP-1152) filters by ``transactional_id_pattern`` as well: a regular expression the whole
        transactional id must match (Kafka's RE2J ``matcher().matches()``; Python's ``re`` syntax here), ignored
        when null or empty; one that does not compile is INVALID_REGULAR_EXPRESSION with nothing listed. The
        coordinator's own errors (COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS) come first, as in
        Kafka's ``TransactionStateManager.listTransactionStates``."""
        body = request.body
        result = self.txn.handle_list_transactions(
            set(body["producer_id_filters"]), set(body["state_filters"]), body.get("duration_filter", -1)
        )
        pattern = body.get("transactional_id_pattern")
        if pattern and result["error_code"] == errors.NONE:
            try:
                regex = re.compile(pattern)
            except (re.error, RecursionError, OverflowError):
                result = _list_transactions_error(2, body, errors.INVALID_REGULAR_EXPRESSION, None)
            else:
                result["transaction_states"] = [
                    t for t in result["transaction_states"] if regex.fullmatch(t["transactional_id"])
                ]
        if self.helper.authorizer is not None:  # only the transactional ids the principal may describe
            result["transaction_states"] = [
                t
                for t in result["transaction_states"]
                if self.helper.authorize(
                    request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t["transactional_id"]
                )
            ]
        self.helper.send_response(request, dict(result, throttle_time_ms=0))


# -- error responses built from the request (Kafka's getErrorResponse of each request) --------------------
@error_responses.register(ApiKeys.ADD_PARTITIONS_TO_TXN)
def _add_partitions_error(version, body, code, message):
    if version < 4:
        codes = {(t["name"], p): code for t in body["v3_and_below_topics"] for p in t["partitions"]}
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _by_topic(codes)}
    return {"throttle_time_ms": 0, "error_code": code, "results_by_transaction": []}


@error_responses.register(ApiKeys.ADD_OFFSETS_TO_TXN)
def _add_offsets_error(version, body, code, message):
    return {"throttle_time_ms": 0, "error_code": code}


@error_responses.register(ApiKeys.END_TXN)
def _end_txn_error(version, body, code, message):
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}


@error_responses.register(ApiKeys.LIST_TRANSACTIONS)
def _list_transactions_error(version, body, code, message):
    return {"throttle_time_ms": 0, "error_code": code, "unknown_state_filters": [], "transaction_states": []}


@error_responses.register(ApiKeys.TXN_OFFSET_COMMIT)
def _txn_offset_commit_error(version, body, code, message):
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": t["name"],
                "partitions": [{"partition_index": p["partition_index"], "error_code": code} for p in t["partitions"]],
            }
            for t in body["topics"]
        ],
    }


@error_responses.register(ApiKeys.WRITE_TXN_MARKERS)
def _write_txn_markers_error(version, body, code, message):
    return {
        "markers": [
            {
                "producer_id": m["producer_id"],
                "topics": [
                    {
                        "name": t["name"],
                        "partitions": [{"partition_index": p, "error_code": code} for p in t["partition_indexes"]],
                    }
                    for t in m["topics"]
                ],
            }
            for m in body["markers"]
        ]
    }


@error_responses.register(ApiKeys.DESCRIBE_TRANSACTIONS)
def _describe_transactions_error(version, body, code, message):
    return {
        "throttle_time_ms": 0,
        "transaction_states": [
            {
                "error_code": code,
                "transactional_id": tid,
                "transaction_state": "",
                "transaction_timeout_ms": 0,
                "transaction_start_time_ms": -1,
                "producer_id": -1,
                "producer_epoch": -1,
                "topics": [],
            }
            for tid in body["transactional_ids"]
        ],
    }


@error_responses.register(ApiKeys.DESCRIBE_PRODUCERS)
def _describe_producers_error(version, body, code, message):
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    {"partition_index": p, "error_code": code, "error_message": message, "active_producers": []}
                    for p in t["partition_indexes"]
                ],
            }
            for t in body["topics"]
        ],
    }
