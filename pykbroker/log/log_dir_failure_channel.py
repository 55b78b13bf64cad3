"""Where an I/O error on a log directory is reported, so the directory is taken offline once.

Mirrors ``org.apache.kafka.storage.internals.log.LogDirFailureChannel``: whoever hits an ``OSError``
(``IOException``) on a log directory -- a log append, roll, flush, read, a checkpoint write -- calls
:meth:`maybe_add_offline_log_dir`; the first report of a directory queues it, and the ReplicaManager's
``LogDirFailureHandler`` thread takes it (:meth:`take_next_offline_log_dir`) and stops serving the
partitions in it (they answer KAFKA_STORAGE_ERROR, code 56, retriable) while the other directories
keep working.

Scheduled work of the log layer (the ``flush-log`` task of a roll, retention and its ``delete-file`` task,
the checkpoint tasks, the cleaner) reports its I/O errors the same way, and runs under
:func:`storage_task`, so a failing directory costs one ERROR line (this channel's), never the
scheduler's traceback.

Threading: any thread may report; ``_lock`` guards the set of offline directories.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from pykbroker.protocol.errors import KafkaStorageError
from pykbroker.utils.logging import get_logger

_log = get_logger("LogDirFailureChannel")


def storage_task(name: str, fn: Callable[[], object], log=None) -> Callable[[], None]:
    """``fn`` as a scheduled task of the log layer (Kafka runs such work under ``maybeHandleIOException``).

    A ``KafkaStorageError`` ends the run with one WARN line on ``log`` (default: this module's) instead of
    the scheduler's "Uncaught exception" traceback: the error was reported to the LogDirFailureChannel
    (which logged it once, as ERROR, and takes the directory offline), or the directory was already
    offline, or the log was closed meanwhile (deleted, or dropped with its offline directory). Any other
    exception is a bug and still reaches the scheduler, traceback included."""

    def run() -> None:
        try:
            fn()
        except KafkaStorageError as e:
            (log or _log).warning(f"Scheduled task {name} skipped: {e}")

    return run


class LogDirFailureChannel:
    def __init__(self, log_dir_num: int = 1):
        self._lock = threading.Lock()
        self._offline: dict[str, str] = {}  # dir -> the first error's message
        self._queue: queue.Queue[str] = queue.Queue()
        self._log = get_logger("LogDirFailureChannel")

    def has_offline_log_dir(self, log_dir: str) -> bool:
        return log_dir in self._offline

    def offline_log_dirs(self) -> list[str]:
        with self._lock:
            return list(self._offline)

    def maybe_add_offline_log_dir(self, log_dir: str, msg: str, error: BaseException | None = None) -> None:
        """Log ``msg`` (with the error) and queue ``log_dir`` for the failure handler unless it is
        already offline."""
        self._log.error(msg, error=repr(error) if error is not None else None)
        with self._lock:
            if log_dir in self._offline:
                return
            self._offline[log_dir] = msg
        self._queue.put_nowait(log_dir)

    def take_next_offline_log_dir(self, timeout: float | None = None) -> str | None:
        """The next directory to take offline; blocks up to ``timeout`` seconds (None: forever), then
        returns None."""
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
