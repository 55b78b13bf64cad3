"""File names inside a partition directory (Kafka's ``LogFileUtils`` and ``UnifiedLog`` helpers).

Segment files are named by their base offset zero-padded to 20 digits:
``00000000000000000000.log|.index|.timeindex``; producer snapshots ``<offset>.snapshot``. Suffixes
mark pending operations: ``.deleted`` (async delete), ``.cleaned``/``.swap`` (compaction), ``.tmp``.
Partition directories are ``<topic>-<partition>``, with ``-delete`` (pending delete) or ``-future``.
"""

from __future__ import annotations

import errno
import os
import re
import uuid

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
TMP_FILE_SUFFIX = ".tmp"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"

_DELETE_DIR_PATTERN = re.compile(r"^(\S+)-(\S+)\.(\S+)" + DELETE_DIR_SUFFIX + "$")
_FUTURE_DIR_PATTERN = re.compile(r"^(\S+)-(\S+)\.(\S+)" + FUTURE_DIR_SUFFIX + "$")


def filename_prefix_from_offset(offset: int) -> str:
    """``offset`` zero-padded to 20 digits (``123 -> "00000000000000000123"``)."""
    return f"{offset:020d}"


def log_file(directory: str, offset: int, suffix: str = "") -> str:
    return os.path.join(directory, filename_prefix_from_offset(offset) + LOG_FILE_SUFFIX + suffix)


def offset_index_file(directory: str, offset: int, suffix: str = "") -> str:
    return os.path.join(directory, filename_prefix_from_offset(offset) + INDEX_FILE_SUFFIX + suffix)


def time_index_file(directory: str, offset: int, suffix: str = "") -> str:
    return os.path.join(directory, filename_prefix_from_offset(offset) + TIME_INDEX_FILE_SUFFIX + suffix)


def producer_snapshot_file(directory: str, offset: int) -> str:
    return os.path.join(directory, filename_prefix_from_offset(offset) + PRODUCER_SNAPSHOT_FILE_SUFFIX)


def offset_from_file_name(name: str) -> int:
    """The base offset encoded in a segment/snapshot file name (``"000...123.log" -> 123``)."""
    return int(os.path.basename(name).split(".", 1)[0])


def log_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def log_delete_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>.<uuid hex>-delete``, shortened to fit 255 bytes as Kafka does."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return topic[: max(0, 255 - len(suffix))] + suffix


def parse_topic_partition_name(dir_name: str) -> tuple[str, int]:
    """``"my-topic-3" -> ("my-topic", 3)``; also accepts the ``-delete``/``-future`` forms.
    Raises ValueError for a name that is not a partition directory."""
    name = dir_name
    m = _DELETE_DIR_PATTERN.match(name) or _FUTURE_DIR_PATTERN.match(name)
    if m:
        topic, partition = m.group(1), m.group(2)
    else:
        idx = name.rfind("-")
        if idx <= 0 or idx == len(name) - 1:
            raise ValueError(f"Found directory {dir_name!r}, which is not in the form topic-partition")
        topic, partition = name[:idx], name[idx + 1 :]
    if not topic or not partition.isdigit():
        raise ValueError(f"Found directory {dir_name!r}, which is not in the form topic-partition")
    return topic, int(partition)


class TooManyOpenFilesError(OSError):
    """EMFILE/ENFILE opening a log file, with a message naming the limit to raise. An OSError, so the
    log handles it as any I/O error on its directory (KAFKA_STORAGE_ERROR, Kafka's IOException)."""


def too_many_open_files(e: OSError, path: str) -> OSError:
    """``e`` turned into a TooManyOpenFilesError naming RLIMIT_NOFILE (EMFILE) or the system-wide limit
    (ENFILE); other errors are returned unchanged."""
    if e.errno == errno.EMFILE:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        return TooManyOpenFilesError(
            e.errno,
            f"Too many open files: cannot open {path}: this process reached its open-file limit "
            f"(RLIMIT_NOFILE soft limit {soft}, hard limit {hard}); raise it (ulimit -n) for the broker",
        )
    if e.errno == errno.ENFILE:
        return TooManyOpenFilesError(
            e.errno,
            f"Too many open files in system: cannot open {path}: the system-wide limit (fs.file-max) was reached",
        )
    return e


def open_fd(path: str, flags: int, mode: int = 0o644) -> int:
    """``os.open``; raises TooManyOpenFilesError (naming the limit) on EMFILE/ENFILE, else OSError."""
    try:
        return os.open(path, flags, mode)
    except OSError as e:
        raise too_many_open_files(e, path) from None
