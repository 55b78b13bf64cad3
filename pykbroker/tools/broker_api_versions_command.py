"""kafka-broker-api-versions: the API versions every broker supports (Kafka's ``BrokerApiVersionsCommand``).

    bin/kafka-broker-api-versions --bootstrap-server HOST:PORT[,HOST:PORT...]

For each broker of the cluster (Metadata from the bootstrap broker), as Kafka prints ``NodeApiVersions``::

    127.0.0.1:9092 (id: 1 rack: null) -> (
    \\tProduce(0): 0 to 11 [usable: 11],
    \\t...
    \\tDescribeTopicPartitions(75): 0 [usable: 0]
    )

"usable" is the newest version both the broker and this client support; this client's versions are the schema
ranges of :mod:`pykbroker.protocol` (what pykbroker's clients and tools can encode): ``[unusable: node too new]`` /
``[unusable: node too old]`` when the ranges do not meet, ``Name(key): UNSUPPORTED`` for an API this client knows
that the broker does not offer, ``UNKNOWN(key): ...`` for one this client has no schema for. A broker that cannot be
asked prints ``HOST:PORT (id: N rack: R) -> ERROR: <error>``. Other errors: one line on stderr, exit status 1.
"""

from __future__ import annotations

import argparse
import sys

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import REQUESTS, errors
from pykbroker.protocol.api_keys import ApiKeys, api_name, is_known
from pykbroker.tools.command_line_utils import (
    ToolArgumentParser,
    add_version_option,
    configure_tool_logging,
    error_line,
)

API_VERSIONS_VERSION = 3
CLIENT_SOFTWARE_NAME = "pykbroker"


def client_versions() -> dict[int, tuple[int, int]]:
    """``{api key: (oldest, latest)}`` this client can encode (the request schemas' version ranges)."""
    return {key: (s.versions[0], s.versions[-1]) for key, s in REQUESTS.items()}


def _api_text(key: int, lo: int, hi: int, ours: dict[int, tuple[int, int]]) -> str:
    name = f"{api_name(key)}({key})" if is_known(key) and key in ours else f"UNKNOWN({key})"
    text = f"{name}: {lo}" if lo == hi else f"{name}: {lo} to {hi}"
    if key in ours:
        oldest, latest = ours[key]
        if latest < lo:
            text += " [unusable: node too new]"
        elif hi < oldest:
            text += " [unusable: node too old]"
        else:
            text += f" [usable: {min(latest, hi)}]"
    return text


def node_api_versions_text(api_keys: list[dict], ours: dict[int, tuple[int, int]] | None = None) -> str:
    """Kafka's ``NodeApiVersions.toString(true)`` for the ``api_keys`` of an ApiVersions response."""
    ours = client_versions() if ours is None else ours
    lines = {a["api_key"]: _api_text(a["api_key"], a["min_version"], a["max_version"], ours) for a in api_keys}
    for key in ours:
        if key not in lines:
            lines[key] = f"{api_name(key)}({key}): UNSUPPORTED"
    return "(\n\t" + ",\n\t".join(lines[k] for k in sorted(lines)) + "\n)"


def _api_versions(conn: BrokerConnection) -> list[dict]:
    from pykbroker import __version__

    response = conn.request(
        ApiKeys.API_VERSIONS,
        API_VERSIONS_VERSION,
        {"client_software_name": CLIENT_SOFTWARE_NAME, "client_software_version": __version__},
    )
    if response["error_code"] != errors.NONE:
        raise errors.for_code(response["error_code"])()
    return response["api_keys"]


def run(bootstrap: str, out) -> None:
    with BrokerConnection.to(bootstrap, client_id="broker-api-versions-command") as conn:
        metadata = conn.request(
            ApiKeys.METADATA,
            12,
            {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
        )
        for b in sorted(metadata["brokers"], key=lambda b: b["node_id"]):
            node = (
                f"{b['host']}:{b['port']} (id: {b['node_id']} rack: {b['rack'] if b['rack'] is not None else 'null'})"
            )
            try:
                if f"{b['host']}:{b['port']}" == conn.node:
                    api_keys = _api_versions(conn)
                else:
                    with BrokerConnection(b["host"], b["port"], client_id="broker-api-versions-command") as other:
                        api_keys = _api_versions(other)
            except (errors.KafkaError, OSError) as e:
                print(f"{node} -> ERROR: {error_line(e)}", file=out)
                continue
            print(f"{node} -> {node_api_versions_text(api_keys)}", file=out)


def _parser() -> argparse.ArgumentParser:
    p = ToolArgumentParser(
        prog="kafka-broker-api-versions",
        description="This tool helps to retrieve broker version information.",
    )
    p.add_argument("--bootstrap-server", required=True, help="REQUIRED: The server to connect to.")
    p.add_argument("--command-config", help="A property file containing configs to be passed to Admin Client.")
    add_version_option(p)
    return p


def main(argv: list[str] | None = None, out=sys.stdout) -> int:
    if argv is None:  # run as the command (bin/ script, console script): the tools' logging
        configure_tool_logging()
    args = _parser().parse_args(argv)
    try:
        run(args.bootstrap_server, out)
    except (errors.KafkaError, OSError, ValueError) as e:
        print(f"Error while executing broker api versions command: {error_line(e)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    configure_tool_logging()
    sys.exit(main())
