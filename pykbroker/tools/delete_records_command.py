"""kafka-delete-records: delete records below given offsets (``org.apache.kafka.tools.DeleteRecordsCommand``).

    bin/kafka-delete-records --bootstrap-server HOST:PORT --offset-json-file offsets.json

``offsets.json`` is Kafka's format: ``{"partitions": [{"topic": "foo", "partition": 1, "offset": 1}],
"version": 1}`` (offset -1 = up to the high watermark). Each partition's DeleteRecords request goes to
its leader (found with Metadata). Output, as Kafka prints it::

    Executing records delete operation
    Records delete operation completed:
    partition: foo-1	low_watermark: 1
    partition: foo-2	error: org.apache.kafka.common.errors.OffsetOutOfRangeException: ...

Exit status 1 for a bad offset file (missing fields, unsupported version, duplicate partitions).
"""

from __future__ import annotations

import json
import sys
import uuid
from collections import defaultdict

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.tools.command_line_utils import ToolArgumentParser, add_version_option, configure_tool_logging

DELETE_RECORDS_VERSION = 2
METADATA_VERSION = 12


class AdminCommandError(Exception):
    pass


def parse_offset_json(text: str) -> dict[tuple[str, int], int]:
    """``{(topic, partition): offset}``; raises AdminCommandError as Kafka's tool does."""
    try:
        data = json.loads(text)
    except ValueError:
        raise AdminCommandError("The input string is not a valid JSON") from None
    version = data.get("version", 1)
    if version != 1:
        raise AdminCommandError(f"Not supported version field value {version}")
    if "partitions" not in data:
        raise AdminCommandError("Missing partitions field")
    seen: dict[tuple[str, int], list[int]] = defaultdict(list)
    for p in data["partitions"]:
        seen[(str(p["topic"]), int(p["partition"]))].append(int(p["offset"]))
    duplicates = [f"{t}-{p}" for (t, p), offsets in seen.items() if len(offsets) > 1]
    if duplicates:
        raise AdminCommandError(f"Offset json file contains duplicate topic partitions: {','.join(duplicates)}")
    return {tp: offsets[0] for tp, offsets in seen.items()}


def _exception_text(code: int) -> str:
    cls = errors.for_code(code)
    java_name = cls.__name__[: -len("Error")] if cls.__name__.endswith("Error") else cls.__name__
    if not java_name.endswith("Exception"):
        java_name += "Exception"
    return f"org.apache.kafka.common.errors.{java_name}: {cls.default_message}"


def delete_records(
    bootstrap: str, offsets: dict[tuple[str, int], int], timeout_ms: int = 30000
) -> dict[tuple[str, int], tuple[int, int]]:
    """Send DeleteRecords to each partition's leader: ``{(topic, partition): (low watermark, error code)}``."""
    topics = sorted({t for t, _ in offsets})
    with BrokerConnection.to(bootstrap, client_id="kafka-delete-records") as conn:
        metadata = conn.request(
            ApiKeys.METADATA,
            METADATA_VERSION,
            {
                "topics": [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
    brokers = {b["node_id"]: f"{b['host']}:{b['port']}" for b in metadata["brokers"]}
    leaders: dict[tuple[str, int], int] = {}
    results: dict[tuple[str, int], tuple[int, int]] = {}
    for t in metadata["topics"]:
        for p in t["partitions"]:
            leaders[(t["name"], p["partition_index"])] = p["leader_id"]
    by_leader: dict[int, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for (topic, partition), offset in offsets.items():
        leader = leaders.get((topic, partition), -1)
        if leader not in brokers:
            results[(topic, partition)] = (
                -1,
                errors.UNKNOWN_TOPIC_OR_PARTITION if (topic, partition) not in leaders else errors.LEADER_NOT_AVAILABLE,
            )
            continue
        by_leader[leader][topic].append({"partition_index": partition, "offset": offset})
    for leader, topic_parts in by_leader.items():
        with BrokerConnection.to(brokers[leader], client_id="kafka-delete-records") as conn:
            response = conn.request(
                ApiKeys.DELETE_RECORDS,
                DELETE_RECORDS_VERSION,
                {"topics": [{"name": t, "partitions": ps} for t, ps in topic_parts.items()], "timeout_ms": timeout_ms},
            )
        for t in response["topics"]:
            for p in t["partitions"]:
                results[(t["name"], p["partition_index"])] = (p["low_watermark"], p["error_code"])
    return results


def main(argv: list[str] | None = None, out=sys.stdout) -> int:
    if argv is None:  # run as the command (bin/ script, console script): the tools' logging
        configure_tool_logging()
    parser = ToolArgumentParser(
        prog="kafka-delete-records",
        description=("This tool helps to delete records of the given partitions down to the specified offset."),
    )
    parser.add_argument("--bootstrap-server", required=True, help="REQUIRED: The server to connect to.")
    parser.add_argument(
        "--offset-json-file",
        required=True,
        help=(
            "REQUIRED: The JSON file with offset per partition. The format to use is: "
            '{"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], "version":1}'
        ),
    )
    parser.add_argument("--command-config", help="A property file containing configs to be passed to Admin Client.")
    add_version_option(parser)
    args = parser.parse_args(argv)
    try:
        with open(args.offset_json_file, encoding="utf-8") as f:
            offsets = parse_offset_json(f.read())
    except (OSError, AdminCommandError, KeyError, TypeError, ValueError) as e:
        print(f"Error while executing records delete operation: {e}", file=sys.stderr)
        return 1
    print("Executing records delete operation", file=out)
    try:
        results = delete_records(args.bootstrap_server, offsets)
    except (OSError, errors.KafkaError, ValueError) as e:
        print(f"Error while executing records delete operation: {e}", file=sys.stderr)
        return 1
    print("Records delete operation completed:", file=out)
    for (topic, partition), (low, code) in results.items():
        if code == errors.NONE:
            print(f"partition: {topic}-{partition}\tlow_watermark: {low}", file=out)
        else:
            print(f"partition: {topic}-{partition}\terror: {_exception_text(code)}", file=out)
    return 0


if __name__ == "__main__":
    configure_tool_logging()
    sys.exit(main())
