"""kafka-transactions: list and describe transactions (``org.apache.kafka.tools.TransactionsCommand``).

    bin/kafka-transactions --bootstrap-server HOST:PORT list [--duration-filter MS] [--transactional-id-pattern RE]
    bin/kafka-transactions --bootstrap-server HOST:PORT describe --transactional-id ID
    bin/kafka-transactions --bootstrap-server HOST:PORT describe-producers --topic T --partition P [--broker-id B]
    bin/kafka-transactions --bootstrap-server HOST:PORT abort --topic T --partition P --start-offset O
    bin/kafka-transactions --bootstrap-server HOST:PORT abort --topic T --partition P --producer-id I
        --producer-epoch E --coordinator-epoch C

``list`` sends ListTransactions to every broker (each coordinator lists its own transactional ids; v2 with
``--transactional-id-pattern``, KIP-1152: only the ids the regular expression matches whole) and
prints Kafka's table ``TransactionalId Coordinator ProducerId TransactionState``; ``describe`` finds the
id's coordinator (FindCoordinator, key type 1) and prints ``CoordinatorId TransactionalId ProducerId
ProducerEpoch TransactionState TransactionTimeoutMs CurrentTransactionStartTimeMs TransactionDurationMs
TopicPartitions``. Tables are Kafka's ``prettyPrintTable`` (left-justified cells, each followed by a tab).
Errors print Kafka's ``Failed to ...: <message>. Enable debug logging for additional detail.`` on stderr,
exit status 1. ``describe-producers`` asks the partition's leader (DescribeProducers) and prints
``ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence LastTimestamp CurrentTransactionStartOffset``;
``abort`` finds the producer whose open transaction starts at ``--start-offset`` (or takes its id and
epochs) and sends an ABORT WriteTxnMarkers to the leader, as Kafka's Admin.abortTransaction does.
``find-hanging`` lists open transactions older than ``--max-transaction-timeout`` minutes that their
producer's coordinator does not count the partition in (Kafka's hanging transactions), with Kafka's table.
"""

from __future__ import annotations

import sys
import time

from pykbroker.clients.broker_connection import BrokerConnection, parse_bootstrap
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.types import ZERO_UUID
from pykbroker.tools.command_line_utils import ToolArgumentParser, add_version_option, configure_tool_logging
from pykbroker.tools.metadata_quorum_command import pretty_print_table

LIST_HEADERS = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
DESCRIBE_HEADERS = [
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
]


class CommandFailed(Exception):
    pass


def _connect(bootstrap: str) -> BrokerConnection:
    last: Exception | None = None
    for host, port in parse_bootstrap(bootstrap):
        try:
            return BrokerConnection(host, port, client_id="kafka-transactions", timeout=30)
        except OSError as e:
            last = e
    raise CommandFailed(f"Could not connect to any of {bootstrap}: {last}")


def _error(code: int) -> str:
    return errors.for_code(code).default_message


def list_transactions(bootstrap: str, duration_filter: int = -1, pattern: str | None = None) -> list[list[str]]:
    with _connect(bootstrap) as conn:
        brokers = conn.request(ApiKeys.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})["brokers"]
    rows = []
    body = {"state_filters": [], "producer_id_filters": [], "duration_filter": duration_filter}
    for b in sorted(brokers, key=lambda b: b["node_id"]):
        with BrokerConnection(b["host"], b["port"], client_id="kafka-transactions", timeout=30) as conn:
            if pattern is None:
                r = conn.request(ApiKeys.LIST_TRANSACTIONS, 1, body)
            else:
                r = conn.request(ApiKeys.LIST_TRANSACTIONS, 2, dict(body, transactional_id_pattern=pattern))
        if r["error_code"] != errors.NONE:
            raise CommandFailed(f"Failed to list transactions: {_error(r['error_code'])}")
        for t in r["transaction_states"]:
            rows.append([t["transactional_id"], str(b["node_id"]), str(t["producer_id"]), t["transaction_state"]])
    return rows


def describe_transaction(bootstrap: str, transactional_id: str) -> list[str]:
    failed = f"Failed to describe transaction state of transactional-id `{transactional_id}`"
    with _connect(bootstrap) as conn:
        for _ in range(50):
            found = conn.request(ApiKeys.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [transactional_id]})
            c = found["coordinators"][0]
            if c["error_code"] in (errors.COORDINATOR_NOT_AVAILABLE, errors.COORDINATOR_LOAD_IN_PROGRESS):
                time.sleep(0.1)
                continue
            break
    if c["error_code"] != errors.NONE:
        raise CommandFailed(f"{failed}: {_error(c['error_code'])}")
    with BrokerConnection(c["host"], c["port"], client_id="kafka-transactions", timeout=30) as conn:
        r = conn.request(ApiKeys.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [transactional_id]})
    state = r["transaction_states"][0]
    if state["error_code"] != errors.NONE:
        raise CommandFailed(f"{failed}: {_error(state['error_code'])}")
    start = state["transaction_start_time_ms"]
    started = start >= 0
    partitions = ",".join(f"{t['topic']}-{p}" for t in state["topics"] for p in t["partitions"])
    return [
        str(c["node_id"]),
        transactional_id,
        str(state["producer_id"]),
        str(state["producer_epoch"]),
        state["transaction_state"],
        str(state["transaction_timeout_ms"]),
        str(start) if started else "None",
        str(int(time.time() * 1000) - start) if started else "None",
        partitions,
    ]


PRODUCER_HEADERS = [
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
]


def _leader(bootstrap: str, topic: str, partition: int, broker_id: int | None = None) -> tuple[int, str, int]:
    with _connect(bootstrap) as conn:
        md = conn.request(
            ApiKeys.METADATA,
            12,
            {"topics": [{"topic_id": ZERO_UUID, "name": topic}], "allow_auto_topic_creation": False},
        )
    brokers = {b["node_id"]: (b["host"], b["port"]) for b in md["brokers"]}
    t = md["topics"][0]
    if t["error_code"] != errors.NONE:
        raise CommandFailed(_error(t["error_code"]))
    found = [p for p in t["partitions"] if p["partition_index"] == partition]
    if not found:
        raise CommandFailed(_error(errors.UNKNOWN_TOPIC_OR_PARTITION))
    node = broker_id if broker_id is not None else found[0]["leader_id"]
    if node not in brokers:
        raise CommandFailed(_error(errors.LEADER_NOT_AVAILABLE))
    return node, *brokers[node]


def describe_producers(bootstrap: str, topic: str, partition: int, broker_id: int | None = None) -> list[dict]:
    where = f"broker {broker_id}" if broker_id is not None else "leader"
    failed = f"Failed to describe producers for partition {topic}-{partition} on {where}"
    try:
        _, host, port = _leader(bootstrap, topic, partition, broker_id)
    except CommandFailed as e:
        raise CommandFailed(f"{failed}: {e}") from None
    with BrokerConnection(host, port, client_id="kafka-transactions", timeout=30) as conn:
        r = conn.request(ApiKeys.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": topic, "partition_indexes": [partition]}]})
    p = r["topics"][0]["partitions"][0]
    if p["error_code"] != errors.NONE:
        raise CommandFailed(f"{failed}: {p['error_message'] or _error(p['error_code'])}")
    return p["active_producers"]


def abort_transaction(bootstrap: str, topic: str, partition: int, producer_id: int, epoch: int, coordinator_epoch: int):
    """Kafka's Admin.abortTransaction: WriteTxnMarkers (ABORT) straight to the partition's leader."""
    spec = (
        f"AbortTransactionSpec(topicPartition={topic}-{partition}, producerId={producer_id}, "
        f"producerEpoch={epoch}, coordinatorEpoch={coordinator_epoch})"
    )
    _, host, port = _leader(bootstrap, topic, partition)
    with BrokerConnection(host, port, client_id="kafka-transactions", timeout=30) as conn:
        r = conn.request(
            ApiKeys.WRITE_TXN_MARKERS,
            1,
            {
                "markers": [
                    {
                        "producer_id": producer_id,
                        "producer_epoch": epoch,
                        "transaction_result": False,
                        "topics": [{"name": topic, "partition_indexes": [partition]}],
                        "coordinator_epoch": coordinator_epoch,
                    }
                ]
            },
        )
    code = r["markers"][0]["topics"][0]["partitions"][0]["error_code"]
    if code != errors.NONE:
        raise CommandFailed(f"Failed to abort transaction {spec}: {_error(code)}")


HANGING_HEADERS = [
    "Topic",
    "Partition",
    "ProducerId",
    "ProducerEpoch",
    "CoordinatorEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(min)",
]


def find_hanging(
    bootstrap: str, topic: str | None, partition: int | None, broker_id: int | None, max_timeout_min: int
) -> list[list[str]]:
    """Kafka's FindHangingTransactionsCommand: open transactions older than the maximum transaction
    timeout on the partitions searched, whose producer's transaction (found with ListTransactions and
    DescribeTransactions) does not include the partition -- or which no coordinator knows."""
    if topic is None and broker_id is None:
        raise CommandFailed(
            "The `find-hanging` command requires either --topic or --broker-id to limit the scope of the search"
        )
    if partition is not None and topic is None:
        raise CommandFailed("The --partition argument requires --topic to be provided")
    with _connect(bootstrap) as conn:
        topics = None if topic is None else [{"topic_id": ZERO_UUID, "name": topic}]
        md = conn.request(ApiKeys.METADATA, 12, {"topics": topics, "allow_auto_topic_creation": False})
    brokers = {b["node_id"]: (b["host"], b["port"]) for b in md["brokers"]}
    searched: list[tuple[str, int, int]] = []  # (topic, partition, node to ask)
    for t in md["topics"]:
        if t["error_code"] != errors.NONE or (topic is None and t["is_internal"]):
            continue
        for p in t["partitions"]:
            if partition is not None and p["partition_index"] != partition:
                continue
            if broker_id is not None and broker_id not in p["replica_nodes"]:
                continue
            searched.append((t["name"], p["partition_index"], broker_id if broker_id is not None else p["leader_id"]))
    now = int(time.time() * 1000)
    max_ms = max_timeout_min * 60_000
    candidates: list[tuple[str, int, dict]] = []
    for name, index, node in searched:
        if node not in brokers:
            continue
        with BrokerConnection(*brokers[node], client_id="kafka-transactions", timeout=30) as conn:
            r = conn.request(ApiKeys.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": name, "partition_indexes": [index]}]})
        p = r["topics"][0]["partitions"][0]
        if p["error_code"] != errors.NONE:
            raise CommandFailed(f"Failed to describe producers for partition {name}-{index}: {_error(p['error_code'])}")
        for producer in p["active_producers"]:
            if producer["current_txn_start_offset"] >= 0 and now - producer["last_timestamp"] > max_ms:
                candidates.append((name, index, producer))
    if not candidates:
        return []
    pids = sorted({c[2]["producer_id"] for c in candidates})
    transactional_ids: dict[int, str] = {}
    for host, port in brokers.values():
        with BrokerConnection(host, port, client_id="kafka-transactions", timeout=30) as conn:
            r = conn.request(
                ApiKeys.LIST_TRANSACTIONS, 1, {"state_filters": [], "producer_id_filters": pids, "duration_filter": -1}
            )
        for t in r["transaction_states"]:
            transactional_ids[t["producer_id"]] = t["transactional_id"]
    in_transaction: dict[int, set[tuple[str, int]]] = {}
    for pid, tid in transactional_ids.items():
        try:
            row = describe_transaction(bootstrap, tid)
        except CommandFailed:
            continue  # unknown to its coordinator: every open transaction of the producer hangs
        in_transaction[pid] = {(tp.rsplit("-", 1)[0], int(tp.rsplit("-", 1)[1])) for tp in row[8].split(",") if tp}
    rows = []
    for name, index, producer in candidates:
        known = in_transaction.get(producer["producer_id"])
        if known is not None and (name, index) in known:
            continue
        rows.append(
            [
                name,
                str(index),
                str(producer["producer_id"]),
                str(producer["producer_epoch"]),
                str(producer["coordinator_epoch"]),
                str(producer["current_txn_start_offset"]),
                str(producer["last_timestamp"]),
                str((now - producer["last_timestamp"]) // 60_000),
            ]
        )
    return rows


def _abort(args) -> None:
    if args.start_offset is None and args.producer_id is None:
        raise CommandFailed(
            "The transaction to abort must be identified either with --start-offset (for brokers on 3.0 or above) "
            "or with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)"
        )
    if args.start_offset is None:
        if args.producer_epoch is None:
            raise CommandFailed("Missing required argument --producer-epoch")
        if args.coordinator_epoch is None:
            raise CommandFailed("Missing required argument --coordinator-epoch")
        spec = (args.producer_id, args.producer_epoch, max(args.coordinator_epoch, 0))
    else:
        try:
            producers = describe_producers(args.bootstrap_server, args.topic, args.partition)
        except CommandFailed as e:
            message = str(e).replace("Failed to describe producers", "Failed to validate producer state", 1)
            raise CommandFailed(message.replace(" on leader", "", 1)) from None
        found = [p for p in producers if p["current_txn_start_offset"] == args.start_offset]
        if not found:
            raise CommandFailed(
                f"Could not find any open transactions starting at offset {args.start_offset} on partition "
                f"{args.topic}-{args.partition}"
            )
        p = found[0]
        spec = (p["producer_id"], p["producer_epoch"], max(p["coordinator_epoch"], 0))
    abort_transaction(args.bootstrap_server, args.topic, args.partition, *spec)


def main(argv: list[str] | None = None, out=sys.stdout, err=sys.stderr) -> int:
    if out is sys.stdout:
        configure_tool_logging()
    parser = ToolArgumentParser(
        prog="kafka-transactions", description="This tool is used to analyze the transactional state of producers."
    )
    parser.add_argument("--bootstrap-server", required=True, help="hostname and port for the broker to connect to")
    parser.add_argument("--command-config", help="Config properties file (accepted; unused)")
    sub = parser.add_subparsers(dest="command", required=True)
    lister = sub.add_parser("list", help="list transactions")
    lister.add_argument(
        "--duration-filter",
        type=int,
        default=-1,
        help="Duration (in millis) to filter by: if < 0, all transactions will be returned; otherwise, only "
        "transactions running longer than this duration will be returned",
    )
    lister.add_argument(
        "--transactional-id-pattern",
        help="Transactional id regular expression pattern to filter by: only the transactions whose transactional "
        "id matches it are returned",
    )
    describer = sub.add_parser("describe", help="describe the state of an active transactional-id")
    describer.add_argument("--transactional-id", required=True, help="transactional id")
    aborter = sub.add_parser("abort", help="abort a hanging transaction (requires administrative privileges)")
    aborter.add_argument("--topic", required=True, help="topic name")
    aborter.add_argument("--partition", type=int, required=True, help="partition number")
    aborter.add_argument("--start-offset", type=int, help="start offset of the transaction to abort")
    aborter.add_argument("--producer-id", type=int, help="producer id")
    aborter.add_argument("--producer-epoch", type=int, help="producer epoch")
    aborter.add_argument("--coordinator-epoch", type=int, help="coordinator epoch")
    producers = sub.add_parser(
        "describe-producers", help="describe the states of active producers for a topic partition"
    )
    producers.add_argument("--broker-id", type=int, help="optional broker id to describe the producer state on a "
                           "specific replica")  # fmt: skip
    producers.add_argument("--topic", required=True, help="topic name")
    producers.add_argument("--partition", type=int, required=True, help="partition number")
    hanging = sub.add_parser("find-hanging", help="find hanging transactions")
    hanging.add_argument("--broker-id", type=int, help="broker id to search for hanging transactions")
    hanging.add_argument(
        "--max-transaction-timeout",
        type=int,
        default=15,
        help="maximum transaction timeout in minutes to limit the scope of the search (15 minutes by default)",
    )
    hanging.add_argument("--topic", help="topic name to limit search to (required if --partition is specified)")
    hanging.add_argument("--partition", type=int, help="partition number")
    add_version_option(parser, "-v", "--version", text="show the version of this Kafka distribution and exit")
    args = parser.parse_args(argv)
    try:
        if args.command == "list":
            print(
                pretty_print_table(
                    LIST_HEADERS,
                    list_transactions(args.bootstrap_server, args.duration_filter, args.transactional_id_pattern),
                ),
                file=out,
            )
        elif args.command == "describe":
            row = describe_transaction(args.bootstrap_server, args.transactional_id)
            print(pretty_print_table(DESCRIBE_HEADERS, [row]), file=out)
        elif args.command == "describe-producers":
            found = describe_producers(args.bootstrap_server, args.topic, args.partition, args.broker_id)
            rows = [
                [
                    str(p["producer_id"]),
                    str(p["producer_epoch"]),
                    str(p["coordinator_epoch"]) if p["coordinator_epoch"] >= 0 else "None",
                    str(p["last_sequence"]),
                    str(p["last_timestamp"]),
                    str(p["current_txn_start_offset"]) if p["current_txn_start_offset"] >= 0 else "None",
                ]
                for p in found
            ]
            print(pretty_print_table(PRODUCER_HEADERS, rows), file=out)
        elif args.command == "abort":
            _abort(args)
        elif args.command == "find-hanging":
            rows = find_hanging(
                args.bootstrap_server, args.topic, args.partition, args.broker_id, args.max_transaction_timeout
            )
            print(pretty_print_table(HANGING_HEADERS, rows), file=out)
        else:
            print(f"kafka-transactions {args.command} is not supported by pykbroker yet", file=err)
            return 1
    except CommandFailed as e:
        print(f"{e}. Enable debug logging for additional detail.", file=err)
        return 1
    except (OSError, errors.KafkaError) as e:
        print(f"Failed to {args.command} transactions: {e}. Enable debug logging for additional detail.", file=err)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
