"""The result of an append (Kafka's ``LogAppendInfo``) and what a validator hands the log."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

NO_TIMESTAMP = -1
UNKNOWN_OFFSET = -1


class ValidationResultLike(Protocol):
    """What ``UnifiedLog.append_as_leader``'s ``validate`` callable returns: the validated buffer
    (whole batches, offsets assigned from the given next offset, leader epoch stamped) and its
    metadata. ``log_append_time`` (ms, -1 unless LogAppendTime) is optional. LogValidator's
    ``ValidationResult`` (Kafka's field names) is accepted too, see :class:`ValidatedFields`."""

    buffer: object
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    records_count: int


class ValidatedFields:
    """Reads a validator's result in either spelling: this module's ValidationResultLike
    (``buffer``, ``max_timestamp``, ``offset_of_max_timestamp``, ``log_append_time``) or
    LogValidator's ValidationResult (``validated_records``, ``max_timestamp_ms``,
    ``shallow_offset_of_max_timestamp``, ``log_append_time_ms``)."""

    __slots__ = (
        "buffer",
        "first_offset",
        "last_offset",
        "log_append_time",
        "max_timestamp",
        "offset_of_max_timestamp",
        "records_count",
    )

    def __init__(self, result):
        if type(result) in _KAFKA_SPELLING:  # LogValidator's ValidationResult: no attribute probing
            self._from_kafka_spelling(result)
            return
        buf = getattr(result, "buffer", None)
        if buf is None:
            buf = result.validated_records
        self.buffer = buf if isinstance(buf, memoryview) else memoryview(buf)
        self.first_offset = result.first_offset
        self.last_offset = result.last_offset
        self.records_count = result.records_count
        self.max_timestamp = _first_attr(result, "max_timestamp", "max_timestamp_ms")
        self.offset_of_max_timestamp = _first_attr(result, "offset_of_max_timestamp", "shallow_offset_of_max_timestamp")
        self.log_append_time = _first_attr(result, "log_append_time", "log_append_time_ms", default=-1)

    def _from_kafka_spelling(self, result) -> None:
        buf = result.validated_records
        self.buffer = buf if type(buf) is memoryview else memoryview(buf)
        self.first_offset = result.first_offset
        self.last_offset = result.last_offset
        self.records_count = result.records_count
        self.max_timestamp = result.max_timestamp_ms
        self.offset_of_max_timestamp = result.shallow_offset_of_max_timestamp
        self.log_append_time = result.log_append_time_ms


#: result classes known to use LogValidator's spelling (registered by log_validator: it imports this module, not
#: the other way round); any other result is read attribute by attribute
_KAFKA_SPELLING: set[type] = set()


def register_kafka_spelling(cls: type) -> None:
    """Let :class:`ValidatedFields` read ``cls`` (LogValidator's ValidationResult) without attribute probing."""
    _KAFKA_SPELLING.add(cls)


_MISSING = object()


def _first_attr(obj, *names: str, default=_MISSING):
    for name in names:
        value = getattr(obj, name, _MISSING)
        if value is not _MISSING:
            return value
    if default is _MISSING:
        raise AttributeError(f"{type(obj).__name__} has none of {names}")
    return default


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
