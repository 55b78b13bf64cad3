"""ProducerBatch, its shared result, and the per-record futures handed back by ``send``.

Mirrors ``org.apache.kafka.clients.producer.internals.{ProducerBatch,ProduceRequestResult,
FutureRecordMetadata}`` and ``RecordMetadata``. A batch owns one MemoryRecordsBuilder; every record
appended gets a :class:`FutureRecordMetadata` pointing at the batch's :class:`ProduceRequestResult`
and its relative offset, so completing a batch is one event for all its records.

Threading: records are appended under the accumulator's lock by application threads; a batch is
completed (``done``) once, by the Sender thread; futures may be waited on from any thread.
"""

from __future__ import annotations

from _thread import allocate_lock as _allocate_lock
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
    """The outcome of one batch: base offset, log append time, or the error.

    Completion is a latch made of one lock, held from creation until :meth:`done` (cheaper to make
    than a ``threading.Event``, one per batch); a waiter acquires and at once releases it."""

    __slots__ = ("_latch", "_completed", "base_offset", "log_append_time", "error")

    def __init__(self):
        self._latch = _allocate_lock()
        self._latch.acquire()
        self._completed = False
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None

    def set(self, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        self.base_offset, self.log_append_time, self.error = base_offset, log_append_time, error

    def done(self) -> None:
        """Once per result (ProducerBatch.complete guards it)."""
        self._completed = True
        self._latch.release()

    def wait(self, timeout: float | None) -> bool:
        if self._completed:
            return True
        if timeout is None:
            acquired = self._latch.acquire()
        elif timeout <= 0:
            acquired = self._latch.acquire(False)
        else:
            acquired = self._latch.acquire(True, timeout)
        if acquired:
            self._latch.release()
            return True
        return self._completed

    @property
    def completed(self) -> bool:
        return self._completed


_new_tuple = tuple.__new__


class FutureRecordMetadata(tuple):
    """``send``'s future: ``get(timeout)`` returns RecordMetadata or raises the batch's error.

    A tuple underneath ``(result, relative_offset, topic, partition, timestamp, key_size, value_size)``:
    ``send`` builds one per record, and a tuple is the cheapest object CPython can make (one C call,
    no ``__init__``). Only the methods below are its interface."""

    __slots__ = ()

    def __new__(
        cls,
        result: ProduceRequestResult,
        relative_offset: int,
        topic: str,
        partition: int,
        timestamp: int,
        key_size: int,
        value_size: int,
    ):
        return _new_tuple(cls, (result, relative_offset, topic, partition, timestamp, key_size, value_size))

    def done(self) -> bool:
        return self[0].completed

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """Raises TimeoutError if not complete within ``timeout`` seconds, else the send's error."""
        if not self[0].wait(timeout):
            raise TimeoutError(f"Timeout after waiting for {timeout} s.")
        return self.value()

    result = get  # concurrent.futures spelling

    def value(self) -> RecordMetadata:
        r, relative_offset, topic, partition, timestamp, key_size, value_size = self
        if r.error is not None:
            raise r.error
        offset = r.base_offset + relative_offset if r.base_offset >= 0 else -1
        ts = r.log_append_time if r.log_append_time >= 0 else timestamp
        return _new_tuple(RecordMetadata, (topic, partition, offset, ts, key_size, value_size))

    def __repr__(self) -> str:
        return f"FutureRecordMetadata({self[2]}-{self[3]}, relative_offset={self[1]}, done={self.done()})"

    def __eq__(self, other) -> bool:
        return self is other

    def __ne__(self, other) -> bool:
        return self is not other

    def __hash__(self) -> int:
        return id(self)


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
        self.callbacks: list = []  # flat: callback, relative offset, timestamp, key size, value size, ...
        self.record_count = 0
        self.created = now
        self.last_attempt = now
        self.attempts = 0
        self.drained = 0.0
        self.base_sequence = -1
        self.in_retry = False
        self.final_state: str | None = None
        self.size_hint = 0

    def try_append(self, timestamp: int, key, value, headers, callback) -> FutureRecordMetadata | None:
        """Append one record; None when the batch has no room. RecordAccumulator.append inlines this."""
        n = self.builder.try_append(timestamp, key, value, headers)
        if n < 0:
            return None
        key_size = -1 if key is None else len(key)
        value_size = -1 if value is None else len(value)
        self.record_count = n + 1
        if callback is not None:
            self.callbacks += (callback, n, timestamp, key_size, value_size)
        return _new_tuple(
            FutureRecordMetadata, (self.result, n, self.topic, self.partition, timestamp, key_size, value_size)
        )

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
        callbacks = self.callbacks
        if not callbacks:
            return
        if error is not None:
            for callback in callbacks[::5]:
                try:
                    callback(None, error)
                except Exception as e:  # noqa: BLE001 - a user callback must not break the Sender
                    self._callback_failed(e)
            return
        topic, partition = self.topic, self.partition
        new, md = _new_tuple, RecordMetadata
        known_offset = base_offset >= 0  # not with acks=0
        append_time = log_append_time >= 0
        for callback, n, timestamp, key_size, value_size in zip(
            callbacks[::5], callbacks[1::5], callbacks[2::5], callbacks[3::5], callbacks[4::5], strict=True
        ):
            metadata = new(
                md,
                (
                    topic,
                    partition,
                    base_offset + n if known_offset else -1,
                    log_append_time if append_time else timestamp,
                    key_size,
                    value_size,
                ),
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
