"""kafka-verifiable-consumer: Kafka's ``org.apache.kafka.tools.VerifiableConsumer`` (used by system tests).

    bin/kafka-verifiable-consumer --bootstrap-server HOST:PORT --topic T --group-id G [--max-messages N]
        [--session-timeout MS] [--enable-autocommit] [--reset-policy earliest|latest|none] [--verbose]
        [--consumer.config FILE]

Subscribes to ``T`` in group ``G`` and prints one JSON object a line, as Kafka's tool does:
``{"timestamp":..,"name":"startup_complete"}``, ``partitions_revoked`` / ``partitions_assigned``
(``partitions``: ``[{"topic","partition"}]``) when the assignment changes, per poll ``records_consumed``
(``count`` of the records polled, ``partitions``: ``[{"topic","partition","count","minOffset","maxOffset"}]``,
after one ``record_data`` per record with ``--verbose``), ``offsets_committed`` (``offsets``: ``[{"topic","partition",
"offset"}]``, ``error`` on failure, ``success``) after each poll unless ``--enable-autocommit``, and
``partitions_revoked`` and ``shutdown_complete`` after ``N`` messages (-1 = until SIGTERM/SIGINT).
Uses pykbroker's own :class:`~pykbroker.clients.consumer.KafkaConsumer`.
"""

from __future__ import annotations

import signal
import sys
import threading

from pykbroker.clients.consumer import KafkaConsumer
from pykbroker.tools.command_line_utils import ToolArgumentParser, client_properties, configure_tool_logging
from pykbroker.tools.verifiable_producer import EventPrinter


def build_parser() -> ToolArgumentParser:
    p = ToolArgumentParser(
        prog="kafka-verifiable-consumer",
        description="This tool consumes messages from a specific topic and emits consumer events (e.g. group "
        "rebalances, received messages, and offsets committed) as JSON objects to STDOUT.",
    )
    p.add_argument("--bootstrap-server", "--broker-list", dest="bootstrap_server", default=None)
    p.add_argument("--topic", required=True, help="Consumes messages from this topic.")
    p.add_argument("--group-id", required=True, help="The groupId shared among members of the consumer group")
    p.add_argument("--max-messages", type=int, default=-1, help="Consume this many messages. -1: forever.")
    p.add_argument("--session-timeout", type=int, default=30000, help="Set the consumer's session timeout")
    p.add_argument("--verbose", action="store_true", help="Enable to log individual consumed records")
    p.add_argument("--enable-autocommit", action="store_true", help="Enable offset auto-commit on consumer")
    p.add_argument(
        "--reset-policy", default="earliest", help="Set reset policy (must be either 'earliest', 'latest', or 'none'"
    )
    p.add_argument("--consumer.config", dest="consumer_config", default=None, help="Consumer config properties file.")
    return p


def _partitions(tps) -> list[dict]:
    return [{"topic": t, "partition": p} for t, p in tps]


class VerifiableConsumer:
    def __init__(self, args, consumer: KafkaConsumer, emit: EventPrinter):
        self.args = args
        self.consumer = consumer
        self.emit = emit
        self.consumed = 0
        self.stop = threading.Event()
        self.assignment: list[tuple[str, int]] = []

    def finished(self) -> bool:
        return 0 <= self.args.max_messages <= self.consumed

    def _check_assignment(self) -> None:
        current = sorted(self.consumer.assignment)
        if current != self.assignment:
            if self.assignment:
                self.emit("partitions_revoked", partitions=_partitions(self.assignment))
            self.emit("partitions_assigned", partitions=_partitions(current))
            self.assignment = current

    def on_records(self, records) -> dict[tuple[str, int], int]:
        """Kafka's onRecordsReceived: a summary per partition (cut at --max-messages), offsets to commit."""
        by_partition: dict[tuple[str, int], list] = {}
        for r in records:
            by_partition.setdefault((r.topic, r.partition), []).append(r)
        summaries, offsets = [], {}
        for tp, recs in by_partition.items():
            if self.args.max_messages >= 0 and self.consumed + len(recs) > self.args.max_messages:
                recs = recs[: self.args.max_messages - self.consumed]
            if not recs:
                break
            if self.args.verbose:
                for r in recs:
                    self.emit(
                        "record_data",
                        key=None if r.key is None else r.key.decode("utf-8", "replace"),
                        value=None if r.value is None else r.value.decode("utf-8", "replace"),
                        topic=r.topic, partition=r.partition, offset=r.offset,
                    )  # fmt: skip
            lo, hi = recs[0].offset, recs[-1].offset
            summaries.append({"topic": tp[0], "partition": tp[1], "count": len(recs), "minOffset": lo, "maxOffset": hi})
            offsets[tp] = hi + 1
            self.consumed += len(recs)
            if self.finished():
                break
        self.emit("records_consumed", count=len(records), partitions=summaries)
        return offsets

    def commit(self, offsets: dict[tuple[str, int], int]) -> None:
        committed = [{"topic": t, "partition": p, "offset": o} for (t, p), o in offsets.items()]
        try:
            self.consumer.commit(dict(offsets))
        except Exception as e:  # noqa: BLE001 - reported as Kafka's failed offsets_committed event
            self.emit("offsets_committed", offsets=committed, error=str(e) or type(e).__name__, success=False)
        else:
            self.emit("offsets_committed", offsets=committed, success=True)

    def run(self) -> None:
        self.emit("startup_complete")
        self.consumer.subscribe([self.args.topic])
        while not self.finished() and not self.stop.is_set():
            records = self.consumer.poll(100)
            self._check_assignment()
            if not records:
                continue
            offsets = self.on_records(records)
            if not self.args.enable_autocommit and offsets:
                self.commit(offsets)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_tool_logging()
    if args.reset_policy not in ("earliest", "latest", "none"):
        print(f"Invalid value {args.reset_policy} for configuration auto.offset.reset", file=sys.stderr)
        return 1
    props = client_properties(args.consumer_config, {}, args.bootstrap_server)
    if not props.get("bootstrap.servers"):
        print("Either --bootstrap-server or bootstrap.servers in --consumer.config must be given", file=sys.stderr)
        return 1
    props.update(
        {
            "group.id": args.group_id,
            "enable.auto.commit": str(args.enable_autocommit).lower(),
            "auto.offset.reset": args.reset_policy,
            "session.timeout.ms": str(args.session_timeout),
        }
    )
    emit = EventPrinter()
    consumer = KafkaConsumer(props)
    tool = VerifiableConsumer(args, consumer, emit)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: tool.stop.set())
    try:
        tool.run()
    finally:
        if tool.assignment:  # leaving the group revokes the owned partitions (Kafka's onPartitionsRevoked)
            emit("partitions_revoked", partitions=_partitions(tool.assignment))
        consumer.close()
        emit("shutdown_complete")
    return 0


if __name__ == "__main__":
    sys.exit(main())
