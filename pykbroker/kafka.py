"""Entry point: ``kafka-server-start [-daemon] [server.properties] [--override property=value]*``
(also ``python -m pykbroker``).

Mirrors ``kafka.Kafka``: parse arguments (Kafka's usage line on bad ones), load the properties file,
apply ``--override``s, build :class:`KafkaConfig` (a bad value stops start-up with one line naming the
key and the value, exit code 1), start :class:`KafkaRaftServer`, shut down in order on SIGTERM/SIGINT.

Unlike Kafka, relative data directories (``log.dirs``, ``log.dir``, ``metadata.log.dir``) in the properties
file are taken from the file's own directory, not the working directory, so starting from another
directory finds the same data instead of formatting a new empty cluster; relative ``--override`` values
are taken from the working directory. The absolute directories are logged at start
(``Log directories: ...``). Without a properties file the package's single-node configuration is used
(:data:`pykbroker.config.server_properties.DEFAULT_CONFIG`).

Logs, as Kafka's scripts and ``log4j.properties`` arrange them: ``server.log``, ``controller.log`` and
``state-change.log`` in ``$LOG_DIR`` (default: the installation's ``logs/``, see
:func:`pykbroker.utils.logging.default_log_dir`), rotated by size (``$PYKBROKER_LOG_FILE_MAX_BYTES``,
default 10 MB; ``$PYKBROKER_LOG_FILE_BACKUPS``, default 10), always appended to; in the foreground every
line also goes to stdout. ``$PYKBROKER_LOG_LEVEL`` sets the levels: ``info`` or
``info,SocketServer=debug,pykbroker.log=warn`` (per component or module, see :mod:`pykbroker.utils.logging`).

``-daemon`` (Kafka's flag): the broker detaches (a forked process in its own session, stdin from /dev/null,
stdout and stderr appended to ``$LOG_DIR/kafkaServer.out``) and logs to the files only; the command
writes the broker's pid to ``$LOG_DIR/kafkaServer.pid`` and exits 0.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading

from pykbroker.config.server_properties import (  # noqa: F401 - parse_args/resolve_data_dirs are public here too
    DATA_DIR_KEYS,
    USAGE,
    load_server_properties,
    parse_args,
    resolve_data_dirs,
)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--version":
        from pykbroker import __version__

        print(__version__)
        return 0
    # Start-up time (issue 31): importing the broker allocates a few hundred thousand objects that live as long as
    # the process (modules, classes, functions), which the cyclic garbage collector would walk again and again while
    # they are created (and at every full collection after). It is off until the broker's modules are imported;
    # they are then frozen (gc.freeze: never scanned again) and the collector runs as before. A program calling
    # main() gets its collector back as it was.
    gc_enabled = gc.isenabled()
    gc.disable()
    try:
        return _run(argv, gc_enabled)
    finally:
        if gc_enabled:
            gc.enable()


def _run(argv: list[str], gc_enabled: bool) -> int:
    path, overrides = parse_args(argv)
    from pykbroker.utils import logging as plog

    daemon = "-daemon" in argv
    log_dir = plog.default_log_dir()
    if daemon and not _daemonize(log_dir):
        return 0
    _configure_logging(plog, log_dir, console=not daemon)
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

    gc.freeze()  # see main()
    if gc_enabled:
        gc.enable()
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
    except (StartupError, ConfigException) as e:  # a known cause, fully stated: one line, no traceback
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
    return 1 if server.fatal_error else 0


def _configure_logging(plog, log_dir: str, console: bool) -> None:
    level = os.environ.get(plog.LOG_LEVEL_ENV, "info")
    try:
        plog.configure(
            level,
            console=console,
            log_dir=log_dir,
            max_bytes=_env_int("PYKBROKER_LOG_FILE_MAX_BYTES", plog.DEFAULT_MAX_BYTES),
            backup_count=_env_int("PYKBROKER_LOG_FILE_BACKUPS", plog.DEFAULT_BACKUP_COUNT),
        )
    except OSError as e:  # as log4j: the broker runs on, without its files
        print(f"pykbroker: cannot write logs to {log_dir} ({e}); logging to stdout only", file=sys.stderr)
        plog.configure(level)


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        print(f"pykbroker: ignoring {name}={os.environ[name]!r} (not a number)", file=sys.stderr)
        return default


def _daemonize(log_dir: str) -> bool:
    """Fork the broker off (no thread runs yet): True in the daemon, False in the command, which records
    the daemon's pid in ``kafkaServer.pid``."""
    os.makedirs(log_dir, exist_ok=True)
    out = os.open(os.path.join(log_dir, "kafkaServer.out"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        os.close(out)
        with open(os.path.join(log_dir, "kafkaServer.pid"), "w") as f:
            f.write(f"{pid}\n")
        return False
    os.setsid()  # no controlling terminal: a closed terminal (SIGHUP) does not reach the broker
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(null)
    os.close(out)
    return True


if __name__ == "__main__":
    sys.exit(main())
