"""ReplicationControlManager: topics and partitions as the controller sees them (Kafka's
``ReplicationControlManager``).

Operations validate a request against the current in-memory state and return a
:class:`ControllerResult` (records + response) without changing anything; the controller then replays the
records (``replay``), which is the only way state changes - the same path standby controllers and restarts
take. Requests and responses are dicts shaped like the protocol messages (snake_case field names), so the
broker can pass decoded requests straight through:

- ``create_topics``: CreateTopicsRequest ``{topics: [{name, num_partitions, replication_factor,
  assignments: [{partition_index, broker_ids}], configs: [{name, value}]}], validate_only}`` ->
  ``{topics: [CreatableTopicResult]}``; records ``TopicRecord``, its ``ConfigRecord``s, then one
  ``PartitionRecord`` per partition (leader = first ISR member, epochs 0), appended atomically.
- ``delete_topics``: ``{topic_names: [..]}`` and/or ``{topics: [{name, topic_id}]}`` ->
  ``{responses: [{name, topic_id, error_code, error_message}]}``; one ``RemoveTopicRecord`` each.
- ``create_partitions``: ``{topics: [{name, count, assignments: [{broker_ids}] | None}], validate_only}``
  -> ``{results: [{name, error_code, error_message}]}``; new ``PartitionRecord``s.

Broker lifecycle (Kafka's ``handleBrokerFenced`` / ``handleBrokerUnfenced`` /
``handleBrokerInControlledShutdown`` / ``handleBrokerUnregistered``, ``processBrokerHeartbeat``,
``maybeFenceOneStaleBroker``, ``unregisterBroker``): fencing, controlled shutdown and unregistration take
the broker out of every ISR it is in and elect new leaders (``generate_leader_and_isr_updates`` with
:mod:`~pykbroker.metadata.partition_change_builder`); unfencing gives leaderless partitions whose ISR holds
the broker a leader again. These run on the active controller, whose ClusterControlManager has a
heartbeat manager.

Bounded work: an operation that would write more than ``MAX_RECORDS_PER_USER_OP`` (10,000) records
fails whole, every topic answering POLICY_VIOLATION "Unable to perform excessively large batch
operation." (Kafka's ``QuorumController.MAX_RECORDS_PER_USER_OP`` / ``BoundedList``; also with
``validate_only``). The bound is computed from the request before any placement or record is built, so
a request naming a million partitions costs no more than reading it.

Not thread-safe: used on the controller's event thread.
"""

from __future__ import annotations

import collections
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pykbroker.metadata import directory_id, partition_change_builder, topic_names
from pykbroker.metadata.broker_heartbeat_manager import BrokerControlState
from pykbroker.metadata.brokers_to_isrs import BrokersToIsrs
from pykbroker.metadata.cluster_control_manager import ClusterControlManager
from pykbroker.metadata.configuration_control_manager import SET, ConfigurationControlManager
from pykbroker.metadata.controller_result import ControllerResult, MutationQuota
from pykbroker.metadata.features import IBP_3_7_IV2
from pykbroker.metadata.partition_registration import PartitionRegistration
from pykbroker.metadata.records import (
    NO_LEADER,
    PARTITION_CHANGE_RECORD,
    PARTITION_RECORD,
    REMOVE_TOPIC_RECORD,
    TOPIC_RECORD,
    ApiMessageAndVersion,
    remove_topic_record,
    topic_record,
)
from pykbroker.metadata.replica_placer import StripedReplicaPlacer
from pykbroker.protocol import errors
from pykbroker.protocol.config_resource import ConfigResourceType
from pykbroker.protocol.errors import KafkaError
from pykbroker.protocol.types import ZERO_UUID
from pykbroker.utils.logging import get_logger

#: The most records one user operation may generate (Kafka's QuorumController.MAX_RECORDS_PER_USER_OP).
MAX_RECORDS_PER_USER_OP = 10_000
EXCESSIVE_BATCH_MESSAGE = "Unable to perform excessively large batch operation."


@dataclass
class TopicControlInfo:
    name: str
    id: uuid.UUID
    parts: dict[int, PartitionRegistration] = field(default_factory=dict)


class _Rejected(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message


class ReplicationControlManager:
    def __init__(
        self,
        cluster_control: ClusterControlManager,
        configuration_control: ConfigurationControlManager,
        placer: StripedReplicaPlacer | None = None,
        default_num_partitions: int = 1,
        default_replication_factor: int = 1,
        delete_topic_enable: bool = True,
    ):
        self.cluster = cluster_control
        self.configs = configuration_control
        self.placer = placer or StripedReplicaPlacer()
        self.default_num_partitions = default_num_partitions
        self.default_replication_factor = default_replication_factor
        self.delete_topic_enable = delete_topic_enable
        self.topics: dict[uuid.UUID, TopicControlInfo] = {}
        self.topics_by_name: dict[str, uuid.UUID] = {}
        self.topics_with_collision_chars: dict[str, set[str]] = {}
        self.brokers_to_isrs = BrokersToIsrs()
        #: log directory id -> the partitions with a replica in it (Kafka's ``directoriesToPartitions``, KIP-858)
        self.directories_to_partitions: dict[uuid.UUID, set[tuple[uuid.UUID, int]]] = {}
        #: whether ``eligible.leader.replicas.version`` >= 1 is finalized (KIP-966); the controller sets it
        self.elr_enabled: Callable[[], bool] = lambda: False
        self._log = get_logger("ReplicationControlManager")

    # ---- queries -----------------------------------------------------------------------------
    def elr_options(self, topic: str) -> dict[str, Any]:
        """The ELR arguments of :func:`partition_change_builder.build` for a partition of ``topic``:
        ``{elr_enabled, min_isr}`` (Kafka's ``isElrEnabled()`` and the topic's ``min.insync.replicas``)."""
        enabled = self.elr_enabled()
        return {"elr_enabled": enabled, "min_isr": self.configs.min_isr_for_topic(topic) if enabled else 1}

    def leader_acceptor(self, part: PartitionRegistration) -> Callable[[int], bool]:
        """Kafka's ``LeaderAcceptor``: which replicas of ``part`` may lead: active brokers (not fenced, not in
        controlled shutdown) whose replica's log directory is online (KIP-858)."""

        def acceptable(broker_id: int) -> bool:
            return self.cluster.is_active(broker_id) and self.cluster.has_online_dir(
                broker_id, part.directory(broker_id)
            )

        return acceptable

    def directory_assignment_supported(self) -> bool:
        """metadata.version 3.7-IV2 or later (Kafka's ``isDirectoryAssignmentSupported``, KIP-858)."""
        mv = self.cluster.metadata_version()
        return mv is None or mv >= IBP_3_7_IV2

    def topic_exists(self, name: str) -> bool:
        return name in self.topics_by_name

    def get_topic(self, name: str) -> TopicControlInfo | None:
        topic_id = self.topics_by_name.get(name)
        return self.topics[topic_id] if topic_id is not None else None

    # ---- CreateTopics ------------------------------------------------------------------------
    def create_topics(
        self, request: dict[str, Any], describable: set[str] | None = None, quota: MutationQuota | None = None
    ) -> ControllerResult[dict]:
        """See the module docstring. ``describable``: topics whose configs the caller may see in the
        response (None = all). ``quota``: the request's controller mutation quota (KIP-599; an object with
        ``record(partitions)``, Kafka's ``ControllerRequestContext.applyPartitionChangeQuota``): each topic's
        partitions are recorded before its records are built; a topic it refuses (THROTTLING_QUOTA_EXCEEDED)
        is not created."""
        topics = list(request.get("topics", []))
        names = [t["name"] for t in topics]
        duplicates = {n for n, c in collections.Counter(names).items() if c > 1}
        if self._records_for_new_topics(topics) > MAX_RECORDS_PER_USER_OP:
            return ControllerResult.of(
                [],
                {
                    "topics": [
                        _failed_topic(n, errors.POLICY_VIOLATION, EXCESSIVE_BATCH_MESSAGE) for n in dict.fromkeys(names)
                    ]
                },
            )
        records: list[ApiMessageAndVersion] = []
        results: list[dict] = []
        reported: set[str] = set()
        for topic in topics:
            name = topic["name"]
            if name in reported:
                continue
            reported.add(name)
            try:
                if name in duplicates:
                    raise _Rejected(errors.INVALID_REQUEST, "Duplicate topic name.")
                result, topic_records = self._create_topic(
                    topic, describable is None or name in describable, records, quota
                )
                records.extend(topic_records)
                results.append(result)
            except _Rejected as e:
                results.append(_failed_topic(name, e.code, e.message))
            except KafkaError as e:
                results.append(_failed_topic(name, e.code, e.message))
        if request.get("validate_only"):
            records = []
        return ControllerResult.of(records, {"topics": results})

    def _records_for_new_topics(self, topics: list[dict]) -> int:
        """An upper bound of the records CreateTopics would write (a TopicRecord, its ConfigRecords and
        one PartitionRecord per partition), computed from the request alone, before anything is built."""
        total = 0
        for t in topics:
            count = t.get("num_partitions", -1)
            if count == -1:
                count = len(t.get("assignments") or ()) or self.default_num_partitions
            total += 1 + max(count, 0) + len(t.get("configs") or ())
            if total > MAX_RECORDS_PER_USER_OP:
                break
        return total

    def _create_topic(
        self, topic: dict, show_configs: bool, earlier: list[ApiMessageAndVersion], quota: MutationQuota | None = None
    ) -> tuple[dict, list[ApiMessageAndVersion]]:
        name = topic["name"]
        topic_names.validate(name)
        if name in self.topics_by_name or any(r.name == TOPIC_RECORD and r.data["name"] == name for r in earlier):
            raise _Rejected(errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if topic_names.has_collision_chars(name):
            unified = topic_names.unify_collision_chars(name)
            colliding = set(self.topics_with_collision_chars.get(unified, ()))
            colliding.update(
                r.data["name"]
                for r in earlier
                if r.name == TOPIC_RECORD and topic_names.unify_collision_chars(r.data["name"]) == unified
            )
            if colliding:
                raise _Rejected(
                    errors.INVALID_TOPIC_EXCEPTION,
                    f"Topic '{name}' collides with existing topic: {next(iter(colliding))}",
                )
        configs = {c["name"]: c.get("value") for c in topic.get("configs") or []}
        null_configs = [k for k, v in configs.items() if v is None]
        if null_configs:
            raise _Rejected(
                errors.INVALID_CONFIG, "Null value not supported for topic configs: " + ",".join(null_configs)
            )
        parts = self._new_partitions(topic)
        config_records: list[ApiMessageAndVersion] = []
        if configs:
            altered = self.configs.incremental_alter_config(
                ConfigResourceType.TOPIC, name, [(k, SET, v) for k, v in configs.items()], new_resource=True
            )
            error = altered.response
            assert error is not None  # incremental_alter_config always answers an ApiError
            if error["error_code"] != errors.NONE:
                raise _Rejected(error["error_code"], error["error_message"])
            config_records = altered.records
        if quota is not None:
            quota.record(len(parts))  # ThrottlingQuotaExceededError: this topic is refused
        topic_id = uuid.uuid4()
        out = [topic_record(name, topic_id), *config_records]
        out += [parts[i].to_record(topic_id, i) for i in range(len(parts))]
        result = {
            "name": name,
            "topic_id": topic_id,
            "error_code": errors.NONE,
            "error_message": None,
            "topic_config_error_code": errors.NONE,
            "num_partitions": len(parts),
            "replication_factor": len(parts[0].replicas),
            "configs": None,
        }
        if show_configs:
            result["configs"] = self.configs.schema.effective_topic_configs(configs)
        else:
            result.update(
                topic_config_error_code=errors.TOPIC_AUTHORIZATION_FAILED, num_partitions=-1, replication_factor=-1
            )
        return result, out

    def _new_partitions(self, topic: dict) -> dict[int, PartitionRegistration]:
        assignments = topic.get("assignments") or []
        num_partitions = topic.get("num_partitions", -1)
        replication_factor = topic.get("replication_factor", -1)
        if assignments:
            if replication_factor != -1:
                raise _Rejected(
                    errors.INVALID_REQUEST,
                    "A manual partition assignment was specified, but replication factor was not set to -1.",
                )
            if num_partitions != -1:
                raise _Rejected(
                    errors.INVALID_REQUEST,
                    "A manual partition assignment was specified, but numPartitions was not set to -1.",
                )
            parts: dict[int, PartitionRegistration] = {}
            rf: int | None = None
            for a in assignments:
                index = a["partition_index"]
                if index in parts:
                    raise _Rejected(
                        errors.INVALID_REPLICA_ASSIGNMENT,
                        f"Found multiple manual partition assignments for partition {index}",
                    )
                replicas = list(a["broker_ids"])
                self._validate_manual_assignment(replicas, rf)
                rf = len(replicas)
                isr = [b for b in replicas if self.cluster.is_active(b)]
                if not isr:
                    raise _Rejected(
                        errors.INVALID_REPLICA_ASSIGNMENT,
                        "All brokers specified in the manual "
                        f"partition assignment for partition {index} are fenced or in controlled shutdown.",
                    )
                parts[index] = self._new_registration(replicas, isr)
            if any(i not in parts for i in range(len(parts))):
                raise _Rejected(
                    errors.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence"
                )
            return parts
        if replication_factor < -1 or replication_factor == 0:
            raise _Rejected(
                errors.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            )
        if num_partitions < -1 or num_partitions == 0:
            raise _Rejected(errors.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
        num_partitions = self.default_num_partitions if num_partitions == -1 else num_partitions
        replication_factor = self.default_replication_factor if replication_factor == -1 else replication_factor
        return self._place(0, num_partitions, replication_factor)

    def _place(self, start: int, count: int, replication_factor: int) -> dict[int, PartitionRegistration]:
        try:
            placements = self.placer.place(count, replication_factor, self.cluster.usable_brokers())
        except errors.InvalidReplicationFactorError as e:
            raise _Rejected(
                errors.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication_factor} time(s): {e.message}",
            ) from e
        parts = {}
        for i, replicas in enumerate(placements):
            isr = [b for b in replicas if self.cluster.is_active(b)]
            if not isr:
                raise _Rejected(
                    errors.INVALID_REPLICATION_FACTOR,
                    f"Unable to replicate the partition {replication_factor} time(s): All brokers "
                    "are currently fenced or in controlled shutdown.",
                )
            parts[start + i] = self._new_registration(replicas, isr)
        return parts

    def _validate_manual_assignment(self, replicas: list[int], rf: int | None) -> None:
        if not replicas:
            raise _Rejected(
                errors.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
            )
        seen: set[int] = set()
        for b in replicas:
            if b in seen:
                raise _Rejected(
                    errors.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes the broker {b} more than once.",
                )
            seen.add(b)
            if not self.cluster.is_registered(b):
                raise _Rejected(
                    errors.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes broker {b}, but no such broker is registered.",
                )
        if rf is not None and rf != len(replicas):
            raise _Rejected(
                errors.INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes a "
                f"partition with {len(replicas)} replica(s), but this is not consistent with "
                f"previous partitions, which have {rf} replica(s).",
            )

    # ---- DeleteTopics ------------------------------------------------------------------------
    def delete_topics(self, request: dict[str, Any], quota: MutationQuota | None = None) -> ControllerResult[dict]:
        """DeleteTopics by name or id; ``quota`` as in :meth:`create_topics` (a topic's partitions count)."""
        wanted: list[tuple[str | None, uuid.UUID | None]] = [(n, None) for n in request.get("topic_names") or []]
        for t in request.get("topics") or []:
            tid = t.get("topic_id")
            wanted.append((t.get("name"), None if tid in (None, ZERO_UUID) else tid))
        records: list[ApiMessageAndVersion] = []
        responses = []
        seen_ids: set[uuid.UUID] = set()
        seen_names: set[str] = set()
        for name, topic_id in wanted:
            try:
                if not self.delete_topic_enable:
                    raise _Rejected(errors.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
                if name is not None and topic_id is not None:
                    raise _Rejected(errors.INVALID_REQUEST, "Topic name and topic id cannot both be set.")
                if topic_id is not None:
                    if topic_id in seen_ids:
                        raise _Rejected(errors.INVALID_REQUEST, "Duplicate topic id.")
                    seen_ids.add(topic_id)
                    info = self.topics.get(topic_id)
                    if info is None:
                        raise _Rejected(errors.UNKNOWN_TOPIC_ID, _default_message(errors.UNKNOWN_TOPIC_ID))
                elif name is not None:
                    if name in seen_names:
                        raise _Rejected(errors.INVALID_REQUEST, "Duplicate topic name.")
                    seen_names.add(name)
                    tid = self.topics_by_name.get(name)
                    if tid is None:
                        raise _Rejected(
                            errors.UNKNOWN_TOPIC_OR_PARTITION, _default_message(errors.UNKNOWN_TOPIC_OR_PARTITION)
                        )
                    info = self.topics[tid]
                else:
                    raise _Rejected(errors.INVALID_REQUEST, "Neither topic name nor id was given.")
                if info.id in (r.data["topic_id"] for r in records):
                    raise _Rejected(errors.INVALID_REQUEST, "Duplicate topic name.")
                if quota is not None:
                    try:
                        quota.record(len(info.parts))
                    except KafkaError as e:
                        raise _Rejected(e.code, e.message) from e
                records.append(remove_topic_record(info.id))
                responses.append(
                    {"name": info.name, "topic_id": info.id, "error_code": errors.NONE, "error_message": None}
                )
            except _Rejected as e:
                responses.append(
                    {"name": name, "topic_id": topic_id or ZERO_UUID, "error_code": e.code, "error_message": e.message}
                )
        return ControllerResult(records, {"responses": responses}, atomic=False)

    # ---- CreatePartitions --------------------------------------------------------------------
    def create_partitions(self, request: dict[str, Any], quota: MutationQuota | None = None) -> ControllerResult[dict]:
        """CreatePartitions; ``quota`` as in :meth:`create_topics` (the partitions added count)."""
        topics = list(request.get("topics", []))
        names = collections.Counter(t["name"] for t in topics)
        additional = 0
        for t in topics:  # an upper bound of the PartitionRecords, from the request alone
            info = self.get_topic(t["name"])
            additional += max(int(t["count"]) - (len(info.parts) if info is not None else 0), 0)
            if additional > MAX_RECORDS_PER_USER_OP:
                return ControllerResult(
                    [],
                    {
                        "results": [
                            {"name": n, "error_code": errors.POLICY_VIOLATION, "error_message": EXCESSIVE_BATCH_MESSAGE}
                            for n in names
                        ]
                    },
                    atomic=False,
                )
        records: list[ApiMessageAndVersion] = []
        results = []
        for topic in topics:
            name = topic["name"]
            try:
                if names[name] > 1:
                    raise _Rejected(errors.INVALID_REQUEST, "Duplicate topic name.")
                records.extend(self._create_partitions(topic, quota))
                results.append({"name": name, "error_code": errors.NONE, "error_message": None})
            except _Rejected as e:
                results.append({"name": name, "error_code": e.code, "error_message": e.message})
        if request.get("validate_only"):
            records = []
        return ControllerResult(records, {"results": results}, atomic=False)

    def _create_partitions(self, topic: dict, quota: MutationQuota | None = None) -> list[ApiMessageAndVersion]:
        name, count = topic["name"], int(topic["count"])
        info = self.get_topic(name)
        if info is None:
            raise _Rejected(errors.UNKNOWN_TOPIC_OR_PARTITION, _default_message(errors.UNKNOWN_TOPIC_OR_PARTITION))
        current = len(info.parts)
        if count < current:
            raise _Rejected(
                errors.INVALID_PARTITIONS,
                f"The topic {name} currently has {current} partition(s); {count} would not be an increase.",
            )
        if count == current:
            raise _Rejected(errors.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
        additional = count - current
        assignments = topic.get("assignments")
        rf = len(info.parts[0].replicas) if info.parts else self.default_replication_factor
        if assignments is not None and len(assignments) != additional:
            raise _Rejected(
                errors.INVALID_REPLICA_ASSIGNMENT,
                f"Attempted to add {additional} additional "
                f"partition(s), but only {len(assignments)} assignment(s) were specified.",
            )
        if quota is not None:
            try:
                quota.record(additional)
            except KafkaError as e:
                raise _Rejected(e.code, e.message) from e
        if assignments is not None:
            parts = {}
            for i, a in enumerate(assignments):
                replicas = list(a["broker_ids"])
                self._validate_manual_assignment(replicas, rf)
                isr = [b for b in replicas if self.cluster.is_active(b)]
                if not isr:
                    raise _Rejected(
                        errors.INVALID_REPLICA_ASSIGNMENT,
                        "All brokers specified in the manual "
                        f"partition assignment for partition {current + i} are fenced or in "
                        "controlled shutdown.",
                    )
                parts[current + i] = self._new_registration(replicas, isr)
        else:
            parts = self._place(current, additional, rf)
        return [p.to_record(info.id, i) for i, p in sorted(parts.items())]

    # ---- broker lifecycle ---------------------------------------------------------------------
    def process_broker_heartbeat(
        self, request: dict[str, Any], register_broker_record_offset: int
    ) -> ControllerResult[dict]:
        """BrokerHeartbeat ``{broker_id, broker_epoch, current_metadata_offset, want_fence,
        want_shut_down}`` -> ``{error_code, error_message, is_caught_up, is_fenced,
        in_controlled_shutdown, should_shut_down}`` (Kafka's ``processBrokerHeartbeat``). Raises
        StaleBrokerEpochError (STALE_BROKER_EPOCH) for an unknown broker or another epoch. Records: the
        state transition's (fence / unfence / controlled shutdown, with partition changes); the
        heartbeat also refreshes the broker's session."""
        broker_id = int(request["broker_id"])
        broker_epoch = int(request.get("broker_epoch", -1))
        self.check_broker_epoch(broker_id, broker_epoch)
        hbm = self.cluster.heartbeat_manager
        if hbm is None:
            raise RuntimeError("ClusterControlManager is not active.")
        current, nxt = hbm.calculate_next_broker_state(
            broker_id, request, register_broker_record_offset, lambda: self.has_leaderships(broker_id)
        )
        records: list[ApiMessageAndVersion] = []
        if current is not nxt:
            if nxt in (BrokerControlState.FENCED, BrokerControlState.SHUTDOWN_NOW):
                self.handle_broker_fenced(broker_id, records)
            elif nxt is BrokerControlState.UNFENCED:
                self.handle_broker_unfenced(broker_id, records)
            elif nxt is BrokerControlState.CONTROLLED_SHUTDOWN:
                self.handle_broker_in_controlled_shutdown(broker_id, records)
        offset = int(request["current_metadata_offset"])
        hbm.touch(broker_id, nxt.fenced, offset)
        if self.directory_assignment_supported():
            self.handle_directories_offline(
                broker_id, broker_epoch, list(request.get("offline_log_dirs") or ()), records
            )
        return ControllerResult(
            records,
            {
                "error_code": errors.NONE,
                "error_message": None,
                "is_caught_up": offset >= register_broker_record_offset,
                "is_fenced": nxt.fenced,
                "in_controlled_shutdown": nxt.in_controlled_shutdown,
                "should_shut_down": nxt.should_shut_down,
            },
        )

    def check_broker_epoch(self, broker_id: int, broker_epoch: int) -> None:
        """Kafka's ``ClusterControlManager.checkBrokerEpoch``: STALE_BROKER_EPOCH unless registered with
        exactly ``broker_epoch``."""
        reg = self.cluster.brokers.get(broker_id)
        if reg is None:
            raise errors.StaleBrokerEpochError(f"No broker registration found for broker id {broker_id}")
        if reg.epoch != broker_epoch:
            raise errors.StaleBrokerEpochError(
                f"Expected broker epoch {reg.epoch}, but got broker epoch {broker_epoch}"
            )

    def unregister_broker(self, broker_id: int) -> ControllerResult[dict]:
        """UnregisterBroker -> ``{error_code, error_message}``: BROKER_ID_NOT_REGISTERED for an unknown
        broker; else the broker leaves every ISR (new leaders elected) and an UnregisterBrokerRecord."""
        if broker_id not in self.cluster.brokers:
            return ControllerResult(
                [],
                {
                    "error_code": errors.BROKER_ID_NOT_REGISTERED,
                    "error_message": f"Broker ID {broker_id} is not currently registered",
                },
            )
        records: list[ApiMessageAndVersion] = []
        self.generate_leader_and_isr_updates(
            "handleBrokerUnregistered",
            broker_id,
            NO_LEADER,
            records,
            self.brokers_to_isrs.partitions_with_broker_in_isr(broker_id),
        )
        records.append(self.cluster.unregister_record(broker_id))
        return ControllerResult(records, {"error_code": errors.NONE, "error_message": None})

    def maybe_fence_one_stale_broker(
        self, last_received_ms: Callable[[int, int], int | None] = lambda broker_id, epoch: None
    ) -> ControllerResult[bool]:
        """Fence the broker whose session expired longest ago, if any (Kafka's
        ``maybeFenceOneStaleBroker``): one per call, so each fencing's leader changes are visible before
        the next. ``last_received_ms(broker_id, broker_epoch)``: when that broker's latest heartbeat was
        received (monotonic ms, None if unknown); a stale broker with a heartbeat received but not yet
        processed is not fenced, its session runs from the receipt. Response: whether a broker was
        fenced."""
        records: list[ApiMessageAndVersion] = []
        hbm = self.cluster.heartbeat_manager
        if hbm is None:
            return ControllerResult(records, False)
        while (broker_id := hbm.find_one_stale_broker()) is not None:
            reg = self.cluster.brokers.get(broker_id)
            received = last_received_ms(broker_id, reg.epoch) if reg is not None else None
            if received is not None and hbm.note_contact(broker_id, received):
                continue  # its session runs from the queued heartbeat; look at the next oldest
            self._log.info("Fencing broker because its session has timed out", broker=broker_id)
            self.handle_broker_fenced(broker_id, records)
            hbm.fence(broker_id)
            return ControllerResult(records, True)
        return ControllerResult(records, False)

    def has_leaderships(self, broker_id: int) -> bool:
        return any(
            self.topics[t].parts[p].leader == broker_id
            for t, p in self.brokers_to_isrs.partitions_with_broker_in_isr(broker_id)
        )

    def handle_broker_fenced(self, broker_id: int, records: list[ApiMessageAndVersion]) -> None:
        """Take ``broker_id`` out of every ISR (electing new leaders), then fence it."""
        if broker_id not in self.cluster.brokers:
            raise RuntimeError(f"Can't find broker registration for broker {broker_id}")
        self.generate_leader_and_isr_updates(
            "handleBrokerFenced",
            broker_id,
            NO_LEADER,
            records,
            self.brokers_to_isrs.partitions_with_broker_in_isr(broker_id),
        )
        records.append(self.cluster.fence_record(broker_id))

    def handle_broker_unfenced(self, broker_id: int, records: list[ApiMessageAndVersion]) -> None:
        """Unfence ``broker_id``, then give leaderless partitions a leader (it may lead although its
        registration still says fenced)."""
        records.append(self.cluster.unfence_record(broker_id))
        self.generate_leader_and_isr_updates(
            "handleBrokerUnfenced", NO_LEADER, broker_id, records, self.brokers_to_isrs.partitions_with_no_leader()
        )

    def handle_broker_in_controlled_shutdown(self, broker_id: int, records: list[ApiMessageAndVersion]) -> None:
        """Put ``broker_id`` in controlled shutdown and take it out of every ISR (moving its leaderships)."""
        record = self.cluster.in_controlled_shutdown_record(broker_id)
        if record is not None:
            records.append(record)
        self.generate_leader_and_isr_updates(
            f"enterControlledShutdown[{broker_id}]",
            broker_id,
            NO_LEADER,
            records,
            self.brokers_to_isrs.partitions_with_broker_in_isr(broker_id),
        )

    def handle_directories_offline(
        self, broker_id: int, broker_epoch: int, offline_dirs: list[uuid.UUID], records: list[ApiMessageAndVersion]
    ) -> None:
        """Kafka's ``handleDirectoriesOffline`` (KIP-858): the directories of ``offline_dirs`` that ``broker_id``'s
        registration still has online go offline: the broker leaves the ISR of every partition with a replica in
        them (their leadership moves to another ISR member; the replica may not lead while its directory is
        offline) and a BrokerRegistrationChangeRecord (v2) keeps its other directories online."""
        registration = self.cluster.brokers[broker_id]
        newly_offline = [d for d in registration.log_dirs if d in offline_dirs]
        if not newly_offline:
            return
        for directory in newly_offline:
            parts = sorted(self.directories_to_partitions.get(directory, ()), key=lambda tp: (str(tp[0]), tp[1]))
            self.generate_leader_and_isr_updates(
                f"handleDirectoriesOffline[{broker_id}:{directory}]", broker_id, NO_LEADER, records, parts
            )
        online = [d for d in registration.log_dirs if d not in offline_dirs]
        records.append(self.cluster.log_dirs_record(broker_id, online))
        self._log.warning(
            f"Directories {newly_offline} in broker {broker_id} marked offline, remaining directories: {online}"
        )

    def assign_replicas_to_dirs(self, request: dict[str, Any]) -> ControllerResult[dict]:
        """AssignReplicasToDirs (73, KIP-858, Kafka's ``handleAssignReplicasToDirs``): ``{broker_id, broker_epoch,
        directories: [{id, topics: [{topic_id, partitions: [{partition_index}]}]}]}`` -> the same shape with an
        ``error_code`` per partition (UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER for a
        partition without a replica on the broker) and a top-level ``error_code``. Records: a PartitionChangeRecord
        setting the replica's directory; a replica assigned to an offline directory also leaves the ISR (leadership
        moves). Raises UnsupportedVersionError before metadata.version 3.7-IV2, StaleBrokerEpochError /
        BrokerIdNotRegisteredError for another epoch / an unknown broker."""
        if not self.directory_assignment_supported():
            raise errors.UnsupportedVersionError("Directory assignment is not supported yet.")
        broker_id = int(request["broker_id"])
        self.cluster.check_broker_epoch(broker_id, int(request.get("broker_epoch", -1)))
        records: list[ApiMessageAndVersion] = []
        offline_assigned: list[tuple[uuid.UUID, int]] = []
        out_dirs = []
        for req_dir in request.get("directories") or []:
            dir_id = req_dir["id"]
            offline = not self.cluster.has_online_dir(broker_id, dir_id)
            out_topics = []
            for req_topic in req_dir.get("topics") or []:
                topic_id = req_topic["topic_id"]
                info = self.topics.get(topic_id)
                out_parts = []
                for req_part in req_topic.get("partitions") or []:
                    index = int(req_part["partition_index"])
                    code = errors.NONE
                    part = info.parts.get(index) if info is not None else None
                    if info is None:
                        code = errors.UNKNOWN_TOPIC_ID
                    elif part is None:
                        code = errors.UNKNOWN_TOPIC_OR_PARTITION
                    elif broker_id not in part.replicas:
                        code = errors.NOT_LEADER_OR_FOLLOWER
                    else:
                        record = partition_change_builder.build(
                            topic_id,
                            index,
                            part,
                            list(part.isr),
                            self.leader_acceptor(part),
                            target_directories={broker_id: dir_id},
                            **self.elr_options(info.name),
                        )
                        if record is not None:
                            records.append(record)
                        if offline:
                            offline_assigned.append((topic_id, index))
                    out_parts.append({"partition_index": index, "error_code": code})
                out_topics.append({"topic_id": topic_id, "partitions": out_parts})
            out_dirs.append({"id": dir_id, "topics": out_topics})
        if offline_assigned:
            self.generate_leader_and_isr_updates(
                "offline-dir-assignment", broker_id, NO_LEADER, records, offline_assigned
            )
        return ControllerResult(records, {"error_code": errors.NONE, "directories": out_dirs})

    def handle_broker_unclean_shutdown(self, broker_id: int, records: list[ApiMessageAndVersion]) -> None:
        """Kafka's ``handleBrokerUncleanShutdown`` (ELR enabled): a new incarnation of ``broker_id`` that did
        not shut down cleanly leaves every ISR and ELR (its log may have lost acknowledged records)."""
        if not self.elr_enabled():
            return
        self.generate_leader_and_isr_updates(
            "handleBrokerUncleanShutdown",
            NO_LEADER,
            NO_LEADER,
            records,
            self.brokers_to_isrs.partitions_with_broker_in_isr(broker_id),
            unclean_shutdown=broker_id,
        )
        in_elr = sorted(
            ((t.id, p) for t in self.topics.values() for p, reg in t.parts.items() if broker_id in reg.elr),
            key=lambda tp: (str(tp[0]), tp[1]),
        )
        self.generate_leader_and_isr_updates(
            "handleBrokerUncleanShutdown", NO_LEADER, NO_LEADER, records, in_elr, unclean_shutdown=broker_id
        )

    def generate_leader_and_isr_updates(
        self,
        context: str,
        broker_to_remove: int,
        broker_to_add: int,
        records: list[ApiMessageAndVersion],
        partitions: list[tuple[uuid.UUID, int]],
        unclean_shutdown: int = NO_LEADER,
    ) -> None:
        """PartitionChangeRecords for ``partitions``: ``broker_to_remove`` (or NO_LEADER) leaves the ISR
        and may not lead; ``broker_to_add`` (or NO_LEADER) may lead although not yet active;
        ``unclean_shutdown`` (or NO_LEADER) leaves the ISR and the ELR and may not lead."""

        before = len(records)
        for topic_id, partition_id in partitions:
            topic = self.topics.get(topic_id)
            if topic is None or partition_id not in topic.parts:
                raise RuntimeError(f"Partition {topic_id}-{partition_id} is indexed but not in the topics map")
            part = topic.parts[partition_id]

            def acceptable(r: int, part: PartitionRegistration = part) -> bool:
                if r in (broker_to_remove, unclean_shutdown):
                    return False
                active = r == broker_to_add or self.cluster.is_active(r)
                return active and self.cluster.has_online_dir(r, part.directory(r))

            target_isr = [b for b in part.isr if b not in (broker_to_remove, unclean_shutdown)]
            record = partition_change_builder.build(
                topic_id,
                partition_id,
                part,
                target_isr,
                acceptable,
                unclean=self.configs.unclean_leader_election_enabled_for_topic(topic.name),
                unclean_shutdown_replicas=() if unclean_shutdown == NO_LEADER else (unclean_shutdown,),
                **self.elr_options(topic.name),
            )
            if record is not None:
                records.append(record)
        if len(records) != before:
            self._log.info(f"{context}: changing {len(records) - before} partition(s)")

    # ---- replay ------------------------------------------------------------------------------
    def replay(self, record: ApiMessageAndVersion) -> None:
        d = record.data
        if record.name == TOPIC_RECORD:
            name = d["name"]
            self.topics[d["topic_id"]] = TopicControlInfo(name, d["topic_id"])
            self.topics_by_name[name] = d["topic_id"]
            if topic_names.has_collision_chars(name):
                self.topics_with_collision_chars.setdefault(topic_names.unify_collision_chars(name), set()).add(name)
        elif record.name == PARTITION_RECORD:
            info = self.topics.get(d["topic_id"])
            if info is None:
                raise ValueError(f"PartitionRecord for unknown topic id {d['topic_id']}")
            tp = (d["topic_id"], d["partition_id"])
            new = PartitionRegistration.from_record(d)
            self.brokers_to_isrs.update(tp, info.parts.get(tp[1]), new)
            self._update_partition_directories(tp, info.parts.get(tp[1]), new)
            info.parts[tp[1]] = new
        elif record.name == PARTITION_CHANGE_RECORD:
            info = self.topics.get(d["topic_id"])
            if info is None or d["partition_id"] not in info.parts:
                raise ValueError(f"PartitionChangeRecord for unknown partition {d['topic_id']}-{d['partition_id']}")
            tp = (d["topic_id"], d["partition_id"])
            old = info.parts[tp[1]]
            new = old.merge(d)
            self.brokers_to_isrs.update(tp, old, new)
            self._update_partition_directories(tp, old, new)
            info.parts[tp[1]] = new
        elif record.name == REMOVE_TOPIC_RECORD:
            info = self.topics.pop(d["topic_id"], None)
            if info is None:
                raise ValueError(f"RemoveTopicRecord for unknown topic id {d['topic_id']}")
            for p, reg in info.parts.items():
                self.brokers_to_isrs.update((info.id, p), reg, None)
                self._update_partition_directories((info.id, p), reg, None)
            del self.topics_by_name[info.name]
            key = topic_names.unify_collision_chars(info.name)
            colliding = self.topics_with_collision_chars.get(key)
            if colliding is not None:
                colliding.discard(info.name)
                if not colliding:
                    del self.topics_with_collision_chars[key]
            self.configs.delete_topic_configs(info.name)

    def _new_registration(self, replicas: list[int], isr: list[int]) -> PartitionRegistration:
        """A new partition: the first ISR member leads; each replica's directory is its broker's default
        (KIP-858: its only log dir, else UNASSIGNED until the broker assigns it) from metadata.version 3.7-IV2."""
        directories: tuple[uuid.UUID, ...] = ()
        if self.directory_assignment_supported():
            directories = tuple(self.cluster.default_dir(b) for b in replicas)
        return PartitionRegistration(
            tuple(replicas), tuple(isr), leader=isr[0], leader_epoch=0, partition_epoch=0, directories=directories
        )

    def _update_partition_directories(
        self, tp: tuple[uuid.UUID, int], old: PartitionRegistration | None, new: PartitionRegistration | None
    ) -> None:
        """Kafka's ``updatePartitionDirectories``: index ``tp`` under its replicas' directories (reserved ids are
        not indexed)."""
        if old is not None:
            for d in old.directories:
                parts = self.directories_to_partitions.get(d)
                if parts is not None:
                    parts.discard(tp)
                    if not parts:
                        del self.directories_to_partitions[d]
        if new is not None:
            for d in new.directories:
                if not directory_id.reserved(d):
                    self.directories_to_partitions.setdefault(d, set()).add(tp)


def _failed_topic(name: str, code: int, message: str | None) -> dict:
    return {
        "name": name,
        "topic_id": ZERO_UUID,
        "error_code": code,
        "error_message": message,
        "topic_config_error_code": errors.NONE,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": None,
    }


def _default_message(code: int) -> str:
    return errors.for_code(code).default_message
