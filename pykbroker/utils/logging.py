"""Structured logging through structlog, rendered as Kafka-like one-line events.

    [2026-11-21 10:00:00,123] INFO [SocketServer listenerType=BROKER, nodeId=1] Awaiting socket connections on
    127.0.0.1:9092. (thread=main)

(one line in the log; wrapped here)

Loggers carry their component prefix as the ``component`` key: ``get_logger("SocketServer",
listenerType="BROKER", nodeId=1)``. Extra key/values are appended after the message. ``configure``
is idempotent and called once by the entry point; everything else calls :func:`get_logger`, the only way
to get a logger (this is the one module that imports structlog).

Outputs, as Kafka's ``log4j.properties`` has them (:func:`configure`):

* the console stream (stdout) -- the broker in the foreground, the tools (stderr);
* with ``log_dir`` (the broker: ``$LOG_DIR``, see :func:`default_log_dir`), files rotated by size through
  the standard library's :class:`~logging.handlers.RotatingFileHandler` (``max_bytes``, ``backup_count``):
  ``server.log`` gets every line except those of the controller (``controller.log``: the
  ``QuorumController`` and the control managers) and of the state-change logger (``state-change.log``:
  partitions becoming leader or follower), as Kafka's appenders with ``additivity=false`` do. Files are
  opened for appending, never truncated;
* ``stdlib=True`` instead: every line goes to the standard library's :mod:`logging` (logger
  ``pykbroker.<module>``, e.g. ``pykbroker.network.socket_server``), for a broker embedded in another
  program (``pykbroker.testing.EmbeddedKafka``); the levels are then that program's.

Levels: ``level`` is a root level optionally followed by per-logger levels,
``"info,SocketServer=debug,pykbroker.log=warn,state.change.logger=warn"`` (the broker reads it from
``$PYKBROKER_LOG_LEVEL``). A key names a component (the first argument of :func:`get_logger`, e.g.
``SocketServer``, ``QuorumController``, ``UnifiedLog``) or a logger name, i.e. the module that created
the logger or a package above it (``pykbroker.network``, as ``log4j.logger.kafka.network=DEBUG`` does), or
``state.change.logger``; the longest matching key wins. Lines below a logger's level cost a no-op call.

Writing a log line never raises: when the output stream fails (the reader of a pipe went away:
``kafka-server-start ... | tee log`` and Ctrl-C; a full disk; a closed file), the stream's file
descriptor is pointed at ``/dev/null`` (so nothing else in the process trips on it either, the
interpreter's final flush included) and logging carries on to stderr, or is discarded when stderr
is gone too. A thread that logs -- the shutdown hook first of all -- is never killed by its log.
(A failing log file is reported once on stderr by the standard library's handler and skipped.)
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
import threading
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any, TextIO


def _pykbroker_process() -> bool:
    """Whether this process is one of pykbroker's own commands: ``python -m pykbroker[.x]`` or a console
    script (``kafka-server-start``, ``kafka-topics``, ...) rather than a program that embeds pykbroker."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and (spec.name == "pykbroker" or spec.name.startswith("pykbroker.")):
        return True
    argv = getattr(sys, "argv", None) or [""]
    return os.path.basename(argv[0]).startswith("kafka-")


# Start-up time (issue 31): structlog's dev console and traceback helpers import rich (and through it
# pygments, ~0.1 s of the broker's start-up) when it is installed, although pykbroker renders its lines
# itself and formats exceptions with structlog's plain formatter. In pykbroker's own processes structlog is
# imported with ``import rich`` failing (structlog then records rich as absent: its ConsoleRenderer, unused
# here, would format tracebacks without it); a program that embeds pykbroker keeps its structlog as it is.
_hide_rich = "structlog" not in sys.modules and "rich" not in sys.modules and _pykbroker_process()
if _hide_rich:
    sys.modules["rich"] = None  # type: ignore[assignment]
try:
    import structlog
finally:
    if _hide_rich and sys.modules.get("rich", 0) is None:
        del sys.modules["rich"]

_LEVELS = {
    "trace": logging.DEBUG,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "fatal": logging.CRITICAL,
}
_LEVEL_NUMBERS = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING, "ERROR": logging.ERROR}

LOG_DIR_ENV = "LOG_DIR"
LOG_LEVEL_ENV = "PYKBROKER_LOG_LEVEL"
# log4j's RollingFileAppender defaults are 10 MB and 1 backup; we keep ten.
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_BACKUP_COUNT = 10
SERVER_LOG, CONTROLLER_LOG, STATE_CHANGE_LOG = "server.log", "controller.log", "state-change.log"
STATE_CHANGE_LOGGER = "state.change.logger"
_CONTROLLER_MODULES = ("pykbroker.metadata.quorum_controller",)
_configured = False


def _render(_logger: object, method_name: str, event_dict: MutableMapping[str, Any]) -> dict[str, Any]:
    """The last processor: ``{"line": whole line, "body": line without time and level, "levelno": n}``."""
    now = time.time()
    ts = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f",{int((now % 1) * 1000):03d}"
    level = event_dict.pop("level", method_name).upper()
    if level == "WARNING":
        level = "WARN"
    component = event_dict.pop("component", None)
    event = event_dict.pop("event", "")
    exc = event_dict.pop("exception", None)
    event_dict.pop("timestamp", None)
    extras = " ".join(f"{k}={v}" for k, v in event_dict.items())
    body = (f"[{component}] " if component else "") + str(event)
    if extras:
        body += f" ({extras})"
    if exc:
        body += "\n" + exc
    return {"line": f"[{ts}] {level} {body}", "body": body, "levelno": _LEVEL_NUMBERS.get(level, logging.CRITICAL)}


_write_lock = threading.RLock()


def _silence(stream: TextIO) -> None:
    """Point ``stream``'s file descriptor at /dev/null: later writes (and flushes) succeed and vanish."""
    try:
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, fd)
        finally:
            os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


class _SafeSink:
    """The console output: writes rendered lines to a stream, never raises."""

    def __init__(self, stream: TextIO) -> None:
        self._stream: TextIO | None = stream

    def write(self, message: str) -> None:
        with _write_lock:
            while self._stream is not None:
                stream = self._stream
                try:
                    stream.write(message + "\n")
                    stream.flush()
                    return
                except (OSError, ValueError) as e:  # BrokenPipeError, EIO, ENOSPC; ValueError: closed file
                    self._fail_over(stream, e)

    def _fail_over(self, stream: TextIO, error: BaseException) -> None:
        _silence(stream)
        fallback = sys.stderr
        if stream is fallback or fallback is None:
            self._stream = None
            return
        self._stream = fallback
        try:
            fallback.write(f"pykbroker: log output failed ({error!r}); logging to stderr\n")
            fallback.flush()
        except (OSError, ValueError):
            _silence(fallback)
            self._stream = None


class _Sink:
    """structlog's logger at the end of one logger's chain: the console, one log file, or the standard
    library's logger. Never raises."""

    def __init__(self, console: _SafeSink | None, file: logging.Handler | None, stdlib: logging.Logger | None):
        self._console = console
        self._file = file
        self._stdlib = stdlib

    def msg(self, line: str = "", body: str = "", levelno: int = logging.INFO) -> None:
        if self._console is not None:
            self._console.write(line)
        if self._file is not None:
            record = logging.makeLogRecord(
                {"msg": line, "levelno": levelno, "levelname": logging.getLevelName(levelno)}
            )
            self._file.handle(record)  # the handler reports its own errors (stderr) and never raises
        if self._stdlib is not None:
            try:
                self._stdlib.log(levelno, body)
            except Exception:  # noqa: BLE001 - a handler of the host program failed: not the broker's problem
                pass

    debug = info = warning = warn = error = err = critical = fatal = exception = failure = log = msg


def parse_levels(spec: str) -> tuple[int, dict[str, int]]:
    """``"info,SocketServer=debug,pykbroker.log=warn"`` -> ``(INFO, {"SocketServer": DEBUG, ...})``.
    Unknown level names are reported on stderr and ignored."""
    root, levels = logging.INFO, {}
    for item in (spec or "").split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.rpartition("=")
        level = _LEVELS.get(value.strip().lower())
        if level is None:
            print(f"pykbroker: ignoring log level {item!r} (levels: {', '.join(_LEVELS)})", file=sys.stderr)
        elif sep:
            levels[key.strip()] = level
        else:
            root = level
    return root, levels


def default_log_dir() -> str:
    """``$LOG_DIR``, else ``logs/`` of the installation, as Kafka's scripts (``$base_dir/logs``): the
    checkout's ``logs/`` when running from a checkout, else the virtualenv's (``sys.prefix``), else, when
    that is not writable (a system-wide install), ``~/.local/state/pykbroker/logs``."""
    env = os.environ.get(LOG_DIR_ENV)
    if env:
        return os.path.abspath(env)
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "bin" / "kafka-server-start").is_file() and (checkout / "conf").is_dir():
        return str(checkout / "logs")
    if os.access(sys.prefix, os.W_OK):
        return os.path.join(sys.prefix, "logs")
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "pykbroker", "logs")


class _Outputs:
    """One configuration: levels, the console, the log files or the standard library."""

    def __init__(
        self,
        level: str,
        console: TextIO | None,
        log_dir: str | None,
        max_bytes: int,
        backup_count: int,
        stdlib: bool,
    ) -> None:
        self.root_level, self.levels = parse_levels(level)
        self.console = _SafeSink(console) if console is not None else None
        self.stdlib = stdlib
        self.files: dict[str, logging.Handler] = {}
        if log_dir is not None:
            os.makedirs(log_dir, exist_ok=True)
            for name in (SERVER_LOG, CONTROLLER_LOG, STATE_CHANGE_LOG):
                handler = logging.handlers.RotatingFileHandler(
                    os.path.join(log_dir, name), mode="a", maxBytes=max_bytes, backupCount=backup_count, delay=True
                )
                handler.setFormatter(logging.Formatter("%(message)s"))
                self.files[name] = handler

    def level_of(self, name: str, component: str | None) -> int:
        if self.stdlib:
            return _stdlib_logger(name).getEffectiveLevel()
        best, level = -1, self.root_level
        for key, value in self.levels.items():
            if (
                name == key
                or name.startswith(key + ".")
                or (component is not None and (component == key or component.startswith(key + " ")))
            ) and len(key) > best:
                best, level = len(key), value
        return level

    def file_of(self, name: str) -> logging.Handler | None:
        if not self.files:
            return None
        if name == STATE_CHANGE_LOGGER:
            return self.files[STATE_CHANGE_LOG]
        if name in _CONTROLLER_MODULES or name.endswith("_control_manager"):
            return self.files[CONTROLLER_LOG]
        return self.files[SERVER_LOG]

    def bind(self, name: str, base: str | None, component: str | None) -> Any:
        """A structlog logger for logger ``name`` (component ``base``) whose lines carry ``[component]``."""
        sink = _Sink(self.console, self.file_of(name), _stdlib_logger(name) if self.stdlib else None)
        wrapper = structlog.make_filtering_bound_logger(self.level_of(name, base))
        # make_filtering_bound_logger returns a BoundLoggerBase subclass, constructed (logger, processors,
        # context); structlog types it as the FilteringBoundLogger protocol, which has no constructor
        return wrapper(sink, _PROCESSORS, {"component": component} if component else {})  # type: ignore[call-arg]

    def close(self) -> None:
        for handler in self.files.values():
            handler.close()


_PROCESSORS: list[structlog.typing.Processor] = [
    structlog.processors.add_log_level,
    structlog.processors.format_exc_info,
    _render,
]


def _stdlib_logger(name: str) -> logging.Logger:
    return logging.getLogger(name if name.startswith("pykbroker") else f"pykbroker.{name}")


_outputs: _Outputs | None = None
_generation = 0  # bumped by every (re)configuration: loggers re-bind on their next call


def configure(
    level: str = "info",
    stream: TextIO | None = None,
    *,
    console: bool = True,
    log_dir: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    backup_count: int = DEFAULT_BACKUP_COUNT,
    stdlib: bool = False,
) -> None:
    """Set up logging for the process (see the module docstring): ``level`` (a root level and per-logger
    levels), the console ``stream`` (stdout; none with ``console=False``), rotated log files in ``log_dir``,
    or, with ``stdlib=True``, the standard library's :mod:`logging` only. Raises OSError when ``log_dir``
    cannot be created."""
    global _configured, _generation, _outputs
    if stdlib:
        outputs = _Outputs("info", None, None, max_bytes, backup_count, True)
    else:
        outputs = _Outputs(level, (stream or sys.stdout) if console else None, log_dir, max_bytes, backup_count, False)
    previous, _outputs = _outputs, outputs
    structlog.configure(
        processors=_PROCESSORS,
        wrapper_class=structlog.make_filtering_bound_logger(outputs.root_level),
        logger_factory=lambda *args: _Sink(outputs.console, outputs.file_of(""), None),
        cache_logger_on_first_use=False,
    )
    _configured = True
    _generation += 1
    if previous is not None:
        previous.close()  # a restored configuration reopens its files on the next line


def saved_config() -> dict:
    """The current logging configuration, for :func:`restore` (tests that reconfigure logging)."""
    return {"structlog": structlog.get_config(), "outputs": _outputs}


def restore(config: dict) -> None:
    """Reinstate a configuration from :func:`saved_config`; every logger re-binds to it."""
    global _generation, _outputs
    structlog.configure(**config["structlog"])
    if _outputs is not None and _outputs is not config["outputs"]:
        _outputs.close()
    _outputs = config["outputs"]
    _generation += 1


def refresh() -> None:
    """Make every logger re-read its level (after the host program changed its :mod:`logging` levels)."""
    global _generation
    _generation += 1


class ComponentLogger:
    """What :func:`get_logger` returns: a logger whose lines carry ``[component]``.

    ``name`` is the logger's name for levels and outputs: the module that created it (or
    ``state.change.logger``). It binds to the configuration current at its first call and re-binds after
    :func:`configure` or :func:`restore`, so a module-level ``_log = get_logger("LogManager")`` created at
    import, before the entry point configures logging, still logs Kafka-style. A call costs one
    generation check more than a bound structlog logger. Thread-safe: a race re-binds twice to the same
    configuration.
    """

    __slots__ = ("component", "name", "_base", "_bound", "_generation")

    def __init__(self, component: str | None, name: str = "pykbroker", base: str | None = None):
        self.component = component
        self.name = name
        self._base = base if base is not None else component
        self._bound: Any = None  # the structlog logger of the current configuration
        self._generation = -1

    def _logger(self) -> Any:
        if self._generation != _generation:
            outputs = _outputs
            if outputs is None:  # never configured: structlog's own defaults
                bound = structlog.get_logger()
                self._bound = bound.bind(component=self.component) if self.component else bound.bind()
            else:
                self._bound = outputs.bind(self.name, self._base, self.component)
            self._generation = _generation
        return self._bound

    def debug(self, event: object = None, *args: Any, **kw: Any) -> Any:
        return self._logger().debug(event, *args, **kw)

    def info(self, event: object = None, *args: Any, **kw: Any) -> Any:
        return self._logger().info(event, *args, **kw)

    def warning(self, event: object = None, *args: Any, **kw: Any) -> Any:
        return self._logger().warning(event, *args, **kw)

    warn = warning

    def error(self, event: object = None, *args: Any, **kw: Any) -> Any:
        return self._logger().error(event, *args, **kw)

    def exception(self, event: object = None, *args: Any, **kw: Any) -> Any:
        return self._logger().exception(event, *args, **kw)

    def critical(self, event: object = None, *args: Any, **kw: Any) -> Any:
        return self._logger().critical(event, *args, **kw)

    def bind(self, **kw: Any) -> Any:
        """A structlog logger with more context (bound to the current configuration)."""
        return self._logger().bind(**kw)


def get_logger(component: str | None = None, **context: object) -> ComponentLogger:
    """A logger whose lines carry ``[component k=v, ...]`` as Kafka's log prefixes do; the only way to
    get a logger in pykbroker. Its name (levels, outputs) is the calling module's."""
    base = component
    if context:
        prefix = ", ".join(f"{k}={v}" for k, v in context.items())
        component = f"{component} {prefix}" if component else prefix
    try:
        name = sys._getframe(1).f_globals.get("__name__", "pykbroker")
    except ValueError:
        name = "pykbroker"
    return ComponentLogger(component, name, base)


def state_change_logger(node_id: int) -> ComponentLogger:
    """Kafka's ``state.change.logger`` (``[Broker id=1] ...``): partitions becoming leader or follower;
    written to ``state-change.log``."""
    return ComponentLogger(f"Broker id={node_id}", STATE_CHANGE_LOGGER, "Broker")


def thread_name() -> str:
    return threading.current_thread().name
