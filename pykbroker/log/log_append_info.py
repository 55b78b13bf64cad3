"""The result of an append (Kafka's ``LogAppendInfo``) and what a validator hands the log."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

NO_TIMESTAMP = -1
UNKNOWN_OFFSET = -1


class ValidationResultLike(Protocol):
    """What ``UnifiedLog.append_as_leader``'s ``validate`` callable returns, in LogValidator's
    ``ValidationResult`` spelling (Kafka's field names): ``validated_records`` (whole batches, offsets
    assigned from the given next offset, leader epoch stamped; bytes-like), the absolute
    ``first_offset``/``last_offset``, ``records_count``, ``log_append_time_ms`` (-1 unless
    LogAppendTime), ``max_timestamp_ms`` (-1 when no record has a timestamp) and
    ``shallow_offset_of_max_timestamp`` (the last offset of the batch holding it)."""

    # read-only members (properties), so a NamedTuple or a frozen dataclass matches too
    @property
    def validated_records(self) -> memoryview | bytes | bytearray: ...
    @property
    def first_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def records_count(self) -> int: ...
    @property
    def log_append_time_ms(self) -> int: ...
    @property
    def max_timestamp_ms(self) -> int: ...
    @property
    def shallow_offset_of_max_timestamp(self) -> int: ...


@dataclass(slots=True)
class LogAppendInfo:
    """What an append did.

    ``first_offset``/``last_offset``: offsets of the appended records (for a duplicate: of the
    original append, and nothing was written). ``max_timestamp`` and ``offset_of_max_timestamp``: the
    largest batch timestamp and where it is. ``log_append_time``: broker time stamped for
    LogAppendTime topics, else -1. ``log_start_offset``: the log start offset after the append.
    ``records_count``: records appended. ``valid_bytes``: bytes appended. ``last_leader_epoch``: the
    epoch stamped on the last batch, or None.
    """

    first_offset: int
    last_offset: int
    max_timestamp: int = NO_TIMESTAMP
    offset_of_max_timestamp: int = UNKNOWN_OFFSET
    log_append_time: int = NO_TIMESTAMP
    log_start_offset: int = UNKNOWN_OFFSET
    records_count: int = 0
    valid_bytes: int = 0
    last_leader_epoch: int | None = None
    duplicate: bool = False
