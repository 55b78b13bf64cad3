"""Structured logging through structlog, rendered as Kafka-like one-line events.

    [2026-11-21 10:00:00,123] INFO [SocketServer listenerType=BROKER, nodeId=1] Awaiting socket connections on
    127.0.0.1:9092. (thread=main)

(one line in the log; wrapped here)

Loggers carry their component prefix as the ``component`` key: ``get_logger("SocketServer",
listenerType="BROKER", nodeId=1)``. Extra key/values are appended after the message. ``configure``
is idempotent and called once by the entry point; everything else calls :func:`get_logger`, the only way
to get a logger (this is the one module that imports structlog).

Writing a log line never raises: when the output stream fails (the reader of a pipe went away:
``kafka-server-start ... | tee log`` and Ctrl-C; a full disk; a closed file), the stream's file
descriptor is pointed at ``/dev/null`` (so nothing else in the process trips on it either, the
interpreter's final flush included) and logging carries on to stderr, or is discarded when stderr
is gone too. A thread that logs -- the shutdown hook first of all -- is never killed by its log.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

import structlog

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}
_configured = False


def _render(_logger, method_name: str, event_dict: dict) -> str:
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
    line = f"[{ts}] {level} " + (f"[{component}] " if component else "") + str(event)
    if extras:
        line += f" ({extras})"
    if exc:
        line += "\n" + exc
    return line


_write_lock = threading.RLock()


def _silence(stream) -> None:
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
    """structlog's logger at the end of the chain: writes rendered lines to a stream, never raises."""

    def __init__(self, stream):
        self._stream = stream

    def msg(self, message: str) -> None:
        with _write_lock:
            while self._stream is not None:
                stream = self._stream
                try:
                    stream.write(message + "\n")
                    stream.flush()
                    return
                except (OSError, ValueError) as e:  # BrokenPipeError, EIO, ENOSPC; ValueError: closed file
                    self._fail_over(stream, e)

    def _fail_over(self, stream, error: BaseException) -> None:
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

    debug = info = warning = warn = error = err = critical = fatal = exception = failure = log = msg


def _sink_factory(stream):
    sink = _SafeSink(stream)
    return lambda *args: sink


_generation = 0  # bumped by every (re)configuration: loggers re-bind on their next call


def configure(level: str = "info", stream=None) -> None:
    """Set up structlog for the process: level filter, Kafka-like renderer, output ``stream`` (stdout),
    written through a sink that survives the stream failing (see the module docstring)."""
    global _configured, _generation
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.format_exc_info,
            _render,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level.lower(), logging.INFO)),
        logger_factory=_sink_factory(stream or sys.stdout),
        cache_logger_on_first_use=False,
    )
    _configured = True
    _generation += 1


def saved_config() -> dict:
    """The current logging configuration, for :func:`restore` (tests that reconfigure logging)."""
    return structlog.get_config()


def restore(config: dict) -> None:
    """Reinstate a configuration from :func:`saved_config`; every logger re-binds to it."""
    global _generation
    structlog.configure(**config)
    _generation += 1


class ComponentLogger:
    """What :func:`get_logger` returns: a logger whose lines carry ``[component]``.

    It binds to the configuration current at its first call and re-binds after :func:`configure` or
    :func:`restore`, so a module-level ``_log = get_logger("LogManager")`` created at import, before the
    entry point configures logging, still logs Kafka-style. A call costs one generation check more than
    a bound structlog logger. Thread-safe: a race re-binds twice to the same configuration.
    """

    __slots__ = ("component", "_bound", "_generation")

    def __init__(self, component: str | None):
        self.component = component
        self._bound = None
        self._generation = -1

    def _logger(self):
        if self._generation != _generation:
            bound = structlog.get_logger()
            self._bound = bound.bind(component=self.component) if self.component else bound.bind()
            self._generation = _generation
        return self._bound

    def debug(self, event=None, *args, **kw):
        return self._logger().debug(event, *args, **kw)

    def info(self, event=None, *args, **kw):
        return self._logger().info(event, *args, **kw)

    def warning(self, event=None, *args, **kw):
        return self._logger().warning(event, *args, **kw)

    warn = warning

    def error(self, event=None, *args, **kw):
        return self._logger().error(event, *args, **kw)

    def exception(self, event=None, *args, **kw):
        return self._logger().exception(event, *args, **kw)

    def critical(self, event=None, *args, **kw):
        return self._logger().critical(event, *args, **kw)

    def bind(self, **kw):
        """A structlog logger with more context (bound to the current configuration)."""
        return self._logger().bind(**kw)


def get_logger(component: str | None = None, **context) -> ComponentLogger:
    """A logger whose lines carry ``[component k=v, ...]`` as Kafka's log prefixes do; the only way to
    get a logger in pykbroker."""
    if context:
        prefix = ", ".join(f"{k}={v}" for k, v in context.items())
        component = f"{component} {prefix}" if component else prefix
    return ComponentLogger(component)


def thread_name() -> str:
    return threading.current_thread().name
