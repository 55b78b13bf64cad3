"""Reading the broker's ``server.properties`` the way ``kafka-server-start`` does: the command line
(``server.properties [--override property=value]*``), the file, and data directories made absolute.

Relative data directories (``log.dirs``, ``log.dir``, ``metadata.log.dir``) in the file are taken from
the file's own directory; relative ``--override`` values from the working directory. Without a file
(no argument, or only ``--override``s) the package's single-node configuration is used,
:data:`DEFAULT_CONFIG` (``pykbroker/config/default/server.properties``: Kafka's KRaft quick-start
configuration on 127.0.0.1:9092, data in ``/tmp/kraft-combined-logs``). Shared by the entry point
(:mod:`pykbroker.kafka`) and the tools that read a broker's configuration.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from pykbroker.config.broker_configs.kraft_configs import METADATA_LOG_DIR_CONFIG
from pykbroker.config.broker_configs.server_log_configs import LOG_DIR_CONFIG, LOG_DIRS_CONFIG
from pykbroker.config.properties import load_properties

DATA_DIR_KEYS = (LOG_DIRS_CONFIG, LOG_DIR_CONFIG, METADATA_LOG_DIR_CONFIG)

DEFAULT_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "default", "server.properties")

USAGE = "USAGE: kafka-server-start [-daemon] server.properties [--override property=value]*"


def parse_args(argv: list[str]) -> tuple[str, dict[str, str]]:
    """``(properties path, overrides)``; raises SystemExit(1) with the usage line on bad arguments. The
    path is :data:`DEFAULT_CONFIG` when no file is given."""
    args = [a for a in argv if a != "-daemon"]
    overrides: dict[str, str]
    if not args or args[0].startswith("--override"):
        path, rest, overrides = DEFAULT_CONFIG, args, {}
    elif args[0].startswith("-"):
        _usage()
    else:
        path, rest, overrides = args[0], args[1:], {}
    i = 0
    while i < len(rest):
        a = rest[i]
        if a == "--override" and i + 1 < len(rest):
            value = rest[i + 1]
            i += 2
        elif a.startswith("--override="):
            value = a.split("=", 1)[1]
            i += 1
        else:
            print(f"Found non argument parameters: {a}", file=sys.stderr)
            _usage()
        key, sep, val = value.partition("=")
        if not sep or not key:
            print(f"Invalid override: {value} (expected property=value)", file=sys.stderr)
            _usage()
        overrides[key.strip()] = val.strip()
    return path, overrides


def resolve_data_dirs(props: dict[str, str], base_dir: str) -> dict[str, str]:
    """Make the relative entries of ``log.dirs`` / ``log.dir`` / ``metadata.log.dir`` absolute against
    ``base_dir`` (in place; returns ``props``)."""
    for key in DATA_DIR_KEYS:
        value = props.get(key)
        if value and value.strip():
            props[key] = ",".join(
                os.path.normpath(os.path.join(base_dir, d.strip())) for d in value.split(",") if d.strip()
            )
    return props


def load_server_properties(path: str, overrides: dict[str, str] | None = None) -> dict[str, str]:
    """The broker's properties: the file (data directories relative to its directory), then the
    overrides (data directories relative to the working directory). Raises OSError / PropertiesError."""
    props = resolve_data_dirs(dict(load_properties(path)), os.path.dirname(os.path.abspath(path)))
    props.update(resolve_data_dirs(dict(overrides or {}), os.getcwd()))
    return props


def _usage() -> NoReturn:
    print(USAGE, file=sys.stderr)
    raise SystemExit(1)
