"""Entry point: ``kafka-server-start [-daemon] server.properties [--override property=value]*``.

Mirrors ``kafka.Kafka``: parse arguments (Kafka's usage line on bad ones), load the properties file,
apply ``--override``s, build :class:`KafkaConfig` (a bad value stops start-up with one line naming the
key and the value, exit code 1), start :class:`KafkaRaftServer`, shut down in order on SIGTERM/SIGINT.

Unlike Kafka, relative data directories (``log.dirs``, ``log.dir``, ``metadata.log.dir``) in the properties
file are taken from the file's own directory, not the working directory, so starting from another
directory finds the same data instead of formatting a new empty cluster; relative ``--override`` values
are taken from the working directory. The absolute directories are logged at start
(``Log directories: ...``).
"""
from __future__ import annotations

import os
import signal
import sys
import threading

DATA_DIR_KEYS = ("log.dirs", "log.dir", "metadata.log.dir")

USAGE = "USAGE: kafka-server-start [-daemon] server.properties [--override property=value]*"


def parse_args(argv: list[str]) -> tuple[str, dict[str, str]]:
    """``(properties path, overrides)``; raises SystemExit(1) with the usage line on bad arguments."""
    args = [a for a in argv if a != "-daemon"]
    if not args or args[0].startswith("-"):
        _usage()
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
            props[key] = ",".join(os.path.normpath(os.path.join(base_dir, d.strip()))
                                  for d in value.split(",") if d.strip())
    return props


def load_server_properties(path: str, overrides: dict[str, str] | None = None) -> dict[str, str]:
    """The broker's properties: the file (data directories relative to its directory), then the
    overrides (data directories relative to the working directory). Raises OSError / PropertiesError."""
    from pykbroker.config.properties import load_properties
    props = resolve_data_dirs(dict(load_properties(path)), os.path.dirname(os.path.abspath(path)))
    props.update(resolve_data_dirs(dict(overrides or {}), os.getcwd()))
    return props


def _usage():
    print(USAGE, file=sys.stderr)
    raise SystemExit(1)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--version":
        from pykbroker import __version__
        print(__version__)
        return 0
    path, overrides = parse_args(argv)
    from pykbroker.utils import logging as plog
    plog.configure(os.environ.get("PYKBROKER_LOG_LEVEL", "info"))
    log = plog.get_logger("KafkaServer")
    from pykbroker.config.config_def import ConfigException
    from pykbroker.config.kafka_config import KafkaConfig
    from pykbroker.config.properties import PropertiesError
    try:
        props = load_server_properties(path, overrides)
    except (OSError, PropertiesError) as e:
        print(f"ERROR: cannot read {path}: {e}", file=sys.stderr)
        return 1
    try:
        config = KafkaConfig(props)
    except ConfigException as e:
        print(f"ERROR: {e}", file=sys.stderr)
        log.error(f"Exiting Kafka due to fatal exception: {e}")
        return 1
    log.info(f"Log directories: {', '.join(config.log_dirs)} (metadata.log.dir: {config.metadata_log_dir})")
    from pykbroker.server.kafka_raft_server import KafkaRaftServer, StartupError
    server = KafkaRaftServer(config)

    def shutdown_hook(signum: int) -> None:
        # The shutdown runs whatever happens to the log line (stdout may be a pipe whose reader is gone).
        try:
            log.info(f"Terminating process due to signal SIG{signal.Signals(signum).name.removeprefix('SIG')}")
        finally:
            server.shutdown()

    def on_signal(signum, _frame):
        # Nothing else here: the handler may interrupt the main thread inside a log write (which holds
        # the output lock), so logging and shutdown run on their own thread.
        threading.Thread(target=shutdown_hook, args=(signum,), name="kafka-shutdown-hook", daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        server.startup()
    except StartupError as e:  # a known cause, fully stated: one line, no traceback
        log.error(f"Exiting Kafka due to fatal exception during startup: {e}")
        server.shutdown()
        return 1
    except Exception as e:
        log.error(f"Exiting Kafka due to fatal exception during startup: {e}", exc_info=True)
        server.shutdown()
        return 1
    while not server.await_shutdown(0.5):
        pass
    log.info("Kafka server exited")
    return 0


if __name__ == "__main__":
    sys.exit(main())
