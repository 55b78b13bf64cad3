"""Leader elections asked for by operators (ElectLeaders, API 43) and the controller's periodic
preferred-leader rebalance (Kafka's ``ReplicationControlManager.electLeaders`` /
``maybeBalancePartitionLeaders``).

* **PREFERRED** (election type 0): the first replica of the assignment leads again if it is in the ISR
  and active (unfenced, not shutting down). ELECTION_NOT_NEEDED when it already leads,
  PREFERRED_LEADER_NOT_AVAILABLE otherwise.
* **UNCLEAN** (type 1): a partition without a leader gets one, from the ISR if possible, else any active
  replica (which becomes the whole ISR; data the old ISR had may be lost). ELECTION_NOT_NEEDED when it
  has a leader, ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is active.
* Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION; another election type: INVALID_REQUEST.
  ``topic_partitions`` null means every partition, and then partitions needing no election are left
  out of the answer, as Kafka does.
* ``balance_partition_leaders`` (``auto.leader.rebalance.enable``, every
  ``leader.imbalance.check.interval.seconds``): preferred elections for partitions not led by their
  preferred replica when it can lead, at most ``max_elections`` per run (Kafka's
  ``maxElectionsPerImbalance``, 1000).

Pure functions of the ReplicationControlManager's state returning ControllerResults; they run on the
controller's event thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pykbroker.metadata import partition_change_builder
from pykbroker.metadata.controller_result import ControllerResult
from pykbroker.metadata.records import NO_LEADER, ApiMessageAndVersion
from pykbroker.protocol import errors

if TYPE_CHECKING:
    from pykbroker.metadata.replication_control_manager import ReplicationControlManager

PREFERRED, UNCLEAN = 0, 1
MAX_ELECTIONS_PER_IMBALANCE = 1000


def elect_leaders(replication: ReplicationControlManager, request: dict[str, Any]) -> ControllerResult[dict]:
    """``request``: ElectLeaders ``{election_type, topic_partitions: [{topic, partitions}] | None}``;
    the response ``{error_code, replica_election_results: [{topic, partition_result: [{partition_id,
    error_code, error_message}]}]}``."""
    election_type = request.get("election_type", PREFERRED)
    wanted = request.get("topic_partitions")
    elect_all = wanted is None
    if wanted is None:
        wanted = [
            {"topic": info.name, "partitions": sorted(info.parts)}
            for info in sorted(replication.topics.values(), key=lambda i: i.name)
        ]
    records: list[ApiMessageAndVersion] = []
    results = []
    for t in wanted:
        out = []
        for index in t["partitions"]:
            code, message = _elect(replication, t["topic"], index, election_type, records)
            if elect_all and code == errors.ELECTION_NOT_NEEDED:
                continue
            out.append({"partition_id": index, "error_code": code, "error_message": message})
        if out or not elect_all:
            results.append({"topic": t["topic"], "partition_result": out})
    return ControllerResult(records, {"error_code": errors.NONE, "replica_election_results": results})


def _elect(
    replication: ReplicationControlManager, topic: str, index: int, election_type: int, records: list
) -> tuple[int, str | None]:
    topic_id = replication.topics_by_name.get(topic)
    info = replication.topics.get(topic_id) if topic_id is not None else None
    part = info.parts.get(index) if info is not None else None
    if part is None:
        return errors.UNKNOWN_TOPIC_OR_PARTITION, f"The partition {topic}-{index} does not exist."
    assert info is not None  # a partition was found in it
    active = replication.leader_acceptor(part)
    if election_type == PREFERRED:
        preferred = part.replicas[0] if part.replicas else NO_LEADER
        if part.leader == preferred:
            return errors.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
        if preferred not in part.isr or not active(preferred):
            return errors.PREFERRED_LEADER_NOT_AVAILABLE, (
                f"Failed to elect leader for partition {topic}-{index} under strategy "
                "PreferredReplicaPartitionLeaderElectionStrategy"
            )
        record = partition_change_builder.build_leader_change(info.id, index, part, preferred)
    elif election_type == UNCLEAN:
        if part.leader != NO_LEADER:
            return errors.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
        record = partition_change_builder.build(
            info.id, index, part, list(part.isr), active, unclean=True, **replication.elr_options(topic)
        )
        if record is None or record.data.get("leader", NO_LEADER) == NO_LEADER:
            return errors.ELIGIBLE_LEADERS_NOT_AVAILABLE, (
                f"Failed to elect leader for partition {topic}-{index} under strategy UncleanLeaderElectionStrategy"
            )
    else:
        return errors.INVALID_REQUEST, f"Unknown election type {election_type}"
    if record is not None:
        records.append(record)
    return errors.NONE, None


def balance_partition_leaders(
    replication: ReplicationControlManager, max_elections: int = MAX_ELECTIONS_PER_IMBALANCE
) -> ControllerResult[None]:
    """Preferred-leader elections for imbalanced partitions whose preferred replica can lead."""
    records: list[ApiMessageAndVersion] = []
    for info in replication.topics.values():
        for index, part in sorted(info.parts.items()):
            if len(records) >= max_elections:
                return ControllerResult(records, None)
            preferred = part.replicas[0] if part.replicas else NO_LEADER
            active = replication.leader_acceptor(part)
            if part.leader != preferred and preferred in part.isr and active(preferred):
                record = partition_change_builder.build_leader_change(info.id, index, part, preferred)
                if record is not None:
                    records.append(record)
    return ControllerResult(records, None)
