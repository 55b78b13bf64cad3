"""ClusterControlManager: broker registrations as the controller sees them (Kafka's
``ClusterControlManager``).

``register_broker`` validates a BrokerRegistration request and produces a ``RegisterBrokerRecord`` whose
broker epoch is the offset the record will be written at. pykbroker has no heartbeat-driven unfencing yet:
with ``unfence_on_register`` (the default) the record says ``fenced=False``, so a single broker is usable
as soon as its registration commits.

Not thread-safe: used on the controller's event thread.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from pykbroker.metadata.controller_result import ControllerResult, api_error
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

REGISTER_BROKER_RECORD_VERSION = 3


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
    def __init__(self, cluster_id: str, unfence_on_register: bool = True):
        self.cluster_id = cluster_id
        self.unfence_on_register = unfence_on_register
        self.brokers: dict[int, BrokerRegistrationInfo] = {}

    # ---- operations --------------------------------------------------------------------------
    def register_broker(self, request: dict[str, Any], broker_epoch: int) -> ControllerResult[dict]:
        """``request``: BrokerRegistrationRequest fields (``broker_id``, ``cluster_id``,
        ``incarnation_id``, ``listeners`` [{name, host, port, security_protocol}], ``features``
        [{name, min_supported_version, max_supported_version}], ``rack``, ``log_dirs``). Response:
        ``{error_code, error_message, broker_epoch}``."""
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
        record = ApiMessageAndVersion(
            REGISTER_BROKER_RECORD,
            REGISTER_BROKER_RECORD_VERSION,
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
        return ControllerResult([record], {**api_error(errors.NONE), "broker_epoch": broker_epoch})

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

    def is_registered(self, broker_id: int) -> bool:
        return broker_id in self.brokers

    # ---- replay ------------------------------------------------------------------------------
    def replay(self, record: ApiMessageAndVersion) -> None:
        d = record.data
        if record.name == REGISTER_BROKER_RECORD:
            self.brokers[d["broker_id"]] = BrokerRegistrationInfo(
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
        elif record.name == UNREGISTER_BROKER_RECORD:
            self.brokers.pop(d["broker_id"], None)
        elif record.name in (FENCE_BROKER_RECORD, UNFENCE_BROKER_RECORD):
            b = self.brokers.get(d["id"])
            if b is not None:
                b.fenced = record.name == FENCE_BROKER_RECORD
        elif record.name == BROKER_REGISTRATION_CHANGE_RECORD:
            b = self.brokers.get(d["broker_id"])
            if b is not None:
                b.fenced, b.in_controlled_shutdown = apply_registration_change(b.fenced, b.in_controlled_shutdown, d)


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
