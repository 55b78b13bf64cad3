"""kafka-get-offsets: partitions' offsets for a time (Kafka's ``org.apache.kafka.tools.GetOffsetShell``).

    bin/kafka-get-offsets --bootstrap-server HOST:PORT [--topic REGEX] [--partitions 0,1]
        [--topic-partitions t1:1,t2:0-3,t3,t4:5-,:-3] [--time -1|latest|-2|earliest|-3|max-timestamp|-4|earliest-local|
        -5|latest-tiered|<ms>] [--exclude-internal-topics]

Prints ``topic:partition:offset`` per partition, sorted by topic then partition; a partition without an offset for
that time (a timestamp after the last record) is left out, one answering an error is skipped with
``Skip getting offsets for topic-partition T-P due to error: ...`` on stderr. Errors: ``Error occurred: <message>``
on stderr, exit status 1. Requests: Metadata v12 to the bootstrap broker, ListOffsets v9 to each partition's leader.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.metadata.topic_names import INTERNAL_TOPICS
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.tools.command_line_utils import ToolArgumentParser, add_version_option, configure_tool_logging

LIST_OFFSETS_VERSION = 9
NAMED_TIMES = {
    "latest": -1,
    "earliest": -2,
    "max-timestamp": -3,
    "earliest-local": -4,
    "latest-tiered": -5,
}
TOPIC_PARTITION_PATTERN = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")
MAX_INT = 2**31 - 1


class TerseError(Exception):
    pass


def parse_time(text: str) -> int:
    if text in NAMED_TIMES:
        return NAMED_TIMES[text]
    try:
        return int(text)
    except ValueError:
        raise TerseError(
            f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest / -3 or max-timestamp / "
            "-4 or earliest-local / -5 or latest-tiered, or a specified long format timestamp"
        ) from None


def _include_list(regex: str):
    """Kafka's IncludeList: a regex matching whole names; ``,`` separates alternatives, quotes are dropped."""
    pattern = re.compile(regex.strip().strip("'\"").replace(",", "|"))
    return lambda name: pattern.fullmatch(name) is not None


def _partition_equals(n: int) -> Callable[[int], bool]:
    return lambda p: p == n


def _partition_in(low: int, high: int) -> Callable[[int], bool]:
    """``low <= p < high``."""
    return lambda p: low <= p < high


def topic_partition_filter(args):
    """``(topic_allowed(name), partition_allowed(name, p))`` from ``--topic-partitions`` or ``--topic`` and
    ``--partitions`` (Kafka's TopicPartitionFilter)."""
    if args.topic_partitions is not None:
        rules = []
        for spec in args.topic_partitions.split(","):
            m = TOPIC_PARTITION_PATTERN.fullmatch(spec)
            if m is None:
                raise TerseError(f"Invalid rule specification: {spec}")
            topic, single, lo, hi = (g if g else None for g in m.groups())
            allowed = _include_list(topic if topic is not None else ".*")
            if single is not None:
                rules.append((allowed, _partition_equals(int(single))))
            else:
                low, high = int(lo) if lo else 0, int(hi) if hi else MAX_INT
                rules.append((allowed, _partition_in(low, high)))
        return (
            lambda name: any(t(name) for t, _ in rules),
            lambda name, p: any(t(name) and part(p) for t, part in rules),
        )
    wanted: set[int] = set()
    if args.partitions:
        try:
            wanted = {int(p) for p in args.partitions.split(",")}
        except ValueError:
            raise TerseError(
                f"--partitions expects a comma separated list of numeric partition ids, but received: {args.partitions}"
            ) from None
    allowed = _include_list(args.topic if args.topic is not None else ".*")
    return allowed, lambda name, p: allowed(name) and (not wanted or p in wanted)


def fetch_offsets(args) -> dict[tuple[str, int], int]:
    if args.topic_partitions is not None and (args.topic is not None or args.partitions is not None):
        raise TerseError("--topic-partitions cannot be used with --topic or --partitions")
    timestamp = parse_time(args.time)
    topic_allowed, partition_allowed = topic_partition_filter(args)
    with BrokerConnection.to(args.bootstrap_server, client_id="GetOffsetShell") as conn:
        metadata = conn.request(
            ApiKeys.METADATA,
            12,
            {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
        )
        brokers = {b["node_id"]: (b["host"], b["port"]) for b in metadata["brokers"]}
        by_leader: dict[int, dict[str, list[int]]] = {}
        matched = 0
        for t in metadata["topics"]:
            name = t["name"]
            if t["error_code"] != errors.NONE or not topic_allowed(name):
                continue
            if args.exclude_internal_topics and (t.get("is_internal") or name in INTERNAL_TOPICS):
                continue
            for p in t["partitions"]:
                if partition_allowed(name, p["partition_index"]):
                    matched += 1
                    by_leader.setdefault(p["leader_id"], {}).setdefault(name, []).append(p["partition_index"])
        if not matched:
            raise TerseError("Could not match any topic-partitions with the specified filters")
        offsets: dict[tuple[str, int], int] = {}
        for leader, topics in by_leader.items():
            if leader not in brokers:
                for name, parts in topics.items():
                    for p in parts:
                        print(
                            f"Skip getting offsets for topic-partition {name}-{p} due to error: "
                            "org.apache.kafka.common.errors.LeaderNotAvailableException: "
                            "There is no leader for this topic-partition as we are in the middle of a leadership "
                            "election.",
                            file=sys.stderr,
                        )
                continue
            host, port = brokers[leader]
            leader_conn = conn if f"{host}:{port}" == conn.node else BrokerConnection(host, port, "GetOffsetShell")
            try:
                response = leader_conn.request(
                    ApiKeys.LIST_OFFSETS,
                    LIST_OFFSETS_VERSION,
                    {
                        "replica_id": -1,
                        "isolation_level": 0,
                        "topics": [
                            {
                                "name": name,
                                "partitions": [
                                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                                    for p in parts
                                ],
                            }
                            for name, parts in topics.items()
                        ],
                    },
                )
            finally:
                if leader_conn is not conn:
                    leader_conn.close()
            for t in response["topics"]:
                for p in t["partitions"]:
                    code = p["error_code"]
                    if code != errors.NONE:
                        error = errors.for_code(code)
                        print(
                            f"Skip getting offsets for topic-partition {t['name']}-{p['partition_index']} due to "
                            f"error: {error.__name__}: {error.default_message}",
                            file=sys.stderr,
                        )
                    elif p["offset"] != -1:
                        offsets[(t["name"], p["partition_index"])] = p["offset"]
        return offsets


def _parser() -> argparse.ArgumentParser:
    p = ToolArgumentParser(
        prog="kafka-get-offsets", description="An interactive shell for getting topic-partition offsets."
    )
    p.add_argument(
        "--bootstrap-server",
        required=True,
        help="REQUIRED. The server(s) to connect to in the form HOST1:PORT1,HOST2:PORT2.",
    )
    p.add_argument(
        "--topic-partitions",
        help="Comma separated list of topic-partition patterns to get the offsets for, e.g. "
        "topic1:1,topic2:0-3,topic3,topic4:5-,topic5:-3",
    )
    p.add_argument("--topic", help="The topic to get the offsets for. It also accepts a regular expression.")
    p.add_argument("--partitions", help="Comma separated list of partition ids to get the offsets for.")
    p.add_argument(
        "--time",
        default="latest",
        help="timestamp of the offsets before that: <timestamp> / -1 or latest / -2 or earliest / "
        "-3 or max-timestamp / -4 or earliest-local / -5 or latest-tiered",
    )
    p.add_argument("--command-config", help="Property file containing configs to be passed to Admin Client.")
    p.add_argument(
        "--exclude-internal-topics",
        action="store_true",
        help="By default, internal topics are included. If specified, internal topics are excluded.",
    )
    add_version_option(p)
    return p


def main(argv: list[str] | None = None, out=sys.stdout) -> int:
    if argv is None:  # run as the command (bin/ script, console script): the tools' logging
        configure_tool_logging()
    args = _parser().parse_args(argv)
    try:
        offsets = fetch_offsets(args)
    except (TerseError, errors.KafkaError, OSError, ValueError, re.error) as e:
        print(f"Error occurred: {e}", file=sys.stderr)
        return 1
    for (topic, partition), offset in sorted(offsets.items()):
        print(f"{topic}:{partition}:{offset}", file=out)
    return 0


if __name__ == "__main__":
    configure_tool_logging()
    sys.exit(main())
