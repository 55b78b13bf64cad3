"""kafka-verifiable-producer: Kafka's ``org.apache.kafka.tools.VerifiableProducer`` (used by system tests).

    bin/kafka-verifiable-producer --bootstrap-server HOST:PORT --topic T [--max-messages N] [--throughput R]
        [--acks A] [--value-prefix P] [--repeating-keys K] [--message-create-time MS] [--producer.config FILE]

Sends the values ``0``, ``1``, ... (``P.0``, ``P.1``, ... with ``--value-prefix``; keys ``0..K-1`` repeating with
``--repeating-keys``, else none) at most ``R`` messages/s (-1 = no limit), ``N`` of them (-1 = until killed) and
prints one JSON object a line, as Kafka's tool does: ``{"timestamp":..,"name":"startup_complete"}``, per record
``producer_send_success`` (``key``, ``value``, ``topic``, ``partition``, ``offset``) or ``producer_send_error``
(``key``, ``value``, ``topic``, ``exception``, ``message``), then ``shutdown_complete`` and ``tool_data``
(``sent``, ``acked``, ``target_throughput``, ``avg_throughput``). SIGTERM/SIGINT stop it the same way.
Uses pykbroker's own :class:`~pykbroker.clients.producer.KafkaProducer`.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time

from pykbroker.clients.producer import KafkaProducer
from pykbroker.config.properties import load_properties
from pykbroker.tools.command_line_utils import ToolArgumentParser, configure_tool_logging, error_line
from pykbroker.tools.producer_performance import ThroughputThrottler


class EventPrinter:
    """Kafka's printJson: one compact JSON object a line, ``timestamp`` and ``name`` first; thread-safe."""

    def __init__(self, out=sys.stdout):
        self.out = out
        self.lock = threading.Lock()

    def __call__(self, name: str, **fields) -> None:
        event = {"timestamp": int(time.time() * 1000), "name": name, **fields}
        line = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
        with self.lock:
            self.out.write(line + "\n")
            self.out.flush()


def build_parser() -> ToolArgumentParser:
    p = ToolArgumentParser(
        prog="kafka-verifiable-producer",
        description="This tool produces increasing integers to the specified topic and prints JSON metadata to "
        "stdout on each \"send\" request, making externally visible which messages have been acked and which have "
        "not.",
    )  # fmt: skip
    p.add_argument("--topic", required=True, help="Produce messages to this topic.")
    p.add_argument("--bootstrap-server", "--broker-list", dest="bootstrap_server", default=None)
    p.add_argument("--max-messages", type=int, default=-1, help="Produce this many messages. -1: forever.")
    p.add_argument("--throughput", type=int, default=-1, help="Messages/sec; -1: no limit.")
    p.add_argument("--acks", type=int, default=-1, help="Acks required on each produced message.")
    p.add_argument("--producer.config", dest="producer_config", default=None, help="Producer config properties file.")
    p.add_argument("--message-create-time", type=int, default=-1, help="Send messages with creation time starting "
                   "at this value (ms), incremented by 1 per message; -1: the current time.")  # fmt: skip
    p.add_argument("--value-prefix", type=int, default=None, help="Prefix each value with this integer and a dot.")
    p.add_argument("--repeating-keys", type=int, default=None, help="Keys 0..N-1 repeating; default: no keys.")
    return p


class VerifiableProducer:
    def __init__(self, args, producer: KafkaProducer, emit: EventPrinter):
        self.args = args
        self.producer = producer
        self.emit = emit
        self.num_sent = 0
        self.num_acked = 0
        self.stop = threading.Event()
        self.counter_lock = threading.Lock()

    def value_of(self, i: int) -> str:
        return f"{self.args.value_prefix}.{i}" if self.args.value_prefix is not None else str(i)

    def send(self, key: str | None, value: str, timestamp: int | None) -> None:
        topic = self.args.topic

        def on_completion(metadata, exception):
            if exception is None:
                with self.counter_lock:
                    self.num_acked += 1
                self.emit(
                    "producer_send_success", key=key, value=value, partition=metadata.partition,
                    topic=metadata.topic, offset=metadata.offset,
                )  # fmt: skip
            else:
                self.emit(
                    "producer_send_error", key=key, value=value, topic=topic,
                    exception=type(exception).__name__, message=str(exception),
                )  # fmt: skip

        self.num_sent += 1
        try:
            self.producer.send(
                topic,
                value.encode(),
                key=None if key is None else key.encode(),
                timestamp_ms=timestamp,
                callback=on_completion,
            )
        except Exception as e:  # noqa: BLE001 - Kafka prints a send error event and goes on
            self.emit(
                "producer_send_error", key=key, value=value, topic=topic, exception=type(e).__name__, message=str(e)
            )

    def run(self) -> None:
        self.emit("startup_complete")
        limit = self.args.max_messages if self.args.max_messages >= 0 else None
        throttler = ThroughputThrottler(self.args.throughput, int(time.time() * 1000))
        i = 0
        while (limit is None or i < limit) and not self.stop.is_set():
            start_ms = int(time.time() * 1000)
            key = str(i % self.args.repeating_keys) if self.args.repeating_keys else None
            create_time = self.args.message_create_time + i if self.args.message_create_time >= 0 else None
            self.send(key, self.value_of(i), create_time)
            if throttler.should_throttle(i, start_ms):
                throttler.throttle()
            i += 1


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_tool_logging()
    props: dict = dict(load_properties(args.producer_config)) if args.producer_config else {}
    if args.bootstrap_server:
        props["bootstrap.servers"] = args.bootstrap_server
    if not props.get("bootstrap.servers"):
        print("Either --bootstrap-server or bootstrap.servers in --producer.config must be given", file=sys.stderr)
        return 1
    props["acks"] = str(args.acks)
    props.setdefault("retries", "0")
    emit = EventPrinter()
    try:
        producer = KafkaProducer(props)
    except Exception as e:  # noqa: BLE001 - Kafka's tool exits 1 on it: one line, no traceback
        print(f"ERROR: {error_line(e)}", file=sys.stderr)
        return 1
    tool = VerifiableProducer(args, producer, emit)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: tool.stop.set())
    start_ms = int(time.time() * 1000)
    try:
        tool.run()
    finally:
        producer.close()
        emit("shutdown_complete")
        elapsed_ms = int(time.time() * 1000) - start_ms
        avg = 1000 * (tool.num_acked / elapsed_ms) if elapsed_ms > 0 else 0.0
        emit(
            "tool_data", sent=tool.num_sent, acked=tool.num_acked, target_throughput=args.throughput,
            avg_throughput=avg,
        )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
