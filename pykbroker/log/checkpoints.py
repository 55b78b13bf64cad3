"""Checkpoint files: small text files rewritten atomically.

Mirrors Kafka's ``CheckpointFile``, ``OffsetCheckpointFile``, ``LeaderEpochCheckpointFile`` and
``PartitionMetadataFile``. The text format is Kafka's::

    0            <- version
    2            <- number of entries
    topic 0 42   <- one entry per line, fields separated by single spaces
    topic 1 7

A write is :func:`pykbroker.utils.files.atomic_write` (``<file>.tmp``, fsync, rename, directory fsync), so a
crash leaves either the old or the new content. ``partition.metadata`` is ``version: 0`` /
``topic_id: <id>`` with the topic id in Kafka's base64url form.
"""

from __future__ import annotations

import base64
import os
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from pykbroker.protocol.errors import KafkaStorageError
from pykbroker.utils.files import atomic_write

T = TypeVar("T")

RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


class CorruptCheckpointError(KafkaStorageError):
    """A checkpoint file could not be parsed (KAFKA_STORAGE_ERROR)."""


class CheckpointFile(Generic[T]):
    """A versioned list of entries, one per line. ``to_line``/``from_fields`` convert one entry.

    Threading: ``_lock`` serialises writes and reads of the same file.
    """

    def __init__(
        self,
        path: str,
        version: int,
        to_line: Callable[[T], str],
        from_fields: Callable[[list[str]], T],
        fields_per_line: int,
    ):
        self.path = path
        self.version = version
        self._to_line = to_line
        self._from_fields = from_fields
        self._fields = fields_per_line
        self._lock = threading.Lock()

    def write(self, entries: Iterable[T], sync: bool = True) -> None:
        lines = [self._to_line(e) for e in entries]
        text = f"{self.version}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
        with self._lock:
            atomic_write(self.path, text.encode("utf-8"), sync)

    def read(self) -> list[T]:
        """The entries; [] if the file does not exist. Raises CorruptCheckpointError when malformed."""
        with self._lock:
            try:
                with open(self.path, encoding="utf-8") as f:
                    lines = f.read().splitlines()
            except FileNotFoundError:
                return []
        try:
            version = int(lines[0])
            if version != self.version:
                raise CorruptCheckpointError(f"Unrecognized version of the checkpoint file ({self.path}): {version}")
            count = int(lines[1])
            body = [line for line in lines[2:] if line.strip()]
            if len(body) != count:
                raise CorruptCheckpointError(
                    f"Expected {count} entries in checkpoint file ({self.path}), but found {len(body)}"
                )
            entries = []
            for line in body:
                fields = line.split(" ")
                if len(fields) != self._fields:
                    raise CorruptCheckpointError(f"Malformed line in checkpoint file ({self.path}): '{line}'")
                entries.append(self._from_fields(fields))
            return entries
        except CorruptCheckpointError:
            raise
        except (IndexError, ValueError) as e:
            raise CorruptCheckpointError(f"Malformed checkpoint file ({self.path}): {e}") from e


class OffsetCheckpointFile:
    """``topic partition offset`` lines: recovery points, log start offsets, high watermarks."""

    VERSION = 0

    def __init__(self, path: str):
        self._file: CheckpointFile[tuple[tuple[str, int], int]] = CheckpointFile(
            path, self.VERSION, lambda e: f"{e[0][0]} {e[0][1]} {e[1]}", lambda f: ((f[0], int(f[1])), int(f[2])), 3
        )

    @property
    def path(self) -> str:
        return self._file.path

    def write(self, offsets: dict[tuple[str, int], int], sync: bool = True) -> None:
        self._file.write(sorted(offsets.items()), sync)

    def read(self) -> dict[tuple[str, int], int]:
        return dict(self._file.read())


class LeaderEpochCheckpointFile:
    """``epoch start_offset`` lines (the partition directory's ``leader-epoch-checkpoint``)."""

    VERSION = 0

    def __init__(self, path: str):
        self._file: CheckpointFile[tuple[int, int]] = CheckpointFile(
            path, self.VERSION, lambda e: f"{e[0]} {e[1]}", lambda f: (int(f[0]), int(f[1])), 2
        )

    @property
    def path(self) -> str:
        return self._file.path

    def write(self, entries: Iterable[tuple[int, int]], sync: bool = True) -> None:
        self._file.write(list(entries), sync)

    def read(self) -> list[tuple[int, int]]:
        return self._file.read()


# -- topic ids -------------------------------------------------------------------------------------
def topic_id_to_string(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: base64url of the 16 bytes, without padding (22 characters)."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def topic_id_from_string(text: str) -> uuid.UUID:
    """Parse Kafka's 22-character base64url form (or a canonical hyphenated UUID)."""
    text = text.strip()
    if len(text) == 36 and text.count("-") == 4:
        return uuid.UUID(text)
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"Invalid topic id {text!r}")
    return uuid.UUID(bytes=raw)


def as_topic_id(value) -> uuid.UUID | None:
    """Normalise a topic id given as uuid.UUID, 16 bytes, Kafka string form, or None."""
    if value is None or isinstance(value, uuid.UUID):
        return value
    if isinstance(value, (bytes, bytearray)) and len(value) == 16:
        return uuid.UUID(bytes=bytes(value))
    if isinstance(value, str):
        return topic_id_from_string(value)
    raw = getattr(value, "bytes", None)
    if isinstance(raw, (bytes, bytearray)) and len(raw) == 16:
        return uuid.UUID(bytes=bytes(raw))
    raise TypeError(f"Cannot interpret {value!r} as a topic id")


class PartitionMetadataFile:
    """The partition directory's ``partition.metadata`` (version 0, topic id).

    Mirrors Kafka's ``PartitionMetadataFile``: :meth:`record` keeps the topic id in memory (``dirty``) and
    :meth:`maybe_flush` writes it (atomic write, two fsyncs) later, off the thread creating the log (Kafka's
    ``flush-metadata-file`` task); :meth:`exists` / :meth:`read` see a recorded id at once. :meth:`write`
    writes at once. Thread-safe (one lock around the dirty id and the write)."""

    def __init__(self, directory: str, dirty: uuid.UUID | None = None):
        self.path = os.path.join(directory, PARTITION_METADATA_FILE)
        self._lock = threading.Lock()
        self._dirty = dirty

    @property
    def dirty(self) -> uuid.UUID | None:
        """The recorded topic id not yet written, or None."""
        return self._dirty

    def exists(self) -> bool:
        return self._dirty is not None or os.path.exists(self.path)

    def write(self, topic_id: uuid.UUID) -> None:
        with self._lock:
            self._dirty = None
            atomic_write(self.path, f"version: 0\ntopic_id: {topic_id_to_string(topic_id)}\n".encode())

    def record(self, topic_id: uuid.UUID) -> None:
        """Remember ``topic_id`` to be written by the next :meth:`maybe_flush`."""
        with self._lock:
            self._dirty = topic_id

    def maybe_flush(self) -> None:
        """Write the recorded topic id, if any; nothing when the partition directory is gone (deleted or
        renamed meanwhile). OSError propagates (the caller reports the directory)."""
        with self._lock:
            topic_id = self._dirty
            if topic_id is None:
                return
            self._dirty = None
            if not os.path.isdir(os.path.dirname(self.path)):
                return
            try:
                atomic_write(self.path, f"version: 0\ntopic_id: {topic_id_to_string(topic_id)}\n".encode())
            except BaseException:
                self._dirty = topic_id
                raise

    def discard(self) -> uuid.UUID | None:
        """Forget the recorded topic id (the directory is deleted or renamed); returns it."""
        with self._lock:
            topic_id, self._dirty = self._dirty, None
            return topic_id

    def read(self) -> uuid.UUID | None:
        """The stored (or recorded) topic id, None if there is none. Raises CorruptCheckpointError if
        malformed."""
        dirty = self._dirty
        if dirty is not None:
            return dirty
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return None
        try:
            key, _, version = lines[0].partition(":")
            if key.strip() != "version" or int(version) != 0:
                raise ValueError(f"unsupported version line {lines[0]!r}")
            key, _, value = lines[1].partition(":")
            if key.strip() != "topic_id":
                raise ValueError(f"expected topic_id, found {lines[1]!r}")
            return topic_id_from_string(value)
        except (IndexError, ValueError) as e:
            raise CorruptCheckpointError(f"Malformed partition metadata file ({self.path}): {e}") from e
