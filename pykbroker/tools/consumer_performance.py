"""kafka-consumer-perf-test: the consumer benchmark (Kafka's ``org.apache.kafka.tools.ConsumerPerformance``).

    bin/kafka-consumer-perf-test --bootstrap-server HOST:PORT --topic T --messages N [--group G]
        [--fetch-size BYTES] [--timeout MS] [--from-latest] [--consumer.config FILE] [--show-detailed-stats]
        [--reporting-interval MS] [--date-format yyyy-MM-dd HH:mm:ss:SSS] [--hide-header]

Subscribes to ``T`` in group ``G`` (default ``perf-consumer-<random>``) from the earliest offset (the latest with
``--from-latest``) and polls until ``N`` messages are read or none came for ``--timeout`` ms (then Kafka's
``WARNING: Exiting before consuming the expected number of messages: ...`` line). Prints Kafka's header
``start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms,
fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec`` and one row (``--show-detailed-stats``: header ``time, threadId,
...`` and a row every ``--reporting-interval`` ms instead). Bytes are keys plus values. Uses pykbroker's own
:class:`~pykbroker.clients.consumer.KafkaConsumer`; errors end it with ``ERROR: ...`` on stderr, exit status 1.
"""

from __future__ import annotations

import random
import re
import sys
import time

from pykbroker.clients.consumer import KafkaConsumer
from pykbroker.tools.command_line_utils import (
    ToolArgumentParser,
    add_version_option,
    client_properties,
    configure_tool_logging,
    error_line,
)

DEFAULT_DATE_FORMAT = "yyyy-MM-dd HH:mm:ss:SSS"
_JAVA_DATE_FIELDS = {"yyyy": "%Y", "yy": "%y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}


def format_date(pattern: str, ms: int) -> str:
    """A Java SimpleDateFormat pattern (the letters y, M, d, H, m, s, S) applied to ``ms`` in local time."""
    local = time.localtime(ms / 1000)

    def field(m: re.Match) -> str:
        token = m.group(0)
        if token[0] == "S":
            return f"{ms % 1000:0{len(token)}d}"
        return time.strftime(_JAVA_DATE_FIELDS[token], local)

    return re.sub(r"yyyy|yy|MM|dd|HH|mm|ss|S+", field, pattern)


def _java_double(value: float) -> str:
    return f"{value:.4f}"


def _div(a: float, b: float) -> float:
    if b == 0:
        return float("nan") if a == 0 else float("inf")
    return a / b


def _fmt(value: float) -> str:
    if value != value:
        return "NaN"
    if value == float("inf"):
        return "Infinity"
    return _java_double(value)


def header(detailed: bool) -> str:
    fields = ", rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    if detailed:
        return "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec" + fields
    return "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec" + fields


def final_row(date_format: str, start_ms: int, end_ms: int, nbytes: int, nmsgs: int, join_ms: int) -> str:
    elapsed_sec = (end_ms - start_ms) / 1000.0
    fetch_ms = (end_ms - start_ms) - join_ms
    mb = nbytes / (1024 * 1024)
    return ", ".join(
        [
            format_date(date_format, start_ms),
            format_date(date_format, end_ms),
            _fmt(mb),
            _fmt(_div(mb, elapsed_sec)),
            str(nmsgs),
            _fmt(_div(nmsgs, elapsed_sec)),
            str(join_ms),
            str(fetch_ms),
            _fmt(_div(mb, fetch_ms / 1000.0)),
            _fmt(_div(nmsgs, fetch_ms / 1000.0)),
        ]
    )


def progress_row(date_format: str, now_ms: int, last_ms: int, nbytes: int, last_bytes: int, nmsgs: int,
                 last_msgs: int, join_ms: int) -> str:  # fmt: skip
    elapsed_ms = now_ms - last_ms
    mb = nbytes / (1024 * 1024)
    interval_mb = (nbytes - last_bytes) / (1024 * 1024)
    interval_msgs = nmsgs - last_msgs
    mb_sec = _div(1000.0 * interval_mb, elapsed_ms)
    msg_sec = _div(1000.0 * interval_msgs, elapsed_ms)
    fetch_ms = elapsed_ms - join_ms
    fetch_mb_sec = 0.0 if fetch_ms <= 0 else 1000.0 * interval_mb / fetch_ms
    fetch_msg_sec = 0.0 if fetch_ms <= 0 else 1000.0 * interval_msgs / fetch_ms
    return (
        f"{format_date(date_format, now_ms)}, 0, {_fmt(mb)}, {_fmt(mb_sec)}, {nmsgs}, {_fmt(msg_sec)}, "
        f"{join_ms}, {fetch_ms}, {_fmt(fetch_mb_sec)}, {_fmt(fetch_msg_sec)}"
    )


def build_parser() -> ToolArgumentParser:
    p = ToolArgumentParser(
        prog="kafka-consumer-perf-test", description="This tool is used to verify the consumer performance."
    )
    p.add_argument("--bootstrap-server", "--broker-list", dest="bootstrap_server", required=True)
    p.add_argument("--topic", required=True, help="REQUIRED: The topic to consume from.")
    p.add_argument("--group", default=None, help="The group id to consume on.")
    p.add_argument("--fetch-size", type=int, default=1024 * 1024, help="The amount of data to fetch in a request.")
    p.add_argument("--from-latest", action="store_true", help="Start from the latest message instead of the earliest")
    p.add_argument("--consumer.config", dest="consumer_config", default=None, help="Consumer config properties file.")
    p.add_argument("--show-detailed-stats", action="store_true", help="Report stats at every reporting interval.")
    p.add_argument("--reporting-interval", type=int, default=5000, help="Interval in ms for detailed stats.")
    p.add_argument("--date-format", default=DEFAULT_DATE_FORMAT, help="The date format to use for formatting time.")
    p.add_argument("--hide-header", action="store_true", help="If set, skips printing the header for the stats")
    p.add_argument("--messages", type=int, required=True, help="REQUIRED: The number of messages to consume.")
    p.add_argument("--timeout", type=int, default=10000, help="The maximum allowed time in ms between records.")
    add_version_option(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_tool_logging()
    if args.reporting_interval <= 0:
        print("Reporting interval must be greater than 0.", file=sys.stderr)
        return 1
    props = client_properties(args.consumer_config, {}, args.bootstrap_server)
    props["group.id"] = args.group or props.get("group.id") or f"perf-consumer-{random.randint(0, 99999)}"
    props["max.partition.fetch.bytes"] = str(args.fetch_size)
    props["auto.offset.reset"] = "latest" if args.from_latest else "earliest"
    props["check.crcs"] = "false"
    out = sys.stdout
    if not args.hide_header:
        out.write(header(args.show_detailed_stats) + "\n")
        out.flush()
    consumer = None
    try:
        consumer = KafkaConsumer(props)
        start_ms = int(time.time() * 1000)
        now_ms = join_start_ms = last_report_ms = last_consumed_ms = start_ms
        join_ms = 0
        assigned = False
        nbytes = nmsgs = last_bytes = last_msgs = 0
        consumer.subscribe([args.topic])
        while nmsgs < args.messages and now_ms - last_consumed_ms <= args.timeout:
            records = consumer.poll(100)
            now_ms = int(time.time() * 1000)
            if not assigned and consumer.assignment:
                assigned = True  # Kafka's onPartitionsAssigned: the rebalance took this long
                join_ms += now_ms - join_start_ms
            if records:
                last_consumed_ms = now_ms
            for record in records:
                nmsgs += 1
                nbytes += (len(record.key) if record.key is not None else 0) + (
                    len(record.value) if record.value is not None else 0
                )
                if now_ms - last_report_ms >= args.reporting_interval:
                    if args.show_detailed_stats:
                        out.write(
                            progress_row(args.date_format, now_ms, last_report_ms, nbytes, last_bytes, nmsgs,
                                         last_msgs, join_ms) + "\n"
                        )  # fmt: skip
                        out.flush()
                    last_report_ms, last_bytes, last_msgs = now_ms, nbytes, nmsgs
        if nmsgs < args.messages:
            out.write(
                f"WARNING: Exiting before consuming the expected number of messages: timeout ({args.timeout} ms) "
                "exceeded. You can use the --timeout option to increase the timeout.\n"
            )
        end_ms = int(time.time() * 1000)
        if not args.show_detailed_stats:
            out.write(final_row(args.date_format, start_ms, end_ms, nbytes, nmsgs, join_ms) + "\n")
        out.flush()
    except Exception as e:  # noqa: BLE001 - one line for the user, as Kafka's tool prints
        out.flush()
        print(f"ERROR: {error_line(e)}", file=sys.stderr)
        return 1
    finally:
        if consumer is not None:
            try:
                consumer.close()
            except Exception:  # noqa: BLE001 - closing is best effort after the report
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
