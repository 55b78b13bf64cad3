"""ProducerBatch, its shared result, and the per-record futures handed back by ``send``.

Mirrors ``org.apache.kafka.clients.producer.internals.{ProducerBatch,ProduceRequestResult,
FutureRecordMetadata}`` and ``RecordMetadata``. A batch encodes its records as they come (v2 records)
and builds its bytes once, when drained; every record appended gets a :class:`FutureRecordMetadata`
pointing at the batch's :class:`ProduceRequestResult` and its relative offset, so completing a batch
is one event for all its records.

Threading: records are appended under the batch's deque lock by application threads; a batch is
built and completed (``done``) once, by the Sender thread; futures may be waited on from any thread.
"""

from __future__ import annotations

from _thread import allocate_lock as _allocate_lock
from typing import NamedTuple

from pykbroker.record import compression as _compression
from pykbroker.record.default_record_batch import (
    CREATE_TIME,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
)
from pykbroker.record.memory_records_builder import (
    COMPRESSION_RATE_ESTIMATION_FACTOR,
    MAX_WRITE_LIMIT,
    encode_batch,
    encode_record,
)
from pykbroker.record.varint import ENCODE_TABLE_LIMIT, ZIGZAG_ENCODED, encode_varint
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
_TABLE_HALF = ENCODE_TABLE_LIMIT // 2  # non-negative values below this have their varint in ZIGZAG_ENCODED


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
    """Records for one partition, sent and acknowledged together (Kafka's ``ProducerBatch``).

    The batch encodes its records itself, as v2 records (``DefaultRecord.writeTo``) appended to a list
    of byte pieces at ``try_append``; :meth:`records` joins them once, adds the 61-byte header and the
    CRC (``encode_batch``, compressing with ``compression``). ``write_limit`` bytes (the
    MemoryRecordsBuilder's write limit: ``batch.size``, or the first record's size if larger) bound the
    built size; with a codec the records' size counts 5% over (Kafka's estimation factor). Offset deltas
    run from 0; the base timestamp is the first record's.

    Threading: appended by application threads under its deque's lock; drained, built and completed
    by the Sender thread once closed (no more appends)."""

    __slots__ = (
        "topic",
        "partition",
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
        "compression",
        "write_limit",
        "raw_limit",
        "parts",
        "raw_size",
        "base_timestamp",
        "max_timestamp",
        "closed",
        "producer_id",
        "producer_epoch",
        "is_transactional",
        "_built",
    )

    def __init__(self, topic: str, partition: int, now: float, compression=_compression.NONE,
                 write_limit: int = MAX_WRITE_LIMIT):  # fmt: skip
        self.topic = topic
        self.partition = partition
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
        self.compression = _compression.of(compression)
        self.write_limit = write_limit
        # Records' bytes that fit write_limit; -1 with a codec (the estimate is checked in full then).
        self.raw_limit = write_limit - RECORD_BATCH_OVERHEAD if self.compression.id == _compression.NONE else -1
        self.parts: list = []
        self.raw_size = 0
        self.base_timestamp = 0
        self.max_timestamp = NO_TIMESTAMP
        self.closed = False
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.is_transactional = False
        self._built: bytes | None = None

    def try_append(
        self, timestamp: int, key, value, headers, callback, _zz=ZIGZAG_ENCODED, _lim=_TABLE_HALF, _enc=encode_varint
    ) -> FutureRecordMetadata | None:
        """Append one record (``DefaultRecord`` v2 encoding); its future, or None when the batch is
        closed or has no room (the first record always fits). Raises ValueError for a negative
        timestamp other than -1. The producer's per-record hot path: varints of small non-negative
        values come from a table, the record's byte pieces are added to :attr:`parts` at once; a
        record without key and headers after the first, in an uncompressed batch, takes the short
        path below (same bytes)."""
        n = self.record_count
        if n and key is None and value is not None and not headers and not self.closed:
            delta = timestamp - self.base_timestamp
            v = len(value)
            if 0 <= delta < _lim and v < _lim and n < _lim:  # timestamp >= base >= -1: valid
                timestamp_delta = _zz[delta << 1]
                offset_delta = _zz[n << 1]
                value_length = _zz[v << 1]
                body = 3 + len(timestamp_delta) + len(offset_delta) + len(value_length) + v
                length = _zz[body << 1] if body < _lim else _enc(body)
                raw_size = self.raw_size + len(length) + body
                if raw_size <= self.raw_limit:  # -1 with a codec: the general path checks the estimate
                    self.parts += (
                        length,
                        b"\x00",
                        timestamp_delta,
                        offset_delta,
                        b"\x01",
                        value_length,
                        value,
                        b"\x00",
                    )
                    self.raw_size = raw_size
                    self.record_count = n + 1
                    if timestamp > self.max_timestamp:
                        self.max_timestamp = timestamp
                    if callback is not None:
                        self.callbacks += (callback, n, timestamp, -1, v)
                    return _new_tuple(
                        FutureRecordMetadata, (self.result, n, self.topic, self.partition, timestamp, -1, v)
                    )
                if self.raw_limit >= 0:
                    return None
        return self._try_append(timestamp, key, value, headers, callback)

    def _try_append(
        self, timestamp: int, key, value, headers, callback, _lim=_TABLE_HALF
    ) -> FutureRecordMetadata | None:
        """:meth:`try_append` for any record (encoded by the builders' :func:`encode_record`)."""
        if self.closed:
            return None
        n = self.record_count
        if n == 0:
            if timestamp < 0 and timestamp != NO_TIMESTAMP:
                raise ValueError(f"Invalid negative timestamp {timestamp}")
            self.base_timestamp = timestamp
        delta = timestamp - self.base_timestamp
        # base >= -1 and timestamp >= base: a valid timestamp, not checked again
        if not 0 <= delta < _lim and timestamp < 0 and timestamp != NO_TIMESTAMP:
            raise ValueError(f"Invalid negative timestamp {timestamp}")
        pieces, size = encode_record(n, delta, key, value, headers)
        raw_size = self.raw_size + size
        if n:
            if self.raw_limit >= 0:
                if raw_size > self.raw_limit:
                    return None
            elif self.estimated_size() + size > self.write_limit:
                return None
        self.parts += pieces
        self.raw_size = raw_size
        self.record_count = n + 1
        if timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
        key_size = -1 if key is None else len(key)
        value_size = -1 if value is None else len(value)
        if callback is not None:
            self.callbacks += (callback, n, timestamp, key_size, value_size)
        return _new_tuple(
            FutureRecordMetadata, (self.result, n, self.topic, self.partition, timestamp, key_size, value_size)
        )

    def is_full(self) -> bool:
        """Closed, or the records reached the write limit (MemoryRecordsBuilder.isFull)."""
        if self.closed:
            return True
        if self.record_count == 0:
            return False
        if self.raw_limit >= 0:
            return self.raw_size >= self.raw_limit
        return self.write_limit <= self.estimated_size()

    def close(self) -> None:
        """No more appends (drained, expired or aborted)."""
        self.closed = True

    def estimated_size(self) -> int:
        """The built size once built, else the estimate (records' size +5% with a codec, plus the header)."""
        if self._built is not None:
            return len(self._built)
        if self.raw_limit >= 0:
            return RECORD_BATCH_OVERHEAD + self.raw_size
        return RECORD_BATCH_OVERHEAD + int(self.raw_size * COMPRESSION_RATE_ESTIMATION_FACTOR)

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int,
                           is_transactional: bool) -> None:  # fmt: skip
        """Idempotence fields, set when the batch is drained (before it is built). RuntimeError once built."""
        if self._built is not None:
            raise RuntimeError(
                "Trying to set producer state of an already closed batch. This indicates a bug on the client."
            )
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.base_sequence, self.is_transactional = base_sequence, is_transactional

    def records(self) -> bytes:
        """The batch's bytes (built once; closes appends). ValueError for inconsistent producer state."""
        if self._built is not None:
            return self._built
        self.closed = True
        if self.is_transactional and self.producer_id == NO_PRODUCER_ID:
            raise ValueError("Cannot write transactional messages without a valid producer ID")
        if self.record_count == 0:
            self._built = b""
            return self._built
        self._built = encode_batch(
            b"".join(self.parts),
            self.record_count,
            0,
            self.record_count - 1,
            self.base_timestamp,
            self.max_timestamp,
            self.compression,
            CREATE_TIME,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence if self.producer_id != NO_PRODUCER_ID else NO_SEQUENCE,
            self.is_transactional,
        )
        self.parts = []
        return self._built

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
