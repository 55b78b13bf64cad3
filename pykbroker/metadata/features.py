"""Feature versions (KIP-584, KIP-778, KIP-1022): Kafka 4.0's ``MetadataVersion`` and ``Feature`` enums and the
ranges pykbroker supports, in one table.

Two kinds of facts live here, each defined once:

* **Kafka's** (``server-common``'s ``MetadataVersion``, ``Feature``, ``KRaftVersion``, ``TransactionVersion``,
  ``GroupVersion``, ``EligibleLeaderReplicasVersion`` as of Kafka 4.0): every ``metadata.version`` level with its
  release name and whether its metadata changed (``didMetadataChange``: a downgrade across it may lose
  metadata); every feature's versions with the ``metadata.version`` that makes each the default for a release
  (``bootstrapMetadataVersion``) and what each depends on. ``kafka-features version-mapping`` and
  ``feature-dependencies`` print these.
* **pykbroker's**: :data:`SUPPORTED_FEATURES`, the range of each feature this software implements. Brokers
  advertise it (ApiVersions ``supported_features``) and register it (BrokerRegistration ``features``), the
  controller accepts a finalized level only inside it (UpdateFeatures), and a new cluster starts at the
  defaults of :data:`LATEST_PRODUCTION` capped to it (:func:`bootstrap_levels`). Implementing a feature level
  (e.g. ``transaction.version`` 2, KIP-890 part 2) widens its range here and nothing else.

What the supported levels mean in pykbroker: ``metadata.version`` 3.3-IV3 (7) to 4.0-IV3 (25), the records it
writes are chosen by the finalized level (RegisterBrokerRecord's version, SCRAM from 3.5-IV2);
``transaction.version`` 1 makes the transaction coordinator write flexible ``__transaction_state`` values
(TransactionLogValue v1), 2 (epoch bump per transaction, KIP-890 part 2) tells clients they may use Produce v12 /
EndTxn v5 / TxnOffsetCommit v5 (the broker serves them at any level, as Kafka; the client chooses per transaction)
and makes the coordinator's own aborts (fencing, timeouts) bump the epoch; ``group.version`` 1 enables the KIP-848
consumer protocol (ConsumerGroupHeartbeat and ConsumerGroupDescribe answer UNSUPPORTED_VERSION at 0; a new cluster
at 4.0-IV0 or later starts at 1); ``eligible.leader.replicas.version`` 1 (KIP-966, needs 4.0-IV1) makes the
controller keep eligible leader replicas (``partition_change_builder``): a new cluster starts at 0 as in Kafka 4.0
(Kafka 4.1's default is 1, from its 4.1-IV0, a level this table does not have yet), ``kafka-storage format
--feature eligible.leader.replicas.version=1`` or ``kafka-features upgrade`` enables it; ``kraft.version`` is kept in
the Raft log (KRaftVersionRecord: 1 in a dynamic quorum, KIP-853), never finalized here, and advertised 0-1 (1: the
voter set lives in the log, KIP-853; a static quorum is not upgraded to it: its voters never report their directory
ids at level 0, see ``FeatureControlManager``).

Pure data and functions; any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
ELIGIBLE_LEADER_REPLICAS_VERSION = "eligible.leader.replicas.version"


class MetadataVersion(NamedTuple):
    """One ``metadata.version`` (Kafka's ``MetadataVersion`` constant)."""

    level: int
    release: str
    sub_version: str
    did_metadata_change: bool

    @property
    def version(self) -> str:
        """Kafka's ``MetadataVersion.version()``: ``"3.3-IV3"``."""
        return f"{self.release}-{self.sub_version}"


# Kafka 4.0's MetadataVersion, from its MINIMUM_VERSION (3.3-IV3) to its LATEST_PRODUCTION (4.0-IV3).
METADATA_VERSIONS: tuple[MetadataVersion, ...] = (
    MetadataVersion(7, "3.3", "IV3", True),  # InControlledShutdown in broker registrations (KIP-841)
    MetadataVersion(8, "3.4", "IV0", True),  # ZK migration (KIP-866): RegisterBrokerRecord v2
    MetadataVersion(9, "3.5", "IV0", False),  # tiered storage (KIP-405)
    MetadataVersion(10, "3.5", "IV1", False),  # replica epoch in Fetch (KIP-903)
    MetadataVersion(11, "3.5", "IV2", True),  # SCRAM credentials in KRaft
    MetadataVersion(12, "3.6", "IV0", False),  # no leader epoch bump on an ISR shrink (KAFKA-15021)
    MetadataVersion(13, "3.6", "IV1", True),  # metadata transactions
    MetadataVersion(14, "3.6", "IV2", True),  # delegation tokens in KRaft
    MetadataVersion(15, "3.7", "IV0", True),  # controller registration (KIP-919)
    MetadataVersion(16, "3.7", "IV1", False),  # reserved
    MetadataVersion(17, "3.7", "IV2", True),  # JBOD in KRaft: RegisterBrokerRecord v3 (log dirs)
    MetadataVersion(18, "3.7", "IV3", False),  # reserved (ELR moved on)
    MetadataVersion(19, "3.7", "IV4", False),  # Fetch v16 (KIP-951)
    MetadataVersion(20, "3.8", "IV0", False),  # the 3.8 release
    MetadataVersion(21, "3.9", "IV0", False),  # ListOffsets v9 (KIP-1005)
    MetadataVersion(22, "4.0", "IV0", False),  # bootstrap version of group.version 1 (KIP-848)
    MetadataVersion(23, "4.0", "IV1", True),  # ELR (KIP-966)
    MetadataVersion(24, "4.0", "IV2", False),  # bootstrap version of transaction.version 1 and 2 (KIP-890)
    MetadataVersion(25, "4.0", "IV3", False),  # async remote ListOffsets (KIP-1075)
)
_BY_LEVEL: Mapping[int, MetadataVersion] = MappingProxyType({mv.level: mv for mv in METADATA_VERSIONS})

IBP_3_3_IV3 = 7
IBP_3_4_IV0 = 8
IBP_3_5_IV2 = 11
IBP_3_6_IV2 = 14
IBP_3_7_IV2 = 17
IBP_3_9_IV0 = 21
IBP_4_0_IV0 = 22
IBP_4_0_IV1 = 23
IBP_4_0_IV2 = 24
IBP_4_0_IV3 = 25
#: Kafka 4.0's ``MetadataVersion.MINIMUM_VERSION`` (and ``MINIMUM_BOOTSTRAP_VERSION``)
MINIMUM_VERSION = IBP_3_3_IV3
#: Kafka 4.0's ``MetadataVersion.LATEST_PRODUCTION``: what a new cluster starts at
LATEST_PRODUCTION = IBP_4_0_IV3
#: the ``metadata.version`` pykbroker wrote, alone, before it had feature versions: the level a metadata log
#: starts at when its directory was formatted without a ``metadata.version`` bootstrap record
LEGACY_BOOTSTRAP_METADATA_VERSION = IBP_4_0_IV0


class FeatureVersion(NamedTuple):
    """One level of a feature (Kafka's ``FeatureVersion``): the ``metadata.version`` from which it is the
    default (``bootstrapMetadataVersion``) and the features it depends on (name -> minimum level)."""

    level: int
    bootstrap_metadata_version: int
    dependencies: Mapping[str, int]


class Feature(NamedTuple):
    """A feature other than ``metadata.version`` (Kafka's ``Feature`` enum constant)."""

    name: str
    versions: tuple[FeatureVersion, ...]
    latest_production: int


_NONE: Mapping[str, int] = MappingProxyType({})
# Kafka 4.0's Feature.PRODUCTION_FEATURES, in its order. (Kafka's MINIMUM_KRAFT_VERSION for a level-0 version's
# bootstrap metadata.version predates MINIMUM_VERSION: 1.)
FEATURES: tuple[Feature, ...] = (
    Feature(
        KRAFT_VERSION,
        (
            FeatureVersion(0, 1, _NONE),
            FeatureVersion(1, IBP_3_9_IV0, MappingProxyType({METADATA_VERSION: IBP_3_9_IV0})),  # KIP-853
        ),
        1,
    ),
    Feature(
        TRANSACTION_VERSION,
        (
            FeatureVersion(0, 1, _NONE),
            FeatureVersion(1, IBP_4_0_IV2, _NONE),  # flexible transactional state records (KIP-890)
            FeatureVersion(2, IBP_4_0_IV2, _NONE),  # epoch bump per transaction (KIP-890)
        ),
        2,
    ),
    Feature(
        GROUP_VERSION,
        (
            FeatureVersion(0, MINIMUM_VERSION, _NONE),
            FeatureVersion(1, IBP_4_0_IV0, _NONE),  # the consumer rebalance protocol (KIP-848)
        ),
        1,
    ),
    Feature(
        ELIGIBLE_LEADER_REPLICAS_VERSION,
        (
            FeatureVersion(0, 1, _NONE),
            # ELR (KIP-966); the default from 4.1-IV0 (26) on, a release later than this table knows
            FeatureVersion(1, 26, MappingProxyType({METADATA_VERSION: IBP_4_0_IV1})),
        ),
        1,
    ),
)
_FEATURES_BY_NAME: Mapping[str, Feature] = MappingProxyType({f.name: f for f in FEATURES})

#: What pykbroker implements: feature -> (min, max) supported level (see the module docstring).
SUPPORTED_FEATURES: Mapping[str, tuple[int, int]] = MappingProxyType(
    {
        METADATA_VERSION: (MINIMUM_VERSION, IBP_4_0_IV3),
        KRAFT_VERSION: (0, 1),
        TRANSACTION_VERSION: (0, 2),
        GROUP_VERSION: (0, 1),
        ELIGIBLE_LEADER_REPLICAS_VERSION: (0, 1),
    }
)


# -- metadata.version ----------------------------------------------------------------------------------------


def metadata_version(level: int) -> MetadataVersion:
    """Kafka's ``MetadataVersion.fromFeatureLevel``; ValueError for a level this table does not know."""
    mv = _BY_LEVEL.get(level)
    if mv is None:
        raise ValueError(f"No MetadataVersion with feature level {level}")
    return mv


def parse_release_version(text: str) -> int:
    """Kafka's ``MetadataVersion.fromVersionString``: ``"3.9-IV0"`` names one level, ``"3.9"`` (or ``"3.9.1"``:
    only two segments count) the release's latest. Returns the level; ValueError ("Version X is not a valid
    version") otherwise."""
    segments = text.split(".")
    key = text if len(segments) <= 2 else ".".join(segments[:2])
    found = None
    for mv in METADATA_VERSIONS:
        if mv.version == key:
            return mv.level
        if mv.release == key:
            found = mv.level
    if found is None:
        raise ValueError(f"Version {text} is not a valid version")
    return found


def metadata_versions_string(first: int = MINIMUM_VERSION, last: int = LATEST_PRODUCTION) -> str:
    """Kafka's ``FeatureCommand.metadataVersionsToString``: ``"3.3-IV3, 3.4-IV0, ..."``."""
    return ", ".join(mv.version for mv in METADATA_VERSIONS if first <= mv.level <= last)


def did_metadata_change(current: int, target: int) -> bool:
    """Kafka's ``MetadataVersion.checkIfMetadataChanged``: whether some level above the lower of the two, up to
    the higher, changed the metadata (so a downgrade between them may lose metadata)."""
    low, high = sorted((current, target))
    return any(mv.did_metadata_change for mv in METADATA_VERSIONS if low < mv.level <= high)


def register_broker_record_version(metadata_version: int | None) -> int:
    """Kafka's ``MetadataVersion.registerBrokerRecordVersion``: 3 (log dirs) from 3.7-IV2, 2
    (``is_migrating_zk_broker``) from 3.4-IV0, 1 (``in_controlled_shutdown``) from 3.3-IV3; the newest when
    ``metadata.version`` is not known yet."""
    if metadata_version is None or metadata_version >= IBP_3_7_IV2:
        return 3
    if metadata_version >= IBP_3_4_IV0:
        return 2
    return 1 if metadata_version >= IBP_3_3_IV3 else 0


def level_to_string(feature_name: str, level: int) -> str:
    """Kafka's ``FeatureCommand.levelToString``: a ``metadata.version`` level as its version (``UNKNOWN n``
    when unknown), any other feature's level as the number."""
    if feature_name == METADATA_VERSION:
        mv = _BY_LEVEL.get(level)
        return mv.version if mv is not None else f"UNKNOWN {level}"
    return str(level)


# -- the other features --------------------------------------------------------------------------------------


def feature(name: str) -> Feature:
    """Kafka's ``Feature.featureFromName``; ValueError ("Feature X not found.") otherwise."""
    f = _FEATURES_BY_NAME.get(name)
    if f is None:
        raise ValueError(f"Feature {name} not found.")
    return f


def feature_version(name: str, level: int) -> FeatureVersion:
    """Kafka's ``Feature.fromFeatureLevel(level, true)``; ValueError ("No feature:X with feature level N")."""
    for v in feature(name).versions:
        if v.level == level:
            return v
    raise ValueError(f"No feature:{name} with feature level {level}")


def default_level(name: str, metadata_version_level: int) -> int:
    """Kafka's ``Feature.defaultLevel``: the highest level whose bootstrap ``metadata.version`` is at most
    ``metadata_version_level``."""
    level = 0
    for v in feature(name).versions:
        if v.bootstrap_metadata_version > metadata_version_level:
            break
        level = v.level
    return level


def validate_version(name: str, level: int, proposed: Mapping[str, int]) -> None:
    """Kafka's ``Feature.validateVersion``: ValueError (Kafka's message) when ``name`` at ``level`` needs a
    feature level that ``proposed`` (every finalized level, with the updates applied) does not reach."""
    mv = proposed.get(METADATA_VERSION)
    if level >= 1 and (mv is None or mv < MINIMUM_VERSION):
        raise ValueError(
            f"{name} could not be set to {level} because it depends on metadata.version={MINIMUM_VERSION} "
            f"({metadata_version(MINIMUM_VERSION).version})"
        )
    for dependency, needed in feature_version(name, level).dependencies.items():
        have = proposed.get(dependency)
        if have is None or have < needed:
            raise ValueError(f"{name} could not be set to {level} because it depends on {dependency} level {needed}")


def supported_range(name: str) -> tuple[int, int]:
    """pykbroker's supported ``(min, max)`` of a feature; ``(0, 0)`` (Kafka's ``QuorumFeatures.DISABLED``) for
    one it does not know."""
    return SUPPORTED_FEATURES.get(name, (0, 0))


def bootstrap_levels(metadata_version_level: int) -> dict[str, int]:
    """The levels a new cluster at ``metadata_version_level`` starts with: ``metadata.version`` and each
    feature's Kafka default for it, capped to what pykbroker supports (``kraft.version`` is that of the
    static quorum: 0)."""
    levels = {METADATA_VERSION: metadata_version_level}
    for f in FEATURES:
        levels[f.name] = min(default_level(f.name, metadata_version_level), supported_range(f.name)[1])
    levels[KRAFT_VERSION] = 0
    return levels


def supported_features_request() -> list[dict]:
    """:data:`SUPPORTED_FEATURES` as the BrokerRegistration request's ``features`` entries."""
    return [
        {"name": name, "min_supported_version": lo, "max_supported_version": hi}
        for name, (lo, hi) in sorted(SUPPORTED_FEATURES.items())
    ]
