"""Small helpers shared by the command-line tools (Kafka's ``CommandLineUtils``)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from pykbroker.config.properties import load_properties

TOOLS_LOG_LEVEL_ENV = "PYKBROKER_TOOLS_LOG_LEVEL"


class ToolArgumentParser(argparse.ArgumentParser):
    """argparse with Kafka's exit status for bad arguments: 1 (CommandLineUtils.printUsageAndExit), not 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def add_version_option(parser: argparse.ArgumentParser, *flags: str, text: str = "Display Kafka version.") -> None:
    """Kafka's ``--version`` (CommandDefaultOptions' ``versionOpt``, ``CommandLineUtils.printVersionAndExit``):
    prints this distribution's version (``pykbroker.__version__``, what ``kafka-server-start --version`` prints) on
    stdout and exits 0 as soon as it is parsed, before required options are checked. ``flags``: the option strings
    (default ``--version``; kafka-transactions has ``-v, --version``)."""
    from pykbroker import __version__

    parser.add_argument(*(flags or ("--version",)), action="version", version=__version__, help=text)


def configure_tool_logging() -> None:
    """Client logs of a command-line tool go to stderr at WARN (Kafka's tools-log4j: ``rootLogger=WARN,
    stderr``), so stdout carries only the tool's own output; ``$PYKBROKER_TOOLS_LOG_LEVEL`` changes the level."""
    from pykbroker.utils import logging as plog

    plog.configure(os.environ.get(TOOLS_LOG_LEVEL_ENV, "warn"), stream=sys.stderr)


def error_line(e: BaseException) -> str:
    """One line for an exception: ``TypeName: message`` (no traceback)."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def parse_key_values(items: list[str] | None, what: str = "property") -> dict[str, str]:
    """``["a=1", "b=2"]`` -> ``{"a": "1", "b": "2"}``; exits with Kafka's message on a bad item."""
    out: dict[str, str] = {}
    for item in items or []:
        for part in item.split(",") if what == "config-list" else [item]:
            if "=" not in part:
                print(f"Invalid command line properties: {part}", file=sys.stderr)
                raise SystemExit(1)
            k, v = part.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def client_properties(config_file: str | None, overrides: dict[str, str], bootstrap: str | None) -> dict[str, str]:
    props: dict[str, str] = dict(load_properties(config_file)) if config_file else {}
    props.update(overrides)
    if bootstrap:
        props["bootstrap.servers"] = bootstrap
    return props
