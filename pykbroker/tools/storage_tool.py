"""kafka-storage: format storage directories the KRaft way (``org.apache.kafka.tools.StorageTool``).

    bin/kafka-storage random-uuid
    bin/kafka-storage format -t <cluster-id> -c server.properties [--ignore-formatted]
    bin/kafka-storage info -c server.properties

``format`` writes ``meta.properties`` (version 1, cluster.id, node.id, directory.id) into every
``log.dirs`` entry and the ``metadata.log.dir``; a directory already formatted makes it fail
(exit 1) unless ``--ignore-formatted``. Relative data directories are taken from the properties file's
directory, as the broker takes them. The broker also formats empty directories itself on first start.
"""

from __future__ import annotations

import sys

from pykbroker.config.config_def import ConfigException
from pykbroker.config.kafka_config import KafkaConfig
from pykbroker.config.properties import PropertiesError
from pykbroker.server.meta_properties import random_uuid, read_meta_properties, uuid_from_string, write_meta_properties
from pykbroker.tools.command_line_utils import ToolArgumentParser, configure_tool_logging


def _config(path: str) -> KafkaConfig:
    """As the broker reads it: relative data directories are taken from the file's directory."""
    from pykbroker.config.server_properties import load_server_properties

    return KafkaConfig(load_server_properties(path))


def _dirs(config: KafkaConfig) -> list[str]:
    return list(dict.fromkeys(config.log_dirs + [config.metadata_log_dir]))


def format_storage(config: KafkaConfig, cluster_id: str, ignore_formatted: bool, out=sys.stdout) -> int:
    try:
        if len(uuid_from_string(cluster_id).bytes) != 16:
            raise ValueError
    except (ValueError, TypeError):
        print(
            f"Cluster ID string {cluster_id} does not appear to be a valid UUID: "
            "Input string with prefix `" + cluster_id[:22] + "` is too short to be decoded as a base64 UUID",
            file=sys.stderr,
        )
        return 1
    formatted = [d for d in _dirs(config) if read_meta_properties(d) is not None]
    if formatted and not ignore_formatted:
        print(
            f"Log directory {formatted[0]} is already formatted. Use --ignore-formatted to ignore this "
            "directory and format the others.",
            file=sys.stderr,
        )
        return 1
    for d in _dirs(config):
        if d in formatted:
            continue
        write_meta_properties(d, cluster_id, config.node_id)
        print(f"Formatting {d} with metadata.version 4.0-IV3.", file=out)
    return 0


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # run as the command (bin/ script, console script): the tools' logging
        configure_tool_logging()
    parser = ToolArgumentParser(prog="kafka-storage", description="The Kafka storage tool.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("random-uuid", help="Print a random UUID.")
    fmt = sub.add_parser("format", help="Format the Kafka log directories on this node.")
    fmt.add_argument("--config", "-c", required=True, help="The Kafka configuration file to use.")
    fmt.add_argument("--cluster-id", "-t", required=True, help="The cluster ID to use.")
    fmt.add_argument(
        "--ignore-formatted",
        "-g",
        action="store_true",
        help="When this option is passed, the format command will skip over already formatted directories "
        "rather than failing.",
    )
    fmt.add_argument("--release-version", "-r", help="Accepted for compatibility; metadata.version is 4.0-IV3.")
    fmt.add_argument("--standalone", "-s", action="store_true", help="Accepted for compatibility (single voter).")
    info = sub.add_parser("info", help="Get information about the Kafka log directories on this node.")
    info.add_argument("--config", "-c", required=True)
    args = parser.parse_args(argv)
    if args.command == "random-uuid":
        print(random_uuid())
        return 0
    try:
        config = _config(args.config)
    except (ConfigException, OSError, PropertiesError) as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    if args.command == "format":
        return format_storage(config, args.cluster_id, args.ignore_formatted)
    for d in _dirs(config):
        meta = read_meta_properties(d)
        if meta is None:
            print(f"Found problem:\n  {d} is not formatted.")
        else:
            print(
                f"Found log directory:\n  {d}\n\nFound metadata: {{cluster.id={meta.get('cluster.id')}, "
                f"node.id={meta.get('node.id')}, directory.id={meta.get('directory.id')}, "
                f"version={meta.get('version')}}}"
            )
    return 0


if __name__ == "__main__":
    configure_tool_logging()
    sys.exit(main())
