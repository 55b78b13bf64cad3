"""kafka-producer-perf-test: the producer benchmark (``org.apache.kafka.tools.ProducerPerformance``).

    bin/kafka-producer-perf-test --topic T --num-records N --record-size 100 --throughput -1 \\
        --producer-props bootstrap.servers=127.0.0.1:9092 acks=1 linger.ms=5

Kafka's flags: ``--topic``, ``--num-records``, ``--record-size`` | ``--payload-file`` (records split by
``--payload-delimiter``, default newline) | ``--payload-monotonic`` (record i's payload is ``str(i)``),
``--throughput`` (records/s, -1 = unthrottled),
``--producer-props k=v ...``, ``--producer.config FILE``, ``--print-metrics``; also
``--bootstrap-server`` (Kafka 3.9+), ``--transactional-id`` / ``--transaction-duration-ms`` (transactions
committed every duration, default 3000 ms once a transactional id is given, as Kafka's). Output, as Kafka
prints it: every 5 s a window line
``N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency.`` and at the end
``N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency, P50 ms 50th, P95 ms 95th,
P99 ms 99th, P999 ms 99.9th.`` Latency is measured per record from ``send`` to its delivery callback
(ms); percentiles come from every ``N / min(N, 500000)``-th record, as in Kafka. Records that fail are
reported on stderr and not counted. The producer's connection warnings go to stderr (Kafka's tools log
there); an error that stops the test (e.g. no broker answering within ``max.block.ms``) ends it with one
``ERROR: ...`` line on stderr and exit code 1.

Uses pykbroker's own :class:`~pykbroker.clients.producer.KafkaProducer`; the tool sets the interpreter's
thread switch interval to 1 ms (see ``main``).
"""

from __future__ import annotations

import argparse
import random
import sys
import time as _time
import uuid

from pykbroker.clients.producer import KafkaProducer
from pykbroker.config.properties import load_properties
from pykbroker.tools.command_line_utils import ToolArgumentParser, configure_tool_logging, error_line
from pykbroker.utils.time import SYSTEM

REPORTING_INTERVAL_MS = 5000


class Stats:
    """Kafka's ProducerPerformance.Stats: totals, a 5 s window, and sampled latencies (ms).

    :meth:`on_completion` is the per-record delivery callback (it runs on the producer's Sender
    thread only, so no lock). It appends the record's latency to :attr:`all_latencies` and adds its
    bytes to the window; the window's count, total and max latency come from the latencies appended
    since the window began, so the per-record work is one append, one addition and the window check.
    The percentiles use every ``sampling``-th latency in completion order, as Kafka's
    ``iteration % sampling == 0`` (``iteration`` counts successful completions)."""

    def __init__(self, num_records: int, reporting_interval_ms: int = REPORTING_INTERVAL_MS, out=sys.stdout):
        self.start = SYSTEM.milliseconds()
        self.window_start: float = self.start  # ms
        self.window_first = 0  # index in all_latencies of the window's first record
        self.sampling = max(1, num_records // max(1, min(num_records, 500000)))
        self.all_latencies: list[int] = []  # ms, one per successful record, in completion order
        self.window_bytes = 0
        self.closed_bytes = self.closed_total_latency = self.closed_max_latency = 0
        self.reporting_interval = reporting_interval_ms
        self.out = out
        self.errors: list[BaseException] = []

    @property
    def latencies(self) -> list[int]:
        """The sampled latencies (Kafka's ``latencies`` array)."""
        return self.all_latencies[:: self.sampling]

    @property
    def count(self) -> int:
        return len(self.all_latencies)

    @property
    def bytes(self) -> int:
        return self.closed_bytes + self.window_bytes

    @property
    def total_latency(self) -> int:
        return self.closed_total_latency + sum(self.all_latencies[self.window_first :])

    @property
    def max_latency(self) -> int:
        return max(self.closed_max_latency, max(self.all_latencies[self.window_first :], default=0))

    def on_completion(self, metadata, exception, _time_ns=_time.time_ns) -> None:
        """The delivery callback shared by every record (Kafka allocates a PerfCallback per record):
        the record's CreateTime timestamp, taken just before send(), is its send start in ms; the wall
        clock is read as ``SYSTEM.milliseconds`` does."""
        now = _time_ns() // 1_000_000
        if exception is not None:
            if len(self.errors) < 5:
                self.errors.append(exception)
                print(f"Error when sending message: {exception!r}", file=sys.stderr)
            return
        self.all_latencies.append(now - metadata[3])  # RecordMetadata.timestamp
        self.window_bytes += metadata[5]  # serialized_value_size
        if now - self.window_start >= self.reporting_interval:
            self.print_window(now)
            self.new_window(now)

    def print_window(self, now_ms: float) -> None:
        window = self.all_latencies[self.window_first :]
        elapsed = max(1.0, now_ms - self.window_start)
        recs_per_sec = 1000.0 * len(window) / elapsed
        mb_per_sec = 1000.0 * self.window_bytes / elapsed / (1024.0 * 1024.0)
        avg = sum(window) / len(window) if window else 0.0
        print(
            f"{len(window)} records sent, {recs_per_sec:.1f} records/sec ({mb_per_sec:.2f} MB/sec), "
            f"{avg:.1f} ms avg latency, {float(max(window, default=0)):.1f} ms max latency.",
            file=self.out,
            flush=True,
        )

    def new_window(self, now_ms: float) -> None:
        window = self.all_latencies[self.window_first :]
        self.closed_bytes += self.window_bytes
        self.closed_total_latency += sum(window)
        self.closed_max_latency = max(self.closed_max_latency, max(window, default=0))
        self.window_start = now_ms
        self.window_first += len(window)
        self.window_bytes = 0

    def print_total(self) -> None:
        elapsed = max(1.0, SYSTEM.milliseconds() - self.start)
        recs_per_sec = 1000.0 * self.count / elapsed
        mb_per_sec = 1000.0 * self.bytes / elapsed / (1024.0 * 1024.0)
        p50, p95, p99, p999 = percentiles(self.latencies, (0.5, 0.95, 0.99, 0.999))
        avg = self.total_latency / self.count if self.count else 0.0
        print(
            f"{self.count} records sent, {recs_per_sec:f} records/sec ({mb_per_sec:.2f} MB/sec), "
            f"{avg:.2f} ms avg latency, {float(self.max_latency):.2f} ms max latency, {p50} ms 50th, "
            f"{p95} ms 95th, {p99} ms 99th, {p999} ms 99.9th.",
            file=self.out,
            flush=True,
        )


def percentiles(latencies: list[int], points) -> list[int]:
    values = sorted(latencies)
    if not values:
        return [0 for _ in points]
    return [values[min(len(values) - 1, int(p * len(values)))] for p in points]


class ThroughputThrottler:
    """Kafka's ThroughputThrottler: sleep so that ``target`` records/s are not exceeded (-1 = no limit)."""

    def __init__(self, target: float, start_ms: float):
        self.target = target
        self.start_ms = start_ms
        self.sleep_time_ns = int(1e9 / target) if target > 0 else 0
        self.sleep_deficit_ns = 0

    def should_throttle(self, sent: int, now_ms: float) -> bool:
        if self.target < 0:
            return False
        elapsed = (now_ms - self.start_ms) / 1000.0
        return elapsed > 0 and sent / elapsed > self.target

    def throttle(self) -> None:
        if self.target == 0:
            SYSTEM.sleep(3600 * 1000)
            return
        self.sleep_deficit_ns += self.sleep_time_ns
        if self.sleep_deficit_ns >= 1_000_000:
            start = SYSTEM.nanoseconds()
            SYSTEM.sleep(self.sleep_deficit_ns / 1e6)
            self.sleep_deficit_ns -= SYSTEM.nanoseconds() - start
            self.sleep_deficit_ns = max(self.sleep_deficit_ns, 0)


def _parser() -> argparse.ArgumentParser:
    p = ToolArgumentParser(
        prog="kafka-producer-perf-test", description="This tool is used to verify the producer performance."
    )
    payload = p.add_mutually_exclusive_group(required=True)
    p.add_argument("--topic", required=True, help="produce messages to this topic")
    p.add_argument("--num-records", type=int, required=True, help="number of messages to produce")
    payload.add_argument("--record-size", type=int, help="message size in bytes.")
    payload.add_argument("--payload-file", help="file to read the message payloads from.")
    payload.add_argument(
        "--payload-monotonic",
        action="store_true",
        help="payload is monotonically increasing integer. Note that you must provide exactly one of --record-size "
        "or --payload-file or --payload-monotonic.",
    )
    p.add_argument(
        "--payload-delimiter",
        default="\\n",
        help="provides delimiter to be used when --payload-file is provided. Defaults to new line.",
    )
    p.add_argument(
        "--throughput",
        type=float,
        required=True,
        help="throttle maximum message throughput to *approximately* THROUGHPUT messages/sec. "
        "Set this to -1 to disable throttling.",
    )
    p.add_argument(
        "--producer-props",
        nargs="+",
        metavar="PROP-NAME=PROP-VALUE",
        default=[],
        help="kafka producer related configuration properties like bootstrap.servers,client.id etc.",
    )
    p.add_argument("--producer.config", dest="producer_config", help="producer config properties file.")
    p.add_argument("--bootstrap-server", help="The server(s) to connect to (overrides producer properties).")
    p.add_argument("--print-metrics", action="store_true", help="print out metrics at the end of the test.")
    p.add_argument(
        "--transactional-id",
        help="The transactional id to use. This config takes precedence over the transactional.id specified via "
        "--producer.config or --producer-props. Note that if the transactional id is not specified while "
        "--transaction-duration-ms is provided, the default value for the transactional id will be "
        "performance-producer- followed by a random uuid.",
    )
    p.add_argument(
        "--transaction-duration-ms",
        type=int,
        metavar="TRANSACTION-DURATION",
        help="The max age of each transaction. The commitTransaction will be called after this time has elapsed. "
        "The value should be greater than 0. If the transactional id is specified via --producer-props, "
        "--producer.config, or --transactional-id but --transaction-duration-ms is not specified, the default "
        "value will be 3000.",
    )
    return p


DEFAULT_TRANSACTION_ID_PREFIX = "performance-producer-"
DEFAULT_TRANSACTION_DURATION_MS = 3000


def transaction_settings(args, props: dict) -> int | None:
    """Kafka's ConfigPostProcessor: transactions are on with ``--transaction-duration-ms``,
    ``--transactional-id`` or ``transactional.id`` in the properties; sets ``transactional.id`` in
    ``props`` and returns the duration (ms), or None without transactions."""
    duration = args.transaction_duration_ms
    if duration is not None and duration <= 0:
        raise SystemExit("--transaction-duration-ms should be greater than zero")
    if duration is None and args.transactional_id is None and "transactional.id" not in props:
        return None
    props["transactional.id"] = (
        args.transactional_id or props.get("transactional.id") or f"{DEFAULT_TRANSACTION_ID_PREFIX}{uuid.uuid4()}"
    )
    return duration if duration is not None else DEFAULT_TRANSACTION_DURATION_MS


def producer_props(args) -> dict:
    props: dict = {}
    if args.producer_config:
        props.update(load_properties(args.producer_config))
    for item in args.producer_props:
        if "=" not in item:
            raise SystemExit(f"Invalid property: {item}")
        k, v = item.split("=", 1)
        props[k.strip()] = v.strip()
    if args.bootstrap_server:
        props["bootstrap.servers"] = args.bootstrap_server
    if "bootstrap.servers" not in props:
        raise SystemExit(
            "Either --bootstrap-server or bootstrap.servers in --producer-props / --producer.config must be specified"
        )
    return props


def payloads(args) -> tuple[bytes | None, list[bytes]]:
    """``(fixed payload, payload list)``; both empty for ``--payload-monotonic`` (the record's number)."""
    if args.payload_monotonic:
        return None, []
    if args.record_size is not None:
        rng = random.Random()
        return bytes(rng.randrange(26) + 65 for _ in range(args.record_size)), []
    delimiter = args.payload_delimiter.encode().decode("unicode_escape")
    with open(args.payload_file, encoding="utf-8") as f:
        items = [s.encode() for s in f.read().split(delimiter) if s]
    if not items:
        raise SystemExit(f"File does not contain any payloads: {args.payload_file}")
    print(f"Number of messages read: {len(items)}")
    return None, items


def run(args, out=sys.stdout) -> int:
    props = producer_props(args)
    txn_duration_ms = transaction_settings(args, props)
    payload, payload_list = payloads(args)
    producer = None
    try:
        producer = KafkaProducer(props)
        if txn_duration_ms is not None:
            producer.init_transactions()
        return _run(args, producer, payload, payload_list, out, txn_duration_ms)
    except Exception as e:  # noqa: BLE001 - Kafka's tool dies with the exception: one line here, no traceback
        print(f"ERROR: {error_line(e)}", file=sys.stderr, flush=True)
        if producer is not None:
            producer.close(0)
        return 1


def _run(args, producer: KafkaProducer, payload, payload_list, out, txn_duration_ms: int | None = None) -> int:
    stats = Stats(args.num_records, out=out)
    rng = random.Random()
    start_ms = SYSTEM.milliseconds()
    throttler = ThroughputThrottler(args.throughput, start_ms)
    on_completion = stats.on_completion
    topic = args.topic
    send = producer.send
    throttled = args.throughput >= 0
    time_ns = _time.time_ns
    transactions = txn_duration_ms is not None
    txn_size = 0
    txn_start = 0
    # The common shape (one payload, no throttle, no transactions) runs the same sends as the general
    # loop with its per-record branches left out and arguments passed by position.
    plain = payload is not None and not transactions and not throttled
    for _ in range(args.num_records if plain else 0):
        send(topic, payload, None, None, time_ns() // 1_000_000, None, on_completion)
    for i in range(0 if plain else args.num_records):
        if transactions and txn_size == 0:
            producer.begin_transaction()
            txn_start = time_ns() // 1_000_000
        if payload is not None:
            value = payload
        elif payload_list:
            value = payload_list[rng.randrange(len(payload_list))]
        else:  # --payload-monotonic: the record number, as Kafka's Long.toString(i)
            value = str(i).encode()
        send_start = time_ns() // 1_000_000  # SYSTEM.milliseconds(): the wall clock record timestamps use
        send(topic, value, timestamp_ms=send_start, callback=on_completion)
        if transactions:
            txn_size += 1
            assert txn_duration_ms is not None  # transactions
            if txn_duration_ms <= send_start - txn_start:
                producer.commit_transaction()
                txn_size = 0
        if throttled and throttler.should_throttle(i, send_start):
            throttler.throttle()
    if transactions and txn_size:
        producer.commit_transaction()
    producer.flush()
    stats.print_total()
    if args.print_metrics:
        print(f"producer-metrics:record-send-total {{client-id={producer.client_id}}} : {stats.count}", file=out)
    producer.close()
    return 0


SWITCH_INTERVAL_S = 0.001


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # run as the command (bin/ script, console script): the tools' logging
        configure_tool_logging()
    # The sending loop is CPU-bound Python: with the default 5 ms GIL switch interval the producer's
    # Sender thread waits up to 5 ms after each socket call (a GIL convoy) and latency grows to the
    # whole buffer.memory. 1 ms keeps the I/O thread responsive (like sizing a JVM for the tool).
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    return run(_parser().parse_args(argv))


if __name__ == "__main__":
    configure_tool_logging()
    sys.exit(main())
