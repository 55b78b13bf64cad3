"""kafka-metadata-quorum: the KRaft metadata quorum's status (``org.apache.kafka.tools.MetadataQuorumCommand``).

    bin/kafka-metadata-quorum (--bootstrap-server HOST:PORT | --bootstrap-controller HOST:PORT)
        [--command-config FILE] describe (--status | --replication [--human-readable])
    bin/kafka-metadata-quorum ... --command-config controller.properties add-controller [--dry-run]
    bin/kafka-metadata-quorum ... remove-controller --controller-id ID --controller-directory-id DIR [--dry-run]

``add-controller`` (KIP-853) reads the new controller's own configuration (``--command-config``): its
``node.id`` (with ``controller`` in ``process.roles``), the directory id in the ``meta.properties`` of its
``metadata.log.dir`` (else the first ``log.dirs`` entry), and the advertised (else bound) endpoints of its
``controller.listener.names``; it sends AddRaftVoter to the active controller and prints ``Added controller 4 with
directory id <id> and endpoints: CONTROLLER://host:port``. ``remove-controller`` sends RemoveRaftVoter and prints
``Removed  KRaft controller 1 with directory id <id>`` (Kafka's double space). Both retry while the leader answers
a retriable error (NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT: another change in progress, the new voter not caught
up yet) until Kafka's ``default.api.timeout.ms`` (60 s) has passed, as the admin client does.

``describe --status`` prints, as Kafka does::

    ClusterId:              <cluster id, from DescribeCluster>
    LeaderId:               1
    LeaderEpoch:            5
    HighWatermark:          123
    MaxFollowerLag:         0
    MaxFollowerLagTimeMs:   0
    CurrentVoters:          [{"id": 1, "directoryId": null, "endpoints": ["CONTROLLER://127.0.0.1:9093"]}]
    CurrentObservers:       [{"id": 4, "directoryId": null}]

(MaxFollowerLag: the leader's log end offset minus the lowest voter's; MaxFollowerLagTimeMs: 0 when the
leader is that voter, else the difference of their last caught-up times, -1 when either is unknown.)
``describe --replication`` prints Kafka's table (``ToolsUtils.prettyPrintTable``: each cell padded to its
column's width and followed by a tab) with a Leader row, Follower rows and Observer rows; timestamps are
epoch ms (-1: never), or ``N ms ago`` with ``--human-readable``.

Both ask one node (the first reachable bootstrap address) with DescribeQuorum v2 and DescribeCluster v1.
With ``--bootstrap-controller`` DescribeCluster asks for the controllers' view (``endpoint_type`` 2), as
Kafka's admin client does; a node that refuses it (MISMATCHED_ENDPOINT_TYPE, UNSUPPORTED_VERSION: a
combined node's controller listener that only serves the broker view) is asked again for the broker view,
which carries the same cluster id. Errors print one line (Kafka's exception class and message), exit 1.
``--command-config`` must exist; its client settings are read but plaintext connections are used.
"""

from __future__ import annotations

import base64
import os
import sys
import time
import uuid
from typing import Any

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.config.broker_configs.kraft_configs import (
    CONTROLLER_LISTENER_NAMES_CONFIG,
    METADATA_LOG_DIR_CONFIG,
    NODE_ID_CONFIG,
    PROCESS_ROLES_CONFIG,
)
from pykbroker.config.broker_configs.server_log_configs import LOG_DIRS_CONFIG
from pykbroker.config.broker_configs.socket_server_configs import ADVERTISED_LISTENERS_CONFIG
from pykbroker.config.properties import load_properties
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server.meta_properties import read_meta_properties, uuid_from_string
from pykbroker.tools.command_line_utils import ToolArgumentParser, configure_tool_logging, error_line

DESCRIBE_QUORUM_VERSION = 2
DESCRIBE_CLUSTER_VERSION = 1
METADATA_TOPIC = "__cluster_metadata"
ZERO_UUID = uuid.UUID(int=0)
HEADERS = ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"]


class TerseError(Exception):
    """Kafka's TerseException: the message alone is printed, exit status 1."""


class QuorumError(Exception):
    """An error answered by the node: printed as ``org.apache.kafka.common.errors.<Name>Exception: msg``."""

    def __init__(self, code: int, message: str | None):
        cls = errors.for_code(code)
        name = cls.__name__[: -len("Error")] if cls.__name__.endswith("Error") else cls.__name__
        if not name.endswith("Exception"):
            name += "Exception"
        super().__init__(f"org.apache.kafka.common.errors.{name}: {message or cls.default_message}")


def kafka_uuid(value: uuid.UUID | None) -> str:
    """Kafka's ``Uuid.toString`` (URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode((value or ZERO_UUID).bytes).decode().rstrip("=")


# -- the requests --------------------------------------------------------------------------------------------


def describe_quorum(conn: BrokerConnection) -> tuple[dict, dict[int, list[dict]]]:
    """(partition entry, {voter id: listeners}) of ``__cluster_metadata-0``; QuorumError on any error."""
    response = conn.request(
        ApiKeys.DESCRIBE_QUORUM,
        DESCRIBE_QUORUM_VERSION,
        {"topics": [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]},
    )
    if response["error_code"] != errors.NONE:
        raise QuorumError(response["error_code"], response.get("error_message"))
    topics = response["topics"]
    if len(topics) != 1 or topics[0]["topic_name"] != METADATA_TOPIC or len(topics[0]["partitions"]) != 1:
        raise QuorumError(errors.UNKNOWN_SERVER_ERROR, "DescribeMetadataQuorum received an unexpected response")
    partition = topics[0]["partitions"][0]
    if partition["error_code"] != errors.NONE:
        raise QuorumError(partition["error_code"], partition.get("error_message"))
    return partition, {n["node_id"]: n["listeners"] for n in response.get("nodes", [])}


def describe_cluster(conn: BrokerConnection, controller: bool) -> dict:
    """DescribeCluster: endpoint_type 2 (the controllers, KIP-919) with ``--bootstrap-controller``; a
    combined node's controller listener that answers only endpoint_type 1 is asked that instead."""
    body = {"include_cluster_authorized_operations": False, "endpoint_type": 2 if controller else 1}
    response = conn.request(ApiKeys.DESCRIBE_CLUSTER, DESCRIBE_CLUSTER_VERSION, body)
    if controller and response["error_code"] in (errors.MISMATCHED_ENDPOINT_TYPE, errors.UNSUPPORTED_VERSION):
        response = conn.request(ApiKeys.DESCRIBE_CLUSTER, DESCRIBE_CLUSTER_VERSION, dict(body, endpoint_type=1))
    if response["error_code"] != errors.NONE:
        raise QuorumError(response["error_code"], response.get("error_message"))
    return response


def cluster_id(conn: BrokerConnection, controller: bool) -> str:
    return describe_cluster(conn, controller)["cluster_id"]


def active_controller_address(conn: BrokerConnection) -> str | None:
    """``host:port`` of the active controller as a controller reports it (DescribeCluster endpoint_type 2:
    Kafka's admin client sends DescribeQuorum there), or None when it does not say."""
    response = describe_cluster(conn, True)
    if response.get("endpoint_type", 1) != 2:
        return None
    for node in response["brokers"]:
        if node["broker_id"] == response["controller_id"]:
            return f"{node['host']}:{node['port']}"
    return None


# -- the output ----------------------------------------------------------------------------------------------


def _node(replica: dict, nodes: dict[int, list[dict]]) -> str:
    """Kafka's ``MetadataQuorumCommand.Node.toString``."""
    directory = replica.get("replica_directory_id") or ZERO_UUID
    text = f'{{"id": {replica["replica_id"]}, "directoryId": '
    text += "null" if directory == ZERO_UUID else f'"{kafka_uuid(directory)}"'
    endpoints = nodes.get(replica["replica_id"], [])
    if endpoints:
        text += ', "endpoints": [' + ", ".join(f'"{_endpoint(e)}"' for e in endpoints) + "]"
    return text + "}"


def _endpoint(listener: dict) -> str:
    """Kafka's ``RaftVoterEndpoint.toString`` (an IPv6 host in brackets)."""
    host = f"[{listener['host']}]" if ":" in listener["host"] else listener["host"]
    return f"{listener['name']}://{host}:{listener['port']}"


def _leader(partition: dict) -> dict:
    return next(v for v in partition["current_voters"] if v["replica_id"] == partition["leader_id"])


def _timestamp(value: int) -> int | None:
    return None if value == -1 else value


def format_status(cid: str, partition: dict, nodes: dict[int, list[dict]]) -> str:
    leader = _leader(partition)
    lagging = min(partition["current_voters"], key=lambda v: v["log_end_offset"])
    max_lag = leader["log_end_offset"] - lagging["log_end_offset"]
    leader_caught_up = _timestamp(leader["last_caught_up_timestamp"])
    lagging_caught_up = _timestamp(lagging["last_caught_up_timestamp"])
    if lagging is leader:
        max_lag_ms = 0
    elif leader_caught_up is not None and lagging_caught_up is not None:
        max_lag_ms = leader_caught_up - lagging_caught_up
    else:
        max_lag_ms = -1
    voters = ", ".join(_node(v, nodes) for v in partition["current_voters"])
    observers = ", ".join(_node(o, nodes) for o in partition["observers"])
    return (
        f"ClusterId:              {cid}\n"
        f"LeaderId:               {partition['leader_id']}\n"
        f"LeaderEpoch:            {partition['leader_epoch']}\n"
        f"HighWatermark:          {partition['high_watermark']}\n"
        f"MaxFollowerLag:         {max_lag}\n"
        f"MaxFollowerLagTimeMs:   {max_lag_ms}\n"
        f"CurrentVoters:          [{voters}]\n"
        f"CurrentObservers:       [{observers}]"
    )


def relative_time_ms(timestamp_ms: int, desc: str, now_ms: int) -> int:
    """Kafka's ``relativeTimeMs``: ms since ``timestamp_ms``; an error for a time after now or at the epoch."""
    if not (0 < timestamp_ms <= now_ms):
        raise TerseError(
            "Error while computing relative time, possible drift in system clock.\n"
            f"Current timestamp is {now_ms}, {desc} timestamp is {timestamp_ms}"
        )
    return now_ms - timestamp_ms


def replication_rows(partition: dict, human_readable: bool, now_ms: int) -> list[list[str]]:
    leader = _leader(partition)

    def row(info: dict, status: str) -> list[str]:
        def when(value: int, desc: str) -> str:
            if value == -1:
                return "-1"
            return f"{relative_time_ms(value, desc, now_ms)} ms ago" if human_readable else str(value)

        return [
            str(info["replica_id"]),
            kafka_uuid(info.get("replica_directory_id")),
            str(info["log_end_offset"]),
            str(leader["log_end_offset"] - info["log_end_offset"]),
            when(info["last_fetch_timestamp"], "last fetch"),
            when(info["last_caught_up_timestamp"], "last caught up"),
            status,
        ]

    rows = [row(leader, "Leader")]
    rows += [row(v, "Follower") for v in partition["current_voters"] if v["replica_id"] != leader["replica_id"]]
    rows += [row(o, "Observer") for o in partition["observers"]]
    return rows


def pretty_print_table(headers: list[str], rows: list[list[str]]) -> str:
    """Kafka's ``ToolsUtils.prettyPrintTable``: each cell left-justified to its column width, then a tab."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    return "\n".join("".join(cell.ljust(w) + "\t" for cell, w in zip(r, widths, strict=True)) for r in [headers, *rows])


# -- the command ---------------------------------------------------------------------------------------------


VOTER_CHANGE_TIMEOUT_MS = 60_000
"""Kafka's admin ``default.api.timeout.ms``: how long add-controller / remove-controller keep retrying."""


def _controller_id(props: dict[str, str]) -> int:
    if NODE_ID_CONFIG not in props:
        raise TerseError("node.id not found in configuration file. Is this a valid controller configuration file?")
    node_id = int(props[NODE_ID_CONFIG])
    if node_id < 0:
        raise TerseError("node.id was negative in configuration file. Is this a valid controller configuration file?")
    if "controller" not in props.get(PROCESS_ROLES_CONFIG, ""):
        raise TerseError(
            "process.roles did not contain 'controller' in configuration file. Is this a valid controller "
            "configuration file?"
        )
    return node_id


def _metadata_directory_id(props: dict[str, str]) -> uuid.UUID:
    directory = props.get(METADATA_LOG_DIR_CONFIG) or (props.get(LOG_DIRS_CONFIG, "").strip().split(",")[0] or None)
    if directory is None:
        raise TerseError(
            "Neither metadata.log.dir nor log.dirs were found. Is this a valid controller configuration file?"
        )
    meta = read_meta_properties(directory)
    if meta is None:
        raise TerseError(f"Unable to read meta.properties from {directory}")
    if not meta.get("directory.id"):
        raise TerseError(f"No directory id found in {directory}")
    return uuid_from_string(meta["directory.id"])


def _controller_endpoints(props: dict[str, str]) -> list[dict]:
    """Kafka's ``getControllerAdvertisedListeners``: ``{name, host, port}`` of each controller listener."""
    listeners: dict[str, tuple[str, int]] = {}
    for key in ("listeners", ADVERTISED_LISTENERS_CONFIG):
        for entry in filter(None, (e.strip() for e in props.get(key, "").split(","))):
            name, _, address = entry.partition("://")
            host, _, port = address.rpartition(":")
            listeners[name.upper()] = (host.strip("[]") or "localhost", int(port))
    if CONTROLLER_LISTENER_NAMES_CONFIG not in props:
        raise TerseError("controller.listener.names was not found. Is this a valid controller configuration file?")
    result = []
    for name in props[CONTROLLER_LISTENER_NAMES_CONFIG].split(","):
        name = name.strip().upper()
        if name not in listeners:
            raise TerseError(f"Cannot find information about controller listener name: {name}")
        result.append({"name": name, "host": listeners[name][0], "port": listeners[name][1]})
    return result


def _voter_change(bootstrap: str, controller: bool, api_key: int, body: dict) -> None:
    """Send AddRaftVoter / RemoveRaftVoter to the active controller, retrying retriable errors until
    :data:`VOTER_CHANGE_TIMEOUT_MS`; QuorumError with the last error."""
    deadline = time.monotonic() + VOTER_CHANGE_TIMEOUT_MS / 1000
    while True:
        target = bootstrap
        try:
            if controller:
                with BrokerConnection.to(bootstrap, client_id="kafka-metadata-quorum") as conn:
                    target = active_controller_address(conn) or bootstrap
            with BrokerConnection.to(target, client_id="kafka-metadata-quorum") as conn:
                response = conn.request(api_key, 0, body)
            code, message = response["error_code"], response.get("error_message")
        except OSError as e:
            code, message = errors.NETWORK_EXCEPTION, str(e)
        if code == errors.NONE:
            return
        if code not in (errors.NOT_LEADER_OR_FOLLOWER, errors.REQUEST_TIMED_OUT, errors.NETWORK_EXCEPTION) or (
            time.monotonic() >= deadline
        ):
            raise QuorumError(code, message)
        time.sleep(0.2)


def _format_endpoint(e: dict) -> str:
    host = f"[{e['host']}]" if ":" in e["host"] else e["host"]
    return f"{e['name']}://{host}:{e['port']}"


def add_controller(bootstrap: str, controller: bool, props: dict[str, str], dry_run: bool, out) -> None:
    node_id = _controller_id(props)
    directory_id = _metadata_directory_id(props)
    endpoints = _controller_endpoints(props)
    if not dry_run:
        body = {
            "cluster_id": None,
            "timeout_ms": 30_000,
            "voter_id": node_id,
            "voter_directory_id": directory_id,
            "listeners": endpoints,
        }
        _voter_change(bootstrap, controller, ApiKeys.ADD_RAFT_VOTER, body)
    print(
        f"{'DRY RUN of adding' if dry_run else 'Added'} controller {node_id} with directory id "
        f"{kafka_uuid(directory_id)} and endpoints: {', '.join(_format_endpoint(e) for e in endpoints)}",
        file=out,
    )


def remove_controller(bootstrap: str, controller: bool, node_id: int, directory: str, dry_run: bool, out) -> None:
    if node_id < 0:
        raise TerseError(f"Invalid negative --controller-id: {node_id}")
    try:
        directory_id = uuid_from_string(directory)
        if len(directory_id.bytes) != 16:
            raise ValueError(directory)
    except (ValueError, TypeError) as e:
        raise TerseError(f"Failed to parse --controller-directory-id: {e}") from None
    if not dry_run:
        body = {"cluster_id": None, "voter_id": node_id, "voter_directory_id": directory_id}
        _voter_change(bootstrap, controller, ApiKeys.REMOVE_RAFT_VOTER, body)
    print(
        f"{'DRY RUN of removing ' if dry_run else 'Removed '} KRaft controller {node_id} with directory id "
        f"{kafka_uuid(directory_id)}",
        file=out,
    )


def execute(args: Any, out) -> None:
    controller = args.bootstrap_controller is not None
    bootstrap = args.bootstrap_controller if controller else args.bootstrap_server
    props: dict[str, str] = {}
    if args.command_config is not None:
        if not os.path.exists(args.command_config):
            raise TerseError(f"Properties file {args.command_config} does not exists!")
        props = dict(load_properties(args.command_config))
    if args.command == "add-controller":
        if args.command_config is None:
            raise TerseError(
                "You must supply the configuration file of the controller you are adding when using add-controller."
            )
        add_controller(bootstrap, controller, props, args.dry_run, out)
        return
    if args.command == "remove-controller":
        remove_controller(bootstrap, controller, args.controller_id, args.controller_directory_id, args.dry_run, out)
        return
    if args.status and args.replication:
        raise TerseError("Only one of --status or --replication should be specified with describe sub-command")
    if not args.status and not args.replication:
        raise TerseError("One of --status or --replication must be specified with describe sub-command")
    if args.status and args.human_readable:
        raise TerseError("The option --human-readable is only supported along with --replication")
    if controller:
        with BrokerConnection.to(bootstrap, client_id="kafka-metadata-quorum") as conn:
            bootstrap = active_controller_address(conn) or bootstrap
    with BrokerConnection.to(bootstrap, client_id="kafka-metadata-quorum") as conn:
        if args.status:
            cid = cluster_id(conn, controller)
            partition, nodes = describe_quorum(conn)
            print(format_status(cid, partition, nodes), file=out)
        else:
            partition, _ = describe_quorum(conn)
            rows = replication_rows(partition, args.human_readable, int(time.time() * 1000))
            print(pretty_print_table(HEADERS, rows), file=out)


def main(argv: list[str] | None = None, out=sys.stdout) -> int:
    if argv is None:  # run as the command (bin/ script, console script): the tools' logging
        configure_tool_logging()
    parser = ToolArgumentParser(
        prog="kafka-metadata-quorum", description="This tool describes kraft metadata quorum status."
    )
    connection = parser.add_mutually_exclusive_group(required=True)
    connection.add_argument(
        "--bootstrap-server",
        help="A comma-separated list of host:port pairs to use for establishing the connection to the Kafka cluster.",
    )
    connection.add_argument(
        "--bootstrap-controller",
        help="A comma-separated list of host:port pairs to use for establishing the connection to the Kafka "
        "controllers.",
    )
    parser.add_argument("--command-config", help="Property file containing configs to be passed to Admin Client.")
    sub = parser.add_subparsers(dest="command", required=True)
    describe = sub.add_parser("describe", help="Describe the metadata quorum info")
    status = describe.add_argument_group("Status")
    status.add_argument(
        "--status",
        action="store_true",
        help="A short summary of the quorum status and the other provides detailed information about the status "
        "of replication.",
    )
    replication = describe.add_argument_group("Replication")
    replication.add_argument(
        "--replication", action="store_true", help="Detailed information about the status of replication"
    )
    replication.add_argument("--human-readable", action="store_true", help="Human-readable output")
    add = sub.add_parser("add-controller", help="Add a controller to the KRaft controller cluster")
    add.add_argument(
        "--dry-run", action="store_true", help="True if we should print what would be done, but not do it."
    )
    remove = sub.add_parser("remove-controller", help="Remove a controller from the KRaft controller cluster")
    remove.add_argument("--controller-id", "-i", type=int, required=True, help="The id of the controller to remove.")
    remove.add_argument(
        "--controller-directory-id", "-d", required=True, help="The directory ID of the controller to remove."
    )
    remove.add_argument(
        "--dry-run", action="store_true", help="True if we should print what would be done, but not do it."
    )
    args = parser.parse_args(argv)
    try:
        execute(args, out)
    except (TerseError, QuorumError) as e:
        print(e, file=sys.stderr)
        return 1
    except (OSError, errors.KafkaError, ValueError) as e:
        print(error_line(e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    configure_tool_logging()
    sys.exit(main())
