"""kafka-storage: format storage directories the KRaft way (``kafka.tools.StorageTool`` and
``org.apache.kafka.metadata.storage.Formatter``).

    bin/kafka-storage random-uuid
    bin/kafka-storage format -t <cluster-id> -c server.properties [--ignore-formatted]
        [--release-version 3.9-IV0] [--feature transaction.version=1 ...]
        [--add-scram 'SCRAM-SHA-256=[name=alice,password=alice-secret]' ...]
        [--standalone | --initial-controllers LIST | --no-initial-controllers]
    bin/kafka-storage info -c server.properties

``format`` writes ``meta.properties`` (version 1, cluster.id, node.id, a new directory.id) into every
``log.dirs`` entry and the ``metadata.log.dir`` (in sorted order, printing Kafka's ``Formatting data
directory|metadata directory <dir> with metadata.version 4.0-IV3.``), and the feature levels the cluster starts
at to ``<metadata.log.dir>/bootstrap.checkpoint`` (Kafka's ``Formatter``): ``metadata.version`` of
``--release-version`` (default 4.0-IV3, Kafka 4.0's latest) or of ``--feature metadata.version=N``, and every
other feature at ``--feature NAME=LEVEL`` or else at Kafka's default for that release, capped to what pykbroker
supports (:mod:`pykbroker.metadata.features`). A level pykbroker does not support, an unknown feature or a
missing dependency fails the command with Kafka's message. Every node of a cluster (each voter
and each broker) is formatted with the same ``-t``; only pykbroker's single-node default formats itself on
first start. A directory already formatted fails the command (exit 1) unless ``--ignore-formatted``; one
formatted for another cluster or node always does (``MetaPropertiesEnsemble.verify``'s messages).
``--add-scram`` adds SCRAM credentials (``metadata.version`` 3.5-IV2 and later) to the bootstrap checkpoint, which
the controller appends to the metadata log when it first leads.

Dynamic quorums (KIP-853): as in Kafka, a controller with no ``controller.quorum.voters`` needs one of
``--standalone``, ``--initial-controllers`` or ``--no-initial-controllers``. ``--standalone`` (the node as the
one voter: its id, its first controller listener's advertised host and port, a new directory id) and
``--initial-controllers id@host:port:directory-id,...`` write the bootstrap snapshot
``__cluster_metadata-0/00000000000000000000-0000000000.checkpoint`` into the metadata log dir with a
KRaftVersionRecord (``kraft.version`` 1) and a VotersRecord (Kafka's ``Formatter.writeDynamicQuorumSnapshot``),
and a voter's metadata directory gets its directory id from that list; ``--no-initial-controllers`` writes no
voter set (the node joins with ``kafka-metadata-quorum add-controller``). With ``controller.quorum.voters`` set
(a static quorum), ``--standalone`` and ``--initial-controllers`` print a note and the static voters are used.
Relative data directories are taken from the properties file's directory, as the broker takes them.
"""

from __future__ import annotations

import base64
import os
import sys
import time
from typing import Any

from pykbroker.config.broker_configs.kraft_configs import CONTROLLER_QUORUM_VOTERS_CONFIG
from pykbroker.config.config_def import ConfigException
from pykbroker.config.kafka_config import KafkaConfig
from pykbroker.config.properties import PropertiesError
from pykbroker.metadata import features as fv
from pykbroker.metadata.bootstrap import write_bootstrap_records
from pykbroker.metadata.feature_control_manager import feature_level_bootstrap_records
from pykbroker.metadata.records import ApiMessageAndVersion, user_scram_credential_record
from pykbroker.metadata.scram_control_manager import keys_from_salted_password
from pykbroker.raft.control_records import (
    KRAFT_VERSION,
    KRAFT_VOTERS,
    KRaftVersionRecord,
    Voter,
    VoterEndpoint,
    VotersRecord,
    control_key,
)
from pykbroker.raft.records_snapshot import RecordsSnapshotWriter
from pykbroker.raft.replicated_log import LogRecord
from pykbroker.raft.snapshots import FileRawSnapshotWriter, SnapshotId
from pykbroker.security.scram import DEFAULT_ITERATIONS, MIN_ITERATIONS, credential_for
from pykbroker.security.scram import MECHANISMS as SCRAM_MECHANISMS
from pykbroker.server.meta_properties import (
    CLUSTER_ID_PROP,
    NODE_ID_PROP,
    InconsistentMetaPropertiesError,
    random_uuid,
    read_meta_properties,
    uuid_from_string,
    uuid_to_string,
    verify_meta_properties,
    write_meta_properties,
)
from pykbroker.tools.command_line_utils import ToolArgumentParser, configure_tool_logging


def _config(path: str) -> KafkaConfig:
    """As the broker reads it: relative data directories are taken from the file's directory."""
    from pykbroker.config.server_properties import load_server_properties

    return KafkaConfig(load_server_properties(path))


RELEASE_VERSION = fv.metadata_version(fv.LATEST_PRODUCTION).version


def _dirs(config: KafkaConfig) -> list[str]:
    """The log dirs and the metadata log dir, sorted (Kafka's ``configToLogDirectories``: a TreeSet)."""
    return sorted(set(config.log_dirs + [config.metadata_log_dir]))


class TerseFailure(Exception):
    """Kafka's TerseFailure/FormatterException: the message alone goes to stderr, exit status 1."""


DYNAMIC_FLAGS = ("standalone", "initial_controllers")


def _voter_ids(config: KafkaConfig) -> list[int]:
    return [int(v.split("@", 1)[0]) for v in config[CONTROLLER_QUORUM_VOTERS_CONFIG] or [] if v]


def check_quorum_flags(
    config: KafkaConfig, standalone: bool, initial_controllers: str | None, no_initial: bool
) -> str | None:
    """Kafka's checks of the KIP-853 flags, for a static-only quorum; returns a note to print, or None."""
    is_controller = "controller" in config.process_roles
    voters = _voter_ids(config)
    if standalone and not is_controller:
        raise TerseFailure("You can only use --standalone on a controller.")
    if not (standalone or initial_controllers or no_initial) and is_controller and not voters:
        raise TerseFailure(
            "Because controller.quorum.voters is not set on this controller, you must specify one of the "
            "following: --standalone, --initial-controllers, or --no-initial-controllers."
        )
    flag = "--standalone" if standalone else "--initial-controllers" if initial_controllers else None
    if flag is None or not voters:
        return None
    return (
        f"controller.quorum.voters is set (a static quorum): {flag} is ignored and this node is formatted for the "
        f"static quorum of controller.quorum.voters ({','.join(config[CONTROLLER_QUORUM_VOTERS_CONFIG])})."
    )


def parse_initial_controllers(text: str, listener: str) -> list[Voter]:
    """Kafka's ``DynamicVoters.parse``: ``id@host:port:directory-id`` entries, comma-separated (the directory id
    a Kafka base64 Uuid); TerseFailure on a malformed entry or a repeated id or directory id."""
    voters: dict[int, Voter] = {}
    for entry in text.split(","):
        entry = entry.strip()
        node, at, rest = entry.partition("@")
        host_port, colon, directory = rest.rpartition(":")
        host, colon2, port = host_port.rpartition(":")
        try:
            if not (at and colon and colon2 and host):
                raise ValueError
            voter_id, port_number = int(node), int(port)
            directory_id = uuid_from_string(directory)
            if voter_id < 0 or not 0 < port_number < 65536:
                raise ValueError
        except ValueError:
            raise TerseFailure(f"Unable to parse {entry!r}: expected id@host:port:directory-id") from None
        if voter_id in voters:
            raise TerseFailure(f"Node id {voter_id} was specified more than once.")
        if any(v.directory_id == directory_id for v in voters.values()):
            raise TerseFailure(f"Directory id {directory} was specified more than once.")
        voters[voter_id] = Voter(voter_id, directory_id, (VoterEndpoint(listener, host.strip("[]"), port_number),))
    return list(voters.values())


def standalone_voter(config: KafkaConfig) -> Voter:
    """Kafka's ``createStandaloneDynamicVoters``: this node, its first controller listener (advertised, else
    bound; host ``localhost`` when unset) and a new directory id."""
    names = config.controller_listener_names
    if not names:
        raise TerseFailure("No controller listeners found.")
    listener = names[0]
    endpoints = [e for e in config.advertised_listeners if e.listener_name == listener] or [
        e for e in config.listeners if e.listener_name == listener
    ]
    if not endpoints:
        raise TerseFailure("No controller listeners found.")
    host = endpoints[0].host or "localhost"
    directory_id = uuid_from_string(random_uuid())
    return Voter(config.node_id, directory_id, (VoterEndpoint(listener, host, endpoints[0].port),))


def write_dynamic_quorum_snapshot(metadata_log_dir: str, voters: list[Voter], kraft_version: int = 1) -> str:
    """Kafka's ``Formatter.writeDynamicQuorumSnapshot``: the bootstrap snapshot (id 0-0) with the
    KRaftVersionRecord and the VotersRecord; returns its path."""
    directory = os.path.join(metadata_log_dir, "__cluster_metadata-0")
    os.makedirs(directory, exist_ok=True)
    raw = FileRawSnapshotWriter(directory, SnapshotId(0, 0), lambda _: None)
    control = [
        LogRecord(control_key(KRAFT_VERSION), KRaftVersionRecord(kraft_version).encode()),
        LogRecord(control_key(KRAFT_VOTERS), VotersRecord(tuple(sorted(voters, key=lambda v: v.voter_id))).encode()),
    ]
    RecordsSnapshotWriter(raw, _NO_SERDE, int(time.time() * 1000), control).freeze()
    return raw.path


class _NoSerde:
    def write(self, record: object) -> bytes:
        raise TypeError("the bootstrap snapshot holds control records only")

    def read(self, value: bytes) -> object:
        raise TypeError("the bootstrap snapshot holds control records only")


_NO_SERDE: Any = _NoSerde()


def parse_scram(value: str) -> ApiMessageAndVersion:
    """Kafka's ``--add-scram`` argument: ``SCRAM-SHA-256=[name=alice,password=alice-secret]`` or with
    ``iterations=N``, ``salt=<base64>``, ``saltedpassword=<base64>``. Raises TerseFailure with Kafka's
    messages."""
    mechanism, sep, rest = value.partition("=")
    if not sep or mechanism not in SCRAM_MECHANISMS:
        raise TerseFailure(f"The add-scram mechanism {mechanism} is not supported.")
    if not (rest.startswith("[") and rest.endswith("]")):
        raise TerseFailure(f"Expected configuration string to start with [ and end with ], but got {rest}")
    fields: dict[str, str] = {}
    for part in rest[1:-1].split(","):
        key, eq, val = part.partition("=")
        if not eq:
            raise TerseFailure(f"Unable to parse {part} in {value}: expected key=value")
        fields[key.strip().lower()] = val.strip().strip('"')
    name = fields.get("name")
    if not name:
        raise TerseFailure("You must supply 'name' to add-scram")
    iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    if not MIN_ITERATIONS <= iterations <= 16384:
        raise TerseFailure(f"The 'iterations' value must be >= {MIN_ITERATIONS} and <= 16384 for add-scram")
    mech_type = SCRAM_MECHANISMS[mechanism][1]
    if "saltedpassword" in fields:
        if "password" in fields:
            raise TerseFailure("You must only supply one of 'password' or 'saltedpassword' to add-scram")
        if "salt" not in fields:
            raise TerseFailure("You must supply 'salt' with 'saltedpassword' to add-scram")
        salt = base64.b64decode(fields["salt"])
        stored, server = keys_from_salted_password(mech_type, base64.b64decode(fields["saltedpassword"]))
        return user_scram_credential_record(name, mech_type, salt, stored, server, iterations)
    if "password" not in fields:
        raise TerseFailure("You must supply one of 'password' or 'saltedpassword' to add-scram")
    given_salt = base64.b64decode(fields["salt"]) if "salt" in fields else None
    cred = credential_for(fields["password"], mechanism, iterations, given_salt)
    return user_scram_credential_record(name, mech_type, cred.salt, cred.stored_key, cred.server_key, iterations)


def _parse_feature(text: str) -> tuple[str, int]:
    name, eq, level = text.partition("=")
    if not eq:
        raise TerseFailure(f"Can't parse feature=level string {text}: equals sign not found.")
    try:
        return name.strip(), int(level.strip())
    except ValueError:
        raise TerseFailure(
            f"Can't parse feature=level string {text}: unable to parse {level.strip()} as a short."
        ) from None


def feature_levels(release_version: str | None, feature_args: list[str], static_quorum: bool = True) -> dict[str, int]:
    """Kafka's ``Formatter.calculateEffectiveReleaseVersion`` and ``calculateEffectiveFeatureLevels``: every
    feature's starting level, ``metadata.version`` included. Raises TerseFailure with Kafka's messages."""
    given: dict[str, int] = {}
    for text in feature_args:
        name, level = _parse_feature(text)
        given[name] = level
    if fv.METADATA_VERSION in given:
        if release_version is not None:
            raise TerseFailure(
                f"Use --release-version instead of --feature {fv.METADATA_VERSION}=X to avoid ambiguity."
            )
        try:
            release = fv.metadata_version(given[fv.METADATA_VERSION]).level
        except ValueError as e:
            raise TerseFailure(str(e)) from None
    elif release_version is not None:
        try:
            release = fv.parse_release_version(release_version)
        except ValueError as e:
            raise TerseFailure(str(e)) from None
    else:
        release = fv.LATEST_PRODUCTION
    known = sorted(f.name for f in fv.FEATURES)
    for name in given:
        if name != fv.METADATA_VERSION and name not in known:
            raise TerseFailure(f"Unsupported feature: {name}. Supported features are: {', '.join(known)}")
    kraft = given.get(fv.KRAFT_VERSION)
    if kraft == 0 and not static_quorum:
        raise TerseFailure(
            "Cannot set kraft.version to 0 if KIP-853 configuration is present. Try removing the --feature flag for "
            "kraft.version."
        )
    if kraft is not None and kraft != 0 and static_quorum:
        raise TerseFailure(
            f"Cannot set kraft.version to {kraft} unless controller.quorum.voters is empty and one of the flags "
            "--standalone, --initial-controllers, or --no-initial-controllers is used. For dynamic controllers "
            "support, try using one of --standalone, --initial-controllers, or --no-initial-controllers and "
            "removing controller.quorum.voters."
        )
    levels = fv.bootstrap_levels(release)
    levels.update(given)
    levels[fv.METADATA_VERSION] = release
    if not static_quorum:
        levels[fv.KRAFT_VERSION] = 1  # Kafka's effectiveKRaftFeatureLevel: the latest with KIP-853 configuration
    for name, level in levels.items():
        if name == fv.METADATA_VERSION or (name == fv.KRAFT_VERSION and not static_quorum):
            continue
        lo, hi = fv.supported_range(name)
        try:
            if not lo <= level <= hi:
                raise ValueError(f"No feature:{name} with feature level {level}")
            fv.validate_version(name, level, levels)
        except ValueError as e:
            raise TerseFailure(str(e)) from None
    return levels


def format_storage(
    config: KafkaConfig,
    cluster_id: str,
    ignore_formatted: bool,
    out=sys.stdout,
    bootstrap_records=(),
    levels: dict[str, int] | None = None,
    initial_voters: list[Voter] | None = None,
) -> int:
    """Format every directory of ``config`` for ``cluster_id`` (a Kafka Uuid string) with the feature
    ``levels`` (default: :func:`feature_levels` of nothing); 0, or 1 with the reason on stderr."""
    if levels is None:
        levels = feature_levels(None, [])
    release = fv.metadata_version(levels[fv.METADATA_VERSION])
    if bootstrap_records and release.level < fv.IBP_3_5_IV2:
        print(
            f"SCRAM is only supported in {fv.METADATA_VERSION} {fv.metadata_version(fv.IBP_3_5_IV2).version} or later.",
            file=sys.stderr,
        )
        return 1
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
    dirs = _dirs(config)
    metas = {d: read_meta_properties(d) for d in dirs}
    try:
        verify_meta_properties(metas, cluster_id, config.node_id)
    except InconsistentMetaPropertiesError as e:
        print(e, file=sys.stderr)
        return 1
    formatted = [d for d in dirs if metas[d] is not None]
    if formatted and not ignore_formatted:
        print(
            f"Log directory {formatted[0]} is already formatted. Use --ignore-formatted to ignore this "
            "directory and format the others.",
            file=sys.stderr,
        )
        return 1
    if len(formatted) == len(dirs):
        print("All of the log directories are already formatted.", file=out)
        return 0
    for d in dirs:
        if d in formatted:
            continue
        directory_id = None
        if d != config.metadata_log_dir:
            kind = "data directory"
        elif initial_voters is None:
            kind = "metadata directory"
        else:
            own = [v for v in initial_voters if v.voter_id == config.node_id]
            kind = "dynamic metadata voter directory" if own else "dynamic metadata directory"
            if own:
                directory_id = uuid_to_string(own[0].directory_id)
        print(f"Formatting {kind} {d} with metadata.version {release.version}.", file=out)
        write_meta_properties(d, cluster_id, config.node_id, directory_id)
        if d == config.metadata_log_dir:
            records = feature_level_bootstrap_records(release.level, levels) + list(bootstrap_records)
            write_bootstrap_records(d, records)
            if initial_voters:
                write_dynamic_quorum_snapshot(d, initial_voters, levels.get(fv.KRAFT_VERSION) or 1)
    return 0


def info(config: KafkaConfig, out=sys.stdout) -> int:
    """Kafka's ``StorageTool.infoCommand``: the directories found, the metadata of the first formatted one,
    and the problems (exit status 1 when there are any)."""
    problems: list[str] = []
    found: list[str] = []
    first: dict[str, str] | None = None
    for d in _dirs(config):
        if not os.path.isdir(d):
            problems.append(f"{d} does not exist" if not os.path.exists(d) else f"{d} is not a directory")
            continue
        found.append(d)
        meta = read_meta_properties(d)
        if meta is None:
            problems.append(f"{d} is not formatted.")
        elif first is None:
            first = meta
        elif first.get(CLUSTER_ID_PROP) != meta.get(CLUSTER_ID_PROP):
            problems.append("Mismatched cluster IDs between storage directories.")
        elif first.get(NODE_ID_PROP) != meta.get(NODE_ID_PROP):
            problems.append("Mismatched node IDs between storage directories.")
    if first is not None and first.get("version", "0") == "0":
        problems.append(
            "The kafka configuration file appears to be for a cluster in KRaft mode, but the directories are "
            "formatted for legacy mode."
        )
    if found:
        print("Found log directory:" if len(found) == 1 else "Found log directories:", file=out)
        for d in found:
            print(f"  {d}", file=out)
        print("", file=out)
    if first is not None:
        print("Found metadata: {" + ", ".join(f"{k}={v}" for k, v in sorted(first.items())) + "}", file=out)
        print("", file=out)
    if problems:
        print("Found problem:" if len(problems) == 1 else "Found problems:", file=out)
        for p in problems:
            print(f"  {p}", file=out)
        print("", file=out)
        return 1
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
    fmt.add_argument(
        "--release-version",
        "-r",
        help="The release version to use for the initial feature settings. The minimum is "
        f"{fv.metadata_version(fv.MINIMUM_VERSION).version}; the default is {RELEASE_VERSION}",
    )
    fmt.add_argument(
        "--feature",
        "-f",
        action="append",
        default=[],
        help="The setting to use for a specific feature, in feature=level format. For example: `kraft.version=1`.",
    )
    quorum = fmt.add_mutually_exclusive_group()
    quorum.add_argument(
        "--standalone",
        "-s",
        action="store_true",
        help="Used to initialize a controller as a single-node dynamic quorum.",
    )
    quorum.add_argument(
        "--no-initial-controllers",
        "-N",
        action="store_true",
        help="Used to initialize a server without a dynamic quorum topology.",
    )
    quorum.add_argument(
        "--initial-controllers",
        "-I",
        help="Used to initialize a server with a specific dynamic quorum topology. The argument is a "
        "comma-separated list of id@hostname:port:directory. The same values must be used to format all nodes.",
    )
    fmt.add_argument(
        "--add-scram",
        "-S",
        action="append",
        default=[],
        help="A SCRAM_CREDENTIAL to add to the __cluster_metadata log e.g. "
        "'SCRAM-SHA-256=[name=alice,password=alice-secret]' or "
        '\'SCRAM-SHA-512=[name=alice,iterations=8192,salt="N3E=",saltedpassword="YCE="]\'',
    )
    info_parser = sub.add_parser("info", help="Get information about the Kafka log directories on this node.")
    info_parser.add_argument("--config", "-c", required=True, help="The Kafka configuration file to use.")
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
        try:
            note = check_quorum_flags(config, args.standalone, args.initial_controllers, args.no_initial_controllers)
        except TerseFailure as e:
            print(e, file=sys.stderr)
            return 1
        if note:
            print(note, file=sys.stderr)
        dynamic = not _voter_ids(config) and bool(args.standalone or args.initial_controllers)
        try:
            initial_voters: list[Voter] | None = None
            if dynamic and args.standalone:
                initial_voters = [standalone_voter(config)]
            elif dynamic and args.initial_controllers:
                listener = (config.controller_listener_names or ["CONTROLLER"])[0]
                initial_voters = parse_initial_controllers(args.initial_controllers, listener)
            levels = feature_levels(args.release_version, args.feature, not dynamic)
            records = [parse_scram(v) for v in args.add_scram]
        except (TerseFailure, ValueError) as e:
            print(e, file=sys.stderr)
            return 1
        return format_storage(
            config,
            args.cluster_id,
            args.ignore_formatted,
            bootstrap_records=records,
            levels=levels,
            initial_voters=initial_voters,
        )
    return info(config)


if __name__ == "__main__":
    configure_tool_logging()
    sys.exit(main())
