"""kafka-console-consumer: print records to standard output (``org.apache.kafka.tools.consumer.ConsoleConsumer``).

    bin/kafka-console-consumer --bootstrap-server HOST:PORT (--topic T | --include REGEX) [--from-beginning]
        [--partition P [--offset earliest|latest|N]] [--max-messages N] [--timeout-ms MS]
        [--property print.key=true] [--property key.separator=:] [--consumer-property k=v ...]

Formatter properties as Kafka's DefaultMessageFormatter: ``print.timestamp`` (``CreateTime:ts`` /
``LogAppendTime:ts``), ``print.partition`` (``Partition:p``), ``print.offset`` (``Offset:o``),
``print.headers`` (``k:v,k2:v2`` or ``NO_HEADERS``), ``print.key``, ``print.value`` (default true),
``key.separator`` / ``headers.separator`` / ``line.separator``, ``null.literal`` (default ``null``).
Ends after ``--max-messages`` records or ``--timeout-ms`` without a record, printing
``Processed a total of N messages`` on stderr. Uses pykbroker's KafkaConsumer: with ``--partition``
it assigns that partition; otherwise it subscribes with ``--group`` (default: a new
``console-consumer-NNNNN`` group, as Kafka does), committing offsets as it goes. ``--include REGEX`` subscribes
to every non-internal topic whose whole name matches (Kafka's IncludeList: ``,`` also separates alternatives),
looked up again every ``metadata.max.age.ms`` (every second while none matches) so new topics join in.

A missing topic is waited for, as Kafka's consumer does: the consumer logs Kafka's metadata WARN on
stderr (and the broker creates the topic if ``auto.create.topics.enable``). Errors end the tool as in
Kafka, logged on one line (no traceback): while setting up ``Unknown error when running consumer: ...``
(exit 1), while consuming ``Error processing message, terminating consumer process: ...`` (then the
record count, exit 0, as Kafka's process loop returns normally).
"""

from __future__ import annotations

import argparse
import random
import re
import sys

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.clients.consumer import KafkaConsumer
from pykbroker.metadata.topic_names import INTERNAL_TOPICS
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.tools.command_line_utils import (
    ToolArgumentParser,
    add_version_option,
    client_properties,
    configure_tool_logging,
    error_line,
    parse_key_values,
)
from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import SYSTEM


def _parser() -> argparse.ArgumentParser:
    p = ToolArgumentParser(
        prog="kafka-console-consumer",
        description="This tool helps to read data from Kafka topics and outputs it to standard output.",
    )
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--topic")
    p.add_argument("--include", help="Regular expression specifying list of topics to include for consumption.")
    p.add_argument("--group")
    p.add_argument("--from-beginning", action="store_true")
    p.add_argument("--partition", type=int)
    p.add_argument("--offset", default="latest")
    p.add_argument("--max-messages", type=int)
    p.add_argument("--timeout-ms", type=int)
    p.add_argument("--property", action="append", default=[])
    p.add_argument("--consumer-property", action="append", default=[])
    p.add_argument("--consumer.config", dest="consumer_config")
    p.add_argument("--isolation-level", default="read_uncommitted")
    add_version_option(p)
    return p


class IncludeSubscription:
    """The topics matching ``--include`` (Kafka's IncludeList), looked up from the cluster's metadata; the consumer
    is subscribed to them again whenever the set changes."""

    def __init__(self, regex: str, bootstrap: str, max_age_ms: int):
        self.pattern = re.compile(regex.strip().strip("'\"").replace(",", "|"))
        self.bootstrap = bootstrap
        self.max_age_ms = max_age_ms
        self.topics: list[str] | None = None
        self.next_check_ms = 0

    def matching(self) -> list[str]:
        with BrokerConnection.to(self.bootstrap, client_id="console-consumer") as conn:
            r = conn.request(
                ApiKeys.METADATA,
                12,
                {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
            )
        return sorted(
            t["name"]
            for t in r["topics"]
            if t["error_code"] == errors.NONE
            and not t["is_internal"]
            and t["name"] not in INTERNAL_TOPICS
            and self.pattern.fullmatch(t["name"])
        )

    def maybe_update(self, consumer: KafkaConsumer) -> None:
        now = SYSTEM.hi_res_milliseconds()
        if now < self.next_check_ms:
            return
        topics = self.matching()
        if topics != self.topics:
            self.topics = topics
            consumer.subscribe(topics)
        self.next_check_ms = now + (self.max_age_ms if topics else 1000)


class DefaultMessageFormatter:
    def __init__(self, props: dict[str, str]):
        def flag(key: str, default: str = "false") -> bool:
            return props.get(key, default).lower() == "true"

        self.print_timestamp = flag("print.timestamp")
        self.print_partition = flag("print.partition")
        self.print_offset = flag("print.offset")
        self.print_headers = flag("print.headers")
        self.print_key = flag("print.key")
        self.print_value = flag("print.value", "true")
        self.key_separator = props.get("key.separator", "\t").encode()
        self.line_separator = props.get("line.separator", "\n").encode()
        self.headers_separator = props.get("headers.separator", ",").encode()
        self.null_literal = props.get("null.literal", "null").encode()

    def format(self, r) -> bytes:
        out: list[bytes] = []
        sep = self.key_separator
        if self.print_timestamp:
            kind = "LogAppendTime" if r.timestamp_type == 1 else "CreateTime"
            out += [f"{kind}:{r.timestamp}".encode() if r.timestamp >= 0 else b"NO_TIMESTAMP", sep]
        if self.print_partition:
            out += [b"Partition:%d" % r.partition, sep]
        if self.print_offset:
            out += [b"Offset:%d" % r.offset, sep]
        if self.print_headers:
            headers = [k.encode() + b":" + (v if v is not None else self.null_literal) for k, v in r.headers]
            out += [self.headers_separator.join(headers) if headers else b"NO_HEADERS", sep]
        if self.print_key:
            out += [r.key if r.key is not None else self.null_literal, sep]
        if self.print_value:
            out.append(r.value if r.value is not None else self.null_literal)
        elif out:
            out.pop()
        out.append(self.line_separator)
        return b"".join(out)


def main(argv: list[str] | None = None, stdout=None) -> int:
    if argv is None:  # run as the command (bin/ script, console script): the tools' logging
        configure_tool_logging()
    args = _parser().parse_args(argv)
    out = stdout or sys.stdout.buffer
    if (args.topic is None) == (args.include is None):
        print("Exactly one of --include/--topic is required.", file=sys.stderr)
        return 1
    if args.partition is not None and args.topic is None:
        print("The topic is required when partition is specified.", file=sys.stderr)
        return 1
    if args.group and args.partition is not None:
        print("Options group and partition cannot be specified together.", file=sys.stderr)
        return 1
    include = None
    if args.include is not None:
        try:
            re.compile(args.include)
        except re.error as e:
            print(f"Invalid regular expression {args.include!r}: {e}", file=sys.stderr)
            return 1
    formatter = DefaultMessageFormatter(parse_key_values(args.property))
    props = client_properties(args.consumer_config, parse_key_values(args.consumer_property), args.bootstrap_server)
    props.setdefault("auto.offset.reset", "earliest" if args.from_beginning else "latest")
    props["isolation.level"] = args.isolation_level
    if args.partition is None:
        props.setdefault("group.id", args.group or f"console-consumer-{random.randrange(100000)}")
    log = get_logger("ConsoleConsumer")
    try:
        consumer = KafkaConsumer(props)
        if args.include is not None:
            include = IncludeSubscription(
                args.include, args.bootstrap_server, int(props.get("metadata.max.age.ms", 300000))
            )
            include.maybe_update(consumer)
        else:
            _start(consumer, args)
    except Exception as e:  # noqa: BLE001 - Kafka: "Unknown error when running consumer", exit 1
        log.error(f"Unknown error when running consumer: {error_line(e)}")
        return 1
    count = 0
    try:
        last_record = SYSTEM.hi_res_milliseconds()
        while args.max_messages is None or count < args.max_messages:
            if include is not None:
                include.maybe_update(consumer)
            records = consumer.poll(timeout_ms=200)
            if not records:
                if args.timeout_ms is not None and SYSTEM.hi_res_milliseconds() - last_record >= args.timeout_ms:
                    break
                continue
            last_record = SYSTEM.hi_res_milliseconds()
            for r in records:
                out.write(formatter.format(r))
                count += 1
                if args.max_messages is not None and count >= args.max_messages:
                    break
            out.flush()
    except KeyboardInterrupt:
        pass
    except Exception as e:  # noqa: BLE001 - Kafka logs it (one line here) and ends as after the last message
        log.error(f"Error processing message, terminating consumer process: {error_line(e)}")
    finally:
        try:
            consumer.close()
        except Exception:  # noqa: BLE001 - a dead broker must not turn the exit into a traceback
            pass
        print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


def _start(consumer: KafkaConsumer, args) -> None:
    if args.partition is None:
        consumer.subscribe([args.topic])
        return
    consumer.assign([(args.topic, args.partition)])
    if args.offset == "earliest" or (args.offset == "latest" and args.from_beginning):
        consumer.seek_to_beginning()
    elif args.offset == "latest":
        consumer.seek_to_end()
    else:
        consumer.seek(args.topic, args.partition, int(args.offset))


if __name__ == "__main__":
    configure_tool_logging()
    sys.exit(main())
