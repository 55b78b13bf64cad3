"""kafka-reassign-partitions: move partition replicas between brokers (Kafka's ``ReassignPartitionsCommand``, KIP-455).

    bin/kafka-reassign-partitions --bootstrap-server H:P --generate --topics-to-move-json-file t.json --broker-list 1,2
    bin/kafka-reassign-partitions --bootstrap-server H:P --execute --reassignment-json-file r.json [--throttle B/s]
    bin/kafka-reassign-partitions --bootstrap-server H:P --verify --reassignment-json-file r.json
    bin/kafka-reassign-partitions --bootstrap-server H:P --cancel --reassignment-json-file r.json
    bin/kafka-reassign-partitions --bootstrap-server H:P --list

Files and output are Kafka's. ``t.json``: ``{"topics": [{"topic": "foo"}], "version": 1}``. ``r.json``:
``{"version": 1, "partitions": [{"topic": "foo", "partition": 0, "replicas": [1, 2, 3], "log_dirs": ["any", ...]}]}``
(``log_dirs`` optional; a replica changing log directory, AlterReplicaLogDirs, is not supported). A different
number of replicas than the partition has changes its replication factor.

* ``--generate`` prints "Current partition replica assignment" and "Proposed partition reassignment configuration"
  (compact JSON, partitions sorted); the proposal is Kafka's rack-unaware ``AdminUtils.assignReplicasToBrokers``
  over the ``--broker-list`` (random start, as Kafka).
* ``--execute`` refuses while another reassignment runs (unless ``--additional``), checks the brokers exist
  ("Unknown broker id N"), prints the current assignment for a rollback, sets the throttles with ``--throttle``
  (``leader/follower.replication.throttled.rate`` on the moving brokers, ``leader/follower.replication.throttled.
  replicas`` on the topics, as Kafka's ``modifyReassignmentThrottle``), then sends one AlterPartitionReassignments
  request: "Successfully started partition reassignment(s) for t-0,t-1" or "Error reassigning partition(s):" with one
  line per refused partition (exit 1).
* ``--verify`` prints "Status of partition reassignment:" with, per partition, "Reassignment of partition t-0 is
  completed." / "... is still in progress." / "There is no active reassignment of partition t-0, but replica set is
  1,2 rather than 3,4."; when nothing is in progress it clears the throttles (unless ``--preserve-throttles``).
* ``--cancel`` cancels the listed partitions' ongoing reassignments ("Successfully cancelled partition
  reassignment(s) for: ..." or "None of the specified partition reassignments are active.") and clears the throttles.
* ``--list`` prints "Current partition reassignments:" with ``t-0: replicas: 1,2,3,4. adding: 4. removing: 1.`` lines,
  or "No partition reassignments found.".

Errors Kafka reports tersely (its TerseException) are printed alone on stdout, others as ``Error: <message>``; the
exit status is then 1. Bad options print Kafka's message and the usage on stderr, exit status 1.

Throttles: the configs are written as Kafka's tool writes them; whether brokers enforce them is the broker's
(see README, replication throttles).
"""

from __future__ import annotations

import json
import os
import random
import sys
from collections.abc import Iterable

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.config.topic_config import (
    FOLLOWER_REPLICATION_THROTTLED_REPLICAS_CONFIG,
    LEADER_REPLICATION_THROTTLED_REPLICAS_CONFIG,
)
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.config_resource import ConfigResourceType
from pykbroker.tools.command_line_utils import ToolArgumentParser, add_version_option, configure_tool_logging
from pykbroker.tools.topic_command import _metadata

ANY_LOG_DIR = "any"
HELP_TEXT = "This tool helps to move topic partitions between replicas."
CANNOT_EXECUTE_BECAUSE_OF_EXISTING_MESSAGE = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to override this and "
    "create a new partition assignment in addition to the existing one. The --additional flag can also be used to "
    "change the throttle by resubmitting the current reassignment."
)
YOU_MUST_RUN_VERIFY_PERIODICALLY_MESSAGE = (
    "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed."
)
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_REPLICAS = LEADER_REPLICATION_THROTTLED_REPLICAS_CONFIG
FOLLOWER_REPLICAS = FOLLOWER_REPLICATION_THROTTLED_REPLICAS_CONFIG
BROKER_LEVEL_THROTTLES = (LEADER_RATE, FOLLOWER_RATE, LOG_DIRS_RATE)
TOPIC_LEVEL_THROTTLES = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
SET, DELETE = 0, 1

TopicPartition = tuple[str, int]


class TerseError(Exception):
    """Printed alone (Kafka's TerseException)."""


class AdminCommandFailed(Exception):
    """Printed as ``Error: <message>`` (Kafka's AdminCommandFailedException / AdminOperationException)."""


def tp_str(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def _sorted(tps: Iterable[TopicPartition]) -> list[TopicPartition]:
    return sorted(tps)


def _ints(values: Iterable[int]) -> str:
    return ",".join(str(v) for v in values)


# ---- JSON files ---------------------------------------------------------------------------------------------
def _load_json(text: str) -> dict:
    try:
        data = json.loads(text)
    except ValueError as e:
        raise AdminCommandFailed(f"The input string is not a valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise AdminCommandFailed("The input string is not a valid JSON object")
    return data


def parse_topics_data(text: str) -> list[str]:
    """Kafka's ``parseTopicsData``: the topic names of a topics-to-move file."""
    data = _load_json(text)
    version = data.get("version", 1)
    if version != 1:
        raise AdminCommandFailed(f"Not supported version field value {version}")
    try:
        return [str(t["topic"]) for t in data.get("topics") or []]
    except (KeyError, TypeError) as e:
        raise AdminCommandFailed(f"Invalid topics JSON: {e}") from None


def parse_reassignment_data(text: str) -> tuple[list[tuple[TopicPartition, list[int]]], dict]:
    """Kafka's ``parsePartitionReassignmentData``: ``([(tp, replicas)], {(topic, partition, broker): log dir})``,
    without removing duplicates (the callers check them)."""
    data = _load_json(text)
    version = data.get("version", 1)
    if version != 1:
        raise AdminCommandFailed(f"Not supported version field value {version}")
    parts: list[tuple[TopicPartition, list[int]]] = []
    log_dirs: dict[tuple[str, int, int], str] = {}
    try:
        for p in data.get("partitions") or []:
            tp = (str(p["topic"]), int(p["partition"]))
            replicas = [int(r) for r in p["replicas"]]
            dirs = [str(d) for d in p.get("log_dirs") or [ANY_LOG_DIR] * len(replicas)]
            if len(dirs) != len(replicas):
                raise AdminCommandFailed(
                    f"Size of replicas list {_java_list(replicas)} is different from size of log dirs list "
                    f"{_java_list(dirs)} for partition {tp_str(tp)}"
                )
            parts.append((tp, replicas))
            for r, d in zip(replicas, dirs, strict=True):
                if d != ANY_LOG_DIR:
                    log_dirs[(tp[0], tp[1], r)] = d
    except (KeyError, TypeError, ValueError) as e:
        raise AdminCommandFailed(f"Invalid reassignment JSON: {e}") from None
    return parts, log_dirs


def _java_list(values: Iterable) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def format_as_reassignment_json(assignment: dict[TopicPartition, list[int]]) -> str:
    """Kafka's ``formatAsReassignmentJson`` (Jackson's compact JSON, partitions sorted)."""
    partitions = [
        {
            "topic": t,
            "partition": p,
            "replicas": assignment[(t, p)],
            "log_dirs": [ANY_LOG_DIR] * len(assignment[(t, p)]),
        }
        for t, p in _sorted(assignment)
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def parse_execute_assignment(text: str) -> tuple[dict[TopicPartition, list[int]], dict]:
    """Kafka's ``parseExecuteAssignmentArgs``: refuses an empty list, an empty replica list and duplicates."""
    parts, log_dirs = parse_reassignment_data(text)
    if not parts:
        raise AdminCommandFailed("Partition reassignment list cannot be empty")
    if any(not replicas for _, replicas in parts):
        raise AdminCommandFailed("Partition replica list cannot be empty")
    seen: set[TopicPartition] = set()
    duplicates = []
    for tp, _ in parts:
        if tp in seen and tp not in duplicates:
            duplicates.append(tp)
        seen.add(tp)
    if duplicates:
        raise AdminCommandFailed(
            "Partition reassignment contains duplicate topic partitions: " + ",".join(tp_str(tp) for tp in duplicates)
        )
    dup_replicas = []
    for tp, replicas in parts:
        dups = sorted({r for r in replicas if replicas.count(r) > 1})
        if dups:
            dup_replicas.append(f"{tp_str(tp)} contains multiple entries for {_ints(dups)}")
    if dup_replicas:
        raise AdminCommandFailed(
            "Partition replica lists may not contain duplicate entries: " + ". ".join(dup_replicas)
        )
    return dict(parts), log_dirs


# ---- Kafka's AdminUtils.assignReplicasToBrokers (rack-unaware) ----------------------------------------------
def assign_replicas_to_brokers(
    brokers: list[int], num_partitions: int, replication_factor: int, rng: random.Random | None = None
) -> dict[int, list[int]]:
    """Kafka's ``assignReplicasToBrokersRackUnaware`` with a random start index and replica shift."""
    if replication_factor <= 0:
        raise AdminCommandFailed("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise AdminCommandFailed(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}."
        )
    rng = rng or random.Random()
    ids = sorted(brokers)
    n = len(ids)
    start_index = rng.randrange(n)
    next_replica_shift = rng.randrange(n)
    result: dict[int, list[int]] = {}
    for current in range(num_partitions):
        if current > 0 and current % n == 0:
            next_replica_shift += 1
        first = (current + start_index) % n
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            shift = 1 + (next_replica_shift + j) % (n - 1)
            replicas.append(ids[(first + shift) % n])
        result[current] = replicas
    return result


# ---- requests -----------------------------------------------------------------------------------------------
class Cluster:
    """The connections the tool uses: the bootstrap broker, and each broker for its own BROKER configs."""

    def __init__(self, bootstrap: str, timeout_ms: int = 30000):
        self.timeout_ms = timeout_ms
        self.conn = BrokerConnection.to(bootstrap, client_id="reassign-partitions-tool", timeout=timeout_ms / 1000 + 5)

    def close(self) -> None:
        self.conn.close()

    def brokers(self) -> dict[int, tuple[str, int]]:
        return {b["node_id"]: (b["host"], b["port"]) for b in _metadata(self.conn, [])["brokers"]}

    def replica_assignment(self, topics: Iterable[str]) -> dict[TopicPartition, list[int]]:
        """Kafka's ``getReplicaAssignmentForTopics``: UNKNOWN_TOPIC_OR_PARTITION "Topic t not found."."""
        names = sorted(set(topics))
        out: dict[TopicPartition, list[int]] = {}
        if not names:
            return out
        for t in _metadata(self.conn, names)["topics"]:
            if t["error_code"] != errors.NONE:
                if t["error_code"] == errors.UNKNOWN_TOPIC_OR_PARTITION:
                    raise errors.UnknownTopicOrPartitionError(f"Topic {t['name']} not found.")
                raise errors.for_code(t["error_code"])(f"Topic {t['name']}: {errors.name_of(t['error_code'])}")
            for p in t["partitions"]:
                out[(t["name"], p["partition_index"])] = list(p["replica_nodes"])
        return out

    def list_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        """ListPartitionReassignments: ``{tp: (replicas, adding, removing)}``."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in sorted(by_topic.items())]
        response = self.conn.request(
            ApiKeys.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": self.timeout_ms, "topics": topics}
        )
        _raise_top_level(response)
        return {
            (t["name"], p["partition_index"]): (p["replicas"], p["adding_replicas"], p["removing_replicas"])
            for t in response["topics"]
            for p in t["partitions"]
        }

    def alter_reassignments(self, targets: dict[TopicPartition, list[int] | None]) -> dict[TopicPartition, str]:
        """AlterPartitionReassignments (None cancels): ``{tp: error text}`` of the refused partitions."""
        by_topic: dict[str, list[dict]] = {}
        for (t, p), replicas in targets.items():
            by_topic.setdefault(t, []).append({"partition_index": p, "replicas": replicas})
        response = self.conn.request(
            ApiKeys.ALTER_PARTITION_REASSIGNMENTS,
            0,
            {"timeout_ms": self.timeout_ms, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]},
        )
        _raise_top_level(response)
        failed = {}
        for t in response["responses"]:
            for p in t["partitions"]:
                if p["error_code"] != errors.NONE:
                    failed[(t["name"], p["partition_index"])] = (
                        p.get("error_message") or errors.for_code(p["error_code"]).default_message
                    )
        return failed

    def incremental_alter_configs(self, resources: list[tuple[int, str, list[tuple[str, int, str | None]]]]) -> None:
        """IncrementalAlterConfigs of ``[(resource type, name, [(config, op, value)])]``: a BROKER resource goes to
        that broker (as Kafka's Admin sends it), the others to the bootstrap broker. Raises the first error."""
        to_bootstrap = [r for r in resources if r[0] != ConfigResourceType.BROKER]
        per_broker = [r for r in resources if r[0] == ConfigResourceType.BROKER]
        if to_bootstrap:
            self._alter_configs(self.conn, to_bootstrap)
        if per_broker:
            addresses = self.brokers()
            for resource in per_broker:
                address = addresses.get(int(resource[1]))
                if address is None:
                    continue  # not a live broker: nothing to throttle there
                with BrokerConnection(*address, client_id="reassign-partitions-tool") as conn:
                    self._alter_configs(conn, [resource])

    @staticmethod
    def _alter_configs(conn: BrokerConnection, resources) -> None:
        body = {
            "resources": [
                {
                    "resource_type": rtype,
                    "resource_name": name,
                    "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops],
                }
                for rtype, name, ops in resources
            ],
            "validate_only": False,
        }
        for r in conn.request(ApiKeys.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"]:
            if r["error_code"] != errors.NONE:
                raise errors.for_code(r["error_code"])(
                    r.get("error_message") or errors.for_code(r["error_code"]).default_message
                )


def _raise_top_level(response: dict) -> None:
    code = response.get("error_code", errors.NONE)
    if code != errors.NONE:
        raise errors.for_code(code)(response.get("error_message") or errors.for_code(code).default_message)


# ---- actions ------------------------------------------------------------------------------------------------
def generate_assignment(cluster: Cluster, topics_json: str, broker_list: str, out) -> dict[TopicPartition, list[int]]:
    """Kafka's ``generateAssignment``; returns the proposal."""
    try:
        brokers = [int(b) for b in broker_list.split(",")]
    except ValueError:
        raise AdminCommandFailed(f"Invalid broker list: {broker_list}") from None
    duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
    if duplicates:
        raise AdminCommandFailed(f"Broker list contains duplicate entries: {_java_set(duplicates)}")
    topics = parse_topics_data(topics_json)
    dup_topics = sorted({t for t in topics if topics.count(t) > 1})
    if dup_topics:
        raise AdminCommandFailed(f"List of topics to reassign contains duplicate entries: {_java_set(dup_topics)}")
    current = cluster.replica_assignment(topics)
    live = set(cluster.brokers())
    usable = [b for b in brokers if b in live]
    proposed: dict[TopicPartition, list[int]] = {}
    for topic in sorted({t for t, _ in current}):
        parts = {p: r for (t, p), r in current.items() if t == topic}
        rf = len(parts[min(parts)])
        for p, replicas in assign_replicas_to_brokers(usable, len(parts), rf).items():
            proposed[(topic, p)] = replicas
    print(f"Current partition replica assignment\n{format_as_reassignment_json(current)}\n", file=out)
    print(f"Proposed partition reassignment configuration\n{format_as_reassignment_json(proposed)}", file=out)
    return proposed


def _java_set(values: Iterable) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def execute_assignment(
    cluster: Cluster, reassignment_json: str, additional: bool, throttle: int, log_dir_throttle: int, out
) -> None:
    """Kafka's ``executeAssignment``."""
    proposed, log_dirs = parse_execute_assignment(reassignment_json)
    if log_dirs:
        raise AdminCommandFailed("Moving replicas between log directories (AlterReplicaLogDirs) is not supported")
    current_reassignments = cluster.list_reassignments()
    if not additional and current_reassignments:
        raise TerseError(CANNOT_EXECUTE_BECAUSE_OF_EXISTING_MESSAGE)
    live = set(cluster.brokers())
    for replicas in proposed.values():
        for b in replicas:
            if b not in live:
                raise AdminCommandFailed(f"Unknown broker id {b}")
    current = cluster.replica_assignment(t for t, _ in proposed)
    missing = [tp for tp in proposed if tp not in current]
    if missing:
        raise errors.UnknownTopicOrPartitionError(
            "Unable to find partition: " + ", ".join(tp_str(tp) for tp in _sorted(missing))
        )
    print(
        "Current partition replica assignment\n\n"
        f"{format_as_reassignment_json({tp: current[tp] for tp in proposed})}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback",
        file=out,
    )
    if throttle >= 0 or log_dir_throttle >= 0:
        print(YOU_MUST_RUN_VERIFY_PERIODICALLY_MESSAGE, file=out)
        if throttle >= 0:
            moves = proposed_move_map(current_reassignments, proposed, current)
            modify_reassignment_throttle(cluster, moves, throttle, out)
        if log_dir_throttle >= 0:
            print(f"The replica-alter-dir throttle limit was set to {log_dir_throttle} B/s", file=out)
    failed = cluster.alter_reassignments(dict(proposed))
    if failed:
        raise TerseError(
            "Error reassigning partition(s):\n" + "\n".join(f"{tp_str(tp)}: {failed[tp]}" for tp in _sorted(failed))
        )
    print(
        f"Successfully started partition reassignment{'' if len(proposed) == 1 else 's'} for "
        + ",".join(tp_str(tp) for tp in _sorted(proposed)),
        file=out,
    )


def proposed_move_map(
    current_reassignments: dict, proposed: dict[TopicPartition, list[int]], current: dict[TopicPartition, list[int]]
) -> dict[TopicPartition, tuple[set[int], set[int]]]:
    """Kafka's ``calculateProposedMoveMap``: ``{tp: (sources, destinations)}``, ongoing reassignments included."""
    moves: dict[TopicPartition, tuple[set[int], set[int]]] = {}
    for tp, (replicas, adding, _removing) in current_reassignments.items():
        moves[tp] = (set(replicas) - set(adding), set(adding))
    for tp, replicas in proposed.items():
        sources = set(moves[tp][0]) if tp in moves else set(current.get(tp, ()))
        moves[tp] = (sources, set(replicas) - sources)
    return moves


def modify_reassignment_throttle(
    cluster: Cluster, moves: dict[TopicPartition, tuple[set[int], set[int]]], throttle: int, out
) -> None:
    """Kafka's ``modifyReassignmentThrottle``: the topics' throttled replicas (leader: ``partition:source``,
    follower: ``partition:destination``), then both rates on every broker involved."""
    leader: dict[str, set[tuple[int, int]]] = {}
    follower: dict[str, set[tuple[int, int]]] = {}
    for (topic, p), (sources, destinations) in moves.items():
        leader.setdefault(topic, set()).update((p, s) for s in sources)
        follower.setdefault(topic, set()).update((p, d) for d in destinations if d not in sources)
    resources: list[tuple[int, str, list[tuple[str, int, str | None]]]] = []
    for topic in sorted(set(leader) | set(follower)):
        ops: list[tuple[str, int, str | None]] = [
            (LEADER_REPLICAS, SET, ",".join(f"{p}:{b}" for p, b in sorted(leader.get(topic, ())))),
            (FOLLOWER_REPLICAS, SET, ",".join(f"{p}:{b}" for p, b in sorted(follower.get(topic, ())))),
        ]
        resources.append((ConfigResourceType.TOPIC, topic, ops))
    brokers = sorted({b for sources, destinations in moves.values() for b in sources | destinations})
    for b in brokers:
        resources.append(
            (
                ConfigResourceType.BROKER,
                str(b),
                [(LEADER_RATE, SET, str(throttle)), (FOLLOWER_RATE, SET, str(throttle))],
            )
        )
    cluster.incremental_alter_configs(resources)
    print(f"The inter-broker throttle limit was set to {throttle} B/s", file=out)


def clear_all_throttles(cluster: Cluster, targets: list[tuple[TopicPartition, list[int]]], out) -> None:
    """Kafka's ``clearAllThrottles``: the broker-level throttles of every broker, the topic-level ones of the
    targets' topics."""
    brokers = set(cluster.brokers())
    for _, replicas in targets:
        brokers.update(replicas)
    print(
        f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} {_ints(sorted(brokers))}",
        file=out,
    )
    cluster.incremental_alter_configs(
        [
            (ConfigResourceType.BROKER, str(b), [(k, DELETE, None) for k in BROKER_LEVEL_THROTTLES])
            for b in sorted(brokers)
        ]
    )
    topics = sorted({tp[0] for tp, _ in targets})
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} {','.join(topics)}", file=out)
    cluster.incremental_alter_configs(
        [(ConfigResourceType.TOPIC, t, [(k, DELETE, None) for k in TOPIC_LEVEL_THROTTLES]) for t in topics]
    )


def verify_assignment(cluster: Cluster, reassignment_json: str, preserve_throttles: bool, out) -> bool:
    """Kafka's ``verifyAssignment``; returns whether a reassignment is still in progress."""
    targets, _ = parse_reassignment_data(reassignment_json)
    ongoing = cluster.list_reassignments()
    current = cluster.replica_assignment({tp[0] for tp, _ in targets if tp not in ongoing})
    lines = ["Status of partition reassignment:"]
    states: dict[TopicPartition, list[int] | None] = {}
    for tp, _ in targets:
        if tp in ongoing:
            states[tp] = None
        elif tp not in current:
            raise errors.UnknownTopicOrPartitionError(f"Unable to find partition: {tp_str(tp)}")
        else:
            states[tp] = current[tp]
    for tp in _sorted(states):
        target = dict(targets)[tp]
        now = states[tp]
        if now is None:
            lines.append(f"Reassignment of partition {tp_str(tp)} is still in progress.")
        elif now == target:
            lines.append(f"Reassignment of partition {tp_str(tp)} is completed.")
        else:
            lines.append(
                f"There is no active reassignment of partition {tp_str(tp)}, but replica set is {_ints(now)} rather "
                f"than {_ints(target)}."
            )
    print("\n".join(lines), file=out)
    print("", file=out)  # the (empty) replica log dir moves
    in_progress = bool(ongoing)
    if not in_progress and not preserve_throttles:
        clear_all_throttles(cluster, targets, out)
    return in_progress


def cancel_assignment(cluster: Cluster, reassignment_json: str, preserve_throttles: bool, out) -> None:
    """Kafka's ``cancelAssignment``."""
    targets, _ = parse_reassignment_data(reassignment_json)
    parts = {tp for tp, _ in targets}
    active = {tp for tp, (_, adding, removing) in cluster.list_reassignments(parts).items() if adding or removing}
    if active:
        failed = cluster.alter_reassignments(dict.fromkeys(active))
        if failed:
            raise TerseError(
                f"Error cancelling partition reassignment{'' if len(failed) == 1 else 's'} for:\n"
                + "\n".join(f"{tp_str(tp)}: {failed[tp]}" for tp in _sorted(failed))
            )
        print(
            f"Successfully cancelled partition reassignment{'' if len(active) == 1 else 's'} for: "
            + ",".join(tp_str(tp) for tp in _sorted(active)),
            file=out,
        )
    else:
        print("None of the specified partition reassignments are active.", file=out)
    print("None of the specified partition moves are active.", end="", file=out)
    if not preserve_throttles:
        print("", file=out)
        clear_all_throttles(cluster, targets, out)


def list_reassignments(cluster: Cluster, out) -> None:
    """Kafka's ``curReassignmentsToString``."""
    current = cluster.list_reassignments()
    lines = []
    for tp in _sorted(current):
        replicas, adding, removing = current[tp]
        line = f"{tp_str(tp)}: replicas: {_ints(replicas)}."
        if adding:
            line += f" adding: {_ints(adding)}."
        if removing:
            line += f" removing: {_ints(removing)}."
        lines.append(line)
    print(
        "Current partition reassignments:\n" + "\n".join(lines) if lines else "No partition reassignments found.",
        file=out,
    )


# ---- options ------------------------------------------------------------------------------------------------
ACTIONS = ("generate", "execute", "verify", "cancel", "list")
REQUIRED = {
    "verify": ("reassignment_json_file",),
    "generate": ("topics_to_move_json_file", "broker_list"),
    "execute": ("reassignment_json_file",),
    "cancel": ("reassignment_json_file",),
    "list": (),
}
PERMITTED = {
    "verify": ("bootstrap_server", "command_config", "preserve_throttles"),
    "generate": ("bootstrap_server", "broker_list", "command_config", "disable_rack_aware"),
    "execute": (
        "additional",
        "bootstrap_server",
        "command_config",
        "throttle",
        "replica_alter_log_dirs_throttle",
        "timeout",
    ),
    "cancel": ("bootstrap_server", "command_config", "preserve_throttles", "timeout"),
    "list": ("bootstrap_server", "command_config"),
}
DEFAULTS = {"throttle": -1, "replica_alter_log_dirs_throttle": -1, "timeout": 10000}


def _parser() -> ToolArgumentParser:
    p = ToolArgumentParser(prog="kafka-reassign-partitions", description=HELP_TEXT)
    p.add_argument("--bootstrap-server", help="REQUIRED: the server(s) to use for bootstrapping.")
    p.add_argument("--command-config", help="Property file containing configs to be passed to Admin Client.")
    p.add_argument("--generate", action="store_true", help="Generate a candidate partition reassignment configuration.")
    p.add_argument(
        "--execute",
        action="store_true",
        help="Kick off the reassignment as specified by the --reassignment-json-file option.",
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="Verify if the reassignment completed as specified by the --reassignment-json-file option.",
    )
    p.add_argument("--cancel", action="store_true", help="Cancel an active reassignment.")
    p.add_argument("--list", action="store_true", help="List all active partition reassignments.")
    p.add_argument("--reassignment-json-file", help="The JSON file with the partition reassignment configuration.")
    p.add_argument(
        "--topics-to-move-json-file",
        help="Generate a reassignment configuration to move the partitions of the specified topics.",
    )
    p.add_argument(
        "--broker-list", help='The list of brokers to which the partitions need to be reassigned in the form "0,1,2".'
    )
    p.add_argument("--disable-rack-aware", action="store_true", help="Disable rack aware replica assignment.")
    p.add_argument(
        "--throttle",
        type=int,
        default=None,
        help="The movement of partitions between brokers will be throttled to this value (bytes/sec).",
    )
    p.add_argument(
        "--replica-alter-log-dirs-throttle",
        type=int,
        default=None,
        help="The movement of replicas between log directories on the same broker will be throttled to this value "
        "(bytes/sec).",
    )
    p.add_argument(
        "--timeout",
        type=int,
        default=None,
        help="The maximum time in ms to wait for log directory replica assignment to begin.",
    )
    p.add_argument(
        "--additional", action="store_true", help="Execute this reassignment in addition to any other ongoing ones."
    )
    p.add_argument("--preserve-throttles", action="store_true", help="Do not modify broker or topic throttles.")
    add_version_option(p)
    return p


def _usage_error(parser: ToolArgumentParser, message: str, err) -> int:
    print(message, file=err)
    parser.print_usage(err)
    return 1


def _given(args, name: str) -> bool:
    value = getattr(args, name)
    return value not in (None, False)


def main(argv: list[str] | None = None, out=sys.stdout, err=sys.stderr) -> int:
    if argv is None:
        configure_tool_logging()
    parser = _parser()
    args = parser.parse_args(argv)
    actions = [a for a in ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        return _usage_error(
            parser, "Command must include exactly one action: " + ", ".join(f"--{a}" for a in ACTIONS), err
        )
    action = actions[0]
    if not args.bootstrap_server:
        return _usage_error(parser, "Please specify either --bootstrap-server or --bootstrap-controller", err)
    for name in REQUIRED[action]:
        if not _given(args, name):
            return _usage_error(parser, f'Missing required argument "[{name.replace("_", "-")}]"', err)
    for name in vars(args):
        if name in ACTIONS or not _given(args, name):
            continue
        if name not in REQUIRED[action] and name not in PERMITTED[action]:
            return _usage_error(
                parser, f'Option "[{name.replace("_", "-")}]" can\'t be used with action "[{action}]"', err
            )
    for name, default in DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    if args.command_config is not None and not os.path.exists(args.command_config):
        print(f"Properties file {args.command_config} does not exists!", file=out)
        return 1
    try:
        cluster = Cluster(args.bootstrap_server)
    except OSError as e:
        print(f"Error: {e}", file=out)
        return 1
    try:
        if action == "verify":
            verify_assignment(cluster, _read(args.reassignment_json_file), args.preserve_throttles, out)
        elif action == "generate":
            generate_assignment(cluster, _read(args.topics_to_move_json_file), args.broker_list, out)
        elif action == "execute":
            execute_assignment(
                cluster,
                _read(args.reassignment_json_file),
                args.additional,
                args.throttle,
                args.replica_alter_log_dirs_throttle,
                out,
            )
        elif action == "cancel":
            cancel_assignment(cluster, _read(args.reassignment_json_file), args.preserve_throttles, out)
        else:
            list_reassignments(cluster, out)
    except TerseError as e:
        print(str(e), file=out)
        return 1
    except (AdminCommandFailed, errors.KafkaError, OSError) as e:
        print(f"Error: {e}", file=out)
        return 1
    finally:
        cluster.close()
    return 0


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise AdminCommandFailed(str(e)) from None


if __name__ == "__main__":
    configure_tool_logging()
    sys.exit(main())
