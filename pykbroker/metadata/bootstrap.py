"""The bootstrap metadata of a new cluster: ``<metadata.log.dir>/bootstrap.checkpoint``.

Mirrors Kafka's ``BootstrapDirectory`` / ``BootstrapMetadata``: ``kafka-storage format --add-scram ...`` writes
the records a cluster starts with (a KRaft snapshot file of metadata records: SCRAM credentials here; the
``metadata.version`` record is written by the controller itself), and the controller appends them to the
metadata log when it first becomes active on an empty log. A missing file means no bootstrap records.
Raises CorruptSnapshotError for a damaged file.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from pykbroker.metadata.records import ApiMessageAndVersion, MetadataRecordSerde
from pykbroker.raft.records_snapshot import RecordsSnapshotReader, RecordsSnapshotWriter
from pykbroker.raft.snapshots import FileRawSnapshotReader, FileRawSnapshotWriter, SnapshotId

BOOTSTRAP_FILE = "bootstrap.checkpoint"
_BOOTSTRAP_ID = SnapshotId(0, 0)


def write_bootstrap_records(metadata_dir: str, records: list[ApiMessageAndVersion]) -> str:
    """Write ``records`` as the bootstrap checkpoint of ``metadata_dir``; returns its path."""
    os.makedirs(metadata_dir, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".bootstrap-", dir=metadata_dir)
    try:
        raw = FileRawSnapshotWriter(staging, _BOOTSTRAP_ID, lambda reader: None)
        writer = RecordsSnapshotWriter(raw, MetadataRecordSerde(), 0)
        if records:
            writer.append(records)
        writer.freeze()
        target = os.path.join(metadata_dir, BOOTSTRAP_FILE)
        os.replace(raw.path, target)
        return target
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def read_bootstrap_records(metadata_dir: str) -> list[ApiMessageAndVersion]:
    path = os.path.join(metadata_dir, BOOTSTRAP_FILE)
    if not os.path.exists(path):
        return []
    return RecordsSnapshotReader(FileRawSnapshotReader(_BOOTSTRAP_ID, path), MetadataRecordSerde()).records()
