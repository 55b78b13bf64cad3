"""FeatureControlManager: finalized feature levels, ``metadata.version`` first (Kafka's ``FeatureControlManager``
and ``QuorumFeatures``).

The first active controller of an empty log writes the bootstrap ``FeatureLevelRecord``\\ s (from
``bootstrap.checkpoint``, as ``kafka-storage format`` writes them; see :meth:`bootstrap_records`). A level of 0
removes a feature. ``kraft.version`` is never finalized by a FeatureLevelRecord (Kafka keeps it in the Raft log:
``kraft_version()`` reads the latest KRaftVersionRecord, 1 in a dynamic quorum, 0 in a static one), so such records
are skipped on replay (KAFKA-18979). Upgrading a static quorum's ``kraft.version`` to 1 is refused with the error
Kafka 4.1's ``LeaderState.maybeAppendUpgradedKRaftVersion`` gives while not every voter has reported its directory
id and supported range by UpdateRaftVoter (pykbroker's voters do not at level 0): INVALID_UPDATE_VERSION ``Invalid
upgrade of kraft.version to 1 because not all of the voters support it``.

UpdateFeatures (KIP-584/KIP-778, :meth:`update_features`) is all or nothing: the first update that fails fails
the request with INVALID_UPDATE_VERSION and Kafka's message, else every update becomes one FeatureLevelRecord of
one atomic batch (none with ``validate_only``). An update is refused when the level is outside the range this
controller supports (:data:`pykbroker.metadata.features.SUPPORTED_FEATURES`) or that of some registered broker
(KIP-919's check; pykbroker has no ControllerRegistration, so the other controllers of a quorum are taken to run
the same software, as Kafka assumes below ``metadata.version`` 3.7-IV0), when a downgrade does not say so (upgrade
type SAFE_DOWNGRADE 2 or UNSAFE_DOWNGRADE 3; UPGRADE is 1), when a feature's dependencies
(``Feature.validateVersion``) are not met, and for ``metadata.version`` when a downgrade crosses a level whose
metadata changed (unsafe downgrades are not supported, as in Kafka 4.0).

Not thread-safe: used on the controller's event thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from pykbroker.metadata import features as fv
from pykbroker.metadata.controller_result import ControllerResult
from pykbroker.metadata.features import (
    IBP_3_9_IV0,
    IBP_4_0_IV0,
    LATEST_PRODUCTION,
    LEGACY_BOOTSTRAP_METADATA_VERSION,
    METADATA_VERSION,
    MINIMUM_VERSION,
)
from pykbroker.metadata.records import FEATURE_LEVEL_RECORD, ApiMessageAndVersion, feature_level_record
from pykbroker.protocol import errors
from pykbroker.utils.logging import get_logger

__all__ = [
    "IBP_3_9_IV0",
    "IBP_4_0_IV0",
    "LATEST_PRODUCTION_METADATA_VERSION",
    "LEGACY_BOOTSTRAP_METADATA_VERSION",
    "METADATA_VERSION",
    "FeatureControlManager",
]

LATEST_PRODUCTION_METADATA_VERSION = LATEST_PRODUCTION

#: FeatureUpdate.UpgradeType codes (UpdateFeatures v1+ ``upgrade_type``)
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
#: the prefix of UpdateFeatures' top-level error message (Kafka's QuorumController.updateFeatures)
FAILED_FOR_ALL = "The update failed for all features since the following feature had an error: "


def _range_string(lo: int, hi: int) -> str:
    """Kafka's ``VersionRange.toString``."""
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _reason_not_supported(level: int, what: str, supported: tuple[int, int]) -> str | None:
    """Kafka's ``QuorumFeatures.reasonNotSupported``."""
    lo, hi = supported
    if lo <= level <= hi:
        return None
    if hi == 0:
        return f"{what} does not support this feature."
    return f"{what} only supports versions {_range_string(lo, hi)}"


def feature_level_bootstrap_records(metadata_version: int, levels: Mapping[str, int]) -> list[ApiMessageAndVersion]:
    """The FeatureLevelRecords a new cluster starts with (Kafka's ``BootstrapMetadata.fromVersions``):
    ``metadata.version`` first, then every other feature at a non-zero level, by name (``kraft.version`` is
    never one)."""
    records = [feature_level_record(METADATA_VERSION, metadata_version)]
    for name, level in sorted(levels.items()):
        if name not in (METADATA_VERSION, fv.KRAFT_VERSION) and level > 0:
            records.append(feature_level_record(name, level))
    return records


class FeatureControlManager:
    """``node_id``: this controller (named in refusals). ``brokers_supported()``: ``(broker id, {feature: (min,
    max)})`` of every registered broker (Kafka's ``ClusterFeatureSupportDescriber``)."""

    def __init__(
        self,
        node_id: int = -1,
        brokers_supported: Callable[[], Iterable[tuple[int, Mapping[str, tuple[int, int]]]]] = lambda: (),
        kraft_version: Callable[[], int] = lambda: 0,
    ) -> None:
        self.node_id = node_id
        self.brokers_supported = brokers_supported
        self.kraft_version = kraft_version
        self.finalized: dict[str, int] = {}
        self._log = get_logger("FeatureControlManager", id=node_id)

    @property
    def metadata_version(self) -> int | None:
        return self.finalized.get(METADATA_VERSION)

    def bootstrap_records(
        self, metadata_version: int = LATEST_PRODUCTION, other_features: Mapping[str, int] | None = None
    ) -> list[ApiMessageAndVersion]:
        """Records to write when the log has no ``metadata.version`` yet (else none); see
        :func:`feature_level_bootstrap_records`."""
        if self.metadata_version is not None:
            return []
        return feature_level_bootstrap_records(metadata_version, other_features or {})

    # -- UpdateFeatures --------------------------------------------------------------------------------------
    def update_features(
        self, updates: Mapping[str, int], upgrade_types: Mapping[str, int], validate_only: bool
    ) -> ControllerResult[dict]:
        """``updates``: feature -> new level; ``upgrade_types``: feature -> upgrade type (default UPGRADE).
        Response ``{error_code, error_message}``: NONE, or INVALID_UPDATE_VERSION with Kafka's message prefixed
        by "The update failed for all features since the following feature had an error: "."""
        current_mv = self.metadata_version
        if current_mv is None:
            return ControllerResult([], {"error_code": errors.NOT_CONTROLLER, "error_message": None})
        proposed = dict(self.finalized)
        proposed.update(updates)
        records: list[ApiMessageAndVersion] = []
        for name, level in updates.items():
            error = self._update_feature(name, level, upgrade_types.get(name, UPGRADE), proposed, records)
            if error is not None:
                self._log.warning(error)
                return ControllerResult(
                    [], {"error_code": errors.INVALID_UPDATE_VERSION, "error_message": FAILED_FOR_ALL + error}
                )
        return ControllerResult([] if validate_only else records, {"error_code": errors.NONE, "error_message": None})

    def _update_feature(
        self, name: str, level: int, upgrade_type: int, proposed: Mapping[str, int], records: list
    ) -> str | None:
        def invalid(message: str) -> str:
            return f"Invalid update version {level} for feature {name}. {message}"

        if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            return invalid("The controller does not support the given upgrade type.")
        current = self.kraft_version() if name == fv.KRAFT_VERSION else self.finalized.get(name, 0)
        if level < 0:
            return invalid("A feature version cannot be less than 0.")
        reason = self._reason_not_supported(name, level)
        if reason is not None:
            return invalid(reason)
        if level < current and upgrade_type == UPGRADE:
            return invalid(
                "Can't downgrade the version of this feature without setting the upgrade type to either safe or "
                "unsafe downgrade."
            )
        if level > current and upgrade_type != UPGRADE:
            return invalid("Can't downgrade to a newer version.")
        if name == METADATA_VERSION:
            return self._update_metadata_version(current, level, upgrade_type == UNSAFE_DOWNGRADE, records)
        if name == fv.KRAFT_VERSION:
            if level > current:  # a static quorum: its voters never reported a directory id and supported range
                return f"Invalid upgrade of {name} to {level} because not all of the voters support it"
            return None if level == current else invalid("Can't downgrade the version of this feature.")
        try:
            fv.validate_version(name, level, proposed)
        except ValueError as e:
            return invalid(str(e))
        records.append(feature_level_record(name, level))
        return None

    def _reason_not_supported(self, name: str, level: int) -> str | None:
        reason = _reason_not_supported(level, f"Local controller {self.node_id}", fv.supported_range(name))
        if reason is not None:
            return reason
        checked = 0
        for broker_id, supported in self.brokers_supported():
            reason = _reason_not_supported(level, f"Broker {broker_id}", supported.get(name, (0, 0)))
            if reason is not None:
                return reason
            checked += 1
        self._log.info(
            f"Verified that {checked} broker(s) and 1 controller(s) supported changing {name} to feature level "
            f"{level}. Note: unable to verify controller support in the current MetadataVersion."
        )
        return None

    def _update_metadata_version(self, current: int, level: int, unsafe: bool, records: list) -> str | None:
        def invalid(message: str) -> str:
            return f"Invalid metadata.version {level}. {message}"

        try:
            fv.metadata_version(level)
        except ValueError:
            return invalid(f"Valid versions are from {MINIMUM_VERSION} to {LATEST_PRODUCTION}.")
        if level < current:
            if not fv.did_metadata_change(current, level):
                self._log.warning(f"Downgrading metadata.version from {current} to {level}.")
            elif unsafe:
                return invalid("Unsafe metadata downgrade is not supported in this version.")
            else:
                return invalid(
                    "Refusing to perform the requested downgrade because it might delete metadata information."
                )
        else:
            self._log.warning(f"Upgrading metadata.version from {current} to {level}.")
        records.append(feature_level_record(METADATA_VERSION, level))
        return None

    def replay(self, record: ApiMessageAndVersion) -> None:
        if record.name != FEATURE_LEVEL_RECORD:
            return
        name, level = record.data["name"], record.data["feature_level"]
        if name == fv.KRAFT_VERSION:
            return  # KAFKA-18979: kraft.version is the Raft log's, never a FeatureLevelRecord's
        if level == 0:
            self.finalized.pop(name, None)
        else:
            self.finalized[name] = level
