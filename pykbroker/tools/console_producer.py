"""kafka-console-producer: one record per line of standard input (``org.apache.kafka.tools.ConsoleProducer``).

    bin/kafka-console-producer --bootstrap-server HOST:PORT --topic T [--property parse.key=true]
        [--property key.separator=:] [--producer-property k=v ...] [--producer.config FILE]
        [--request-required-acks -1] [--compression-codec lz4] [--sync]

Kafka's line reader properties: ``parse.key`` (default false), ``key.separator`` (default tab),
``ignore.error`` (a line without the separator is sent with a null key instead of failing),
``null.marker`` (a key or value equal to it is sent as null). Uses pykbroker's KafkaProducer; exits
1 if a record could not be delivered, or with one ``ERROR: ...`` line on stderr when sending stops
(e.g. the topic's metadata is not available within ``max.block.ms``). Client logs go to stderr (WARN).
"""

from __future__ import annotations

import argparse
import sys

from pykbroker.clients.producer import KafkaProducer
from pykbroker.tools.command_line_utils import (
    ToolArgumentParser,
    add_version_option,
    client_properties,
    configure_tool_logging,
    error_line,
    parse_key_values,
)


def _parser() -> argparse.ArgumentParser:
    p = ToolArgumentParser(
        prog="kafka-console-producer",
        description="This tool helps to read data from standard input and publish it to Kafka.",
    )
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--property", action="append", default=[], help="line reader property: key=value")
    p.add_argument("--producer-property", action="append", default=[], help="producer property: key=value")
    p.add_argument("--producer.config", dest="producer_config")
    p.add_argument("--request-required-acks", default="-1")
    p.add_argument("--compression-codec", nargs="?", const="gzip")
    p.add_argument("--sync", action="store_true", help="send each record synchronously")
    p.add_argument("--request-timeout-ms", type=int, default=1500)
    add_version_option(p)
    return p


def main(argv: list[str] | None = None, stdin=None) -> int:
    if argv is None:  # run as the command (bin/ script, console script): the tools' logging
        configure_tool_logging()
    args = _parser().parse_args(argv)
    stdin = stdin or sys.stdin.buffer
    reader = parse_key_values(args.property)
    parse_key = reader.get("parse.key", "false").lower() == "true"
    separator = reader.get("key.separator", "\t").encode()
    ignore_error = reader.get("ignore.error", "false").lower() == "true"
    null_marker_text = reader.get("null.marker")
    null_marker = null_marker_text.encode() if null_marker_text is not None else None
    props = {"acks": args.request_required_acks, "linger.ms": "1000" if not args.sync else "0"}
    if args.compression_codec:
        props["compression.type"] = args.compression_codec
    props.update(
        client_properties(args.producer_config, parse_key_values(args.producer_property), args.bootstrap_server)
    )
    failures: list[Exception] = []

    def on_completion(_metadata: object, error: Exception | None) -> None:
        if error is not None:
            failures.append(error)

    producer = None
    try:
        producer = KafkaProducer(props)
        for line_no, raw in enumerate(stdin, 1):
            line = raw.rstrip(b"\r\n")
            key = None
            value = line
            if parse_key:
                if separator in line:
                    key, value = line.split(separator, 1)
                elif not ignore_error:
                    print(
                        f"No key separator found on line number {line_no}: '{line.decode(errors='replace')}'",
                        file=sys.stderr,
                    )
                    return 1
            if null_marker is not None:
                key = None if key == null_marker else key
                value = None if value == null_marker else value
            future = producer.send(args.topic, value, key=key, callback=on_completion)
            if args.sync:
                future.get(60)
        producer.flush(120)
    except Exception as e:  # noqa: BLE001 - Kafka's tool exits 1 on it: one line, no traceback
        print(f"ERROR: {error_line(e)}", file=sys.stderr)
        if producer is not None:
            producer.close(0)
            producer = None
        return 1
    finally:
        if producer is not None:
            producer.close()
    for failure in failures[:5]:
        print(f"Error when sending message to topic {args.topic}: {failure!r}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    configure_tool_logging()
    sys.exit(main())
