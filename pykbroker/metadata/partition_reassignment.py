"""Partition reassignment on the controller (KIP-455): Kafka's ``ReplicationControlManager``
``alterPartitionReassignments`` / ``listPartitionReassignments`` with ``PartitionReassignmentRevert``.

``alter_partition_reassignments(replication, request)``: AlterPartitionReassignmentsRequest ``{timeout_ms,
topics: [{name, partitions: [{partition_index, replicas}]}]}`` -> ``{throttle_time_ms, error_code, error_message,
responses: [{name, partitions: [{partition_index, error_code, error_message}]}]}``, with one
PartitionChangeRecord per changed partition, appended atomically. Per partition:

* unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION;
* ``replicas`` set (a new target): empty, a broker twice or a broker that is not registered:
  INVALID_REPLICA_ASSIGNMENT. Else the record sets ``replicas`` to the target followed by the replicas it
  removes, ``adding_replicas`` / ``removing_replicas`` to the differences from the current replicas (which,
  while another reassignment runs, include that one's adding replicas), and completes at once when the ISR
  already allows it (a reordering of the same replicas);
* ``replicas`` null (cancel): NO_REASSIGNMENT_IN_PROGRESS when none runs; else the record reverts to the
  original replicas (without the adding ones), the ISR without the adding replicas; when that ISR would be
  empty, the first original replica becomes the ISR, which needs ``unclean.leader.election.enable`` for the
  topic (else INVALID_REPLICA_ASSIGNMENT).

The reassignment then completes through the normal PartitionChangeBuilder path: when the leader's AlterPartition
puts every adding replica in the ISR (see :mod:`~pykbroker.metadata.partition_change_builder`). Everything is in
the metadata log, so a new active controller carries on with it.

``list_partition_reassignments(replication, request)``: ``{topics: null | [{name, partition_indexes}]}`` ->
``{throttle_time_ms, error_code, error_message, topics: [{name, partitions: [{partition_index, replicas,
adding_replicas, removing_replicas}]}]}``: the partitions with a reassignment in progress (unknown topics and
partitions are left out, as Kafka does).

Pure functions of the manager's state; run on the controller's event thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pykbroker.metadata import partition_change_builder
from pykbroker.metadata.controller_result import ControllerResult
from pykbroker.metadata.records import ApiMessageAndVersion
from pykbroker.protocol import errors
from pykbroker.utils.logging import get_logger

if TYPE_CHECKING:
    from pykbroker.metadata.partition_registration import PartitionRegistration
    from pykbroker.metadata.replication_control_manager import ReplicationControlManager

_log = get_logger("ReplicationControlManager")


class _Refused(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def alter_partition_reassignments(
    replication: ReplicationControlManager, request: dict[str, Any]
) -> ControllerResult[dict]:
    """See the module docstring."""
    records: list[ApiMessageAndVersion] = []
    responses = []
    succeeded = total = 0
    for topic in request.get("topics") or []:
        name = topic["name"]
        parts_out = []
        for target in topic.get("partitions") or []:
            index = target["partition_index"]
            code, message = errors.NONE, None
            try:
                record = _alter_one(replication, name, index, target.get("replicas"))
                if record is not None:
                    records.append(record)
                succeeded += 1
            except _Refused as e:
                _log.info(f"Unable to alter partition reassignment for {name}:{index}: {e.message}")
                code, message = e.code, e.message
            total += 1
            parts_out.append({"partition_index": index, "error_code": code, "error_message": message})
        responses.append({"name": name, "partitions": parts_out})
    _log.info(f"Successfully altered {succeeded} out of {total} partition reassignment(s).")
    response = {"throttle_time_ms": 0, "error_code": errors.NONE, "error_message": None, "responses": responses}
    return ControllerResult(records, response, atomic=True)


def _alter_one(
    replication: ReplicationControlManager, name: str, index: int, replicas: list[int] | None
) -> ApiMessageAndVersion | None:
    topic_id = replication.topics_by_name.get(name)
    info = replication.topics.get(topic_id) if topic_id is not None else None
    if info is None:
        raise _Refused(errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}.")
    part = info.parts.get(index)
    if part is None:
        raise _Refused(errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{index}.")
    unclean = replication.configs.unclean_leader_election_enabled_for_topic(name)
    acceptable = replication.leader_acceptor(part)
    if replicas is None:
        return _cancel(info.id, name, index, part, unclean, acceptable, replication.elr_options(name))
    _validate_target(replication, list(replicas))
    new_replicas, removing, adding = partition_change_builder.reassignment_replicas(part.replicas, list(replicas))
    return partition_change_builder.build(
        info.id,
        index,
        part,
        list(part.isr),
        acceptable,
        target_replicas=new_replicas,
        target_removing=removing,
        target_adding=adding,
        default_dir=replication.cluster.default_dir,
        **replication.elr_options(name),
    )


def _cancel(topic_id, name: str, index: int, part: PartitionRegistration, unclean: bool, acceptable, elr_options: dict):
    """Kafka's ``cancelPartitionReassignment`` with ``PartitionReassignmentRevert``."""
    if not partition_change_builder.is_reassignment_in_progress(part):
        raise _Refused(
            errors.NO_REASSIGNMENT_IN_PROGRESS, errors.for_code(errors.NO_REASSIGNMENT_IN_PROGRESS).default_message
        )
    replicas = partition_change_builder.original_replicas(part)
    isr = [r for r in part.isr if r not in part.adding_replicas]
    if not isr:
        if not replicas:
            raise _Refused(
                errors.INVALID_REPLICA_ASSIGNMENT, "Invalid replica assignment: addingReplicas contains all replicas."
            )
        if not unclean:
            raise _Refused(
                errors.INVALID_REPLICA_ASSIGNMENT,
                f"Unable to revert partition assignment for {name}:{index} because it would require an unclean "
                "leader election.",
            )
        isr = [replicas[0]]
    return partition_change_builder.build(
        topic_id,
        index,
        part,
        isr,
        acceptable,
        unclean=unclean,
        target_replicas=replicas,
        target_removing=[],
        target_adding=[],
        **elr_options,
    )


def _validate_target(replication: ReplicationControlManager, replicas: list[int]) -> None:
    """Kafka's ``validateManualPartitionAssignment`` without a replication factor (sorted ids: an unregistered
    broker, then a duplicate)."""
    if not replicas:
        raise _Refused(
            errors.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
        )
    previous = None
    for broker in sorted(replicas):
        if not replication.cluster.is_registered(broker):
            raise _Refused(
                errors.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {broker}, but no such broker is registered.",
            )
        if broker == previous:
            raise _Refused(
                errors.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {broker} more than once.",
            )
        previous = broker


def list_partition_reassignments(
    replication: ReplicationControlManager, request: dict[str, Any]
) -> ControllerResult[dict]:
    """See the module docstring."""
    wanted: list[tuple[Any, list[int] | None]]
    if request.get("topics") is None:
        wanted = [(topic_id, None) for topic_id in replication.topics]
    else:
        wanted = [
            (replication.topics_by_name[t["name"]], list(t.get("partition_indexes") or []))
            for t in request["topics"]
            if t["name"] in replication.topics_by_name
        ]
    topics_out = []
    for topic_id, indexes in wanted:
        info = replication.topics.get(topic_id)
        if info is None:
            continue
        parts_out = []
        for index in sorted(info.parts) if indexes is None else indexes:
            part = info.parts.get(index)
            if part is None or not partition_change_builder.is_reassignment_in_progress(part):
                continue
            parts_out.append(
                {
                    "partition_index": index,
                    "replicas": list(part.replicas),
                    "adding_replicas": list(part.adding_replicas),
                    "removing_replicas": list(part.removing_replicas),
                }
            )
        if parts_out:
            topics_out.append({"name": info.name, "partitions": parts_out})
    response = {"throttle_time_ms": 0, "error_code": errors.NONE, "error_message": None, "topics": topics_out}
    return ControllerResult([], response)
