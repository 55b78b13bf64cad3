"""Leader epoch -> start offset map of a partition, persisted in ``leader-epoch-checkpoint``.

Mirrors ``org.apache.kafka.storage.internals.epoch.LeaderEpochFileCache``. An entry ``(e, o)`` says
that leader epoch ``e`` wrote its first batch at offset ``o``; entries increase in both fields. It
answers OffsetForLeaderEpoch (``end_offset_for_epoch``) and gives ListOffsets the epoch of an offset.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

from pykbroker.log.checkpoints import CorruptCheckpointError, LeaderEpochCheckpointFile
from pykbroker.utils.logging import get_logger

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    """Threading: ``_lock`` guards the entry list; appends come from the log (under its lock),
    queries from request handler threads. Every change is written to the checkpoint file."""

    def __init__(self, topic_partition: tuple[str, int], checkpoint: LeaderEpochCheckpointFile | None):
        self._tp = topic_partition
        self._log = get_logger(f"LeaderEpochCache {self._tp_str()}")
        self._checkpoint = checkpoint
        self._lock = threading.RLock()
        self._entries: list[EpochEntry] = []
        if checkpoint is not None:
            try:
                self._entries = [EpochEntry(e, o) for e, o in checkpoint.read()]
            except CorruptCheckpointError as e:
                self._log.warning(
                    "Ignoring a corrupt leader epoch checkpoint; it is rebuilt from the log", error=str(e)
                )

    def _flush(self) -> None:
        if self._checkpoint is not None:
            self._checkpoint.write(self._entries)

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` (entries with a larger or equal epoch or
        start offset are replaced). No-op, returning False, if the latest entry already says so."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"Invalid leader epoch entry ({epoch}, {start_offset})")
        with self._lock:
            latest = self._entries[-1] if self._entries else None
            if latest is not None and epoch == latest.epoch and start_offset >= latest.start_offset:
                return False
            while self._entries and (
                self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset
            ):
                removed = self._entries.pop()
                self._log.info("Removed conflicting leader epoch entry", entry=tuple(removed))
            self._entries.append(EpochEntry(epoch, start_offset))
            self._flush()
            return True

    def _tp_str(self) -> str:
        return f"{self._tp[0]}-{self._tp[1]}"

    @property
    def latest_epoch(self) -> int | None:
        with self._lock:
            return self._entries[-1].epoch if self._entries else None

    def epoch_entries(self) -> list[EpochEntry]:
        with self._lock:
            return list(self._entries)

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch of the last entry starting at or before ``offset``, or None."""
        with self._lock:
            result = None
            for entry in self._entries:
                if entry.start_offset <= offset:
                    result = entry.epoch
                else:
                    break
            return result

    def end_offset_for_epoch(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end_offset)`` for OffsetForLeaderEpoch: the largest epoch <= ``requested_epoch`` and
        the start offset of the first epoch after it (``log_end_offset`` when the requested epoch is
        the latest); ``(-1, -1)`` when the requested epoch is undefined or newer than every entry."""
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH or not self._entries:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if self._entries[-1].epoch == requested_epoch:
                return requested_epoch, log_end_offset
            higher = next((e for e in self._entries if e.epoch > requested_epoch), None)
            if higher is None:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            floor = None
            for entry in self._entries:
                if entry.epoch <= requested_epoch:
                    floor = entry
                else:
                    break
            if floor is None:
                return requested_epoch, higher.start_offset
            return floor.epoch, higher.start_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (log truncation)."""
        with self._lock:
            if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
                return
            self._entries = [e for e in self._entries if e.start_offset < end_offset]
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly below ``start_offset``; the last one of them is kept, moved to start at
        ``start_offset`` (log start offset increase)."""
        with self._lock:
            if start_offset < 0 or not self._entries or self._entries[0].start_offset >= start_offset:
                return
            removed = [e for e in self._entries if e.start_offset <= start_offset]
            kept = [e for e in self._entries if e.start_offset > start_offset]
            self._entries = [EpochEntry(removed[-1].epoch, start_offset)] + kept
            self._flush()

    def clear_and_flush(self) -> None:
        with self._lock:
            self._entries = []
            self._flush()

    def update_checkpoint(self, checkpoint: LeaderEpochCheckpointFile | None) -> None:
        """Point at a new file (after the partition directory is renamed)."""
        with self._lock:
            self._checkpoint = checkpoint
