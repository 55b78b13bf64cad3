"""RecordAccumulator / ProducerBatch (issue 31): appends take only their partition's deque lock
(Kafka's ``synchronized (deque)``), and a batch encodes its records exactly as MemoryRecordsBuilder does."""

from __future__ import annotations

import threading

import pytest

from pykbroker.clients.producer.producer_batch import ProducerBatch
from pykbroker.clients.producer.record_accumulator import RecordAccumulator
from pykbroker.record import compression
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder

TS = 1_700_000_000_000


def _accumulator(batch_size: int = 16384, codec: str = "none") -> RecordAccumulator:
    return RecordAccumulator(batch_size, 1 << 20, codec, 5, 100, 120_000, True)


def _append_in_thread(acc: RecordAccumulator, partition: int) -> threading.Thread:
    t = threading.Thread(target=acc.append, args=("t", partition, TS, None, b"v", None, None, 1.0), daemon=True)
    t.start()
    t.join(2)
    return t


def test_append_to_an_open_batch_does_not_wait_for_the_accumulator_lock():
    """The Sender holds the accumulator-wide lock (buffer memory, incomplete batches) now and then;
    a send() to a partition with an open batch must not wait for it."""
    acc = _accumulator()
    acc.append("t", 0, TS, None, b"first", None, None, 1.0)
    with acc._lock:
        t = _append_in_thread(acc, 0)
        assert not t.is_alive(), "append waited for the accumulator-wide lock"
    assert acc.batches[("t", 0)][-1].record_count == 2


def test_append_waits_only_for_its_own_partition():
    """The Sender draining partition 0 (its deque lock held) holds up appends to partition 0 only."""
    acc = _accumulator()
    for p in (0, 1):
        acc.append("t", p, TS, None, b"first", None, None, 1.0)
    with acc.batches[("t", 0)].lock:
        other = _append_in_thread(acc, 1)
        assert not other.is_alive()
        same = threading.Thread(target=acc.append, args=("t", 0, TS, None, b"v", None, None, 1.0), daemon=True)
        same.start()
        same.join(0.2)
        assert same.is_alive()
    same.join(2)
    assert not same.is_alive()
    assert [acc.batches[("t", p)][-1].record_count for p in (0, 1)] == [2, 2]


def test_a_full_batch_is_closed_and_the_next_record_starts_a_new_one():
    acc = _accumulator(batch_size=200)
    results = [acc.append("t", 0, TS, None, b"x" * 40, None, None, 1.0) for _ in range(5)]  # 2 fit in 200 bytes
    dq = acc.batches[("t", 0)]
    assert [b.record_count for b in dq] == [2, 2, 1]
    assert [b.closed for b in dq] == [True, True, False]
    assert [r[2] for r in results] == [True, False, True, False, True]  # new batch created
    assert all(b.estimated_size() <= 200 for b in dq)
    assert results[-1][1]  # a full batch waits in the deque: the Sender should be woken


RECORDS = [
    (TS, None, b"value", None),
    (TS + 3, b"key", b"v" * 300, [("h", b"1"), ("n", None)]),
    (TS + 70_000, b"", None, None),
    (TS + 1, None, None, [("only", b"")]),
    (TS + 2, None, b"short path", None),  # key-less, header-less after the first: try_append's short path
    (TS + 2, None, b"w" * 200, []),
]


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_batch_bytes_equal_memory_records_builder(codec):
    batch = ProducerBatch("t", 0, 0.0, codec, 1 << 20)
    builder = MemoryRecordsBuilder(compression=compression.of(codec))
    for i, (ts, key, value, headers) in enumerate(RECORDS):
        future = batch.try_append(ts, key, value, headers, None)
        assert future is not None and future[1] == i
        builder.append(ts, key, value, headers)
    batch.set_producer_state(7, 2, 40, True)
    builder.set_producer_state(7, 2, 40, True)
    assert batch.records() == builder.build()
    assert batch.try_append(TS, None, b"late", None, None) is None  # built: closed for appends


def test_batch_write_limit_matches_memory_records_builder():
    for codec in ("none", "gzip"):
        limit = 400
        batch = ProducerBatch("t", 0, 0.0, codec, limit)
        builder = MemoryRecordsBuilder(compression=compression.of(codec), write_limit=limit)
        appended = 0
        while batch.try_append(TS, None, b"y" * 30, None, None) is not None:
            assert builder.try_append(TS, None, b"y" * 30) >= 0
            appended += 1
        assert builder.try_append(TS, None, b"y" * 30) < 0
        assert batch.is_full() == builder.is_full()
        assert appended == batch.record_count > 1


def test_negative_timestamp_is_rejected():
    batch = ProducerBatch("t", 0, 0.0)
    with pytest.raises(ValueError):
        batch.try_append(-5, None, b"v", None, None)
