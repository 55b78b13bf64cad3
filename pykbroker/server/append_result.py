"""What ``ReplicaManager.append_records`` answers for each partition: a named type, not a response dict.

Mirrors Kafka's ``ProduceResponse.PartitionResponse`` as ``ReplicaManager.appendRecords`` hands it to its
callback; the Produce handler turns it into the response's partition entry of the request's version
(``protocol/messages/produce.py``) in one place, and the coordinators read its ``error_code``.

Immutable (a NamedTuple: cheapest to build on the produce path), so safe to hand from the request handler or
purgatory thread that completes the append to any other thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from pykbroker.log.log_validator import RecordError


class ProducePartitionResult(NamedTuple):
    """One partition's append: ``error_code`` (Kafka's; NONE when appended), the ``base_offset`` of the first
    appended record, ``log_append_time_ms`` (-1 unless the topic uses LogAppendTime), the log's
    ``log_start_offset``, ``record_errors`` (the records that failed validation, INVALID_RECORD /
    INVALID_TIMESTAMP) and ``error_message``. -1 offsets and times with an error."""

    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: tuple[RecordError, ...] = ()
    error_message: str | None = None

    @classmethod
    def error(cls, code: int, message: str | None = None) -> ProducePartitionResult:
        """A partition answered with ``code`` only (no offsets), e.g. before any append."""
        return cls(code, -1, -1, -1, (), message)

    def with_error(self, code: int) -> ProducePartitionResult:
        """This result with ``error_code`` replaced (an acks=all append's outcome once the ISR has it, or not)."""
        return ProducePartitionResult(code, self[1], self[2], self[3], self[4], self[5])


#: ``(topic, partition)`` -> its append result; what ``append_records`` hands its callback, exactly once
AppendResults = dict[tuple[str, int], ProducePartitionResult]
AppendCallback = Callable[[AppendResults], None]
