"""AlterPartition on the controller: a partition leader's ISR change (Kafka's
``ReplicationControlManager.alterPartition`` / ``validateAlterPartitionData``, KIP-497 and KIP-903).

``alter_partition(replication, request, version)`` validates each partition of an AlterPartition request
against the controller's registration and returns a ControllerResult: the PartitionChangeRecords of the
accepted changes and the response body. Per partition, in Kafka's order:

* unknown topic: UNKNOWN_TOPIC_ID (v2+, by id) / UNKNOWN_TOPIC_OR_PARTITION (by name); unknown
  partition: UNKNOWN_TOPIC_OR_PARTITION;
* a leader or partition epoch newer than the controller's: NOT_CONTROLLER (this controller is behind);
* an older leader epoch: FENCED_LEADER_EPOCH; a requester that is not the leader: INVALID_REQUEST; an
  older partition epoch: INVALID_UPDATE_VERSION;
* a new ISR with a replica outside the assignment, a duplicate, or without the leader: INVALID_REQUEST;
  RECOVERING with more than one ISR member, or RECOVERED -> RECOVERING: INVALID_REQUEST;
* a new ISR member not registered, fenced, in controlled shutdown or with another broker epoch:
  INELIGIBLE_REPLICA (OPERATION_NOT_ATTEMPTED before v2);
* a change that would elect another leader: NEW_LEADER_ELECTED (FENCED_LEADER_EPOCH before v2); when the
  change completes a reassignment (KIP-455) that removes the leader, the record is still written (the new
  replicas, ISR and leader) and the leader answered NEW_LEADER_ELECTED so that it fetches the new metadata.

An accepted partition answers with its state after the change (leader, leader epoch, ISR, partition
epoch, which the record's replay will produce), or its current state when nothing changes. A broker
epoch that is not the requester's registered one fails the whole request (STALE_BROKER_EPOCH).

Pure function of the managers' state; runs on the controller's event thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pykbroker.metadata import partition_change_builder
from pykbroker.metadata.controller_result import ControllerResult
from pykbroker.metadata.records import LEADER_RECOVERED, NO_LEADER_CHANGE, ApiMessageAndVersion
from pykbroker.protocol import errors
from pykbroker.protocol.types import ZERO_UUID
from pykbroker.utils.logging import get_logger

if TYPE_CHECKING:
    from pykbroker.metadata.partition_registration import PartitionRegistration
    from pykbroker.metadata.replication_control_manager import ReplicationControlManager

_log = get_logger("ReplicationControlManager")
LEADER_RECOVERING = 1


def alter_partition(
    replication: ReplicationControlManager, request: dict[str, Any], version: int = 3
) -> ControllerResult[dict]:
    """``request``: AlterPartition body; ``version`` its API version (topic ids and
    ``new_isr_with_epochs`` from v2/v3). Raises StaleBrokerEpochError for the whole request."""
    broker_id = int(request["broker_id"])
    replication.cluster.check_broker_epoch(broker_id, int(request.get("broker_epoch", -1)))
    records: list[ApiMessageAndVersion] = []
    topics_out = []
    for t in request.get("topics") or []:
        out: dict[str, Any] = {"topic_name": t.get("topic_name", ""), "topic_id": t.get("topic_id", ZERO_UUID)}
        parts_out: list[dict] = []
        out["partitions"] = parts_out
        topics_out.append(out)
        topic_id = t.get("topic_id") if version > 1 else replication.topics_by_name.get(t.get("topic_name"))
        topic = replication.topics.get(topic_id) if topic_id not in (None, ZERO_UUID) else None
        if topic is None:
            code = errors.UNKNOWN_TOPIC_ID if version > 1 else errors.UNKNOWN_TOPIC_OR_PARTITION
            parts_out.extend(_error(p["partition_index"], code) for p in t.get("partitions") or [])
            _log.info(f"Rejecting AlterPartition request for unknown topic {t.get('topic_id')} {t.get('topic_name')}")
            continue
        for p in t.get("partitions") or []:
            index = p["partition_index"]
            new_isr = _new_isr(p, version)
            part = topic.parts.get(index)
            code = _validate(replication, broker_id, topic.name, index, part, p, new_isr, version)
            if code != errors.NONE:
                parts_out.append(_error(index, code))
                continue
            assert part is not None  # _validate refuses an unknown partition
            record = partition_change_builder.build(
                topic.id,
                index,
                part,
                [b for b, _ in new_isr],
                replication.leader_acceptor(part),
                **replication.elr_options(topic.name),
            )
            if record is not None:
                changed = part.merge(record.data)
                if record.data.get("leader", NO_LEADER_CHANGE) not in (NO_LEADER_CHANGE, broker_id):
                    code = errors.NEW_LEADER_ELECTED if version > 1 else errors.FENCED_LEADER_EPOCH
                    if partition_change_builder.is_reassignment_in_progress(
                        part
                    ) and not partition_change_builder.is_reassignment_in_progress(changed):
                        # The ISR change completes a reassignment that removes the leader: the record is
                        # written and the leader told to fetch new metadata (Kafka's alterPartition).
                        records.append(record)
                        _log.info(
                            f"AlterPartition request from node {broker_id} for {topic.name}-{index} completed the "
                            f"ongoing partition reassignment and triggered a leadership change. Returning "
                            f"{errors.name_of(code)}."
                        )
                    parts_out.append(_error(index, code))
                    continue
                records.append(record)
                if partition_change_builder.is_reassignment_in_progress(
                    part
                ) and not partition_change_builder.is_reassignment_in_progress(changed):
                    _log.info(
                        f"AlterPartition request from node {broker_id} for {topic.name}-{index} completed the "
                        "ongoing partition reassignment."
                    )
                part = changed
                _log.info(f"Node {broker_id} has altered ISR for {topic.name}-{index} to {list(part.isr)}")
            parts_out.append(
                {
                    "partition_index": index,
                    "error_code": errors.NONE,
                    "leader_id": part.leader,
                    "leader_epoch": part.leader_epoch,
                    "isr": list(part.isr),
                    "leader_recovery_state": part.leader_recovery_state,
                    "partition_epoch": part.partition_epoch,
                }
            )
    return ControllerResult(records, {"throttle_time_ms": 0, "error_code": errors.NONE, "topics": topics_out})


def _new_isr(p: dict, version: int) -> list[tuple[int, int]]:
    """``[(broker id, broker epoch)]`` (epoch -1 when not sent: v0-2)."""
    if version >= 3:
        return [(int(s["broker_id"]), int(s.get("broker_epoch", -1))) for s in p.get("new_isr_with_epochs") or []]
    return [(int(b), -1) for b in p.get("new_isr") or []]


def _validate(
    replication: ReplicationControlManager,
    broker_id: int,
    topic: str,
    index: int,
    part: PartitionRegistration | None,
    p: dict[str, Any],
    new_isr: list[tuple[int, int]],
    version: int,
) -> int:
    if part is None:
        _log.info(f"Rejecting AlterPartition request for unknown partition {topic}-{index}")
        return errors.UNKNOWN_TOPIC_OR_PARTITION
    leader_epoch, partition_epoch = p["leader_epoch"], p["partition_epoch"]
    if leader_epoch > part.leader_epoch or partition_epoch > part.partition_epoch:
        return errors.NOT_CONTROLLER
    if leader_epoch < part.leader_epoch:
        return errors.FENCED_LEADER_EPOCH
    if broker_id != part.leader:
        _log.info(f"Rejecting AlterPartition from node {broker_id} for {topic}-{index}: the leader is {part.leader}")
        return errors.INVALID_REQUEST
    if partition_epoch < part.partition_epoch:
        _log.info(
            f"Rejecting AlterPartition from node {broker_id} for {topic}-{index}: the partition epoch is "
            f"{part.partition_epoch}, not {partition_epoch}"
        )
        return errors.INVALID_UPDATE_VERSION
    ids = [b for b, _ in new_isr]
    if len(set(ids)) != len(ids) or not set(ids) <= set(part.replicas) or part.leader not in ids:
        _log.error(f"Rejecting AlterPartition from node {broker_id} for {topic}-{index}: invalid ISR {ids}")
        return errors.INVALID_REQUEST
    recovery = p.get("leader_recovery_state", LEADER_RECOVERED)
    if recovery == LEADER_RECOVERING and (len(ids) > 1 or part.leader_recovery_state == LEADER_RECOVERED):
        return errors.INVALID_REQUEST
    ineligible = []
    for b, epoch in new_isr:
        reg = replication.cluster.brokers.get(b)
        if reg is None:
            ineligible.append(f"{b} (not registered)")
        elif reg.in_controlled_shutdown:
            ineligible.append(f"{b} (shutting down)")
        elif reg.fenced:
            ineligible.append(f"{b} (fenced)")
        elif epoch != -1 and reg.epoch != epoch:
            ineligible.append(f"{b} (broker epoch {epoch}, registered {reg.epoch})")
    if ineligible:
        _log.info(
            f"Rejecting AlterPartition from node {broker_id} for {topic}-{index}: ineligible replicas "
            f"{', '.join(ineligible)} in the new ISR {ids}"
        )
        return errors.INELIGIBLE_REPLICA if version > 1 else errors.OPERATION_NOT_ATTEMPTED
    return errors.NONE


def _error(index: int, code: int) -> dict:
    return {
        "partition_index": index,
        "error_code": code,
        "leader_id": -1,
        "leader_epoch": -1,
        "isr": [],
        "leader_recovery_state": 0,
        "partition_epoch": -1,
    }
