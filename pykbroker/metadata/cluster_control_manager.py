"""ClusterControlManager: broker registrations as the controller sees them (Kafka's
``ClusterControlManager``).

``register_broker`` validates a BrokerRegistration request and produces a ``RegisterBrokerRecord``. A new
incarnation gets a new broker epoch (the offset the record will be written at); re-registering the same
incarnation amends the registration and keeps its epoch, fencing and controlled-shutdown state. A
different incarnation of a broker whose session is still valid is refused with
DUPLICATE_BROKER_REGISTRATION.

Fencing (Kafka's design): brokers register fenced and are unfenced by a heartbeat once they have caught
up with their RegisterBrokerRecord (see ``ReplicationControlManager.process_broker_heartbeat``). With
``unfence_on_register`` (the default, for a combined node with no heartbeat sender) brokers register
unfenced and sessions are not enforced: no DUPLICATE_BROKER_REGISTRATION, and the controller does not
fence brokers whose session expired.

Only the active controller tracks sessions: :meth:`activate` builds a
:class:`~pykbroker.metadata.broker_heartbeat_manager.BrokerHeartbeatManager` (``heartbeat_manager``) and
treats every registered broker as having just heartbeated; replayed registration records keep it current.

Not thread-safe: used on the controller's event thread.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pykbroker.metadata import directory_id
from pykbroker.metadata.broker_heartbeat_manager import BrokerHeartbeatManager
from pykbroker.metadata.controller_result import ControllerResult, api_error
from pykbroker.metadata.features import IBP_3_3_IV3, METADATA_VERSION, MINIMUM_VERSION, register_broker_record_version
from pykbroker.metadata.records import (
    BROKER_REGISTRATION_CHANGE_RECORD,
    FENCE_BROKER_RECORD,
    REGISTER_BROKER_RECORD,
    UNFENCE_BROKER_RECORD,
    UNREGISTER_BROKER_RECORD,
    ApiMessageAndVersion,
)
from pykbroker.metadata.replica_placer import UsableBroker
from pykbroker.protocol import errors
from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import SYSTEM, Time

#: metadata.version levels (Kafka's MetadataVersion IBP_3_3_IV2 / IBP_3_3_IV3)
BROKER_REGISTRATION_CHANGE_RECORD_MIN_MV = 6
IN_CONTROLLED_SHUTDOWN_MIN_MV = IBP_3_3_IV3

#: Kafka's broker.session.timeout.ms default
DEFAULT_SESSION_TIMEOUT_MS = 9000


@dataclass
class BrokerRegistrationInfo:
    id: int
    epoch: int
    incarnation_id: uuid.UUID
    listeners: list[dict] = field(default_factory=list)
    features: list[dict] = field(default_factory=list)
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    log_dirs: list[uuid.UUID] = field(default_factory=list)


class ClusterControlManager:
    def __init__(
        self,
        cluster_id: str,
        unfence_on_register: bool = True,
        time: Time = SYSTEM,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        metadata_version: Callable[[], int | None] = lambda: None,
        finalized_features: Callable[[], Mapping[str, int]] = lambda: {},
    ):
        """``finalized_features()``: the finalized levels a registering broker must support (KIP-584)."""
        self.cluster_id = cluster_id
        self.finalized_features = finalized_features
        self.unfence_on_register = unfence_on_register
        self.time = time
        self.session_timeout_ms = session_timeout_ms
        self.metadata_version = metadata_version
        self.brokers: dict[int, BrokerRegistrationInfo] = {}
        #: broker id -> offset of its latest RegisterBrokerRecord (Kafka's registerBrokerRecordOffsets)
        self.register_broker_record_offsets: dict[int, int] = {}
        self.heartbeat_manager: BrokerHeartbeatManager | None = None
        self._log = get_logger("ClusterControlManager")

    # ---- activation --------------------------------------------------------------------------
    def activate(self) -> None:
        """Become active: track a session for every registered broker, as if each just heartbeated."""
        self.heartbeat_manager = BrokerHeartbeatManager(self.time, self.session_timeout_ms)
        for b in self.brokers.values():
            self.heartbeat_manager.register(b.id, b.fenced)

    def deactivate(self) -> None:
        self.heartbeat_manager = None

    @property
    def sessions_enforced(self) -> bool:
        """Whether expired sessions are fenced and live sessions block other incarnations."""
        return not self.unfence_on_register and self.heartbeat_manager is not None

    # ---- operations --------------------------------------------------------------------------
    def register_broker(self, request: dict[str, Any], broker_epoch: int) -> ControllerResult[dict]:
        """``request``: BrokerRegistrationRequest fields (``broker_id``, ``cluster_id``,
        ``incarnation_id``, ``listeners`` [{name, host, port, security_protocol}], ``features``
        [{name, min_supported_version, max_supported_version}], ``rack``, ``log_dirs``). Response:
        ``{error_code, error_message, broker_epoch}``. A broker whose ranges miss a finalized level is refused
        with UNSUPPORTED_VERSION (Kafka's ``processRegistrationFeature``; one that names no ``metadata.version``
        range is taken to support only the minimum, 3.3-IV3)."""
        broker_id = int(request["broker_id"])
        cluster_id = request.get("cluster_id")
        if cluster_id is not None and cluster_id != self.cluster_id:
            return ControllerResult(
                [],
                {
                    **api_error(
                        errors.INCONSISTENT_CLUSTER_ID,
                        f"Expected cluster ID {self.cluster_id}, but got cluster ID {cluster_id}",
                    ),
                    "broker_epoch": -1,
                },
            )
        if broker_id < 0:
            return ControllerResult(
                [], {**api_error(errors.INVALID_REQUEST, f"Invalid broker id {broker_id}"), "broker_epoch": -1}
            )
        incarnation = request.get("incarnation_id") or uuid.uuid4()
        existing = self.brokers.get(broker_id)
        if (
            existing is not None
            and existing.incarnation_id != incarnation
            and self.sessions_enforced
            and self.heartbeat_manager is not None
            and self.heartbeat_manager.has_valid_session(broker_id)
        ):
            return ControllerResult(
                [],
                {
                    **api_error(
                        errors.DUPLICATE_BROKER_REGISTRATION, "Another broker is registered with that broker id."
                    ),
                    "broker_epoch": -1,
                },
            )
        endpoints = [
            {
                "name": listener["name"],
                "host": listener["host"],
                "port": int(listener["port"]),
                "security_protocol": int(listener.get("security_protocol", 0)),
            }
            for listener in request.get("listeners", [])
        ]
        features = [
            {
                "name": f["name"],
                "min_supported_version": int(f["min_supported_version"]),
                "max_supported_version": int(f["max_supported_version"]),
            }
            for f in request.get("features", [])
        ]
        refusal = self._unsupported_finalized_feature(broker_id, features)
        if refusal is not None:
            return ControllerResult([], {**api_error(errors.UNSUPPORTED_VERSION, refusal), "broker_epoch": -1})
        record = ApiMessageAndVersion(
            REGISTER_BROKER_RECORD,
            register_broker_record_version(self.metadata_version()),
            {
                "broker_id": broker_id,
                "is_migrating_zk_broker": False,
                "incarnation_id": incarnation,
                "broker_epoch": broker_epoch,
                "end_points": endpoints,
                "features": features,
                "rack": request.get("rack"),
                "fenced": not self.unfence_on_register,
                "in_controlled_shutdown": False,
                "log_dirs": list(request.get("log_dirs", [])),
            },
        )
        if existing is not None and existing.incarnation_id == incarnation:
            self._log.info("Amending registration", broker=broker_id, epoch=existing.epoch)
            record.data.update(
                broker_epoch=existing.epoch,
                fenced=existing.fenced,
                in_controlled_shutdown=existing.in_controlled_shutdown,
            )
        else:
            self._log.info("Registering a new incarnation", broker=broker_id, epoch=broker_epoch)
        return ControllerResult([record], {**api_error(errors.NONE), "broker_epoch": record.data["broker_epoch"]})

    def _unsupported_finalized_feature(self, broker_id: int, features: list[dict]) -> str | None:
        """Kafka's ``processRegistrationFeature`` over every finalized feature: the refusal message for the
        first finalized level outside the broker's range (a feature it does not name: range 0-0), else None."""
        finalized = self.finalized_features()
        ranges = {f["name"]: (f["min_supported_version"], f["max_supported_version"]) for f in features}
        if METADATA_VERSION not in ranges:
            ranges[METADATA_VERSION] = (MINIMUM_VERSION, MINIMUM_VERSION)
        for name, (lo, hi) in ranges.items():
            level = finalized.get(name, 0)
            if name == METADATA_VERSION and name not in finalized:
                continue  # not bootstrapped yet
            if not lo <= level <= hi:
                return self._refusal(broker_id, name, level, lo, hi)
        for name, level in finalized.items():
            if level != 0 and name not in ranges:
                return self._refusal(broker_id, name, level, 0, 0)
        return None

    def _refusal(self, broker_id: int, name: str, level: int, lo: int, hi: int) -> str:
        self._log.info("Refusing a registration", broker=broker_id, feature=name, finalized=level)
        return (
            f"Unable to register because the broker does not support finalized version {level} of {name}. "
            f"The broker wants a version between {lo} and {hi}, inclusive."
        )

    def fence_record(self, broker_id: int) -> ApiMessageAndVersion:
        """Fence ``broker_id``: a BrokerRegistrationChangeRecord (metadata.version 3.3-IV2+) or a
        FenceBrokerRecord."""
        return self._fencing_record(broker_id, fence=True)

    def unfence_record(self, broker_id: int) -> ApiMessageAndVersion:
        """Unfence ``broker_id``: a BrokerRegistrationChangeRecord (metadata.version 3.3-IV2+) or an
        UnfenceBrokerRecord."""
        return self._fencing_record(broker_id, fence=False)

    def _fencing_record(self, broker_id: int, fence: bool) -> ApiMessageAndVersion:
        epoch = self.brokers[broker_id].epoch
        mv = self.metadata_version()
        if mv is None or mv >= BROKER_REGISTRATION_CHANGE_RECORD_MIN_MV:
            return ApiMessageAndVersion(
                BROKER_REGISTRATION_CHANGE_RECORD,
                0,
                {"broker_id": broker_id, "broker_epoch": epoch, "fenced": 1 if fence else -1},
            )
        name = FENCE_BROKER_RECORD if fence else UNFENCE_BROKER_RECORD
        return ApiMessageAndVersion(name, 0, {"id": broker_id, "epoch": epoch})

    def in_controlled_shutdown_record(self, broker_id: int) -> ApiMessageAndVersion | None:
        """The BrokerRegistrationChangeRecord putting ``broker_id`` in controlled shutdown; None if it
        already is, or metadata.version (before 3.3-IV3) has no such state."""
        mv = self.metadata_version()
        b = self.brokers[broker_id]
        if b.in_controlled_shutdown or (mv is not None and mv < IN_CONTROLLED_SHUTDOWN_MIN_MV):
            return None
        return ApiMessageAndVersion(
            BROKER_REGISTRATION_CHANGE_RECORD,
            1,
            {"broker_id": broker_id, "broker_epoch": b.epoch, "fenced": 0, "in_controlled_shutdown": 1},
        )

    def log_dirs_record(self, broker_id: int, online_dirs: list[uuid.UUID]) -> ApiMessageAndVersion:
        """The BrokerRegistrationChangeRecord (v2) leaving ``broker_id`` with ``online_dirs`` (KIP-858)."""
        return ApiMessageAndVersion(
            BROKER_REGISTRATION_CHANGE_RECORD,
            2,
            {
                "broker_id": broker_id,
                "broker_epoch": self.brokers[broker_id].epoch,
                "fenced": 0,
                "in_controlled_shutdown": 0,
                "log_dirs": list(online_dirs),
            },
        )

    def unregister_record(self, broker_id: int) -> ApiMessageAndVersion:
        return ApiMessageAndVersion(
            UNREGISTER_BROKER_RECORD, 0, {"broker_id": broker_id, "broker_epoch": self.brokers[broker_id].epoch}
        )

    def check_broker_epoch(self, broker_id: int, broker_epoch: int) -> None:
        """Raise StaleBrokerEpochError unless ``broker_id`` is registered with ``broker_epoch``
        (``-1`` skips the epoch comparison)."""
        reg = self.brokers.get(broker_id)
        if reg is None:
            raise errors.for_code(errors.BROKER_ID_NOT_REGISTERED)(f"Broker {broker_id} is not registered.")
        if broker_epoch != -1 and reg.epoch != broker_epoch:
            raise errors.for_code(errors.STALE_BROKER_EPOCH)(
                f"Expected broker epoch {reg.epoch}, but got broker epoch {broker_epoch}"
            )

    # ---- queries -----------------------------------------------------------------------------
    def usable_brokers(self) -> list[UsableBroker]:
        return [UsableBroker(b.id, b.rack, b.fenced) for b in self.brokers.values() if not b.in_controlled_shutdown]

    def is_active(self, broker_id: int) -> bool:
        b = self.brokers.get(broker_id)
        return b is not None and not b.fenced and not b.in_controlled_shutdown

    def has_online_dir(self, broker_id: int, directory: uuid.UUID) -> bool:
        """Kafka's ``ClusterControlManager.hasOnlineDir``: ``directory`` is online in ``broker_id`` (False for an
        unregistered broker; see :func:`~pykbroker.metadata.directory_id.is_online`)."""
        b = self.brokers.get(broker_id)
        return b is not None and directory_id.is_online(directory, b.log_dirs)

    def default_dir(self, broker_id: int) -> uuid.UUID:
        """Kafka's ``defaultDir``: the directory of a new replica on ``broker_id``: its only log dir; UNASSIGNED
        with several (the broker reports where it put the log, AssignReplicasToDirs) or unregistered; MIGRATING
        when it registered no directories."""
        b = self.brokers.get(broker_id)
        if b is None:
            return directory_id.UNASSIGNED
        if not b.log_dirs:
            return directory_id.MIGRATING
        return b.log_dirs[0] if len(b.log_dirs) == 1 else directory_id.UNASSIGNED

    def is_registered(self, broker_id: int) -> bool:
        return broker_id in self.brokers

    def fenced_broker_count(self) -> int:
        return sum(1 for b in self.brokers.values() if b.fenced)

    def active_broker_count(self) -> int:
        """Registered brokers not fenced (Kafka's ActiveBrokerCount)."""
        return sum(1 for b in self.brokers.values() if not b.fenced)

    # ---- replay ------------------------------------------------------------------------------
    def replay(self, record: ApiMessageAndVersion, offset: int = -1) -> None:
        """Apply a committed (or just written) record; ``offset`` is its log offset when known (a
        RegisterBrokerRecord's offset is what a heartbeat must catch up with; unknown, its broker epoch
        stands in)."""
        d = record.data
        hbm = self.heartbeat_manager
        if record.name == REGISTER_BROKER_RECORD:
            broker_id = d["broker_id"]
            self.register_broker_record_offsets[broker_id] = offset if offset >= 0 else d["broker_epoch"]
            previous = self.brokers.get(broker_id)
            self.brokers[broker_id] = BrokerRegistrationInfo(
                d["broker_id"],
                d["broker_epoch"],
                d["incarnation_id"],
                list(d.get("end_points") or []),
                list(d.get("features") or []),
                d.get("rack"),
                bool(d.get("fenced", True)),
                bool(d.get("in_controlled_shutdown", False)),
                list(d.get("log_dirs") or []),
            )
            if hbm is not None:
                if previous is not None:
                    hbm.remove(broker_id)
                hbm.register(broker_id, bool(d.get("fenced", True)))
        elif record.name == UNREGISTER_BROKER_RECORD:
            self.brokers.pop(d["broker_id"], None)
            self.register_broker_record_offsets.pop(d["broker_id"], None)
            if hbm is not None:
                hbm.remove(d["broker_id"])
        elif record.name in (FENCE_BROKER_RECORD, UNFENCE_BROKER_RECORD):
            b = self.brokers.get(d["id"])
            if b is not None:
                b.fenced = record.name == FENCE_BROKER_RECORD
                if hbm is not None:
                    hbm.register(b.id, b.fenced)
        elif record.name == BROKER_REGISTRATION_CHANGE_RECORD:
            b = self.brokers.get(d["broker_id"])
            if b is not None:
                b.fenced, b.in_controlled_shutdown = apply_registration_change(b.fenced, b.in_controlled_shutdown, d)
                if d.get("log_dirs"):  # KIP-858: the directories still online (empty: unchanged)
                    b.log_dirs = list(d["log_dirs"])
                if hbm is not None:
                    hbm.register(b.id, b.fenced)


def apply_registration_change(fenced: bool, in_controlled_shutdown: bool, d: dict) -> tuple[bool, bool]:
    """BrokerRegistrationChangeRecord: ``fenced`` -1 unfence / 0 unchanged / 1 fence;
    ``in_controlled_shutdown`` 1 sets it."""
    change = d.get("fenced", 0)
    if change == 1:
        fenced = True
    elif change == -1:
        fenced = False
    if d.get("in_controlled_shutdown", 0) == 1:
        in_controlled_shutdown = True
    return fenced, in_controlled_shutdown
