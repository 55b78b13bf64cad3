"""SharePartitionManager: the broker's share partitions, share sessions and delayed share fetches (KIP-932).

Mirrors Kafka's ``kafka.server.share.SharePartitionManager`` (one per broker, created by the BrokerServer beside the
ReplicaManager). A :class:`~.share_partition.SharePartition` is created lazily on the partition leader the first time
a share group fetches the partition, and loads its state from the Persister; it is dropped (and a new one loads the
persisted state) when the partition's leader epoch changes or this broker stops leading it, and its late writes are
fenced. ShareFetch reads the log from the share partition's next fetch offset as Fetch does (whole batches, a
zero-copy slice) and acquires the offsets of the batches read; with nothing to acquire it parks a
:class:`~.delayed_share_fetch.DelayedShareFetch` for ``max_wait_ms``.

Configuration: broker keys ``group.share.record.lock.duration.ms``, ``group.share.delivery.count.limit``,
``group.share.partition.max.record.locks``, ``group.share.max.share.sessions``; group configs (dynamic, resource
type GROUP, :func:`pykbroker.config.group_config.share_configs`) ``share.record.lock.duration.ms``,
``share.auto.offset.reset`` (``latest`` default, ``earliest``, ``by_duration:<duration>``) and
``share.isolation.level`` (``read_uncommitted`` default, ``read_committed``: only up to the last stable offset,
aborted transactions archived), read when a share partition is created and again by each ShareFetch (as Kafka's
KafkaApis takes the fetch isolation from the group's config per request): a change applies to existing share
partitions from their next fetch.

Threading: any handler thread; the manager's table has its own lock; the lock timer runs on the
``share-group-lock-timeout-reaper`` thread; callbacks run on the thread completing the work (a handler, the
persister's, the purgatory reaper's).
"""

from __future__ import annotations

import functools
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import NamedTuple

from pykbroker.config import group_config
from pykbroker.config.broker_configs.share_group_configs import (
    GROUP_SHARE_DELIVERY_COUNT_LIMIT_CONFIG,
    GROUP_SHARE_MAX_SHARE_SESSIONS_CONFIG,
    GROUP_SHARE_PARTITION_MAX_RECORD_LOCKS_CONFIG,
    SHARE_FETCH_PURGATORY_PURGE_INTERVAL_REQUESTS_CONFIG,
)
from pykbroker.config.group_config import (
    SHARE_AUTO_OFFSET_RESET_CONFIG,
    SHARE_ISOLATION_LEVEL_CONFIG,
    SHARE_RECORD_LOCK_DURATION_MS_CONFIG,
)
from pykbroker.coordinator.share.persister import InMemoryPersister, Persister
from pykbroker.log.fetch_data_info import FetchIsolation
from pykbroker.protocol import errors
from pykbroker.protocol.config_resource import ConfigResourceType
from pykbroker.record.file_records import EMPTY_RECORDS
from pykbroker.server.broker_topic_stats import (
    FAILED_SHARE_ACKNOWLEDGEMENT_REQUESTS,
    FAILED_SHARE_FETCH_REQUESTS,
    TOTAL_SHARE_ACKNOWLEDGEMENT_REQUESTS,
    TOTAL_SHARE_FETCH_REQUESTS,
    BrokerTopicStats,
)
from pykbroker.server.share.delayed_share_fetch import DelayedShareFetch
from pykbroker.server.share.share_group_metrics import ShareGroupMetrics
from pykbroker.server.share.share_partition import (
    AckBatch,
    AcquiredRange,
    FetchedBatch,
    SharePartition,
    SharePartitionConfig,
)
from pykbroker.server.share.share_session_cache import ShareSessionCache
from pykbroker.utils.delayed_operation import DelayedOperationPurgatory, TopicPartitionOperationKey
from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import SYSTEM, Time
from pykbroker.utils.timer import Timer

_REAPER_POLL_MS = 200


class SharePartitionKey(NamedTuple):
    group_id: str
    topic_id: uuid.UUID
    partition: int


class ShareFetchTarget(NamedTuple):
    """A partition to fetch: its topic id, name and index."""

    topic_id: uuid.UUID
    topic: str
    partition: int


class ShareFetchResult(NamedTuple):
    """A partition's fetch answer: an error code, or the records read (a zero-copy slice) and the ranges acquired."""

    error_code: int
    records: object = EMPTY_RECORDS
    acquired: tuple[AcquiredRange, ...] = ()


class ShareFetchParams(NamedTuple):
    """A ShareFetch's limits: ``max_records`` acquired per fetch (whole log batches: may be exceeded by one),
    ``batch_size`` records at most per ``acquired_records`` range (<= 0: no limit)."""

    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    max_records: int
    batch_size: int = 0


class SharePartitionManager:
    """See the module docstring. ``group_configs(group id)``: the group's ``share.*`` configs (the group
    coordinator's ``share_group_configs``); without it (or while it answers None) they are read from ``image()``, the
    broker's metadata image."""

    def __init__(
        self,
        replica_manager,
        config,
        time: Time = SYSTEM,
        persister: Persister | None = None,
        image: Callable[[], object] | None = None,
        reaper_enabled: bool = True,
        group_configs: Callable[[str], dict | None] | None = None,
    ):
        self.replica_manager = replica_manager
        self.config = config
        self.time = time
        self.persister: Persister = persister if persister is not None else InMemoryPersister()
        self.image = image or (lambda: None)
        self.group_configs = group_configs
        self.session_cache = ShareSessionCache(config[GROUP_SHARE_MAX_SHARE_SESSIONS_CONFIG])
        self.group_defaults = group_config.GroupConfigDefaults.from_broker_config(config)
        self.timer = Timer("share-group-lock-timeout", time)
        self.purgatory: DelayedOperationPurgatory[DelayedShareFetch] = DelayedOperationPurgatory(
            "ShareFetch",
            replica_manager.node_id,
            config[SHARE_FETCH_PURGATORY_PURGE_INTERVAL_REQUESTS_CONFIG],
            reaper_enabled=reaper_enabled,
            time=time,
        )
        registry = getattr(replica_manager, "metrics", None)
        self.metrics = ShareGroupMetrics(registry)
        # Kafka 4.2's ShareSessionCache gauges
        self.metrics.registry.gauge(
            "kafka.server:type=ShareSessionCache,name=ShareSessionsCount", lambda: len(self.session_cache)
        )
        self.metrics.registry.gauge(
            "kafka.server:type=ShareSessionCache,name=SharePartitionsCount", self.session_cache.partition_count
        )
        stats = getattr(replica_manager, "broker_topic_stats", None)
        self.broker_topic_stats: BrokerTopicStats = stats if stats is not None else BrokerTopicStats(registry)
        self._lock = threading.Lock()
        self._partitions: dict[SharePartitionKey, SharePartition] = {}
        self._load_start_ms: dict[SharePartitionKey, float] = {}  # share partitions created, not yet loaded
        self._log = get_logger("SharePartitionManager", broker=replica_manager.node_id)
        self._running = threading.Event()
        self._reaper: threading.Thread | None = None
        if reaper_enabled:
            self._running.set()
            self._reaper = threading.Thread(target=self._reap, name="share-group-lock-timeout-reaper", daemon=True)
            self._reaper.start()

    def _reap(self) -> None:
        while self._running.is_set():
            try:
                self.timer.advance_clock(_REAPER_POLL_MS)
            except Exception:  # noqa: BLE001 - keep reaping
                self._log.exception("Error in the share-group lock timeout reaper")

    def shutdown(self) -> None:
        """Stop the lock timer's reaper and the purgatory; the persister is stopped by its owner."""
        self._running.clear()
        self.timer.wakeup()
        if self._reaper is not None:
            self._reaper.join()
        self.timer.shutdown()
        self.purgatory.shutdown()

    # -- configuration -------------------------------------------------------------------------------
    def _group_configs(self, group_id: str) -> dict:
        """The group's effective ``share.*`` configs (overrides from the metadata image over the broker's defaults)."""
        if self.group_configs is not None:
            configs = self.group_configs(group_id)
            if configs is not None:
                return configs
        image = self.image()
        configs = getattr(image, "configs", None) or {}
        overrides = dict(configs.get((ConfigResourceType.GROUP, group_id), {}))
        return group_config.share_configs(overrides, self.group_defaults)

    def _partition_config(self, configs: dict) -> SharePartitionConfig:
        return SharePartitionConfig(
            record_lock_duration_ms=int(configs[SHARE_RECORD_LOCK_DURATION_MS_CONFIG]),
            delivery_count_limit=self.config[GROUP_SHARE_DELIVERY_COUNT_LIMIT_CONFIG],
            max_in_flight=self.config[GROUP_SHARE_PARTITION_MAX_RECORD_LOCKS_CONFIG],
            read_committed=str(configs[SHARE_ISOLATION_LEVEL_CONFIG]).lower() == "read_committed",
            auto_offset_reset=str(configs[SHARE_AUTO_OFFSET_RESET_CONFIG]).strip().lower(),
        )

    def record_lock_duration_ms(self, group_id: str) -> int:
        """The acquisition lock duration of ``group_id`` (ShareFetch v1 ``acquisition_lock_timeout_ms``)."""
        return self._partition_config(self._group_configs(group_id)).record_lock_duration_ms

    # -- share partitions ----------------------------------------------------------------------------
    def share_partition(self, group_id: str, target: ShareFetchTarget) -> SharePartition:
        """The share partition of ``group_id`` on ``target``, created when missing or stale (a new leader epoch).
        Raises NotLeaderOrFollowerError / UnknownTopicOrPartitionError (KafkaError) when this broker does not lead
        it; the stale share partition is then dropped and fenced."""
        key = SharePartitionKey(group_id, target.topic_id, target.partition)
        try:
            partition = self.replica_manager.get_partition_or_error(target.topic, target.partition)
            partition.local_log_or_raise(-1, require_leader=True)
        except errors.KafkaError:
            self._drop(key)
            raise
        epoch = partition.leader_epoch
        with self._lock:
            sp = self._partitions.get(key)
            if sp is not None and sp.leader_epoch == epoch and not sp.fenced:
                return sp
            if sp is not None:
                sp.fenced = True
            configs = self._group_configs(group_id)
            tp_key = TopicPartitionOperationKey(target.topic, target.partition)
            sp = SharePartition(
                group_id,
                target.topic,
                target.topic_id,
                target.partition,
                epoch,
                self._partition_config(configs),
                self.persister,
                self.timer,
                on_available=lambda: self._wake(tp_key),
            )
            self._partitions[key] = sp
            self._load_start_ms[key] = self._now_ms()
            return sp

    def _now_ms(self) -> float:
        return self.time.nanoseconds() / 1e6

    def _loaded(self, sp: SharePartition) -> None:
        """``sp`` finished loading its state: PartitionLoadTimeMs, once per share partition."""
        with self._lock:
            start = self._load_start_ms.pop(SharePartitionKey(sp.group_id, sp.topic_id, sp.partition), None)
        if start is not None:
            self.metrics.partition_load_time(self._now_ms() - start)

    def _wake(self, key: TopicPartitionOperationKey) -> None:
        self.purgatory.check_and_complete(key)

    def _drop(self, key: SharePartitionKey) -> None:
        with self._lock:
            sp = self._partitions.pop(key, None)
            self._load_start_ms.pop(key, None)
        if sp is not None:
            sp.fenced = True

    def on_partitions_moved(self, topic: str, partition: int) -> None:
        """This broker no longer leads ``topic``-``partition`` (or it was deleted; ReplicaManager's metadata thread):
        drop and fence its share partitions, and answer the share fetches parked on it (NOT_LEADER_OR_FOLLOWER)."""
        with self._lock:
            gone = [k for k, sp in self._partitions.items() if sp.topic == topic and sp.partition == partition]
            for k in gone:
                self._partitions.pop(k).fenced = True
                self._load_start_ms.pop(k, None)
        if gone:
            self.purgatory.check_and_complete(TopicPartitionOperationKey(topic, partition))

    def get(self, group_id: str, topic_id: uuid.UUID, partition: int) -> SharePartition | None:
        with self._lock:
            return self._partitions.get(SharePartitionKey(group_id, topic_id, partition))

    def _reset_offset(self, sp: SharePartition) -> int:
        """Where a share partition without state starts (``share.auto.offset.reset``): ``latest`` the high
        watermark, ``earliest`` the log start offset, ``by_duration:<d>`` the first batch written in the last d."""
        log = self.replica_manager.get_partition_or_error(sp.topic, sp.partition).log
        strategy = sp.config.auto_offset_reset
        if strategy == "earliest":
            return log.log_start_offset
        if strategy.startswith("by_duration:"):
            ms = group_config.duration_ms(strategy[len("by_duration:") :])
            if ms is not None:
                found = log.fetch_offset_by_timestamp(self.time.milliseconds() - ms)
                return min(found.offset, log.high_watermark) if found is not None else log.high_watermark
        return log.high_watermark

    def _initialized(self, group_id: str, targets: list[ShareFetchTarget], then: Callable[[dict], None]) -> None:
        """Create and initialize the share partitions of ``targets``; ``then({target: SharePartition | error})``
        once every one is ready (an int: its error code)."""
        out: dict = {}
        pending: list[tuple[ShareFetchTarget, SharePartition, Future[int]]] = []
        for t in targets:
            try:
                sp = self.share_partition(group_id, t)
            except errors.KafkaError as e:
                out[t] = e.code
                continue
            pending.append((t, sp, sp.maybe_initialize(functools.partial(self._reset_offset, sp))))
        if not pending:
            then(out)
            return
        remaining = [len(pending)]
        lock = threading.Lock()

        def one_done(_f: Future) -> None:
            with lock:
                remaining[0] -= 1
                if remaining[0]:
                    return
            for t, sp, f in pending:
                code = f.result()
                out[t] = sp if code == errors.NONE else code
                if code == errors.NONE:
                    self._loaded(sp)
            then(out)

        for _t, _sp, f in pending:
            f.add_done_callback(one_done)

    # -- fetch ---------------------------------------------------------------------------------------
    def fetch(
        self,
        group_id: str,
        member_id: str,
        params: ShareFetchParams,
        targets: list[ShareFetchTarget],
        respond: Callable[[dict[ShareFetchTarget, ShareFetchResult]], None],
    ) -> None:
        """Read and acquire records of ``targets`` for ``member_id``; ``respond({target: ShareFetchResult})`` once,
        now or when a DelayedShareFetch completes. Records BrokerTopicMetrics TotalShareFetchRequestsPerSec (each
        topic once) and, at completion, FailedShareFetchRequestsPerSec (each topic with a failed partition) and the
        group's RequestTopicPartitionsFetchRatio / TopicPartitionsAcquireTimeMs."""
        self.broker_topic_stats.record_share(TOTAL_SHARE_FETCH_REQUESTS, {t.topic for t in targets})
        respond = functools.partial(self._respond_counted, group_id, self._now_ms(), len(targets), respond)

        def ready(parts: dict) -> None:
            self._refresh_configs(group_id, parts)
            results = self._read_and_acquire(member_id, params, parts)
            if (
                params.max_wait_ms <= 0
                or any(r.acquired or r.error_code != errors.NONE for r in results.values())
                or not any(isinstance(v, SharePartition) for v in parts.values())
            ):
                respond(results)
                return
            shares = [(t, v) for t, v in parts.items() if isinstance(v, SharePartition)]
            op = DelayedShareFetch(
                params.max_wait_ms,
                lambda: any(self._can_acquire(t, sp) for t, sp in shares),
                lambda: respond(self._read_and_acquire(member_id, params, parts)),
            )
            self.purgatory.try_complete_else_watch(
                op, [TopicPartitionOperationKey(t.topic, t.partition) for t in parts]
            )

        self._initialized(group_id, targets, ready)

    def _respond_counted(
        self,
        group_id: str,
        start_ms: float,
        requested: int,
        respond: Callable[[dict[ShareFetchTarget, ShareFetchResult]], None],
        results: dict[ShareFetchTarget, ShareFetchResult],
    ) -> None:
        try:
            self._record_fetch(group_id, start_ms, requested, results)
        except Exception:  # noqa: BLE001 - metrics never fail a fetch
            self._log.exception("Recording the share fetch metrics failed")
        respond(results)

    def _record_fetch(
        self, group_id: str, start_ms: float, requested: int, results: dict[ShareFetchTarget, ShareFetchResult]
    ) -> None:
        failed = {t.topic for t, r in results.items() if r.error_code != errors.NONE}
        self.broker_topic_stats.record_share(FAILED_SHARE_FETCH_REQUESTS, failed)
        acquired = sum(1 for r in results.values() if r.acquired)
        if requested:
            self.metrics.topic_partitions_fetch_ratio(group_id, acquired * 100 // requested)
        if acquired:
            self.metrics.topic_partitions_acquire_time(group_id, self._now_ms() - start_ms)

    def _refresh_configs(self, group_id: str, parts: dict) -> None:
        """Give the share partitions of a fetch the group's current configs (``share.isolation.level``,
        ``share.record.lock.duration.ms`` changed dynamically apply from this fetch on)."""
        current = self._partition_config(self._group_configs(group_id))
        for sp in parts.values():
            if isinstance(sp, SharePartition) and sp.config != current:
                sp.config = current

    def _can_acquire(self, t: ShareFetchTarget, sp: SharePartition) -> bool:
        try:
            log = self.replica_manager.get_partition_or_error(t.topic, t.partition).local_log_or_raise(-1)
        except errors.KafkaError:
            return True  # answer with the error now
        end = log.last_stable_offset if sp.config.read_committed else log.high_watermark
        return sp.can_acquire(end) or sp.fenced

    def _read_and_acquire(
        self, member_id: str, params: ShareFetchParams, parts: dict
    ) -> dict[ShareFetchTarget, ShareFetchResult]:
        out: dict[ShareFetchTarget, ShareFetchResult] = {}
        budget = params.max_bytes if params.max_bytes > 0 else 2**31 - 1
        records_left = params.max_records
        for t, sp in parts.items():
            if not isinstance(sp, SharePartition):
                out[t] = ShareFetchResult(sp)
                continue
            if sp.fenced or sp.leader_epoch != self._leader_epoch(t):
                self._drop(SharePartitionKey(sp.group_id, t.topic_id, t.partition))
                out[t] = ShareFetchResult(errors.NOT_LEADER_OR_FOLLOWER)
                continue
            if budget <= 0 or (params.max_records > 0 and records_left <= 0):
                out[t] = ShareFetchResult(errors.NONE)
                continue
            try:
                out[t] = r = self._read_one(member_id, sp, t, budget, records_left, params.batch_size)
            except errors.KafkaError as e:
                out[t] = ShareFetchResult(e.code)
                continue
            except Exception:  # noqa: BLE001 - one partition's failure is its error, not the request's
                self._log.exception(f"Share fetch of {t.topic}-{t.partition} failed")
                out[t] = ShareFetchResult(errors.UNKNOWN_SERVER_ERROR)
                continue
            budget -= r.records.size_in_bytes  # type: ignore[attr-defined]
            records_left -= sum(a.last_offset - a.first_offset + 1 for a in r.acquired)
        return out

    def _leader_epoch(self, t: ShareFetchTarget) -> int:
        p = self.replica_manager.get_partition(t.topic, t.partition)
        return -2 if p is None or not p.is_leader else p.leader_epoch

    def _read_one(
        self,
        member_id: str,
        sp: SharePartition,
        t: ShareFetchTarget,
        max_bytes: int,
        max_records: int,
        batch_size: int = 0,
    ) -> ShareFetchResult:
        log = self.replica_manager.get_partition_or_error(t.topic, t.partition).local_log_or_raise(-1)
        if log.log_start_offset > sp.start_offset:
            sp.update_log_start(log.log_start_offset)
        isolation = FetchIsolation.TXN_COMMITTED if sp.config.read_committed else FetchIsolation.HIGH_WATERMARK
        offset = sp.next_fetch_offset()
        info = log.read(offset, max_bytes, isolation, True)
        records = info.records
        if records.size_in_bytes == 0:
            return ShareFetchResult(errors.NONE)
        headers = list(records.batch_headers())
        batches = [
            FetchedBatch(h.base_offset, h.last_offset, h.producer_id, h.is_transactional, h.is_control_batch)
            for h in headers
        ]
        acquired = sp.acquire(member_id, batches, max_records, info.aborted_transactions or (), batch_size)
        if not acquired:
            return ShareFetchResult(errors.NONE)
        last = acquired[-1].last_offset
        end = records.size_in_bytes
        for h in headers:  # answer up to the last batch holding an acquired offset
            if h.last_offset >= last:
                end = h.position + h.size_in_bytes
                break
        return ShareFetchResult(errors.NONE, records.prefix(end), tuple(acquired))

    # -- acknowledge ---------------------------------------------------------------------------------
    def acknowledge(
        self, group_id: str, member_id: str, target: ShareFetchTarget, batches: list[AckBatch]
    ) -> Future[int]:
        """Apply ``member_id``'s acknowledgements of ``target``. Future of an error code (NOT_LEADER_OR_FOLLOWER
        when this broker does not lead the partition, INVALID_RECORD_STATE for records the member does not hold)."""
        try:
            self.replica_manager.get_partition_or_error(target.topic, target.partition).local_log_or_raise(-1)
        except errors.KafkaError as e:
            self._drop(SharePartitionKey(group_id, target.topic_id, target.partition))
            return _done(e.code)
        sp = self.get(group_id, target.topic_id, target.partition)
        if sp is None or not sp.initialized or sp.leader_epoch != self._leader_epoch(target):
            return _done(errors.INVALID_RECORD_STATE)  # nothing was acquired from this share partition here
        done = sp.acknowledge(member_id, batches)

        def counted(f: Future[int]) -> None:
            if f.result() == errors.NONE:  # RecordAcknowledgementsPerSec of a successful acknowledgement only
                self.metrics.record_batches(batches)

        done.add_done_callback(counted)
        return done

    def record_acknowledge_request(self, topics: set[str], failed: set[str]) -> None:
        """One request's acknowledgements (ShareAcknowledge, or piggy-backed on a ShareFetch) were answered:
        TotalShareAcknowledgementRequestsPerSec for each of ``topics``, FailedShareAcknowledgementRequestsPerSec
        for each of ``failed`` (topics with a partition whose acknowledgement failed)."""
        self.broker_topic_stats.record_share(TOTAL_SHARE_ACKNOWLEDGEMENT_REQUESTS, topics)
        self.broker_topic_stats.record_share(FAILED_SHARE_ACKNOWLEDGEMENT_REQUESTS, failed)

    def release_session(self, group_id: str, member_id: str, partitions) -> None:
        """The member's share session ended: release what it holds on ``partitions`` ([(topic id, partition)])."""
        for topic_id, partition in partitions:
            sp = self.get(group_id, topic_id, partition)
            if sp is not None:
                sp.release_member(member_id)

    def on_connection_closed(self, connection_id: str) -> None:
        """A client connection closed (network thread): the share sessions opened over it end and their members'
        acquired records are released at once (Kafka's ShareSessionCache disconnect listener), not at lock expiry."""
        for session in self.session_cache.remove_connection(connection_id):
            self.release_session(session.key.group_id, session.key.member_id, list(session.partitions))


def _done(code: int) -> Future[int]:
    f: Future[int] = Future()
    f.set_result(code)
    return f
