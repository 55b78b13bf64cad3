"""QuorumController: the KRaft controller (Kafka's ``QuorumController``).

Theory of operation. Every operation is an event on one thread, ``quorum-controller-<nodeId>-event-
handler``, which alone touches the control managers. A write event checks this node is the active
controller, asks a control manager for records and a response (``ControllerResult``), reserves offsets with
``raft.prepare_append(epoch, records)`` (one atomic batch), replays the records into the control managers at
once (so the next event sees them), schedules the append, and parks the caller's future at the batch's last
offset. When the Raft client reports that offset committed (``handle_commit`` on the Raft thread, handed to
the event thread) the parked futures complete - a client is answered only for committed metadata. An
operation with no records completes once everything written before it is committed; reads work the same way,
so they never expose uncommitted state.

A standby (not leader) controller replays committed batches. Leadership arrives through
``handle_leader_change``, which the Raft client fires only after this listener has seen every batch below
the new epoch's start, so the active controller starts from the complete committed state; on first
activation of an empty log it writes the bootstrap ``metadata.version`` record. Losing leadership (or a
failed append) fails the parked futures with NotControllerError and rebuilds state by replaying the
committed log from offset 0 under a fresh listener registration.

Broker lifecycle (Kafka's design). Brokers register fenced (unless ``unfence_on_register``, for a node with
no heartbeat sender) and heartbeat (``process_broker_heartbeat``); the active controller tracks their
sessions in the ClusterControlManager's BrokerHeartbeatManager, which it builds on activation treating
every registered broker as having just heartbeated. A deferred event on the event queue
(``maybeFenceReplicas``, Kafka's ``maybeFenceStaleBroker``), rescheduled after every registration,
heartbeat and fencing for the earliest session expiry (``session_timeout_ms``, Kafka's
``broker.session.timeout.ms``), fences one stale broker at a time and moves its leaderships. Without
heartbeats (``unfence_on_register``) sessions are not enforced and nothing is fenced for silence.

A broker is never fenced for the controller's own silence (a controller stopped for longer than a session
used to fence every broker at once when it resumed, while their heartbeats were still queued):

* a heartbeat counts from when it is *received* (``BrokerHeartbeatTracker``, recorded on the handler
  thread before the event is queued), so heartbeats waiting behind a slow event keep their sessions;
* the event queue reports a stall of its own thread (``stall_threshold_ms``, a quarter of the session
  timeout: the process was stopped or starved, or an event ran that long) before it runs anything else,
  and the stall is credited to every session (``BrokerHeartbeatManager.credit_stall``: a stall of a whole
  session timeout or more resets every session to now);
* fencing is paced: after a fencing the next one waits ``fence_interval_ms`` (a twentieth of the session
  timeout), so heartbeats that arrive meanwhile are processed first.

Threading: public methods are thread-safe and return ``concurrent.futures.Future``s, completed on the
event thread (callbacks must be quick and must not block on other controller futures).
"""

from __future__ import annotations

import collections
import random as _random
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

from pykbroker.metadata.acls import AclControlManager
from pykbroker.metadata.alter_partition import alter_partition
from pykbroker.metadata.broker_heartbeat_manager import BrokerHeartbeatTracker
from pykbroker.metadata.client_quota_control_manager import ClientQuotaControlManager
from pykbroker.metadata.cluster_control_manager import ClusterControlManager
from pykbroker.metadata.configuration_control_manager import ConfigSchema, ConfigurationControlManager
from pykbroker.metadata.controller_result import ControllerResult, MutationQuota
from pykbroker.metadata.delegation_token_control_manager import DelegationTokenControlManager, DelegationTokenSettings
from pykbroker.metadata.event_queue import EventQueue, EventQueueClosedError
from pykbroker.metadata.feature_control_manager import LATEST_PRODUCTION_METADATA_VERSION, FeatureControlManager
from pykbroker.metadata.features import (
    ELIGIBLE_LEADER_REPLICAS_VERSION,
    KRAFT_VERSION,
    METADATA_VERSION,
    bootstrap_levels,
)
from pykbroker.metadata.leader_election import balance_partition_leaders, elect_leaders
from pykbroker.metadata.partition_reassignment import alter_partition_reassignments, list_partition_reassignments
from pykbroker.metadata.producer_id_control_manager import ProducerIdControlManager
from pykbroker.metadata.records import FEATURE_LEVEL_RECORD, ApiMessageAndVersion
from pykbroker.metadata.replica_placer import StripedReplicaPlacer
from pykbroker.metadata.replication_control_manager import ReplicationControlManager
from pykbroker.metadata.scram_control_manager import ScramControlManager
from pykbroker.protocol import errors
from pykbroker.protocol.errors import KafkaError, NotControllerError
from pykbroker.protocol.types import ZERO_UUID
from pykbroker.raft.batch_accumulator import NotLeaderError
from pykbroker.raft.kafka_raft_client import KafkaRaftClient
from pykbroker.raft.raft_client import Batch, LeaderAndEpoch, RaftClientListener
from pykbroker.raft.records_snapshot import RecordsSnapshotReader
from pykbroker.utils.futures import set_exception_if_pending, set_result_if_pending
from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import SYSTEM, Time

R = TypeVar("R")


class _ControlManagers:
    """The controller's in-memory state; rebuilt from scratch on renounce."""

    def __init__(
        self,
        cluster_id: str,
        placer: StripedReplicaPlacer,
        schema: ConfigSchema | None,
        default_num_partitions: int,
        default_replication_factor: int,
        delete_topic_enable: bool,
        unfence_on_register: bool,
        time: Time,
        session_timeout_ms: int,
        node_id: int = -1,
        delegation_tokens: DelegationTokenSettings | None = None,
        kraft_version: Callable[[], int] = lambda: 0,
    ):
        self.features = FeatureControlManager(node_id, self._brokers_supported, kraft_version)
        self.cluster = ClusterControlManager(
            cluster_id,
            unfence_on_register,
            time,
            session_timeout_ms,
            lambda: self.features.metadata_version,
            # Kafka's registerBroker: the finalized levels plus the Raft log's kraft.version
            lambda: {**self.features.finalized, KRAFT_VERSION: kraft_version()},
        )
        self.configs = ConfigurationControlManager(schema, broker_exists=self.cluster.is_registered)
        self.replication = ReplicationControlManager(
            self.cluster, self.configs, placer, default_num_partitions, default_replication_factor, delete_topic_enable
        )
        self.configs.topic_exists = self.replication.topic_exists
        self.replication.elr_enabled = lambda: self.features.finalized.get(ELIGIBLE_LEADER_REPLICAS_VERSION, 0) >= 1
        self.producer_ids = ProducerIdControlManager(self.cluster)
        self.scram = ScramControlManager(lambda: self.features.metadata_version)
        self.acls = AclControlManager()
        self.client_quotas = ClientQuotaControlManager()
        self.delegation_tokens = DelegationTokenControlManager(
            delegation_tokens or DelegationTokenSettings(), time, lambda: self.features.metadata_version
        )

    def _brokers_supported(self) -> Iterator[tuple[int, dict[str, tuple[int, int]]]]:
        """(broker id, {feature: (min, max)}) of every registered broker (Kafka's ``brokerSupported``)."""
        for b in self.cluster.brokers.values():
            yield b.id, {f["name"]: (f["min_supported_version"], f["max_supported_version"]) for f in b.features}

    def replay(self, record: ApiMessageAndVersion, offset: int = -1) -> None:
        """Apply one record; ``offset`` is its log offset when known."""
        self.cluster.replay(record, offset)
        for manager in (
            self.configs,
            self.replication,
            self.producer_ids,
            self.features,
            self.scram,
            self.acls,
            self.client_quotas,
            self.delegation_tokens,
        ):
            manager.replay(record)


class _Listener(RaftClientListener[ApiMessageAndVersion]):
    """Forwards Raft callbacks to the event thread, tagged with its registration generation."""

    def __init__(self, controller: QuorumController, generation: int):
        self.controller, self.generation = controller, generation

    def handle_commit(self, batch: Batch[ApiMessageAndVersion]) -> None:
        self.controller._queue.append(lambda: self.controller._handle_commit(self.generation, batch))

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        self.controller._queue.append(lambda: self.controller._handle_leader_change(self.generation, leader))

    def handle_load_snapshot(self, reader: RecordsSnapshotReader[ApiMessageAndVersion]) -> None:
        self.controller._queue.append(lambda: self.controller._handle_load_snapshot(self.generation, reader))


MAYBE_FENCE_REPLICAS = "maybeFenceReplicas"
MAYBE_BALANCE_PARTITION_LEADERS = "maybeBalancePartitionLeaders"
SWEEP_EXPIRED_DELEGATION_TOKENS = "sweepExpiredDelegationTokens"
#: a failed deferred fencing check is retried this much later (Kafka: one minute)
DEFERRED_RETRY_MS = 60_000


class QuorumController:
    """See the module docstring. ``session_timeout_ms``: Kafka's ``broker.session.timeout.ms``."""

    def __init__(
        self,
        node_id: int,
        raft_client: KafkaRaftClient[ApiMessageAndVersion],
        cluster_id: str,
        time: Time = SYSTEM,
        default_num_partitions: int = 1,
        default_replication_factor: int = 1,
        config_schema: ConfigSchema | None = None,
        random: _random.Random | None = None,
        bootstrap_metadata_version: int = LATEST_PRODUCTION_METADATA_VERSION,
        bootstrap_features: dict[str, int] | None = None,
        bootstrap_records: list[ApiMessageAndVersion] | None = None,
        delete_topic_enable: bool = True,
        unfence_on_register: bool = True,
        session_timeout_ms: int = 9000,
        leader_imbalance_check_interval_ms: int | None = None,
        delegation_tokens: DelegationTokenSettings | None = None,
    ):
        """``leader_imbalance_check_interval_ms``: with ``auto.leader.rebalance.enable``, how often the
        active controller moves leadership back to preferred replicas (None: never).
        ``bootstrap_metadata_version`` / ``bootstrap_features``: the levels an empty log starts at when
        ``bootstrap_records`` have no ``metadata.version`` (features None: Kafka's defaults for that
        ``metadata.version``, capped to what pykbroker supports). ``bootstrap_records``: the records of
        ``bootstrap.checkpoint`` (None: none). ``delegation_tokens``: the ``delegation.token.*`` configs (None:
        tokens disabled); with a secret key the active controller removes expired tokens every check interval."""
        self.node_id = node_id
        self.leader_imbalance_check_interval_ms = leader_imbalance_check_interval_ms
        self.cluster_id = cluster_id
        self.time = time
        self._raft = raft_client
        self._placer = StripedReplicaPlacer(random)
        self._manager_args = (
            cluster_id,
            self._placer,
            config_schema,
            default_num_partitions,
            default_replication_factor,
            delete_topic_enable,
            unfence_on_register,
            time,
            session_timeout_ms,
            node_id,
            delegation_tokens,
            raft_client.kraft_version,
        )
        self.managers = _ControlManagers(*self._manager_args)
        #: a stall of the event thread this long (ms) is credited to every broker session
        self.stall_threshold_ms = max(1, session_timeout_ms // 4)
        #: after fencing a broker for silence, the next such fencing waits this long (ms)
        self.fence_interval_ms = max(1, session_timeout_ms // 20)
        self._heartbeat_tracker = BrokerHeartbeatTracker()
        self.bootstrap_metadata_version = bootstrap_metadata_version
        self.bootstrap_features = bootstrap_features
        #: records of ``bootstrap.checkpoint`` (``kafka-storage format``: feature levels, ``--add-scram``),
        #: written when the controller first leads an empty log
        self.bootstrap_records: list[ApiMessageAndVersion] = list(bootstrap_records or ())
        self._log = get_logger("QuorumController", id=node_id)
        # event-thread state
        self._active_epoch = -1
        self._deferred: collections.deque[tuple[int, Future | None, Any]] = collections.deque()
        self._last_committed_offset = -1
        self._last_reserved_offset = -1
        self._generation = 0
        self._active_event = threading.Event()
        self._closed = False
        self._next_fence_ms = 0  # no fencing for silence before this (monotonic ms): the pacing
        self._queue = EventQueue(
            f"quorum-controller-{node_id}-event-handler", time, self._on_stall, self.stall_threshold_ms
        )
        self._listener = _Listener(self, 0)
        raft_client.register(self._listener)

    # ---- public API --------------------------------------------------------------------------
    @property
    def is_active(self) -> bool:
        return self._active_event.is_set()

    def wait_for_active(self, timeout_s: float | None = None) -> bool:
        """Block (not on the event thread!) until this controller is active; True if it is."""
        return self._active_event.wait(timeout_s)

    @property
    def last_committed_offset(self) -> int:
        return self._last_committed_offset

    def create_topics(
        self, request: dict[str, Any], describable: set[str] | None = None, quota: MutationQuota | None = None
    ) -> Future:
        """CreateTopics -> ``{topics: [CreatableTopicResult dict]}`` (see ReplicationControlManager). ``quota``:
        the request's controller mutation quota (KIP-599), recorded per topic on the event thread."""
        return self._write("createTopics", lambda: self.managers.replication.create_topics(request, describable, quota))

    def delete_topics(self, request: dict[str, Any], quota: MutationQuota | None = None) -> Future:
        """DeleteTopics -> ``{responses: [{name, topic_id, error_code, error_message}]}``."""
        return self._write("deleteTopics", lambda: self.managers.replication.delete_topics(request, quota))

    def create_partitions(self, request: dict[str, Any], quota: MutationQuota | None = None) -> Future:
        """CreatePartitions -> ``{results: [{name, error_code, error_message}]}``."""
        return self._write("createPartitions", lambda: self.managers.replication.create_partitions(request, quota))

    def incremental_alter_configs(self, request: dict[str, Any]) -> Future:
        """IncrementalAlterConfigs -> ``{responses: [{error_code, error_message, resource_type,
        resource_name}]}``."""
        return self._write("incrementalAlterConfigs", lambda: self.managers.configs.incremental_alter_configs(request))

    def create_acls(self, request: dict[str, Any]) -> Future:
        """CreateAcls -> ``{throttle_time_ms, results: [{error_code, error_message}]}``."""
        return self._write("createAcls", lambda: self.managers.acls.create_acls(request))

    def delete_acls(self, request: dict[str, Any]) -> Future:
        """DeleteAcls -> ``{throttle_time_ms, filter_results: [...]}``."""
        return self._write("deleteAcls", lambda: self.managers.acls.delete_acls(request))

    def alter_user_scram_credentials(self, request: dict[str, Any]) -> Future:
        """AlterUserScramCredentials -> ``{throttle_time_ms, results: [{user, error_code, error_message}]}``."""
        return self._write("alterUserScramCredentials", lambda: self.managers.scram.alter_credentials(request))

    def create_delegation_token(self, request: dict[str, Any], principal: str) -> Future:
        """CreateDelegationToken (v3 body) for the requester ``principal`` -> the v3 response body."""
        return self._write("createDelegationToken", lambda: self.managers.delegation_tokens.create(request, principal))

    def renew_delegation_token(self, request: dict[str, Any], principal: str) -> Future:
        """RenewDelegationToken -> ``{error_code, expiry_timestamp_ms, throttle_time_ms}``."""
        return self._write("renewDelegationToken", lambda: self.managers.delegation_tokens.renew(request, principal))

    def expire_delegation_token(self, request: dict[str, Any], principal: str) -> Future:
        """ExpireDelegationToken -> ``{error_code, expiry_timestamp_ms, throttle_time_ms}``."""
        return self._write("expireDelegationToken", lambda: self.managers.delegation_tokens.expire(request, principal))

    def alter_client_quotas(self, request: dict[str, Any]) -> Future:
        """AlterClientQuotas (KIP-546) -> ``{throttle_time_ms, entries: [{error_code, error_message, entity}]}``."""
        return self._write("alterClientQuotas", lambda: self.managers.client_quotas.alter_client_quotas(request))

    def allocate_producer_ids(self, request: dict[str, Any]) -> Future:
        """AllocateProducerIds ``{broker_id, broker_epoch}`` -> ``{error_code, error_message,
        producer_id_start, producer_id_len}``."""
        return self._write(
            "allocateProducerIds",
            lambda: self.managers.producer_ids.generate_next_producer_id(
                int(request["broker_id"]), int(request.get("broker_epoch", -1))
            ),
        )

    def assign_replicas_to_dirs(self, request: dict[str, Any]) -> Future:
        """AssignReplicasToDirs (73, KIP-858) -> ``{error_code, directories}`` (see
        ``ReplicationControlManager.assign_replicas_to_dirs``), completed once the PartitionChangeRecords commit;
        UnsupportedVersionError / StaleBrokerEpochError fail the future."""
        return self._write("assignReplicasToDirs", lambda: self.managers.replication.assign_replicas_to_dirs(request))

    def alter_partition(self, request: dict[str, Any], version: int = 3) -> Future:
        """AlterPartition (a leader's ISR change) -> the AlterPartition response body, completed once the
        PartitionChangeRecords commit (see :mod:`pykbroker.metadata.alter_partition`). A stale broker
        epoch fails the future with StaleBrokerEpochError."""
        return self._write("alterPartition", lambda: alter_partition(self.managers.replication, request, version))

    def elect_leaders(self, request: dict[str, Any]) -> Future:
        """ElectLeaders ``{election_type, topic_partitions}`` -> ``{error_code, replica_election_results}``
        (see :mod:`pykbroker.metadata.leader_election`), completed once the leader changes commit."""
        return self._write("electLeaders", lambda: elect_leaders(self.managers.replication, request))

    def alter_partition_reassignments(self, request: dict[str, Any]) -> Future:
        """AlterPartitionReassignments (KIP-455) -> its response body (see
        :mod:`pykbroker.metadata.partition_reassignment`), completed once the PartitionChangeRecords commit."""
        return self._write(
            "alterPartitionReassignments", lambda: alter_partition_reassignments(self.managers.replication, request)
        )

    def list_partition_reassignments(self, request: dict[str, Any]) -> Future:
        """Read: ListPartitionReassignments (KIP-455) -> its response body, the committed reassignments."""
        return self._read(
            "listPartitionReassignments", lambda: list_partition_reassignments(self.managers.replication, request)
        )

    def update_features(self, request: dict[str, Any]) -> Future:
        """UpdateFeatures ``{feature_updates: [{feature, max_version_level, upgrade_type}], validate_only}`` ->
        ``{error_code, error_message}`` (see FeatureControlManager.update_features), completed once the
        FeatureLevelRecords commit."""
        updates: dict[str, int] = {}
        upgrade_types: dict[str, int] = {}
        for u in request.get("feature_updates") or []:
            updates[u["feature"]] = int(u["max_version_level"])
            upgrade_types[u["feature"]] = int(u.get("upgrade_type", 1))
        validate_only = bool(request.get("validate_only", False))
        return self._write(
            "updateFeatures", lambda: self.managers.features.update_features(updates, upgrade_types, validate_only)
        )

    def register_broker(self, request: dict[str, Any]) -> Future:
        """BrokerRegistration (``broker_id``, ``cluster_id``, ``incarnation_id``, ``listeners``,
        ``features``, ``rack``, ``log_dirs``) -> ``{error_code, error_message, broker_epoch}``. A new
        incarnation's broker epoch is the offset of its RegisterBrokerRecord; re-registering the same
        incarnation keeps the epoch. The broker is registered fenced (unfenced with
        ``unfence_on_register``). A new incarnation whose ``previous_broker_epoch`` (the epoch its clean-shutdown
        marker holds, -1 without one) is not its last registration's leaves every ISR and ELR (with
        ``eligible.leader.replicas.version`` 1, Kafka's unclean shutdown detection). Errors:
        INCONSISTENT_CLUSTER_ID, INVALID_REQUEST, DUPLICATE_BROKER_REGISTRATION (another incarnation holds a live
        session)."""

        def op() -> ControllerResult:
            broker_id = int(request["broker_id"])
            existing = self.managers.cluster.brokers.get(broker_id)
            result = self.managers.cluster.register_broker(request, self._next_write_offset())
            new_incarnation = existing is not None and existing.incarnation_id != request.get("incarnation_id")
            registered = result.response is not None and result.response["error_code"] == errors.NONE
            if registered and new_incarnation:
                assert existing is not None
                if int(request.get("previous_broker_epoch", -1)) != existing.epoch:
                    # Kafka's BrokerUncleanShutdownHandler: not cleanly shut down (its clean-shutdown marker did
                    # not hold its last broker epoch): it leaves every ISR and ELR (after the RegisterBrokerRecord,
                    # whose offset is the new broker epoch)
                    records = list(result.records)
                    self.managers.replication.handle_broker_unclean_shutdown(broker_id, records)
                    result = ControllerResult(records, result.response)
            self._reschedule_maybe_fence_stale_brokers()
            return result

        return self._write("registerBroker", op)

    def process_broker_heartbeat(self, request: dict[str, Any]) -> Future:
        """BrokerHeartbeat ``{broker_id, broker_epoch, current_metadata_offset, want_fence,
        want_shut_down}`` -> ``{error_code, is_caught_up, is_fenced, should_shut_down}`` (the
        BrokerHeartbeatResponse fields but ``throttle_time_ms``), completed once the records it caused are committed
        (Kafka's ``processBrokerHeartbeat``). ``is_caught_up``: ``current_metadata_offset`` reached the
        broker's RegisterBrokerRecord offset; a caught-up fenced broker not asking to stay fenced is
        unfenced (and leads its leaderless partitions again); ``want_fence`` fences; ``want_shut_down``
        starts a controlled shutdown (leaderships move away) and ``should_shut_down`` turns true once it
        leads nothing and the active brokers have caught up. Errors (in ``error_code``, other fields
        Kafka's defaults): STALE_BROKER_EPOCH for an unknown broker or another broker epoch (as Kafka,
        which never answers BROKER_ID_NOT_REGISTERED here). NotControllerError fails the future. The
        heartbeat's receipt time is recorded at once (any thread), before it waits in the event queue."""
        broker_id = int(request["broker_id"])
        self._heartbeat_tracker.record(broker_id, int(request.get("broker_epoch", -1)), self.time.hi_res_milliseconds())
        state = {"in_controlled_shutdown": False}

        def op() -> ControllerResult:
            cluster = self.managers.cluster
            try:
                offset = cluster.register_broker_record_offsets.get(broker_id)
                if offset is None:
                    raise errors.StaleBrokerEpochError(
                        f"Receive a heartbeat from broker {broker_id} before registration"
                    )
                result = self.managers.replication.process_broker_heartbeat(request, offset)
            except KafkaError as e:
                self._log.info("Heartbeat refused", broker=broker_id, error=e.message)
                return ControllerResult([], _heartbeat_error(e))
            reply = result.response
            assert reply is not None  # process_broker_heartbeat always answers
            state["in_controlled_shutdown"] = reply["in_controlled_shutdown"]
            self._reschedule_maybe_fence_stale_brokers()
            return ControllerResult(
                result.records,
                {k: reply[k] for k in ("error_code", "is_caught_up", "is_fenced", "should_shut_down")},
            )

        def on_batch_end_offset(offset: int) -> None:
            hbm = self.managers.cluster.heartbeat_manager
            if state["in_controlled_shutdown"] and hbm is not None:
                hbm.maybe_update_controlled_shutdown_offset(broker_id, offset)

        return self._write("processBrokerHeartbeat", op, on_batch_end_offset)

    def unregister_broker(self, broker_id: int) -> Future:
        """UnregisterBroker -> ``{error_code, error_message}``: BROKER_ID_NOT_REGISTERED for an unknown
        broker; else the broker leaves every ISR (its leaderships move) and is unregistered."""
        return self._write("unregisterBroker", lambda: self.managers.replication.unregister_broker(int(broker_id)))

    @property
    def fenced_broker_count(self) -> int:
        """Registered fenced brokers (Kafka's FencedBrokerCount); a racy read from any thread."""
        return self.managers.cluster.fenced_broker_count()

    @property
    def active_broker_count(self) -> int:
        """Registered unfenced brokers (Kafka's ActiveBrokerCount); a racy read from any thread."""
        return self.managers.cluster.active_broker_count()

    def find_topic_ids(self, names: list[str]) -> Future:
        """Read: ``{name: topic id or None}`` as of the committed state."""

        def op() -> ControllerResult[dict[str, uuid.UUID | None]]:
            by_name = self.managers.replication.topics_by_name
            return ControllerResult([], {n: by_name.get(n) for n in names})

        return self._read("findTopicIds", op)

    def find_topic_names(self, ids: list) -> Future:
        """Read: ``{topic id: name or None}`` as of the committed state."""

        def op() -> ControllerResult[dict[uuid.UUID, str | None]]:
            topics = self.managers.replication.topics
            return ControllerResult([], {i: (topics[i].name if i in topics and i != ZERO_UUID else None) for i in ids})

        return self._read("findTopicNames", op)

    def describe_configs(self, resource_type: int, resource_name: str) -> Future:
        """Read: the dynamic config overrides of one resource, ``{name: value}``."""
        return self._read(
            "describeConfigs", lambda: ControllerResult([], self.managers.configs.get(resource_type, resource_name))
        )

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop: parked and queued operations fail with NotControllerError."""
        if self._closed:
            return
        self._closed = True
        self._raft.unregister(self._listener)
        self._queue.append(lambda: self._fail_deferred(NotControllerError("The controller is shutting down.")))
        self._queue.close(timeout_s, drain=True)
        self._active_event.clear()

    # ---- broker sessions (event thread) ------------------------------------------------------
    def _reschedule_maybe_fence_stale_brokers(self) -> None:
        """Schedule the stale-broker check for the earliest session expiry, not before the pacing allows
        (Kafka's ``rescheduleMaybeFenceStaleBrokers``), or cancel it when no session can expire."""
        cluster = self.managers.cluster
        hbm = cluster.heartbeat_manager
        deadline = hbm.next_check_time_ms() if hbm is not None and cluster.sessions_enforced else None
        if deadline is None:
            self._queue.cancel_deferred(MAYBE_FENCE_REPLICAS)
        else:
            self._schedule_maybe_fence(max(deadline, self._next_fence_ms))

    def _schedule_maybe_fence(self, deadline_ms: int) -> None:
        def run() -> None:
            if self._active_epoch < 0:
                return
            result = self.managers.replication.maybe_fence_one_stale_broker(self._heartbeat_tracker.last_received_ms)
            if result.response:
                self._next_fence_ms = self.time.hi_res_milliseconds() + self.fence_interval_ms
            self._reschedule_maybe_fence_stale_brokers()
            if result.records:
                self._append(result.records, None, None)

        def on_error(e: BaseException) -> None:
            if isinstance(e, (EventQueueClosedError, NotControllerError)):
                return
            self._log.error("Unexpected error in the stale broker check; retrying later", error=repr(e))
            self._schedule_maybe_fence(deadline_ms + DEFERRED_RETRY_MS)

        self._queue.schedule_deferred(MAYBE_FENCE_REPLICAS, deadline_ms, run, on_error)

    def _on_stall(self, stalled_ms: int) -> None:
        """The event thread did not run for ``stalled_ms`` (ms): heartbeats could not be processed
        meanwhile, so the time does not count against any broker's session (event thread)."""
        hbm = self.managers.cluster.heartbeat_manager
        if self._active_epoch < 0 or hbm is None or not self.managers.cluster.sessions_enforced:
            return
        self._log.warning(
            f"The controller did not run for {stalled_ms} ms; broker sessions are extended by that time "
            f"instead of expiring"
            + (" (reset: it is at least the session timeout)" if stalled_ms >= hbm.session_timeout_ms else "")
        )
        hbm.credit_stall(stalled_ms)
        self._reschedule_maybe_fence_stale_brokers()

    def _schedule_leader_rebalance(self) -> None:
        """Kafka's ``maybeScheduleNextBalancePartitionLeaders``: every leader imbalance check interval,
        preferred-leader elections for partitions whose preferred replica can lead again."""
        interval = self.leader_imbalance_check_interval_ms
        if interval is None:
            return

        def run() -> None:
            if self._active_epoch < 0:
                return
            result = balance_partition_leaders(self.managers.replication)
            if result.records:
                self._log.info(f"Moving leadership back to the preferred replica of {len(result.records)} partition(s)")
                self._append(result.records, None, None)
            self._schedule_leader_rebalance()

        def on_error(e: BaseException) -> None:
            if not isinstance(e, (EventQueueClosedError, NotControllerError)):
                self._log.error("Unexpected error in the partition leader rebalance", error=repr(e))
                self._schedule_leader_rebalance()

        # The event queue's deadlines are on the monotonic clock (hi_res_milliseconds), never the wall clock.
        deadline = self.time.hi_res_milliseconds() + interval
        self._queue.schedule_deferred(MAYBE_BALANCE_PARTITION_LEADERS, deadline, run, on_error)

    def _schedule_token_sweep(self) -> None:
        """Kafka's ``maybeScheduleNextExpiredDelegationTokenSweep``: with delegation tokens enabled, every
        ``delegation.token.expiry.check.interval.ms`` the expired tokens are removed."""
        tokens = self.managers.delegation_tokens
        if not tokens.enabled:
            return

        def run() -> None:
            if self._active_epoch < 0:
                return
            records = self.managers.delegation_tokens.sweep_expired()
            if records:
                self._log.info(f"Removing {len(records)} expired delegation token(s)")
                self._append(records, None, None)
            self._schedule_token_sweep()

        def on_error(e: BaseException) -> None:
            if not isinstance(e, (EventQueueClosedError, NotControllerError)):
                self._log.error("Unexpected error in the expired delegation token sweep", error=repr(e))
                self._schedule_token_sweep()

        deadline = self.time.hi_res_milliseconds() + tokens.settings.expiry_check_interval_ms
        self._queue.schedule_deferred(SWEEP_EXPIRED_DELEGATION_TOKENS, deadline, run, on_error)

    def _next_write_offset(self) -> int:
        """The offset the next appended record will get (Kafka's ``OffsetControlManager.nextWriteOffset``)."""
        return max(self._raft.log_end_offset(), self._last_reserved_offset + 1)

    # ---- event plumbing ----------------------------------------------------------------------
    def _write(
        self,
        name: str,
        op: Callable[[], ControllerResult],
        on_batch_end_offset: Callable[[int], None] | None = None,
    ) -> Future:
        future: Future = Future()

        def run() -> None:
            if self._active_epoch < 0:
                leader = self._raft.leader_and_epoch.leader_id
                raise NotControllerError(f"The active controller appears to be node {leader}.")
            result = op()
            if not result.records:
                self._complete_after_pending(future, result.response)
                return
            offset = self._append(result.records, future, result.response)
            if on_batch_end_offset is not None:
                on_batch_end_offset(offset)

        self._queue.append(run, on_error=lambda e: self._fail(name, future, e))
        return future

    def _read(self, name: str, op: Callable[[], ControllerResult]) -> Future:
        future: Future = Future()
        self._queue.append(
            lambda: self._complete_after_pending(future, op().response), on_error=lambda e: self._fail(name, future, e)
        )
        return future

    def _append(self, records: list[ApiMessageAndVersion], future: Future | None, response: Any) -> int:
        """Reserve, replay and schedule ``records`` as one batch; returns the batch's last offset."""
        try:
            offset = self._raft.prepare_append(self._active_epoch, records)
        except NotLeaderError as e:
            self._renounce(f"append failed: {e}")
            raise NotControllerError(str(e)) from e
        self._last_reserved_offset = offset
        try:
            base = offset - len(records) + 1
            for i, record in enumerate(records):
                self.managers.replay(record, base + i)
        except Exception:
            self._renounce("replay of a generated record failed")
            raise
        self._raft.schedule_prepared_append()
        self._deferred.append((offset, future, response))
        return offset

    def _complete_after_pending(self, future: Future, response: Any) -> None:
        if self._deferred:
            self._deferred.append((self._deferred[-1][0], future, response))
        else:
            set_result_if_pending(future, response)

    def _complete_up_to(self, offset: int) -> None:
        while self._deferred and self._deferred[0][0] <= offset:
            _, future, response = self._deferred.popleft()
            if future is not None:
                set_result_if_pending(future, response)

    def _fail_deferred(self, error: BaseException) -> None:
        while self._deferred:
            _, future, _ = self._deferred.popleft()
            if future is not None:
                set_exception_if_pending(future, error)

    def _fail(self, name: str, future: Future, error: BaseException) -> None:
        if isinstance(error, EventQueueClosedError):
            error = NotControllerError("The controller is shutting down.")
        elif not isinstance(error, NotControllerError):
            self._log.warning("Operation failed", operation=name, error=repr(error))
        set_exception_if_pending(future, error)

    # ---- Raft callbacks (event thread) -------------------------------------------------------
    def _handle_commit(self, generation: int, batch: Batch[ApiMessageAndVersion]) -> None:
        if generation != self._generation:
            return
        if self._active_epoch >= 0:
            self._complete_up_to(batch.last_offset)  # our own records, replayed when written
        else:
            for i, record in enumerate(batch.records):
                self.managers.replay(record, batch.base_offset + i)
        self._last_committed_offset = batch.last_offset

    def _handle_load_snapshot(self, generation: int, reader: RecordsSnapshotReader[ApiMessageAndVersion]) -> None:
        """Kafka's ``QuorumMetaLogListener.handleLoadSnapshot``: a standby controller's state becomes the
        snapshot's. The active controller never gets one (its listener is ahead of every snapshot)."""
        if generation != self._generation:
            return
        if self._active_epoch >= 0:
            raise RuntimeError(f"Active controller asked to load snapshot {reader.snapshot_id}")
        self._log.info("Loading snapshot", snapshot_id=tuple(reader.snapshot_id))
        managers = _ControlManagers(*self._manager_args)
        for batch in reader:
            for record in batch.records:
                managers.replay(record)
        self.managers = managers
        self._last_committed_offset = reader.last_contained_log_offset

    def _handle_leader_change(self, generation: int, leader: LeaderAndEpoch) -> None:
        if generation != self._generation:
            return
        if leader.is_leader(self.node_id):
            if self._active_epoch == leader.epoch:
                return
            self._active_epoch = leader.epoch
            self._log.info(
                "Becoming the active controller", epoch=leader.epoch, committed_offset=self._last_committed_offset
            )
            self._last_reserved_offset = -1
            self.managers.cluster.activate()
            bootstrap = self._bootstrap_records()
            if bootstrap:
                self._append(bootstrap, None, None)
            self._reschedule_maybe_fence_stale_brokers()
            self._schedule_leader_rebalance()
            self._schedule_token_sweep()
            self._active_event.set()
        elif self._active_epoch >= 0:
            self._renounce(f"new leader {leader}")

    def _bootstrap_records(self) -> list[ApiMessageAndVersion]:
        """What an empty log starts with (none once ``metadata.version`` is finalized): ``bootstrap_records``
        as they are when they finalize ``metadata.version`` (Kafka's bootstrap checkpoint), else the levels of
        ``bootstrap_metadata_version`` / ``bootstrap_features`` before them."""
        features = self.managers.features
        if features.metadata_version is not None:
            return []
        records = list(self.bootstrap_records)
        if any(r.name == FEATURE_LEVEL_RECORD and r.data["name"] == METADATA_VERSION for r in records):
            return records
        levels = self.bootstrap_features
        if levels is None:
            levels = bootstrap_levels(self.bootstrap_metadata_version)
        return features.bootstrap_records(self.bootstrap_metadata_version, levels) + records

    def _renounce(self, reason: str) -> None:
        """Give up being active: fail parked operations, forget uncommitted state, replay the log."""
        self._log.warning("Renouncing the leadership", reason=reason, epoch=self._active_epoch)
        self._active_epoch = -1
        self._active_event.clear()
        self._queue.cancel_deferred(MAYBE_FENCE_REPLICAS)
        self._queue.cancel_deferred(MAYBE_BALANCE_PARTITION_LEADERS)
        self._queue.cancel_deferred(SWEEP_EXPIRED_DELEGATION_TOKENS)
        self._fail_deferred(NotControllerError(f"The controller renounced leadership: {reason}"))
        self.managers = _ControlManagers(*self._manager_args)
        self._last_committed_offset = -1
        self._raft.unregister(self._listener)
        self._generation += 1
        self._listener = _Listener(self, self._generation)
        self._raft.register(self._listener)


def _heartbeat_error(e: KafkaError) -> dict:
    """A BrokerHeartbeat response for an error, the other fields at Kafka's defaults."""
    return {"error_code": e.code, "is_caught_up": False, "is_fenced": True, "should_shut_down": False}
