"""kafka-topics: create, delete, list and describe topics (``org.apache.kafka.tools.TopicCommand``).

    bin/kafka-topics --bootstrap-server HOST:PORT --create --topic T [--partitions N]
        [--replication-factor R] [--config k=v ...] [--if-not-exists]
    bin/kafka-topics --bootstrap-server HOST:PORT --delete --topic T [--if-exists]
    bin/kafka-topics --bootstrap-server HOST:PORT --list [--exclude-internal]
    bin/kafka-topics --bootstrap-server HOST:PORT --describe [--topic T] [--exclude-internal]
        [--under-replicated-partitions | --under-min-isr-partitions | --at-min-isr-partitions |
         --unavailable-partitions | --topics-with-overrides]
    bin/kafka-topics --bootstrap-server HOST:PORT --alter --topic T --partitions N [--replica-assignment 1:2,2:3]
        [--if-exists]

Output as Kafka prints it: ``Created topic T.``; one name per line for ``--list``; for ``--describe``
a topic line ``Topic: T\\tTopicId: ID\\tPartitionCount: N\\tReplicationFactor: R\\tConfigs: k=v,...``
(dynamic topic configs only) and per partition
``\\tTopic: T\\tPartition: P\\tLeader: L\\tReplicas: 1,2\\tIsr: 1,2\\tElr: \\tLastKnownElr: ``.
The report options print, as Kafka's, only the partition lines that match (no topic lines): fewer in-sync replicas
than replicas, fewer than / exactly ``min.insync.replicas``, a leader that is missing or not a live broker;
``--topics-with-overrides`` prints only the topic lines of topics with dynamic configs. ``--alter`` adds partitions
(CreatePartitions) and prints nothing.
Errors: ``Error while executing topic command : <message>`` on stderr, exit status 1.
Requests (CreateTopics v7, DeleteTopics v6, CreatePartitions v3, Metadata v12, DescribeConfigs v4; for
``--describe`` DescribeTopicPartitions v0 page by page where the broker offers it, else Metadata) go to the
bootstrap broker.
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
import uuid

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.config.topic_config import MIN_INSYNC_REPLICAS_CONFIG
from pykbroker.metadata.topic_names import INTERNAL_TOPICS
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.config_resource import ConfigResourceType
from pykbroker.tools.command_line_utils import (
    ToolArgumentParser,
    add_version_option,
    configure_tool_logging,
    parse_key_values,
)

DYNAMIC_TOPIC_CONFIG = 1


class TopicCommandError(Exception):
    pass


def _uuid_string(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def _metadata(conn: BrokerConnection, topics: list[str] | None) -> dict:
    return conn.request(
        ApiKeys.METADATA,
        12,
        {
            "topics": None if topics is None else [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )


def create(conn, args, out) -> None:
    configs = parse_key_values(args.config)
    response = conn.request(
        ApiKeys.CREATE_TOPICS,
        7,
        {
            "topics": [
                {
                    "name": args.topic,
                    "num_partitions": args.partitions if args.partitions is not None else -1,
                    "replication_factor": args.replication_factor if args.replication_factor is not None else -1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in configs.items()],
                }
            ],
            "timeout_ms": 30000,
            "validate_only": False,
        },
    )
    (result,) = response["topics"]
    code = result["error_code"]
    if code == errors.TOPIC_ALREADY_EXISTS and args.if_not_exists:
        return
    if code != errors.NONE:
        raise TopicCommandError(result.get("error_message") or errors.for_code(code).default_message)
    print(f"Created topic {args.topic}.", file=out)


def delete(conn, args, out) -> None:
    names = _matching(conn, args.topic, exclude_internal=False)
    if not names:
        if args.if_exists:
            return
        raise TopicCommandError(f"Topic '{args.topic}' does not exist as expected")
    response = conn.request(
        ApiKeys.DELETE_TOPICS,
        6,
        {"topics": [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names], "timeout_ms": 30000},
    )
    for r in response["responses"]:
        if r["error_code"] != errors.NONE:
            raise TopicCommandError(r.get("error_message") or errors.for_code(r["error_code"]).default_message)


def _matching(conn, topic: str | None, exclude_internal: bool) -> list[str]:
    names = sorted(t["name"] for t in _metadata(conn, None)["topics"] if t["error_code"] == errors.NONE)
    if exclude_internal:
        names = [n for n in names if n not in INTERNAL_TOPICS]
    if topic is None:
        return names
    pattern = re.compile(topic)
    return [n for n in names if pattern.fullmatch(n)]


def list_topics(conn, args, out) -> None:
    for name in _matching(conn, args.topic, args.exclude_internal):
        print(name, file=out)


REPORT_OPTIONS = (
    "under_replicated_partitions",
    "under_min_isr_partitions",
    "at_min_isr_partitions",
    "unavailable_partitions",
)


def _partition_reported(args, p: dict, min_isr: int, live: set[int]) -> bool:
    """Kafka's DescribeOptions.shouldPrintTopicPartition for one report option (all partitions without one)."""
    if not any(getattr(args, o) for o in REPORT_OPTIONS):
        return True
    isr, replicas = len(p["isr_nodes"]), len(p["replica_nodes"])
    return (
        (args.under_replicated_partitions and isr < replicas)
        or (args.under_min_isr_partitions and isr < min_isr)
        or (args.at_min_isr_partitions and isr == min_isr)
        or (args.unavailable_partitions and (p["leader_id"] < 0 or p["leader_id"] not in live))
    )


def _supports(conn: BrokerConnection, api_key: int) -> bool:
    """Does the broker advertise ``api_key`` (ApiVersions)?"""
    response = conn.request(
        ApiKeys.API_VERSIONS, 3, {"client_software_name": "kafka-topics", "client_software_version": "1"}
    )
    return any(k["api_key"] == api_key for k in response["api_keys"])


def _describe_topic_partitions(conn: BrokerConnection, names: list[str]) -> dict[str, dict]:
    """``{name: topic}`` from DescribeTopicPartitions (KIP-966), following ``next_cursor`` page by page as
    Kafka's Admin.describeTopics does (2,000 partitions a page, its ``partitionSizeLimitPerResponse``)."""
    topics: dict[str, dict] = {}
    cursor = None
    while True:
        response = conn.request(
            ApiKeys.DESCRIBE_TOPIC_PARTITIONS,
            0,
            {"topics": [{"name": n} for n in names], "response_partition_limit": 2000, "cursor": cursor},
        )
        for t in response["topics"]:
            if t["error_code"] != errors.NONE:
                raise TopicCommandError(errors.for_code(t["error_code"]).default_message)
            if t["name"] in topics:
                topics[t["name"]]["partitions"].extend(t["partitions"])
            else:
                topics[t["name"]] = t
        cursor = response["next_cursor"]
        if cursor is None:
            return topics
        names = [n for n in names if n >= cursor["topic_name"]]


def describe(conn, args, out) -> None:
    names = _matching(conn, args.topic, args.exclude_internal)
    if args.topic is not None and not names and not args.if_exists:
        raise TopicCommandError(f"Topic '{args.topic}' does not exist as expected")
    if not names:
        return
    if _supports(conn, ApiKeys.DESCRIBE_TOPIC_PARTITIONS):
        meta = _metadata(conn, [])
        metadata = _describe_topic_partitions(conn, names)
    else:
        meta = _metadata(conn, names)
        metadata = {t["name"]: t for t in meta["topics"]}
    live = {b["node_id"] for b in meta["brokers"]}
    configs = conn.request(
        ApiKeys.DESCRIBE_CONFIGS,
        4,
        {
            "resources": [
                {"resource_type": ConfigResourceType.TOPIC, "resource_name": n, "configuration_keys": None}
                for n in names
            ],
            "include_synonyms": False,
            "include_documentation": False,
        },
    )
    dynamic = {
        r["resource_name"]: [
            f"{c['name']}={c['value']}" for c in r["configs"] if c["config_source"] == DYNAMIC_TOPIC_CONFIG
        ]
        for r in configs["results"]
    }
    min_isr = {
        r["resource_name"]: int(
            next((c["value"] for c in r["configs"] if c["name"] == MIN_INSYNC_REPLICAS_CONFIG), 1) or 1
        )
        for r in configs["results"]
    }
    describe_configs = not any(getattr(args, o) for o in REPORT_OPTIONS)
    describe_partitions = not args.topics_with_overrides
    for name in names:
        t = metadata[name]
        partitions = sorted(t["partitions"], key=lambda p: p["partition_index"])
        rf = len(partitions[0]["replica_nodes"]) if partitions else 0
        if describe_configs and (not args.topics_with_overrides or dynamic.get(name)):
            print(
                f"Topic: {name}\tTopicId: {_uuid_string(t['topic_id'])}\tPartitionCount: {len(partitions)}\t"
                f"ReplicationFactor: {rf}\tConfigs: {','.join(dynamic.get(name, []))}",
                file=out,
            )
        if not describe_partitions:
            continue
        for p in partitions:
            if not _partition_reported(args, p, min_isr.get(name, 1), live):
                continue
            leader = p["leader_id"] if p["leader_id"] >= 0 else "none"
            print(
                f"\tTopic: {name}\tPartition: {p['partition_index']}\tLeader: {leader}\t"
                f"Replicas: {','.join(map(str, p['replica_nodes']))}\tIsr: {','.join(map(str, p['isr_nodes']))}\t"
                f"Elr: {','.join(map(str, p.get('eligible_leader_replicas') or []))}\t"
                f"LastKnownElr: {','.join(map(str, p.get('last_known_elr') or []))}",
                file=out,
            )


def alter(conn, args, out) -> None:
    names = _matching(conn, args.topic, exclude_internal=False)
    if not names:
        if args.if_exists:
            return
        raise TopicCommandError(f"Topic '{args.topic}' does not exist as expected")
    internal = [n for n in names if n in INTERNAL_TOPICS]
    if internal:
        raise TopicCommandError(
            f"The number of partitions for the internal topics {', '.join(internal)} cannot be changed."
        )
    assignments = None
    if args.replica_assignment:
        assignments = [
            {"broker_ids": [int(b) for b in part.split(":")]} for part in args.replica_assignment.split(",") if part
        ]
    response = conn.request(
        ApiKeys.CREATE_PARTITIONS,
        3,
        {
            "topics": [{"name": n, "count": args.partitions, "assignments": assignments} for n in names],
            "timeout_ms": 30000,
            "validate_only": False,
        },
    )
    for r in response["results"]:
        if r["error_code"] != errors.NONE:
            raise TopicCommandError(r.get("error_message") or errors.for_code(r["error_code"]).default_message)


def _parser() -> argparse.ArgumentParser:
    p = ToolArgumentParser(prog="kafka-topics", description="Create, delete, describe, or change a topic.")
    p.add_argument("--bootstrap-server", required=True, help="REQUIRED: The Kafka server to connect to.")
    p.add_argument("--command-config", help="Property file containing configs to be passed to Admin Client.")
    action = p.add_mutually_exclusive_group(required=True)
    for a in ("create", "delete", "list", "describe", "alter"):
        action.add_argument(f"--{a}", action="store_true")
    p.add_argument("--topic")
    p.add_argument("--partitions", type=int)
    p.add_argument("--replication-factor", type=int)
    p.add_argument("--config", action="append", help="A topic configuration override: key=value")
    p.add_argument("--if-not-exists", action="store_true")
    p.add_argument("--if-exists", action="store_true")
    p.add_argument("--exclude-internal", action="store_true")
    p.add_argument("--replica-assignment", help="Broker ids per new partition: 1:2,2:3 (with --alter)")
    for o in REPORT_OPTIONS + ("topics_with_overrides",):
        p.add_argument("--" + o.replace("_", "-"), action="store_true")
    add_version_option(p)
    return p


def main(argv: list[str] | None = None, out=sys.stdout) -> int:
    if argv is None:  # run as the command (bin/ script, console script): the tools' logging
        configure_tool_logging()
    args = _parser().parse_args(argv)
    if (args.create or args.delete or args.alter) and not args.topic:
        print('Missing required argument "[topic]"', file=sys.stderr)
        return 1
    if args.alter:
        if args.config:
            print(
                'Option combination "[bootstrap-server],[config]" can\'t be used with option "[alter]": '
                "use kafka-configs to add, remove or update topic configs",
                file=sys.stderr,
            )
            return 1
        if args.replication_factor is not None:
            print('Option "[replication-factor]" can\'t be used with option "[alter]"', file=sys.stderr)
            return 1
        if args.partitions is None:
            print('Missing required argument "[partitions]"', file=sys.stderr)
            return 1
    reports = [o for o in REPORT_OPTIONS + ("topics_with_overrides",) if getattr(args, o)]
    if len(reports) > 1:
        flag = "[" + reports[0].replace("_", "-") + "]"
        print(f'Option "{flag}" can\'t be used with option "[{reports[1].replace("_", "-")}]"', file=sys.stderr)
        return 1
    if reports and not args.describe:
        print(f'Option "[{reports[0].replace("_", "-")}]" can only be used with option "[describe]"', file=sys.stderr)
        return 1
    try:
        with BrokerConnection.to(args.bootstrap_server, client_id="kafka-topics") as conn:
            action = (
                create
                if args.create
                else delete
                if args.delete
                else alter
                if args.alter
                else list_topics
                if args.list
                else describe
            )
            action(conn, args, out)
    except (TopicCommandError, errors.KafkaError, OSError, ValueError) as e:
        print(f"Error while executing topic command : {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    configure_tool_logging()
    sys.exit(main())
