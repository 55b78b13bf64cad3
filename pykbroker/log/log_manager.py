"""Every partition log of the broker, across its log directories.

Mirrors ``kafka.log.LogManager``. At start-up each log directory is scanned: without the
``.kafka_cleanshutdown`` marker every partition is recovered from its recovery point (see
``LogLoader``), and one structured line per partition reports what recovery truncated. Background
tasks on the scheduler enforce retention, flush by time, expire idle producers and write the
checkpoint files (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``). ``shutdown`` flushes and closes every log, writes the
checkpoints and the clean-shutdown marker.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from pykbroker.config.broker_configs.replication_configs import REPLICA_HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS_CONFIG
from pykbroker.config.broker_configs.server_log_configs import (
    LOG_FLUSH_OFFSET_CHECKPOINT_INTERVAL_MS_CONFIG,
    LOG_FLUSH_SCHEDULER_INTERVAL_MS_CONFIG,
    LOG_FLUSH_START_OFFSET_CHECKPOINT_INTERVAL_MS_CONFIG,
    LOG_INITIAL_TASK_DELAY_MS_CONFIG,
    LOG_RETENTION_CHECK_INTERVAL_MS_CONFIG,
    NUM_RECOVERY_THREADS_PER_DATA_DIR_CONFIG,
)
from pykbroker.config.broker_configs.transaction_configs import (
    PRODUCER_ID_EXPIRATION_MS_CONFIG,
    TRANSACTION_PARTITION_VERIFICATION_ENABLE_CONFIG,
)
from pykbroker.log.checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    CorruptCheckpointError,
    OffsetCheckpointFile,
)
from pykbroker.log.file_lock import FileLock
from pykbroker.log.log_config import LONG_MAX, LogConfig
from pykbroker.log.log_dir_failure_channel import LogDirFailureChannel, storage_task
from pykbroker.log.log_file_utils import (
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    log_delete_dir_name,
    log_dir_name,
    parse_topic_partition_name,
)
from pykbroker.log.producer_state_manager import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from pykbroker.log.unified_log import UnifiedLog
from pykbroker.protocol.errors import KafkaStorageError
from pykbroker.utils.files import atomic_write, fsync_dir
from pykbroker.utils.logging import get_logger
from pykbroker.utils.scheduler import Scheduler
from pykbroker.utils.time import Time

_log = get_logger("LogManager")
_T = TypeVar("_T")
_R = TypeVar("_R")

METADATA_TOPIC = "__cluster_metadata"
LOCK_FILE_NAME = ".lock"
TopicPartition = tuple[str, int]


class LogDirLockError(RuntimeError):
    """Another process (or another server in this process) holds a data directory's ``.lock``
    (Kafka's ``KafkaException`` from ``LogManager.lockLogDirs``)."""


def lock_log_dirs(dirs: list[str]) -> list[FileLock]:
    """Create each directory if needed and take the exclusive lock on its ``.lock`` file, in order
    (Kafka's ``LogManager.lockLogDirs``). The locks are held until released (at broker shutdown).
    Raises LogDirLockError, with Kafka's message, when a directory is in use (the locks already taken
    are released); OSError when a directory cannot be created or its lock file opened."""
    locks: list[FileLock] = []
    try:
        for d in dict.fromkeys(os.path.abspath(d) for d in dirs):
            os.makedirs(d, exist_ok=True)
            lock = FileLock(os.path.join(d, LOCK_FILE_NAME))
            if not lock.try_lock():
                raise LogDirLockError(
                    f"Failed to acquire lock on file {LOCK_FILE_NAME} in {d}. "
                    "A Kafka instance in another process or thread is using this directory."
                )
            locks.append(lock)
    except BaseException:
        for lock in locks:
            lock.release()
        raise
    return locks


class LogManager:
    """Owns the broker's partition logs.

    Threading: ``_lock`` guards the maps of current logs (and which directory holds each) and of logs
    pending deletion; it is never held while a log does I/O beyond a rename. Each ``UnifiedLog`` has
    its own lock. Request handler threads call ``get_log``/``get_or_create_log``; scheduler threads run
    the periodic tasks; ``startup``/``shutdown`` run on the broker's main thread.
    """

    def __init__(
        self,
        log_dirs: list[str],
        default_config: LogConfig,
        scheduler: Scheduler,
        time: Time,
        *,
        retention_check_ms: int = 300_000,
        flush_check_ms: int = LONG_MAX,
        flush_recovery_offset_checkpoint_ms: int = 60_000,
        flush_start_offset_checkpoint_ms: int = 60_000,
        high_watermark_checkpoint_ms: int = 5_000,
        initial_task_delay_ms: int = 30_000,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        producer_id_expiration_check_ms: int = 600_000,
        transaction_verification_enabled: bool = False,
        log_dir_failure_channel: LogDirFailureChannel | None = None,
        num_recovery_threads_per_data_dir: int = 1,
    ):
        if not log_dirs:
            raise ValueError("At least one log directory is required")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self._default_config = default_config
        self._scheduler = scheduler
        self._time = time
        self.retention_check_ms = retention_check_ms
        self.flush_check_ms = flush_check_ms
        self.flush_recovery_offset_checkpoint_ms = flush_recovery_offset_checkpoint_ms
        self.flush_start_offset_checkpoint_ms = flush_start_offset_checkpoint_ms
        self.high_watermark_checkpoint_ms = high_watermark_checkpoint_ms
        self.initial_task_delay_ms = initial_task_delay_ms
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producer_id_expiration_check_ms = producer_id_expiration_check_ms
        #: ``transaction.partition.verification.enable`` (KIP-890 part 1), set on each log's producer state
        self.transaction_verification_enabled = transaction_verification_enabled
        #: ``num.recovery.threads.per.data.dir``: the threads per log dir that load logs at start-up and flush and
        #: close them at shutdown
        self.num_recovery_threads_per_data_dir = max(1, num_recovery_threads_per_data_dir)
        self._lock = threading.RLock()
        self._logs: dict[TopicPartition, UnifiedLog] = {}
        self._log_dir_of: dict[TopicPartition, str] = {}
        self._unsynced_dirs: set[str] = set()  # log dirs with logs created by get_or_create_log(sync_dir=False)
        # Per log dir, the high watermarks last written: the periodic checkpoint skips a write that would not
        # change the file (an idle broker with thousands of partitions rewrote and fsynced it every 5 s).
        self._hw_written: dict[str, dict] = {}
        self._topic_overrides: dict[str, dict[str, Any]] = {}
        self._topic_configs: dict[str, LogConfig] = {}
        self._tasks: list = []
        self._started = False
        self.had_clean_shutdown: dict[str, bool] = {}
        #: per log dir: the broker epoch its clean-shutdown marker held (None: no marker or unreadable)
        self.clean_shutdown_broker_epochs: dict[str, int | None] = {}
        self.log_dir_failure_channel = log_dir_failure_channel or LogDirFailureChannel(len(self.log_dirs))
        self._live_log_dirs: list[str] = list(self.log_dirs)
        #: log dir -> its ``directory.id`` (meta.properties, KIP-858; Kafka's ``LogManager.directoryIds``), set by
        #: the server after start-up; a directory without one is absent
        self.directory_ids: dict[str, uuid.UUID] = {}
        for d in self.log_dirs:
            os.makedirs(d, exist_ok=True)

    @classmethod
    def from_broker_config(
        cls,
        log_dirs: list[str],
        broker_props: Mapping[str, Any],
        scheduler: Scheduler,
        time: Time,
        log_dir_failure_channel: LogDirFailureChannel | None = None,
    ) -> LogManager:
        """Build from broker keys (``log.retention.check.interval.ms``, ``log.flush.*``,
        ``replica.high.watermark.checkpoint.interval.ms``, ``producer.id.expiration.ms`` ... and the
        ``log.*`` topic defaults)."""

        def get(key: str, default: int) -> int:
            value = broker_props.get(key)
            return default if value is None or str(value).strip() == "" else int(str(value).strip())

        return cls(
            log_dirs,
            LogConfig.from_broker_config(broker_props),
            scheduler,
            time,
            retention_check_ms=get(LOG_RETENTION_CHECK_INTERVAL_MS_CONFIG, 300_000),
            flush_check_ms=get(LOG_FLUSH_SCHEDULER_INTERVAL_MS_CONFIG, LONG_MAX),
            flush_recovery_offset_checkpoint_ms=get(LOG_FLUSH_OFFSET_CHECKPOINT_INTERVAL_MS_CONFIG, 60_000),
            flush_start_offset_checkpoint_ms=get(LOG_FLUSH_START_OFFSET_CHECKPOINT_INTERVAL_MS_CONFIG, 60_000),
            high_watermark_checkpoint_ms=get(REPLICA_HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS_CONFIG, 5_000),
            initial_task_delay_ms=get(LOG_INITIAL_TASK_DELAY_MS_CONFIG, 30_000),
            producer_id_expiration_ms=get(PRODUCER_ID_EXPIRATION_MS_CONFIG, DEFAULT_PRODUCER_ID_EXPIRATION_MS),
            producer_id_expiration_check_ms=get("producer.id.expiration.check.interval.ms", 600_000),
            transaction_verification_enabled=str(
                broker_props.get(TRANSACTION_PARTITION_VERIFICATION_ENABLE_CONFIG, True)
            )
            .strip()
            .lower()
            != "false",
            log_dir_failure_channel=log_dir_failure_channel,
            num_recovery_threads_per_data_dir=get(NUM_RECOVERY_THREADS_PER_DATA_DIR_CONFIG, 1),
        )

    @property
    def default_config(self) -> LogConfig:
        return self._default_config

    # -- configs ------------------------------------------------------------------------------
    def topic_config(self, topic: str) -> LogConfig:
        with self._lock:
            return self._topic_configs.get(topic, self._default_config)

    def update_topic_config(self, topic: str, overrides: Mapping[str, Any]) -> LogConfig:
        """Replace ``topic``'s overrides (validated; InvalidConfigurationError) and apply the new config to
        its existing logs."""
        config = self._default_config.with_overrides(overrides)
        with self._lock:
            if overrides:
                self._topic_overrides[topic] = dict(overrides)
                self._topic_configs[topic] = config
            else:
                self._topic_overrides.pop(topic, None)
                self._topic_configs.pop(topic, None)
            logs = [log for (t, _), log in self._logs.items() if t == topic]
        for log in logs:
            log.update_config(config)
        return config

    def reconfigure_defaults(self, default_config: LogConfig) -> None:
        """New broker-level defaults (dynamic broker config): every log is re-derived."""
        with self._lock:
            self._default_config = default_config
            self._topic_configs = {t: default_config.with_overrides(o) for t, o in self._topic_overrides.items()}
            items = list(self._logs.items())
        for (topic, _), log in items:
            log.update_config(self.topic_config(topic))

    # -- start-up -----------------------------------------------------------------------------
    def startup(self, topic_overrides: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        """Load every log (recovering after an unclean shutdown) and schedule the background tasks."""
        for topic, overrides in (topic_overrides or {}).items():
            self.update_topic_config(topic, overrides)
        self.load_logs()
        self._schedule_tasks()
        self._started = True

    def broker_epoch_from_clean_shutdown(self) -> int:
        """Kafka's ``readBrokerEpochFromCleanShutdownFiles``: the broker epoch every log directory's
        clean-shutdown marker held when the logs were loaded, or -1 when a directory is offline, had no
        marker, an unreadable one, or the epochs differ (the BrokerRegistration's ``previous_broker_epoch``)."""
        epochs = {self.clean_shutdown_broker_epochs.get(d) for d in self.log_dirs}
        if len(self.live_log_dirs) < len(self.log_dirs) or len(epochs) != 1:
            return -1
        (epoch,) = epochs
        return -1 if epoch is None else epoch

    def load_logs(self) -> None:
        """Load (recovering if unclean) every partition log of every log dir, a dir's logs on
        ``num.recovery.threads.per.data.dir`` threads (Kafka's ``LogManager.loadLogs``; the dirs one after
        another)."""
        for log_dir in self.log_dirs:
            self._load_logs_in_dir(log_dir)

    def _load_logs_in_dir(self, log_dir: str) -> None:
        marker = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        self.had_clean_shutdown[log_dir] = clean
        self.clean_shutdown_broker_epochs[log_dir] = _read_clean_shutdown_epoch(marker) if clean else None
        if not clean:
            _log.info("No clean shutdown marker: logs will be recovered from their recovery points", log_dir=log_dir)
        recovery_points = self._read_checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT_FILE)
        start_offsets = self._read_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT_FILE)
        high_watermarks = self._read_checkpoint(log_dir, REPLICATION_OFFSET_CHECKPOINT_FILE)
        to_load: list[tuple[str, TopicPartition]] = []
        for name in sorted(os.listdir(log_dir)):
            path = os.path.join(log_dir, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                _log.info("Deleting a partition directory left pending deletion", dir=path)
                shutil.rmtree(path, ignore_errors=True)
                continue
            if name.endswith(FUTURE_DIR_SUFFIX):
                _log.warning("Ignoring a future replica directory (not supported)", dir=path)
                continue
            try:
                tp = parse_topic_partition_name(name)
            except ValueError:
                continue
            if tp[0] == METADATA_TOPIC:
                continue
            to_load.append((path, tp))

        def load(item: tuple[str, TopicPartition]) -> None:
            path, tp = item
            self._load_log(
                log_dir, path, tp, clean, recovery_points.get(tp, 0), start_offsets.get(tp, 0), high_watermarks.get(tp)
            )

        self._on_recovery_threads(load, to_load, "log-loader")
        loaded = len(to_load)
        if clean:
            os.unlink(marker)
            fsync_dir(log_dir)
        _log.info("Loaded logs", log_dir=log_dir, partitions=loaded, clean_shutdown=clean)

    def _read_checkpoint(self, log_dir: str, file_name: str) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(os.path.join(log_dir, file_name)).read()
        except CorruptCheckpointError as e:
            _log.warning(
                "Ignoring a corrupt checkpoint file; offsets reset", log_dir=log_dir, file=file_name, error=str(e)
            )
            return {}

    def _load_log(
        self,
        log_dir: str,
        path: str,
        tp: TopicPartition,
        clean: bool,
        recovery_point: int,
        log_start_offset: int,
        high_watermark: int | None,
    ) -> UnifiedLog:
        start_ms = self._time.hi_res_milliseconds()
        log = UnifiedLog.create(
            path,
            self.topic_config(tp[0]),
            self._scheduler,
            self._time,
            log_start_offset=log_start_offset,
            recovery_point=recovery_point,
            had_clean_shutdown=clean,
            producer_id_expiration_ms=self.producer_id_expiration_ms,
            topic_partition=tp,
        )
        log.log_dir_failure_channel = self.log_dir_failure_channel
        log.producer_state_manager.transaction_verification_enabled = self.transaction_verification_enabled
        if high_watermark is not None:
            log.update_high_watermark(high_watermark)
        report = log.recovery_report
        if not clean:
            _log.info(
                "Recovered partition after unclean shutdown",
                partition=log.name,
                recovery_point=recovery_point,
                log_end_offset=log.log_end_offset,
                recovered_segments=report.recovered_segments,
                truncated_bytes=report.truncated_bytes,
                truncated_segment=report.truncated_segment,
                deleted_segments=list(report.deleted_segments),
                duration_ms=self._time.hi_res_milliseconds() - start_ms,
            )
        with self._lock:
            if tp in self._logs:
                raise RuntimeError(
                    f"Duplicate log directories for {tp[0]}-{tp[1]} are found in {self._log_dir_of[tp]} and {log_dir}"
                )
            self._logs[tp] = log
            self._log_dir_of[tp] = log_dir
        return log

    def _schedule_tasks(self) -> None:
        s, delay = self._scheduler, self.initial_task_delay_ms

        def periodic(name: str, fn, period: int) -> None:
            if 0 < period < LONG_MAX // 2:
                self._tasks.append(s.schedule(name, storage_task(name, fn, _log), delay, period))

        periodic("kafka-log-retention", self.cleanup_logs, self.retention_check_ms)
        periodic("kafka-log-flusher", self.flush_dirty_logs, self.flush_check_ms)
        periodic(
            "kafka-recovery-point-checkpoint",
            self.checkpoint_log_recovery_offsets,
            self.flush_recovery_offset_checkpoint_ms,
        )
        periodic(
            "kafka-log-start-offset-checkpoint",
            self.checkpoint_log_start_offsets,
            self.flush_start_offset_checkpoint_ms,
        )
        periodic("highwatermark-checkpoint", self.checkpoint_high_watermarks, self.high_watermark_checkpoint_ms)
        periodic("PeriodicProducerExpirationCheck", self.remove_expired_producers, self.producer_id_expiration_check_ms)

    # -- lookup / creation --------------------------------------------------------------------
    def get_log(self, topic: str, partition: int) -> UnifiedLog | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[UnifiedLog]:
        with self._lock:
            return list(self._logs.values())

    def register_metrics(self, metrics) -> None:
        """Kafka's per-partition log gauges (``kafka.log:type=Log,name=<N>,topic=<t>,partition=<p>``,
        registered by each UnifiedLog in Kafka): one GaugeFamily per name, over the current logs."""
        readers = {
            "Size": lambda log: log.size,
            "LogEndOffset": lambda log: log.log_end_offset,
            "LogStartOffset": lambda log: log.log_start_offset,
            "NumLogSegments": lambda log: log.num_segments,
        }
        for name, read in readers.items():
            metrics.gauge_family(
                f"kafka.log:type=Log,name={name}",
                ("topic", "partition"),
                lambda read=read: [(log.topic_partition, read(log)) for log in self.all_logs()],
            )

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        return self._log_dir_of.get((topic, partition))

    def get_or_create_log(
        self,
        topic: str,
        partition: int,
        topic_id=None,
        config: LogConfig | None = None,
        sync_dir: bool = True,
    ) -> UnifiedLog:
        """The log of ``topic-partition``, created (in the log dir with the fewest partitions) if
        absent. ``topic_id`` is written to / checked against ``partition.metadata``
        (InconsistentTopicIdError). The log directory is fsynced after a creation, unless ``sync_dir`` is
        False: then the caller creating many logs calls :meth:`sync_created_log_dirs` once after them."""
        tp = (topic, partition)
        with self._lock:
            log = self._logs.get(tp)
            if log is not None:
                if topic_id is not None:
                    log.assign_topic_id(topic_id)
                return log
            log_dir = self._next_log_dir()
            path = os.path.join(log_dir, log_dir_name(topic, partition))
            try:
                log = UnifiedLog.create(
                    path,
                    config or self.topic_config(topic),
                    self._scheduler,
                    self._time,
                    topic_id=topic_id,
                    producer_id_expiration_ms=self.producer_id_expiration_ms,
                    topic_partition=tp,
                )
                log.producer_state_manager.transaction_verification_enabled = self.transaction_verification_enabled
                if sync_dir:
                    fsync_dir(log_dir)
                else:
                    self._unsynced_dirs.add(log_dir)
            except OSError as e:
                msg = f"Error while creating log for {topic}-{partition} in dir {log_dir}: {e}"
                self.log_dir_failure_channel.maybe_add_offline_log_dir(log_dir, msg, e)
                raise KafkaStorageError(msg) from e
            log.log_dir_failure_channel = self.log_dir_failure_channel
            self._logs[tp] = log
            self._log_dir_of[tp] = log_dir
        _log.info("Created log", partition=log.name, log_dir=log_dir, topic_id=str(log.topic_id))
        return log

    def sync_created_log_dirs(self) -> None:
        """fsync, once each, the log directories that got logs created with ``sync_dir=False``, so those
        partition directories survive a crash (one directory fsync per batch of creations)."""
        with self._lock:
            dirs, self._unsynced_dirs = self._unsynced_dirs, set()
        for log_dir in sorted(dirs):
            fsync_dir(log_dir)

    def _next_log_dir(self) -> str:
        live = [d for d in self._live_log_dirs if not self.log_dir_failure_channel.has_offline_log_dir(d)]
        if not live:
            raise KafkaStorageError(
                f"Can not create log because log directories {', '.join(self.log_dirs)} are offline"
            )
        if len(live) == 1:
            return live[0]
        counts = {d: 0 for d in live}
        for d in self._log_dir_of.values():
            if d in counts:
                counts[d] += 1
        return min(live, key=lambda d: counts[d])

    # -- log directory failure ----------------------------------------------------------------
    @property
    def live_log_dirs(self) -> list[str]:
        """The directories neither offline nor reported failed (to the LogDirFailureChannel)."""
        channel = self.log_dir_failure_channel
        with self._lock:
            return [d for d in self._live_log_dirs if not channel.has_offline_log_dir(d)]

    def directory_id_of(self, topic: str, partition: int) -> uuid.UUID | None:
        """The ``directory.id`` of the log dir holding ``topic-partition``'s log (None: no log or no id)."""
        log_dir = self.log_dir_of(topic, partition)
        return self.directory_ids.get(log_dir) if log_dir is not None else None

    def is_log_dir_online(self, log_dir: str) -> bool:
        return log_dir in self._live_log_dirs

    def handle_log_dir_failure(self, log_dir: str) -> list[TopicPartition]:
        """Stop serving ``log_dir`` (Kafka's ``LogManager.handleLogDirFailure``): it is no longer live
        (no log is created there, no checkpoint or clean-shutdown marker is written there), and its logs
        are dropped with their files released. Returns the partitions that went offline. The caller
        (the ReplicaManager) stops the broker when no live directory is left."""
        with self._lock:
            if log_dir not in self._live_log_dirs:
                return []
            _log.warning("Stopping serving logs in dir", log_dir=log_dir)
            self._live_log_dirs.remove(log_dir)
            offline = [tp for tp, d in self._log_dir_of.items() if d == log_dir]
            logs = [self._logs.pop(tp) for tp in offline if tp in self._logs]
            for tp in offline:
                del self._log_dir_of[tp]
        for log in logs:
            try:
                log.close_handlers()
            except Exception as e:  # noqa: BLE001 - release the others
                _log.warning("Error releasing the files of an offline log", partition=log.name, error=repr(e))
        _log.warning(
            f"Logs for partitions {','.join(f'{t}-{p}' for t, p in offline)} are offline due to failure "
            f"on log directory {log_dir}"
        )
        return offline

    # -- deletion and truncation --------------------------------------------------------------
    def async_delete(self, topic: str, partition: int) -> UnifiedLog | None:
        """Stop serving ``topic-partition``: rename its directory to ``...-delete``, release its files,
        and delete it after the broker's ``log.segment.delete.delay.ms`` (Kafka's ``deleteLogs`` uses the default
        config's ``fileDeleteDelayMs``, not the topic's override, which applies to its segments). Returns the
        removed log or None."""
        tp = (topic, partition)
        with self._lock:
            log = self._logs.pop(tp, None)
            log_dir = self._log_dir_of.pop(tp, None)
        if log is None:
            return None
        log.rename_dir(log_delete_dir_name(topic, partition))
        log.close_handlers()
        if log_dir is not None:
            self._checkpoint_dir(log_dir)
        delay_ms = self._default_config.file_delete_delay_ms
        _log.info(
            "Scheduled log for deletion",
            partition=f"{topic}-{partition}",
            dir=log.dir,
            delay_ms=delay_ms,
        )
        self._scheduler.schedule_once("kafka-delete-logs", log.delete, delay_ms)
        return log

    def truncate_to(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Truncate the given logs (follower truncation), then checkpoint recovery points."""
        dirs = set()
        for tp, offset in offsets.items():
            log = self._logs.get(tp)
            if log is not None and log.truncate_to(offset):
                dirs.add(self._log_dir_of.get(tp))
        for d in dirs:
            if d is not None:
                self._checkpoint_dir(d)

    # -- background tasks ---------------------------------------------------------------------
    def cleanup_logs(self) -> int:
        """Retention: delete old segments of every log. Returns the number of segments deleted."""
        total = 0
        for log in self.all_logs():
            try:
                total += log.delete_old_segments()
            except KafkaStorageError as e:  # reported to the LogDirFailureChannel (one ERROR line there)
                _log.warning("Retention skipped", partition=log.name, error=str(e))
            except Exception as e:  # noqa: BLE001 - one bad log must not stop retention for the rest
                _log.error("Retention failed", partition=log.name, error=repr(e))
        if total:
            _log.info("Log retention deleted segments", segments=total)
        return total

    def flush_dirty_logs(self) -> None:
        """Flush every log whose last flush is older than its ``flush.ms``."""
        now = self._time.milliseconds()
        for log in self.all_logs():
            try:
                if now - log.last_flush_time_ms >= log.config.flush_ms:
                    log.flush()
            except KafkaStorageError as e:  # reported to the LogDirFailureChannel (one ERROR line there)
                _log.warning("Flush skipped", partition=log.name, error=str(e))
            except Exception as e:  # noqa: BLE001 - one bad log must not stop flushing the rest
                _log.error("Error flushing log", partition=log.name, error=repr(e))

    def remove_expired_producers(self) -> None:
        for log in self.all_logs():
            log.remove_expired_producers()

    def _logs_in_dir(self, log_dir: str) -> dict[TopicPartition, UnifiedLog]:
        with self._lock:
            return {tp: log for tp, log in self._logs.items() if self._log_dir_of.get(tp) == log_dir}

    def checkpoint_log_recovery_offsets(self) -> None:
        self._for_each_live_dir(self._checkpoint_recovery_points)

    def checkpoint_log_start_offsets(self) -> None:
        self._for_each_live_dir(self._checkpoint_start_offsets)

    def checkpoint_high_watermarks(self) -> None:
        self._for_each_live_dir(self._checkpoint_high_watermarks)

    def _for_each_live_dir(self, checkpoint) -> None:
        """Run ``checkpoint(dir)`` on every live directory: one failing (KafkaStorageError, already reported
        to the LogDirFailureChannel by ``_write_checkpoint``) does not stop the others (Kafka's
        ``checkpointLogRecoveryOffsetsInDir`` catches it per directory)."""
        for d in self.live_log_dirs:
            try:
                checkpoint(d)
            except KafkaStorageError:
                continue

    def _checkpoint_high_watermarks(self, log_dir: str, force: bool = False) -> None:
        """Write ``replication-offset-checkpoint`` unless it already holds exactly these high watermarks (and not
        ``force``, as at shutdown): same content as Kafka's unconditional write, without the idle rewrite."""
        logs = self._logs_in_dir(log_dir)
        offsets = {tp: log.high_watermark for tp, log in logs.items()}
        if not force and self._hw_written.get(log_dir) == offsets:
            return
        self._hw_written.pop(log_dir, None)
        self._write_checkpoint(log_dir, REPLICATION_OFFSET_CHECKPOINT_FILE, offsets)
        self._hw_written[log_dir] = offsets

    def _write_checkpoint(self, log_dir: str, file_name: str, offsets: dict) -> None:
        """Write a checkpoint file; an OSError takes ``log_dir`` offline (KafkaStorageError)."""
        try:
            OffsetCheckpointFile(os.path.join(log_dir, file_name)).write(offsets)
        except OSError as e:
            msg = f"Disk error while writing {file_name} in directory {log_dir}: {e}"
            self.log_dir_failure_channel.maybe_add_offline_log_dir(log_dir, msg, e)
            raise KafkaStorageError(msg) from e

    def _checkpoint_recovery_points(self, log_dir: str) -> None:
        logs = self._logs_in_dir(log_dir)
        self._write_checkpoint(
            log_dir, RECOVERY_POINT_CHECKPOINT_FILE, {tp: log.recovery_point for tp, log in logs.items()}
        )

    def _checkpoint_start_offsets(self, log_dir: str) -> None:
        logs = self._logs_in_dir(log_dir)
        offsets = {}
        for tp, log in logs.items():
            first = log.segments.first_segment()
            if first is not None and log.log_start_offset > first.base_offset:
                offsets[tp] = log.log_start_offset
        self._write_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT_FILE, offsets)

    def _checkpoint_dir(self, log_dir: str) -> None:
        self._checkpoint_recovery_points(log_dir)
        self._checkpoint_start_offsets(log_dir)

    # -- shutdown -----------------------------------------------------------------------------
    def shutdown(self, broker_epoch: int = -1) -> None:
        """Cancel the tasks, flush and close every log, write the checkpoints and the clean-shutdown
        marker in every log directory. The logs of a directory are closed by ``num.recovery.threads.per.data.dir``
        threads (Kafka's ``LogManager.shutdown``: a thread pool per log dir, the dirs one after another); a
        segment with nothing written since its last fsync is not synced again."""
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        for log_dir in self.live_log_dirs:  # an offline directory is left as it is: recovered at the next start
            logs = self._logs_in_dir(log_dir)
            failed = not self._close_logs(list(logs.values()))
            try:
                self._checkpoint_dir(log_dir)
                self._checkpoint_high_watermarks(log_dir, force=True)
            except KafkaStorageError:
                failed = True
            if failed:
                _log.error("Log directory not marked as cleanly shut down", log_dir=log_dir)
                continue
            try:
                atomic_write(
                    os.path.join(log_dir, CLEAN_SHUTDOWN_FILE), f'{{"version":0,"brokerEpoch":{broker_epoch}}}'.encode()
                )
            except OSError as e:
                _log.error("Log directory not marked as cleanly shut down", log_dir=log_dir, error=repr(e))
                continue
            _log.info("Log directory shut down cleanly", log_dir=log_dir, partitions=len(logs))
        with self._lock:
            self._logs.clear()
            self._log_dir_of.clear()
        self._started = False

    def _close_logs(self, logs: list[UnifiedLog]) -> bool:
        """Flush and close ``logs`` on up to ``num_recovery_threads_per_data_dir`` threads (the calling thread
        when 1). False if any failed (each failure is logged; the others are still closed)."""

        def close(log: UnifiedLog) -> bool:
            try:
                log.flush()
                log.close()
                return True
            except Exception as e:  # noqa: BLE001 - close the others; this dir gets no marker
                _log.error("Error closing log during shutdown", partition=log.name, error=repr(e))
                return False

        return all(self._on_recovery_threads(close, logs, "log-closer"))

    def _on_recovery_threads(self, fn: Callable[[_T], _R], items: list[_T], name: str) -> list[_R]:
        """``fn`` over ``items`` on up to ``num_recovery_threads_per_data_dir`` threads named ``name`` (the calling
        thread when 1, Kafka's per-log-dir recovery pool), results in ``items``' order. An exception from ``fn``
        is re-raised: at once on the calling thread, else after the pool has run every item (the first one raised
        in ``items``' order)."""
        threads = min(self.num_recovery_threads_per_data_dir, len(items))
        if threads <= 1:
            return [fn(item) for item in items]
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name) as pool:
            futures = [pool.submit(fn, item) for item in items]
        return [f.result() for f in futures]


def _read_clean_shutdown_epoch(marker: str) -> int | None:
    """The ``brokerEpoch`` of a clean-shutdown marker (``{"version":0,"brokerEpoch":N}``), None if unreadable
    (Kafka's ``CleanShutdownFileHandler.read``)."""
    try:
        with open(marker, "rb") as f:
            value = json.loads(f.read() or b"{}").get("brokerEpoch")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and value >= 0 else None
