"""ReplicaManager: the partitions this broker hosts, produce appends and fetch reads, and their purgatories.

Mirrors ``kafka.server.ReplicaManager``:

* ``apply_delta`` (from the BrokerMetadataPublisher) creates logs and makes partitions leaders or
  followers, and deletes partitions removed from the metadata;
* ``append_records``: per partition validate + append (Partition/LogValidator/UnifiedLog); acks=-1 with
  a successful append parks a DelayedProduce (completed when the HW passes the appended offsets) in
  the Produce purgatory unless the HW already passes them (what the DelayedProduce's first
  ``try_complete`` would find: a single-replica ISR), otherwise the callback runs at once;
* ``fetch_messages``: read every partition now (the first partition with data may exceed the size
  limits so at least one batch is returned; later ones share ``max_bytes``); answer at once when
  ``max_wait_ms <= 0``, enough bytes, or an error, else park a DelayedFetch in the Fetch purgatory;
* ``delete_records``: move the leaders' log start offsets; a partition whose followers have not yet
  followed (its low watermark) parks a DelayedDeleteRecords in the DeleteRecords purgatory;
* completion of delayed operations is queued as actions after appends and run by
  ``try_complete_actions`` at the end of each ``KafkaApis.handle`` (outside partition locks).

Log directory failures (Kafka's ``LogDirFailureHandler``): an I/O error on a log directory is reported
to the LogManager's LogDirFailureChannel (the failing request gets KAFKA_STORAGE_ERROR); the
``LogDirFailureHandler`` thread then takes the directory offline: its partitions answer
KAFKA_STORAGE_ERROR (code 56, retriable) from then on, the other directories keep serving. When no log
directory is left, or the metadata log's directory failed, Kafka halts the broker so that leadership
moves to replicas on other brokers; here that happens only when a ``halt`` callable is given. A
single-node broker passes none: with no other replica to take over, halting would only turn retriable
errors into refused connections, so it stays up answering KAFKA_STORAGE_ERROR until it is restarted.

Threading: the metadata publisher queues each delta's replica changes (``apply_delta``, ``apply_broker_changes``);
one applier thread (``ReplicaStateChangeApplier-<id>``, started while the queue is not empty) applies them in
metadata order, so the publisher can publish the next image (a next CreateTopics batch) while the logs of the
previous ones are created, and a later delete / leadership change of a partition is applied after its create.
``_partitions`` and ``_offline`` are replaced copy-on-write under ``_lock`` (writers: the applier and the failure
handler), so request handler threads read them without locking. A large metadata delta publishes ``_partitions``
every ``PUBLISH_CHUNK`` partitions it made ready (fsynced first); ``_creating`` (the partitions the queued changes
are still to create) and the ``_published`` condition let a produce wait for a partition whose log is being
created (``await_created``, at most ``CREATION_WAIT_S``).
"""

from __future__ import annotations

import collections
import functools
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from pykbroker.config.broker_configs.replication_configs import (
    FETCH_PURGATORY_PURGE_INTERVAL_REQUESTS_CONFIG,
    PRODUCER_PURGATORY_PURGE_INTERVAL_REQUESTS_CONFIG,
    REPLICA_LAG_TIME_MAX_MS_CONFIG,
    REPLICA_SELECTOR_CLASS_CONFIG,
)
from pykbroker.config.broker_configs.server_configs import FETCH_MAX_BYTES_CONFIG
from pykbroker.config.topic_config import (
    FOLLOWER_REPLICATION_THROTTLED_REPLICAS_CONFIG,
    LEADER_REPLICATION_THROTTLED_REPLICAS_CONFIG,
)
from pykbroker.log.fetch_data_info import FetchIsolation, LogOffsetMetadata
from pykbroker.log.log_validator import RecordValidationError
from pykbroker.log.transaction_index import AbortedTxn
from pykbroker.metadata.features import IBP_3_7_IV2
from pykbroker.metadata.topic_names import INTERNAL_TOPICS
from pykbroker.metadata.topic_names import is_internal as is_internal_topic
from pykbroker.protocol import errors
from pykbroker.record.file_records import EMPTY_RECORDS, BatchHeader, FileRecordsSlice, MemoryRecordsSlice
from pykbroker.security.client_security import PLAINTEXT, ClientSecurity
from pykbroker.server.append_result import AppendCallback, AppendResults, ProducePartitionResult
from pykbroker.server.broker_topic_stats import BrokerTopicStats, TopicProduceCounts
from pykbroker.server.delayed_delete_records import (
    DelayedDeleteRecords,
    DeleteRecordsCallback,
    DeleteRecordsPartitionStatus,
)
from pykbroker.server.delayed_fetch import (
    DelayedFetch,
    DelayedSessionFetch,
    FetchPartitionStatus,
    FetchSessionOperationKey,
)
from pykbroker.server.delayed_produce import DelayedProduce, ProducePartitionStatus
from pykbroker.server.partition import IsrChangeListener, Partition
from pykbroker.server.quotas.replication_quota_manager import ReplicationQuotaManager, parse_throttled_partitions
from pykbroker.server.replica_fetcher_manager import ReplicaFetcherManager
from pykbroker.server.replica_fetcher_thread import BrokerEndPoint, PartitionFetchState
from pykbroker.server.replica_selector import ClientMetadata, PartitionView, ReplicaView, create_replica_selector
from pykbroker.utils.delayed_operation import DelayedOperationPurgatory, TopicPartitionOperationKey
from pykbroker.utils.files import SyncBatch, deferred_sync
from pykbroker.utils.logging import get_logger, state_change_logger
from pykbroker.utils.metrics import MetricsRegistry

_monotonic = time.monotonic
#: ``tuple.__new__``: a NamedTuple from a tuple of all its fields, without its Python-level ``__new__`` (hot path)
_new_tuple = tuple.__new__

#: Partitions a metadata delta has made ready that ``apply_delta`` publishes at once (not only at the end of
#: the delta), so the first partitions of a large creation serve while the logs of the others are created.
PUBLISH_CHUNK = 64
#: How long a produce to a partition whose log is still being created here waits for it (seconds) before it is
#: answered NOT_LEADER_OR_FOLLOWER (retriable); one deadline per request.
CREATION_WAIT_S = 1.0


class _IsrMeters(IsrChangeListener):
    """IsrExpandsPerSec, IsrShrinksPerSec and FailedIsrUpdatesPerSec (``kafka.server:type=ReplicaManager``)."""

    def __init__(self, metrics: MetricsRegistry):
        prefix = "kafka.server:type=ReplicaManager,name="
        self._expands = metrics.meter(prefix + "IsrExpandsPerSec")
        self._shrinks = metrics.meter(prefix + "IsrShrinksPerSec")
        self._failed = metrics.meter(prefix + "FailedIsrUpdatesPerSec")

    def mark_expand(self) -> None:
        self._expands.mark()

    def mark_shrink(self) -> None:
        self._shrinks.mark()

    def mark_failed(self) -> None:
        self._failed.mark()


# Produce errors that are the client's or the partition's state, not a broker failure: Kafka does not
# count them in FailedProduceRequestsPerSec.
_VERIFY_RETRIABLE = frozenset(
    {
        errors.CONCURRENT_TRANSACTIONS,
        errors.NETWORK_EXCEPTION,
        errors.COORDINATOR_LOAD_IN_PROGRESS,
        errors.COORDINATOR_NOT_AVAILABLE,
        errors.NOT_COORDINATOR,
    }
)
_EXPECTED_PRODUCE_ERRORS = frozenset(
    {
        errors.UNKNOWN_TOPIC_OR_PARTITION,
        errors.NOT_LEADER_OR_FOLLOWER,
        errors.MESSAGE_TOO_LARGE,
        errors.RECORD_LIST_TOO_LARGE,
        errors.CORRUPT_MESSAGE,
        errors.KAFKA_STORAGE_ERROR,
    }
)


def _count_produce_failure(stats: dict[str, TopicProduceCounts], topic: str, code: int) -> None:
    topic_stats = stats.get(topic)
    if topic_stats is None:
        topic_stats = stats[topic] = TopicProduceCounts()
    topic_stats.partitions += 1
    if code not in _EXPECTED_PRODUCE_ERRORS:
        topic_stats.failed_partitions += 1


@dataclass(slots=True)
class FetchParams:
    """A Fetch request's common part. ``replica_epoch``: a follower's broker epoch (Fetch v15+
    ``replica_state.replica_epoch``, KIP-903), -1 when not sent. ``client_metadata``: the client's rack and
    identity from a Fetch v11+ (KIP-392), None before v11."""

    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation: FetchIsolation
    replica_epoch: int = -1
    client_metadata: ClientMetadata | None = None

    @property
    def fetch_only_leader(self) -> bool:
        """Kafka's ``FetchParams.fetchOnlyLeader``: a follower's fetch, or a consumer's before Fetch v11,
        reads the leader only; a consumer's v11+ fetch may read a follower (KIP-392)."""
        return self.replica_id >= 0 or self.client_metadata is None


@dataclass(slots=True)
class PartitionFetch:
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1


class FetchPartitionResult(NamedTuple):
    """What a fetch read for one partition (Kafka's ``FetchPartitionData``), handed to the Fetch handler, which
    builds the response's partition entry from it in one place: ``error_code`` (Kafka's), the partition's
    ``high_watermark``, ``last_stable_offset`` and ``log_start_offset`` (-1 when unknown), ``records`` (a
    zero-copy FileRecordsSlice, or EMPTY_RECORDS), ``fetch_offset_metadata`` (where the read started: a
    DelayedFetch's position), ``diverging_epoch`` (``(epoch, end offset)`` when the fetcher's log diverged,
    KIP-320), ``aborted_transactions`` (AbortedTxn entries of a read_committed read, else None) and
    ``preferred_read_replica`` (-1: read from the leader; no rack-aware selector here). Immutable."""

    error_code: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileRecordsSlice | MemoryRecordsSlice = EMPTY_RECORDS
    fetch_offset_metadata: LogOffsetMetadata | None = None
    diverging_epoch: tuple[int, int] | None = None
    aborted_transactions: list[AbortedTxn] | None = None
    preferred_read_replica: int = -1


class _StateChange(NamedTuple):
    """One queued replica state change: ``apply()`` on the applier thread; ``creates``: the partitions it may
    create; ``done``: set once applied or dropped."""

    apply: Callable[[], None]
    creates: list[tuple[str, int]]
    done: threading.Event
    #: ``(changes, image)`` of an ``apply_delta`` (None: another change), so consecutive deltas are merged
    delta: tuple | None = None


class _MergedChanges(NamedTuple):
    """The local replica changes of consecutive metadata deltas, as one delta's (:func:`merge_local_changes`)."""

    deletes: set
    leaders: dict
    followers: dict


def merge_local_changes(batch: list) -> _MergedChanges:
    """Merge the local changes of consecutive deltas (oldest first) as if applied one after the other: a
    partition deleted in any of them is in ``deletes`` (applied first, as within one delta), and its last
    leader or follower change after its last delete, if any, in ``leaders`` / ``followers``."""
    deletes: set = set()
    last: dict = {}
    for changes in batch:
        for tp in changes.deletes:
            deletes.add(tp)
            last.pop(tp, None)
        for kind, entries in (("leader", changes.leaders), ("follower", changes.followers)):
            for tp, change in entries.items():
                last[tp] = (kind, change)
    return _MergedChanges(
        deletes,
        {tp: change for tp, (kind, change) in last.items() if kind == "leader"},
        {tp: change for tp, (kind, change) in last.items() if kind == "follower"},
    )


class ReplicaManager:
    def __init__(
        self,
        node_id: int,
        config,
        log_manager,
        metadata_cache,
        time,
        halt=None,
        metrics: MetricsRegistry | None = None,
        broker_epoch: Callable[[], int] | None = None,
        inter_broker_security: ClientSecurity = PLAINTEXT,
        add_partitions_to_txn_manager=None,
        transaction_verification_enabled: bool = True,
    ):
        """``halt(exit_code)`` stops the process when no log directory is left (Kafka's ``Exit.halt``);
        None (a single node) logs the failure and keeps serving errors. ``metrics``: the broker's
        registry (BrokerTopicMetrics and the ReplicaManager gauges go there). ``broker_epoch()``: this
        broker's epoch once registered, else -1 (None: always -1). ``inter_broker_security``: how the
        replica fetchers connect to the leaders' inter-broker listener. ``add_partitions_to_txn_manager``:
        the AddPartitionsToTxnManager that verifies transactional writes (KIP-890; None: no verification);
        ``transaction_verification_enabled``: ``transaction.partition.verification.enable``."""
        self.node_id = node_id
        self.config = config
        self.log_manager = log_manager
        self.metadata_cache = metadata_cache
        self.time = time
        self.log = get_logger("ReplicaManager", broker=node_id)
        self.state_change_log = state_change_logger(node_id)  # state-change.log
        self._lock = threading.Lock()
        self._partitions: dict[tuple[str, int], Partition] = {}
        #: the partitions the metadata delta being applied is still to create here (their log is being
        #: created); ``_published`` is notified each time a chunk of them is published in ``_partitions``
        self._creating: frozenset[tuple[str, int]] = frozenset()
        self._published = threading.Condition(threading.Lock())
        #: the replica state changes not yet applied, in metadata order (``_submit``), and the applier thread
        #: running them (None while there is none); ``_pending_creates`` counts, per partition not hosted when
        #: its change was queued, the queued changes that will create it (``_creating`` is its key set)
        self._queue_lock = threading.Lock()
        self._state_changes: collections.deque[_StateChange] = collections.deque()
        self._applier: threading.Thread | None = None
        self._pending_creates: collections.Counter[tuple[str, int]] = collections.Counter()
        self.produce_purgatory: DelayedOperationPurgatory[DelayedProduce] = DelayedOperationPurgatory(
            "Produce", node_id, config[PRODUCER_PURGATORY_PURGE_INTERVAL_REQUESTS_CONFIG], time=time
        )
        self.fetch_purgatory: DelayedOperationPurgatory[DelayedFetch | DelayedSessionFetch] = DelayedOperationPurgatory(
            "Fetch", node_id, config[FETCH_PURGATORY_PURGE_INTERVAL_REQUESTS_CONFIG], time=time
        )
        # Kafka's delete.records.purgatory.purge.interval.requests default
        self.delete_records_purgatory: DelayedOperationPurgatory[DelayedDeleteRecords] = DelayedOperationPurgatory(
            "DeleteRecords", node_id, 1, time=time
        )
        #: the SharePartitionManager's purgatory of DelayedShareFetch (KIP-932), set by the server: poked with the
        #: fetch purgatory when a partition's high watermark may have moved
        self.share_fetch_purgatory: DelayedOperationPurgatory | None = None
        #: ``(topic, partition)`` -> None, called when this broker stops leading a partition or deletes it (the
        #: SharePartitionManager drops its share partitions), set by the server
        self.on_leadership_lost: Callable[[str, int], None] | None = None
        self._actions: collections.deque = collections.deque()
        self.fetch_max_bytes = config[FETCH_MAX_BYTES_CONFIG]
        #: KIP-392: ``replica.selector.class`` (None: consumers are never sent to a follower)
        self.replica_selector = create_replica_selector(config[REPLICA_SELECTOR_CLASS_CONFIG])
        self._offline: frozenset[tuple[str, int]] = frozenset()
        self._halt = halt
        self._shutting_down = threading.Event()
        self._failure_handler: threading.Thread | None = None
        self.log_dir_failure_channel = getattr(log_manager, "log_dir_failure_channel", None)
        self.metrics = metrics if metrics is not None else MetricsRegistry()
        self.broker_topic_stats = BrokerTopicStats(self.metrics)
        self.replica_lag_time_max_ms = config[REPLICA_LAG_TIME_MAX_MS_CONFIG]
        self.inter_broker_listener = getattr(config, "inter_broker_listener_name", "PLAINTEXT")
        #: ClientSecurity of the replica fetchers' connections (from the inter-broker listener)
        self.inter_broker_security = inter_broker_security
        #: AlterPartitionManager, set by the server once the controller can be reached (None: the ISR
        #: never changes, as on a single node where every partition has one replica)
        self.alter_partition_manager = None
        self.broker_epoch: Callable[[], int] = broker_epoch or (lambda: -1)
        self.add_partitions_to_txn_manager = add_partitions_to_txn_manager
        self.transaction_verification_enabled = transaction_verification_enabled
        #: KIP-858 (Kafka's ``DirectoryEventHandler``), set by a broker of a cluster: ``on_directory_failure(id)``
        #: reports a failed log dir's ``directory.id`` to the controller (BrokerLifecycleManager), and
        #: ``on_assignment(topic_id, partition, directory_id, reason)`` the directory a local replica lives in
        #: (AssignmentsManager); None: only this broker knows
        self.on_directory_failure: Callable[[uuid.UUID], None] | None = None
        self.on_assignment: Callable[[uuid.UUID, int, uuid.UUID, str], None] | None = None
        #: replication throttles (KIP-73): what this broker serves as leader / takes as follower for throttled
        #: replicas (rates: dynamic broker configs; partitions: topic configs, see ``update_topic_config``)
        self.leader_quota = ReplicationQuotaManager("LeaderReplication", time)
        self.follower_quota = ReplicationQuotaManager("FollowerReplication", time)
        self.replica_fetcher_manager = ReplicaFetcherManager(self, config, time)
        self.replica_fetcher_manager.register_metrics(self.metrics)
        self.isr_listener = _IsrMeters(self.metrics)
        self._register_metrics()

    def _register_metrics(self) -> None:
        """Kafka's ReplicaManager gauges (``kafka.server:type=ReplicaManager``), read at report time."""
        prefix = "kafka.server:type=ReplicaManager,name="
        gauges = {
            "LeaderCount": lambda: sum(1 for p in self._partitions.values() if p.is_leader),
            "PartitionCount": lambda: len(self._partitions),
            "OfflineReplicaCount": lambda: len(self._offline),
            "UnderReplicatedPartitions": lambda: sum(1 for p in self._partitions.values() if p.is_under_replicated),
            "UnderMinIsrPartitionCount": lambda: sum(1 for p in self._partitions.values() if p.is_under_min_isr),
            "AtMinIsrPartitionCount": lambda: sum(1 for p in self._partitions.values() if p.is_at_min_isr),
            "ReassigningPartitions": lambda: sum(1 for p in self._partitions.values() if p.is_reassigning),
        }
        for name, fn in gauges.items():
            self.metrics.gauge(prefix + name, fn)
        # Kafka's replication quota sensors (QuotaType LeaderReplication / FollowerReplication): bytes/s of throttled
        # replicas over the quota windows
        for quota in (self.leader_quota, self.follower_quota):
            self.metrics.gauge(f"kafka.server:type={quota.name},name=byte-rate", quota.byte_rate)

    def startup(self, scheduler=None) -> None:
        """Start the LogDirFailureHandler thread and, with a ``scheduler``, Kafka's ``isr-expiration``
        task (every ``replica.lag.time.max.ms / 2``) and the idle-fetcher clean-up."""
        if scheduler is not None:
            period = max(1, self.replica_lag_time_max_ms // 2)
            scheduler.schedule("isr-expiration", self.maybe_shrink_isr, period, period)
            idle = self.replica_fetcher_manager.shutdown_idle_fetcher_threads
            scheduler.schedule("shutdown-idle-replica-fetchers", idle, 10000, 10000)
        if self.log_dir_failure_channel is not None and self._failure_handler is None:
            self._failure_handler = threading.Thread(
                target=self._handle_log_dir_failures, name="LogDirFailureHandler", daemon=True
            )
            self._failure_handler.start()

    def _handle_log_dir_failures(self) -> None:
        channel = self.log_dir_failure_channel
        assert channel is not None  # this thread is started only with a channel
        while not self._shutting_down.is_set():
            log_dir = channel.take_next_offline_log_dir(0.2)
            if log_dir is not None:
                try:
                    self.handle_log_dir_failure(log_dir)
                except Exception as e:  # keep handling later failures
                    self.log.error(f"Error handling the failure of log dir {log_dir}", error=repr(e), exc_info=True)

    def handle_log_dir_failure(self, log_dir: str) -> None:
        """Stop serving the replicas in ``log_dir`` (Kafka's ``ReplicaManager.handleLogDirFailure``): its
        partitions go offline (KAFKA_STORAGE_ERROR), the LogManager drops the directory; halt when it was
        the last live directory or holds the metadata log."""
        if not self.log_manager.is_log_dir_online(log_dir):
            return
        self.log.warning(f"Stopping serving replicas in dir {log_dir} because the log directory has failed.")
        with self._lock:
            parts = dict(self._partitions)
            new_offline = {tp for tp in parts if self.log_manager.log_dir_of(*tp) == log_dir}
            for tp in new_offline:
                gone = parts.pop(tp)
                gone.leader_id = -1
                gone.notify_fetch_watchers()
            self._offline = self._offline | new_offline
            self._partitions = parts
            self.log_manager.handle_log_dir_failure(log_dir)
        self.replica_fetcher_manager.remove_fetcher_for_partitions(sorted(new_offline))
        for tp in new_offline:
            self._complete_delayed(tp, produce=True)
        self.log.warning(
            f"Broker {self.node_id} stopped serving partitions "
            f"{','.join(f'{t}-{p}' for t, p in sorted(new_offline))} because they are in the failed "
            f"log directory {log_dir}."
        )
        metadata_dir = getattr(self.config, "metadata_log_dir", None)
        if not self.log_manager.live_log_dirs:
            self._fatal(f"Shutdown broker because all log dirs in {', '.join(self.log_manager.log_dirs)} have failed")
        elif metadata_dir is not None and os.path.abspath(metadata_dir) == log_dir:
            self._fatal(f"Shutdown broker because the metadata log dir {log_dir} has failed")
        else:
            directory = self.log_manager.directory_ids.get(log_dir)
            if self.on_directory_failure is not None:
                if directory is None:
                    self.log.error(f"Unable to propagate the failure of log dir {log_dir}: it has no directory.id")
                else:
                    self.on_directory_failure(directory)
            self.log.warning(f"Stopped serving replicas in dir {log_dir}")

    def _fatal(self, message: str) -> None:
        if self._halt is not None:
            self.log.critical(message)
            self._halt(1)
        else:
            self.log.error(
                f"{message.replace('Shutdown broker because', 'No log directory left to serve:')}; "
                f"its partitions answer KAFKA_STORAGE_ERROR until the broker is restarted"
            )

    def is_offline(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self._offline

    # -- partitions ----------------------------------------------------------------------------
    def partitions_snapshot(self) -> dict[tuple[str, int], Partition]:
        """A copy of the hosted partitions map (for start-up scans of leadership)."""
        return dict(self._partitions)

    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def _set_creating(self, creating: frozenset[tuple[str, int]]) -> None:
        with self._published:
            self._creating = creating
            self._published.notify_all()

    def _notify_published(self) -> None:
        with self._published:
            self._published.notify_all()

    def await_created(self, tp: tuple[str, int], deadline: float) -> None:
        """Wait until ``tp`` is hosted here or no longer being created by the metadata delta in progress, or
        until ``deadline`` (``time.monotonic()`` seconds): a produce to a partition whose log is still being
        created waits for it a little (then gets NOT_LEADER_OR_FOLLOWER, retriable, from
        :meth:`get_partition_or_error`) instead of failing at once. Returns at once in the common case."""
        if tp in self._partitions or tp not in self._creating:
            return
        with self._published:
            while tp not in self._partitions and tp in self._creating:
                left = deadline - _monotonic()
                if left <= 0:
                    return
                self._published.wait(left)

    def get_partition_or_error(self, topic: str, partition: int) -> Partition:
        p = self._partitions.get((topic, partition))
        if p is not None:
            return p
        if (topic, partition) in self._offline:
            raise errors.KafkaStorageError(f"Partition {topic}-{partition} is in an offline log directory")
        if self.metadata_cache.partition(topic, partition) is not None:
            raise errors.NotLeaderOrFollowerError(f"Error while fetching partition state for {topic}-{partition}")
        raise errors.UnknownTopicOrPartitionError(f"Partition {topic}-{partition} doesn't exist")

    def delete_records_on_local_log(
        self, topic: str, partition: int, offset: int, internal_topics_allowed: bool = False
    ) -> tuple[int, int]:
        """DeleteRecords for one partition (``ReplicaManager.deleteRecordsOnLocalLog``); returns
        ``(requested offset, low watermark)``. Raises InvalidTopicError for an internal topic,
        UnknownTopicOrPartitionError, NotLeaderOrFollowerError, KafkaStorageError, and the errors of
        :meth:`Partition.delete_records_on_leader`."""
        if is_internal_topic(topic) and not internal_topics_allowed:
            raise errors.InvalidTopicError(f"Cannot delete records of internal topic {topic}")
        return self.get_partition_or_error(topic, partition).delete_records_on_leader(offset)

    def delete_records(
        self,
        timeout_ms: int,
        offsets: dict[tuple[str, int], int],
        response_callback: DeleteRecordsCallback,
        internal_topics_allowed: bool = False,
    ) -> None:
        """DeleteRecords (Kafka's ``ReplicaManager.deleteRecords``): delete on every local leader log, then
        ``response_callback({(topic, partition): (low watermark, error code)})`` once every partition's low
        watermark (its live followers' log start offsets included) reaches the requested offset, or after
        ``timeout_ms`` ms (the partitions still waiting get REQUEST_TIMED_OUT and -1): a
        DelayedDeleteRecords in the DeleteRecords purgatory, retried when a follower's Fetch reports a new
        log start offset. Errors per partition as :meth:`delete_records_on_local_log`."""
        statuses: dict[tuple[str, int], DeleteRecordsPartitionStatus] = {}
        for (topic, index), offset in offsets.items():
            try:
                requested, low = self.delete_records_on_local_log(topic, index, offset, internal_topics_allowed)
                statuses[(topic, index)] = DeleteRecordsPartitionStatus(requested, low, errors.NONE)
            except errors.KafkaError as e:
                statuses[(topic, index)] = DeleteRecordsPartitionStatus(-1, -1, e.code)
            except Exception as e:
                self.log.error(f"Error processing delete records on {topic}-{index}", error=repr(e), exc_info=True)
                statuses[(topic, index)] = DeleteRecordsPartitionStatus(-1, -1, errors.UNKNOWN_SERVER_ERROR)
        if not any(s.pending for s in statuses.values()):
            response_callback({tp: s.result for tp, s in statuses.items()})
            return
        op = DelayedDeleteRecords(timeout_ms, statuses, self._low_watermark, response_callback)
        self.delete_records_purgatory.try_complete_else_watch(
            op, [TopicPartitionOperationKey(*tp) for tp, s in statuses.items() if s.pending]
        )

    def _low_watermark(self, topic: str, partition: int) -> int:
        return self.get_partition_or_error(topic, partition).low_watermark_if_leader()

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def apply_delta(self, changes, image, wait: bool = True) -> None:
        """Apply the local replica changes of one metadata delta (``changes.deletes``: ``{(topic, partition)}``;
        ``changes.leaders`` / ``changes.followers``: ``{(topic, partition): (topic_id, PartitionRegistration)}``).

        Called by the BrokerMetadataPublisher thread: the changes are queued for the applier thread, which applies
        every queued change in metadata order (so a later delete or leader/follower change of a partition always
        wins over an earlier create); ``wait`` (the default) returns once this one is applied, else at once (the
        partitions it creates answer produces as :meth:`await_created` says meanwhile). After ``shutdown``
        nothing is applied (no log is created or deleted)."""
        creates = [
            tp for entries in (changes.leaders, changes.followers) for tp in entries if tp not in self._partitions
        ]
        self._submit(functools.partial(self._apply_delta_now, changes, image), creates, wait, (changes, image))

    def _submit(
        self, change: Callable[[], None], creates: list[tuple[str, int]], wait: bool, delta: tuple | None = None
    ) -> None:
        """Queue ``change`` for the applier thread (started when there is none; it ends when the queue is empty),
        with ``creates`` the partitions it may create (``_creating`` until it is applied); ``wait``: until applied
        (or dropped by ``shutdown``)."""
        done = threading.Event()
        with self._queue_lock:
            if self._shutting_down.is_set():
                return
            self._pending_creates.update(creates)
            if creates:
                self._set_creating(frozenset(self._pending_creates))
            self._state_changes.append(_StateChange(change, creates, done, delta))
            if self._applier is None:
                self._applier = threading.Thread(
                    target=self._run_state_changes, name=f"ReplicaStateChangeApplier-{self.node_id}", daemon=True
                )
                self._applier.start()
        if wait:
            done.wait()

    def _run_state_changes(self) -> None:
        """The applier thread: apply the queued state changes in order until the queue is empty."""
        while True:
            with self._queue_lock:
                if not self._state_changes:
                    self._applier = None
                    return
                items = [self._state_changes.popleft()]
                # Consecutive deltas queued meanwhile are applied as one (one fsync pass per chunk, not per delta).
                while items[0].delta is not None and self._state_changes and self._state_changes[0].delta is not None:
                    items.append(self._state_changes.popleft())
            try:
                if len(items) == 1:
                    items[0].apply()
                else:
                    deltas = [item.delta for item in items if item.delta is not None]  # all of them (see above)
                    self._apply_delta_now(merge_local_changes([changes for changes, _ in deltas]), deltas[-1][1])
            except Exception as e:  # the later changes must still be applied
                self.log.error(f"Error applying a replica state change: {e!r}", exc_info=True)
            finally:
                for item in items:
                    self._finish(item)

    def _finish(self, item: _StateChange) -> None:
        with self._queue_lock:
            if item.creates:
                self._pending_creates.subtract(item.creates)
                self._pending_creates = +self._pending_creates
                self._set_creating(frozenset(self._pending_creates))
        item.done.set()

    def _apply_delta_now(self, changes, image) -> None:
        """The applier thread's :meth:`apply_delta`."""
        with self._lock:
            if self._shutting_down.is_set():
                return
            parts = dict(self._partitions)
            start_fetching: dict = {}
            self.replica_fetcher_manager.remove_fetcher_for_partitions(changes.deletes)
            for topic, index in sorted(changes.deletes):
                p = parts.pop((topic, index), None)
                if p is not None:
                    p.leader_id = -1
                    p.notify_fetch_watchers()
                self.log_manager.async_delete(topic, index)
                self.log.info(f"Deleted partition {topic}-{index}")
            offline = set(self._offline)
            offline.difference_update(changes.deletes)
            touched = []
            unpublished = 0
            # The delta's leader-epoch checkpoints (and other atomic writes) are fsynced together before each publish.
            with deferred_sync() as sync_batch:
                try:
                    for kind, entries in (("leader", changes.leaders), ("follower", changes.followers)):
                        for (topic, index), (topic_id, reg) in sorted(entries.items()):
                            if self._shutting_down.is_set():
                                self.log.info("Shutting down: the rest of the metadata delta is not applied")
                                return
                            if not self._apply_local_change(
                                kind, topic, index, topic_id, reg, image, parts, offline, start_fetching
                            ):
                                continue
                            touched.append((topic, index))
                            unpublished += 1
                            if unpublished >= PUBLISH_CHUNK:
                                # Serve what is ready while the rest of a large delta's logs are created; their
                                # followers start fetching now, not after the whole delta.
                                self._flush_created(sync_batch)
                                self._partitions = dict(parts)
                                self._notify_published()
                                unpublished = 0
                                if start_fetching:
                                    self.replica_fetcher_manager.add_fetcher_for_partitions(start_fetching)
                                    start_fetching = {}
                finally:
                    self._flush_created(sync_batch)
                    self._partitions = parts
                    self._offline = frozenset(offline)
                    self._notify_published()
                    if start_fetching:
                        self.replica_fetcher_manager.add_fetcher_for_partitions(start_fetching)
            # Kafka's applyDelta: a thread left without partitions (its leader lost them) stops now,
            # closing its connection and abandoning the request in flight there.
            self.replica_fetcher_manager.shutdown_idle_fetcher_threads()
        for topic in {t for t, _ in changes.deletes}:
            if not any(t == topic for t, _ in self._partitions):
                self.broker_topic_stats.remove_metrics(topic)
        lost = self.on_leadership_lost
        if lost is not None:
            for tp in sorted(set(changes.deletes) | set(changes.followers)):
                lost(*tp)
        # Kafka's stopPartitions completes the delayed operations of the partitions it removes: a produce waiting
        # for acks=all on a partition moved away (a reassignment that dropped this leader) is answered now
        # (UNKNOWN_TOPIC_OR_PARTITION, the client retries on the new leader), not when its timeout expires.
        for tp in sorted(changes.deletes):
            self._complete_delayed(tp, produce=True)
        for tp in touched:
            self._complete_delayed(tp, produce=True)

    def _apply_local_change(
        self, kind: str, topic: str, index: int, topic_id, reg, image, parts: dict, offline: set, start_fetching: dict
    ) -> bool:
        """One partition of :meth:`apply_delta` (``kind`` "leader" or "follower"): create its log and Partition
        if new (into ``parts``), make it leader or follower, and for a follower add its fetch start to
        ``start_fetching``. A storage error adds it to ``offline`` (its log dir reported). Returns whether it was
        applied."""
        if (topic, index) in offline:
            self.log.warning(
                f"Unable to bring up local {kind} {topic}-{index} because it resides in an offline log directory."
            )
            return False
        p = parts.get((topic, index))
        if p is None:
            config = self.log_manager.topic_config(topic)
            try:
                log = self.log_manager.get_or_create_log(topic, index, topic_id, config, sync_dir=False)
            except errors.KafkaStorageError as e:
                self.log.error(f"Unable to create the log of {topic}-{index}: {e}")
                offline.add((topic, index))
                return False
            p = self._new_partition(topic, index, topic_id, log)
            parts[(topic, index)] = p
        try:
            if kind == "leader":
                # No fetcher may append to it once it leads (Kafka removes them first).
                self.replica_fetcher_manager.remove_fetcher_for_partitions([(topic, index)])
                changed = p.make_leader(reg)
            else:
                changed = p.make_follower(reg)
                if changed:
                    self._start_following((topic, index), p, reg, image, start_fetching)
            if changed:
                self.state_change_log.info(
                    f"{kind.capitalize()} {topic}-{index} with topic id {topic_id} starts at "
                    f"leader epoch {reg.leader_epoch} (leader {reg.leader}) with partition epoch "
                    f"{reg.partition_epoch}, high watermark {p.log.high_watermark}, "
                    f"ISR [{','.join(map(str, reg.isr))}]"
                )
        except OSError as e:  # e.g. the leader epoch checkpoint on a full disk
            log_dir = self.log_manager.log_dir_of(topic, index)
            msg = f"Skipped the become-{kind} state change for {topic}-{index} due to a storage error {e}"
            if self.log_dir_failure_channel is not None and log_dir is not None:
                self.log_dir_failure_channel.maybe_add_offline_log_dir(log_dir, msg, e)
            parts.pop((topic, index), None)
            offline.add((topic, index))
            return False
        self._maybe_update_topic_assignment(topic, index, topic_id, reg, image)
        return True

    def _flush_created(self, batch: SyncBatch) -> None:
        """Make what the delta wrote so far durable before it is published: the deferred fsyncs of ``batch``
        (in parallel, :func:`deferred_sync`; a file that fails takes its log directory offline through the
        LogDirFailureChannel, as a failed synchronous write would), then one fsync of each log directory that got
        new partition directories."""
        for path, e in batch.flush():
            log_dir = next((d for d in self.log_manager.log_dirs if path.startswith(d + os.sep)), None)
            self.log.error(f"Error while flushing {path}: {e}")
            if self.log_dir_failure_channel is not None and log_dir is not None:
                self.log_dir_failure_channel.maybe_add_offline_log_dir(log_dir, f"Error while flushing {path}", e)
        self.log_manager.sync_created_log_dirs()

    def _maybe_update_topic_assignment(self, topic: str, index: int, topic_id, reg, image) -> None:
        """Kafka's ``maybeUpdateTopicAssignment`` (KIP-858, metadata.version 3.7-IV2+): report the directory of
        the local log when the metadata says another one (UNASSIGNED for a broker with several log dirs)."""
        if self.on_assignment is None or topic_id is None:
            return
        mv = image.metadata_version if image is not None else None
        if mv is not None and mv < IBP_3_7_IV2:
            return
        actual = self.log_manager.directory_id_of(topic, index)
        if actual is not None and reg.directory(self.node_id) != actual:
            self.on_assignment(topic_id, index, actual, "Applying metadata delta")

    def apply_broker_changes(self, delta, image, wait: bool = True) -> None:
        """Broker registrations changed in a metadata delta (BrokerMetadataPublisher thread, before
        ``apply_delta``): fetchers whose leader, or this broker, came back reconnect
        (``ReplicaFetcherManager.on_broker_changes``), queued after the earlier deltas' changes as
        :meth:`apply_delta` (``wait`` likewise)."""
        self._submit(functools.partial(self._apply_broker_changes_now, delta, image), [], wait)

    def _apply_broker_changes_now(self, delta, image) -> None:
        if self._shutting_down.is_set():
            return
        self.replica_fetcher_manager.on_broker_changes(
            delta.image.brokers, image.brokers, delta.broker_changes, getattr(delta, "fenced_brokers", frozenset())
        )

    def _new_partition(self, topic: str, index: int, topic_id, log) -> Partition:
        p = Partition(
            topic,
            index,
            topic_id,
            log,
            self.node_id,
            self.time,
            self.replica_lag_time_max_ms,
            self.alter_partition_manager,
            self.metadata_cache,
            self.isr_listener,
            lambda: self.broker_epoch(),
        )
        p.on_high_watermark_increment = functools.partial(self._complete_delayed, (topic, index), produce=True)
        return p

    def set_alter_partition_manager(self, manager) -> None:
        """Partitions created from now on, and those already here, send their ISR changes to ``manager``."""
        self.alter_partition_manager = manager
        for p in self.partitions():
            p.alter_partition_manager = manager

    def _start_following(self, tp, partition: Partition, reg, image, start_fetching: dict) -> None:
        """Kafka's ``applyLocalFollowersDelta`` for one partition whose leader or epoch changed: stop its
        fetcher, and start one against the new leader (when it has an inter-broker endpoint) from a
        truncation at the current leader epoch."""
        self.replica_fetcher_manager.remove_fetcher_for_partitions([tp])
        start_fetching.pop(tp, None)
        brokers = (image if image is not None else self.metadata_cache.image).brokers
        leader = brokers.get(reg.leader) if reg.leader >= 0 else None
        endpoint = leader.listeners.get(self.inter_broker_listener) if leader is not None else None
        if endpoint is None:
            if reg.leader >= 0:
                self.log.warning(
                    f"No endpoint on listener {self.inter_broker_listener} for leader {reg.leader} of "
                    f"{tp[0]}-{tp[1]}: not fetching until the metadata has one"
                )
            return
        start_fetching[tp] = (
            BrokerEndPoint(reg.leader, endpoint.host or "127.0.0.1", endpoint.port),
            PartitionFetchState(partition.topic_id, partition.log.high_watermark, reg.leader_epoch),
        )

    def maybe_shrink_isr(self) -> None:
        """The ``isr-expiration`` task: every led partition drops followers that lag too long."""
        for p in self.partitions():
            try:
                p.maybe_shrink_isr()
            except Exception as e:  # noqa: BLE001 - one partition must not stop the others
                self.log.error(f"Error checking the ISR of {p.name}", error=repr(e))

    def update_topic_config(self, topic: str, overrides) -> None:
        """A topic's config overrides changed: its logs take the new LogConfig, and its throttled replicas
        (``leader/follower.replication.throttled.replicas``, Kafka's ``TopicConfigHandler``) the quotas."""
        self.leader_quota.mark_throttled(
            topic, parse_throttled_partitions(overrides.get(LEADER_REPLICATION_THROTTLED_REPLICAS_CONFIG), self.node_id)
        )
        self.follower_quota.mark_throttled(
            topic,
            parse_throttled_partitions(overrides.get(FOLLOWER_REPLICATION_THROTTLED_REPLICAS_CONFIG), self.node_id),
        )
        config = self.log_manager.update_topic_config(topic, overrides)
        for p in self.partitions():
            if p.topic == topic:
                p.log.update_config(config)

    # -- produce -------------------------------------------------------------------------------
    def append_records(
        self,
        timeout_ms: int,
        required_acks: int,
        internal_topics_allowed: bool,
        entries: dict[tuple[str, int], memoryview],
        response_callback: AppendCallback,
        origin=None,
        verification_guards: dict | None = None,
    ) -> None:
        """``response_callback({(topic, partition): ProducePartitionResult})``, exactly once.
        ``verification_guards``: per partition, the VerificationGuard of a verified transaction start."""
        if required_acks not in (-1, 0, 1):
            response_callback({tp: ProducePartitionResult.error(errors.INVALID_REQUIRED_ACKS) for tp in entries})
            return
        statuses: dict[tuple[str, int], ProducePartitionStatus] = {}
        creation_deadline = None  # set by the first partition not hosted yet (one deadline per request)
        # BrokerTopicMetrics of the request, per topic; unknown topics are not counted (Kafka answers them
        # before the ReplicaManager).
        stats: dict[str, TopicProduceCounts] = {}
        hosted = self._partitions
        appended: list[tuple[ProducePartitionStatus, Partition]] = []  # for the acks=-1 check
        for tp, records in entries.items():
            topic, index = tp
            try:
                if not internal_topics_allowed and topic in INTERNAL_TOPICS:  # is_internal_topic, without a call
                    raise errors.InvalidTopicError(f"Cannot append to internal topic {topic}")
                partition = hosted.get(tp)
                if partition is None:  # being created (wait a little), or an error
                    if creation_deadline is None:
                        creation_deadline = _monotonic() + CREATION_WAIT_S
                    self.await_created(tp, creation_deadline)
                    partition = self.get_partition_or_error(topic, index)
                guard = verification_guards.get(tp) if verification_guards else None
                if guard is not None:
                    info, hw_incremented = partition.append_records_to_leader(records, required_acks, origin, guard)
                else:
                    info, hw_incremented = partition.append_records_to_leader(records, required_acks, origin)
                topic_stats = stats.get(topic)
                if topic_stats is None:
                    topic_stats = stats[topic] = TopicProduceCounts()
                topic_stats.records += info.records_count
                topic_stats.bytes += len(records)
                topic_stats.partitions += 1
                result = _new_tuple(  # the NamedTuple without its Python-level __new__
                    ProducePartitionResult,
                    (errors.NONE, info.first_offset, info.log_append_time, info.log_start_offset, (), None),
                )
                status = statuses[tp] = ProducePartitionStatus(info.last_offset + 1, result)
                appended.append((status, partition))
                self._actions.append((tp, hw_incremented))
            except RecordValidationError as e:
                result = ProducePartitionResult(e.code, -1, -1, -1, tuple(e.record_errors), str(e))
                statuses[tp] = ProducePartitionStatus(-1, result)
                _count_produce_failure(stats, topic, e.code)
            except errors.KafkaError as e:
                statuses[tp] = ProducePartitionStatus(-1, ProducePartitionResult.error(e.code, str(e)))
                if e.code != errors.UNKNOWN_TOPIC_OR_PARTITION:
                    _count_produce_failure(stats, topic, e.code)
            except Exception as e:
                _count_produce_failure(stats, topic, errors.UNKNOWN_SERVER_ERROR)
                self.log.error(
                    f"Error processing append operation on partition {topic}-{index}", error=repr(e), exc_info=True
                )
                statuses[tp] = ProducePartitionStatus(-1, ProducePartitionResult.error(errors.UNKNOWN_SERVER_ERROR))
        self.broker_topic_stats.record_produce(stats)
        if required_acks == -1 and appended and not self._acks_reached_at_once(appended):
            op = DelayedProduce(timeout_ms, statuses, self.get_partition, response_callback)
            self.produce_purgatory.try_complete_else_watch(op, [TopicPartitionOperationKey(t, p) for t, p in statuses])
        else:
            response_callback({tp: s.result for tp, s in statuses.items()})

    def _acks_reached_at_once(self, appended: list[tuple[ProducePartitionStatus, Partition]]) -> bool:
        """The DelayedProduce's first ``try_complete`` without building it: when every appended partition's
        high watermark already covers its append (a leader whose ISR is itself moves the HW during the
        append), set each such partition's code as DelayedProduce would and return True, and the caller
        answers at once; otherwise change nothing and return False (the purgatory path). ``appended``:
        ``[(ProducePartitionStatus, Partition)]`` of the partitions appended to (no error); a partition no
        longer hosted here (or replaced) sends the request to the purgatory, as DelayedProduce finds it."""
        codes = []
        hosted = self._partitions
        for status, partition in appended:
            if hosted.get((partition.topic, partition.partition)) is not partition:
                return False
            done, code = partition.check_enough_replicas_reach_offset(status.required_offset)
            if not done:
                return False
            codes.append((status, code))
        for status, code in codes:
            if code != status.result.error_code:
                status.result = status.result.with_error(code)
        return True

    # -- transaction verification (KIP-890 part 1) ------------------------------------------------
    #: the AddPartitionsToTxnManager (None: no verification)
    add_partitions_to_txn_manager = None
    #: ``transaction.partition.verification.enable``: verify the first transactional write of Produce up to v11
    transaction_verification_enabled = True

    def handle_produce_append(
        self,
        timeout_ms: int,
        required_acks: int,
        internal_topics_allowed: bool,
        transactional_id: str | None,
        entries: dict[tuple[str, int], memoryview],
        response_callback: AppendCallback,
        add_partitions: bool = False,
    ) -> None:
        """Kafka's ``handleProduceAppend``: a transactional producer's first write to a partition waits
        until the coordinator confirmed the partition is in its transaction (the append then presents
        the log's VerificationGuard), or, with ``add_partitions`` (Produce v12, transaction version 2), until
        the coordinator added it. Errors answer the partition: INVALID_TXN_STATE ("Partition was not added
        to the transaction"), INVALID_PRODUCER_EPOCH for an epoch the coordinator fenced (a late write of a
        finished transaction), retriable coordinator errors as NOT_ENOUGH_REPLICAS (clients retry it without
        a metadata refresh)."""
        manager = self.add_partitions_to_txn_manager
        if transactional_id is None or manager is None or not (add_partitions or self.transaction_verification_enabled):
            return self.append_records(timeout_ms, required_acks, internal_topics_allowed, entries, response_callback)
        producers: set[tuple[int, int]] = set()
        guards: dict[tuple[str, int], object] = {}
        for tp, records in entries.items():
            if len(records) < 61:
                continue
            header = BatchHeader.parse(records, 0, 0)
            if not (header.has_producer_id and header.is_transactional) or header.is_control_batch:
                continue
            producers.add((header.producer_id, header.producer_epoch))
            partition = self._partitions.get(tp)
            if partition is None or partition.log is None:
                continue
            guard = partition.log.maybe_start_transaction_verification(
                header.producer_id, header.producer_epoch, add_partitions
            )
            if guard is not None:
                guards[tp] = guard
        if len(producers) > 1:
            response_callback(
                {
                    tp: ProducePartitionResult.error(
                        errors.INVALID_PRODUCER_ID_MAPPING, "Transactional records contained more than one producer ID"
                    )
                    for tp in entries
                }
            )
            return None
        if not guards:
            return self.append_records(timeout_ms, required_acks, internal_topics_allowed, entries, response_callback)
        producer_id, producer_epoch = next(iter(producers))

        def verified(codes: dict) -> None:
            early: AppendResults = {}
            for tp, code in codes.items():
                if code == errors.NONE:
                    continue
                if code == errors.INVALID_TXN_STATE:
                    message = "Partition was not added to the transaction"
                elif code in _VERIFY_RETRIABLE:
                    message = (
                        "Unable to verify the partition has been added to the transaction. Underlying error: "
                        f"{errors.name_of(code)}"
                    )
                    code = errors.NOT_ENOUGH_REPLICAS
                else:
                    message = None
                early[tp] = ProducePartitionResult.error(code, message)
            rest = {tp: r for tp, r in entries.items() if tp not in early}
            if not rest:
                response_callback(early)
                return
            self.append_records(
                timeout_ms,
                required_acks,
                internal_topics_allowed,
                rest,
                lambda results: response_callback({**early, **results}),
                verification_guards=guards,
            )
            self.try_complete_actions()  # this runs on the verifier's thread, not a request handler

        manager.verify_transaction(
            transactional_id, producer_id, producer_epoch, list(guards), verified, add=add_partitions
        )
        return None

    def maybe_start_transaction_verification_for_partition(
        self,
        tp: tuple[str, int],
        transactional_id: str | None,
        producer_id: int,
        producer_epoch: int,
        callback,
        transaction_abortable_supported: bool = False,
    ) -> None:
        """Kafka's ``maybeStartTransactionVerificationForPartition`` (a coordinator's transactional write,
        TxnOffsetCommit): ``callback(error code, VerificationGuard or None)`` exactly once. No verification
        (NONE, None) when it is disabled, or the producer has a transaction open on ``tp`` already;
        otherwise the partition's guard is created and the transaction coordinator asked (the callback
        then runs on the verifier's thread, after which the purgatory pokes queued by its append are run).
        Errors: the partition's (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR)
        and the coordinator's answers as the AddPartitionsToTxnManager translates them (TRANSACTION_ABORTABLE
        kept only when ``transaction_abortable_supported``)."""
        manager = self.add_partitions_to_txn_manager
        if transactional_id is None or manager is None:
            callback(errors.NONE, None)
            return
        try:
            log = self.get_partition_or_error(*tp).leader_log_or_raise()
        except errors.KafkaError as e:
            callback(e.code, None)
            return
        guard = log.maybe_start_transaction_verification(producer_id, producer_epoch) if log is not None else None
        if guard is None:
            callback(errors.NONE, None)
            return

        def verified(codes: dict) -> None:
            callback(codes.get(tp, errors.NONE), guard)
            self.try_complete_actions()  # the append may have run on the verifier's thread

        manager.verify_transaction(
            transactional_id,
            producer_id,
            producer_epoch,
            [tp],
            verified,
            transaction_abortable_supported=transaction_abortable_supported,
        )

    def try_complete_actions(self) -> None:
        """Run queued purgatory pokes (end of KafkaApis.handle, outside any partition lock)."""
        actions = self._actions
        while actions:
            try:
                action = actions.popleft()
            except IndexError:
                return
            if type(action) is FetchSessionOperationKey:  # an idle fetch session's partition changed
                self.fetch_purgatory.check_and_complete(action)
                continue
            tp, hw_incremented = action
            self._complete_delayed(tp, produce=hw_incremented)

    def complete_delayed_fetch_requests(self, tps) -> None:
        """Complete the delayed fetches waiting on ``tps`` (``[(topic, partition)]``) whose high watermark
        moved on this follower (Kafka's ``completeDelayedFetchRequests``, called by the replica fetchers:
        consumers reading a follower, KIP-392, wait on its high watermark)."""
        for tp in tps:
            self.fetch_purgatory.check_and_complete(TopicPartitionOperationKey(*tp))

    def _complete_delayed(self, tp: tuple[str, int], produce: bool) -> None:
        # ``tp`` itself is the watch key: a (topic, partition) tuple equals (and hashes as) the
        # TopicPartitionOperationKey the operations watch, so none is built per append
        key = tp
        if produce:
            self.produce_purgatory.check_and_complete(key)
        self.fetch_purgatory.check_and_complete(key)
        self.delete_records_purgatory.check_and_complete(key)  # an unwatched key answers at once, without a lock
        share = self.share_fetch_purgatory
        if share is not None:
            share.check_and_complete(key)

    # -- fetch ---------------------------------------------------------------------------------
    def fetch_messages(
        self,
        params: FetchParams,
        fetches: list[PartitionFetch],
        response_callback: Callable[[list[tuple[PartitionFetch, FetchPartitionResult]]], None],
        session=None,
    ) -> None:
        """``response_callback([(PartitionFetch, FetchPartitionResult)])`` once, now or after a delay.
        ``session``: a follower's fetch session with parked partitions (not in ``fetches``, issue 31), whose
        change also ends the wait."""
        results = self.read_from_log(params, fetches)
        readable = sum(r.records.size_in_bytes for _, r in results)
        # an error or a preferred read replica (Kafka's hasPreferredReadReplica) is answered at once
        answer_now = any(r.error_code != errors.NONE or r.preferred_read_replica >= 0 for _, r in results)
        if params.max_wait_ms <= 0 or not fetches or readable >= params.min_bytes or answer_now:
            response_callback(results)
            return
        statuses = [
            FetchPartitionStatus(f.topic, f.partition, r.fetch_offset_metadata, f.partition_max_bytes)
            for f, r in results
        ]
        op = DelayedFetch(
            params.max_wait_ms,
            params.min_bytes,
            statuses,
            self.get_partition,
            self._end_offset_metadata_fn(params.isolation),
            lambda: response_callback(self.read_from_log(params, fetches, update_fetch_state=False)),
            fetch_only_leader=params.fetch_only_leader,
            is_throttled=(lambda t, p: self._leader_throttled(params.replica_id, t, p))
            if params.replica_id >= 0
            else None,
            session=session,
        )
        keys: list = [TopicPartitionOperationKey(f.topic, f.partition) for f in fetches]
        if session is not None:
            session_key = FetchSessionOperationKey(session.id)
            actions = self._actions
            op.wake = lambda: actions.append(session_key)
            keys.append(session_key)
        self.fetch_purgatory.try_complete_else_watch(op, keys)

    def await_fetch_session_change(self, max_wait_ms: int, session, complete: Callable[[], None]) -> None:
        """Issue 31: a follower's incremental fetch in ``session`` found every partition parked (nothing to read).
        ``complete()`` runs once, on the first change of one of them (after the request handler that made it, as
        other purgatory completions) or after ``max_wait_ms``, whichever comes first; it may run before this
        returns. See :class:`~pykbroker.server.delayed_fetch.DelayedSessionFetch`."""
        key = FetchSessionOperationKey(session.id)
        actions = self._actions
        op = DelayedSessionFetch(max_wait_ms, session, lambda: actions.append(key), complete)
        self.fetch_purgatory.try_complete_else_watch(op, [key])

    def park_followers(self, replica_id: int, session, parkable: list[tuple[object, str, int, int, int, int]]) -> None:
        """Issue 31: park follower ``replica_id``'s fetch ``session`` on each partition of ``parkable``
        (``(session key, topic, partition, fetch offset, high watermark sent, log start offset sent)``) that
        ``Partition.park_follower`` accepts; the session then skips them until they change."""
        clock = session.clock
        parked = session.parked
        for key, topic, index, fetch_offset, hw, log_start in parkable:
            partition = self._partitions.get((topic, index))
            if partition is not None and partition.park_follower(
                replica_id, fetch_offset, hw, log_start, clock, session.id, session.changed_notifier(key)
            ):
                with session.lock:
                    parked.add(key)

    def unpark_followers(self, replica_id: int, tps) -> None:
        """Issue 31: follower ``replica_id`` is no longer parked on the partitions ``tps`` (``[(topic, partition)]``,
        released by its session: changed, named by its request, or forgotten); their fetch times stop following
        the session's clock from now on."""
        for tp in tps:
            partition = self._partitions.get(tp)
            if partition is not None:
                partition.unpark_follower(replica_id)

    @staticmethod
    def _end_offset_metadata_fn(isolation: FetchIsolation):
        if isolation is FetchIsolation.LOG_END:
            return lambda log: log.log_end_offset_metadata
        return lambda log: log._fetch_high_watermark_metadata()  # TODO: public accessor in UnifiedLog

    def read_from_log(
        self, params: FetchParams, fetches: list[PartitionFetch], update_fetch_state: bool = True
    ) -> list[tuple[PartitionFetch, FetchPartitionResult]]:
        """Read each partition (Kafka's ``readFromLog``). A follower's first read of a fetch
        (``update_fetch_state``; not the re-read of a DelayedFetch) also records its fetch offset and
        log start offset on the leader (``Partition.update_follower_fetch_state``); a moved HW is queued
        as a purgatory action; a follower whose ``replica_epoch`` is older than its live registration
        (a previous incarnation) gets NOT_LEADER_OR_FOLLOWER for the partition and no records (KIP-903).
        A ``last_fetched_epoch`` that does not match this leader's epoch history is answered with a
        diverging epoch and no records (KIP-320).

        KIP-392: a consumer's Fetch v11+ (``client_metadata``) may read a follower's log, up to the
        follower's high watermark (or last stable offset), with the same leader-epoch fencing
        (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH) and OFFSET_OUT_OF_RANGE outside its log; on the
        leader, with a ``replica.selector.class``, a partition whose selected replica is a follower is
        answered with ``preferred_read_replica`` and no records (:meth:`find_preferred_read_replica`)."""
        limit = min(params.max_bytes, self.fetch_max_bytes)
        min_one_message = True
        out = []
        follower = params.replica_id >= 0
        only_leader = params.fetch_only_leader
        client = params.client_metadata
        for f in fetches:
            try:
                partition = self.get_partition_or_error(f.topic, f.partition)
                if client is not None and not follower:
                    preferred = self.find_preferred_read_replica(partition, client, f.fetch_offset)
                    if preferred is not None:  # Kafka skips the read and answers the offsets only
                        log = partition.local_log_or_raise(f.current_leader_epoch, require_leader=False)
                        out.append(
                            (
                                f,
                                FetchPartitionResult(
                                    errors.NONE,
                                    log.high_watermark,
                                    log.last_stable_offset,
                                    log.log_start_offset,
                                    preferred_read_replica=preferred,
                                ),
                            )
                        )
                        continue
                log = partition.local_log_or_raise(f.current_leader_epoch, require_leader=only_leader)
                leader_end_offset = log.log_end_offset
                hw, lso, lstart = log.high_watermark, log.last_stable_offset, log.log_start_offset
                if f.last_fetched_epoch >= 0:
                    diverging = self._diverging_epoch(log, f)
                    if diverging is not None:
                        out.append((f, FetchPartitionResult(errors.NONE, hw, lso, lstart, diverging_epoch=diverging)))
                        continue
                max_bytes = min(f.partition_max_bytes, limit)
                if max_bytes < 0:  # Kafka's LogSegment.read rejects it: UNKNOWN_SERVER_ERROR for the partition
                    self.log.warning(
                        f"Invalid max size {max_bytes} for fetch of {f.topic}-{f.partition} "
                        f"(partition_max_bytes={f.partition_max_bytes}, max_bytes={params.max_bytes})"
                    )
                    out.append((f, FetchPartitionResult(errors.UNKNOWN_SERVER_ERROR, hw, lso, lstart)))
                    continue
                info = log.read(f.fetch_offset, max_bytes, params.isolation, min_one_message)
                if follower and update_fetch_state:
                    now = self.time.milliseconds()
                    if partition.update_follower_fetch_state(
                        params.replica_id,
                        f.fetch_offset,
                        f.log_start_offset,
                        now,
                        leader_end_offset,
                        params.replica_epoch,
                    ):
                        self._actions.append(((f.topic, f.partition), True))
                        hw = log.high_watermark
                    elif self.delete_records_purgatory.num_delayed:
                        # a DeleteRecords may wait on this follower's log start offset (Kafka's
                        # tryCompleteDelayedRequests when the low watermark moves)
                        self._actions.append(((f.topic, f.partition), False))
                if follower and self._leader_throttled(params.replica_id, f.topic, f.partition, partition):
                    info = info._replace(records=EMPTY_RECORDS)  # Kafka's readFromLog: an empty set
                size = info.records.size_in_bytes
                if size > 0:
                    min_one_message = False
                    limit = max(0, limit - size)
                out.append(  # every field positional: the cheapest NamedTuple construction (per partition)
                    (
                        f,
                        FetchPartitionResult(
                            errors.NONE,
                            hw,
                            lso,
                            lstart,
                            info.records,
                            info.fetch_offset_metadata,
                            None,
                            info.aborted_transactions,
                            -1,
                        ),
                    )
                )
            except errors.KafkaError as e:
                p = self._partitions.get((f.topic, f.partition))
                hw = p.log.high_watermark if p is not None else -1
                lstart = p.log.log_start_offset if p is not None else -1
                out.append((f, FetchPartitionResult(e.code, hw, hw, lstart)))
            except Exception as e:
                self.log.error(
                    f"Error processing fetch on partition {f.topic}-{f.partition}", error=repr(e), exc_info=True
                )
                out.append((f, FetchPartitionResult(errors.UNKNOWN_SERVER_ERROR)))
        return out

    def find_preferred_read_replica(
        self, partition: Partition, client: ClientMetadata, fetch_offset: int
    ) -> int | None:
        """Kafka's ``ReplicaManager.findPreferredReadReplica`` (KIP-392): on the leader, with a replica
        selector, the id of the replica a consumer (``client``) fetching ``fetch_offset`` should read from,
        or None to read here (this broker does not lead, no selector, or the selector chose the leader or
        a replica without a live endpoint on the client's listener). Candidates are the ISR members whose
        log, as this leader last saw it, holds ``fetch_offset`` (log start <= offset <= log end), and the
        leader."""
        selector = self.replica_selector
        if selector is None or not partition.is_leader:
            return None
        now = self.time.milliseconds()
        cache = self.metadata_cache
        listener = client.listener_name

        def view(broker_id: int, log_end_offset: int, lag_ms: int) -> ReplicaView:
            found = cache.alive_broker_rack(broker_id, listener)
            if found is None:  # Kafka's Node.noNode(): no rack, never selected
                return ReplicaView(-1, None, log_end_offset, lag_ms)
            return ReplicaView(broker_id, found[0], log_end_offset, lag_ms)

        replicas = [
            view(broker_id, leo, now - caught_up_ms)
            for broker_id, leo, log_start, caught_up_ms in partition.in_sync_follower_states()
            if log_start <= fetch_offset <= leo
        ]
        leader = view(self.node_id, partition.log.log_end_offset, 0)
        replicas.append(leader)
        selected = selector.select(partition.topic, partition.partition, client, PartitionView(tuple(replicas), leader))
        if selected is None or not selected.has_endpoint or selected == leader:
            return None
        return selected.node_id

    def _leader_throttled(self, replica_id: int, topic: str, index: int, partition: Partition | None = None) -> bool:
        """Kafka's ``shouldLeaderThrottle``: a follower outside the ISR of a throttled partition while the leader
        quota is exceeded gets no data for it."""
        quota = self.leader_quota
        if not quota.is_throttled(topic, index):
            return False
        partition = partition or self._partitions.get((topic, index))
        in_sync = partition is not None and replica_id in partition.isr
        return not in_sync and quota.is_quota_exceeded()

    @staticmethod
    def _diverging_epoch(log, f: PartitionFetch) -> tuple[int, int] | None:
        """Kafka's ``validateFetchOffsetAndMaybeGetDivergingEpoch``: ``(epoch, end offset)`` when the
        fetcher's ``last_fetched_epoch`` ends here before its fetch offset (or is unknown here), else
        None. Raises OffsetOutOfRangeError when this log has no epoch at or below it."""
        found = log.end_offset_for_epoch(f.last_fetched_epoch)
        if found is None:
            raise errors.OffsetOutOfRangeError(
                f"No epoch at or below {f.last_fetched_epoch} in {f.topic}-{f.partition}"
            )
        end_offset, epoch = found
        if end_offset < f.fetch_offset or epoch < f.last_fetched_epoch:
            return epoch, end_offset
        return None

    # -- lifecycle -----------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop applying metadata (an apply_delta in progress stops at its next partition and is
        waited for: no log is created after this returns), the failure handler and the purgatories."""
        self._shutting_down.set()
        with self._queue_lock:
            dropped = list(self._state_changes)
            self._state_changes.clear()
            applier = self._applier
        for item in dropped:
            self._finish(item)
        if applier is not None and applier is not threading.current_thread():
            applier.join()
        with self._lock:
            pass
        self.replica_fetcher_manager.shutdown()
        if self.alter_partition_manager is not None:
            self.alter_partition_manager.close()
        if self._failure_handler is not None:
            self._failure_handler.join(5)
        self.produce_purgatory.shutdown()
        self.fetch_purgatory.shutdown()
        self.delete_records_purgatory.shutdown()
