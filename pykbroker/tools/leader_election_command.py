"""kafka-leader-election: preferred or unclean leader elections (``org.apache.kafka.tools.LeaderElectionCommand``).

    bin/kafka-leader-election --bootstrap-server HOST:PORT --election-type PREFERRED --all-topic-partitions
    bin/kafka-leader-election --bootstrap-server HOST:PORT --election-type UNCLEAN --topic t --partition 0
    bin/kafka-leader-election --bootstrap-server HOST:PORT --election-type preferred --path-to-json-file p.json

One ElectLeaders request (v2) to the bootstrap broker, which forwards it to the active controller. The
JSON file is Kafka's ``{"partitions": [{"topic": "foo", "partition": 1}]}``. Output, as Kafka prints it::

    Successfully completed leader election (PREFERRED) for partitions t-0, t-1
    Valid replica already elected for partitions t-2
    Error completing leader election (PREFERRED) for partition: t-3: org.apache.kafka.common.errors....

Exit status 1 when an election failed (``N replica(s) could not be elected`` on stderr) or the options
are invalid (Kafka's messages: ``Missing required option(s): ...``, ``One and only one of the following
options is required: ...``).
"""

from __future__ import annotations

import json
import sys

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.tools.command_line_utils import ToolArgumentParser, add_version_option, configure_tool_logging
from pykbroker.tools.delete_records_command import _exception_text

ELECT_LEADERS_VERSION = 2
ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}


class AdminCommandFailed(Exception):
    pass


def parse_election_json(text: str) -> list[tuple[str, int]]:
    """``[(topic, partition)]`` from Kafka's replica election JSON; raises AdminCommandFailed."""
    try:
        data = json.loads(text)
        parts = [(str(p["topic"]), int(p["partition"])) for p in data["partitions"]]
    except (ValueError, KeyError, TypeError) as e:
        raise AdminCommandFailed(f"Replica election data is invalid: {e}") from None
    duplicates = sorted({f"{t}-{p}" for t, p in parts if parts.count((t, p)) > 1})
    if duplicates:
        raise AdminCommandFailed(f"Replica election data contains duplicate partitions: {','.join(duplicates)}")
    return parts


def elect_leaders(
    bootstrap: str, election_type: int, partitions: list[tuple[str, int]] | None, timeout_ms: int = 30000
) -> dict[tuple[str, int], tuple[int, str | None]]:
    """ElectLeaders through ``bootstrap``: ``{(topic, partition): (error code, message)}``."""
    topic_partitions = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        topic_partitions = [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]
    with BrokerConnection.to(bootstrap, client_id="kafka-leader-election", timeout=timeout_ms / 1000 + 5) as conn:
        response = conn.request(
            ApiKeys.ELECT_LEADERS,
            ELECT_LEADERS_VERSION,
            {"election_type": election_type, "topic_partitions": topic_partitions, "timeout_ms": timeout_ms},
        )
    if response.get("error_code", errors.NONE) != errors.NONE:
        raise errors.for_code(response["error_code"])(f"ElectLeaders failed: {errors.name_of(response['error_code'])}")
    return {
        (t["topic"], p["partition_id"]): (p["error_code"], p["error_message"])
        for t in response["replica_election_results"]
        for p in t["partition_result"]
    }


def _error_text(code: int, message: str | None) -> str:
    text = _exception_text(code)
    if message:
        text = text.split(": ", 1)[0] + ": " + message
    return text


def main(argv: list[str] | None = None, out=sys.stdout, err=sys.stderr) -> int:
    if argv is None:
        configure_tool_logging()
    parser = ToolArgumentParser(
        prog="kafka-leader-election",
        description=(
            "This tool attempts to elect a new leader for a set of topic partitions. The type of elections "
            "supported are preferred replicas and unclean replicas."
        ),
    )
    parser.add_argument(
        "--bootstrap-server",
        help="A hostname and port for the broker to connect to, in the form host:port. Multiple comma separated "
        "URLs can be given. REQUIRED.",
    )
    parser.add_argument(
        "--admin.config", dest="admin_config", help="Configuration properties files to pass to the admin client"
    )
    parser.add_argument(
        "--path-to-json-file",
        help='The JSON file with the list of partition for which leader elections should be performed: {"partitions": '
        '[{"topic": "foo", "partition": 1}]}. Not allowed if --all-topic-partitions or --topic flags are specified.',
    )
    parser.add_argument(
        "--topic",
        help="Name of topic for which to perform an election. Not allowed if --path-to-json-file or "
        "--all-topic-partitions is specified.",
    )
    parser.add_argument(
        "--partition", type=int, help="Partition id for which to perform an election. REQUIRED if --topic is specified."
    )
    parser.add_argument(
        "--all-topic-partitions",
        action="store_true",
        help="Perform election on all of the eligible topic partitions based on the type of election (see the "
        "--election-type flag). Not allowed if --topic or --path-to-json-file is specified.",
    )
    parser.add_argument(
        "--election-type",
        type=str.upper,
        choices=sorted(ELECTION_TYPES),
        help='Type of election to attempt: "preferred" (only when the current leader is not the preferred one) '
        'or "unclean" (only when the partition has no leader). REQUIRED.',
    )
    add_version_option(parser)
    args = parser.parse_args(argv)
    try:
        partitions = _validate(args)
        election = args.election_type
        results = elect_leaders(args.bootstrap_server, ELECTION_TYPES[election], partitions)
    except AdminCommandFailed as e:
        print(e, file=err)
        return 1
    except (OSError, errors.KafkaError) as e:
        print(f"Error while making request: {e}", file=err)
        return 1
    done = [f"{t}-{p}" for (t, p), (code, _) in results.items() if code == errors.NONE]
    noop = [f"{t}-{p}" for (t, p), (code, _) in results.items() if code == errors.ELECTION_NOT_NEEDED]
    failed = {tp: r for tp, r in results.items() if r[0] not in (errors.NONE, errors.ELECTION_NOT_NEEDED)}
    if done:
        print(f"Successfully completed leader election ({election}) for partitions {', '.join(done)}", file=out)
    if noop:
        print(f"Valid replica already elected for partitions {', '.join(noop)}", file=out)
    for (t, p), (code, message) in failed.items():
        print(
            f"Error completing leader election ({election}) for partition: {t}-{p}: {_error_text(code, message)}",
            file=out,
        )
    if failed:
        print(f"{len(failed)} replica(s) could not be elected", file=err)
        return 1
    return 0


def _validate(args) -> list[tuple[str, int]] | None:
    missing = [
        name
        for name, value in (("--bootstrap-server", args.bootstrap_server), ("--election-type", args.election_type))
        if not value
    ]
    if missing:
        raise AdminCommandFailed(f"Missing required option(s): {', '.join(missing)}")
    chosen = sum(1 for v in (args.topic, args.all_topic_partitions, args.path_to_json_file) if v)
    if chosen != 1:
        raise AdminCommandFailed(
            "One and only one of the following options is required: "
            "--topic, --all-topic-partitions, --path-to-json-file"
        )
    if args.topic and args.partition is None:
        raise AdminCommandFailed("Missing required option(s): --partition")
    if not args.topic and args.partition is not None:
        raise AdminCommandFailed("Option --partition is only allowed if --topic is used")
    if args.path_to_json_file:
        try:
            with open(args.path_to_json_file, encoding="utf-8") as f:
                return parse_election_json(f.read())
        except OSError as e:
            raise AdminCommandFailed(str(e)) from None
    if args.topic:
        return [(args.topic, args.partition)]
    return None


if __name__ == "__main__":
    configure_tool_logging()
    sys.exit(main())
