"""FeatureControlManager: finalized feature levels, ``metadata.version`` first (Kafka's
``FeatureControlManager``).

The first active controller of an empty log writes the bootstrap ``FeatureLevelRecord`` for
``metadata.version`` (Kafka writes it at format time into the bootstrap checkpoint; pykbroker formats on
first start, so the controller writes it on first activation). A level of 0 removes a feature.
Not thread-safe: used on the controller's event thread.
"""

from __future__ import annotations

from pykbroker.metadata.records import FEATURE_LEVEL_RECORD, ApiMessageAndVersion, feature_level_record

METADATA_VERSION = "metadata.version"
IBP_3_9_IV0 = 21
IBP_4_0_IV0 = 22
LATEST_PRODUCTION_METADATA_VERSION = IBP_4_0_IV0


class FeatureControlManager:
    def __init__(self) -> None:
        self.finalized: dict[str, int] = {}

    @property
    def metadata_version(self) -> int | None:
        return self.finalized.get(METADATA_VERSION)

    def bootstrap_records(
        self, metadata_version: int = LATEST_PRODUCTION_METADATA_VERSION, other_features: dict[str, int] | None = None
    ) -> list[ApiMessageAndVersion]:
        """Records to write when the log has no ``metadata.version`` yet (else none)."""
        if self.metadata_version is not None:
            return []
        records = [feature_level_record(METADATA_VERSION, metadata_version)]
        for name, level in sorted((other_features or {}).items()):
            records.append(feature_level_record(name, level))
        return records

    def replay(self, record: ApiMessageAndVersion) -> None:
        if record.name != FEATURE_LEVEL_RECORD:
            return
        name, level = record.data["name"], record.data["feature_level"]
        if level == 0:
            self.finalized.pop(name, None)
        else:
            self.finalized[name] = level
