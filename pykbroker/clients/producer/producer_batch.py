"""ProducerBatch, its shared result, and the per-record futures handed back by ``send``.

Mirrors ``org.apache.kafka.clients.producer.internals.{ProducerBatch,ProduceRequestResult,
FutureRecordMetadata}`` and ``RecordMetadata``. A batch owns one MemoryRecordsBuilder; every record
appended gets a :class:`FutureRecordMetadata` pointing at the batch's :class:`ProduceRequestResult`
and its relative offset, so completing a batch is one event for all its records.

Threading: records are appended under the accumulator's lock by application threads; a batch is
completed (``done``) once, by the Sender thread; futures may be waited on from any thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import NamedTuple

from pykbroker.utils.logging import get_logger

_log = get_logger("ProducerBatch")


class RecordMetadata(NamedTuple):
    topic: str
    partition: int
    offset: int  # -1 when unknown (acks=0)
    timestamp: int  # ms; the broker's append time for LogAppendTime topics
    serialized_key_size: int
    serialized_value_size: int


class ProduceRequestResult:
    """The outcome of one batch: base offset, log append time, or the error."""

    __slots__ = ("_event", "base_offset", "log_append_time", "error")

    def __init__(self):
        self._event = threading.Event()
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None

    def set(self, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        self.base_offset, self.log_append_time, self.error = base_offset, log_append_time, error

    def done(self) -> None:
        self._event.set()

    def wait(self, timeout: float | None) -> bool:
        return self._event.wait(timeout)

    @property
    def completed(self) -> bool:
        return self._event.is_set()


class FutureRecordMetadata:
    """``send``'s future: ``get(timeout)`` returns RecordMetadata or raises the batch's error."""

    __slots__ = ("_result", "_relative_offset", "_topic", "_partition", "_timestamp", "_key_size", "_value_size")

    def __init__(
        self,
        result: ProduceRequestResult,
        relative_offset: int,
        topic: str,
        partition: int,
        timestamp: int,
        key_size: int,
        value_size: int,
    ):
        self._result = result
        self._relative_offset = relative_offset
        self._topic = topic
        self._partition = partition
        self._timestamp = timestamp
        self._key_size = key_size
        self._value_size = value_size

    def done(self) -> bool:
        return self._result.completed

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """Raises TimeoutError if not complete within ``timeout`` seconds, else the send's error."""
        if not self._result.wait(timeout):
            raise TimeoutError(f"Timeout after waiting for {timeout} s.")
        return self.value()

    result = get  # concurrent.futures spelling

    def value(self) -> RecordMetadata:
        r = self._result
        if r.error is not None:
            raise r.error
        offset = r.base_offset + self._relative_offset if r.base_offset >= 0 else -1
        ts = r.log_append_time if r.log_append_time >= 0 else self._timestamp
        return RecordMetadata(self._topic, self._partition, offset, ts, self._key_size, self._value_size)


class ProducerBatch:
    """Records for one partition, sent and acknowledged together."""

    __slots__ = (
        "topic",
        "partition",
        "builder",
        "result",
        "callbacks",
        "record_count",
        "created",
        "last_attempt",
        "attempts",
        "drained",
        "base_sequence",
        "in_retry",
        "final_state",
        "size_hint",
    )

    def __init__(self, topic: str, partition: int, builder, now: float):
        self.topic = topic
        self.partition = partition
        self.builder = builder
        self.result = ProduceRequestResult()
        self.callbacks: list[tuple[Callable, FutureRecordMetadata]] = []
        self.record_count = 0
        self.created = now
        self.last_attempt = now
        self.attempts = 0
        self.drained = 0.0
        self.base_sequence = -1
        self.in_retry = False
        self.final_state: str | None = None
        self.size_hint = 0

    def try_append(self, timestamp: int, key, value, headers, callback, now: float) -> FutureRecordMetadata | None:
        if self.builder.try_append(timestamp, key, value, headers) < 0:
            return None
        future = FutureRecordMetadata(
            self.result,
            self.record_count,
            self.topic,
            self.partition,
            timestamp,
            -1 if key is None else len(key),
            -1 if value is None else len(value),
        )
        self.record_count += 1
        if callback is not None:
            self.callbacks.append((callback, future))
        return future

    def is_full(self) -> bool:
        return self.builder.is_full()

    def close(self) -> None:
        self.builder.close_for_record_appends()

    def estimated_size(self) -> int:
        return self.builder.estimated_size_in_bytes()

    def records(self) -> bytes:
        return self.builder.build()

    def complete(self, base_offset: int, log_append_time: int, error: BaseException | None) -> bool:
        """Set the outcome once, run the callbacks (``callback(metadata, exception)``), then mark the
        result done; False if already done.

        The order is Kafka's ``completeFutureAndFireCallbacks``: ``produceFuture.set`` (the callbacks may
        read it), the callbacks, and only then ``produceFuture.done()`` -- which releases ``flush()`` and
        ``future.get()``, so every callback of a batch has run when they return."""
        if self.final_state is not None:
            return False
        self.final_state = "FAILED" if error is not None else "SUCCEEDED"
        self.result.set(base_offset, log_append_time, error)
        try:
            self._fire_callbacks(base_offset, log_append_time, error)
        finally:
            self.result.done()
        return True

    def _fire_callbacks(self, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        if not self.callbacks:
            return
        if error is not None:
            for callback, _ in self.callbacks:
                try:
                    callback(None, error)
                except Exception as e:  # noqa: BLE001 - a user callback must not break the Sender
                    self._callback_failed(e)
            return
        topic, partition = self.topic, self.partition
        for callback, future in self.callbacks:
            offset = base_offset + future._relative_offset if base_offset >= 0 else -1
            metadata = RecordMetadata(
                topic,
                partition,
                offset,
                log_append_time if log_append_time >= 0 else future._timestamp,
                future._key_size,
                future._value_size,
            )
            try:
                callback(metadata, None)
            except Exception as e:  # noqa: BLE001 - a user callback must not break the Sender
                self._callback_failed(e)

    def _callback_failed(self, e: Exception) -> None:
        _log.error(
            f"Error executing user-provided callback on message for topic-partition {self.topic}-{self.partition}",
            error=repr(e),
        )

    @property
    def tp(self) -> tuple[str, int]:
        return self.topic, self.partition

    def __repr__(self) -> str:
        return f"ProducerBatch({self.topic}-{self.partition}, records={self.record_count}, seq={self.base_sequence})"
