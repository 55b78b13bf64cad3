"""kafka-transactions: list and describe transactions (``org.apache.kafka.tools.TransactionsCommand``).

    bin/kafka-transactions --bootstrap-server HOST:PORT list [--duration-filter MS]
    bin/kafka-transactions --bootstrap-server HOST:PORT describe --transactional-id ID

``list`` sends ListTransactions to every broker (each coordinator lists its own transactional ids) and
prints Kafka's table ``TransactionalId Coordinator ProducerId TransactionState``; ``describe`` finds the
id's coordinator (FindCoordinator, key type 1) and prints ``CoordinatorId TransactionalId ProducerId
ProducerEpoch TransactionState TransactionTimeoutMs CurrentTransactionStartTimeMs TransactionDurationMs
TopicPartitions``. Tables are Kafka's ``prettyPrintTable`` (left-justified cells, each followed by a tab).
Errors print Kafka's ``Failed to ...: <message>. Enable debug logging for additional detail.`` on stderr,
exit status 1. Not yet: ``abort``, ``find-hanging`` (say so on use).
"""

from __future__ import annotations

import sys
import time

from pykbroker.clients.broker_connection import BrokerConnection, parse_bootstrap
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.tools.command_line_utils import ToolArgumentParser, configure_tool_logging
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


def list_transactions(bootstrap: str, duration_filter: int = -1) -> list[list[str]]:
    with _connect(bootstrap) as conn:
        brokers = conn.request(ApiKeys.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})["brokers"]
    rows = []
    for b in sorted(brokers, key=lambda b: b["node_id"]):
        with BrokerConnection(b["host"], b["port"], client_id="kafka-transactions", timeout=30) as conn:
            r = conn.request(
                ApiKeys.LIST_TRANSACTIONS,
                1,
                {"state_filters": [], "producer_id_filters": [], "duration_filter": duration_filter},
            )
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
    describer = sub.add_parser("describe", help="describe the state of an active transactional-id")
    describer.add_argument("--transactional-id", required=True, help="transactional id")
    for name in ("abort", "find-hanging"):
        sub.add_parser(name, help=f"{name} (not supported by pykbroker yet)")
    args = parser.parse_args(argv)
    try:
        if args.command == "list":
            print(
                pretty_print_table(LIST_HEADERS, list_transactions(args.bootstrap_server, args.duration_filter)),
                file=out,
            )
        elif args.command == "describe":
            row = describe_transaction(args.bootstrap_server, args.transactional_id)
            print(pretty_print_table(DESCRIBE_HEADERS, [row]), file=out)
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
