"""kafka-log-dirs: what the brokers' log directories hold (``org.apache.kafka.tools.LogDirsCommand``).

    bin/kafka-log-dirs --bootstrap-server HOST:PORT --describe [--topic-list t1,t2] [--broker-list 1,2]

Asks each broker (all of them, from Metadata, or those of ``--broker-list``) with DescribeLogDirs and
prints, as Kafka does::

    Querying brokers for log directories information
    Received log directory information from brokers 1
    {"brokers":[{"broker":1,"logDirs":[{"partitions":[{"partition":"t-0","size":123,...}],...}]}],"version":1}

The JSON is Kafka's: the objects are Java ``HashMap``s serialised by Jackson, so their keys (and the
log dirs and partitions, also gathered in HashMaps) come in HashMap iteration order, which
:func:`java_hashmap_order` reproduces. ``--topic-list`` filters the partitions printed. A broker of
``--broker-list`` that is not in the cluster is an error (exit status 1).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.tools.command_line_utils import (
    ToolArgumentParser,
    add_version_option,
    configure_tool_logging,
    error_line,
)

DESCRIBE_LOG_DIRS_VERSION = 4
METADATA_VERSION = 12


class TerseError(Exception):
    """Kafka's TerseException: the message alone is printed, exit status 1."""


# -- Java HashMap iteration order ---------------------------------------------------------------------------


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def java_string_hash(s: str) -> int:
    """``String.hashCode`` (over UTF-16 code units)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = _int32(31 * h + int.from_bytes(data[i : i + 2], "big"))
    return h


def java_hash(key) -> int:
    if isinstance(key, str):
        return java_string_hash(key)
    if isinstance(key, bool):
        return 1231 if key else 1237
    if isinstance(key, int):
        return _int32(key)
    if isinstance(key, tuple):  # TopicPartition(topic, partition).hashCode
        topic, partition = key
        return _int32(31 * _int32(31 + partition) + java_string_hash(topic))
    raise TypeError(f"no Java hash for {key!r}")


def java_hashmap_order(keys: Iterable, hash_of: Callable = java_hash) -> list:
    """The iteration order of a ``new HashMap<>()`` that had ``keys`` put in this order (buckets by spread
    hash over the table size after resizes, insertion order within a bucket)."""
    keys = list(dict.fromkeys(keys))
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(k) -> int:
        h = hash_of(k) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(keys, key=bucket)  # stable: insertion order within a bucket


def _java_map(entries: dict) -> dict:
    return {k: entries[k] for k in java_hashmap_order(entries)}


# -- the command ---------------------------------------------------------------------------------------------


def _error_class(code: int) -> str:
    cls = errors.for_code(code)
    name = cls.__name__[: -len("Error")] if cls.__name__.endswith("Error") else cls.__name__
    if not name.endswith("Exception"):
        name += "Exception"
    return f"org.apache.kafka.common.errors.{name}"


def cluster_brokers(bootstrap: str) -> dict[int, str]:
    with BrokerConnection.to(bootstrap, client_id="kafka-log-dirs") as conn:
        metadata = conn.request(
            ApiKeys.METADATA,
            METADATA_VERSION,
            {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
        )
    return {b["node_id"]: f"{b['host']}:{b['port']}" for b in metadata["brokers"]}


def describe_log_dirs(address: str) -> list[dict]:
    with BrokerConnection.to(address, client_id="kafka-log-dirs") as conn:
        response = conn.request(ApiKeys.DESCRIBE_LOG_DIRS, DESCRIBE_LOG_DIRS_VERSION, {"topics": None})
    if response["error_code"] != errors.NONE:
        raise errors.for_code(response["error_code"])()
    return response["results"]


def format_as_json(by_broker: dict[int, list[dict]], topics: set[str]) -> str:
    brokers = []
    for broker in java_hashmap_order(by_broker):
        log_dirs = {}
        for result in by_broker[broker]:
            replicas = {}
            for t in result["topics"]:
                for p in t["partitions"]:
                    replicas[(t["name"], p["partition_index"])] = p
            partitions = [
                _java_map(
                    {
                        "partition": f"{topic}-{partition}",
                        "size": info["partition_size"],
                        "offsetLag": info["offset_lag"],
                        "isFuture": info["is_future_key"],
                    }
                )
                for (topic, partition), info in ((tp, replicas[tp]) for tp in java_hashmap_order(replicas))
                if not topics or topic in topics
            ]
            error = None if result["error_code"] == errors.NONE else _error_class(result["error_code"])
            log_dirs[result["log_dir"]] = {"logDir": result["log_dir"], "error": error, "partitions": partitions}
        brokers.append(
            _java_map({"broker": broker, "logDirs": [_java_map(log_dirs[d]) for d in java_hashmap_order(log_dirs)]})
        )
    return json.dumps(_java_map({"version": 1, "brokers": brokers}), separators=(",", ":"))


def _int_set(text: str | None) -> list[int]:
    if not text:
        return []
    return sorted({int(x.strip()) for x in text.split(",") if x.strip()})


def execute(bootstrap: str, topic_list: str | None, broker_list: str | None, out) -> None:
    topics = {t.strip() for t in (topic_list or "").split(",") if t.strip()}
    brokers = cluster_brokers(bootstrap)
    requested = _int_set(broker_list)
    missing = [b for b in requested if b not in brokers]
    if missing:
        raise TerseError(
            "ERROR: The given brokers do not exist from --broker-list: "
            f"{','.join(map(str, missing))}. Current existent brokers: {','.join(map(str, sorted(brokers)))}"
        )
    chosen = requested or sorted(brokers)
    print("Querying brokers for log directories information", file=out)
    by_broker = {b: describe_log_dirs(brokers[b]) for b in chosen}
    print(f"Received log directory information from brokers {','.join(map(str, chosen))}", file=out)
    print(format_as_json(by_broker, topics), file=out)


def main(argv: list[str] | None = None, out=sys.stdout) -> int:
    if argv is None:  # run as the command (bin/ script, console script): the tools' logging
        configure_tool_logging()
    parser = ToolArgumentParser(
        prog="kafka-log-dirs",
        description="This tool helps to query log directory usage on the specified brokers.",
    )
    parser.add_argument("--bootstrap-server", required=True, help="REQUIRED: the server(s) to use for bootstrapping")
    parser.add_argument("--command-config", help="Property file containing configs to be passed to Admin Client.")
    parser.add_argument(
        "--describe", action="store_true", help="Describe the specified log directories on the specified brokers."
    )
    parser.add_argument(
        "--topic-list",
        help=(
            'The list of topics to be queried in the form "topic1,topic2,topic3". '
            "All topics will be queried if no topic list is specified"
        ),
    )
    parser.add_argument(
        "--broker-list",
        help=(
            'The list of brokers to be queried in the form "0,1,2". '
            "All brokers in the cluster will be queried if no broker list is specified"
        ),
    )
    add_version_option(parser)
    args = parser.parse_args(argv)
    if not args.describe:
        parser.error("Command must include exactly one action: --describe")
    try:
        _int_set(args.broker_list)
    except ValueError:
        parser.error(f"Invalid --broker-list: {args.broker_list}")
    try:
        execute(args.bootstrap_server, args.topic_list, args.broker_list, out)
    except TerseError as e:
        print(e, file=sys.stderr)
        return 1
    except (OSError, errors.KafkaError) as e:
        print(f"Error while querying log directories: {error_line(e)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    configure_tool_logging()
    sys.exit(main())
