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
    return 0


if __name__ == "__main__":
    sys.exit(main())
